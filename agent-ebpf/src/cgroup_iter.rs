//! `iter/cgroup`: one pass over every cgroup below the audit root, in the
//! kernel, under `cgroup_mutex` (so the tree and its attachments are one
//! consistent picture). For each cgroup it writes a `CgroupRecord` (id,
//! parent id, name, whether processes are in it) followed by one
//! `HookRecord` per program in its own `bpf.progs[]` lists, which is
//! exactly what `BPF_PROG_QUERY` would return for it. (What is in effect
//! for a cgroup follows from its own programs and its ancestors', by the
//! kernel's rule: the agent works it out.) A sweep (`KernelLayout::sweep`)
//! writes every cgroup's record without its name, but for the cgroups made
//! since the agent last knew the tree (ids above `NAMES_AFTER`).
//!
//! The records go to a ring buffer, not the iterator's seq_file: a cgroup
//! iterator cannot be resumed after its first read (the kernel drops
//! `cgroup_mutex` between reads and then refuses with EOPNOTSUPP), and one
//! read returns at most 32 KiB. Kernel structs are read with
//! bpf_probe_read_kernel at offsets the agent took from the running kernel's
//! BTF and set in `LAYOUT`; a failed read ends that cgroup's record early and
//! is counted, never guessed.

#![no_std]
#![no_main]

mod kernel;
mod runtime;

use agent_common::cgroup_iter::*;
use aya_ebpf::helpers::{bpf_loop, bpf_probe_read_kernel_buf, bpf_probe_read_kernel_str_bytes};
use aya_ebpf::macros::map;
use aya_ebpf::maps::{Array, PerCpuArray, RingBuf};
use kernel::{read_u32, read_u64};

/// Set by the agent at load time from the kernel's BTF.
#[unsafe(no_mangle)]
static LAYOUT: KernelLayout = KernelLayout {
    cgroup_kn: 0,
    cgroup_progs: 0,
    cgroup_flags: 0,
    cgroup_populated: 0,
    progs_bytes: 0,
    flags_bytes: 0,
    flags_size: 0,
    n_atypes: 0,
    kn_parent: 0,
    kn_name: 0,
    kn_id: 0,
    pl_node: 0,
    pl_prog: 0,
    pl_link: 0,
    pl_flags: 0,
    cgroup_link_link: 0,
    link_id: 0,
    link_prog: 0,
    prog_aux: 0,
    aux_id: 0,
    sweep: 0,
};

/// Set by the agent at load time for a sweep: cgroups with larger ids
/// were made since it last knew the tree, and are named.
#[unsafe(no_mangle)]
static NAMES_AFTER: u64 = 0;

/// Sized by the agent for the tree at load time.
#[map]
static CGROUP_RECORDS: RingBuf = RingBuf::with_byte_size(4096, 0);

/// Records that did not fit, kernel reads that failed.
#[map]
static STATUS: Array<u64> = Array::with_max_entries(STATUS_SLOTS, 0);

/// The record under construction: too large for the 512-byte stack.
#[map]
static SCRATCH: PerCpuArray<CgroupRecord> = PerCpuArray::with_max_entries(1, 0);

/// The state of the `bpf_loop` walk, kept in a map value rather than on
/// the stack: the verifier treats what it reads back from a map as
/// unknown, so it checks the callback once; counters on the stack it
/// tracks exactly, checking the callback again for each of their values.
#[map]
static WALK: PerCpuArray<HookWalk> = PerCpuArray::with_max_entries(1, 0);

/// The hook heads (`bpf.progs[]`) and flags of one cgroup, read at once.
#[map]
static HOOKS: PerCpuArray<[u64; MAX_ATYPES + MAX_ATYPES / 2]> = PerCpuArray::with_max_entries(1, 0);

fn bump(slot: u32) {
    if let Some(p) = STATUS.get_ptr_mut(slot) {
        // SAFETY: the iterator runs one program instance at a time (one
        // seq_file read), so nothing else writes the slot concurrently.
        unsafe { *p += 1 };
    }
}

/// `prog->aux->id`.
#[inline(always)]
fn prog_id(l: &KernelLayout, prog: u64) -> Option<u32> {
    let aux = read_u64(prog + l.prog_aux as u64)?;
    read_u32(aux + l.aux_id as u64)
}

/// State of the `bpf_loop` callback that walks every hook's list of one
/// cgroup: a flat state machine (the next hook to open, the list node
/// being visited) rather than a loop nested in another loop.
#[repr(C)]
struct HookWalk {
    cgroup_id: u64,
    /// The list node being visited; 0: open the next hook.
    node: u64,
    /// The hook being visited and the next one to open.
    atype: u32,
    next_hook: u32,
    flags: u32,
    failed: u32,
}

