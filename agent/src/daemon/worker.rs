//! The daemon's worker: one thread that owns the picture of the node.
//!
//! It makes a full pass at start and every `--interval` (jittered), and in
//! between applies the kernel's change events to the picture: an event on a
//! hook that cannot change a finding (a runtime's device program) updates the
//! inventory of that one cgroup; a socket-LB hook event re-judges the node
//! from the picture. Lost events, and events the picture cannot place, ask
//! for a full pass, at most one per five seconds (`schedule.rs` keeps every
//! due time): no caller can make it walk the tree back to back. Events come through one bounded queue, in
//! order, so events that arrive during a full pass are applied after it;
//! requests (`/audit`, `/events`, stop) through another that is always
//! served first, so a flood of events cannot make the daemon unanswerable.
//! Events the queue had no room for are counted in `Shared::events_lost`,
//! which no flood can drop: the worker reads it on every round and makes a
//! full pass. Re-reads of one cgroup that events ask for are folded into one
//! per batch.
//!
//! This file is the loop and its dispatch; reading the node between full
//! passes is in `reread.rs`, the full pass, judging and rendering in
//! `publish.rs`, and remediation in `remediate.rs`.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use crossbeam_channel::{Receiver, select_biased};

use super::history::{History, Outcome, Recorded};
use super::picture::{Check, Effect, Picture, SHOWN_MAX};
use super::schedule::{Due, Schedule};
use crate::bpf::AttachType;
use crate::daemon::metrics::{Metrics, Work};
use crate::daemon::schedule::Trigger;
use crate::daemon::trace::Source;
use crate::event::{Change, Event};
use crate::findings::{Finding, Policy};
use crate::report::Verdict;
use crate::scan::ScanOptions;
use crate::scan::names::Namer;

mod publish;
mod remediate;
mod reread;

pub use remediate::Remediate;

/// Messages handled before the picture's findings are judged again: a burst
/// is folded into one judgement.
const BATCH: usize = 256;

/// What the worker is asked, ahead of any event.
pub enum Msg {
    /// Render the latest report as JSON (`/audit`).
    Render(tokio::sync::oneshot::Sender<Option<Bytes>>),
    /// Render the recent events as JSON (`/events`).
    Events(tokio::sync::oneshot::Sender<Bytes>),
    /// Look at `Shared::events_lost` now.
    Wake,
    /// rtnetlink said the node's links or tc filters changed.
    NetworkChanged,
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

/// The worker counts as stuck when it has not come round its loop (every
/// ten seconds at least) for this long (a full pass over the largest trees
/// takes a few seconds).
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

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// `interval` +-10%, so that the nodes of a fleet do not pass in step.
///
/// The spread need not be unpredictable, only differ between nodes and
/// passes: std's hash keys give it, read with GRND_INSECURE, which never
/// waits for the kernel's entropy pool. A cryptographic generator waits for
/// the pool on its first use; at boot, on a machine without a hardware RNG
/// (no RDRAND, no virtio-rng), the kernel then makes the entropy by timing
/// its own CPU: a second of system time in the worker, measured in the
/// matrix's x86_64 guests, once per boot, for a jitter.
fn jittered(interval: Duration) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let permille = 900 + RandomState::new().hash_one(0u8) % 200;
    let ms = interval.as_millis().min(u64::MAX as u128) as u64;
    Duration::from_millis(ms.saturating_mul(permille) / 1000)
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
    /// Every due time: full passes, sweeps, reads, judgements.
    schedule: Schedule,
    rendered: Option<(u64, u64, Bytes)>,
    namer: Namer,
    /// `Shared::events_lost` when last looked at.
    lost_seen: u64,
    /// Cgroups to read again at the end of the batch, by id: events whose
    /// cgroup came from the kernel's own objects need no check of their
    /// own, and a burst of them on one cgroup is one reading.
    pending_rereads: BTreeSet<u64>,
    /// The pods' interfaces being read, off the worker (`read_interfaces`).
    interfaces_job: Option<std::thread::JoinHandle<crate::scan::net::Networks>>,
    /// What re-reads read of each hook holding programs, by revision:
    /// an unchanged hook is not read again (6.16+).
    revisions: crate::bpf::query::Revisions,
}

