//! The single-threaded helper that enters PID 1's cgroup namespace and the
//! target's mount namespace and does all of the looking and the one change
//! there, as `nsenter --cgroup=/proc/1/ns/cgroup --mount` + `mount` would,
//! but through descriptors.
//!
//! `setns(CLONE_NEWNS)` fails with EINVAL in a multi-threaded process, and
//! the daemon runs tokio, so the work happens in a fresh process: this same
//! binary re-executed as `agent __remount-helper`, which does nothing else
//! before `setns`. It is handed the target as a pidfd (fd 3), opened once
//! by the caller, so the pid number is never looked up again; it answers
//! with one JSON line on stdout, and is killed if it takes longer than the
//! caller's timeout (a path on a filesystem that never answers).

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::thread::ThreadNameSpaceType;
use serde::{Deserialize, Serialize};

use super::mountpoint::{self, Failure, Replaced};
use super::plan::{Action, Observed};
use super::{RemountError, Target};

/// Where the helper finds the target's pidfd.
const PIDFD: i32 = 3;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Request {
    /// What `path` holds; changes nothing.
    Observe { path: PathBuf },
    /// `action` at `path`, if it still holds exactly `expected`.
    Apply { path: PathBuf, action: Action, expected: Observed, reference_root_id: u64 },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Observed { seen: Observed, replaced: Option<Replaced> },
    Failed(Failure),
}

/// What the helper is started with (`agent __remount-helper`'s flags).
pub struct Args {
    pub proc: std::path::PathBuf,
    /// For messages, and for entering by /proc/<pid>/ns before Linux 5.8.
    pub target_pid: u32,
    /// One `Request`, as JSON.
    pub request: String,
}

/// Runs in the helper process: answers one request. Exit code 0 when the
/// reply is `Observed`, 2 when it is `Failed`.
pub fn main(args: &Args) -> u8 {
    let reply = match serde_json::from_str::<Request>(&args.request) {
        Ok(request) => match work(args, &request) {
            Ok((seen, replaced)) => Reply::Observed { seen, replaced },
            Err(f) => Reply::Failed(f),
        },
        Err(e) => {
            eprintln!("agent __remount-helper: --request: {e}");
            return 2;
        }
    };
    println!("{}", serde_json::to_string(&reply).unwrap_or_default());
    u8::from(matches!(reply, Reply::Failed(_))) * 2
}

fn work(args: &Args, request: &Request) -> Result<(Observed, Option<Replaced>), Failure> {
    // Before leaving our mount namespace: our own /proc/self, to read our
    // mountinfo and name our descriptors once we are in the target's.
    let open_dir = |p: &Path| {
        rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Failure::Call { call: "open".into(), path: p.to_owned(), errno: e.raw_os_error() })
    };
    let proc_self = open_dir(&args.proc.join("self"))?;
    let proc_self_fd = open_dir(&args.proc.join("self/fd"))?;
    let pidfd = crate::os::inherited_fd(PIDFD).ok_or(Failure::Enter { pid: args.target_pid, errno: libc::EBADF })?;
    // A look from the node's cgroup namespace too: a mount's root is then
    // the cgroup's path on the node, as the change will see it, not as the
    // caller's own namespace shows it (`/../..` from a debug pod).
    enter(pidfd.as_fd(), &args.proc, args.target_pid)?;
    match request {
        Request::Observe { path } => Ok((mountpoint::inspect(proc_self.as_fd(), path)?.observed, None)),
        Request::Apply { path, action, expected, reference_root_id } => {
            mountpoint::apply(proc_self.as_fd(), proc_self_fd.as_fd(), path, *action, expected, *reference_root_id)
        }
    }
}

/// Enters PID 1's cgroup namespace (the node's: a cgroup2 mount made next
/// is rooted at the root, whatever namespace the target's own processes see)
/// and the target's mount namespace (where the mount is to be), as Cilium's
/// init container does with `nsenter --cgroup=/proc/1/ns/cgroup
/// --mount=...`. The target's mount namespace through its pidfd (5.8), else
/// through `/proc/<pid>/ns/mnt`, then checking with the pidfd that the pid
/// still is the process the caller meant.
fn enter(pidfd: BorrowedFd<'_>, proc: &Path, pid: u32) -> Result<(), Failure> {
    let open = |who: u32, ns: &str| {
        let p = proc.join(format!("{who}/ns/{ns}"));
        rustix::fs::open(&p, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Failure::Enter { pid: who, errno: e.raw_os_error() })
    };
    // Opened before leaving our mount namespace, whose /proc it is, for a
    // look as for a change (issue 36: a dry run that did not open it
    // planned a change --apply was then refused); an error is the one to
    // report only once the target's was entered.
    let cgroupns = open(1, "cgroup");
    match rustix::thread::move_into_thread_name_spaces(pidfd, ThreadNameSpaceType::MOUNT) {
        Ok(()) => {}
        Err(Errno::SRCH) => return Err(Failure::TargetExited { pid }),
        Err(Errno::INVAL) => {
            let mnt = open(pid, "mnt")?;
            if exited(pidfd) {
                return Err(Failure::TargetExited { pid });
            }
            rustix::thread::move_into_link_name_space(mnt.as_fd(), Some(rustix::thread::LinkNameSpaceType::Mount))
                .map_err(|e| Failure::Enter { pid, errno: e.raw_os_error() })?;
        }
        Err(e) => return Err(Failure::Enter { pid, errno: e.raw_os_error() }),
    }
    let cgroupns = cgroupns?;
    rustix::thread::move_into_link_name_space(cgroupns.as_fd(), Some(rustix::thread::LinkNameSpaceType::ControlGroup))
        .map_err(|e| Failure::Enter { pid: 1, errno: e.raw_os_error() })
}

/// A pidfd polls readable once its process has exited.
fn exited(pidfd: BorrowedFd<'_>) -> bool {
    let mut fds = [nix::poll::PollFd::new(pidfd, nix::poll::PollFlags::POLLIN)];
    nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// Runs the helper for `request` against `target` and waits for its reply,
/// at most `target.timeout`.
pub fn run(target: &Target, request: &Request) -> Result<(Observed, Option<Replaced>), RemountError> {
    let json = serde_json::to_string(request).map_err(RemountError::HelperRequest)?;
    let mut cmd = Command::new(&target.helper);
    cmd.arg("__remount-helper")
        .arg("--proc")
        .arg(&target.proc)
        .arg("--target-pid")
        .arg(target.pid.to_string())
        .arg("--request")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::os::pass_fd(&mut cmd, target.pidfd.as_fd(), PIDFD);
    let mut child = cmd.spawn().map_err(|error| RemountError::HelperSpawn { helper: target.helper.clone(), error })?;
    let deadline = Instant::now() + target.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RemountError::HelperTimeout(target.timeout));
            }
            Err(e) => return Err(RemountError::HelperWait(e)),
        }
    };
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    match serde_json::from_str::<Reply>(out.trim()) {
        Ok(Reply::Observed { seen, replaced }) => Ok((seen, replaced)),
        Ok(Reply::Failed(f)) => Err(RemountError::Failed(f)),
        Err(_) => Err(RemountError::HelperFailed { status, stderr: err.trim().to_owned() }),
    }
}
