//! The two ways of reading the tree (one in-kernel pass of the cgroup
//! iterator; a directory walk with `BPF_PROG_QUERY` per hook) report each
//! cgroup the same way: a `Record` (id, parent, name, own programs), with a
//! way to reach the cgroup for what the walk did not bring (processes).
//! Records go to a `Sink`: the audit's `Placing` (the report's
//! `Placement`, and the daemon's `Tree` when it keeps one), or the daemon's
//! `Sweep` between full passes. These walks, and `read_cgroup` for one
//! cgroup, are the only readers of a cgroup's own programs.

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::host;
use crate::bpf::query::{self, Support};
use crate::bpf::sys::SyscallError;
use crate::bpf::{AttachFlags, AttachType};
use crate::cgroup::iter::{IterCgroup, IterError, Step, Walker};
use crate::cgroup::tree::{ProcessRef, Record, Tree};
use crate::cgroup::walk::{self, Visit, WalkError, WalkStats};
use crate::placement::{Access, Placement};

/// What one walk needs besides the tree.
pub struct WalkContext<'a> {
    pub root_id: u64,
    pub proc: &'a Path,
}

/// A failure reading one cgroup.
#[derive(Debug)]
pub struct VisitError {
    pub op: &'static str,
    pub error: String,
    /// The cgroup was removed meanwhile (ENOENT): counted, not an error.
    pub gone: bool,
}

impl VisitError {
    fn syscall(op: &'static str, e: &SyscallError) -> VisitError {
        VisitError { op, error: e.to_string(), gone: e.errno() == Some(libc::ENOENT) }
    }

    fn at(self, cgroup: &str) -> WalkError {
        WalkError { cgroup: cgroup.to_owned(), op: self.op, error: self.error }
    }
}

/// Where a walk's records go, one cgroup at a time, parents first.
pub trait Sink {
    /// One cgroup; `access` reaches it for what the record does not carry.
    fn record(&mut self, r: Record<'_>, access: &impl Access);
    /// The in-kernel pass runs again from the start: what came is void.
    fn restart(&mut self);
}

/// The audit's sink: the report's placement, and the daemon's tree.
pub struct Placing<'a> {
    pub placement: Placement<'a>,
    /// Every cgroup, while there are at most `tree_max` (the daemon's).
    pub tree: Option<Tree>,
    root_id: u64,
    tree_max: usize,
    /// The tree outgrew `tree_max` and was let go.
    pub tree_over: bool,
}

impl<'a> Placing<'a> {
    /// Records go to `placement`, and to a tree of up to `tree_max` cgroups
    /// (0: none).
    pub fn new(placement: Placement<'a>, root_id: u64, tree_max: usize) -> Placing<'a> {
        Placing { placement, tree: (tree_max > 0).then(|| Tree::new(root_id)), root_id, tree_max, tree_over: false }
    }
}

impl Sink for Placing<'_> {
    fn record(&mut self, r: Record<'_>, access: &impl Access) {
        let seen = self.placement.add(r, access);
        if let Some(tree) = &mut self.tree {
            if tree.len() >= self.tree_max && !tree.contains(r.id) {
                // Past it the whole tree goes (its memory with it).
                self.tree = None;
                self.tree_over = true;
            } else {
                tree.add(r, seen.populated, seen.processes);
            }
        }
    }

    fn restart(&mut self) {
        self.placement.restart();
        if !self.tree_over && self.tree_max > 0 {
            self.tree = Some(Tree::new(self.root_id));
        }
    }
}

/// Whether the open cgroup `fd` holds processes, in it or below it:
/// `cgroup.events` says `populated 1` (false when it cannot be read).
pub fn populated(fd: BorrowedFd<'_>) -> bool {
    let Ok(fd) = openat(fd, "cgroup.events", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
        return false;
    };
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::Read::take(std::fs::File::from(fd), 4096), &mut text);
    text.lines().any(|l| l.trim() == "populated 1")
}

/// A cgroup the syscall walk holds open.
struct OpenCgroup<'a> {
    fd: BorrowedFd<'a>,
    proc: &'a Path,
}

