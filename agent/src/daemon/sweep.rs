//! The sweep of the sources that see no cgroup being made or removed
//! (`reading`, `syscalls`): every cgroup's id, parent and whether
//! processes are in it, the names of those made since the picture knew the
//! tree, and every cgroup's own programs (no processes, mounts or pins), for
//! the daemon to compare with its picture, on a period sized from what one
//! sweep costs. The in-kernel pass where the kernel runs it, else one
//! `BPF_PROG_QUERY` per hook and cgroup.
//!
//! It replaces the cgroup_mkdir/cgroup_rmdir tracepoints: while those are
//! enabled the kernel formats every new or removed cgroup's whole path
//! under cgroup_mutex (`TRACE_CGROUP_PATH`), which a pod churning a deep
//! chain turned into a stall of every cgroup operation on the node.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};

use crate::bpf::AttachFlags;
use crate::bpf::query::{self, Attached, Support};
use crate::cgroup::iter::{Step, Walker};
use crate::cgroup::walk::{self, Visit};

/// The tree as one sweep saw it, and each cgroup's own programs.
#[derive(Debug, Default)]
pub struct Sweep {
    /// cgroups seen (the root and every descendant).
    pub cgroups: u64,
    /// Every cgroup seen, parents before children.
    pub seen: Vec<Seen>,
    /// The names of the cgroups made since the tree the sweep was told of
    /// (ids above its `names_after`), by id.
    pub named: HashMap<u64, Vec<u8>>,
    pub attached: HashMap<u64, Vec<Attached>>,
}

/// One cgroup a sweep saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub id: u64,
    pub parent: u64,
    /// Processes are in it (`None`: the syscall walk does not read it).
    pub populated: Option<bool>,
}

/// Why a sweep saw nothing: the call that failed, and on which cgroup.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("dup of the audit root's fd: {0}")]
    Dup(#[source] std::io::Error),
    #[error("{op} of cgroup {cgroup:?}: {error}")]
    Walk { op: &'static str, cgroup: String, error: String },
}

/// Sweeps the tree below `root` (cgroup `root_id`), naming the cgroups
/// whose ids are above `names_after`. `in_kernel`: try the iterator first.
/// `Err` only when no walk could run at all.
pub fn sweep(
    root: BorrowedFd<'_>,
    root_id: u64,
    names_after: u64,
    support: &Support,
    in_kernel: bool,
) -> Result<Sweep, SweepError> {
    if in_kernel && let Ok(Ok(s)) = Walker::shared(|w| iterated(w, root, names_after)) {
        return Ok(s);
    }
    let fd = root.try_clone_to_owned().map_err(SweepError::Dup)?;
    let mut out = Sweep::default();
    let mut raw = Vec::new();
    let stats = walk::walk(fd, root_id, |entry, fd| {
        let id = entry.id;
        out.seen.push(Seen { id, parent: entry.parent, populated: None });
        if id > names_after {
            out.named.insert(id, entry.name.to_vec());
        }
        raw.clear();
        match query::attached(fd, support, &mut raw) {
            Ok(()) => {
                if !raw.is_empty() {
                    out.attached.insert(id, raw.clone());
                }
                Ok(Visit::Done)
            }
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(Visit::Vanished),
            Err(e) => Err(walk::WalkError { cgroup: String::new(), op: "query", error: e.to_string() }),
        }
    });
    if let Some(e) = stats.errors.first() {
        return Err(SweepError::Walk { op: e.op, cgroup: e.cgroup.clone(), error: e.error.clone() });
    }
    out.cgroups = stats.scanned;
    Ok(out)
}

fn iterated(w: &Walker, root: BorrowedFd<'_>, names_after: u64) -> Result<Sweep, crate::cgroup::iter::IterError> {
    let hooks = &w.kernel().hooks;
    let mut out = Sweep::default();
    let stats = w.sweep(root.as_fd(), names_after, |step| {
        let c = match step {
            Step::Cgroup(c) => c,
            Step::Restart => {
                out = Sweep::default();
                return;
            }
        };
        out.seen.push(Seen { id: c.id, parent: c.parent_id, populated: Some(c.populated) });
        if !c.name.is_empty() {
            out.named.insert(c.id, c.name);
        }
        let progs: Vec<Attached> = c
            .programs
            .iter()
            .filter_map(|p| {
                let attach_type = hooks.get(p.atype as usize).and_then(|h| h.1)?;
                Some(Attached {
                    attach_type,
                    flags: AttachFlags::from_kernel(p.flags),
                    prog_id: p.prog_id,
                    prog_flags: p.prog_flags,
                })
            })
            .collect();
        if !progs.is_empty() {
            out.attached.insert(c.id, progs);
        }
    })?;
    out.cgroups = stats.visited;
    Ok(out)
}
