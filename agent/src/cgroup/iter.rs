//! The in-kernel walk: an `iter/cgroup` program (agent-ebpf's `cgroup-iter`
//! object, embedded) visits the audit root and every descendant once, in one
//! `read(2)`, and reports each cgroup's own attachments and whether
//! processes are in it through a ring buffer. It replaces tens of `BPF_PROG_QUERY` calls
//! and an `openat`/`getdents` per cgroup with one pass under `cgroup_mutex`.
//!
//! Kernel struct offsets come from the running kernel's BTF at load time.
//! Anything missing (kernel before 6.1, no BTF, a renamed member, a failed
//! kernel read) is an `IterError` and the caller falls back to the syscall
//! walk; records are never guessed. The program is loaded by `object`, not
//! aya's loader, so a one-shot audit pays no full parse of the kernel's BTF.

use std::fs;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;

use aya::maps::{Array, Map, MapData, RingBuf};
use aya_obj::generated::{bpf_attach_type, bpf_prog_type};

use crate::bpf::AttachType;
use crate::bpf::btf::{BtfError, KernelBtf, NoKernelBtf, Types};
use crate::bpf::bytes::{u32_at, u64_at};
use crate::bpf::object::{self, Spec};
use crate::bpf::sys;

pub use agent_common::cgroup_iter::KernelLayout;
use agent_common::cgroup_iter::*;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cgroup-iter"));
const PROGRAM: &str = "cgroup_walk";

// The decoders below read these offsets; the program writes the structs.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(CgroupRecord, name_len) == 4 && offset_of!(CgroupRecord, id) == 8);
    assert!(offset_of!(CgroupRecord, parent_id) == 16 && offset_of!(CgroupRecord, populated) == 24);
    assert!(offset_of!(CgroupRecord, name) == CGROUP_RECORD_HEADER);
    assert!(size_of::<CgroupRecord>() == CGROUP_RECORD_HEADER + NAME_SIZE);
    assert!(offset_of!(HookRecord, atype) == 4 && offset_of!(HookRecord, prog_id) == 16);
    assert!(offset_of!(HookRecord, link_id) == 20 && offset_of!(HookRecord, flags) == 24);
    assert!(offset_of!(HookRecord, prog_flags) == 28);
};

