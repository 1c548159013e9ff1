//! The sweep of the sources that see no cgroup being made or removed
//! (`reading`, `syscalls`): every cgroup's id, parent and whether
//! processes are in it, the names of those made since the picture knew the
//! tree, and every cgroup's own programs (no processes, mounts or pins), for
//! the daemon to compare with its picture, on a period sized from what one
//! sweep costs. The in-kernel pass where the kernel runs it, else one
//! `BPF_PROG_QUERY` per hook and cgroup: the audit's own walks
//! (`scan::visit`), with a `Sweep` as their sink. What the daemon does
//! with it is `Picture::after_sweep`'s to say.
//!
//! It replaces the cgroup_mkdir/cgroup_rmdir tracepoints: while those are
//! enabled the kernel formats every new or removed cgroup's whole path
//! under cgroup_mutex (`TRACE_CGROUP_PATH`), which a pod churning a deep
//! chain turned into a stall of every cgroup operation on the node.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::path::Path;

use crate::bpf::query::{Attached, Support};
use crate::cgroup::iter::Walker;
use crate::cgroup::tree::Record;
use crate::placement::Access;
use crate::scan::visit::{self, Sink, WalkContext};

/// The tree as one sweep saw it, and each cgroup's own programs: the sink
/// of the audit's own walks.
#[derive(Debug, Default)]
pub struct Sweep {
    /// cgroups seen (the root and every descendant).
    pub cgroups: u64,
    /// Every cgroup seen, parents before children.
    pub seen: Vec<Seen>,
    /// The names of the cgroups made since the tree the sweep was told of
    /// (ids above `names_after`), by id.
    pub named: HashMap<u64, Vec<u8>>,
    pub attached: HashMap<u64, Vec<Attached>>,
    names_after: u64,
}

/// One cgroup a sweep saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub id: u64,
    pub parent: u64,
    /// Processes are in it (`None`: the syscall walk reads it only for
    /// the cgroups made since the picture's tree).
    pub populated: Option<bool>,
}

impl Sweep {
    /// An empty sweep that keeps the names of cgroups above `names_after`.
    pub fn new(names_after: u64) -> Sweep {
        Sweep { names_after, ..Sweep::default() }
    }
}

impl Sink for Sweep {
    fn record(&mut self, r: Record<'_>, access: &impl Access) {
        self.cgroups += 1;
        // A cgroup new to the picture is taken as the full pass takes it:
        // the syscall walk reads `cgroup.events` for it (the iterator's
        // record says it for every cgroup).
        let new = r.id > self.names_after;
        let populated = access.populated_known().or_else(|| new.then(|| access.populated()));
        self.seen.push(Seen { id: r.id, parent: r.parent, populated });
        if new && !r.name.is_empty() {
            self.named.insert(r.id, r.name.to_vec());
        }
        if !r.own.is_empty() {
            self.attached.insert(r.id, r.own.to_vec());
        }
    }

    fn restart(&mut self) {
        *self = Sweep::new(self.names_after);
    }
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
    // No process is read: the proc root is never used.
    let ctx = WalkContext { root_id, proc: Path::new("/proc") };
    if in_kernel {
        let mut out = Sweep::new(names_after);
        // A program on a hook this agent does not know is left out (the
        // full pass reports it), as before the in-kernel pass was tried.
        if let Ok(Ok(_)) = Walker::shared(|w| visit::iter_cgroups(w, root, Some(names_after), &ctx, &mut out)) {
            return Ok(out);
        }
    }
    let fd = root.try_clone_to_owned().map_err(SweepError::Dup)?;
    let mut out = Sweep::new(names_after);
    let stats = visit::walk_cgroups(fd, support, &ctx, &mut out);
    if let Some(e) = stats.errors.first() {
        return Err(SweepError::Walk { op: e.op, cgroup: e.cgroup.clone(), error: e.error.clone() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::tree::ProcessRef;

    /// A cgroup as the syscall walk gives it: whether processes are in it
    /// is read only when asked.
    struct ByFile {
        populated: bool,
        asked: std::cell::Cell<u32>,
    }

    impl Access for ByFile {
        fn populated(&self) -> bool {
            self.asked.set(self.asked.get() + 1);
            self.populated
        }
        fn processes(&self) -> Vec<ProcessRef> {
            Vec::new()
        }
    }

    /// A cgroup new to the picture is read as the full pass reads it
    /// (`cgroup.events`), not taken for populated; the others are not
    /// read at all (the syscall sweep costs one file per new cgroup only).
    #[test]
    fn the_syscall_sweep_reads_whether_new_cgroups_hold_processes() {
        let mut s = Sweep::new(10);
        let empty = ByFile { populated: false, asked: Default::default() };
        s.record(Record { id: 12, parent: 1, name: b"new", own: &[] }, &empty);
        let old = ByFile { populated: true, asked: Default::default() };
        s.record(Record { id: 5, parent: 1, name: b"old", own: &[] }, &old);
        assert_eq!(s.seen[0], Seen { id: 12, parent: 1, populated: Some(false) });
        assert_eq!(s.seen[1], Seen { id: 5, parent: 1, populated: None });
        assert_eq!((empty.asked.get(), old.asked.get()), (1, 0));
        assert_eq!(s.named.get(&12).map(Vec::as_slice), Some(&b"new"[..]));
    }
}
