//! The record the `cgroup-events` programs send the agent for each change
//! the kernel made to the cgroup tree's BPF programs (an attach, a detach, a
//! link's program replaced, a cgroup link released) or to the tree itself (a
//! cgroup made or removed), and the layout the agent hands them.

/// A `bpf(2)` call that changes cgroup attachments returned success.
pub const EVENT_BPF: u32 = 1;
/// `cgroup_mkdir`: a cgroup was made (its parent and name are sent; the
/// agent reads its id).
pub const EVENT_MKDIR: u32 = 2;
/// `cgroup_rmdir`: a cgroup was removed (its programs go with it).
pub const EVENT_RMDIR: u32 = 3;

/// bpf(2) commands that change cgroup attachments.
pub const BPF_PROG_ATTACH: u32 = 8;
pub const BPF_PROG_DETACH: u32 = 9;
pub const BPF_LINK_CREATE: u32 = 28;
pub const BPF_LINK_UPDATE: u32 = 29;
pub const BPF_LINK_DETACH: u32 = 34;
/// Not a bpf(2) command: a cgroup link ended without `BPF_LINK_DETACH`
/// (its last fd was closed, or its cgroup went).
pub const LINK_RELEASED: u32 = 1000;

/// `attach_type` when the command does not carry one.
pub const NO_ATTACH_TYPE: u32 = u32::MAX;
/// `BPF_LINK_TYPE_CGROUP` (UAPI).
pub const LINK_TYPE_CGROUP: u32 = 3;
/// `CGROUP2_SUPER_MAGIC`: the target fd is a cgroup-v2 directory.
pub const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;

/// Longest cgroup name (`NAME_MAX`) plus its NUL.
pub const NAME_SIZE: usize = 256;

/// Which fields of an `EVENT_BPF` record were resolved from the caller's
/// file descriptors (which another of its threads may swap while the call
/// runs) rather than read from the kernel's own objects: hints, that the
/// agent checks against what it reads again.
pub const HINT_CGROUP: u32 = 1;
pub const HINT_PROG: u32 = 2;
pub const HINT_LINK: u32 = 4;
/// The call's arguments could not be read at all (`cgroup_id`,
/// `attach_type`, `prog_id` are unknown, not zero).
pub const UNREAD: u32 = 8;

/// One change. Written with only `name_len` bytes of `name`.
///
/// For `EVENT_BPF`: the kernel functions that make cgroup attachments
/// report them once they succeeded (fexit, kretprobe; the kernel's own
/// copy of the call's attr and its return value), or, with syscall tracing,
/// the `bpf(2)` call does at its exit. `hints` says which fields came
/// through the caller's file descriptors.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CgroupEvent {
    pub kind: u32,
    /// EVENT_BPF: the bpf(2) command.
    pub cmd: u32,
    /// EVENT_BPF: UAPI `enum bpf_attach_type` the call passed;
    /// `NO_ATTACH_TYPE` for link updates and detaches.
    pub attach_type: u32,
    /// EVENT_BPF: the attach flags the call passed.
    pub flags: u32,
    /// The cgroup made, removed, or attached to (for link calls: the link's
    /// cgroup); 0 when the target was not a cgroup-v2 directory or could
    /// not be read.
    pub cgroup_id: u64,
    /// EVENT_MKDIR: the new cgroup's parent.
    pub parent_id: u64,
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC).
    pub ktime_ns: u64,
    /// The caller: tgid in the upper 32 bits.
    pub pid_tgid: u64,
    /// The caller's cgroup-v2 id.
    pub caller_cgroup_id: u64,
    /// EVENT_BPF: the call's result (0, or the new link's fd).
    pub ret: i64,
    /// EVENT_BPF: the program the call named.
    pub prog_id: u32,
    /// EVENT_BPF: the link created, updated or detached; 0 for none.
    pub link_id: u32,
    pub comm: [u8; 16],
    pub name_len: u32,
    /// `HINT_*` and `UNREAD` bits.
    pub hints: u32,
    /// EVENT_MKDIR: the new cgroup's name.
    pub name: [u8; NAME_SIZE],
}