/// Why the in-kernel walk could not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum IterError {
    #[error(transparent)]
    NoBtf(NoKernelBtf),
    #[error("this kernel has no cgroup iterator (no function bpf_iter_cgroup in its BTF; it came in Linux 6.1)")]
    NoCgroupIterator,
    #[error(transparent)]
    Btf(BtfError),
    #[error("loading the iter/cgroup program (kernel 6.1+, CAP_BPF and CAP_PERFMON): {0}")]
    Load(#[source] object::LoadError),
    /// The loaded object lacks what the agent built into it.
    #[error("the iter/cgroup object has no {0}")]
    Missing(&'static str),
    #[error("the iter/cgroup object's map {name}: {error}")]
    Map {
        name: &'static str,
        #[source]
        error: aya::maps::MapError,
    },
    #[error(transparent)]
    Syscall(#[from] sys::SyscallError),
    #[error("reading the iterator: {0}")]
    Read(std::io::Error),
    /// Why the walker could not be made, as found on first use (and kept:
    /// every later pass says the same).
    #[error(transparent)]
    Unavailable(std::sync::Arc<IterError>),
    #[error("{0} kernel read(s) failed inside the iterator")]
    KernelRead(u64),
    #[error("the record buffer overflowed even at {0} bytes")]
    Overflow(u32),
}

impl IterError {
    /// Whether the kernel (or its BTF, or the agent's privileges: a bpf()
    /// call refused) cannot run the iterator at all, as opposed to one pass
    /// that went wrong.
    pub fn kernel_lacks_it(&self) -> bool {
        match self {
            IterError::NoBtf(_)
            | IterError::NoCgroupIterator
            | IterError::Btf(_)
            | IterError::Load(_)
            | IterError::Missing(_)
            | IterError::Unavailable(_) => true,
            // Refused, as a kernel without it or a seccomp profile refuses;
            // not a call that may work next time (ENOMEM, EAGAIN, EINTR).
            // (524 is the kernel's own ENOTSUPP, which bpf() can return.)
            IterError::Syscall(e) => {
                matches!(e.errno(), Some(libc::EPERM | libc::EACCES | libc::EINVAL | libc::EOPNOTSUPP | 524))
            }
            _ => false,
        }
    }
}

impl From<BtfError> for IterError {
    fn from(e: BtfError) -> Self {
        IterError::Btf(e)
    }
}

/// The layout the program needs and what each hook index means.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub layout: KernelLayout,
    /// `enum cgroup_bpf_attach_type` index -> attach type (None: a hook this
    /// agent does not know, reported as such).
    pub hooks: Vec<(String, Option<AttachType>)>,
}

/// Reads offsets and the hook enum from the kernel's BTF.
pub fn kernel_layout(types: &Types<'_>) -> Result<Kernel, BtfError> {
    let cgroup_bpf = |m: &str| types.offset_of("cgroup", &format!("bpf.{m}"));
    let (cgroup_flags, flags_type) = cgroup_bpf("flags")?;
    // The program follows NULL-terminated hlists (6.0+); older kernels kept
    // circular list_heads here, which it must not walk.
    let (cgroup_progs, progs_type) = cgroup_bpf("progs")?;
    if types.element_name(progs_type).as_deref() != Some("hlist_head") {
        return Err(BtfError::Missing("cgroup_bpf.progs as hlist_head[] (kernel 6.0+)".into()));
    }
    let atypes = types.enum_values("cgroup_bpf_attach_type")?;
    let uapi = types.enum_values("bpf_attach_type")?;
    let value = |name: &str, set: &[(String, i64)]| set.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
    let missing = |what: &str| BtfError::Missing(format!("{what} in enum cgroup_bpf_attach_type"));
    let n_atypes = value("MAX_CGROUP_BPF_ATTACH_TYPE", &atypes).ok_or_else(|| missing("MAX_CGROUP_BPF_ATTACH_TYPE"))?;
    if !(1..=MAX_ATYPES as i64).contains(&n_atypes) {
        return Err(BtfError::Missing(format!("at most {MAX_ATYPES} cgroup attach types (kernel has {n_atypes})")));
    }
    let lsm = (value("CGROUP_LSM_START", &atypes), value("CGROUP_LSM_END", &atypes));
    let hooks = (0..n_atypes)
        .map(|i| {
            if let (Some(start), Some(end)) = lsm
                && (start..=end).contains(&i)
            {
                return ("CGROUP_LSM".to_owned(), AttachType::from_name("lsm_cgroup"));
            }
            let name = atypes
                .iter()
                .find(|(n, v)| *v == i && !n.starts_with("CGROUP_LSM"))
                .map(|(n, _)| n.clone())
                .unwrap_or_default();
            let uapi_value = value(&format!("BPF_{name}"), &uapi);
            (name, uapi_value.and_then(|v| AttachType::from_kernel(v as u32)))
        })
        .collect();
    let off = |s: &str, m: &str| types.offset_of(s, m).map(|(o, _)| o);
    // The program reads both arrays whole into fixed buffers: refuse a
    // kernel whose arrays would not fit, rather than read past them.
    let array_bytes = |id: u32, what: &str, max: usize| {
        let size = types.type_size(id).ok_or_else(|| BtfError::Missing(format!("the size of cgroup_bpf.{what}")))?;
        if size as usize > max {
            return Err(BtfError::Missing(format!(
                "cgroup_bpf.{what} of at most {max} bytes (kernel has {size}): the iterator's buffer is smaller"
            )));
        }
        Ok(size)
    };
    let layout = KernelLayout {
        cgroup_kn: off("cgroup", "kn")?,
        cgroup_progs,
        cgroup_flags,
        cgroup_populated: off("cgroup", "nr_populated_csets")?,
        progs_bytes: array_bytes(progs_type, "progs", 8 * MAX_ATYPES)?,
        flags_bytes: array_bytes(flags_type, "flags", 8 * (MAX_ATYPES / 2))?,
        flags_size: types.element_size(flags_type)?,
        n_atypes: n_atypes as u32,
        kn_parent: off("kernfs_node", "__parent|parent")?,
        kn_name: off("kernfs_node", "name")?,
        kn_id: off("kernfs_node", "id")?,
        pl_node: off("bpf_prog_list", "node")?,
        pl_prog: off("bpf_prog_list", "prog")?,
        pl_link: off("bpf_prog_list", "link")?,
        // Its own flags (BPF_F_PREORDER): 6.15's; never at offset 0.
        pl_flags: off("bpf_prog_list", "flags").unwrap_or(0),
        cgroup_link_link: off("bpf_cgroup_link", "link")?,
        link_id: off("bpf_link", "id")?,
        link_prog: off("bpf_link", "prog")?,
        prog_aux: off("bpf_prog", "aux")?,
        aux_id: off("bpf_prog_aux", "id")?,
        sweep: 0,
    };
    if !matches!(layout.flags_size, 1 | 4) {
        return Err(BtfError::Missing(format!("u8 or u32 cgroup_bpf.flags (kernel has {} bytes)", layout.flags_size)));
    }
    crate::features::record(
        crate::features::Feature::ProgramFlags,
        if layout.pl_flags != 0 {
            crate::features::Verdict::yes_as("bpf_prog_list.flags: BPF_F_PREORDER read by the in-kernel walk")
        } else {
            crate::features::Verdict::no(
                "this kernel's bpf_prog_list has no flags (before 6.15): no program runs first",
            )
        },
    );
    Ok(Kernel { layout, hooks })
}

/// One program attached directly to the cgroup being visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookProgram {
    /// Index in `enum cgroup_bpf_attach_type` (see `Kernel::hooks`).
    pub atype: u32,
    pub prog_id: u32,
    pub link_id: u32,
    pub flags: u32,
    /// Its own flags (`BPF_F_PREORDER`): 0 on kernels without them (no
    /// program can run first there).
    pub prog_flags: Option<u32>,
}