impl Worker {
    pub fn new(config: Config, shared: Arc<Shared>) -> Worker {
        let namer = Namer::new(&config.scan.proc);
        let schedule = Schedule::new(
            Instant::now(),
            config.interval,
            config.source == Source::Syscalls,
            // The sources that see no cgroup made or removed sweep the tree.
            matches!(config.source, Source::Reading | Source::Syscalls),
        );
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
            schedule,
            rendered: None,
            namer,
            lost_seen: 0,
            pending_rereads: BTreeSet::new(),
            interfaces_job: None,
            revisions: Default::default(),
        }
    }

    /// Runs until told to stop (or the request queue closes).
    pub fn run(mut self, requests: Receiver<Msg>, events: Receiver<Event>) {
        let never = crossbeam_channel::never();
        let mut events = Some(events);
        loop {
            self.shared.heartbeat.store(unix_now(), Ordering::Relaxed);
            self.look_at_losses();
            let now = Instant::now();
            let wait = match self.schedule.due(now) {
                Due::LinkSweep => {
                    if self.sweep_links() {
                        self.judge();
                    }
                    continue;
                }
                Due::Interfaces => {
                    if self.read_interfaces() {
                        self.judge();
                    }
                    continue;
                }
                Due::Read => {
                    if self.read_what_is_due(now, events.as_ref()) {
                        self.judge();
                    }
                    continue;
                }
                Due::Judge => {
                    self.judge();
                    continue;
                }
                Due::FullPass(trigger) => {
                    let started = Instant::now();
                    self.full_pass(trigger);
                    self.shared.metrics.busy(Work::FullPass, started.elapsed());
                    continue;
                }
                Due::Wait(wait) => wait,
            };
            let mut judge = false;
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
        if self.schedule.judge_soon(Instant::now()) {
            self.judge();
        }
    }

    /// Serves a request; false on Stop.
    fn on_request(&mut self, m: Msg) -> bool {
        match m {
            Msg::Stop => return false,
            Msg::Wake => self.look_at_losses(),
            Msg::NetworkChanged => self.schedule.network_changed(Instant::now()),
            Msg::Render(reply) => {
                // The picture as of every event applied so far.
                if self.reread_pending() || self.schedule.judgement_waiting() {
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
        self.schedule.ask_full_pass(Instant::now(), trigger);
    }

    /// Applies one event; true when the findings may have changed.
    fn on_event(&mut self, mut e: Event) -> bool {
        let started = Instant::now();
        tracing::debug!(event = ?e.change, pid = e.pid, comm = %e.comm, "kernel event");
        if let Some(cmd) = e.change.command() {
            self.shared.metrics.attach_event(cmd, e.change.attach_type());
        }
        // A cgroup made: its event names its parent and name; its id is
        // its directory's (0 while not found: the event changes nothing).
        if let Change::CgroupMade { cgroup_id: id @ 0, parent_id, name } = &mut e.change {
            *id = self.made_id(*parent_id, name).unwrap_or(0);
        }
        e.seq = self.next_seq;
        self.next_seq += 1;
        let path = |p: &Option<Picture>, id: Option<u64>| p.as_ref().and_then(|p| p.path_within(id?, SHOWN_MAX));
        let mut recorded = Recorded {
            cgroup: path(&self.picture, e.change.cgroup_id()),
            caller_cgroup: path(&self.picture, Some(e.caller_cgroup_id)),
            event: e,
            effect: Outcome::Nothing,
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

    /// A cgroup appeared: what comes after is scheduled (`Schedule::
    /// new_cgroup`; for a pod's own cgroup, `Schedule::pod_started`);
    /// false when it cannot be.
    fn cgroup_made(&mut self, id: u64) -> bool {
        let path = self.picture.as_ref().and_then(|p| p.path_within(id, SHOWN_MAX));
        if path.is_some_and(|p| crate::attribution::attribute(&p).pod_level) {
            self.schedule.pod_started(Instant::now(), self.config.policy.endpoint_grace);
        }
        self.schedule.new_cgroup(Instant::now(), id)
    }

    /// Applies event `e` to the picture: what was done, and whether the
    /// findings may have changed.
    fn apply(&mut self, e: &Event) -> (Outcome, bool) {
        let Some(picture) = self.picture.as_mut() else { return (Outcome::Nothing, false) };
        let effect = picture.apply(e);
        self.follow(effect, e.change.attach_type())
    }

    /// Does what an effect of the picture asks (`call_hook`: the hook the
    /// event's call named): what was done, and whether the findings may
    /// have changed.
    fn follow(&mut self, effect: Effect, call_hook: Option<AttachType>) -> (Outcome, bool) {
        match effect {
            Effect::Nothing => (Outcome::Nothing, false),
            Effect::Applied { findings } => {
                self.shared.metrics.incremental_update();
                (Outcome::Picture, findings)
            }
            Effect::Made { cgroup_id, findings } => {
                self.shared.metrics.incremental_update();
                if !self.cgroup_made(cgroup_id) {
                    self.ask_full_pass(Trigger::Unplaced);
                }
                (Outcome::Picture, findings)
            }
            Effect::Unplaced => {
                self.ask_full_pass(Trigger::Unplaced);
                (Outcome::FullPass, false)
            }
            Effect::Reread { cgroup_id, programs, check } => {
                if !programs.is_empty() {
                    self.learn_programs(&programs);
                }
                if check == Check::None {
                    self.pending_rereads.insert(cgroup_id);
                    return (Outcome::Reread, false);
                }
                // A reading that must bear this event out is made now, of
                // the hook the call named only; the rest of the cgroup (every
                // hook, its processes) is read once per batch with its other
                // re-reads. A busy cgroup's attach and detach calls each cost
                // one query then, not one per hook and its processes.
                // The release's event comes before the kernel takes the link
                // off the hook: a reading that lists it still is made again
                // (read_hooks, Picture::release_read).
                let hook = check.hook(call_hook).map(|h| [h]);
                let findings = self.read_hooks(cgroup_id, check, hook.as_ref().map(|h| &h[..]), false);
                if hook.is_some() {
                    self.pending_rereads.insert(cgroup_id);
                } else {
                    self.pending_rereads.remove(&cgroup_id);
                }
                (Outcome::Reread, findings)
            }
        }
    }
}

#[cfg(test)]
mod tests;
