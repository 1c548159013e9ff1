//! The record the `bpf-calls` program sends the agent for each bpf(2) call
//! that changes cgroup attachments.

/// bpf(2) commands that change cgroup attachments.
pub const BPF_PROG_ATTACH: u32 = 8;
pub const BPF_PROG_DETACH: u32 = 9;
pub const BPF_LINK_CREATE: u32 = 28;
pub const BPF_LINK_UPDATE: u32 = 29;
pub const BPF_LINK_DETACH: u32 = 34;

/// `attach_type` when the command does not carry one (link update/detach).
pub const ATTACH_TYPE_NONE: u32 = u32::MAX;

/// One attach-changing bpf() call, sent at syscall exit with its result.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BpfCallRecord {
    /// `bpf_ktime_get_ns()` at syscall entry (CLOCK_MONOTONIC).
    pub ktime_ns: u64,
    /// The caller's cgroup-v2 id (`bpf_get_current_cgroup_id`).
    pub caller_cgroup_id: u64,
    /// The syscall's return value (0 or a new fd on success, -errno).
    pub ret: i64,
    /// `bpf_get_current_pid_tgid()`: tgid in the upper 32 bits.
    pub pid_tgid: u64,
    pub cmd: u32,
    pub attach_type: u32,
    /// PROG_ATTACH/DETACH, LINK_CREATE: the target (cgroup) fd;
    /// LINK_UPDATE/DETACH: the link fd.
    pub target_fd: u32,
    /// The program fd (LINK_UPDATE: the new program's).
    pub prog_fd: u32,
    pub flags: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}