#[inline(always)]
fn layout() -> KernelLayout {
    // SAFETY: a global written only by the loader (frozen .rodata).
    unsafe { core::ptr::read_volatile(&LAYOUT) }
}

/// One step: open the next non-empty hook, or report one program of the
/// hook being visited and move to the next.
fn hook_step(_i: u64, _ctx: *mut core::ffi::c_void) -> i64 {
    let Some(w) = WALK.get_ptr_mut(0) else { return 1 };
    // SAFETY: this CPU's slot of a per-CPU map, used by this program only.
    let w = unsafe { &mut *w };
    let l = layout();
    if w.node == 0 {
        let i = w.next_hook as usize;
        if i >= MAX_ATYPES || i >= l.n_atypes as usize {
            return 1;
        }
        w.next_hook += 1;
        let Some(hooks) = HOOKS.get_ptr(0) else { return 1 };
        // SAFETY: this CPU's slot of a per-CPU map, filled by `visit`.
        let hooks = unsafe { &*hooks };
        // `get`, not indexing: a bounds-check panic cannot be linked into BPF.
        let Some(&head) = hooks.get(i) else { return 1 };
        if head == 0 {
            return 0;
        }
        let flags = if l.flags_size == 1 {
            let Some(&word) = hooks.get(MAX_ATYPES + i / 8) else { return 1 };
            (word >> (8 * (i % 8))) as u8 as u32
        } else {
            let Some(&word) = hooks.get(MAX_ATYPES + i / 2) else { return 1 };
            (word >> (32 * (i % 2))) as u32
        };
        w.node = head;
        w.atype = i as u32;
        w.flags = flags;
        return 0;
    }
    if program(&l, w).is_none() {
        w.failed += 1;
        return 1;
    }
    0
}

#[inline(always)]
fn program(l: &KernelLayout, w: &mut HookWalk) -> Option<()> {
    let pl = w.node - l.pl_node as u64;
    let prog = read_u64(pl + l.pl_prog as u64)?;
    let link = read_u64(pl + l.pl_link as u64)?;
    let (prog, link_id) = if link != 0 {
        let bpf_link = link + l.cgroup_link_link as u64;
        let prog = if prog != 0 { prog } else { read_u64(bpf_link + l.link_prog as u64)? };
        (prog, read_u32(bpf_link + l.link_id as u64)?)
    } else {
        (prog, 0)
    };
    if prog != 0 {
        let prog_flags = if l.pl_flags != 0 { read_u32(pl + l.pl_flags as u64)? } else { 0 };
        let record = HookRecord {
            kind: KIND_ATTACH,
            atype: w.atype,
            cgroup_id: w.cgroup_id,
            prog_id: prog_id(l, prog)?,
            link_id,
            flags: w.flags,
            prog_flags,
        };
        if CGROUP_RECORDS.output::<HookRecord>(&record, 0).is_err() {
            bump(STATUS_DROPPED);
        }
    }
    w.node = read_u64(w.node)?; // hlist_node.next is its first field
    Some(())
}

