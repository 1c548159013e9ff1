//! (Over 500 lines: one object, whose programs share the ring buffer,
//! the budgets and the record layout; each tier's programs are a section.)
//!
//! Reports the changes made to cgroup BPF attachments and to the cgroup
//! tree, so the agent updates its picture of the node at once instead of
//! re-reading it. The agent loads one set of these programs, the best the
//! kernel allows (see agent/src/daemon/trace/):
//!
//! - **fexit/fentry** on the kernel functions that change cgroup
//!   attachments, which run only when something attaches, detaches,
//!   replaces or releases (`cgroup_bpf_prog_attach`, `_prog_detach`,
//!   `_link_attach`, `cgroup_bpf_replace`, `bpf_cgroup_link_release` and
//!   `_detach`): they see the kernel's own copy of the call's attr and the
//!   return value, and a link ended by its last close (no bpf(2) call).
//! - **kprobe/kretprobe** on the same functions, where fexit is refused.
//! - **fexit/kprobe on `cgroup_mkdir`/`cgroup_rmdir`**: the tree changed,
//!   with the fexit and kprobe sets (never the tracepoints of those names:
//!   see "The tree" below). The other sources learn of the tree from the
//!   agent's sweep.
//! - **tp_btf `sys_exit`** (opt-in only): every syscall's exit, to find
//!   `bpf(2)` calls. It puts every task on the slow syscall path.
//!
//! Fields read through the caller's file descriptors are hints (`hints`):
//! another thread may swap an fd while the call runs, so the agent reads
//! the cgroup again and checks. Offsets come from the agent through
//! `LAYOUT`. A per-CPU budget caps the events any workload can make the
//! agent handle; beyond it, events are counted lost and the agent reads the
//! whole tree. Nothing here logs per call.
//!
//! Why one file for every family: it is one eBPF object (one ELF, one
//! `aya::Ebpf` load), and the families share what makes an event (the
//! budget, the ring buffer, the record layout, the attr decoding of
//! `kernel.rs`). The sections below go family by family: the shared
//! helpers, fexit, kprobe, syscall tracing (`sys_exit`), the tree.

#![no_std]
#![no_main]

mod kernel;
mod runtime;

use agent_common::cgroup_events::*;
use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns,
    bpf_probe_read_kernel_str_bytes, bpf_probe_read_user,
};
use aya_ebpf::macros::{btf_tracepoint, fentry, fexit, kprobe, kretprobe, map};
use aya_ebpf::maps::{HashMap, PerCpuArray, RingBuf};
use aya_ebpf::programs::{BtfTracePointContext, FEntryContext, FExitContext, ProbeContext, RetProbeContext};
use kernel::{read_u32, read_u64};

/// Set by the agent at load time from the kernel's BTF.
#[unsafe(no_mangle)]
static LAYOUT: EventsLayout = EventsLayout {
    nr_bpf: 0,
    nr_bpf_ia32: 0,
    regs_nr: 0,
    regs_arg0: 0,
    regs_arg1: 0,
    regs_ia32_arg0: 0,
    regs_ia32_arg1: 0,
    task_status: 0,
    task_files: 0,
    files_fdt: 0,
    fdt_max_fds: 0,
    fdt_fd: 0,
    file_inode: 0,
    file_private: 0,
    inode_ino: 0,
    inode_sb: 0,
    sb_magic: 0,
    prog_aux: 0,
    aux_id: 0,
    link_id: 0,
    link_type: 0,
    link_prog: 0,
    cgroup_link_link: 0,
    cgroup_link_cgroup: 0,
    cgroup_link_type: 0,
    cgroup_kn: 0,
    kn_id: 0,
};

/// The agent's own process: its calls (the cgroup iterator's link) are not
/// reported.
#[unsafe(no_mangle)]
static AGENT_TGID: u32 = 0;

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Events lost, kernel reads that failed, attrs that could not be read.
#[map]
static STATUS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STATUS_SLOTS, 0);

