//! The two ways of reading the tree (one in-kernel pass of the cgroup
//! iterator; a directory walk with `BPF_PROG_QUERY` per hook) report each
//! cgroup the same way: its path, id and own attachments, plus a handle
//! that reaches the cgroup for what the walk did not bring (effective
//! programs, processes). `Found::visit` turns that into the snapshot's
//! attachments, pods and processes, once for both walks (and for the
//! daemon's re-reads of one cgroup).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::host;
use crate::attribution;
use crate::bpf::iter::{IterCgroup, IterError, Step, Walker};
use crate::bpf::query::{self, Support};
use crate::bpf::sys::SyscallError;
use crate::bpf::{AttachFlags, AttachType};
use crate::cgroup::walk::{self, Visit, WalkError, WalkStats};
use crate::snapshot::{Attachment, BelowPod, PodCgroup, ProcessRef, TreeEntry};

/// What one walk needs besides the tree.
pub struct WalkContext<'a> {
    pub root_id: u64,
    /// cgroup ids whose paths are recorded (mount tops, event callers).
    pub wanted: &'a HashSet<u64>,
    pub proc: &'a Path,
    /// Record every cgroup in `Found::tree`, up to this many (0: none); a
    /// tree larger than that is dropped whole (`Found::tree_over`).
    pub tree_max: usize,
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
        WalkError { cgroup: cgroup.to_owned(), op: self.op.to_owned(), error: self.error }
    }
}

/// How a visit reaches a cgroup for what its walk did not bring.
pub trait CgroupAccess {
    /// Whether processes are in the cgroup itself.
    fn populated(&self) -> bool;
    /// The processes in the cgroup (none when it is gone).
    fn processes(&self, proc: &Path) -> Vec<ProcessRef>;
}

/// A cgroup the walk holds open.
pub struct OpenCgroup<'a>(pub BorrowedFd<'a>);

impl CgroupAccess for OpenCgroup<'_> {
    /// `cgroup.events` says `populated 1` when processes are in it or below
    /// it; asked of the cgroups below pods, whose leaves are what counts.
    fn populated(&self) -> bool {
        let Ok(fd) = openat(self.0, "cgroup.events", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
            return false;
        };
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text);
        text.lines().any(|l| l.trim() == "populated 1")
    }

    fn processes(&self, proc: &Path) -> Vec<ProcessRef> {
        host::processes(self.0, proc)
    }
}

/// A cgroup the in-kernel pass reported: whether it holds processes from
/// its record; for the rest it is opened (relative to the root).
struct IteratedCgroup<'a> {
    root: BorrowedFd<'a>,
    path: &'a str,
    populated: bool,
}

impl IteratedCgroup<'_> {
    fn open(&self) -> nix::Result<OwnedFd> {
        let rel = self.path.trim_start_matches('/');
        let rel = if rel.is_empty() { "." } else { rel };
        openat(self.root, rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
    }
}

impl CgroupAccess for IteratedCgroup<'_> {
    fn populated(&self) -> bool {
        self.populated
    }

    fn processes(&self, proc: &Path) -> Vec<ProcessRef> {
        // Not found: removed since the pass, with nobody left to name.
        self.open().map(|fd| host::processes(fd.as_fd(), proc)).unwrap_or_default()
    }
}

/// What a walk collects.
#[derive(Default)]
pub struct Found {
    pub attachments: Vec<Attachment>,
    pub pods: Vec<PodCgroup>,
    /// The cgroups below pods' (their containers' among them).
    pub below_pods: Vec<BelowPod>,
    pub processes: BTreeMap<String, Vec<ProcessRef>>,
    pub paths: HashMap<u64, String>,
    pub tree: Vec<TreeEntry>,
    /// The tree outgrew `WalkContext::tree_max` and was dropped.
    pub tree_over: bool,
}

