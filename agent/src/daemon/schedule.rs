//! When the worker does what: every due time the daemon keeps, and the
//! next action for a given instant.
//!
//! Over 500 lines: every due time is weighed against the others in one
//! place (`due`); split, each rule would read shorter and their order
//! would be nowhere. The tests are in `schedule/tests.rs`.
//!
//! The split controller-rs makes between what to do and when to run again:
//! the worker (`worker.rs`) does the work and tells the schedule what it
//! did and when; the schedule answers what is due at `now`. Nothing here
//! reads a clock or the kernel, so every timing rule is a unit test with
//! literal instants.
//!
//! The rules:
//! - The worker asks `due` what to do next. Its round offers the link
//!   sweep, the pods' interfaces, the reads and a judgement, in that order
//!   and each once when due, then a full pass when one is due, else the
//!   wait; work still due after its turn waits for the next round.
//! - A full pass at start, then every `--interval` (jittered by the
//!   caller); while none has succeeded, one that fails is tried again
//!   after `RETRY`, doubled after each failure up to `RETRY_MAX` (a node
//!   whose tree cannot be read costs a pass a minute, not one a second).
//! - Full passes asked for by events (lost, unplaced) are at least
//!   `FULL_PASS_MIN_GAP` apart; without the tree, also at least
//!   `UNTRACKED_PASS_SHARE` times what the last pass took.
//! - Judgements asked for by events are `JUDGE_SHARE` times the last
//!   judgement's cost apart, at most `JUDGE_GAP_MAX`.
//! - The CNI agents and PID 1's mounts are read for a judgement at most
//!   every `NODE_STATE_EVERY`; a judgement sooner is made again then.
//! - Under syscall tracing, the cgroup links are listed every `LINK_SWEEP`.
//! - The node's network (its devices, its pods' interfaces, and the
//!   owners' pins that prove whose their programs are) is read every
//!   `INTERFACES` (tcx and netkit links make no event the daemon hooks), at
//!   once when rtnetlink says a link or a tc filter changed (never sooner
//!   than `NETWORK_CHANGE_GAP` after the last read),
//!   `NEW_CGROUP_READ` after a pod's cgroup appears, and once more as that
//!   pod's `--endpoint-grace` ends (`POD_READS_QUEUED` such reads at most).
//! - The reading fallback sweeps every `SWEEP_SHARE` times the last
//!   sweep's cost, within `SWEEP_MIN..=SWEEP_MAX` and `--interval`, and
//!   reads each new cgroup again `NEW_CGROUP_READ` after it appears, at
//!   most `NEW_CGROUPS_QUEUED` a second (then the sweep comes sooner).
//! - A mount path is remediated at most once per `REMEDIATION_EVERY`.
//! - The worker comes round its loop at least every `HEARTBEAT`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Why a full pass over the tree was run (the `trigger` label of
/// `cgaudit_audits_total`). Events that the picture can place update it
/// instead (`cgaudit_incremental_updates_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum Trigger {
    Startup,
    /// The safety net every --interval.
    Interval,
    /// The kernel dropped events (ring buffer full, or over budget).
    EventsLost,
    /// An event the picture could not place (a cgroup changed under it).
    Unplaced,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Full passes asked for by events are at least this far apart.
