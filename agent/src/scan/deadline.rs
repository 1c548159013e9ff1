//! Reads of what other processes control, given a deadline.
//!
//! A process chooses what its root holds and what backs its memory: a
//! FUSE mount nobody serves, or a page behind userfaultfd, blocks whoever
//! reads there, in an uninterruptible wait no timeout can end. So each
//! such read runs on a thread of its own, and the caller waits for it no
//! longer than what is left of its pass's one `Budget`: past it, the pass
//! goes on without the answer. A read stuck for good keeps its thread, and
//! a process one of whose reads outlived its deadline and has not returned
//! is not read again meanwhile (the answer would block too; two callers'
//! reads of one process at once both run): one process's blocked reads cost only
//! that process's facts, never another's (a fake CNI agent cannot keep the
//! real one's configuration from being read). 70 processes that block
//! cost a pass at most one budget, not 70; at most `MAX_BLOCKED` threads
//! are ever left waiting, and churning the processes costs no more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

/// The key the node's CNI configuration is read under (`within`'s `pid`):
/// no pid is this large (`pid_max` is at most 2^22), so its read never
/// waits on, nor is refused for, a read of PID 1's other files (names).
pub const CNI_CONFIG: u32 = u32::MAX;

/// How long all untrusted reads of one pass may take together.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// Processes whose reads may be under way (or blocked) at once: past this,
/// no other is read until one returns (each holds a thread, with a small
/// stack).
pub const MAX_BLOCKED: usize = 32;
/// A reader's stack: it reads a few small files.
const READER_STACK: usize = 256 * 1024;

/// One pass's deadline for all its untrusted reads.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    until: Instant,
}

impl Budget {
    /// A budget of `limit` from now.
    pub fn new(limit: Duration) -> Budget {
        Budget { until: Instant::now() + limit }
    }

    fn left(&self) -> Duration {
        self.until.saturating_duration_since(Instant::now())
    }
}

/// Why there is no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Abandoned {
    #[error(
        "reading pid {pid}'s files did not return within the pass's {limit:?} for such reads (a file system that never answers, such as an unserved FUSE mount); it is not read again while that read is blocked"
    )]
    TimedOut { pid: u32, limit: Duration },
    #[error("an earlier read of pid {0}'s files has still not returned (a file system that never answers)")]
    StillBlocked(u32),
    #[error("pid {0}'s files were not read: the reads of {MAX_BLOCKED} other processes have not returned")]
    Busy(u32),
    #[error("pid {0}'s files were not read: no thread could be started ({1})")]
    NoThread(u32, String),
}

/// The reads under way, by process, and the processes one of whose reads
/// outlived its caller's deadline and has not returned (blocked): those
/// are not read again until it does. Reads of one process from two
/// callers at once (the daemon's threads, the unit tests) both run.
struct Reads {
    under_way: BTreeMap<u32, usize>,
    blocked: BTreeSet<u32>,
}

static READS: Mutex<Reads> = Mutex::new(Reads { under_way: BTreeMap::new(), blocked: BTreeSet::new() });

fn reads() -> std::sync::MutexGuard<'static, Reads> {
    READS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reads {
    fn returned(&mut self, pid: u32) {
        if let Some(n) = self.under_way.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                self.under_way.remove(&pid);
                self.blocked.remove(&pid);
            }
        }
    }
}

/// Runs `read` (of process `pid`'s files) on a thread of its own, waiting
/// at most what is left of `budget`.
pub fn within<T: Send + 'static>(
    pid: u32,
    budget: &Budget,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Abandoned> {
    start(pid, read)?.wait(budget)
}

/// A read under way on a thread of its own (`start`): reads of several
/// processes run side by side, so one that blocks does not spend the
/// others' share of the pass's deadline.
pub struct Pending<T> {
    pid: u32,
    answer: mpsc::Receiver<T>,
}

/// Starts `read` (of process `pid`'s files) on a thread of its own.
pub fn start<T: Send + 'static>(pid: u32, read: impl FnOnce() -> T + Send + 'static) -> Result<Pending<T>, Abandoned> {
    {
        let mut r = reads();
        if r.blocked.contains(&pid) {
            return Err(Abandoned::StillBlocked(pid));
        }
        if r.under_way.values().sum::<usize>() >= MAX_BLOCKED {
            return Err(Abandoned::Busy(pid));
        }
        *r.under_way.entry(pid).or_default() += 1;
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new().name("cgaudit-read".into()).stack_size(READER_STACK).spawn(move || {
        let answer = read();
        // Returned: the process may be read again, whether or not the
        // caller still waits.
        reads().returned(pid);
        let _ = tx.send(answer);
    });
    if let Err(e) = spawned {
        reads().returned(pid);
        return Err(Abandoned::NoThread(pid, e.to_string()));
    }
    Ok(Pending { pid, answer: rx })
}

impl<T> Pending<T> {
    /// The answer, waiting at most what is left of `budget`.
    pub fn wait(self, budget: &Budget) -> Result<T, Abandoned> {
        let Pending { pid, answer } = self;
        let limit = budget.left();
        answer.recv_timeout(limit).map_err(|_| {
            // Left behind: blocked until it returns (if it has not since).
            let mut r = reads();
            if r.under_way.contains_key(&pid) {
                r.blocked.insert(pid);
            }
            Abandoned::TimedOut { pid, limit: READ_DEADLINE.min(limit.max(Duration::from_millis(1))) }
        })
    }
}

/// Reads under way now (blocked ones among them).
#[cfg(test)]
fn blocked_now() -> usize {
    reads().under_way.values().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the set of blocked processes: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn reads_past_the_budget_are_left_behind_and_blocked_ones_are_bounded() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let budget = Budget::new(Duration::from_millis(200));
        let started = Instant::now();
        let mut releases = Vec::new();
        // More blocked processes than may be: one budget in all, not one each.
        for pid in 4_000_001..4_000_001 + MAX_BLOCKED as u32 + 8 {
            let (release, wait) = mpsc::channel::<()>();
            releases.push(release);
            let r = within(pid, &budget, move || wait.recv().is_ok());
            assert!(matches!(r, Err(Abandoned::TimedOut { .. } | Abandoned::Busy(_))), "{r:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(blocked_now() <= MAX_BLOCKED);
        assert_eq!(
            within(4_000_001, &Budget::new(Duration::from_secs(1)), || 1),
            Err(Abandoned::StillBlocked(4_000_001))
        );
        // Released: the processes are read again.
        drop(releases);
        let again = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            within(4_000_001, &Budget::new(Duration::from_secs(1)), || 3).ok()
        });
        assert_eq!(again, Some(3), "read again once the blocked read returned");
    }

    /// Issue 36: four blocked processes held the four shared readers, and
    /// every other process's read was refused: one process's blocked reads
    /// now cost only its own facts.
    #[test]
    fn blocked_reads_of_some_processes_leave_the_others_read() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let budget = Budget::new(Duration::from_millis(300));
        let mut releases = Vec::new();
        for pid in 4_100_001..4_100_005 {
            let (release, wait) = mpsc::channel::<()>();
            releases.push(release);
            assert!(within(pid, &budget, move || wait.recv().is_ok()).is_err());
        }
        assert_eq!(within(4_100_100, &Budget::new(Duration::from_secs(1)), || 7), Ok(7));
        drop(releases);
    }
}