/// kprobe set only: calls noted at entry, sent at return if they succeeded
/// (by pid_tgid: one call per thread at a time). Sized by the agent.
#[map]
static PENDING: HashMap<u64, CgroupEvent> = HashMap::with_max_entries(1, 0);

/// The event under construction: too large for the 512-byte stack.
#[map]
static SCRATCH: PerCpuArray<CgroupEvent> = PerCpuArray::with_max_entries(1, 0);

/// Each CPU's event budget: tokens, and when they were last refilled.
#[repr(C)]
struct Budget {
    tokens: u64,
    refilled_ns: u64,
}

#[map]
static BUDGET: PerCpuArray<Budget> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn layout() -> EventsLayout {
    // SAFETY: a global written only by the loader (frozen .rodata).
    unsafe { core::ptr::read_volatile(&LAYOUT) }
}

fn bump(slot: u32) {
    if let Some(p) = STATUS.get_ptr_mut(slot) {
        // SAFETY: this CPU's slot; a program runs to completion on its CPU.
        unsafe { *p += 1 };
    }
}

/// Takes one token of this CPU's budget (refilled at `EVENTS_PER_SECOND`,
/// up to `EVENT_BURST`); false when there is none.
fn spend(now: u64) -> bool {
    let Some(b) = BUDGET.get_ptr_mut(0) else { return false };
    // SAFETY: this CPU's slot; a program runs to completion on its CPU.
    let b = unsafe { &mut *b };
    if b.refilled_ns == 0 {
        b.tokens = EVENT_BURST;
        b.refilled_ns = now;
    }
    let earned = now.saturating_sub(b.refilled_ns) / (1_000_000_000 / EVENTS_PER_SECOND);
    if earned > 0 {
        b.tokens = (b.tokens + earned).min(EVENT_BURST);
        b.refilled_ns = now;
    }
    if b.tokens == 0 {
        return false;
    }
    b.tokens -= 1;
    true
}

/// Whether the current task is the agent itself.
#[inline(always)]
fn is_agent() -> bool {
    // SAFETY: a global written only by the loader.
    (bpf_get_current_pid_tgid() >> 32) as u32 == unsafe { core::ptr::read_volatile(&AGENT_TGID) }
}

/// The `struct file *` behind fd `fd` of the current task.
#[inline(always)]
fn file_of(l: &EventsLayout, fd: u32) -> Option<u64> {
    // SAFETY: helper without preconditions.
    let task = unsafe { bpf_get_current_task() };
    let files = read_u64(task + l.task_files as u64)?;
    let fdt = read_u64(files + l.files_fdt as u64)?;
    if fd >= read_u32(fdt + l.fdt_max_fds as u64)? {
        return None;
    }
    let array = read_u64(fdt + l.fdt_fd as u64)?;
    let file = read_u64(array + 8 * fd as u64)?;
    (file != 0).then_some(file)
}

/// The cgroup id of fd `fd` when it is a cgroup-v2 directory.
#[inline(always)]
fn cgroup_of_fd(l: &EventsLayout, fd: u32) -> Option<u64> {
    let inode = read_u64(file_of(l, fd)? + l.file_inode as u64)?;
    let sb = read_u64(inode + l.inode_sb as u64)?;
    if read_u64(sb + l.sb_magic as u64)? != CGROUP2_SUPER_MAGIC {
        return None;
    }
    read_u64(inode + l.inode_ino as u64)
}

/// `prog->aux->id`.
#[inline(always)]
fn prog_id(l: &EventsLayout, prog: u64) -> Option<u32> {
    let aux = read_u64(prog + l.prog_aux as u64)?;
    read_u32(aux + l.aux_id as u64)
}

/// The id of the program behind fd `fd` (0 when it is not one we can read).
#[inline(always)]
fn prog_of_fd(l: &EventsLayout, fd: u32) -> u32 {
    let prog = || read_u64(file_of(l, fd)? + l.file_private as u64);
    prog().and_then(|p| prog_id(l, p)).unwrap_or(0)
}