fn visit(l: &KernelLayout, cgroup: u64) -> Option<()> {
    bump(STATUS_VISITED);
    let hooks = HOOKS.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot of a per-CPU map, used by this program only.
    let hooks = unsafe { &mut *hooks };
    let (head_words, flag_words) = hooks.split_at_mut(MAX_ATYPES);
    // Exactly the two arrays, at the sizes the kernel's BTF gives them (the
    // agent refused to load if they exceed these buffers).
    let heads = as_bytes(head_words).get_mut(..l.progs_bytes as usize)?;
    // SAFETY: the read covers `bpf.progs` of this `struct cgroup`, as sized
    // by BTF, and lands in our buffer.
    unsafe { bpf_probe_read_kernel_buf((cgroup + l.cgroup_progs as u64) as *const u8, heads).ok()? };
    // Most cgroups hold no program at all. One OR over the heads,
    // straight-line code the verifier checks once (a loop that stops at the
    // first non-empty head it would check once per iteration).
    let head_words: &[u64; MAX_ATYPES] = (&*head_words).try_into().ok()?;
    let any = head_words.iter().fold(0, |any, &head| any | head) != 0;
    // A sweep wants every cgroup (the agent learns from it what was made
    // and removed), but the names of new ones only: a cgroup it knows and
    // without programs is one short record.
    let sweep = l.sweep != 0;
    if sweep && !any && seen(l, cgroup)? {
        return Some(());
    }

    let record = SCRATCH.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot of a per-CPU map, used by this program only.
    let record = unsafe { &mut *record };
    let kn = read_u64(cgroup + l.cgroup_kn as u64)?;
    record.kind = KIND_CGROUP;
    record.id = read_u64(kn + l.kn_id as u64)?;
    let parent = read_u64(kn + l.kn_parent as u64)?;
    record.parent_id = if parent == 0 { 0 } else { read_u64(parent + l.kn_id as u64)? };
    let len = if sweep && record.id <= names_after() {
        0
    } else {
        let name = read_u64(kn + l.kn_name as u64)?;
        // SAFETY: a kernel string, read with a bounded helper into our buffer.
        let len = unsafe { bpf_probe_read_kernel_str_bytes(name as *const u8, &mut record.name) }.ok()?.len();
        len.min(NAME_SIZE - 1)
    };
    record.name_len = len as u32;
    record.populated = u32::from(read_u32(cgroup + l.cgroup_populated as u64)? != 0);
    record._pad = 0;
    let cgroup_id = record.id;
    // SAFETY: `record` is a plain-data struct; viewed as its bytes.
    let bytes = unsafe {
        core::slice::from_raw_parts(record as *const CgroupRecord as *const u8, core::mem::size_of::<CgroupRecord>())
    };
    if CGROUP_RECORDS.output::<[u8]>(&bytes[..CGROUP_RECORD_HEADER + len], 0).is_err() {
        bump(STATUS_DROPPED);
        return Some(());
    }
    if !any {
        return Some(());
    }
    let flags = as_bytes(flag_words).get_mut(..l.flags_bytes as usize)?;
    // SAFETY: as above, for `bpf.flags`.
    unsafe { bpf_probe_read_kernel_buf((cgroup + l.cgroup_flags as u64) as *const u8, flags).ok()? };
    let walk = WALK.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot of a per-CPU map, used by this program only.
    let walk = unsafe { &mut *walk };
    *walk = HookWalk { cgroup_id, node: 0, atype: 0, next_hook: 0, flags: 0, failed: 0 };
    // At most one step per hook and one per program on it.
    // SAFETY: `hook_step` is a static callback without context.
    unsafe {
        bpf_loop((MAX_ATYPES * (MAX_PROGS + 1)) as u32, hook_step as *mut core::ffi::c_void, core::ptr::null_mut(), 0)
    };
    if walk.failed > 0 {
        return None;
    }
    Some(())
}

#[inline(always)]
fn names_after() -> u64 {
    // SAFETY: a global written only by the loader (frozen .rodata).
    unsafe { core::ptr::read_volatile(&NAMES_AFTER) }
}

/// A sweep's record of a cgroup the agent knows (its id is not above
/// `NAMES_AFTER`): no name. True when written; false for a new cgroup,
/// whose record is written whole.
fn seen(l: &KernelLayout, cgroup: u64) -> Option<bool> {
    let kn = read_u64(cgroup + l.cgroup_kn as u64)?;
    let id = read_u64(kn + l.kn_id as u64)?;
    if id > names_after() {
        return Some(false);
    }
    let parent = read_u64(kn + l.kn_parent as u64)?;
    let record = CgroupHeader {
        kind: KIND_CGROUP,
        name_len: 0,
        id,
        parent_id: if parent == 0 { 0 } else { read_u64(parent + l.kn_id as u64)? },
        populated: u32::from(read_u32(cgroup + l.cgroup_populated as u64)? != 0),
        _pad: 0,
    };
    if CGROUP_RECORDS.output::<CgroupHeader>(&record, 0).is_err() {
        bump(STATUS_DROPPED);
    }
    Some(true)
}

fn as_bytes(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no invalid bit patterns and u8 has alignment 1.
    unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8) }
}

/// The iterator program (`SEC("iter/cgroup")`; aya-ebpf has no macro for it).
#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/cgroup")]
pub fn cgroup_walk(ctx: *mut core::ffi::c_void) -> i32 {
    // struct bpf_iter__cgroup { struct bpf_iter_meta *meta; struct cgroup *cgroup; }
    // SAFETY: the context of an iter/cgroup program; the verifier checks the access.
    let cgroup = unsafe { *(ctx as *const u64).add(1) };
    if cgroup == 0 {
        return 0; // the final call after the last cgroup
    }
    if visit(&layout(), cgroup).is_none() {
        bump(STATUS_FAILED);
    }
    0
}
