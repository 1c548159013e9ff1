//! The attachment sweep of the reading fallback (`trace::Source::Reading`):
//! every cgroup's own programs and nothing else (no names, processes,
//! mounts or pins), for the daemon to compare with its picture, on a period
//! sized from what one sweep costs. The in-kernel pass where the kernel
//! runs it, else one `BPF_PROG_QUERY` per hook and cgroup.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};

use crate::bpf::AttachFlags;
use crate::bpf::query::{self, Attached, Support};
use crate::cgroup::iter::{Step, Walker};
use crate::cgroup::walk::{self, Visit};

/// Each cgroup's own programs, for the cgroups that have any.
#[derive(Debug, Default)]
pub struct Sweep {
    /// cgroups seen (the root and every descendant).
    pub cgroups: u64,
    pub attached: HashMap<u64, Vec<Attached>>,
}

/// Why a sweep saw nothing: the call that failed, and on which cgroup.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("dup of the audit root's fd: {0}")]
    Dup(#[source] std::io::Error),
    #[error("{op} of cgroup {cgroup:?}: {error}")]
    Walk { op: String, cgroup: String, error: String },
}

/// Sweeps the tree below `root` (cgroup `root_id`). `in_kernel`: try the
/// iterator first. `Err` only when no walk could run at all.
pub fn sweep(root: BorrowedFd<'_>, root_id: u64, support: &Support, in_kernel: bool) -> Result<Sweep, SweepError> {
    if in_kernel && let Ok(Ok(s)) = Walker::shared(|w| iterated(w, root)) {
        return Ok(s);
    }
    let fd = root.try_clone_to_owned().map_err(SweepError::Dup)?;
    let mut out = Sweep::default();
    let mut raw = Vec::new();
    let stats = walk::walk(fd, root_id, |entry, fd| {
        let id = entry.id;
        raw.clear();
        match query::attached(fd, support, &mut raw) {
            Ok(()) => {
                if !raw.is_empty() {
                    out.attached.insert(id, raw.clone());
                }
                Ok(Visit::Done)
            }
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(Visit::Vanished),
            Err(e) => Err(walk::WalkError { cgroup: String::new(), op: "query".into(), error: e.to_string() }),
        }
    });
    if let Some(e) = stats.errors.first() {
        return Err(SweepError::Walk { op: e.op.clone(), cgroup: e.cgroup.clone(), error: e.error.clone() });
    }
    out.cgroups = stats.scanned;
    Ok(out)
}

fn iterated(w: &Walker, root: BorrowedFd<'_>) -> Result<Sweep, crate::cgroup::iter::IterError> {
    let hooks = &w.kernel().hooks;
    let mut out = Sweep::default();
    let stats = w.sweep(root.as_fd(), |step| {
        let c = match step {
            Step::Cgroup(c) => c,
            Step::Restart => {
                out = Sweep::default();
                return;
            }
        };
        let progs: Vec<Attached> = c
            .programs
            .iter()
            .filter_map(|p| {
                let attach_type = hooks.get(p.atype as usize).and_then(|h| h.1)?;
                Some(Attached { attach_type, flags: AttachFlags::from_kernel(p.flags), prog_id: p.prog_id })
            })
            .collect();
        if !progs.is_empty() {
            out.attached.insert(c.id, progs);
        }
    })?;
    out.cgroups = stats.visited;
    Ok(out)
}