/// A `struct bpf_link *`: its id, and for a cgroup link whose cgroup is
/// still set, that cgroup's id, its attach type and its program's id.
#[inline(always)]
fn link(l: &EventsLayout, link: u64) -> Option<(u32, Option<(u64, u32, u32)>)> {
    let id = read_u32(link + l.link_id as u64)?;
    if read_u32(link + l.link_type as u64)? != LINK_TYPE_CGROUP {
        return Some((id, None));
    }
    let cg_link = link.wrapping_sub(l.cgroup_link_link as u64);
    let cgroup = read_u64(cg_link + l.cgroup_link_cgroup as u64)?;
    if cgroup == 0 {
        return Some((id, None));
    }
    let kn = read_u64(cgroup + l.cgroup_kn as u64)?;
    let attach_type = read_u32(cg_link + l.cgroup_link_type as u64)?;
    let prog = prog_id(l, read_u64(link + l.link_prog as u64)?).unwrap_or(0);
    Some((id, Some((read_u64(kn + l.kn_id as u64)?, attach_type, prog))))
}

/// A fresh event of `kind` in this CPU's scratch slot.
fn scratch(kind: u32) -> Option<&'static mut CgroupEvent> {
    let e = SCRATCH.get_ptr_mut(0)?;
    // SAFETY: this CPU's slot of a per-CPU map, used by one program at a time.
    let e = unsafe { &mut *e };
    e.kind = kind;
    e.cmd = 0;
    e.attach_type = NO_ATTACH_TYPE;
    e.flags = 0;
    e.cgroup_id = 0;
    e.parent_id = 0;
    // SAFETY: helper without preconditions.
    e.ktime_ns = unsafe { bpf_ktime_get_ns() };
    e.pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: helper without preconditions (cgroup v2 id of the caller).
    e.caller_cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    e.ret = 0;
    e.prog_id = 0;
    e.link_id = 0;
    e.comm = bpf_get_current_comm().unwrap_or([0; 16]);
    e.name_len = 0;
    e.hints = 0;
    Some(e)
}

/// Sends an event, within this CPU's budget.
fn send(e: &CgroupEvent) {
    if !spend(e.ktime_ns) {
        bump(STATUS_LOST);
        return;
    }
    // SAFETY: `e` is plain data; viewed as its bytes.
    let bytes = unsafe {
        core::slice::from_raw_parts(e as *const CgroupEvent as *const u8, core::mem::size_of::<CgroupEvent>())
    };
    let len = (EVENT_HEADER + e.name_len as usize).min(bytes.len());
    let Some(record) = bytes.get(..len) else { return };
    if EVENTS.output::<[u8]>(record, 0).is_err() {
        bump(STATUS_LOST);
    }
}

/// The first four u32 of a `union bpf_attr` in kernel memory: for
/// PROG_ATTACH/DETACH `target_fd, attach_bpf_fd, attach_type,
/// attach_flags`; for LINK_CREATE `prog_fd, target_fd, attach_type, flags`.
#[inline(always)]
fn attr_words(attr: u64) -> Option<[u32; 4]> {
    Some([read_u32(attr)?, read_u32(attr + 4)?, read_u32(attr + 8)?, read_u32(attr + 12)?])
}

/// `cgroup_bpf_prog_attach(attr, ptype, prog)`: the program is the
/// kernel's (exact), the cgroup the caller's fd (a hint).
fn prog_attached(l: &EventsLayout, attr: u64, prog: u64) -> Option<&'static mut CgroupEvent> {
    let e = scratch(EVENT_BPF)?;
    e.cmd = BPF_PROG_ATTACH;
    let [target, _, attach_type, flags] = attr_words(attr)?;
    e.attach_type = attach_type;
    e.flags = flags;
    e.prog_id = prog_id(l, prog).unwrap_or(0);
    e.cgroup_id = cgroup_of_fd(l, target).unwrap_or(0);
    e.hints = HINT_CGROUP;
    Some(e)
}

