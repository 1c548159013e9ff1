//! Reports the changes made to cgroup BPF attachments and to the cgroup
//! tree, so the agent updates its picture of the node at once instead of
//! re-reading it.
//!
//! - `tp_btf/sys_enter` and `tp_btf/sys_exit` (raw_syscalls; BTF-typed raw
//!   tracepoints attach with `BPF_RAW_TRACEPOINT_OPEN`: no tracefs): a
//!   `bpf(2)` call that attaches, detaches or replaces is noted at entry,
//!   its target fd resolved in the kernel to the cgroup it opens (and its
//!   program and link fds to their ids); at exit, a failed call is dropped,
//!   a successful one sent. Every other syscall returns at the first
//!   comparison.
//! - `tp_btf/cgroup_mkdir`, `tp_btf/cgroup_rmdir`: the tree changed.
//!
//! What a call named is a hint: its caller may rewrite its arguments or
//! swap its fds while the call runs, so the agent reads the cgroup again.
//! Offsets and syscall numbers come from the agent through `LAYOUT`. A
//! per-CPU budget caps the events any workload can make the agent handle;
//! beyond it, events are counted lost and the agent reads the whole tree.

#![no_std]
#![no_main]

mod kernel;
mod runtime;

use agent_common::cgroup_events::*;
use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task, bpf_ktime_get_ns,
    bpf_probe_read_kernel_str_bytes, bpf_probe_read_user,
};
use aya_ebpf::macros::{btf_tracepoint, map};
use aya_ebpf::maps::{HashMap, PerCpuArray, RingBuf};
use aya_ebpf::programs::BtfTracePointContext;
use aya_log_ebpf::warn;
use kernel::{read_u32, read_u64};

/// Set by the agent at load time from the kernel's BTF.
#[unsafe(no_mangle)]
static LAYOUT: EventsLayout = EventsLayout {
    nr_bpf: 0,
    nr_bpf_compat: 0,
    regs_nr: 0,
    regs_arg0: 0,
    regs_arg1: 0,
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
    cgroup_link_link: 0,
    cgroup_link_cgroup: 0,
    cgroup_kn: 0,
    kn_id: 0,
    kn_parent: 0,
    kn_name: 0,
};

/// The agent's own process: its calls (the cgroup iterator's link) are not
/// reported.
#[unsafe(no_mangle)]
static AGENT_TGID: u32 = 0;

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Events lost, kernel reads that failed.
#[map]
static STATUS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STATUS_SLOTS, 0);

/// Calls noted at entry, sent at exit if they succeeded (by pid_tgid: one
/// syscall per thread at a time).
#[map]
static PENDING: HashMap<u64, CgroupEvent> = HashMap::with_max_entries(4096, 0);

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

/// The id of the program behind fd `fd` (0 when it is not one we can read).
#[inline(always)]
fn prog_of_fd(l: &EventsLayout, fd: u32) -> u32 {
    let id = || {
        let prog = read_u64(file_of(l, fd)? + l.file_private as u64)?;
        let aux = read_u64(prog + l.prog_aux as u64)?;
        read_u32(aux + l.aux_id as u64)
    };
    id().unwrap_or(0)
}