/// One cgroup as the iterator saw it.
#[derive(Debug, Clone, Default)]
pub struct IterCgroup {
    pub id: u64,
    pub parent_id: u64,
    /// As the kernel holds it: any byte but `/` and NUL.
    pub name: Vec<u8>,
    /// Processes are in this cgroup itself.
    pub populated: bool,
    pub programs: Vec<HookProgram>,
}

/// What one pass cost and saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct IterStats {
    /// Passes run (a pass whose buffer overflowed is run again, larger).
    pub passes: u32,
    /// Cgroups the last pass visited.
    pub visited: u64,
}

/// Decodes a `CgroupRecord` (field by field, no unsafe).
fn decode_cgroup(b: &[u8]) -> Option<IterCgroup> {
    let name_len = u32_at(b, 4)? as usize;
    let name = b.get(CGROUP_RECORD_HEADER..CGROUP_RECORD_HEADER + name_len)?;
    Some(IterCgroup {
        id: u64_at(b, 8)?,
        parent_id: u64_at(b, 16)?,
        name: name.to_vec(),
        populated: u32_at(b, 24)? != 0,
        programs: Vec::new(),
    })
}

fn decode_attach(b: &[u8]) -> Option<HookProgram> {
    Some(HookProgram {
        atype: u32_at(b, 4)?,
        prog_id: u32_at(b, 16)?,
        link_id: u32_at(b, 20)?,
        flags: u32_at(b, 24)?,
        prog_flags: Some(u32_at(b, 28)?),
    })
}

/// Largest ring buffer a pass may use: its pages are the agent's memory
/// (charged to its cgroup, mapped twice). A tree whose records outrun the
/// reading by more is read by the syscall walk, which holds nothing.
const MAX_BUFFER: u32 = 16 << 20;

