//! What the scan reads from the host besides the cgroup tree: procfs (the
//! processes in a cgroup, CNI agents and their cgroup namespaces, PID 1's
//! mounts), the node's name and kernel, and the auditor's capabilities.

use std::fs;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::{AuditError, deadline, intent};
use crate::bpf::pins;
use crate::cgroup::root::{self, ROOT_CGROUP_ID};
use crate::cgroup::tree::ProcessRef;
use crate::cgroup::{AuditRoot, RootKind};
use crate::mounts::Mount;
use crate::owner::Owner;
use crate::snapshot::{AgentProcess, CgroupMount, Intent, MountTop, OwnerPin, PidView, ScanError};

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

/// The effective capabilities of the process whose procfs directory is `dir`.
fn capeff(dir: &Path) -> Option<u64> {
    let status = fs::read_to_string(dir.join("status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

pub fn check_capabilities() -> Result<(), AuditError> {
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

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// How many of a cgroup's processes are named: findings show a few, and
/// each name is a read (a pod can hold thousands of processes).
pub const PROCESSES_NAMED: usize = 16;

/// The first PROCESSES_NAMED pids in a cgroup and their command names.
pub fn processes(cgroup: BorrowedFd<'_>, proc: &Path) -> Vec<ProcessRef> {
    let Ok(fd) = openat(cgroup, "cgroup.procs", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
        return Vec::new();
    };
    let mut text = String::new();
    if fs::File::from(fd).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .take(PROCESSES_NAMED)
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

pub fn ns_inode(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.ino())
}

/// What the audit reads through PID 1 (its root, its cgroup namespace) and
/// cannot open, each as an error naming the path, the errno and what the
/// report does not know for it: an LSM or a missing CAP_SYS_PTRACE must
/// not make names, runtimes and causes go quiet.
pub fn pid1_out_of_reach(proc: &Path, errors: &mut Vec<ScanError>) {
    let hides = [
        (
            "1/root",
            "the node's files through PID 1's root are out of reach: pod and container names, runtimes, the CNIs' \
             configuration and pins, and mount tops are unknown (needs CAP_SYS_PTRACE, and no LSM refusing it)",
        ),
        (
            "1/ns/cgroup",
            "PID 1's cgroup namespace is out of reach: CNI agents are compared with the agent's own namespace, and a \
             private one may go unnamed (needs CAP_SYS_PTRACE, and no LSM refusing it)",
        ),
    ];
    for (rel, what) in hides {
        let path = proc.join(rel);
        match rustix::fs::open(&path, rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC, rustix::fs::Mode::empty())
        {
            Ok(_) => {}
            // No PID 1 there at all: another error says so.
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => errors.push(ScanError {
                op: "open".into(),
                path: path.display().to_string(),
                message: format!("{}: {what}", std::io::Error::from(e)),
            }),
        }
    }
}

/// The inode of the initial PID namespace (the kernel's PROC_PID_INIT_INO).
const INITIAL_PID_NS: u64 = 0xEFFF_FFFC;

/// Processes that only run on a Kubernetes node (or a nested one): seeing
/// one in a PID namespace that is not the initial one says it is a node's.
const NODE_PROCESSES: &[&str] = &[
    "kubelet",
    "containerd",
    "crio",
    "dockerd",
    "cri-dockerd",
    "k3s",
    "k3s-server",
    "k3s-agent",
    "k0s",
    "kubelite",
    "cilium-agent",
    "calico-node",
];

/// The first process of `proc` that only a node runs: (pid, comm).
fn node_process(proc: &Path) -> Option<(u32, String)> {
    fs::read_dir(proc).ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(e.path().join("comm")).ok()?;
        let comm = comm.trim();
        NODE_PROCESSES.contains(&comm).then(|| (pid, comm.to_owned()))
    })
}

/// Whether the processes `proc` shows are the node's: the PID namespace of
/// its PID 1 is the initial one (or a nested node's, by what runs in it, or
/// because the user says so with `--nested-node`). A pod without `hostPID`
/// sees only its own processes: no CNI agent is then "not running", only
/// not visible, and PID 1's mounts and namespaces are the pod's.
pub fn pid_view(proc: &Path, nested_node: bool) -> PidView {
    // Our own pid as `proc` numbers us: 1 when the agent is the init of its
    // own PID namespace (a pod without hostPID and without a pause
    // container sharing it).
    let me = fs::read_link(proc.join("self")).ok().and_then(|p| p.to_str()?.parse::<u32>().ok());
    let pid1_comm = fs::read_to_string(proc.join("1/comm")).map(|c| c.trim().to_owned()).unwrap_or_default();
    let without_host_pid = |what: String| PidView::NotNode {
        reason: format!(
            "not the node's PIDs (no hostPID?): {what}. The node's processes and PID 1's mounts are out of view, so \
             no CNI agent can be said to run or not. Run the agent with hostPID: true (and CAP_SYS_PTRACE), or on \
             the node itself; on a nested node (kind, k0s) whose PID namespace this is, pass --nested-node"
        ),
    };
    if me == Some(1) {
        return without_host_pid(format!("the agent is PID 1 of its own PID namespace ({})", proc.display()));
    }
    // The namespace `proc` shows: PID 1's, when it may be looked at; else
    // ours, when we are in it (no namespace is above the initial one, so
    // if ours is the initial one and `proc` shows us, it is that one).
    let pid1_ns = ns_inode(&proc.join("1/ns/pid"));
    let shown = pid1_ns.or_else(|| me.and_then(|_| ns_inode(Path::new("/proc/self/ns/pid"))));
    if shown == Some(INITIAL_PID_NS) {
        return PidView::Node { how: "the initial PID namespace".to_owned() };
    }
    if nested_node {
        return PidView::Node { how: "--nested-node".to_owned() };
    }
    if let Some((pid, comm)) = node_process(proc) {
        return PidView::Node { how: format!("a nested node's PID namespace: {comm} (pid {pid}) runs in it") };
    }
    let ns = shown.map_or_else(|| "unknown".to_owned(), |n| n.to_string());
    without_host_pid(format!(
        "{} shows a PID namespace ({ns}) that is not the node's: its PID 1 is {pid1_comm:?}, and no kubelet, \
         container runtime or CNI agent runs in it",
        proc.display()
    ))
}

/// The programs process `dir` holds open: the `prog_id` of each of its
/// program and link descriptors (`/proc/<pid>/fdinfo/*`; the kernel writes
/// these, the process cannot make them block). At most `MAX_HELD`.
fn held(dir: &Path) -> Vec<u32> {
    let Ok(fds) = fs::read_dir(dir.join("fd")) else { return Vec::new() };
    let mut ids = Vec::new();
    for fd in fds.flatten() {
        // Only programs and links (`anon_inode:bpf-prog`,
        // `anon_inode:bpf_link`: the kernel's names), whose fdinfo says
        // `prog_id:`.
        let Ok(target) = fs::read_link(fd.path()) else { continue };
        if !matches!(target.as_os_str().as_encoded_bytes(), b"anon_inode:bpf-prog" | b"anon_inode:bpf_link") {
            continue;
        }
        let Ok(info) = fs::read_to_string(dir.join("fdinfo").join(fd.file_name())) else { continue };
        if let Some(id) = info.lines().find_map(|l| l.strip_prefix("prog_id:")).and_then(|v| v.trim().parse().ok()) {
            ids.push(id);
            if ids.len() >= MAX_HELD {
                break;
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The most programs read of one agent's descriptors: a CNI agent holds
/// a few hundred.
const MAX_HELD: usize = 4096;

/// The node's own user namespace: PID 1's, else (when PID 1's cannot be
/// looked at) the auditor's, which as a DaemonSet or on the host is the
/// initial one too.
fn initial_userns(proc: &Path) -> Option<(u64, u64)> {
    ns_id(proc, "user")
}

/// PID 1's namespace of `kind`, else (when PID 1's cannot be looked at)
/// the auditor's own: (device, inode).
fn ns_id(proc: &Path, kind: &str) -> Option<(u64, u64)> {
    let id = |p: &Path| fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    id(&proc.join("1/ns").join(kind)).or_else(|| id(&Path::new("/proc/self/ns").join(kind)))
}

/// Why a process named like an owner's agent is not taken for it, if it is
/// not, by what the registry says the agent runs with (`owner::Runs`):
/// CAP_SYS_ADMIN or CAP_BPF in the node's user namespace for every agent,
/// and for those that run with hostNetwork (CNI agents: they configure the
/// node's routes and devices) CAP_NET_ADMIN in the node's network namespace
/// too. Anyone can name a process; a pod with CAP_BPF alone, or root in a
/// user or network namespace of its own, is not Cilium.
fn not_an_agent(
    dir: &Path,
    pid: u32,
    comm: &str,
    owner: Owner,
    userns: Option<(u64, u64)>,
    netns: Option<(u64, u64)>,
) -> Option<String> {
    let not = |why: &str| Some(format!("pid {pid} is named {comm} but {why}: not taken for {}'s agent", owner.title()));
    let own = |kind: &str| fs::metadata(dir.join("ns").join(kind)).ok().map(|m| (m.dev(), m.ino()));
    let caps = capeff(dir).unwrap_or(0);
    if caps & (1 << CAP_SYS_ADMIN | 1 << CAP_BPF) == 0 {
        return not("holds neither CAP_SYS_ADMIN nor CAP_BPF");
    }
    if userns.is_none() || own("user") != userns {
        return not("holds its capabilities only in a user namespace of its own");
    }
    if owner.spec().is_some_and(|s| s.runs == crate::owner::Runs::HostNetwork) {
        if caps & (1 << CAP_NET_ADMIN) == 0 {
            return not("lacks CAP_NET_ADMIN, which it needs for the node's network");
        }
        if netns.is_none() || own("net") != netns {
            return not("runs in a network namespace other than the node's (its agent runs with hostNetwork)");
        }
    }
    None
}

/// The owners' agents running (by command name), their cgroup namespaces,
/// what they hold, and (Cilium's, Calico's) what their configuration says.
pub fn agent_processes(proc: &Path, budget: &deadline::Budget, errors: &mut Vec<ScanError>) -> Vec<AgentProcess> {
    let initial = initial_userns(proc);
    let netns = ns_id(proc, "net");
    let mut out = Vec::new();
    let entries = match fs::read_dir(proc) {
        Ok(e) => e,
        Err(e) => {
            errors.push(ScanError { op: "readdir".into(), path: proc.display().to_string(), message: e.to_string() });
            return out;
        }
    };
    // Each agent's configuration is read on a thread of its own, all at
    // once: its root and its memory are its own to make block, and one
    // that does costs only its own answer.
    let mut reading = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim();
        let Some(owner) = Owner::from_agent_comm(comm) else { continue };
        // NB: the process may exit between reads; skip it then.
        let (Some(ns), Some(cgroup)) = (ns_inode(&entry.path().join("ns/cgroup")), proc_cgroup(proc, pid)) else {
            continue;
        };
        let pid: u32 = pid.parse().unwrap_or(0);
        let refused = not_an_agent(&entry.path(), pid, comm, owner, initial, netns);
        let privileged = refused.is_none();
        let holds = if privileged { held(&entry.path()) } else { Vec::new() };
        let intent = match refused {
            None if matches!(owner, Owner::Cilium | Owner::Calico) => {
                let proc = proc.to_owned();
                deadline::start(pid, move || intent::read(&proc, pid, owner)).map_err(|why| why.to_string())
            }
            None => Err(format!("{}'s configuration is not read", owner.title())),
            Some(why) => Err(why),
        };
        reading.push((
            AgentProcess {
                pid,
                owner,
                comm: comm.to_owned(),
                cgroupns: ns,
                cgroup,
                privileged,
                intent: Intent::unknown(""),
                holds,
            },
            intent,
        ));
    }
    for (mut p, intent) in reading {
        p.intent = match intent {
            Ok(pending) => pending.wait(budget).unwrap_or_else(|why| Intent::unknown(why.to_string())),
            Err(why) => Intent::unknown(why),
        };
        out.push(p);
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// What the CNIs pinned in PID 1's bpffs (`<proc>/1/root/sys/fs/bpf`):
/// nothing when bpffs is not mounted there or cannot be reached. Read
/// under the deadline of untrusted reads: the directories are others' to
/// write (see `bpf::pins`).
pub fn owner_pins(proc: &Path, budget: &deadline::Budget, errors: &mut Vec<ScanError>) -> Vec<OwnerPin> {
    let root = root::in_root_of(proc, 1, Path::new("/"));
    type PerCni = Vec<(Owner, &'static str, Result<Vec<pins::Pinned>, String>)>;
    let read = move || -> Result<PerCni, String> {
        let bpffs = match pins::open_bpffs_in(&root) {
            Ok(fd) => fd,
            // Not mounted, or PID 1's root closed to us: nothing to read.
            Err(pins::PinsError::NotBpffs(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.to_string()),
        };
        let shown = Path::new("/sys/fs/bpf");
        Ok(crate::owner::registry::OWNERS
            .iter()
            .flat_map(|s| s.pin_dirs.iter().map(move |d| (s.owner, *d)))
            .map(|(owner, dir)| (owner, dir, pins::pinned(bpffs.as_fd(), shown, dir).map_err(|e| e.to_string())))
            .collect())
    };
    let read = match deadline::within(1, budget, read) {
        Ok(r) => r,
        Err(why) => Err(why.to_string()),
    };
    let mut out = Vec::new();
    match read {
        Ok(per_cni) => {
            for (owner, dir, pinned) in per_cni {
                match pinned {
                    Ok(p) => out.extend(p.into_iter().map(|p| OwnerPin {
                        owner,
                        path: p.path,
                        prog_id: p.prog_id,
                        link_id: p.link.map(|l| l.link_id),
                    })),
                    Err(message) => {
                        let path = Path::new("/sys/fs/bpf").join(dir).display().to_string();
                        errors.push(ScanError { op: "read".into(), path, message });
                    }
                }
            }
        }
        Err(message) => errors.push(ScanError { op: "read".into(), path: "/sys/fs/bpf".into(), message }),
    }
    out
}

/// Whether the auditor's own cgroup namespace is the initial one: its own
/// cgroup2 mount shows root `/` and its top is the hierarchy root. Only then
/// is mountinfo's field 4 an absolute hierarchy path.
fn in_initial_cgroupns() -> bool {
    let Ok(own) = root::read_mountinfo(Path::new("/proc/self/mountinfo")) else { return false };
    own.mounts
        .iter()
        .filter(|m| m.is_cgroup2() && m.root == "/")
        .any(|m| fs::metadata(&m.mount_point).map(|md| md.ino() == ROOT_CGROUP_ID).unwrap_or(false))
}

/// cgroup2 mounts in PID 1's mount namespace and the id of each one's top.
pub fn pid1_cgroup_mounts(proc: &Path, audit_root: &AuditRoot, errors: &mut Vec<ScanError>) -> Vec<CgroupMount> {
    let path = proc.join("1/mountinfo");
    let mounts = match root::read_mountinfo(&path) {
        Ok(m) => {
            let p = path.display().to_string();
            errors.extend(m.skipped.iter().map(|e| ScanError {
                op: "parse".into(),
                path: p.clone(),
                message: e.to_string(),
            }));
            m.mounts
        }
        Err(e) => {
            errors.push(ScanError { op: "read".into(), path: path.display().to_string(), message: e.to_string() });
            return Vec::new();
        }
    };
    let textual_ok = audit_root.kind == RootKind::Hierarchy && in_initial_cgroupns();
    // Read only when a cgroup2 mount is hidden under another.
    let mut node_view: Option<Result<NodeView, String>> = None;
    mounts
        .iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| {
            let shadow = crate::mounts::shadowing(&mounts, m);
            let top = match shadow {
                // What is at its path is another mount's: its top comes from
                // its own entry, read where field 4 is the node's path.
                Some(_) => {
                    let view = node_view.get_or_insert_with(|| node_view_of(proc));
                    match view {
                        Ok(v) => v.top_of(m),
                        Err(e) => MountTop::Unknown { reason: format!("hidden under another mount, and {e}") },
                    }
                }
                None => match root::mount_top_id(proc, m) {
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
                },
            };
            CgroupMount {
                mount_point: m.mount_point.clone(),
                mountinfo_root: m.root.clone(),
                top,
                shadowed_by: shadow.map(|y| format!("{} at {}", y.fs_type, y.mount_point.display())),
            }
        })
        .collect()
}

/// PID 1's mounts as PID 1's cgroup namespace shows them (field 4 of a
/// cgroup2 mount: its top's path below that namespace's root), and a
/// directory of ours that is that root.
struct NodeView {
    pid1: Vec<Mount>,
    ns_root: PathBuf,
}

impl NodeView {
    /// The top of mount `m` (from the auditor's reading of PID 1's
    /// mountinfo) by its own entry in this view.
    fn top_of(&self, m: &Mount) -> MountTop {
        let Some(entry) = self.pid1.iter().find(|x| x.mount_id == m.mount_id) else {
            return MountTop::Unknown { reason: format!("mount {} went away meanwhile", m.mount_id) };
        };
        if entry.root.starts_with("/..") {
            return MountTop::Unknown {
                reason: format!("its top {} lies outside PID 1's cgroup namespace", entry.root),
            };
        }
        let p = self.ns_root.join(entry.root.trim_start_matches('/'));
        match fs::symlink_metadata(&p) {
            Ok(md) => MountTop::Known { cgroup_id: md.ino(), cgroup: None },
            Err(e) => MountTop::Unknown { reason: format!("{}: {e}", p.display()) },
        }
    }
}

/// Reads PID 1's mountinfo from a thread that joins PID 1's cgroup
/// namespace (nothing else of the agent moves), and finds PID 1's
/// cgroup-namespace root: one of our own cgroup2 mounts rooted there, else
/// one of PID 1's that is not hidden itself (through `<proc>/1/root`).
fn node_view_of(proc: &Path) -> Result<NodeView, String> {
    let ns = proc.join("1/ns/cgroup");
    let (proc_owned, ns_shown) = (proc.to_owned(), ns.display().to_string());
    std::thread::spawn(move || -> Result<NodeView, String> {
        let fd = fs::File::open(&ns).map_err(|e| format!("open {ns_shown}: {e}"))?;
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWCGROUP).map_err(|e| format!("setns {ns_shown}: {e}"))?;
        let read = |p: &Path| root::read_mountinfo(p).map(|m| m.mounts).map_err(|e| e.to_string());
        let pid1 = read(&proc_owned.join("1/mountinfo"))?;
        let own = read(Path::new("/proc/thread-self/mountinfo"))?;
        let ns_root = own
            .iter()
            .find(|m| m.is_cgroup2() && m.root == "/")
            .map(|m| m.mount_point.clone())
            .or_else(|| {
                pid1.iter()
                    .filter(|m| m.is_cgroup2() && m.root == "/")
                    .find(|m| crate::mounts::shadowing(&pid1, m).is_none())
                    .map(|m| root::in_root_of(&proc_owned, 1, &m.mount_point))
            })
            .ok_or("no cgroup2 mount at PID 1's cgroup-namespace root was found to read its top from")?;
        Ok(NodeView { pid1, ns_root })
    })
    .join()
    .unwrap_or_else(|_| Err("the thread reading PID 1's mounts panicked".into()))
}
