//! The plain data one scan of a node produces. Rules, attribution and
//! reporting are pure functions of it; only `scan` talks to the kernel.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::bpf::programs::Program;
use crate::bpf::sys::CgroupLinkInfo;
use crate::bpf::{AttachFlags, AttachType, BpfCommand};
use crate::cgroup::AuditRoot;
use crate::owner::Cni;

/// One program attached directly to one cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Relative to the audited root, `/` for the root itself.
    pub cgroup: String,
    pub cgroup_id: u64,
    pub attach_type: AttachType,
    pub attach_flags: AttachFlags,
    pub prog_id: u32,
    /// The bpf_link holding it, when it was attached with `BPF_LINK_CREATE`.
    pub link_id: Option<u32>,
}

/// A pod's own cgroup and the socket-LB programs that run for its sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroup {
    pub cgroup: String,
    pub pod_uid: String,
    /// Effective (own + inherited) connect4 and connect6 program ids.
    pub effective_connect: Vec<u32>,
}

/// Where a cgroup2 mount in PID 1's mount namespace is rooted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MountTop {
    /// The top directory's cgroup id, and its path when it lies in the
    /// audited tree (`None`: outside it, e.g. with `--cgroup-root`).
    Known { cgroup_id: u64, cgroup: Option<String> },
    /// Neither `/proc/1/root` nor a trustworthy mountinfo root was available.
    Unknown { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// Field 4 of mountinfo, as read from the auditor's cgroup namespace.
    pub mountinfo_root: String,
    pub top: MountTop,
}

/// A process, as named in findings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessRef {
    pub pid: u32,
    pub comm: String,
}

/// A running CNI agent and the cgroup namespace it lives in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CniProcess {
    pub pid: u32,
    pub cni: Cni,
    pub comm: String,
    /// Inode of `/proc/<pid>/ns/cgroup`.
    pub cgroupns: u64,
    /// Its cgroup as `/proc/<pid>/cgroup` shows it to the auditor.
    pub cgroup: String,
}

/// One attach-changing bpf() call seen by the daemon's tracepoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachRecord {
    /// When the call was made, in milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    pub command: BpfCommand,
    pub attach_type: Option<AttachType>,
    /// The syscall's result: 0 or a new fd on success, -errno on failure.
    pub result: i64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// cgroup id of the calling process.
    pub caller_cgroup_id: u64,
    /// cgroup id of the target fd, when it was still open to read.
    pub target_cgroup_id: Option<u64>,
    /// Program id behind the program fd, when it was still open to read.
    pub prog_id: Option<u32>,
}

impl AttachRecord {
    pub fn succeeded(&self) -> bool {
        self.result >= 0
    }
}

/// Something the scan could not read; the audit goes on without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanError {
    pub op: String,
    pub path: String,
    pub message: String,
}

/// How the tree was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WalkUsed {
    /// One pass of the in-kernel iterator.
    BpfIter,
    /// One directory open and a BPF_PROG_QUERY per hook for every cgroup.
    Syscalls,
}

/// How the cgroup tree was read, and why not in the kernel if it was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkInfo {
    pub method: WalkUsed,
    /// Why `--walk auto` fell back to the syscall walk.
    pub fallback: Option<String>,
    /// In-kernel passes run (a pass whose buffer overflowed is run again).
    pub passes: u32,
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub node: String,
    pub kernel: String,
    pub root: AuditRoot,
    pub cgroups_scanned: u64,
    pub cgroups_vanished: u64,
    pub walk: WalkInfo,
    pub unsupported_attach_types: Vec<AttachType>,
    pub attachments: Vec<Attachment>,
    /// Every program loaded on the node, by id.
    pub programs: BTreeMap<u32, Program>,
    pub cgroup_links: Vec<CgroupLinkInfo>,
    pub pods: Vec<PodCgroup>,
    pub mounts: Vec<CgroupMount>,
    pub cni_processes: Vec<CniProcess>,
    /// The cgroup namespace CNI agents are compared with: PID 1's, or the
    /// auditor's own when PID 1's cannot be read (then `reference_ns_is_pid1`
    /// is false).
    pub reference_cgroupns: Option<u64>,
    pub reference_ns_is_pid1: bool,
    /// Processes of cgroups that hold socket-LB programs below the root.
    pub processes: BTreeMap<String, Vec<ProcessRef>>,
    /// Paths (relative to the root) of cgroups the scan was asked to name:
    /// callers seen in attach events.
    pub cgroup_paths: BTreeMap<u64, String>,
    /// Recent attach events (daemon only; empty for one-shot audits).
    pub events: Vec<AttachRecord>,
    pub errors: Vec<ScanError>,
}