impl Found {
    /// Adds what a second walk (over other hooks) found: its attachments
    /// (the cgroups are the same).
    pub fn merge(&mut self, more: Found) {
        self.attachments.extend(more.attachments);
        // By set, not by scanning the list per cgroup: both walks list
        // every pod of the node.
        let pods: HashSet<String> = self.pods.iter().map(|p| p.cgroup.clone()).collect();
        self.pods.extend(more.pods.into_iter().filter(|p| !pods.contains(&p.cgroup)));
        let below: HashSet<u64> = self.below_pods.iter().map(|b| b.cgroup_id).collect();
        self.below_pods.extend(more.below_pods.into_iter().filter(|b| !below.contains(&b.cgroup_id)));
        for (cgroup, procs) in more.processes {
            self.processes.entry(cgroup).or_insert(procs);
        }
        self.paths.extend(more.paths);
        if self.tree.is_empty() {
            self.tree = more.tree;
        }
        self.tree_over |= more.tree_over;
    }

    /// Keeps one cgroup of the tree, within `max`: past it the whole tree
    /// goes (its memory with it), and no more is kept.
    pub fn keep(&mut self, max: usize, entry: TreeEntry) -> bool {
        if max == 0 || self.tree_over {
            return false;
        }
        if self.tree.len() >= max {
            self.tree = Vec::new();
            self.tree_over = true;
            return false;
        }
        self.tree.push(entry);
        true
    }

    /// Records one cgroup: its own attachments; a pod's own cgroup, and
    /// whether a cgroup below a pod holds processes (what is in effect for
    /// them is worked out once the whole tree is read: `coverage`); for a
    /// cgroup below the root holding socket-LB programs, its processes; its
    /// path when the walk was asked to name it.
    pub fn visit(
        &mut self,
        ctx: &WalkContext<'_>,
        path: &str,
        id: u64,
        attached: &[query::Attached],
        access: &impl CgroupAccess,
    ) {
        let attribution = attribution::attribute(path);
        if attribution.is_pod_level() {
            self.pods.push(PodCgroup {
                cgroup: path.to_owned(),
                cgroup_id: id,
                pod_uid: attribution.pod_uid.unwrap_or_default(),
                effective: Default::default(),
                containers: Vec::new(),
            });
        } else if attribution.pod_uid.is_some() && access.populated() {
            // Only where processes are: a pod can make any number of empty
            // cgroups, which hold no sockets.
            self.below_pods.push(BelowPod { cgroup: path.to_owned(), cgroup_id: id, populated: true });
        }
        if id != ctx.root_id && attached.iter().any(|a| a.attach_type.is_socket_lb()) {
            self.processes.insert(path.to_owned(), access.processes(ctx.proc));
        }
        if ctx.wanted.contains(&id) {
            self.paths.insert(id, path.to_owned());
        }
        self.attachments.extend(attached.iter().map(|a| Attachment {
            cgroup: path.to_owned(),
            cgroup_id: id,
            attach_type: a.attach_type,
            attach_flags: a.flags,
            prog_id: a.prog_id,
            link_id: None,
        }));
    }
}

/// Reads one cgroup again, as a walk's visit would (the daemon, after the
/// kernel reported a change on it): the programs on `hooks`, and its
/// processes when it holds socket-LB programs below the root. The cgroup is
/// opened by `path` below `root` and must still be cgroup `id`.
pub fn read_cgroup(
    root: BorrowedFd<'_>,
    path: &str,
    id: u64,
    hooks: &[AttachType],
    ctx: &WalkContext<'_>,
) -> Result<(Vec<query::Attached>, Vec<ProcessRef>), VisitError> {
    let rel = path.trim_start_matches('/');
    let rel = if rel.is_empty() { "." } else { rel };
    let gone = |e: nix::Error| VisitError { op: "open", error: e.to_string(), gone: e == nix::Error::ENOENT };
    let fd = openat(root, rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).map_err(gone)?;
    let ino = nix::sys::stat::fstat(fd.as_fd()).map_err(gone)?.st_ino;
    if ino != id {
        return Err(VisitError { op: "open", error: format!("{path} is cgroup {ino} now, not {id}"), gone: false });
    }
    let mut raw = Vec::new();
    let support = Support { supported: hooks.to_vec(), unsupported: Vec::new() };
    query::attached(fd.as_fd(), &support, &mut raw).map_err(|e| VisitError::syscall("query", &e))?;
    let processes = if id != ctx.root_id && raw.iter().any(|a| a.attach_type.is_socket_lb()) {
        host::processes(fd.as_fd(), ctx.proc)
    } else {
        Vec::new()
    };
    Ok((raw, processes))
}

