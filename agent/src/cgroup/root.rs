//! Finding the hierarchy to audit and knowing whether it is the real root.
//!
//! The cgroup-v2 root has cgroup id 1 (the inode of its directory). A process
//! in a private cgroup namespace that mounts cgroup2 gets a mount whose top is
//! its own cgroup: auditing that would miss every attachment above it, which
//! is exactly the blind spot of the bug we look for. So candidates are judged
//! by the id of their top directory, never by the mountinfo text.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open};
use nix::sys::stat::{Mode, fstat};
use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, fstatfs};
use serde::Serialize;

use crate::mounts::{self, Mount, Mountinfo};

/// The cgroup id of the root of the cgroup-v2 hierarchy.
pub const ROOT_CGROUP_ID: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootKind {
    /// The hierarchy's real root (cgroup id 1).
    Hierarchy,
    /// PID 1's cgroup-namespace root: a nested node (kind, k0s, dind) whose
    /// init runs in a private cgroup namespace; nothing above it is the node's.
    Pid1Namespace,
    /// The directory the user named with `--cgroup-root`.
    Given,
    /// Only the auditor's own namespaced view could be reached: attachments
    /// above it are invisible and the result is incomplete.
    Namespaced,
}

/// The directory the audit treats as "the root".
#[derive(Debug, Clone, Serialize)]
pub struct AuditRoot {
    pub path: PathBuf,
    pub cgroup_id: u64,
    pub kind: RootKind,
    /// How it was reached and, for `Namespaced`, what is missing.
    pub note: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{path}: no such directory")]
    NotFound { path: PathBuf },
    #[error("{path}: not a directory")]
    NotDirectory { path: PathBuf },
    #[error(
        "{path}: not a cgroup2 directory (filesystem magic {magic:#x}); pass a directory of the cgroup v2 hierarchy"
    )]
    NotCgroup2 { path: PathBuf, magic: u64 },
    #[error("no cgroup2 filesystem is mounted and none could be made privately (looked in {looked_in})")]
    NoCgroup2 { looked_in: String },
    #[error("{op} {path}: {error}")]
    Io { op: &'static str, path: PathBuf, error: io::Error },
}

/// Opens `path` as a cgroup2 directory: (fd, cgroup id).
pub fn open_cgroup_dir(path: &Path) -> Result<(OwnedFd, u64), RootError> {
    let fd =
        open(path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).map_err(|e| match e {
            nix::Error::ENOENT => RootError::NotFound { path: path.to_owned() },
            nix::Error::ENOTDIR => RootError::NotDirectory { path: path.to_owned() },
            e => RootError::Io { op: "open", path: path.to_owned(), error: e.into() },
        })?;
    let fs = fstatfs(fd.as_fd()).map_err(|e| RootError::Io { op: "statfs", path: path.to_owned(), error: e.into() })?;
    if fs.filesystem_type() != CGROUP2_SUPER_MAGIC {
        return Err(RootError::NotCgroup2 { path: path.to_owned(), magic: fs.filesystem_type().0 as u64 });
    }
    let st = fstat(fd.as_fd()).map_err(|e| RootError::Io { op: "stat", path: path.to_owned(), error: e.into() })?;
    Ok((fd, st.st_ino))
}

/// `--cgroup-root DIR`: its top counts as the root.
pub fn given(path: &Path) -> Result<(AuditRoot, OwnedFd), RootError> {
    let (fd, id) = open_cgroup_dir(path)?;
    Ok((AuditRoot { path: path.to_owned(), cgroup_id: id, kind: RootKind::Given, note: None }, fd))
}

/// Reads and parses a mountinfo file (lines it cannot read are skipped and
/// named in `Mountinfo::skipped`).
pub fn read_mountinfo(path: &Path) -> Result<Mountinfo, RootError> {
    let text = fs::read(path).map_err(|e| RootError::Io { op: "read", path: path.to_owned(), error: e })?;
    Ok(mounts::parse_mountinfo(&text))
}

/// `<proc>/<pid>/root` + a path in that process's mount namespace.
pub fn in_root_of(proc: &Path, pid: u32, path: &Path) -> PathBuf {
    proc.join(pid.to_string()).join("root").join(path.strip_prefix("/").unwrap_or(path))
}

