//! Records the `cgroup-iter` program writes and the agent reads, and the
//! kernel struct offsets the agent hands it at load time.

/// Field offsets and sizes the program needs, read by the agent from the
/// kernel's BTF at load time and set as the read-only global
/// `LAYOUT` (frozen, so the verifier sees constants). Nothing is baked in at
/// build time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelLayout {
    /// `struct cgroup`: `kn`, `bpf.progs`, `bpf.flags`, `nr_populated_csets`.
    pub cgroup_kn: u32,
    pub cgroup_progs: u32,
    pub cgroup_flags: u32,
    pub cgroup_populated: u32,
    /// Sizes of the `bpf.progs` and `bpf.flags` arrays: what the program
    /// reads of them, at most the buffer it reads into.
    pub progs_bytes: u32,
    pub flags_bytes: u32,
    /// Size of one `bpf.flags[]` element (u8 or u32 across kernels).
    pub flags_size: u32,
    /// `enum cgroup_bpf_attach_type`: `MAX_CGROUP_BPF_ATTACH_TYPE`.
    pub n_atypes: u32,
    /// `struct kernfs_node`: `parent` (`__parent` since 6.15), `name`, `id`.
    pub kn_parent: u32,
    pub kn_name: u32,
    pub kn_id: u32,
    /// `struct bpf_prog_list`: `node`, `prog`, `link`, and `flags` (6.15+;
    /// 0 where the kernel has none).
    pub pl_node: u32,
    pub pl_prog: u32,
    pub pl_link: u32,
    pub pl_flags: u32,
    /// `struct bpf_cgroup_link.link`, then `struct bpf_link`: `id`, `prog`.
    pub cgroup_link_link: u32,
    pub link_id: u32,
    pub link_prog: u32,
    /// `struct bpf_prog.aux`, `struct bpf_prog_aux.id`.
    pub prog_aux: u32,
    pub aux_id: u32,
    /// Not a layout: 1 for a sweep, which writes every cgroup's record
    /// with a name only when its id is above the global `NAMES_AFTER` (ids
    /// only grow: those are the cgroups made since the agent last knew the
    /// tree), and the programs of those holding any.
    pub sweep: u32,
}

/// Upper bound of attach types the program walks (the kernel has 38).
pub const MAX_ATYPES: usize = 64;
/// Programs per cgroup and hook (`BPF_CGROUP_MAX_PROGS`).
pub const MAX_PROGS: usize = 64;
/// Longest cgroup name (`NAME_MAX`) plus its NUL.
pub const NAME_SIZE: usize = 256;

pub const KIND_CGROUP: u32 = 1;
pub const KIND_ATTACH: u32 = 2;

/// One visited cgroup, in pre-order: a parent comes before its children.
/// Written with only `name_len` bytes of `name`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CgroupRecord {
    pub kind: u32,
    pub name_len: u32,
    pub id: u64,
    pub parent_id: u64,
    /// Processes are in this cgroup itself (`nr_populated_csets` > 0).
    pub populated: u32,
    pub _pad: u32,
    pub name: [u8; NAME_SIZE],
}

/// A `CgroupRecord` without its name (`name_len` 0): what a sweep writes
/// of a cgroup the agent knows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupHeader {
    pub kind: u32,
    pub name_len: u32,
    pub id: u64,
    pub parent_id: u64,
    pub populated: u32,
    pub _pad: u32,
}

/// Bytes of a `CgroupRecord` before its name.
pub const CGROUP_RECORD_HEADER: usize = 32;
const _: () = assert!(core::mem::size_of::<CgroupHeader>() == CGROUP_RECORD_HEADER);

/// One program attached directly to the cgroup of the preceding record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookRecord {
    pub kind: u32,
    /// Index in `enum cgroup_bpf_attach_type`.
    pub atype: u32,
    pub cgroup_id: u64,
    pub prog_id: u32,
    /// The bpf_link holding it, 0 for `BPF_PROG_ATTACH`.
    pub link_id: u32,
    /// The cgroup's `bpf.flags[atype]` (what `BPF_PROG_QUERY` reports).
    pub flags: u32,
    /// The program's own `bpf_prog_list.flags` (`BPF_F_PREORDER`; 0 on
    /// kernels without them).
    pub prog_flags: u32,
}

/// Counters the program keeps in its `STATUS` array: records the ring
/// buffer had no room for (the agent runs the pass again, larger) ...
pub const STATUS_DROPPED: u32 = 0;
/// ... and kernel reads that failed (the agent falls back to the syscall walk).
pub const STATUS_FAILED: u32 = 1;
/// ... and cgroups visited.
pub const STATUS_VISITED: u32 = 2;
pub const STATUS_SLOTS: u32 = 3;

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)] and made of u32 only: no padding, every bit pattern
    // valid, so aya may copy it into the program's read-only global.
    unsafe impl aya::Pod for super::KernelLayout {}
}