/// Walks every cgroup below `root` by syscalls, querying the hooks in
/// `support`.
pub fn walk_cgroups(root: OwnedFd, support: &Support, ctx: &WalkContext<'_>) -> (Found, WalkStats) {
    let mut found = Found::default();
    let mut raw = Vec::new();
    // Ids by path, for each cgroup's parent (kept only for the tree).
    let mut ids: HashMap<String, u64> = HashMap::new();
    let stats = walk::walk(root, ctx.root_id, |path, id, fd| {
        if ctx.tree_max > 0 && !found.tree_over {
            ids.insert(path.to_owned(), id);
            if let Some((parent, name)) = path.rsplit_once('/').filter(|_| path != "/") {
                let parent = if parent.is_empty() { ctx.root_id } else { ids.get(parent).copied().unwrap_or(0) };
                if !found.keep(ctx.tree_max, TreeEntry { id, parent, name: name.to_owned() }) {
                    ids = HashMap::new();
                }
            }
        }
        raw.clear();
        match query::attached(fd, support, &mut raw).map_err(|e| VisitError::syscall("query", &e)) {
            Ok(()) => {
                found.visit(ctx, path, id, &raw, &OpenCgroup(fd));
                Ok(Visit::Done)
            }
            Err(e) if e.gone => Ok(Visit::Vanished),
            Err(e) => Err(e.at(path)),
        }
    });
    (found, stats)
}