const FULL_PASS_MIN_GAP: Duration = Duration::from_secs(5);
/// Without the tree, full passes asked for by events are also at least
/// this many times what the last one took apart (at most a twentieth of
/// the worker's time).
const UNTRACKED_PASS_SHARE: u32 = 20;
/// Retry delay while no full pass has succeeded yet (e.g. the root is not
/// there), doubled after each failure in a row up to `RETRY_MAX`.
const RETRY: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How often the cgroup links are listed under syscall tracing: a link
/// whose last fd was closed ends without a bpf(2) call (the kernel-side
/// sources see that release).
const LINK_SWEEP: Duration = Duration::from_secs(5);
/// How often the pods' interfaces are read between full passes: a CNI's
/// program detached from a pod's interface is noticed within this.
pub const INTERFACES: Duration = Duration::from_secs(5);
/// While a read of the interfaces runs, how often it is looked at.
const INTERFACES_POLL: Duration = Duration::from_millis(100);
/// A change rtnetlink announced is read at once, but never sooner than this
/// after the last read: a pod with CAP_NET_ADMIN can change the node's
/// namespace without pause, and then the reads are 2.5 times the periodic
/// ones at most (issue 47 red team, N9), a change read within 2 s.
const NETWORK_CHANGE_GAP: Duration = Duration::from_secs(2);
/// The reading fallback's attachment sweep: at most a hundredth of the
/// worker's time (its period is a hundred times what the last sweep took),
/// between these bounds (the upper one is also capped at --interval).
const SWEEP_MIN: Duration = Duration::from_secs(2);
const SWEEP_MAX: Duration = Duration::from_secs(8);
const SWEEP_SHARE: u32 = 100;
/// The reading fallback reads a new cgroup again this long after it
/// appears: runtimes attach their device programs right after the mkdir.
const NEW_CGROUP_READ: Duration = Duration::from_secs(1);
/// The most reads at new pods' ends of grace waiting: more pods than this
/// starting within one grace are judged by the reads every `INTERFACES`.
const POD_READS_QUEUED: usize = 64;
/// A cgroup asked to be read again later is, this much later.
const READ_AGAIN: Duration = Duration::from_millis(100);
/// With cgroup events, at most this many new cgroups wait to have their
/// `cgroup.events` read (a pod making cgroups without pause): past it a
/// full pass tells.
const POPULATED_QUEUED: usize = 65_536;
/// ... at most this much later, however many times it was.
const READ_AGAIN_MAX: Duration = Duration::from_millis(800);
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
/// Judgements asked for by events are spaced so that judging takes at most
/// 1/JUDGE_SHARE of a core: judging costs the size of the tree (every pod's
/// coverage), and a node where containers start all the time would
/// otherwise judge on every start. The gap is JUDGE_SHARE times what the
/// last judgement took (microseconds on a small node, so a change is judged
/// at once), never more than JUDGE_GAP_MAX; the first change after a quiet
/// spell is judged at once.
const JUDGE_SHARE: u32 = 50;
const JUDGE_GAP_MAX: Duration = Duration::from_millis(200);
/// At most one remediation per mount path in this window.
const REMEDIATION_EVERY: Duration = Duration::from_secs(300);
/// The worker comes round its loop at least this often, even with nothing
/// to do (it is its heartbeat).
const HEARTBEAT: Duration = Duration::from_secs(10);

/// What the worker does next, after the sweeps, reads and judgements due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A full pass, and why.
    FullPass(Trigger),
    /// Something else is due already: come round the loop again.
    Again,
    /// Nothing is due for this long: wait for a request or an event.
    Wait(Duration),
}

/// What the worker does next (`Schedule::due`), in the order of its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// List the cgroup links (syscall tracing).
    LinkSweep,
    /// Read the pods' interfaces, or look at the read that runs.
    Interfaces,
    /// Read what is due: cgroups read again, new cgroups, whether they hold
    /// processes, the reading fallback's sweep.
    Read,
    /// Judge the findings (a judgement waited for its gap, or for the
    /// node state).
    Judge,
    /// A full pass, and why.
    FullPass(Trigger),
    /// Nothing is due for this long: wait for a request or an event.
    Wait(Duration),
}

/// Which of the round's kinds of work were offered this round.
#[derive(Debug, Default, Clone, Copy)]
struct Round {
    link_sweep: bool,
    interfaces: bool,
    read: bool,
    judge: bool,
}

/// The reading fallback's due times: the attachment sweep, and new
/// cgroups to read again.
#[derive(Debug)]
struct Sweeping {
    next_sweep: Instant,
    /// When the last sweep ended.
    swept: Instant,
    /// New cgroups queued in the current second, and when it began.
    queued: (Instant, usize),
    period: Duration,
    new_cgroups: VecDeque<(Instant, u64)>,
}

impl Sweeping {
    fn due(&self) -> Instant {
        self.new_cgroups.front().map_or(self.next_sweep, |(at, _)| (*at).min(self.next_sweep))
    }

    /// The next sweep at `at` if it would come later (never sooner than
    /// the shortest period after the last).
    fn sweep_by(&mut self, at: Instant) {
        self.next_sweep = self.next_sweep.min(at.max(self.swept + SWEEP_MIN));
    }
}

