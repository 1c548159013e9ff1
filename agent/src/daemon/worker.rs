//! The daemon's worker: one thread that owns the picture of the node.
//!
//! It makes a full pass at start and every `--interval` (jittered), and in
//! between applies the kernel's change events to the picture: an event on a
//! hook that cannot change a finding (a runtime's device program) updates the
//! inventory of that one cgroup; a socket-LB hook event re-judges the node
//! from the picture. Lost events, and events the picture cannot place, ask
//! for a full pass, at most one per `FULL_PASS_MIN_GAP`: no caller can make
//! it walk the tree back to back. Events come through one bounded queue, in
//! order, so events that arrive during a full pass are applied after it;
//! requests (`/audit`, `/events`, stop) through another that is always
//! served first, so a flood of events cannot make the daemon unanswerable.
//! Events the queue had no room for are counted in `Shared::events_lost`,
//! which no flood can drop: the worker reads it on every round and makes a
//! full pass. Re-reads of one cgroup that events ask for are folded into one
//! per batch.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use crossbeam_channel::{Receiver, select_biased};
use rand::Rng;

use super::history::{self, History, Recorded};
use super::picture::{Check, Effect, Picture, SHOWN_MAX};
use crate::bpf::AttachType;
use crate::bpf::programs;
use crate::bpf::query::{Attached, Support};
use crate::cgroup::root;
use crate::cli::Remediate;
use crate::findings::{self, Finding, Kind, Policy, Severity};
use crate::metrics::{Metrics, Trigger, Work};
use crate::remount::{Outcome, Target};
use crate::report::{Report, Status, Verdict};
use crate::scan::names::Namer;
use crate::scan::visit::{self, WalkContext};
use crate::scan::{self, ScanOptions};
use crate::snapshot::{Change, Event};
use crate::trace::Source;

/// Without the tree, full passes asked for by events are also at least
/// this many times what the last one took apart (at most a twentieth of
/// the worker's time).
const UNTRACKED_PASS_SHARE: u32 = 20;
/// Full passes asked for by events are at least this far apart.
pub const FULL_PASS_MIN_GAP: Duration = Duration::from_secs(5);
/// How often the cgroup links are listed under syscall tracing: a link
/// whose last fd was closed ends without a bpf(2) call (the kernel-side
/// sources see that release).
const LINK_SWEEP: Duration = Duration::from_secs(5);
/// The reading fallback's attachment sweep: at most a hundredth of the
/// worker's time (its period is a hundred times what the last sweep took),
/// between these bounds (the upper one is also capped at --interval).
const SWEEP_MIN: Duration = Duration::from_secs(2);
const SWEEP_MAX: Duration = Duration::from_secs(8);
const SWEEP_SHARE: u32 = 100;
/// The reading fallback reads a new cgroup again this long after it
/// appears: runtimes attach their device programs right after the mkdir.
const NEW_CGROUP_READ: Duration = Duration::from_secs(1);
/// The hooks a new cgroup is read again on: the device filter runtimes
/// (runc, crun) attach right after the mkdir.
static NEW_CGROUP_HOOKS: std::sync::LazyLock<[AttachType; 1]> =
    std::sync::LazyLock::new(|| [AttachType::from_name("device").expect("the device hook")]);
/// The longest the worker reads new cgroups again before it looks at what
/// else is due.
const READ_BUDGET: Duration = Duration::from_millis(100);
/// New cgroups read that way per second at most; past this the next sweep,
/// brought forward, finds them all in one pass: each read waits on the
/// kernel's cgroup_mutex, which a pod making cgroups without pause keeps
/// busy (a mkdir 4,000 levels down holds it for milliseconds).
const NEW_CGROUPS_QUEUED: usize = 8;
/// What no event reports is read again before a judgement, at most this
/// often: the CNI agents (a CNI agent that starts or stops changes
/// leftovers and configured-but-absent findings) and PID 1's cgroup2
/// mounts (the cause of a misattachment). A judgement that comes sooner is
/// made again once they are read.
const NODE_STATE_EVERY: Duration = Duration::from_secs(2);
/// Retry delay while no full pass has succeeded yet (e.g. the root is not there).
const RETRY: Duration = Duration::from_secs(1);
/// At most one remediation per mount path in this window.
const REMEDIATION_EVERY: Duration = Duration::from_secs(300);
/// Messages handled before the picture's findings are judged again: a burst
/// is folded into one judgement.
const BATCH: usize = 256;
/// Judgements asked for by events are spaced so that judging takes at most
/// 1/JUDGE_SHARE of a core: judging costs the size of the tree (every pod's
/// coverage), and a node where containers start all the time would
/// otherwise judge on every start. The gap is JUDGE_SHARE times what the
/// last judgement took (microseconds on a small node, so a change is judged
/// at once), never more than JUDGE_GAP_MAX; the first change after a quiet
/// spell is judged at once.
const JUDGE_SHARE: u32 = 50;
const JUDGE_GAP_MAX: Duration = Duration::from_millis(200);

/// What the worker is asked, ahead of any event.
pub enum Msg {
    /// Render the latest report as JSON (`/audit`).
    Render(tokio::sync::oneshot::Sender<Option<Bytes>>),
    /// Render the recent events as JSON (`/events`).
    Events(tokio::sync::oneshot::Sender<Bytes>),
    /// Look at `Shared::events_lost` now.
    Wake,
    Stop,
}

