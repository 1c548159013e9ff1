//! The node itself, as the scan reads it besides the cgroup tree: its name
//! and kernel, the auditor's capabilities, the processes in a cgroup, and
//! whether the processes in view are the node's (`pid_view`). The owners'
//! agents are read in `agents.rs`, their pins in `owner_pins.rs`, PID 1's
//! cgroup2 mounts in `cgroup_mounts.rs`.

use std::fs;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::AuditError;
use crate::cgroup::tree::ProcessRef;
use crate::snapshot::{PidView, ScanError};

pub(super) const CAP_NET_ADMIN: u32 = 12;
pub(super) const CAP_SYS_ADMIN: u32 = 21;
pub(super) const CAP_BPF: u32 = 39;

/// The effective capabilities of the process whose procfs directory is `dir`.
pub(super) fn capeff(dir: &Path) -> Option<u64> {
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
pub(super) fn proc_cgroup(proc: &Path, pid: &str) -> Option<String> {
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