/// Every due time of the worker.
#[derive(Debug)]
pub struct Schedule {
    interval: Duration,
    /// The next full pass on --interval (or retry of a failed one).
    next_interval: Instant,
    /// A full pass asked for (and why), due at the instant given.
    asked: Option<(Instant, Trigger)>,
    /// When the last full pass started, and what it took.
    last_full: Option<Instant>,
    last_pass_took: Duration,
    /// The last full pass kept no tree.
    untracked: bool,
    /// Full passes failed in a row.
    failures: u32,
    /// The next link sweep (syscall tracing only).
    next_link_sweep: Option<Instant>,
    /// While the node has pods: when their interfaces are read next.
    next_interfaces: Option<Instant>,
    /// Reads of the interfaces as new pods' `--endpoint-grace` ends (their
    /// verdict is due then), at most one a second, `POD_READS_QUEUED` at
    /// most.
    pod_reads: BTreeSet<Instant>,
    /// A read of the interfaces runs: a pod's read that comes due meanwhile
    /// waits for it to end (that read began before its moment).
    interfaces_running: bool,
    /// When the last read of the node's network was due.
    last_change_read: Option<Instant>,
    /// The reading fallback's due times (`Source::Reading` only).
    reading: Option<Sweeping>,
    /// When the CNI agents and mounts were last read, and a judgement
    /// waiting for the next read.
    node_state_read: Instant,
    node_state_due: Option<Instant>,
    /// When the findings were last judged, what that took, and a
    /// judgement waiting for the gap to pass.
    judged: Instant,
    judge_cost: Duration,
    judge_due: Option<Instant>,
    /// When each mount path was last remediated.
    remediated: HashMap<String, Instant>,
    /// cgroups to read again later, with any source: a link whose release
    /// the kernel had not finished when it was read. In time order, and
    /// each cgroup once.
    later: BTreeSet<(Instant, u64)>,
    later_ids: HashMap<u64, Instant>,
    /// With cgroup events: new cgroups whose `cgroup.events` is read
    /// `NEW_CGROUP_READ` after their mkdir (empty when made; a runtime moves
    /// the container's processes in right after).
    populated: VecDeque<(Instant, u64)>,
    /// The worker's round so far (`due`).
    round: Round,
}

impl Schedule {
    /// A schedule starting at `now`, with the start-up pass due at once.
    /// `link_sweep` for syscall tracing, `reading` for the reading fallback.
    pub fn new(now: Instant, interval: Duration, link_sweep: bool, reading: bool) -> Schedule {
        Schedule {
            interval,
            next_interval: now,
            asked: Some((now, Trigger::Startup)),
            last_full: None,
            last_pass_took: Duration::ZERO,
            untracked: false,
            failures: 0,
            next_link_sweep: link_sweep.then_some(now + LINK_SWEEP),
            next_interfaces: None,
            pod_reads: BTreeSet::new(),
            interfaces_running: false,
            last_change_read: None,
            reading: reading.then(|| Sweeping {
                next_sweep: now + SWEEP_MIN,
                swept: now,
                queued: (now, 0),
                period: SWEEP_MIN.min(interval),
                new_cgroups: VecDeque::new(),
            }),
            node_state_read: now,
            node_state_due: None,
            judged: now,
            judge_cost: Duration::ZERO,
            judge_due: None,
            remediated: HashMap::new(),
            later: BTreeSet::new(),
            later_ids: HashMap::new(),
            populated: VecDeque::new(),
            round: Round::default(),
        }
    }

    /// What the worker does next at `now`. A round offers, in this order
    /// and each at most once, the link sweep, the interfaces, the reads and
    /// a judgement, each when it is due; then a full pass when one is due,
    /// else the wait until something is, and a new round starts. Work that
    /// is still due after its turn (reads are cut at a budget) waits for
    /// the next round: it never keeps a due full pass from its turn.
    pub fn due(&mut self, now: Instant) -> Due {
        for _ in 0..2 {
            if !std::mem::replace(&mut self.round.link_sweep, true) && self.link_sweep_due(now) {
                return Due::LinkSweep;
            }
            if !std::mem::replace(&mut self.round.interfaces, true) && self.interfaces_due(now) {
                return Due::Interfaces;
            }
            if !std::mem::replace(&mut self.round.read, true) && self.read_due(now) {
                return Due::Read;
            }
            if !std::mem::replace(&mut self.round.judge, true) && self.judge_due(now) {
                return Due::Judge;
            }
            self.round = Round::default();
            match self.next(now) {
                Next::FullPass(trigger) => return Due::FullPass(trigger),
                Next::Wait(wait) => return Due::Wait(wait),
                // Something of a round is due already: a new round.
                Next::Again => {}
            }
        }
        // Not reached: every due time `next` reads is one of the round's
        // kinds, offered by the second round
        // (`every_due_time_is_offered_by_a_round`).
        Due::Wait(Duration::ZERO)
    }