/// Finds the hierarchy root from the host's view.
///
/// Candidates: the auditor's own cgroup2 mounts, then PID 1's reached through
/// `<proc>/1/root` (a hostPID pod in a private cgroupns gets there). The first
/// whose top has id 1 wins. Failing that, PID 1's own cgroup2 mount is the
/// reference (a nested node), when PID 1 is the node's init (`pid1_is_node`:
/// not the agent's own pod's, see `scan::host::pid_view`); failing that, the
/// auditor's own view is used and marked `Namespaced`.
pub fn discover(proc: &Path, pid1_is_node: bool) -> Result<(AuditRoot, OwnedFd), RootError> {
    let own = read_mountinfo(Path::new("/proc/self/mountinfo"))?.mounts;
    let pid1_path = proc.join("1/mountinfo");
    let pid1 = read_mountinfo(&pid1_path).map(|m| m.mounts);

    let mut candidates: Vec<(PathBuf, bool)> =
        own.iter().filter(|m| m.is_cgroup2()).map(|m| (m.mount_point.clone(), false)).collect();
    if let Ok(pid1) = &pid1 {
        candidates.extend(pid1.iter().filter(|m| m.is_cgroup2()).map(|m| (in_root_of(proc, 1, &m.mount_point), true)));
    }
    if candidates.is_empty() {
        return private_hierarchy(proc).map_err(|e| RootError::NoCgroup2 {
            looked_in: format!("/proc/self/mountinfo, {}; {e}", pid1_path.display()),
        });
    }

    let mut opened = Vec::new();
    let mut unreachable = Vec::new();
    for (path, via_pid1) in candidates {
        match open_cgroup_dir(&path) {
            Ok((fd, id)) if id == ROOT_CGROUP_ID => {
                let note = via_pid1.then(|| "reached through PID 1's mount namespace".to_owned());
                return Ok((AuditRoot { path, cgroup_id: id, kind: RootKind::Hierarchy, note }, fd));
            }
            Ok((fd, id)) => opened.push((path, via_pid1, fd, id)),
            Err(e) => unreachable.push(e.to_string()),
        }
    }
    // Nested node: PID 1's own cgroup2 mount is rooted at its cgroup
    // namespace. Not when PID 1 is the agent's own pod's: its mount is the
    // pod's cgroup, and nothing above it would be seen.
    if let Some(i) = opened.iter().position(|o| o.1 && pid1_is_node) {
        let (path, _, fd, id) = opened.swap_remove(i);
        let note = Some("the hierarchy root (id 1) is not reachable from PID 1's mount namespace: auditing PID 1's cgroup-namespace root (nested node)".to_owned());
        return Ok((AuditRoot { path, cgroup_id: id, kind: RootKind::Pid1Namespace, note }, fd));
    }
    if let Some((path, _, fd, id)) = opened.into_iter().next() {
        let why = match &pid1 {
            Err(e) => e.to_string(),
            Ok(_) if !pid1_is_node => "PID 1 is not the node's init: the agent runs without hostPID".to_owned(),
            Ok(_) if unreachable.is_empty() => "PID 1 has no cgroup2 mount".to_owned(),
            Ok(_) => unreachable.join("; "),
        };
        let note = Some(format!(
            "the auditor runs in a private cgroup namespace: its cgroup2 mount is rooted at cgroup id {id}, not the hierarchy root, \
             and the host's view could not be reached ({why}). Attachments above this cgroup are invisible. \
             Run with hostPID: true and CAP_SYS_PTRACE so /proc/1/root is reachable, or on the host."
        ));
        return Ok((AuditRoot { path, cgroup_id: id, kind: RootKind::Namespaced, note }, fd));
    }
    Err(RootError::NoCgroup2 { looked_in: unreachable.join("; ") })
}

/// The agent's own cgroup2 mount, made once per process: detached
/// (fsopen/fsmount, attached to no directory, so no mount namespace shows
/// it and it goes with the descriptor), from PID 1's cgroup namespace so
/// that its top is PID 1's root.
static PRIVATE: std::sync::OnceLock<Result<OwnedFd, String>> = std::sync::OnceLock::new();

/// A node where nobody mounted cgroup2 (cgroup v1 controllers only) still
/// has the v2 hierarchy, and its programs run for every socket: read it
/// through a cgroup2 mount of the agent's own. Nothing on the host changes.
fn private_hierarchy(proc: &Path) -> Result<(AuditRoot, OwnedFd), String> {
    let mount = PRIVATE.get_or_init(|| private_cgroup2(proc)).as_ref().map_err(Clone::clone)?;
    // Reached by path through the descriptor, so that what reopens the
    // root by path (the daemon, between passes) reaches it too.
    let path = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(mount)));
    let (fd, id) = open_cgroup_dir(&path).map_err(|e| e.to_string())?;
    let kind = if id == ROOT_CGROUP_ID { RootKind::Hierarchy } else { RootKind::Pid1Namespace };
    let note = Some(format!(
        "no cgroup2 is mounted in PID 1's mount namespace or the agent's (a cgroup v1 node): the v2 hierarchy, whose \
         programs run for every socket regardless, is read through a cgroup2 mount of the agent's own, made from PID 1's \
         cgroup namespace and attached nowhere (cgroup id {id} at its top)"
    ));
    Ok((AuditRoot { path, cgroup_id: id, kind, note }, fd))
}

/// fsopen/fsmount of cgroup2, in PID 1's cgroup namespace when the agent
/// is in another (entered on a thread of its own, which then ends).
fn private_cgroup2(proc: &Path) -> Result<OwnedFd, String> {
    use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags};
    let make = || -> Result<OwnedFd, String> {
        let fs = rustix::mount::fsopen("cgroup2", FsOpenFlags::FSOPEN_CLOEXEC)
            .map_err(|e| format!("fsopen cgroup2: {e}"))?;
        rustix::mount::fsconfig_create(&fs).map_err(|e| format!("fsconfig(FSCONFIG_CMD_CREATE) cgroup2: {e}"))?;
        rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::MOUNT_ATTR_RDONLY)
            .map_err(|e| format!("fsmount cgroup2: {e}"))
    };
    let ns = |p: &Path| fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let pid1 = proc.join("1/ns/cgroup");
    if ns(&pid1).is_none_or(|theirs| Some(theirs) == ns(Path::new("/proc/self/ns/cgroup"))) {
        return make();
    }
    let target = fs::File::open(&pid1).map_err(|e| format!("open {}: {e}", pid1.display()))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&target, nix::sched::CloneFlags::CLONE_NEWCGROUP)
                .map_err(|e| format!("setns {}: {e}", pid1.display()))?;
            make()
        })
        .join()
        .unwrap_or_else(|_| Err("the thread that mounts cgroup2 panicked".into()))
    })
}

/// The cgroup id of the top of a mount in PID 1's mount namespace, reached
/// through `<proc>/1/root`. `Err` when that view is closed to us.
pub fn mount_top_id(proc: &Path, m: &Mount) -> io::Result<u64> {
    fs::metadata(in_root_of(proc, 1, &m.mount_point)).map(|md| md.ino())
}