/// `cgroup_bpf_prog_detach(attr, ptype)`: cgroup and program both through
/// the caller's fds.
fn prog_detached(l: &EventsLayout, attr: u64) -> Option<&'static mut CgroupEvent> {
    let e = scratch(EVENT_BPF)?;
    e.cmd = BPF_PROG_DETACH;
    let [target, prog_fd, attach_type, _] = attr_words(attr)?;
    e.attach_type = attach_type;
    e.cgroup_id = cgroup_of_fd(l, target).unwrap_or(0);
    e.prog_id = if prog_fd != 0 { prog_of_fd(l, prog_fd) } else { 0 };
    e.hints = HINT_CGROUP | HINT_PROG;
    Some(e)
}

/// `cgroup_bpf_link_attach(attr, prog)`: the program exact, the cgroup
/// through the caller's target fd.
fn link_attached(l: &EventsLayout, attr: u64, prog: u64) -> Option<&'static mut CgroupEvent> {
    let e = scratch(EVENT_BPF)?;
    e.cmd = BPF_LINK_CREATE;
    let [_, target, attach_type, flags] = attr_words(attr)?;
    e.attach_type = attach_type;
    e.flags = flags;
    e.prog_id = prog_id(l, prog).unwrap_or(0);
    e.cgroup_id = cgroup_of_fd(l, target).unwrap_or(0);
    e.hints = HINT_CGROUP | HINT_LINK;
    Some(e)
}

/// The new link's id, from the fd the call returned (a hint).
#[inline(always)]
fn new_link(l: &EventsLayout, e: &mut CgroupEvent, fd: i32) {
    if let Some(file) = file_of(l, fd as u32)
        && let Some(ptr) = read_u64(file + l.file_private as u64)
        && let Some((id, _)) = link(l, ptr)
    {
        e.link_id = id;
    }
}

/// A cgroup link, whose cgroup, hook and program the kernel holds (exact).
fn link_event(l: &EventsLayout, cmd: u32, ptr: u64, new_prog: u64) -> Option<&'static mut CgroupEvent> {
    let (id, cgroup) = link(l, ptr)?;
    // A link already detached from its cgroup (the release that follows a
    // detach, or a defunct link's close): nothing changes on the tree.
    let (cgroup_id, attach_type, prog) = cgroup?;
    let e = scratch(EVENT_BPF)?;
    e.cmd = cmd;
    e.link_id = id;
    e.cgroup_id = cgroup_id;
    e.attach_type = attach_type;
    e.prog_id = if new_prog != 0 { prog_id(l, new_prog).unwrap_or(0) } else { prog };
    Some(e)
}

// ---------------------------------------------------------------------
// fexit/fentry. Arguments are 8-byte slots; an fexit's return value is the
// slot after the last argument (the agent checked each function's arity in
// the kernel's BTF). An `int` returned in a u64 slot is only meaningful in
// its low 32 bits.

#[fexit(function = "cgroup_bpf_prog_attach")]
pub fn prog_attach_exit(ctx: FExitContext) -> i32 {
    if ctx.arg::<u64>(3) as i32 != 0 || is_agent() {
        return 0;
    }
    if let Some(e) = prog_attached(&layout(), ctx.arg(0), ctx.arg(2)) {
        send(e);
    }
    0
}

#[fexit(function = "cgroup_bpf_prog_detach")]
pub fn prog_detach_exit(ctx: FExitContext) -> i32 {
    if ctx.arg::<u64>(2) as i32 != 0 || is_agent() {
        return 0;
    }
    if let Some(e) = prog_detached(&layout(), ctx.arg(0)) {
        send(e);
    }
    0
}

#[fexit(function = "cgroup_bpf_link_attach")]
pub fn link_attach_exit(ctx: FExitContext) -> i32 {
    let fd = ctx.arg::<u64>(2) as i32;
    if fd < 0 || is_agent() {
        return 0;
    }
    let l = layout();
    if let Some(e) = link_attached(&l, ctx.arg(0), ctx.arg(1)) {
        e.ret = fd as i64;
        new_link(&l, e, fd);
        send(e);
    }
    0
}

