//! Reads of what other processes control, given a deadline.
//!
//! A process chooses what its root holds and what backs its memory: a
//! FUSE mount nobody serves, or a page behind userfaultfd, blocks whoever
//! reads there, in an uninterruptible wait no timeout can end. So such
//! reads run on a thread of their own; past the deadline the caller goes on
//! without the answer and the thread is left behind, still blocked. At most
//! one is left behind per process read: while it is, that process is not
//! read again (the answer would block too), so nothing piles up.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a read of another process's files may take.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);

/// Processes whose last read has not returned.
static STUCK: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// Why there is no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Abandoned {
    #[error(
        "reading pid {pid}'s files did not return within {limit:?} (a file system that never answers, such as an unserved FUSE mount); it is not read again while that read is blocked"
    )]
    TimedOut { pid: u32, limit: Duration },
    #[error("an earlier read of pid {0}'s files has still not returned (a file system that never answers)")]
    StillBlocked(u32),
    #[error("the thread reading pid {0}'s files could not be started")]
    NoThread(u32),
}

/// Runs `read` (of process `pid`'s files) with a deadline of `limit`.
pub fn within<T: Send + 'static>(
    pid: u32,
    limit: Duration,
    read: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Abandoned> {
    {
        let mut stuck = STUCK.lock().unwrap_or_else(|e| e.into_inner());
        if stuck.get_or_insert_with(HashSet::new).contains(&pid) {
            return Err(Abandoned::StillBlocked(pid));
        }
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let gave_up = Arc::new(Mutex::new(false));
    let gave_up_thread = gave_up.clone();
    let spawned = std::thread::Builder::new().name("cgaudit-read".into()).spawn(move || {
        let answer = read();
        let _ = tx.send(answer);
        // A read the caller gave up on: the process may be read again.
        if *gave_up_thread.lock().unwrap_or_else(|e| e.into_inner()) {
            let mut stuck = STUCK.lock().unwrap_or_else(|e| e.into_inner());
            stuck.get_or_insert_with(HashSet::new).remove(&pid);
        }
    });
    if spawned.is_err() {
        return Err(Abandoned::NoThread(pid));
    }
    match rx.recv_timeout(limit) {
        Ok(answer) => Ok(answer),
        Err(_) => {
            let mut flag = gave_up.lock().unwrap_or_else(|e| e.into_inner());
            // It may have answered just now.
            if let Ok(answer) = rx.try_recv() {
                return Ok(answer);
            }
            *flag = true;
            STUCK.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashSet::new).insert(pid);
            Err(Abandoned::TimedOut { pid, limit })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_past_its_deadline_is_left_behind_and_its_process_not_read_again_meanwhile() {
        let (release, wait) = mpsc::channel::<()>();
        let blocked = within(4_000_001, Duration::from_millis(50), move || wait.recv().is_ok());
        assert!(matches!(blocked, Err(Abandoned::TimedOut { pid: 4_000_001, .. })));
        assert_eq!(within(4_000_001, Duration::from_secs(1), || 1), Err(Abandoned::StillBlocked(4_000_001)));
        assert_eq!(within(4_000_002, Duration::from_secs(1), || 2), Ok(2), "other processes are read");
        release.send(()).unwrap();
        let again = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            within(4_000_001, Duration::from_secs(1), || 3).ok()
        });
        assert_eq!(again, Some(3), "read again once the blocked read returned");
    }
}
