//! The scan: everything the audit reads from the kernel and procfs, gathered
//! into one `Snapshot`. Nothing here changes host state.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::attribution;
use crate::bpf::iter::{self, IterCgroup, IterError, Walker};
use crate::bpf::programs;
use crate::bpf::query::{self, Support};
use crate::bpf::sys::SyscallError;
use crate::bpf::{AttachFlags, AttachType, ProgType};
use crate::cgroup::root::{self, ROOT_CGROUP_ID};
use crate::cgroup::walk::{self, Visit, WalkError};
use crate::cgroup::{AuditRoot, RootError, RootKind};
use crate::cli::WalkMethod;
use crate::owner::Cni;
use crate::snapshot::*;

#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The procfs whose PID 1 is the node's init (`/proc` with hostPID).
    pub proc: PathBuf,
    /// Audit this directory instead of discovering the hierarchy root.
    pub cgroup_root: Option<PathBuf>,
    pub node_name: Option<String>,
    /// cgroup ids whose paths the snapshot should carry (event callers).
    pub name_cgroups: HashSet<u64>,
    pub walk: WalkMethod,
}

/// Why an audit could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("missing capability {cap}: {why}")]
    MissingCapability { cap: &'static str, why: &'static str },
    #[error(transparent)]
    Root(#[from] RootError),
    #[error("--cgroup-root {0}")]
    CgroupRoot(RootError),
    #[error("--walk bpf-iter: {0}")]
    Iter(IterError),
    #[error("{path}: {error}{hint}")]
    Bpf { path: String, error: SyscallError, hint: &'static str },
}

const CAP_SYS_ADMIN: u32 = 21;

fn bpf_error(path: impl Into<String>, source: SyscallError) -> AuditError {
    let hint = if source.errno() == Some(libc::EPERM) {
        " (needs CAP_SYS_ADMIN, or CAP_NET_ADMIN for queries, in the initial user namespace)"
    } else {
        ""
    };
    AuditError::Bpf { path: path.into(), error: source, hint }
}

fn check_capabilities() -> Result<(), AuditError> {
    let capeff = procfs::process::Process::myself().and_then(|p| p.status()).map(|s| s.capeff).unwrap_or(u64::MAX);
    if capeff & (1 << CAP_SYS_ADMIN) == 0 {
        return Err(AuditError::MissingCapability {
            cap: "CAP_SYS_ADMIN",
            why: "reading BPF program and link info (BPF_PROG_GET_FD_BY_ID, BPF_LINK_GET_NEXT_ID) requires it; run as root or grant it",
        });
    }
    Ok(())
}

/// The node's name: the one given (flag or $NODE_NAME) unless empty, else
/// the hostname.
pub fn node_name(given: Option<&str>) -> String {
    given
        .filter(|n| !n.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn is_gone(e: &SyscallError) -> bool {
    e.errno() == Some(libc::ENOENT)
}

/// Reads the pids in a cgroup and their command names.
fn processes(cgroup: BorrowedFd<'_>, proc: &Path) -> Vec<ProcessRef> {
    let Ok(fd) = openat(cgroup, "cgroup.procs", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
        return Vec::new();
    };
    let mut text = String::new();
    if fs::File::from(fd).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .map(|pid| {
            let comm = fs::read_to_string(proc.join(pid.to_string()).join("comm")).map(|s| s.trim().to_owned());
            ProcessRef { pid, comm: comm.unwrap_or_default() }
        })
        .collect()
}

/// The cgroup-v2 path of a process, from `/proc/<pid>/cgroup`.
fn proc_cgroup(proc: &Path, pid: &str) -> Option<String> {
    let text = fs::read_to_string(proc.join(pid).join("cgroup")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_owned)
}

fn ns_inode(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.ino())
}

fn cni_processes(proc: &Path, errors: &mut Vec<ScanError>) -> Vec<CniProcess> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(proc) {
        Ok(e) => e,
        Err(e) => {
            errors.push(ScanError { op: "readdir".into(), path: proc.display().to_string(), message: e.to_string() });
            return out;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim();
        let Some(cni) = Cni::from_agent_comm(comm) else { continue };
        // NB: the process may exit between reads; skip it then.
        let (Some(ns), Some(cgroup)) = (ns_inode(&entry.path().join("ns/cgroup")), proc_cgroup(proc, pid)) else {
            continue;
        };
        out.push(CniProcess { pid: pid.parse().unwrap_or(0), cni, comm: comm.to_owned(), cgroupns: ns, cgroup });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// Whether the auditor's own cgroup namespace is the initial one: its own
/// cgroup2 mount shows root `/` and its top is the hierarchy root. Only then
/// is mountinfo's field 4 an absolute hierarchy path.
fn in_initial_cgroupns() -> bool {
    let Ok(own) = root::read_mountinfo(Path::new("/proc/self/mountinfo")) else { return false };
    own.iter()
        .filter(|m| m.is_cgroup2() && m.root == "/")
        .any(|m| fs::metadata(&m.mount_point).map(|md| md.ino() == ROOT_CGROUP_ID).unwrap_or(false))
}

/// cgroup2 mounts in PID 1's mount namespace and the id of each one's top.
fn pid1_cgroup_mounts(proc: &Path, audit_root: &AuditRoot, errors: &mut Vec<ScanError>) -> Vec<CgroupMount> {
    let path = proc.join("1/mountinfo");
    let mounts = match root::read_mountinfo(&path) {
        Ok(m) => m,
        Err(e) => {
            errors.push(ScanError { op: "read".into(), path: path.display().to_string(), message: e.to_string() });
            return Vec::new();
        }
    };
    let textual_ok = audit_root.kind == RootKind::Hierarchy && in_initial_cgroupns();
    mounts
        .into_iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| {
            let top = match root::mount_top_id(proc, &m) {
                Ok(id) => MountTop::Known { cgroup_id: id, cgroup: None },
                Err(e) if textual_ok && !m.root.starts_with("/..") => {
                    // PID 1's mount namespace is closed to us, but we read
                    // from the initial cgroupns: field 4 is a real path.
                    let p = audit_root.path.join(m.root.trim_start_matches('/'));
                    match fs::metadata(&p) {
                        Ok(md) => MountTop::Known { cgroup_id: md.ino(), cgroup: None },
                        Err(e2) => MountTop::Unknown { reason: format!("{e}; {}: {e2}", p.display()) },
                    }
                }
                Err(e) => MountTop::Unknown {
                    reason: format!("{}: {e}", root::in_root_of(proc, 1, &m.mount_point).display()),
                },
            };
            CgroupMount { mount_point: m.mount_point, mountinfo_root: m.root, top }
        })
        .collect()
}

impl From<&WalkError> for ScanError {
    fn from(e: &WalkError) -> ScanError {
        ScanError { op: e.op.clone(), path: e.cgroup.clone(), message: e.error.clone() }
    }
}

/// What one walk collects.
#[derive(Default)]
struct Found {
    attachments: Vec<Attachment>,
    pods: Vec<PodCgroup>,
    processes: BTreeMap<String, Vec<ProcessRef>>,
    paths: HashMap<u64, String>,
}

impl Found {
    /// Adds what a second walk (over other hooks) found.
    fn merge(&mut self, more: Found) {
        self.attachments.extend(more.attachments);
        for pod in more.pods {
            match self.pods.iter_mut().find(|p| p.cgroup == pod.cgroup) {
                Some(p) => p.effective_connect.extend(pod.effective_connect),
                None => self.pods.push(pod),
            }
        }
        for (cgroup, procs) in more.processes {
            self.processes.entry(cgroup).or_insert(procs);
        }
        self.paths.extend(more.paths);
    }

    /// Records one cgroup's own attachments and, when asked for, its path.
    fn add(&mut self, ctx: &WalkContext<'_>, path: &str, id: u64, raw: &[query::Attached]) {
        if ctx.wanted.contains(&id) {
            self.paths.insert(id, path.to_owned());
        }
        self.attachments.extend(raw.iter().map(|a| Attachment {
            cgroup: path.to_owned(),
            cgroup_id: id,
            attach_type: a.attach_type,
            attach_flags: a.flags,
            prog_id: a.prog_id,
            link_id: None,
        }));
    }

    /// Whether a cgroup's processes are named: below the root, holding
    /// socket-LB programs.
    fn names_processes(ctx: &WalkContext<'_>, id: u64, raw: &[query::Attached]) -> bool {
        id != ctx.root_id && raw.iter().any(|a| a.attach_type.is_socket_lb())
    }
}

fn connect_hooks(support: &Support) -> Vec<AttachType> {
    support.supported.iter().copied().filter(|t| matches!(t.name(), "connect4" | "connect6")).collect()
}

struct WalkContext<'a> {
    root_id: u64,
    /// cgroup ids whose paths are recorded (mount tops, event callers).
    wanted: &'a HashSet<u64>,
    proc: &'a Path,
}

/// Walks every cgroup below `root`, querying the hooks in `support`.
fn walk_cgroups(root: OwnedFd, support: &Support, ctx: &WalkContext<'_>) -> (Found, walk::WalkStats) {
    let mut found = Found::default();
    let connect = connect_hooks(support);
    let mut raw = Vec::new();
    let stats = walk::walk(root, ctx.root_id, |path, id, fd| {
        let fail = |op: &str, e: SyscallError| {
            if is_gone(&e) {
                Ok(Visit::Vanished)
            } else {
                Err(WalkError { cgroup: path.to_owned(), op: op.to_owned(), error: e.to_string() })
            }
        };
        raw.clear();
        if let Err(e) = query::attached(fd, support, &mut raw) {
            return fail("query", e);
        }
        // Pods only matter when a connect hook is queried (their effective
        // programs); skip parsing the path otherwise.
        let attribution = if connect.is_empty() { Default::default() } else { attribution::attribute(path) };
        if attribution.is_pod_level() {
            let mut effective = Vec::new();
            for &t in &connect {
                match query::effective(fd, t) {
                    Ok(ids) => effective.extend(ids),
                    Err(e) => return fail("query effective", e),
                }
            }
            found.pods.push(PodCgroup {
                cgroup: path.to_owned(),
                pod_uid: attribution.pod_uid.unwrap_or_default(),
                effective_connect: effective,
            });
        }
        if Found::names_processes(ctx, id, &raw) {
            found.processes.insert(path.to_owned(), processes(fd, ctx.proc));
        }
        found.add(ctx, path, id, &raw);
        Ok(Visit::Done)
    });
    (found, stats)
}

/// The same as `walk_cgroups`, from one pass of the in-kernel iterator: the
/// iterator reports every hook's list, so no hook is skipped and no program
/// loaded mid-walk can be missed; the tree is read under `cgroup_mutex`, so
/// nothing vanishes half-read.
fn iter_cgroups(
    walker: &Walker,
    root: BorrowedFd<'_>,
    support: &Support,
    ctx: &WalkContext<'_>,
) -> Result<(Found, walk::WalkStats, iter::IterStats), IterError> {
    let mut found = Found::default();
    let mut stats = walk::WalkStats::default();
    let connect = connect_hooks(support);
    // (cgroup id, length of its path): the ancestors of the cgroup being
    // visited, since records come in pre-order.
    let mut stack: Vec<(u64, usize)> = Vec::new();
    let mut path = String::new();
    let mut raw = Vec::new();
    let hooks = &walker.kernel().hooks;
    let iter_stats = walker.walk(root, |c: IterCgroup| {
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
        let attribution = if connect.is_empty() { Default::default() } else { attribution::attribute(shown) };
        let open = || {
            let rel = shown.trim_start_matches('/');
            let rel = if rel.is_empty() { "." } else { rel };
            openat(root, rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        };
        if attribution.is_pod_level() {
            let mut effective = Vec::new();
            for &t in &connect {
                let hook = if t.name() == "connect4" { 0 } else { 1 };
                match &c.effective[hook] {
                    Some(ids) => effective.extend(ids),
                    // More than the record carries: ask the kernel.
                    None => match open()
                        .map_err(|e| e.to_string())
                        .and_then(|fd| query::effective(fd.as_fd(), t).map_err(|e| e.to_string()))
                    {
                        Ok(ids) => effective.extend(ids),
                        Err(e) => stats.errors.push(WalkError {
                            cgroup: shown.to_owned(),
                            op: "query effective".into(),
                            error: e,
                        }),
                    },
                }
            }
            found.pods.push(PodCgroup {
                cgroup: shown.to_owned(),
                pod_uid: attribution.pod_uid.unwrap_or_default(),
                effective_connect: effective,
            });
        }
        // Not found: removed since the pass, with nobody left to name.
        if Found::names_processes(ctx, c.id, &raw)
            && let Ok(fd) = open()
        {
            found.processes.insert(shown.to_owned(), processes(fd.as_fd(), ctx.proc));
        }
        found.add(ctx, shown, c.id, &raw);
    })?;
    Ok((found, stats, iter_stats))
}

/// The walk by syscalls: directories opened one by one, each hook queried.
fn syscall_walk(
    root_fd: OwnedFd,
    audit_root: &AuditRoot,
    support: &Support,
    ctx: &WalkContext<'_>,
) -> Result<(Found, walk::WalkStats, u64, BTreeMap<u32, programs::Program>), AuditError> {
    // Only hooks that a loaded program's type can use are queried: a hook no
    // loaded program fits has nothing attached. NB: a program loaded after
    // this enumeration may be attached mid-walk to a hook skipped here; being
    // attached, it is still loaded when programs are enumerated again after
    // the walk, and the hooks its type opens are then walked too.
    let mut programs = programs::loaded_programs().map_err(|e| bpf_error("programs", e))?;
    let types_before: HashSet<ProgType> = programs.values().map(|p| p.prog_type).collect();
    let walked = support.for_prog_types(&types_before);
    let rewalk_fd = root_fd
        .try_clone()
        .map_err(|e| AuditError::Root(root::RootError::Io { op: "dup", path: audit_root.path.clone(), error: e }))?;
    let (mut found, mut stats) = walk_cgroups(root_fd, &walked, ctx);
    let mut vanished = stats.vanished;
    programs::add_new_programs(&mut programs).map_err(|e| bpf_error("programs", e))?;
    let types_after: HashSet<ProgType> = programs.values().map(|p| p.prog_type).collect();
    let extra = support.for_prog_types(&types_after).minus(&walked);
    if !extra.supported.is_empty() {
        let (more, more_stats) = walk_cgroups(rewalk_fd, &extra, ctx);
        vanished += more_stats.vanished;
        found.merge(more);
        stats.errors.extend(more_stats.errors);
    }
    Ok((found, stats, vanished, programs))
}

/// Scans the node. `Err` only when the audit cannot run at all.
pub fn scan(opts: &ScanOptions) -> Result<Snapshot, AuditError> {
    check_capabilities()?;
    let (audit_root, root_fd) = match &opts.cgroup_root {
        Some(dir) => root::given(dir).map_err(AuditError::CgroupRoot)?,
        None => root::discover(&opts.proc)?,
    };
    let root_path = audit_root.path.display().to_string();
    let support: Support = query::probe(root_fd.as_fd()).map_err(|e| bpf_error(&root_path, e))?;

    let mut errors = Vec::new();
    let mut mounts = pid1_cgroup_mounts(&opts.proc, &audit_root, &mut errors);
    let wanted: HashSet<u64> = mounts
        .iter()
        .filter_map(|m| match m.top {
            MountTop::Known { cgroup_id, .. } => Some(cgroup_id),
            MountTop::Unknown { .. } => None,
        })
        .chain(opts.name_cgroups.iter().copied())
        .collect();

    let ctx = WalkContext { root_id: audit_root.cgroup_id, wanted: &wanted, proc: &opts.proc };
    let mut walk_info = WalkInfo { method: WalkUsed::Syscalls, fallback: None, passes: 0 };
    let iterated = match opts.walk {
        WalkMethod::Syscalls => None,
        WalkMethod::Auto | WalkMethod::BpfIter => {
            match Walker::shared(|w| iter_cgroups(w, root_fd.as_fd(), &support, &ctx)).and_then(|r| r) {
                Ok(done) => Some(done),
                Err(e) if opts.walk == WalkMethod::BpfIter => return Err(AuditError::Iter(e)),
                Err(e) => {
                    walk_info.fallback = Some(e.to_string());
                    None
                }
            }
        }
    };
    let (found, stats, vanished, mut programs) = match iterated {
        Some((found, stats, iter_stats)) => {
            walk_info.method = WalkUsed::BpfIter;
            walk_info.passes = iter_stats.passes;
            // Enumerated after the pass, whose own program is gone by now.
            let programs = programs::loaded_programs().map_err(|e| bpf_error("programs", e))?;
            (found, stats, 0, programs)
        }
        None => syscall_walk(root_fd, &audit_root, &support, &ctx)?,
    };
    let Found { mut attachments, mut pods, processes: processes_by_cgroup, paths: paths_of_interest } = found;
    errors.extend(stats.errors.iter().map(ScanError::from));
    // One order whatever the walk: by cgroup, then hook; a hook's programs
    // keep the kernel's order (the stable sort), which is their run order.
    attachments.sort_by(|a, b| a.cgroup.cmp(&b.cgroup).then(a.attach_type.cmp(&b.attach_type)));
    pods.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));

    for m in &mut mounts {
        if let MountTop::Known { cgroup_id, cgroup } = &mut m.top {
            *cgroup = paths_of_interest.get(cgroup_id).cloned();
        }
    }

    // Full names only where the audit shows them: attached programs, and
    // socket programs (the CNI candidates that rules classify by name).
    let named: BTreeSet<u32> = attachments
        .iter()
        .map(|a| a.prog_id)
        .chain(programs.values().filter(|p| p.prog_type.is_socket()).map(|p| p.id))
        .collect();
    programs::resolve_full_names(&mut programs, named);
    let cgroup_links = programs::cgroup_links().map_err(|e| bpf_error("links", e))?;
    let by_target: HashMap<(u64, u32, u32), u32> =
        cgroup_links.iter().map(|l| ((l.cgroup_id, l.attach_type, l.prog_id), l.link_id)).collect();
    for a in &mut attachments {
        a.link_id = by_target.get(&(a.cgroup_id, a.attach_type.kernel_value(), a.prog_id)).copied();
    }

    let pid1_ns = ns_inode(&opts.proc.join("1/ns/cgroup"));
    let reference_cgroupns = pid1_ns.or_else(|| ns_inode(Path::new("/proc/self/ns/cgroup")));
    let cni_processes = cni_processes(&opts.proc, &mut errors);

    Ok(Snapshot {
        node: node_name(opts.node_name.as_deref()),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).unwrap_or_default(),
        root: audit_root,
        cgroups_scanned: stats.scanned,
        cgroups_vanished: vanished,
        walk: walk_info,
        unsupported_attach_types: support.unsupported,
        attachments,
        programs,
        cgroup_links,
        pods,
        mounts,
        cni_processes,
        reference_cgroupns,
        reference_ns_is_pid1: pid1_ns.is_some(),
        processes: processes_by_cgroup,
        cgroup_paths: paths_of_interest.into_iter().collect(),
        events: Vec::new(),
        errors,
    })
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
    fn a_second_walk_over_new_hooks_adds_to_the_first() {
        let pod =
            |eff: Vec<u32>| PodCgroup { cgroup: "/kubepods/podx".into(), pod_uid: "x".into(), effective_connect: eff };
        let mut first =
            Found { attachments: vec![att("/a", "device", 1)], pods: vec![pod(vec![])], ..Found::default() };
        first.paths.insert(3, "/m".into());
        let mut more =
            Found { attachments: vec![att("/a", "connect4", 2)], pods: vec![pod(vec![2])], ..Found::default() };
        more.processes.insert("/a".into(), vec![ProcessRef { pid: 9, comm: "cilium-agent".into() }]);
        more.paths.insert(4, "/n".into());
        first.merge(more);
        assert_eq!(first.attachments.len(), 2);
        assert_eq!(first.pods.len(), 1, "the same pod is not counted twice");
        assert_eq!(first.pods[0].effective_connect, vec![2], "its effective programs from the new hooks are added");
        assert_eq!(first.processes["/a"][0].comm, "cilium-agent");
        assert_eq!(first.paths.len(), 2);
    }
}