impl Access for OpenCgroup<'_> {
    fn populated(&self) -> bool {
        populated(self.fd)
    }

    fn processes(&self) -> Vec<ProcessRef> {
        host::processes(self.fd, self.proc)
    }
}

/// A cgroup the in-kernel pass reported: whether it holds processes from
/// its record; for the rest it is opened by id (by its path below the root
/// without CAP_DAC_READ_SEARCH).
struct IteratedCgroup<'a> {
    root: BorrowedFd<'a>,
    id: u64,
    /// Below the root, without the leading `/`.
    path: &'a [u8],
    populated: bool,
    proc: &'a Path,
}

impl IteratedCgroup<'_> {
    fn open(&self) -> Option<OwnedFd> {
        if let Ok(fd) = crate::os::open_cgroup_by_id(self.root, self.id) {
            return Some(fd);
        }
        let rel = if self.path.is_empty() { CString::new(".").ok()? } else { CString::new(self.path).ok()? };
        let fd =
            openat(self.root, rel.as_c_str(), OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
                .ok()?;
        (nix::sys::stat::fstat(fd.as_fd()).ok()?.st_ino == self.id).then_some(fd)
    }
}

impl Access for IteratedCgroup<'_> {
    fn populated(&self) -> bool {
        self.populated
    }

    fn populated_known(&self) -> Option<bool> {
        Some(self.populated)
    }

    fn processes(&self) -> Vec<ProcessRef> {
        // Not found: removed since the pass, with nobody left to name.
        self.open().map(|fd| host::processes(fd.as_fd(), self.proc)).unwrap_or_default()
    }
}

/// Opens cgroup `id` of the audited tree: by file handle, else (without
/// CAP_DAC_READ_SEARCH) down from the root one name at a time (`names`, as
/// `Tree::names` gives them: no path is built, so neither its length nor
/// its bytes matter), and kept only if it is cgroup `id`.
pub fn open_by_id(root: BorrowedFd<'_>, id: u64, names: &[&[u8]]) -> Result<OwnedFd, VisitError> {
    match crate::os::open_cgroup_by_id(root, id) {
        Ok(fd) => return Ok(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ESTALE | libc::ENOENT)) => {
            return Err(VisitError { op: "open_by_handle_at", error: e.to_string(), gone: true });
        }
        Err(_) => {}
    }
    let gone = |e: nix::Error| VisitError { op: "open", error: e.to_string(), gone: e == nix::Error::ENOENT };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut fd = openat(root, ".", flags, Mode::empty()).map_err(gone)?;
    for name in names {
        let name =
            CString::new(*name).map_err(|_| VisitError { op: "open", error: "a NUL in a name".into(), gone: true })?;
        fd = openat(fd.as_fd(), name.as_c_str(), flags, Mode::empty()).map_err(gone)?;
    }
    let ino = nix::sys::stat::fstat(fd.as_fd()).map_err(gone)?.st_ino;
    if ino != id {
        return Err(VisitError { op: "open", error: format!("cgroup {ino} is there now, not {id}"), gone: false });
    }
    Ok(fd)
}

/// Reads one cgroup again, as a walk's visit would (the daemon, after the
/// kernel reported a change on it): the programs on `hooks`, and, when
/// `processes` asks, its processes if it holds socket-LB programs below the
/// root.
pub fn read_cgroup(
    fd: BorrowedFd<'_>,
    id: u64,
    hooks: &[AttachType],
    processes: bool,
    ctx: &WalkContext<'_>,
    seen: &mut query::Revisions,
) -> Result<(Vec<query::Attached>, Vec<ProcessRef>), VisitError> {
    let mut raw = Vec::new();
    let support = Support { supported: hooks.to_vec(), unsupported: Vec::new() };
    query::attached_since(fd, id, &support, seen, &mut raw).map_err(|e| VisitError::syscall("query", &e))?;
    let processes = if processes && id != ctx.root_id && raw.iter().any(|a| crate::owner::is_root_hook(a.attach_type)) {
        host::processes(fd, ctx.proc)
    } else {
        Vec::new()
    };
    Ok((raw, processes))
}

