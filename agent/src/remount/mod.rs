//! `agent remount`: the only code that changes the host, and only with
//! `--apply`. It does natively what Cilium's `mount-cgroup` init container
//! does with `nsenter` and `cilium-mount`, but plans first, verifies after,
//! and never fails silently:
//!
//! 1. open the target once, as a pidfd (`Target::open`);
//! 2. in the single-threaded helper, enter PID 1's cgroup namespace and the
//!    target's mount namespace and look at the path from there, following no link
//!    (`helper.rs`, `mountpoint.rs`); plan (`plan.rs`);
//! 3. with `--apply`, in the helper again, under a node-wide lock: check the
//!    path is still exactly what was planned, make the new cgroup2 mount,
//!    check its root, attach it, verify;
//! 4. optionally detach CNI-owned programs left below the root and remove
//!    Cilium's stale link pins (`programs.rs`).

pub mod helper;
pub(crate) mod mountpoint;
pub mod plan;
pub mod programs;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::io::Errno;
use serde::Serialize;

use crate::cgroup::RootKind;
use crate::cgroup::root::{self};
pub use mountpoint::{Failure, LOCK_FILE, Replaced};
use plan::{Action, PathState, Plan};

/// Why a remount could not be planned or applied.
#[derive(Debug, thiserror::Error)]
pub enum RemountError {
    #[error("target pid {pid}: no such process")]
    NoTarget { pid: u32 },
    #[error("target pid {pid}: pidfd_open: {error}")]
    Unreachable { pid: u32, error: std::io::Error },
    /// The root found is not one a mount can be checked against (a
    /// namespaced view, or a root given by hand); `note` says why.
    #[error("cannot tell the hierarchy root: {note}")]
    Reference { kind: RootKind, note: String },
    #[error(transparent)]
    Root(#[from] root::RootError),
    #[error("locating this binary to run as the remount helper: {0}")]
    HelperExe(#[source] std::io::Error),
    #[error("encoding the remount helper's request: {0}")]
    HelperRequest(#[source] serde_json::Error),
    #[error("starting {} __remount-helper: {error}", helper.display())]
    HelperSpawn { helper: PathBuf, error: std::io::Error },
    #[error("waiting for the remount helper: {0}")]
    HelperWait(#[source] std::io::Error),
    /// It answered nothing this binary can read: how it ended, and what it
    /// wrote on stderr.
    #[error("the remount helper {status}: {stderr}")]
    HelperFailed { status: std::process::ExitStatus, stderr: String },
    #[error("the remount helper did not answer within {}; it was killed", humantime::format_duration(*.0))]
    HelperTimeout(Duration),
    #[error(transparent)]
    Failed(#[from] Failure),
    #[error(
        "verification failed: after mounting, {} holds {state}, not cgroup2 rooted at cgroup id {reference}",
        path.display()
    )]
    NotVerified { path: PathBuf, state: Box<PathState>, reference: u64 },
}

/// How long the helper may take before it is killed.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// The process whose namespaces are the node's, held as a pidfd from the
/// moment it is named: if it exits, the pid can be reused by another process
/// but this handle cannot, and every later step fails instead.
pub struct Target {
    pub pid: u32,
    pidfd: OwnedFd,
    proc: PathBuf,
    /// The binary run as `__remount-helper`: this one, unless told.
    helper: PathBuf,
    timeout: Duration,
    /// `--nested-node`: PID 1's namespaces are a nested node's.
    nested_node: bool,
}

impl Target {
    /// `pid` as this process sees it (the agent runs with hostPID); `proc`
    /// is where procfs is mounted.
    pub fn open(proc: &Path, pid: u32) -> Result<Target, RemountError> {
        let raw = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw);
        let pidfd = match raw.map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())) {
            Some(Ok(fd)) => fd,
            None | Some(Err(Errno::SRCH)) => return Err(RemountError::NoTarget { pid }),
            Some(Err(e)) => return Err(RemountError::Unreachable { pid, error: e.into() }),
        };
        let helper = std::env::current_exe().map_err(RemountError::HelperExe)?;
        Ok(Target { pid, pidfd, proc: proc.to_owned(), helper, timeout: HELPER_TIMEOUT, nested_node: false })
    }