/// A first ring buffer size for `cgroups` cgroups: records are copied out
/// while the kernel writes them, so it holds the lag, not the tree (~190
/// bytes a cgroup): a third of the tree, 256 KiB to 4 MiB, a power of two
/// (the kernel's rule). It is mapped twice (the kernel's wrap-around
/// mapping), so it counts double in RSS.
fn buffer_size(cgroups: u64) -> u32 {
    cgroups.saturating_mul(64).clamp(256 << 10, 4 << 20).next_power_of_two() as u32
}

/// The named types `kernel_layout` looks up, indexed in the one pass over
/// the kernel's BTF.
const KERNEL_TYPES: &[&str] = &[
    "cgroup",
    "kernfs_node",
    "bpf_prog_list",
    "bpf_cgroup_link",
    "bpf_link",
    "bpf_prog",
    "bpf_prog_aux",
    "cgroup_bpf_attach_type",
    "bpf_attach_type",
    "bpf_iter_cgroup",
];

/// The kernel's layout and the program's attach target, made once per
/// process (`shared`): each `walk` then only loads the program.
pub struct Walker {
    kernel: Kernel,
    /// The BTF id of `bpf_iter_cgroup`, the iterator the program attaches to.
    target: u32,
}

/// The process's walker, or why it cannot be made: the daemon audits many
/// times with one, and does not re-read the kernel's BTF each time to learn
/// again that the kernel lacks what the program needs.
static SHARED: Mutex<Option<Result<Walker, std::sync::Arc<IterError>>>> = Mutex::new(None);

impl Walker {
    pub fn new() -> Result<Walker, IterError> {
        let data = KernelBtf::read().map_err(IterError::NoBtf)?;
        let types = Types::parse_indexed(&data, KERNEL_TYPES)?;
        // What the kernel lacks first: without the iterator, nothing else matters.
        let target = types.func_id("bpf_iter_cgroup").map_err(|_| IterError::NoCgroupIterator)?;
        let kernel = kernel_layout(&types)?;
        Ok(Walker { kernel, target })
    }

    /// Runs `f` with the process's walker, making it on first use.
    pub fn shared<R>(f: impl FnOnce(&Walker) -> R) -> Result<R, IterError> {
        let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        match slot.get_or_insert_with(|| Walker::new().map_err(std::sync::Arc::new)) {
            Ok(walker) => Ok(f(walker)),
            Err(why) => Err(IterError::Unavailable(why.clone())),
        }
    }

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Walks `root` and all its descendants in the kernel, calling `visit`
    /// with each cgroup in pre-order (parents before children) as the
    /// records arrive: nothing of the tree is held here. When the kernel
    /// outran the reading and the pass must run again, `visit` gets
    /// `Step::Restart` first: what it gathered must then be forgotten. On
    /// `Err`, what it gathered is incomplete.
    pub fn walk(&self, root: BorrowedFd<'_>, visit: impl FnMut(Step)) -> Result<IterStats, IterError> {
        walk(&self.kernel.layout, u64::MAX, self.target, root, visit)
    }

    /// Like `walk`, for a sweep: every cgroup with its programs, but named
    /// (a non-empty `name`) only when its id is above `names_after`: the
    /// cgroups made since the caller last knew the tree (the kernel hands
    /// out ever larger ids).
    pub fn sweep(
        &self,
        root: BorrowedFd<'_>,
        names_after: u64,
        visit: impl FnMut(Step),
    ) -> Result<IterStats, IterError> {
        let layout = KernelLayout { sweep: 1, ..self.kernel.layout };
        walk(&layout, names_after, self.target, root, visit)
    }
}

/// What a walk hands its visitor.
#[derive(Debug)]
pub enum Step {
    Cgroup(IterCgroup),
    /// The pass runs again from the start.
    Restart,
}