    /// What comes after the sweeps, reads and judgements due at `now`.
    fn next(&self, now: Instant) -> Next {
        let due = [
            self.asked.map(|(at, _)| at),
            self.judge_due,
            self.next_link_sweep,
            self.next_interfaces,
            self.pod_reads.first().copied().filter(|_| !self.interfaces_running),
            self.reading.as_ref().map(Sweeping::due),
            self.later.first().map(|(at, _)| *at),
            self.populated.front().map(|(at, _)| *at),
            self.node_state_due,
        ]
        .into_iter()
        .flatten()
        .fold(self.next_interval, Instant::min);
        if due > now {
            return Next::Wait((due - now).min(HEARTBEAT));
        }
        match self.asked {
            Some((at, trigger)) if at <= now => Next::FullPass(trigger),
            _ if self.next_interval <= now => Next::FullPass(Trigger::Interval),
            _ => Next::Again,
        }
    }

    // Full passes.

    /// Asks for a full pass at `now`: as soon as the gap after the last
    /// allows. An ask due sooner already stands.
    pub fn ask_full_pass(&mut self, now: Instant, trigger: Trigger) {
        let gap = if self.untracked {
            FULL_PASS_MIN_GAP.max(self.last_pass_took * UNTRACKED_PASS_SHARE)
        } else {
            FULL_PASS_MIN_GAP
        };
        let earliest = self.last_full.map_or(now, |t| t + gap);
        if self.asked.is_none_or(|(at, _)| earliest < at) {
            self.asked = Some((earliest, trigger));
        }
    }

    /// A full pass starts at `now`: what was asked for is being done.
    pub fn pass_started(&mut self, now: Instant) {
        self.asked = None;
        self.last_full = Some(now);
    }

    /// Whether the last full pass kept no tree (more cgroups than
    /// --max-cgroups).
    pub fn untracked(&self) -> bool {
        self.untracked
    }

    /// The full pass ended at `now`; its reading took `took`, with the tree
    /// or not (`untracked`). The next on --interval comes `next_in` later
    /// (the interval jittered). The node state was read with it.
    pub fn pass_done(&mut self, now: Instant, took: Duration, untracked: bool, next_in: Duration) {
        self.last_pass_took = took;
        self.untracked = untracked;
        self.failures = 0;
        self.node_state_read = now;
        self.node_state_due = None;
        self.next_interval = now + next_in;
    }

    /// The full pass failed at `now` after `took`: while none has succeeded
    /// (`ready` false) tried again after `RETRY`, doubled for each failure
    /// in a row up to `RETRY_MAX`; else `next_in` later.
    pub fn pass_failed(&mut self, now: Instant, took: Duration, ready: bool, next_in: Duration) {
        self.last_pass_took = took;
        let backoff = RETRY.saturating_mul(1 << self.failures.min(6)).min(RETRY_MAX);
        self.failures = self.failures.saturating_add(1);
        self.next_interval = now + if ready { next_in } else { backoff.min(self.interval) };
    }

    // Judging.

    /// An event changed what the findings may say: true to judge now,
    /// else a judgement is due once the gap after the last has passed.
    pub fn judge_soon(&mut self, now: Instant) -> bool {
        let at = self.judged + (self.judge_cost * JUDGE_SHARE).min(JUDGE_GAP_MAX);
        if now >= at {
            true
        } else {
            self.judge_due = Some(at);
            false
        }
    }

    /// Whether a judgement waits (for its gap, or for the node state).
    pub fn judgement_waiting(&self) -> bool {
        self.judge_due.is_some()
    }