#[fexit(function = "cgroup_bpf_replace")]
pub fn link_replace_exit(ctx: FExitContext) -> i32 {
    if ctx.arg::<u64>(3) as i32 != 0 {
        return 0;
    }
    if let Some(e) = link_event(&layout(), BPF_LINK_UPDATE, ctx.arg(0), ctx.arg(1)) {
        send(e);
    }
    0
}

/// At entry: the release clears the link's cgroup.
#[fentry(function = "bpf_cgroup_link_release")]
pub fn link_release_entry(ctx: FEntryContext) -> i32 {
    if let Some(e) = link_event(&layout(), LINK_RELEASED, ctx.arg(0), 0) {
        send(e);
    }
    0
}

/// At entry: some builds inline the release into the detach.
#[fentry(function = "bpf_cgroup_link_detach")]
pub fn link_detach_entry(ctx: FEntryContext) -> i32 {
    if let Some(e) = link_event(&layout(), BPF_LINK_DETACH, ctx.arg(0), 0) {
        send(e);
    }
    0
}

// ---------------------------------------------------------------------
// kprobe/kretprobe: what the entry saw is kept in PENDING for the return.

fn note(e: &CgroupEvent) {
    // This thread's last call is still noted: its return never came (the
    // kretprobe had no instance left for it), and its event was lost.
    // SAFETY: only whether an entry exists is read.
    if unsafe { PENDING.get(&e.pid_tgid) }.is_some() {
        bump(STATUS_RETURN_MISSED);
    }
    if PENDING.insert(&e.pid_tgid, e, 0).is_err() {
        bump(STATUS_LOST);
    }
}

/// The noted call of this thread, if it succeeded (`ret` is the function's
/// `int`, as the kretprobe read it).
fn noted(ret: i32) -> Option<&'static mut CgroupEvent> {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the entry is copied out before it is removed.
    let entry = *unsafe { PENDING.get(&pid_tgid) }?;
    let _ = PENDING.remove(&pid_tgid);
    if ret < 0 {
        return None;
    }
    let e = scratch(EVENT_BPF)?;
    *e = entry;
    e.ret = ret as i64;
    Some(e)
}

#[kprobe]
pub fn prog_attach_entry(ctx: ProbeContext) -> u32 {
    if !is_agent()
        && let (Some(attr), Some(prog)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(2))
        && let Some(e) = prog_attached(&layout(), attr, prog)
    {
        note(e);
    }
    0
}

#[kprobe]
pub fn prog_detach_entry(ctx: ProbeContext) -> u32 {
    if !is_agent()
        && let Some(attr) = ctx.arg::<u64>(0)
        && let Some(e) = prog_detached(&layout(), attr)
    {
        note(e);
    }
    0
}

#[kprobe]
pub fn link_attach_entry(ctx: ProbeContext) -> u32 {
    if !is_agent()
        && let (Some(attr), Some(prog)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1))
        && let Some(e) = link_attached(&layout(), attr, prog)
    {
        note(e);
    }
    0
}

#[kprobe]
pub fn link_replace_entry(ctx: ProbeContext) -> u32 {
    if let (Some(link), Some(prog)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1))
        && let Some(e) = link_event(&layout(), BPF_LINK_UPDATE, link, prog)
    {
        note(e);
    }
    0
}

/// One kretprobe for the noted functions (the four attach functions,
/// cgroup_mkdir and cgroup_rmdir): each returns an `int`.
#[kretprobe]
pub fn attach_return(ctx: RetProbeContext) -> u32 {
    let ret = ctx.ret::<u64>() as i32;
    if let Some(e) = noted(ret) {
        if e.cmd == BPF_LINK_CREATE {
            new_link(&layout(), e, ret);
        }
        send(e);
    }
    0
}