fn walk(
    layout: &KernelLayout,
    names_after: u64,
    target: u32,
    root: BorrowedFd<'_>,
    mut visit: impl FnMut(Step),
) -> Result<IterStats, IterError> {
    let cgroups = crate::cgroup::count(root).unwrap_or(1024);
    let mut size = buffer_size(cgroups);
    let mut stats = IterStats::default();
    loop {
        stats.passes += 1;
        let mut loaded = object::load(
            OBJECT,
            &Spec {
                programs: &[object::Program {
                    name: PROGRAM,
                    prog_type: bpf_prog_type::BPF_PROG_TYPE_TRACING as u32,
                    expected_attach_type: bpf_attach_type::BPF_TRACE_ITER as u32,
                    attach_btf_id: target,
                }],
                globals: &[("LAYOUT", sys::pod_bytes(layout)), ("NAMES_AFTER", &names_after.to_ne_bytes())],
                max_entries: &[("CGROUP_RECORDS", size)],
            },
        )
        .map_err(IterError::Load)?;
        let prog = loaded.prog(PROGRAM).ok_or(IterError::Missing(PROGRAM))?;
        let link = sys::cgroup_iter_link_create(prog, root)?;
        let reader = fs::File::from(sys::iter_create(link.as_fd())?);
        let records = loaded.take_map("CGROUP_RECORDS").map(Map::RingBuf);
        let mut records: RingBuf<MapData> = typed(records, "CGROUP_RECORDS")?;
        if stats.passes > 1 {
            visit(Step::Restart);
        }
        run_pass(reader, &mut records, &mut visit)?;

        let status: Array<MapData, u64> = typed(loaded.take_map("STATUS").map(Map::Array), "STATUS")?;
        let slot = |i| status.get(&i, 0).unwrap_or(0);
        let (dropped, failed) = (slot(STATUS_DROPPED), slot(STATUS_FAILED));
        stats.visited = slot(STATUS_VISITED);
        if failed > 0 {
            return Err(IterError::KernelRead(failed));
        }
        if dropped > 0 {
            // The kernel outran the copy: run the pass again with more room.
            if size >= MAX_BUFFER {
                return Err(IterError::Overflow(size));
            }
            size = size.saturating_mul(4).min(MAX_BUFFER);
            continue;
        }
        drop((records, link, loaded));
        return Ok(stats);
    }
}

/// A map of the loaded object as the reader's type.
fn typed<T: TryFrom<Map, Error = aya::maps::MapError>>(map: Option<Map>, name: &'static str) -> Result<T, IterError> {
    let map = map.ok_or(IterError::Missing(name))?;
    map.try_into().map_err(|error| IterError::Map { name, error })
}

/// Runs the pass (one `read(2)` of the iterator, on its own thread) while
/// this thread takes the records out of the ring buffer as they arrive and
/// hands each cgroup to `visit`, so the buffer only has to hold the lag,
/// and nothing holds the tree (a pod can make cgroups by the hundred
/// thousand, with 255-byte names).
fn run_pass(
    mut reader: fs::File,
    records: &mut RingBuf<MapData>,
    visit: &mut impl FnMut(Step),
) -> Result<(), IterError> {
    let mut current: Option<IterCgroup> = None;
    let mut drain = |records: &mut RingBuf<MapData>, current: &mut Option<IterCgroup>| {
        while let Some(item) = records.next() {
            match u32_at(&item, 0) {
                Some(KIND_CGROUP) => {
                    let next = decode_cgroup(&item);
                    drop(item);
                    if let Some(done) = std::mem::replace(current, next) {
                        visit(Step::Cgroup(done));
                    }
                }
                Some(KIND_ATTACH) => {
                    if let (Some(c), Some(p)) = (current.as_mut(), decode_attach(&item)) {
                        c.programs.push(p);
                    }
                }
                _ => {}
            }
        }
    };
    std::thread::scope(|s| {
        let pass = s.spawn(move || {
            // The program writes nothing to the seq_file: the first read
            // runs the whole walk and returns 0.
            let mut sink = [0u8; 64];
            while reader.read(&mut sink)? > 0 {}
            Ok::<(), std::io::Error>(())
        });
        while !pass.is_finished() {
            drain(records, &mut current);
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        drain(records, &mut current);
        pass.join()
            .map_err(|_| IterError::Read(std::io::Error::other("the reader thread panicked")))?
            .map_err(IterError::Read)
    })?;
    if let Some(done) = current {
        visit(Step::Cgroup(done));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