    /// Whether a waiting judgement's moment has come.
    pub fn judge_due(&self, now: Instant) -> bool {
        self.node_state_due.is_some_and(|at| at <= now) || self.judge_due.is_some_and(|at| at <= now)
    }

    /// A judgement starts at `now`: true when it reads the CNI agents and
    /// mounts again; when they were read too recently, it is made again
    /// once they may be.
    pub fn judging(&mut self, now: Instant) -> bool {
        self.judge_due = None;
        if now.saturating_duration_since(self.node_state_read) >= NODE_STATE_EVERY {
            self.node_state_read = now;
            self.node_state_due = None;
            true
        } else {
            self.node_state_due = Some(self.node_state_read + NODE_STATE_EVERY);
            false
        }
    }

    /// The judgement that started at `started` ended at `ended`.
    pub fn judged(&mut self, started: Instant, ended: Instant) {
        self.judged = ended;
        self.judge_cost = ended.saturating_duration_since(started);
    }

    // Sweeps and reads.

    /// True when the pods' interfaces are due to be read at `now`; the next
    /// read is then `INTERFACES` later.
    pub fn interfaces_due(&mut self, now: Instant) -> bool {
        let mut due = false;
        while !self.interfaces_running && self.pod_reads.first().is_some_and(|at| *at <= now) {
            self.pod_reads.pop_first();
            due = true;
        }
        let due = match self.next_interfaces {
            Some(at) if at <= now => {
                self.next_interfaces = Some(now + INTERFACES);
                true
            }
            _ => due,
        };
        if due {
            self.last_change_read = Some(now);
        }
        due
    }

    /// A pod's cgroup appeared at `now` (its mkdir event): the pods'
    /// interfaces are read `NEW_CGROUP_READ` later and every `INTERFACES`
    /// from then on, and once more as its `grace` ends, when its verdict
    /// is due.
    pub fn pod_started(&mut self, now: Instant, grace: Duration) {
        let soon = now + NEW_CGROUP_READ;
        self.next_interfaces = Some(self.next_interfaces.map_or(soon, |at| at.min(soon)));
        let end = now + grace + NEW_CGROUP_READ;
        let near = end.checked_sub(Duration::from_secs(1)).unwrap_or(end);
        if self.pod_reads.len() < POD_READS_QUEUED && self.pod_reads.range(near..=end).next().is_none() {
            self.pod_reads.insert(end);
        }
    }

    /// A read of the interfaces runs: it is looked at again
    /// `INTERFACES_POLL` after `now`.
    pub fn interfaces_pending(&mut self, now: Instant) {
        self.interfaces_running = true;
        self.next_interfaces = Some(now + INTERFACES_POLL);
    }

    /// The read of the interfaces that ran has ended.
    pub fn interfaces_read(&mut self) {
        self.interfaces_running = false;
    }

    /// rtnetlink said the node's network changed at `now` (a link, a tc
    /// filter): it is read at once, `NETWORK_CHANGE_GAP` after the last
    /// read at the earliest (reads never come closer than the periodic
    /// ones: a change only brings the next one forward).
    pub fn network_changed(&mut self, now: Instant) {
        let at = self.last_change_read.map_or(now, |last| now.max(last + NETWORK_CHANGE_GAP));
        if self.next_interfaces.is_none_or(|next| at < next) {
            self.next_interfaces = Some(at);
        }
    }

    /// A full pass at `now` found pods (`pods`) or none: their interfaces
    /// are read every `INTERFACES` from now on, or not at all.
    pub fn pods_seen(&mut self, now: Instant, pods: bool) {
        if !pods {
            self.pod_reads.clear();
        }
        self.next_interfaces = match (pods, self.next_interfaces) {
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(now + INTERFACES),
        };
    }

    /// Under syscall tracing, true when the link sweep is due at `now`;
    /// the next is then `LINK_SWEEP` later.
    pub fn link_sweep_due(&mut self, now: Instant) -> bool {
        match self.next_link_sweep {
            Some(at) if at <= now => {
                self.next_link_sweep = Some(now + LINK_SWEEP);
                true
            }
            _ => false,
        }
    }

    /// Whether a read (a cgroup read again later, the reading fallback's
    /// new cgroups) or a sweep is due at `now`.
    pub fn read_due(&self, now: Instant) -> bool {
        self.reading.as_ref().is_some_and(|r| r.due() <= now)
            || self.later.first().is_some_and(|(at, _)| *at <= now)
            || self.populated.front().is_some_and(|(at, _)| *at <= now)
    }