/// Walks every cgroup below `root` by syscalls, querying the hooks in
/// `support`.
pub fn walk_cgroups(root: OwnedFd, support: &Support, ctx: &WalkContext<'_>, sink: &mut impl Sink) -> WalkStats {
    let mut raw = Vec::new();
    walk::walk(root, ctx.root_id, |entry, fd| {
        raw.clear();
        match query::attached(fd, support, &mut raw).map_err(|e| VisitError::syscall("query", &e)) {
            Ok(()) => {
                let r = Record { id: entry.id, parent: entry.parent, name: entry.name, own: &raw };
                sink.record(r, &OpenCgroup { fd, proc: ctx.proc });
                Ok(Visit::Done)
            }
            Err(e) if e.gone => Ok(Visit::Vanished),
            Err(e) => Err(e.at(entry.path)),
        }
    })
}

/// The same as `walk_cgroups`, from one pass of the in-kernel iterator: the
/// iterator reports every hook's list, so no hook is skipped and no program
/// loaded mid-walk can be missed; the tree is read under `cgroup_mutex`, so
/// nothing vanishes half-read.
///
/// `names_after`: a sweep (`Walker::sweep`), whose records name only the
/// cgroups with larger ids; the others' paths are then not known here, and
/// are neither opened by path nor named in errors (`None`: every cgroup
/// named).
pub fn iter_cgroups(
    walker: &Walker,
    root: BorrowedFd<'_>,
    names_after: Option<u64>,
    ctx: &WalkContext<'_>,
    sink: &mut impl Sink,
) -> Result<(WalkStats, crate::cgroup::iter::IterStats), IterError> {
    let mut stats = WalkStats::default();
    // (cgroup id, length of its path): the ancestors of the cgroup being
    // visited, since records come in pre-order; the path serves to open a
    // cgroup without CAP_DAC_READ_SEARCH.
    let mut stack: Vec<(u64, usize)> = Vec::new();
    let mut path: Vec<u8> = Vec::new();
    let mut raw = Vec::new();
    let hooks = &walker.kernel().hooks;
    let visit = |step| {
        let c: IterCgroup = match step {
            Step::Cgroup(c) => c,
            Step::Restart => {
                sink.restart();
                stats = WalkStats::default();
                stack.clear();
                return;
            }
        };
        if stack.is_empty() {
            path.clear();
        } else {
            while stack.last().is_some_and(|&(id, _)| id != c.parent_id) {
                stack.pop();
            }
            let parent_len = stack.last().map_or(0, |&(_, len)| len);
            path.truncate(parent_len);
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&c.name);
        }
        stack.push((c.id, path.len()));
        stats.scanned += 1;

        raw.clear();
        for p in &c.programs {
            match hooks.get(p.atype as usize).and_then(|h| h.1) {
                Some(t) => raw.push(query::Attached {
                    attach_type: t,
                    flags: AttachFlags::from_kernel(p.flags),
                    prog_id: p.prog_id,
                    prog_flags: p.prog_flags,
                }),
                None => stats.errors.push(WalkError {
                    cgroup: match names_after {
                        None => format!("/{}", crate::text::shown(&path)),
                        Some(_) => format!("cgroup {}", c.id),
                    },
                    op: "bpf_iter",
                    error: format!(
                        "program {} on hook {} ({}), which this agent does not know",
                        p.prog_id,
                        p.atype,
                        hooks.get(p.atype as usize).map(|h| h.0.as_str()).unwrap_or("?")
                    ),
                }),
            }
        }
        let parent = if c.id == ctx.root_id { 0 } else { c.parent_id };
        let access = IteratedCgroup { root, id: c.id, path: &path, populated: c.populated, proc: ctx.proc };
        sink.record(Record { id: c.id, parent, name: &c.name, own: &raw }, &access);
    };
    let iter_stats = match names_after {
        None => walker.walk(root, visit)?,
        Some(after) => walker.sweep(root, after, visit)?,
    };
    Ok((stats, iter_stats))
}
