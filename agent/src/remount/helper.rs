//! The single-threaded helper that enters the target's cgroup and mount
//! namespaces and mounts cgroup2, as `nsenter --cgroup --mount` + `mount`
//! would.
//!
//! `setns(CLONE_NEWNS)` fails with EINVAL in a multi-threaded process, and
//! the daemon runs tokio, so the work happens in a fresh process: this same
//! binary re-executed as `agent __remount-helper`, which does nothing else
//! before `setns`. The caller waits for it and verifies the result itself.

use std::fs::File;
use std::path::Path;
use std::process::Command;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns};

use super::plan::Action;
use crate::cli::HelperArgs;

fn enter(proc: &Path, pid: u32, ns: &str, flag: CloneFlags) -> Result<(), String> {
    let p = proc.join(format!("{pid}/ns/{ns}"));
    let f = File::open(&p).map_err(|e| {
        format!("open {}: {e} (cannot reach PID {pid}'s namespaces; needs hostPID and CAP_SYS_PTRACE)", p.display())
    })?;
    setns(&f, flag).map_err(|e| format!("setns({}): {e}", p.display()))
}

/// Runs in the helper process. Returns its exit code (0 done, 2 failed); the
/// reason goes to stderr, where the caller reads it.
pub fn main(args: &HelperArgs) -> u8 {
    match work(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            2
        }
    }
}

fn work(a: &HelperArgs) -> Result<(), String> {
    // The cgroup namespace first: the mount made after entering it is rooted
    // at the target's cgroup-namespace root, which is the point.
    enter(&a.proc, a.target_pid, "cgroup", CloneFlags::CLONE_NEWCGROUP)?;
    enter(&a.proc, a.target_pid, "mnt", CloneFlags::CLONE_NEWNS)?;
    nix::unistd::chdir("/").map_err(|e| format!("chdir /: {e}"))?;
    let p = &a.path;
    match a.action.as_str() {
        "replace" => umount2(p, MntFlags::MNT_DETACH).map_err(|e| format!("umount {}: {e}", p.display()))?,
        "create_and_mount" => std::fs::create_dir_all(p).map_err(|e| format!("mkdir {}: {e}", p.display()))?,
        "mount" => {}
        other => return Err(format!("unknown helper action {other}")),
    }
    mount(Some("none"), p, Some("cgroup2"), MsFlags::empty(), None::<&str>)
        .map_err(|e| format!("mount -t cgroup2 none {}: {e}", p.display()))
}

/// Runs the helper for `action` and waits for it. `Err` carries its stderr.
pub fn run(proc: &Path, target_pid: u32, path: &Path, action: Action) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("locating this binary: {e}"))?;
    let out = Command::new(exe)
        .arg("__remount-helper")
        .arg("--proc")
        .arg(proc)
        .arg("--target-pid")
        .arg(target_pid.to_string())
        .arg("--path")
        .arg(path)
        .arg("--action")
        .arg(action.as_str())
        .output()
        .map_err(|e| format!("starting the remount helper: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()) }
}