    /// Reads cgroup `id` again after `now` (a link release the kernel had
    /// not finished: the reading then lists it still): `READ_AGAIN` later
    /// after its first try, doubling with each of `tries` up to
    /// `READ_AGAIN_MAX`. A cgroup already waiting keeps the sooner time.
    pub fn read_again(&mut self, now: Instant, id: u64, tries: u32) {
        let at = now + (READ_AGAIN * 2u32.saturating_pow(tries.min(8))).min(READ_AGAIN_MAX);
        match self.later_ids.get(&id) {
            Some(&queued) if queued <= at => {}
            queued => {
                if let Some(&q) = queued {
                    self.later.remove(&(q, id));
                }
                self.later.insert((at, id));
                self.later_ids.insert(id, at);
            }
        }
    }

    /// The next cgroup to read again whose moment has come at `now`.
    pub fn take_read_again(&mut self, now: Instant) -> Option<u64> {
        if self.later.first().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        let (_, id) = self.later.pop_first()?;
        self.later_ids.remove(&id);
        Some(id)
    }

    /// A cgroup `id` appeared at `now`. Under the reading fallback it is
    /// read again `NEW_CGROUP_READ` later, unless more than
    /// `NEW_CGROUPS_QUEUED` appeared this second: then the next sweep is
    /// brought forward to that moment to find them all in one pass (it
    /// reads whether each holds processes too). With cgroup events, whether
    /// it holds processes is read `NEW_CGROUP_READ` later; false when
    /// `POPULATED_QUEUED` wait already (a full pass must tell).
    pub fn new_cgroup(&mut self, now: Instant, id: u64) -> bool {
        let Some(r) = self.reading.as_mut() else {
            if self.populated.len() >= POPULATED_QUEUED {
                return false;
            }
            self.populated.push_back((now + NEW_CGROUP_READ, id));
            return true;
        };
        if now.saturating_duration_since(r.queued.0) >= NEW_CGROUP_READ {
            r.queued = (now, 0);
        }
        r.queued.1 += 1;
        let at = now + NEW_CGROUP_READ;
        if r.queued.1 <= NEW_CGROUPS_QUEUED {
            r.new_cgroups.push_back((at, id));
        } else {
            r.sweep_by(at);
        }
        true
    }

    /// The next new cgroup whose `cgroup.events` is due at `now` (cgroup
    /// events only).
    pub fn take_populated(&mut self, now: Instant) -> Option<u64> {
        if self.populated.front().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        self.populated.pop_front().map(|(_, id)| id)
    }

    /// The next new cgroup whose moment to be read has come at `now`.
    pub fn take_new_cgroup(&mut self, now: Instant) -> Option<u64> {
        let r = self.reading.as_mut()?;
        if r.new_cgroups.front().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        r.new_cgroups.pop_front().map(|(_, id)| id)
    }

    /// Whether the reading fallback's attachment sweep is due at `now`.
    pub fn sweep_due(&self, now: Instant) -> bool {
        self.reading.as_ref().is_some_and(|r| r.next_sweep <= now)
    }

    /// A sweep that cost `cost` ended at `now`; the next comes a hundred
    /// times that cost later, within its bounds. Returns the period (None
    /// without the reading fallback).
    pub fn swept(&mut self, now: Instant, cost: Duration) -> Option<Duration> {
        let r = self.reading.as_mut()?;
        r.period = cost.saturating_mul(SWEEP_SHARE).clamp(SWEEP_MIN, SWEEP_MAX.max(SWEEP_MIN)).min(self.interval);
        r.swept = now;
        r.next_sweep = now + r.period;
        Some(r.period)
    }

    // Remediation.

    /// Whether `path` may be remediated at `now` (true at most once per
    /// `REMEDIATION_EVERY`); a yes counts as the remediation.
    pub fn may_remediate(&mut self, path: &str, now: Instant) -> bool {
        if self.remediated.get(path).is_some_and(|t| now.saturating_duration_since(*t) < REMEDIATION_EVERY) {
            return false;
        }
        self.remediated.insert(path.to_string(), now);
        true
    }
}

#[cfg(test)]
mod tests;