    /// Runs `exe` as the helper (a library caller that is not the agent).
    pub fn with_helper(mut self, exe: PathBuf) -> Target {
        self.helper = exe;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Target {
        self.timeout = timeout;
        self
    }

    /// PID 1 of `proc` is a nested node's init, as `--nested-node` says.
    pub fn nested_node(mut self, nested: bool) -> Target {
        self.nested_node = nested;
        self
    }

    /// Looks at `path` from inside the target's namespaces and plans.
    pub fn plan(&self, path: &Path) -> Result<Plan, RemountError> {
        let reference = reference_root(&self.proc, self.nested_node)?;
        let (seen, _) = helper::run(self, &helper::Request::Observe { path: path.to_owned() })?;
        Ok(plan::plan(path.to_owned(), seen, reference))
    }

    /// Applies a plan that changes something, if the path is still exactly
    /// what was planned. Returns the state seen afterwards, verified, and
    /// how a replaced mount was replaced.
    pub fn apply(&self, plan: &Plan) -> Result<(PathState, Option<Replaced>), RemountError> {
        let request = helper::Request::Apply {
            path: plan.path.clone(),
            action: plan.action,
            expected: plan::Observed { state: plan.state.clone(), identity: plan.identity },
            reference_root_id: plan.reference_root_id,
        };
        let (seen, replaced) = helper::run(self, &request)?;
        let after = seen.state;
        match &after {
            PathState::Mounted { top_cgroup_id: Some(id), .. } if *id == plan.reference_root_id => {
                Ok((after, replaced))
            }
            _ => Err(RemountError::NotVerified {
                path: plan.path.clone(),
                state: Box::new(after),
                reference: plan.reference_root_id,
            }),
        }
    }

    /// Plans and, when `apply` and the plan changes something, applies:
    /// the one sequence both `agent remount` and `agent run` use.
    pub fn remediate(&self, path: &Path, apply: bool) -> Result<Remediation, RemountError> {
        let plan = self.plan(path)?;
        let (outcome, after, replaced, error) = match plan.action {
            Action::Nothing => (Outcome::NothingToDo, None, None, None),
            Action::Refuse => (Outcome::Refused, None, None, None),
            _ if !apply => (Outcome::DryRun, None, None, None),
            _ => match self.apply(&plan) {
                Ok((after, replaced)) => (Outcome::Done, Some(after), replaced, None),
                Err(e) => (Outcome::Failed, None, None, Some(e)),
            },
        };
        Ok(Remediation { plan, outcome, after, replaced, error })
    }
}

/// One plan, and what became of it.
#[derive(Debug)]
pub struct Remediation {
    pub plan: Plan,
    pub outcome: Outcome,
    pub after: Option<PathState>,
    /// How a namespaced mount was replaced, when one was.
    pub replaced: Option<Replaced>,
    pub error: Option<RemountError>,
}

/// The id a correct mount's top must have: the hierarchy root, or PID 1's
/// cgroup-namespace root on a nested node (as `agent audit` decides).
pub fn reference_root(proc: &Path, nested_node: bool) -> Result<u64, RemountError> {
    let pid1_is_node = matches!(crate::scan::host::pid_view(proc, nested_node), crate::snapshot::PidView::Node { .. });
    let (root, _fd) = root::discover(proc, pid1_is_node)?;
    match root.kind {
        RootKind::Hierarchy | RootKind::Pid1Namespace => Ok(root.cgroup_id),
        kind => Err(RemountError::Reference { kind, note: root.note.unwrap_or_default() }),
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