/// What the worker and the HTTP side share.
pub struct Shared {
    pub metrics: Metrics,
    /// A full pass has completed.
    pub ready: AtomicBool,
    /// Unix time of the last completed full pass.
    pub last_success: AtomicI64,
    /// Unix time the worker last came round its loop: a worker stuck in a
    /// read (or anything else) stops it, and /healthz then fails so the
    /// kubelet restarts the agent.
    pub heartbeat: AtomicI64,
    /// Events lost so far: in the kernel's ring, or with no room in the
    /// worker's queue (stored by the event reader).
    pub events_lost: AtomicU64,
    /// Why the last audit could not see the whole node (no hostPID, a
    /// namespaced cgroup view): /readyz says so.
    pub incomplete: std::sync::Mutex<Option<String>>,
}

impl Shared {
    pub fn new(kernel: &str) -> Shared {
        Shared {
            metrics: Metrics::new(kernel),
            ready: AtomicBool::new(false),
            last_success: AtomicI64::new(0),
            heartbeat: AtomicI64::new(unix_now()),
            events_lost: AtomicU64::new(0),
            incomplete: std::sync::Mutex::new(None),
        }
    }

    /// Records whether the last judgement saw the whole node.
    pub fn set_incomplete(&self, why: Option<String>) {
        *self.incomplete.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    /// Why the view is incomplete, if it is.
    pub fn incomplete(&self) -> Option<String> {
        self.incomplete.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Why the worker counts as stuck at `now` (Unix seconds), if it does.
    pub fn stuck(&self, now: i64) -> Option<String> {
        let age = now.saturating_sub(self.heartbeat.load(Ordering::Relaxed));
        (age > STUCK_AFTER.as_secs() as i64).then(|| {
            format!("the audit worker has made no progress for {age} s (more than {} s)", STUCK_AFTER.as_secs())
        })
    }
}

/// The worker comes round its loop at least this often, even with nothing to do ...
const HEARTBEAT: Duration = Duration::from_secs(10);
/// ... and counts as stuck when it has not for this long (a full pass over
/// the largest trees takes a few seconds).
pub const STUCK_AFTER: Duration = Duration::from_secs(120);

/// What the worker needs from the command line.
pub struct Config {
    pub scan: ScanOptions,
    pub policy: Policy,
    pub interval: Duration,
    pub remediate: Remediate,
    /// Where attachment changes come from between full passes.
    pub source: Source,
    /// The largest tree kept (`--max-cgroups`).
    pub max_cgroups: usize,
}

/// The reading fallback's schedule: the attachment sweep, and new cgroups
/// to read again.
struct Reading {
    next_sweep: Instant,
    /// When the last sweep ended.
    swept: Instant,
    /// New cgroups queued in the current second, and when it began.
    queued: (Instant, usize),
    period: Duration,
    new_cgroups: VecDeque<(Instant, u64)>,
}

impl Reading {
    fn new(interval: Duration) -> Reading {
        Reading {
            next_sweep: Instant::now() + SWEEP_MIN,
            swept: Instant::now(),
            queued: (Instant::now(), 0),
            period: SWEEP_MIN.min(interval),
            new_cgroups: VecDeque::new(),
        }
    }

    /// The next period: a hundred times what the last sweep took.
    fn took(&mut self, cost: Duration, interval: Duration) {
        self.period = cost.saturating_mul(SWEEP_SHARE).clamp(SWEEP_MIN, SWEEP_MAX.max(SWEEP_MIN)).min(interval);
        self.swept = Instant::now();
        self.next_sweep = self.swept + self.period;
    }

    /// Queues a new cgroup to read again at `at`, unless more than
    /// `NEW_CGROUPS_QUEUED` were made this second: then the next sweep is
    /// brought forward to find them all in one pass.
    fn read_new(&mut self, at: Instant, id: u64) {
        let now = Instant::now();
        if now.duration_since(self.queued.0) >= NEW_CGROUP_READ {
            self.queued = (now, 0);
        }
        self.queued.1 += 1;
        if self.queued.1 <= NEW_CGROUPS_QUEUED {
            self.new_cgroups.push_back((at, id));
        } else {
            self.sweep_by(at);
        }
    }

    /// The next sweep at `at` if it would come later (never sooner than
    /// the shortest period after the last).
    fn sweep_by(&mut self, at: Instant) {
        self.next_sweep = self.next_sweep.min(at.max(self.swept + SWEEP_MIN));
    }

    fn due(&self) -> Instant {
        self.new_cgroups.front().map_or(self.next_sweep, |(at, _)| (*at).min(self.next_sweep))
    }
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// `interval` +-10%.
fn jittered(interval: Duration) -> Duration {
    let ms = interval.as_millis().min(u64::MAX as u128) as u64;
    Duration::from_millis(ms.saturating_mul(rand::rng().random_range(900..1100)) / 1000)
}

pub struct Worker {
    config: Config,
    shared: Arc<Shared>,
    picture: Option<Picture>,
    /// The audit root, open: single cgroups are re-read below it.
    root: Option<OwnedFd>,
    history: History,
    /// The number the next event gets.
    next_seq: u64,
    events_rendered: Option<(u64, Bytes)>,
    findings: Vec<Finding>,
    verdict: Option<Verdict>,
    last_fallback: Option<String>,
    last_full: Option<Instant>,
    /// What the last full pass took.
    last_pass_took: Duration,
    /// The last full pass kept no tree (more cgroups than --max-cgroups).
    untracked: bool,
    /// Whether the last sweep over a settled tree counted other cgroups
    /// than the picture holds.
    tree_differed: bool,
    next_interval: Instant,
    /// The next link sweep (syscall tracing only).
    next_sweep: Instant,
    /// The reading fallback's schedule (`Source::Reading` only).
    reading: Option<Reading>,
    /// When the CNI agents were last read, and a judgement waiting for the
    /// next read.
    agents_read: Instant,
    agents_due: Option<Instant>,
    /// A full pass asked for (and why), due at the instant given.
    asked: Option<(Instant, Trigger)>,
    rendered: Option<(u64, u64, Bytes)>,
    remediated: HashMap<String, Instant>,
    namer: Namer,
    /// `Shared::events_lost` when last looked at.
    lost_seen: u64,
    /// When the findings were last judged, what that took, and a
    /// judgement waiting for the gap to pass.
    judged: Instant,
    judge_cost: Duration,
    judge_due: Option<Instant>,
    /// Cgroups to read again at the end of the batch, by id: events whose
    /// cgroup came from the kernel's own objects need no check of their
    /// own, and a burst of them on one cgroup is one reading.
    pending_rereads: BTreeSet<u64>,
    /// (cgroup, program, hook) of links released or detached in this
    /// batch (`Check::Released`): no reading of the batch lists them.
    released: Vec<(u64, u32, AttachType)>,
}

impl Worker {
    pub fn new(config: Config, shared: Arc<Shared>) -> Worker {
        let namer = Namer::new(&config.scan.proc);
        let reading = (config.source == Source::Reading).then(|| Reading::new(config.interval));
        Worker {
            config,
            shared,
            picture: None,
            root: None,
            history: History::default(),
            next_seq: 1,
            events_rendered: None,
            findings: Vec::new(),
            verdict: None,
            last_fallback: None,
            last_full: None,
            last_pass_took: Duration::ZERO,
            untracked: false,
            tree_differed: false,
            next_interval: Instant::now(),
            next_sweep: Instant::now() + LINK_SWEEP,
            reading,
            agents_read: Instant::now(),
            agents_due: None,
            asked: Some((Instant::now(), Trigger::Startup)),
            rendered: None,
            remediated: HashMap::new(),
            namer,
            lost_seen: 0,
            judged: Instant::now(),
            judge_cost: Duration::ZERO,
            judge_due: None,
            pending_rereads: BTreeSet::new(),
            released: Vec::new(),
        }
    }

    /// Runs until told to stop (or the request queue closes).
    pub fn run(mut self, requests: Receiver<Msg>, events: Receiver<Event>) {
        let link_sweep = self.config.source == Source::Syscalls;
        let never = crossbeam_channel::never();
        let mut events = Some(events);
        loop {
            self.shared.heartbeat.store(unix_now(), Ordering::Relaxed);
            self.look_at_losses();
            let now = Instant::now();
            if link_sweep && self.next_sweep <= now {
                self.next_sweep = now + LINK_SWEEP;
                if self.sweep_links() {
                    self.judge();
                }
            }
            if self.reading.as_ref().is_some_and(|r| r.due() <= now) && self.read_what_is_due(now, events.as_ref()) {
                self.judge();
            }
            if self.agents_due.is_some_and(|at| at <= now) || self.judge_due.is_some_and(|at| at <= now) {
                self.judge();
            }
            let due = self.asked.map_or(self.next_interval, |(at, _)| at.min(self.next_interval));
            let due = self.judge_due.map_or(due, |at| due.min(at));
            let due = if link_sweep { due.min(self.next_sweep) } else { due };
            let due = self.reading.as_ref().map_or(due, |r| due.min(r.due()));
            let due = self.agents_due.map_or(due, |at| due.min(at));
            if due <= now {
                if self.asked.is_none_or(|(at, _)| at > now) && self.next_interval > now {
                    continue; // only a sweep or a read was due
                }
                let trigger = match self.asked {
                    Some((at, t)) if at <= now => t,
                    _ => Trigger::Interval,
                };
                let started = Instant::now();
                self.full_pass(trigger);
                self.shared.metrics.busy(Work::FullPass, started.elapsed());
                continue;
            }
            let mut judge = false;
            let wait = (due - now).min(HEARTBEAT);
            select_biased! {
                recv(requests) -> m => match m {
                    Ok(m) => if !self.on_request(m) { return },
                    Err(_) => return,
                },
                recv(events.as_ref().unwrap_or(&never)) -> e => match e {
                    Ok(e) => judge |= self.on_event(e),
                    // The reader is gone (it logged why): requests only.
                    Err(_) => events = None,
                },
                default(wait) => continue,
            }
            // What else waits, up to a batch, requests first.
            for _ in 1..BATCH {
                if let Ok(m) = requests.try_recv() {
                    if !self.on_request(m) {
                        return;
                    }
                } else if let Some(e) = events.as_ref().and_then(|rx| rx.try_recv().ok()) {
                    judge |= self.on_event(e);
                } else {
                    break;
                }
            }
            judge |= self.reread_pending();
            if judge {
                self.judge_soon();
            }
        }
    }

    /// Judges now, or once the gap has passed since the last judgement.
    fn judge_soon(&mut self) {
        let at = self.judged + (self.judge_cost * JUDGE_SHARE).min(JUDGE_GAP_MAX);
        if Instant::now() >= at {
            self.judge();
        } else {
            self.judge_due = Some(at);
        }
    }

    /// Serves a request; false on Stop.
    fn on_request(&mut self, m: Msg) -> bool {
        match m {
            Msg::Stop => return false,
            Msg::Wake => self.look_at_losses(),
            Msg::Render(reply) => {
                // The picture as of every event applied so far.
                if self.reread_pending() || self.judge_due.is_some() {
                    self.judge();
                }
                let _ = reply.send(self.render());
            }
            Msg::Events(reply) => {
                let _ = reply.send(self.render_events());
            }
        }
        true
    }

    /// Events lost since the last look ask for a full pass.
    fn look_at_losses(&mut self) {
        let lost = self.shared.events_lost.load(Ordering::Relaxed);
        if lost > self.lost_seen {
            self.lost_seen = lost;
            self.shared.metrics.events_lost(lost);
            self.ask_full_pass(Trigger::EventsLost);
        }
    }

    fn ask_full_pass(&mut self, trigger: Trigger) {
        let gap = if self.untracked {
            FULL_PASS_MIN_GAP.max(self.last_pass_took * UNTRACKED_PASS_SHARE)
        } else {
            FULL_PASS_MIN_GAP
        };
        let earliest = self.last_full.map_or_else(Instant::now, |t| t + gap);
        if self.asked.is_none_or(|(at, _)| earliest < at) {
            self.asked = Some((earliest, trigger));
        }
    }

    /// Applies one event; true when the findings may have changed.
    fn on_event(&mut self, mut e: Event) -> bool {
        let started = Instant::now();
        tracing::debug!(event = ?e.change, pid = e.pid, comm = %e.comm, "kernel event");
        if let Some(cmd) = e.change.command() {
            self.shared.metrics.attach_event(cmd, e.change.attach_type());
        }
        e.seq = self.next_seq;
        self.next_seq += 1;
        let path = |p: &Option<Picture>, id: Option<u64>| p.as_ref().and_then(|p| p.path_within(id?, SHOWN_MAX));
        let mut recorded = Recorded {
            cgroup: path(&self.picture, e.change.cgroup_id()),
            caller_cgroup: path(&self.picture, Some(e.caller_cgroup_id)),
            event: e,
            effect: "nothing",
        };
        let (effect, judge) = self.apply(&recorded.event);
        recorded.effect = effect;
        if recorded.cgroup.is_none() {
            // A cgroup just made has its path only now.
            recorded.cgroup = path(&self.picture, recorded.event.change.cgroup_id());
        }
        self.history.record(recorded);
        self.shared.metrics.busy(Work::Event, started.elapsed());
        judge
    }

    fn apply(&mut self, e: &Event) -> (&'static str, bool) {
        let Some(picture) = self.picture.as_mut() else { return ("nothing", false) };
        match picture.apply(e) {
            Effect::Nothing => ("nothing", false),
            Effect::Applied { findings } => {
                self.shared.metrics.incremental_update();
                // The reading fallback reads a new cgroup again shortly:
                // runtimes attach their device programs right after mkdir.
                if let (Some(r), Change::CgroupMade { cgroup_id, .. }) = (self.reading.as_mut(), &e.change) {
                    r.read_new(Instant::now() + NEW_CGROUP_READ, *cgroup_id);
                }
                ("applied", findings)
            }
            Effect::Unplaced => {
                self.ask_full_pass(Trigger::Unplaced);
                ("full_pass", false)
            }
            Effect::Reread { cgroup_id, programs, check } => {
                if !programs.is_empty() {
                    self.learn_programs(&programs);
                }
                if check == Check::None {
                    self.pending_rereads.insert(cgroup_id);
                    return ("reread", false);
                }
                // A reading that must bear this event out is made now, of
                // the hook the call named only; the rest of the cgroup (every
                // hook, its processes) is read once per batch with its other
                // re-reads. A busy cgroup's attach and detach calls each cost
                // one query then, not one per hook and its processes.
                if let Check::Released { prog_id, hook } = check {
                    self.released.push((cgroup_id, prog_id, hook));
                }
                let hook = match (check, e.change.attach_type()) {
                    (Check::Holds { hook, .. } | Check::Released { hook, .. }, _) | (Check::Removes, Some(hook)) => {
                        Some([hook])
                    }
                    _ => None,
                };
                let findings = self.read_hooks(cgroup_id, check, hook.as_ref().map(|h| &h[..]), false);
                if hook.is_some() {
                    self.pending_rereads.insert(cgroup_id);
                } else {
                    self.pending_rereads.remove(&cgroup_id);
                }
                ("reread", findings)
            }
        }
    }

    /// The recent events as JSON, rendered again only when one arrived.
    fn render_events(&mut self) -> Bytes {
        let last = self.next_seq;
        if let Some((seq, bytes)) = &self.events_rendered
            && *seq == last
        {
            return bytes.clone();
        }
        #[derive(serde::Serialize)]
        struct Page<'a> {
            /// Events kept: the most recent, at most `capacity`.
            capacity: usize,
            /// Events received since start (older ones are dropped).
            received: u64,
            events: Vec<&'a Recorded>,
        }
        let page = Page { capacity: history::KEPT, received: last - 1, events: self.history.recent().collect() };
        let mut out = serde_json::to_vec_pretty(&page).unwrap_or_default();
        out.push(b'\n');
        let bytes = Bytes::from(out);
        self.events_rendered = Some((last, bytes.clone()));
        bytes
    }

    /// Programs an event named that the picture does not know yet.
    fn learn_programs(&mut self, ids: &[u32]) {
        let Some(picture) = self.picture.as_mut() else { return };
        let mut table: std::collections::BTreeMap<u32, programs::Program> =
            ids.iter().filter_map(|&id| programs::program_by_id(id).ok().flatten()).map(|p| (p.id, p)).collect();
        let found: Vec<u32> = table.keys().copied().collect();
        let skipped = programs::resolve_full_names(&mut table, found);
        self.shared.metrics.objects_skipped("btf", skipped);
        picture.add_programs(table.into_values());
    }

    /// Reads every hook of one cgroup again and puts what the kernel lists
    /// in the picture; true when the findings may have changed. When the
    /// reading does not bear out the event that asked for it (`check`), a
    /// full pass follows: the event was about another cgroup.
    /// Reads the cgroups events asked for; true when the findings may
    /// have changed.
    fn reread_pending(&mut self) -> bool {
        if self.pending_rereads.is_empty() {
            self.released.clear();
            return false;
        }
        let started = Instant::now();
        let mut findings = false;
        for id in std::mem::take(&mut self.pending_rereads) {
            findings |= self.reread(id, Check::None);
        }
        self.released.clear();
        self.shared.metrics.busy(Work::Reread, started.elapsed());
        findings
    }

    fn reread(&mut self, cgroup_id: u64, check: Check) -> bool {
        self.read_hooks(cgroup_id, check, None, true)
    }

    /// Reads `only` these hooks of one cgroup again (all when `None`), and
    /// its processes when `processes` asks and a socket-LB hook is read.
    fn read_hooks(&mut self, cgroup_id: u64, check: Check, only: Option<&[AttachType]>, processes: bool) -> bool {
        let (Some(picture), Some(root)) = (self.picture.as_mut(), self.root.as_ref()) else { return false };
        let snap = picture.last();
        let hooks: Vec<AttachType> = AttachType::all()
            .filter(|t| !snap.unsupported_attach_types.contains(t))
            .filter(|t| only.is_none_or(|o| o.contains(t)))
            .collect();
        let ctx = WalkContext { root_id: snap.root.cgroup_id, proc: &self.config.scan.proc };
        // By id (or name by name from the root): neither the path's length
        // nor its bytes stand in the way.
        let Some(names) = picture.names(cgroup_id) else { return false };
        let read = visit::open_by_id(root.as_fd(), cgroup_id, &names)
            .and_then(|fd| visit::read_cgroup(fd.as_fd(), cgroup_id, &hooks, processes, &ctx));
        match read {
            Ok((mut attached, procs)) => {
                attached.retain(|a| {
                    !self.released.iter().any(|&(c, p, h)| c == cgroup_id && a.prog_id == p && a.attach_type == h)
                });
                // Programs attached by calls whose events named none (or
                // another): what the kernel lists must have a name too.
                // ... or known only by the kernel's 15 bytes (loaded before
                // the full pass, attached only now).
                let unknown: Vec<u32> = attached
                    .iter()
                    .map(|a| a.prog_id)
                    .filter(|id| snap.programs.get(id).is_none_or(|p| p.name_unresolved()))
                    .collect();
                if !unknown.is_empty() {
                    self.learn_programs(&unknown);
                }
                let Some(picture) = self.picture.as_mut() else { return false };
                let (removed, added, findings) = picture.set_hook(
                    cgroup_id,
                    &hooks,
                    &attached,
                    // Read with the socket-LB hooks only (see read_cgroup).
                    (processes && hooks.iter().any(|t| t.is_socket_lb())).then_some(procs),
                );
                let unconfirmed = !check.holds(&removed, &attached);
                let snap = picture.last();
                let at_root = cgroup_id == snap.root.cgroup_id;
                for (a, delta) in removed.iter().map(|a| (a, -1)).chain(added.iter().map(|a| (a, 1))) {
                    let owner = findings::owner_of(snap, a.prog_id, Some(a.attach_type), &self.config.policy);
                    self.shared.metrics.attachment(a.attach_type, owner, at_root, delta);
                }
                // The largest count per hook: raised at once; counted again
                // over the picture only when the cgroup that held it shrank.
                for &t in &hooks {
                    let n = |v: &[Attached]| v.iter().filter(|a| a.attach_type == t).count() as i64;
                    let (old, new, max) = (n(&removed), n(&added), self.shared.metrics.hook_programs_max(t));
                    if new > max {
                        self.shared.metrics.set_hook_programs_max(t, new);
                    } else if old == max && new < old {
                        self.shared.metrics.set_hook_programs_max(t, picture.most_on(t) as i64);
                    }
                }
                self.shared.metrics.incremental_update();
                if unconfirmed {
                    tracing::debug!(cgroup_id, ?check, "a re-read did not bear out its event; a full pass will");
                    self.ask_full_pass(Trigger::Unplaced);
                }
                findings
            }
            // Removed meanwhile: its rmdir event follows.
            Err(err) if err.gone => false,
            Err(err) => {
                tracing::debug!(cgroup_id, error = %err.error, "cannot read a cgroup again; a full pass will");
                self.ask_full_pass(Trigger::Unplaced);
                false
            }
        }
    }

    /// Lists the cgroup links and reads again the cgroups whose links
    /// changed; true when the findings may have changed.
    fn sweep_links(&mut self) -> bool {
        let Some(picture) = self.picture.as_mut() else { return false };
        let links = match programs::cgroup_links() {
            Ok(l) => {
                self.shared.metrics.objects_skipped("link", l.skipped);
                l.cgroup
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot list cgroup links");
                return false;
            }
        };
        let touched = picture.reconcile_links(links);
        let mut judge = false;
        for id in touched {
            judge |= self.reread(id, Check::None);
        }
        judge
    }

    /// The reading fallback: new cgroups whose moment has come are read
    /// again, and when the sweep is due every attachment is compared with
    /// the picture; what differs is read again. True when the findings may
    /// have changed.
    fn read_what_is_due(&mut self, now: Instant, events: Option<&Receiver<Event>>) -> bool {
        let mut judge = false;
        let started = Instant::now();
        let mut read = false;
        // For at most READ_BUDGET at a time: a pod making cgroups without
        // pause (each read waits on the kernel's cgroup_mutex, which its
        // mkdirs hold) must not keep a due full pass from its turn.
        while started.elapsed() < READ_BUDGET {
            let Some(r) = self.reading.as_mut() else { break };
            if r.new_cgroups.front().is_none_or(|(at, _)| *at > now) {
                break;
            }
            let Some((_, id)) = r.new_cgroups.pop_front() else { break };
            // What runtimes attach as they make a container's cgroup: one
            // query (each waits on cgroup_mutex), not one per hook; the
            // sweep reads the rest.
            judge |= self.read_hooks(id, Check::None, Some(&NEW_CGROUP_HOOKS[..]), true);
            read = true;
        }
        if read {
            self.shared.metrics.busy(Work::Reread, started.elapsed());
        }
        if self.reading.as_ref().is_some_and(|r| r.next_sweep <= now) {
            judge |= self.sweep_attachments(events);
        }
        judge
    }

    /// Applies the events waiting now (not those that keep coming: a pod
    /// making cgroups without pause must not hold the worker here); true
    /// when the findings may have changed.
    fn apply_waiting(&mut self, events: Option<&Receiver<Event>>) -> bool {
        let Some(rx) = events else { return false };
        let mut judge = false;
        for _ in 0..rx.len() {
            match rx.try_recv() {
                Ok(e) => judge |= self.on_event(e),
                Err(_) => break,
            }
        }
        judge
    }

    /// One attachment sweep: the cgroups whose own programs differ from
    /// the picture's are read again; a tree that differs (cgroups the
    /// picture does not know, or lacks) asks for a full pass, when two
    /// sweeps in a row over a settled tree say so.
    fn sweep_attachments(&mut self, events: Option<&Receiver<Event>>) -> bool {
        let started = Instant::now();
        let (Some(picture), Some(root)) = (self.picture.as_ref(), self.root.as_ref()) else {
            if let Some(r) = self.reading.as_mut() {
                r.took(Duration::ZERO, self.config.interval);
            }
            return false;
        };
        let tree_changes = picture.tree_changes();
        let snap = picture.last();
        let support = Support {
            supported: AttachType::all().filter(|t| !snap.unsupported_attach_types.contains(t)).collect(),
            unsupported: Vec::new(),
        };
        let in_kernel = self.config.scan.walk != scan::WalkMethod::Syscalls;
        let swept = scan::sweep::sweep(root.as_fd(), snap.root.cgroup_id, &support, in_kernel);
        let mut judge = false;
        let mut drained = Duration::ZERO;
        match swept {
            Ok(sweep) => {
                self.shared.metrics.attachment_sweep();
                if !picture.tracked() {
                    // Nothing to read again by path: any change is a full pass.
                    let links_differ =
                        programs::cgroup_links().is_ok_and(|l| l.cgroup.len() != picture.last().cgroup_links.len());
                    if sweep.cgroups != picture.cgroups()
                        || links_differ
                        || !picture.differing(&sweep.attached).is_empty()
                    {
                        self.ask_full_pass(Trigger::Unplaced);
                    }
                    if let Some(r) = self.reading.as_mut() {
                        r.took(started.elapsed(), self.config.interval);
                        self.shared.metrics.set_sweep_period(r.period);
                    }
                    self.shared.metrics.busy(Work::Sweep, started.elapsed());
                    return false;
                }
                // cgroups made or removed while the sweep ran: their events
                // are applied first (their time is the events', not the
                // sweep's), and a count that moved meanwhile proves
                // nothing: under container churn nearly every sweep would
                // ask for a full pass otherwise. An event still on its way
                // can make one count differ; a tree that really differs
                // does so on the next sweep too.
                let applying = Instant::now();
                judge |= self.apply_waiting(events);
                drained = applying.elapsed();
                let Some(picture) = self.picture.as_ref() else { return judge };
                let mut differ = picture.differing(&sweep.attached);
                if picture.tree_changes() == tree_changes {
                    let differs = sweep.cgroups != picture.cgroups();
                    if differs {
                        tracing::debug!(swept = sweep.cgroups, known = picture.cgroups(), "the sweep saw another tree");
                    }
                    if differs && self.tree_differed {
                        self.ask_full_pass(Trigger::Unplaced);
                    }
                    self.tree_differed = differs;
                }
                // Links are named on their attachments: what the kernel
                // lists now, and the cgroups whose links changed.
                if let (Ok(links), Some(picture)) = (programs::cgroup_links(), self.picture.as_mut()) {
                    self.shared.metrics.objects_skipped("link", links.skipped);
                    differ.extend(picture.reconcile_links(links.cgroup));
                }
                differ.sort_unstable();
                differ.dedup();
                for id in differ {
                    judge |= self.reread(id, Check::None);
                }
            }
            Err(e) => tracing::debug!(error = %e, "the attachment sweep failed; the full pass on --interval remains"),
        }
        let cost = started.elapsed().saturating_sub(drained);
        if let Some(r) = self.reading.as_mut() {
            r.took(cost, self.config.interval);
            self.shared.metrics.set_sweep_period(r.period);
        }
        self.shared.metrics.busy(Work::Sweep, cost);
        judge
    }

    /// Looks up the names of the pods and containers the findings are about.
    /// Judges the picture, naming what the findings are about: judged
    /// again only when a name changed (never on a node without findings).
    fn name(namer: &mut Namer, picture: &mut Picture, policy: &Policy) -> Vec<Finding> {
        let found = findings::evaluate(picture.snapshot(), policy);
        if picture.set_names(namer.lookup(&findings::names_wanted(&found))) {
            findings::evaluate(picture.snapshot(), policy)
        } else {
            found
        }
    }

    /// Judges the picture again and publishes the findings.
    fn judge(&mut self) {
        let started = Instant::now();
        self.evaluate_and_publish();
        self.judged = Instant::now();
        self.judge_cost = self.judged - started;
        self.shared.metrics.busy(Work::Judge, self.judge_cost);
    }

    fn evaluate_and_publish(&mut self) {
        self.judge_due = None;
        let Some(picture) = self.picture.as_mut() else { return };
        // The CNI agents and mounts as they are now, read at most every NODE_STATE_EVERY:
        // a judgement that comes sooner is made again once they are read.
        let now = Instant::now();
        if now.duration_since(self.agents_read) >= NODE_STATE_EVERY {
            let mut errors = Vec::new();
            let budget = scan::deadline::Budget::new(scan::deadline::READ_DEADLINE);
            picture.set_cni_processes(scan::host::cni_processes(&self.config.scan.proc, &budget, &mut errors));
            let root = picture.last().root.clone();
            picture.set_mounts(scan::host::pid1_cgroup_mounts(&self.config.scan.proc, &root, &mut errors));
            self.agents_read = now;
            self.agents_due = None;
        } else {
            self.agents_due = Some(self.agents_read + NODE_STATE_EVERY);
        }
        self.history.prune(picture.snapshot());
        picture.set_events(self.history.attachers());
        self.findings = Self::name(&mut self.namer, picture, &self.config.policy);
        self.shared.metrics.findings(&self.findings);
        let incomplete = findings::incomplete(picture.snapshot());
        let status = if !self.findings.is_empty() {
            Status::Problem
        } else if incomplete.is_none() {
            Status::Ok
        } else {
            Status::Incomplete
        };
        self.shared.set_incomplete(incomplete);
        let critical = self.findings.iter().filter(|f| f.severity == Severity::Critical).count();
        let report_verdict = Verdict { status, findings: self.findings.len(), critical };
        if self.verdict != Some(report_verdict) {
            tracing::info!(
                findings = report_verdict.findings,
                critical = report_verdict.critical,
                "findings changed (kernel event): {:?}",
                report_verdict.status
            );
        }
        self.verdict = Some(report_verdict);
    }

    fn full_pass(&mut self, trigger: Trigger) {
        self.asked = None;
        self.tree_differed = false;
        let started = Instant::now();
        self.last_full = Some(started);
        let mut opts = self.config.scan.clone();
        opts.tree_max = self.config.max_cgroups;
        opts.name_cgroups = self.history.attacher_cgroups();
        // The pass makes the next tree: never two at once.
        if let Some(p) = self.picture.as_mut() {
            p.drop_tree();
        }
        let result = scan::scan(&opts);
        self.last_pass_took = started.elapsed();
        let seconds = self.last_pass_took.as_secs_f64();
        let snap = match result {
            Ok(s) => s,
            Err(e) => {
                self.shared.metrics.audit_failed(trigger, seconds);
                tracing::warn!(trigger = trigger.as_str(), error = %format!("{e:#}"), "audit failed");
                let wait = if self.shared.ready.load(Ordering::Relaxed) {
                    jittered(self.config.interval)
                } else {
                    RETRY.min(self.config.interval)
                };
                self.next_interval = Instant::now() + wait;
                return;
            }
        };
        // Single cgroups are re-read below the root this pass found; it
        // must still be that directory.
        self.root =
            root::open_cgroup_dir(&snap.root.path).ok().filter(|(_, id)| *id == snap.root.cgroup_id).map(|(fd, _)| fd);
        self.agents_read = Instant::now();
        self.agents_due = None;
        let untracked = snap.tree.is_none();
        if untracked != self.untracked {
            if untracked {
                tracing::warn!(
                    cgroups = snap.cgroups_scanned,
                    max = self.config.max_cgroups,
                    "more cgroups than --max-cgroups: no tree is kept; changes are found by full passes only"
                );
            } else {
                tracing::info!(cgroups = snap.cgroups_scanned, "cgroups within --max-cgroups again: the tree is kept");
            }
            self.untracked = untracked;
            self.shared.metrics.set_degraded("cgroup_count", untracked);
        }
        let mut picture = Picture::new(snap);
        picture.limit_tree(self.config.max_cgroups);
        self.history.prune(picture.snapshot());
        picture.set_events(self.history.attachers());
        let _ = Self::name(&mut self.namer, &mut picture, &self.config.policy);
        let report = Report::new(picture.snapshot(), &self.config.policy);
        self.shared.metrics.audit_done(trigger, seconds, &report, unix_now());
        if report.view.reason != self.shared.incomplete() {
            match &report.view.reason {
                Some(why) => tracing::warn!("the audit cannot see the whole node: {why}"),
                None => tracing::info!("the audit sees the whole node again"),
            }
        }
        self.shared.set_incomplete(report.view.reason.clone());
        let summary = report.summary();
        if self.verdict != Some(report.verdict()) {
            tracing::info!(trigger = trigger.as_str(), findings = report.findings.len(), "{summary}");
        } else {
            tracing::debug!(trigger = trigger.as_str(), "{summary}");
        }
        if report.walk.fallback_reason != self.last_fallback {
            if let Some(reason) = &report.walk.fallback_reason {
                tracing::warn!(reason = %reason, "reading cgroups by syscalls: the in-kernel walk is unavailable");
            }
            self.last_fallback = report.walk.fallback_reason.clone();
        }
        self.verdict = Some(report.verdict());
        self.findings = report.findings.clone();
        self.picture = Some(picture);
        // The pass's own allocations (the walk, the last picture) go back
        // to the kernel, not into the next pass's peak.
        crate::bpf::sys::release_free_heap();
        self.rendered = None;
        self.shared.last_success.store(unix_now(), Ordering::Relaxed);
        self.shared.ready.store(true, Ordering::Relaxed);
        self.remediate(&report);
        self.next_interval = Instant::now() + jittered(self.config.interval);
    }

    /// The report of the picture as JSON, rendered again only when the
    /// picture changed since.
    fn render(&mut self) -> Option<Bytes> {
        let picture = self.picture.as_mut()?;
        let key = (picture.generation(), self.next_seq);
        if let Some((g, n, bytes)) = &self.rendered
            && (*g, *n) == key
        {
            return Some(bytes.clone());
        }
        picture.set_events(self.history.attachers());
        let mut out = Vec::new();
        Report::new(picture.snapshot(), &self.config.policy).write_json(&mut out).ok()?;
        let bytes = Bytes::from(out);
        self.rendered = Some((key.0, key.1, bytes.clone()));
        Some(bytes)
    }

    /// Plans (and with `--remediate on`, applies) the remount of each CNI
    /// mount the audit found rooted below the root, at most once per path
    /// per window. The remount runs in the single-threaded helper process.
    fn remediate(&mut self, report: &Report) {
        if self.config.remediate == Remediate::Off {
            return;
        }
        // Only the CNIs' own mounts: the finding names the CNI that owns one.
        let paths: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.kind == Kind::CgroupMountNotRoot && f.owner.is_some_and(|o| o.is_cni()))
            .filter_map(|f| f.mount_point.clone())
            .collect();
        for path in paths {
            if self.remediated.get(&path).is_some_and(|t| t.elapsed() < REMEDIATION_EVERY) {
                continue;
            }
            self.remediated.insert(path.clone(), Instant::now());
            let apply = self.config.remediate == Remediate::On;
            let (outcome, detail) = match Target::open(&self.config.scan.proc, 1)
                .map(|t| t.nested_node(self.config.scan.nested_node))
                .and_then(|t| t.remediate(std::path::Path::new(&path), apply))
            {
                Err(e) => (Outcome::Failed, e.to_string()),
                Ok(r) => match (r.after, r.error) {
                    (Some(after), _) => (r.outcome, format!("{}; now {after}", r.plan.reason)),
                    (_, Some(e)) => (r.outcome, format!("{}; {e}", r.plan.reason)),
                    _ => (r.outcome, r.plan.reason),
                },
            };
            self.shared.metrics.remediation("remount", outcome.as_str());
            match outcome {
                Outcome::Failed | Outcome::Refused => {
                    tracing::error!(action = "remount", path, result = outcome.as_str(), detail, "remediation")
                }
                _ => tracing::warn!(action = "remount", path, result = outcome.as_str(), detail, "remediation"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_without_progress_for_two_minutes_is_stuck() {
        let shared = Shared::new("6.18");
        let now = unix_now();
        assert_eq!(shared.stuck(now), None);
        shared.heartbeat.store(now - 119, Ordering::Relaxed);
        assert_eq!(shared.stuck(now), None);
        shared.heartbeat.store(now - 121, Ordering::Relaxed);
        assert!(shared.stuck(now).unwrap().contains("no progress for 121 s"));
    }

    #[test]
    fn the_jitter_stays_within_ten_percent_and_never_overflows() {
        for _ in 0..100 {
            let j = jittered(Duration::from_secs(30));
            assert!(j >= Duration::from_secs(27) && j <= Duration::from_secs(33), "{j:?}");
        }
        let huge = jittered(Duration::MAX);
        assert!(huge > Duration::from_secs(1 << 40));
    }
}
