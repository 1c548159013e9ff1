//! `agent remount`: the only code that changes the host, and only with
//! `--apply`. It does natively what Cilium's `mount-cgroup` init container
//! does with `nsenter` and `cilium-mount`, but plans first, verifies after,
//! and never fails silently:
//!
//! 1. observe the path in the target's mount namespace and plan (`plan.rs`);
//! 2. with `--apply`, under a node-wide lock, run the single-threaded helper
//!    that enters the target's cgroup and mount namespaces and mounts
//!    cgroup2 (`helper.rs`);
//! 3. verify from the host's view that the mount's top is the root;
//! 4. optionally detach CNI-owned programs left below the root and remove
//!    Cilium's stale link pins (`programs.rs`).

pub mod helper;
pub mod plan;
pub mod programs;

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;

use crate::cgroup::RootKind;
use crate::cgroup::root::{self, in_root_of};
use crate::mounts;
use plan::{PathState, Plan};

/// Why a remount could not even be planned.
#[derive(Debug, thiserror::Error)]
pub enum RemountError {
    #[error("target pid {pid}: no such process under {proc}")]
    NoTarget { pid: u32, proc: PathBuf },
    #[error("cannot reach {path}: {error} (needs hostPID and CAP_SYS_PTRACE)")]
    Unreachable { path: PathBuf, error: io::Error },
    #[error("cannot tell the hierarchy root: {0}")]
    Reference(String),
    #[error(transparent)]
    Io(#[from] root::RootError),
}

fn file_type_name(md: &fs::Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_file() {
        "regular file"
    } else if t.is_socket() {
        "socket"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "non-directory"
    }
}

/// What `path` holds in the mount namespace of `pid`.
pub fn observe(proc: &Path, pid: u32, path: &Path) -> Result<PathState, RemountError> {
    let mi_path = proc.join(format!("{pid}/mountinfo"));
    if !mi_path.exists() {
        return Err(RemountError::NoTarget { pid, proc: proc.to_owned() });
    }
    let mountinfo = root::read_mountinfo(&mi_path)?.mounts;
    let seen = in_root_of(proc, pid, path);
    let md = match fs::symlink_metadata(&seen) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PathState::Absent),
        Err(e) => return Err(RemountError::Unreachable { path: seen, error: e }),
    };
    if !md.is_dir() {
        return Ok(PathState::NotDirectory { file_type: file_type_name(&md).to_owned() });
    }
    Ok(match mounts::top_mount_at(&mountinfo, path) {
        None => PathState::Directory,
        Some(m) => PathState::Mounted {
            fs_type: m.fs_type.clone(),
            mountinfo_root: m.root.clone(),
            // The directory's inode is the cgroup id of the mount's top.
            top_cgroup_id: m.is_cgroup2().then(|| md.ino()),
        },
    })
}

/// The id a correct mount's top must have: the hierarchy root, or PID 1's
/// cgroup-namespace root on a nested node (as `agent audit` decides).
pub fn reference_root(proc: &Path) -> Result<u64, RemountError> {
    let (root, _fd) = root::discover(proc)?;
    match root.kind {
        RootKind::Hierarchy | RootKind::Pid1Namespace => Ok(root.cgroup_id),
        _ => Err(RemountError::Reference(root.note.unwrap_or_default())),
    }
}

/// Observes and plans.
pub fn make_plan(proc: &Path, pid: u32, path: &Path) -> Result<Plan, RemountError> {
    let state = observe(proc, pid, path)?;
    Ok(plan::plan(path.to_owned(), state, reference_root(proc)?))
}

/// A node-wide lock on a file in the target's /run, so two agents (the
/// daemon and a person, or two daemons) cannot remediate at once.
pub struct NodeLock {
    _lock: Flock<fs::File>,
}

pub const LOCK_FILE: &str = "run/cgaudit-remediation.lock";

impl NodeLock {
    pub fn acquire(proc: &Path, pid: u32) -> Result<NodeLock, String> {
        let path = proc.join(format!("{pid}/root")).join(LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("lock {}: {e}", path.display()))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| format!("another cgaudit remediation holds {} ({e})", path.display()))?;
        Ok(NodeLock { _lock: lock })
    }
}

/// How one remediation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    NothingToDo,
    DryRun,
    Done,
    Refused,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Applies a plan that changes something: lock, helper, verify. Returns the
/// state seen afterwards.
pub fn apply(proc: &Path, pid: u32, plan: &Plan) -> Result<PathState, String> {
    let _lock = NodeLock::acquire(proc, pid)?;
    // NB: the state may have changed since planning (another tool); plan again
    // under the lock and act only on what is true now.
    let now = make_plan(proc, pid, &plan.path).map_err(|e| e.to_string())?;
    if now.action != plan.action {
        return Err(format!("the mount changed while planning (now: {}); run again", now.reason));
    }
    helper::run(proc, pid, &plan.path, plan.action)?;
    let after = observe(proc, pid, &plan.path).map_err(|e| e.to_string())?;
    match &after {
        PathState::Mounted { fs_type, top_cgroup_id: Some(id), .. }
            if fs_type == "cgroup2" && *id == plan.reference_root_id =>
        {
            Ok(after)
        }
        other => Err(format!(
            "verification failed: after mounting, {} holds {other}, not cgroup2 rooted at cgroup id {}",
            plan.path.display(),
            plan.reference_root_id
        )),
    }
}
