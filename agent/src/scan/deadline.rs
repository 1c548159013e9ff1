//! Reads of what other processes control, given a deadline.
//!
//! A process chooses what its root holds and what backs its memory: a
//! FUSE mount nobody serves, or a page behind userfaultfd, blocks whoever
//! reads there, in an uninterruptible wait no timeout can end. So such
//! reads run on a small pool of reader threads, and the caller waits for
//! each no longer than what is left of its pass's one `Budget`: past it,
//! the pass goes on without the answer. A reader stuck for good stays
//! stuck, but the pool never grows past `READERS`, and a process whose last
//! read has not returned is not read again meanwhile (the answer would
//! block too). So 70 processes that block cost a pass at most one budget,
//! not 70, and churning them costs no thread.

use std::collections::BTreeSet;
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long all untrusted reads of one pass may take together.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// Reader threads at most: what reads stuck for good can hold.
pub const READERS: usize = 4;
/// Reads waiting for a reader; beyond this they are refused at once.
const QUEUED: usize = 64;

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
    #[error("pid {0}'s files were not read: every reader is busy with reads that have not returned")]
    Busy(u32),
}

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    jobs: Option<crossbeam_channel::Sender<Job>>,
    receiver: Option<crossbeam_channel::Receiver<Job>>,
    /// Threads started, and how many of them wait for a job.
    threads: usize,
    idle: usize,
    /// Processes whose last read has not returned.
    stuck: BTreeSet<u32>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { jobs: None, receiver: None, threads: 0, idle: 0, stuck: BTreeSet::new() });

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reader: runs jobs as they come.
fn reader(jobs: crossbeam_channel::Receiver<Job>) {
    loop {
        pool().idle += 1;
        let Ok(job) = jobs.recv() else { return };
        pool().idle -= 1;
        job();
    }
}

/// Runs `read` (of process `pid`'s files) on a reader, waiting at most
/// what is left of `budget`.
pub fn within<T: Send + 'static>(
    pid: u32,
    budget: &Budget,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Abandoned> {
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let answer = read();
        // The caller may have gone: then it gave up, and the process may
        // be read again.
        if tx.send(answer).is_err() {
            pool().stuck.remove(&pid);
        }
    });
    {
        let mut p = pool();
        if p.stuck.contains(&pid) {
            return Err(Abandoned::StillBlocked(pid));
        }
        if p.jobs.is_none() {
            let (s, r) = crossbeam_channel::bounded(QUEUED);
            (p.jobs, p.receiver) = (Some(s), Some(r));
        }
        if p.idle == 0 && p.threads < READERS {
            let r = p.receiver.clone().expect("made above");
            if std::thread::Builder::new().name("cgaudit-read".into()).spawn(move || reader(r)).is_ok() {
                p.threads += 1;
            }
        }
        let jobs = p.jobs.clone().expect("made above");
        if jobs.try_send(job).is_err() {
            return Err(Abandoned::Busy(pid));
        }
    }
    let limit = budget.left();
    match rx.recv_timeout(limit) {
        Ok(answer) => Ok(answer),
        Err(_) => {
            let mut p = pool();
            // It may have answered just now.
            if let Ok(answer) = rx.try_recv() {
                return Ok(answer);
            }
            p.stuck.insert(pid);
            drop(rx);
            Err(Abandoned::TimedOut { pid, limit: READ_DEADLINE.min(limit.max(Duration::from_millis(1))) })
        }
    }
}

/// Reader threads started so far: they never exceed `READERS`.
#[cfg(test)]
fn readers() -> usize {
    pool().threads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_budget_are_left_behind_and_the_pool_does_not_grow() {
        let budget = Budget::new(Duration::from_millis(200));
        let started = Instant::now();
        let mut releases = Vec::new();
        // More blocked processes than readers: one budget in all, not one each.
        for pid in 4_000_001..4_000_011 {
            let (release, wait) = mpsc::channel::<()>();
            releases.push(release);
            let r = within(pid, &budget, move || wait.recv().is_ok());
            assert!(matches!(r, Err(Abandoned::TimedOut { .. } | Abandoned::Busy(_))), "{r:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(readers() <= READERS);
        assert_eq!(
            within(4_000_001, &Budget::new(Duration::from_secs(1)), || 1),
            Err(Abandoned::StillBlocked(4_000_001))
        );
        // Released: the readers come back, the processes are read again.
        drop(releases);
        let again = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            within(4_000_001, &Budget::new(Duration::from_secs(1)), || 3).ok()
        });
        assert_eq!(again, Some(3), "read again once the blocked read returned");
        assert!(readers() <= READERS);
    }
}