/// The same as `walk_cgroups`, from one pass of the in-kernel iterator: the
/// iterator reports every hook's list, so no hook is skipped and no program
/// loaded mid-walk can be missed; the tree is read under `cgroup_mutex`, so
/// nothing vanishes half-read.
pub fn iter_cgroups(
    walker: &Walker,
    root: BorrowedFd<'_>,
    ctx: &WalkContext<'_>,
) -> Result<(Found, WalkStats, crate::bpf::iter::IterStats), IterError> {
    let mut found = Found::default();
    let mut stats = WalkStats::default();
    // (cgroup id, length of its path): the ancestors of the cgroup being
    // visited, since records come in pre-order.
    let mut stack: Vec<(u64, usize)> = Vec::new();
    let mut path = String::new();
    let mut raw = Vec::new();
    let hooks = &walker.kernel().hooks;
    let iter_stats = walker.walk(root, |step| {
        let c: IterCgroup = match step {
            Step::Cgroup(c) => c,
            Step::Restart => {
                found = Found::default();
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
            let Some(&(_, parent_len)) = stack.last() else {
                stats.errors.push(WalkError {
                    cgroup: c.name.clone(),
                    op: "bpf_iter".into(),
                    error: format!("cgroup {} came before its parent {}", c.id, c.parent_id),
                });
                return;
            };
            path.truncate(parent_len);
            path.push('/');
            path.push_str(&c.name);
        }
        stack.push((c.id, path.len()));
        let shown = if path.is_empty() { "/" } else { path.as_str() };
        stats.scanned += 1;
        if !path.is_empty() {
            found.keep(ctx.tree_max, TreeEntry { id: c.id, parent: c.parent_id, name: c.name.clone() });
        }

        raw.clear();
        for p in &c.programs {
            match hooks.get(p.atype as usize).and_then(|h| h.1) {
                Some(t) => raw.push(query::Attached {
                    attach_type: t,
                    flags: AttachFlags::from_kernel(p.flags),
                    prog_id: p.prog_id,
                }),
                None => stats.errors.push(WalkError {
                    cgroup: shown.to_owned(),
                    op: "bpf_iter".into(),
                    error: format!(
                        "program {} on hook {} ({}), which this agent does not know",
                        p.prog_id,
                        p.atype,
                        hooks.get(p.atype as usize).map(|h| h.0.as_str()).unwrap_or("?")
                    ),
                }),
            }
        }
        let access = IteratedCgroup { root, path: shown, populated: c.populated };
        found.visit(ctx, shown, c.id, &raw, &access);
    })?;
    Ok((found, stats, iter_stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::AttachFlags;

    fn att(cgroup: &str, hook: &str, prog_id: u32) -> Attachment {
        Attachment {
            cgroup: cgroup.into(),
            cgroup_id: 7,
            attach_type: AttachType::from_name(hook).unwrap(),
            attach_flags: AttachFlags::Multi,
            prog_id,
            link_id: None,
        }
    }

    #[test]
    fn a_second_walk_over_new_hooks_adds_its_attachments_to_the_first() {
        let pod = PodCgroup {
            cgroup: "/kubepods/podx".into(),
            cgroup_id: 9,
            pod_uid: "x".into(),
            effective: Default::default(),
            containers: vec![],
        };
        let ctr = BelowPod { cgroup: "/kubepods/podx/c".into(), cgroup_id: 10, populated: true };
        let mut first = Found {
            attachments: vec![att("/a", "device", 1)],
            pods: vec![pod.clone()],
            below_pods: vec![ctr.clone()],
            ..Found::default()
        };
        first.paths.insert(3, "/m".into());
        let mut more = Found {
            attachments: vec![att("/a", "connect4", 2)],
            pods: vec![pod],
            below_pods: vec![ctr],
            ..Found::default()
        };
        more.processes.insert("/a".into(), vec![ProcessRef { pid: 9, comm: "cilium-agent".into() }]);
        more.paths.insert(4, "/n".into());
        first.merge(more);
        assert_eq!(first.attachments.len(), 2);
        assert_eq!((first.pods.len(), first.below_pods.len()), (1, 1), "the same cgroups are not counted twice");
        assert_eq!(first.processes["/a"][0].comm, "cilium-agent");
        assert_eq!(first.paths.len(), 2);
    }

    /// A cgroup the test describes instead of the kernel.
    struct Described {
        populated: bool,
        procs: Vec<ProcessRef>,
    }

    impl CgroupAccess for Described {
        fn populated(&self) -> bool {
            self.populated
        }
        fn processes(&self, _proc: &Path) -> Vec<ProcessRef> {
            self.procs.clone()
        }
    }

    #[test]
    fn a_visit_records_pods_what_is_below_them_processes_and_wanted_paths() {
        let wanted = HashSet::from([42]);
        let ctx = WalkContext { root_id: 1, wanted: &wanted, proc: Path::new("/proc"), tree_max: 0 };
        let access = Described { populated: true, procs: vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }] };
        let lb = query::Attached {
            attach_type: AttachType::from_name("connect4").unwrap(),
            flags: AttachFlags::Multi,
            prog_id: 10,
        };
        let mut found = Found::default();
        let pod = "/kubepods/burstable/pod0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";
        found.visit(&ctx, pod, 42, &[], &access);
        found.visit(&ctx, "/", 1, &[lb], &access);
        found.visit(&ctx, &format!("{pod}/ctr"), 43, &[lb], &access);
        assert_eq!(found.pods.len(), 1, "only the pod's own cgroup");
        assert_eq!(found.below_pods, [BelowPod { cgroup: format!("{pod}/ctr"), cgroup_id: 43, populated: true }]);
        assert_eq!(found.processes.keys().collect::<Vec<_>>(), [&format!("{pod}/ctr")], "not the root's");
        assert_eq!(found.paths.get(&42).map(String::as_str), Some(pod));
        assert_eq!(found.attachments.len(), 2);
    }
}