#[kprobe]
pub fn link_release_probe(ctx: ProbeContext) -> u32 {
    if let Some(ptr) = ctx.arg::<u64>(0)
        && let Some(e) = link_event(&layout(), LINK_RELEASED, ptr, 0)
    {
        send(e);
    }
    0
}

#[kprobe]
pub fn link_detach_probe(ctx: ProbeContext) -> u32 {
    if let Some(ptr) = ctx.arg::<u64>(0)
        && let Some(e) = link_event(&layout(), BPF_LINK_DETACH, ptr, 0)
    {
        send(e);
    }
    0
}

// ---------------------------------------------------------------------
// Syscall tracing (opt-in, x86_64): `bpf(2)` found at each syscall's exit,
// its number and arguments decoded for the ABI the call was made in. Only
// successful calls that change cgroup attachments are sent; the attr is
// read from user memory at exit, which the kernel has just read.

#[btf_tracepoint(function = "sys_exit")]
pub fn syscall_exited(ctx: BtfTracePointContext) -> u32 {
    let l = layout();
    let regs: u64 = ctx.arg(0);
    let Some(nr) = read_u64(regs + l.regs_nr as u64) else { return 0 };
    // The cheapest test first: most syscalls are neither number.
    if nr != l.nr_bpf as u64 && nr != l.nr_bpf_ia32 as u64 && nr != (l.nr_bpf as u64 | X32_SYSCALL_BIT) {
        return 0;
    }
    let ret: i64 = ctx.arg(1);
    if ret < 0 || is_agent() {
        return 0;
    }
    syscall_decoded(&l, regs, nr, ret).unwrap_or(0)
}

fn syscall_decoded(l: &EventsLayout, regs: u64, nr: u64, ret: i64) -> Option<u32> {
    // SAFETY: helper without preconditions.
    let task = unsafe { bpf_get_current_task() };
    let ia32 = read_u32(task + l.task_status as u64)? & TS_COMPAT != 0;
    // An ia32 call's number means another syscall in the 64-bit table and
    // the other way round (ia32 `signalfd` is 64-bit `bpf`'s number).
    let (cmd, uattr) = match (ia32, nr) {
        (true, n) if n == l.nr_bpf_ia32 as u64 => {
            (read_u64(regs + l.regs_ia32_arg0 as u64)? as u32, read_u64(regs + l.regs_ia32_arg1 as u64)? & 0xffff_ffff)
        }
        (false, n) if n == l.nr_bpf as u64 || n == (l.nr_bpf as u64 | X32_SYSCALL_BIT) => {
            (read_u64(regs + l.regs_arg0 as u64)? as u32, read_u64(regs + l.regs_arg1 as u64)?)
        }
        _ => return Some(0),
    };
    if !matches!(cmd, BPF_PROG_ATTACH | BPF_PROG_DETACH | BPF_LINK_CREATE | BPF_LINK_UPDATE | BPF_LINK_DETACH) {
        return Some(0);
    }
    let e = scratch(EVENT_BPF)?;
    e.cmd = cmd;
    e.ret = ret;
    // SAFETY: bpf_probe_read_user checks the user pointer and fails cleanly.
    let Ok(attr) = (unsafe { bpf_probe_read_user(uattr as *const [u32; 4]) }) else {
        // Unknown, not zero: zeros would name whatever fd 0 is.
        bump(STATUS_UNREADABLE);
        e.hints = UNREAD;
        send(e);
        return Some(0);
    };
    e.hints = HINT_CGROUP | HINT_PROG | HINT_LINK;
    match cmd {
        BPF_PROG_ATTACH | BPF_PROG_DETACH => {
            e.cgroup_id = cgroup_of_fd(l, attr[0]).unwrap_or(0);
            e.prog_id = prog_of_fd(l, attr[1]);
            e.attach_type = attr[2];
            e.flags = attr[3];
        }
        BPF_LINK_CREATE => {
            e.prog_id = prog_of_fd(l, attr[0]);
            e.cgroup_id = cgroup_of_fd(l, attr[1]).unwrap_or(0);
            e.attach_type = attr[2];
            e.flags = attr[3];
            new_link(l, e, ret as i32);
        }
        _ => {
            // LINK_UPDATE, LINK_DETACH: the link fd, and the new program's.
            if let Some(file) = file_of(l, attr[0])
                && let Some(ptr) = read_u64(file + l.file_private as u64)
                && let Some((id, cgroup)) = link(l, ptr)
            {
                e.link_id = id;
                if let Some((cgroup_id, attach_type, _)) = cgroup {
                    e.cgroup_id = cgroup_id;
                    e.attach_type = attach_type;
                }
            }
            if cmd == BPF_LINK_UPDATE {
                e.prog_id = prog_of_fd(l, attr[1]);
            }
        }
    }
    send(e);
    Some(0)
}