/// The link behind fd `fd`: its id, and its cgroup's id when it is a cgroup
/// link whose cgroup is still there.
#[inline(always)]
fn link_of_fd(l: &EventsLayout, fd: u32) -> Option<(u32, u64)> {
    let link = read_u64(file_of(l, fd)? + l.file_private as u64)?;
    let id = read_u32(link + l.link_id as u64)?;
    if read_u32(link + l.link_type as u64)? != LINK_TYPE_CGROUP {
        return Some((id, 0));
    }
    let cg_link = link.wrapping_sub(l.cgroup_link_link as u64);
    let cgroup = read_u64(cg_link + l.cgroup_link_cgroup as u64)?;
    if cgroup == 0 {
        return Some((id, 0));
    }
    let kn = read_u64(cgroup + l.cgroup_kn as u64)?;
    Some((id, read_u64(kn + l.kn_id as u64)?))
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
    e._pad = 0;
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

#[btf_tracepoint(function = "sys_enter")]
pub fn syscall_entered(ctx: BtfTracePointContext) -> u32 {
    let l = layout();
    let nr: i64 = ctx.arg(1);
    if nr != l.nr_bpf as i64 && (l.nr_bpf_compat == 0 || nr != l.nr_bpf_compat as i64) {
        return 0;
    }
    noted(&ctx, &l).unwrap_or(0)
}

fn noted(ctx: &BtfTracePointContext, l: &EventsLayout) -> Option<u32> {
    let regs: u64 = ctx.arg(0);
    let cmd = read_u64(regs + l.regs_arg0 as u64)? as u32;
    if !matches!(cmd, BPF_PROG_ATTACH | BPF_PROG_DETACH | BPF_LINK_CREATE | BPF_LINK_UPDATE | BPF_LINK_DETACH) {
        return Some(0);
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a global written only by the loader.
    if (pid_tgid >> 32) as u32 == unsafe { core::ptr::read_volatile(&AGENT_TGID) } {
        return Some(0);
    }
    let uattr = read_u64(regs + l.regs_arg1 as u64)?;
    // The first four u32 of union bpf_attr for these commands:
    //   PROG_ATTACH/DETACH: target_fd, attach_bpf_fd, attach_type, attach_flags
    //   LINK_CREATE:        prog_fd, target_fd, attach_type, flags
    //   LINK_UPDATE:        link_fd, new_prog_fd, flags, old_prog_fd
    //   LINK_DETACH:        link_fd
    // SAFETY: bpf_probe_read_user checks the user pointer and fails cleanly.
    let attr = match unsafe { bpf_probe_read_user(uattr as *const [u32; 4]) } {
        Ok(a) => a,
        Err(_) => {
            warn!(ctx, "cannot read the bpf_attr of command {} at {:x}", cmd, uattr);
            [0; 4]
        }
    };
    let e = scratch(EVENT_BPF)?;
    e.cmd = cmd;
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
        }
        _ => {
            let (link, cgroup) = link_of_fd(l, attr[0]).unwrap_or((0, 0));
            e.link_id = link;
            e.cgroup_id = cgroup;
            if cmd == BPF_LINK_UPDATE {
                e.prog_id = prog_of_fd(l, attr[1]);
            }
        }
    }
    if PENDING.insert(&pid_tgid, e, 0).is_err() {
        bump(STATUS_LOST);
    }
    Some(0)
}

#[btf_tracepoint(function = "sys_exit")]
pub fn syscall_exited(ctx: BtfTracePointContext) -> u32 {
    let l = layout();
    let regs: u64 = ctx.arg(0);
    let Some(nr) = read_u64(regs + l.regs_nr as u64) else { return 0 };
    if nr != l.nr_bpf as u64 && (l.nr_bpf_compat == 0 || nr != l.nr_bpf_compat as u64) {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the entry is copied out before it is removed.
    let Some(noted) = (unsafe { PENDING.get(&pid_tgid) }) else { return 0 };
    let Some(e) = scratch(EVENT_BPF) else { return 0 };
    *e = *noted;
    let _ = PENDING.remove(&pid_tgid);
    let ret: i64 = ctx.arg(1);
    if ret < 0 {
        return 0;
    }
    e.ret = ret;
    if e.cmd == BPF_LINK_CREATE {
        // The new link's fd: its id.
        if let Some((id, _)) = link_of_fd(&l, ret as u32) {
            e.link_id = id;
        }
    }
    send(e);
    0
}

/// mkdir and rmdir: `(struct cgroup *cgrp, const char *path)`.
fn tree_changed(ctx: &BtfTracePointContext, kind: u32) -> u32 {
    let l = layout();
    let cgrp: u64 = ctx.arg(0);
    let Some(e) = scratch(kind) else { return 0 };
    let Some(kn) = read_u64(cgrp + l.cgroup_kn as u64) else {
        bump(STATUS_READ_FAILED);
        return 0;
    };
    let Some(id) = read_u64(kn + l.kn_id as u64) else {
        bump(STATUS_READ_FAILED);
        return 0;
    };
    e.cgroup_id = id;
    if kind == EVENT_MKDIR {
        let parent = read_u64(kn + l.kn_parent as u64).unwrap_or(0);
        e.parent_id = if parent == 0 { 0 } else { read_u64(parent + l.kn_id as u64).unwrap_or(0) };
        let name = read_u64(kn + l.kn_name as u64).unwrap_or(0);
        // SAFETY: a kernel string, read with a bounded helper into our buffer.
        let len = unsafe { bpf_probe_read_kernel_str_bytes(name as *const u8, &mut e.name) }.map_or(0, |s| s.len());
        if e.parent_id == 0 || len == 0 {
            bump(STATUS_READ_FAILED);
        }
        e.name_len = len.min(NAME_SIZE - 1) as u32;
    }
    send(e);
    0
}

#[btf_tracepoint(function = "cgroup_mkdir")]
pub fn cgroup_made(ctx: BtfTracePointContext) -> u32 {
    tree_changed(&ctx, EVENT_MKDIR)
}

#[btf_tracepoint(function = "cgroup_rmdir")]
pub fn cgroup_removed(ctx: BtfTracePointContext) -> u32 {
    tree_changed(&ctx, EVENT_RMDIR)
}