/// Bytes of a `CgroupEvent` before its name.
pub const EVENT_HEADER: usize = 96;

/// Where the programs find what they read, from the running kernel's BTF,
/// set as the read-only global `LAYOUT` (frozen, so the verifier sees
/// constants).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsLayout {
    /// Syscall tracing only (x86_64): `bpf(2)`'s native and ia32 numbers,
    /// and the `struct pt_regs` members holding the syscall number at exit,
    /// the first two arguments of a 64-bit call (`di`, `si`) and of an ia32
    /// one (`bx`, `cx`).
    pub nr_bpf: u32,
    pub nr_bpf_ia32: u32,
    pub regs_nr: u32,
    pub regs_arg0: u32,
    pub regs_arg1: u32,
    pub regs_ia32_arg0: u32,
    pub regs_ia32_arg1: u32,
    /// `struct task_struct.thread_info.status`, whose `TS_COMPAT` bit marks
    /// an ia32 syscall in progress.
    pub task_status: u32,
    /// `struct task_struct.files`, `struct files_struct.fdt`,
    /// `struct fdtable`: `max_fds`, `fd`.
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    /// `struct file`: `f_inode`, `private_data`.
    pub file_inode: u32,
    pub file_private: u32,
    /// `struct inode`: `i_ino`, `i_sb`; `struct super_block.s_magic`.
    pub inode_ino: u32,
    pub inode_sb: u32,
    pub sb_magic: u32,
    /// `struct bpf_prog.aux`, `struct bpf_prog_aux.id`.
    pub prog_aux: u32,
    pub aux_id: u32,
    /// `struct bpf_link`: `id`, `type`, `prog`.
    pub link_id: u32,
    pub link_type: u32,
    pub link_prog: u32,
    /// `struct bpf_cgroup_link`: `link` (embedded), `cgroup`, `type`.
    pub cgroup_link_link: u32,
    pub cgroup_link_cgroup: u32,
    pub cgroup_link_type: u32,
    /// `struct cgroup.kn`; `struct kernfs_node.id`.
    pub cgroup_kn: u32,
    pub kn_id: u32,
}

/// x86's `TS_COMPAT` (arch/x86/include/asm/thread_info.h): an ia32
/// syscall is in progress. Set at syscall entry, cleared on the way back to
/// user mode, after the `sys_exit` tracepoint.
pub const TS_COMPAT: u32 = 0x0002;
/// x86's `__X32_SYSCALL_BIT`: an x32 call (64-bit registers, the native
/// numbers with this bit set).
pub const X32_SYSCALL_BIT: u64 = 0x4000_0000;

/// What the programs count in their `STATUS` array (per CPU): events the
/// ring buffer, the budget or the table of calls in flight had no room for ...
pub const STATUS_LOST: u32 = 0;
/// ... kernel reads that failed (the event was sent without the field) ...
pub const STATUS_READ_FAILED: u32 = 1;
/// ... and calls whose attr could not be read from user memory (syscall
/// tracing: sent as `UNREAD`, never as zeros; counted, never logged).
pub const STATUS_UNREADABLE: u32 = 2;
/// ... and (kprobe set) calls noted at entry whose return the kretprobe
/// never saw: its instances ran out (`maxactive`: one per thread inside the
/// function, waiting on `cgroup_mutex` included), so their events were
/// lost. Counted when the same thread's next call finds its last one still
/// noted; the agent counts the ones no later call comes for.
pub const STATUS_RETURN_MISSED: u32 = 3;
pub const STATUS_SLOTS: u32 = 4;

/// Events a CPU may send per second, and in one burst: beyond that they are
/// counted lost (the agent then reads the whole tree), so no workload can
/// make the agent spend more than this on events.
pub const EVENTS_PER_SECOND: u64 = 2_000;
pub const EVENT_BURST: u64 = 4_000;

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)] and made of u32 only: no padding, every bit pattern
    // valid, so it may be copied into the programs' read-only global.
    unsafe impl aya::Pod for super::EventsLayout {}
}