// ---------------------------------------------------------------------
// The tree: the kernel functions that make and remove a cgroup directory
// (kernfs calls them through its ops, so they are never inlined away). Not
// the cgroup_mkdir/cgroup_rmdir tracepoints: while one is enabled, the
// kernel formats every new or removed cgroup's whole path under
// cgroup_mutex, with interrupts off, for every cgroup operation on the node.

/// `cgroup_mkdir(parent_kn, name, mode)` made a cgroup: its parent's id and
/// its name (the function returns 0, not the cgroup: the agent reads the
/// new cgroup's id from its directory).
fn made(l: &EventsLayout, parent_kn: u64, name: u64) -> Option<&'static mut CgroupEvent> {
    let e = scratch(EVENT_MKDIR)?;
    let Some(parent) = read_u64(parent_kn + l.kn_id as u64) else {
        bump(STATUS_READ_FAILED);
        return None;
    };
    e.parent_id = parent;
    // SAFETY: a kernel string, read with a bounded helper into our buffer.
    let len = unsafe { bpf_probe_read_kernel_str_bytes(name as *const u8, &mut e.name) }.map_or(0, |s| s.len());
    if len == 0 {
        bump(STATUS_READ_FAILED);
        return None;
    }
    e.name_len = len.min(NAME_SIZE - 1) as u32;
    Some(e)
}

/// `cgroup_rmdir(kn)` removed the cgroup whose directory is `kn`.
fn removed(l: &EventsLayout, kn: u64) -> Option<&'static mut CgroupEvent> {
    let e = scratch(EVENT_RMDIR)?;
    let Some(id) = read_u64(kn + l.kn_id as u64) else {
        bump(STATUS_READ_FAILED);
        return None;
    };
    e.cgroup_id = id;
    Some(e)
}

#[fexit(function = "cgroup_mkdir")]
pub fn cgroup_mkdir_exit(ctx: FExitContext) -> i32 {
    if ctx.arg::<u64>(3) as i32 != 0 {
        return 0;
    }
    if let Some(e) = made(&layout(), ctx.arg(0), ctx.arg(1)) {
        send(e);
    }
    0
}

#[fexit(function = "cgroup_rmdir")]
pub fn cgroup_rmdir_exit(ctx: FExitContext) -> i32 {
    if ctx.arg::<u64>(1) as i32 != 0 {
        return 0;
    }
    if let Some(e) = removed(&layout(), ctx.arg(0)) {
        send(e);
    }
    0
}

/// Noted at entry, sent by `attach_return` if the call succeeded.
#[kprobe]
pub fn cgroup_mkdir_entry(ctx: ProbeContext) -> u32 {
    if let (Some(parent), Some(name)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1))
        && let Some(e) = made(&layout(), parent, name)
    {
        note(e);
    }
    0
}

#[kprobe]
pub fn cgroup_rmdir_entry(ctx: ProbeContext) -> u32 {
    if let Some(kn) = ctx.arg::<u64>(0)
        && let Some(e) = removed(&layout(), kn)
    {
        note(e);
    }
    0
}
