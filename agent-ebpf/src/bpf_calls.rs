//! Tracepoints on bpf(2) that report every command changing cgroup
//! attachments (`BPF_PROG_ATTACH`, `BPF_PROG_DETACH`, `BPF_LINK_CREATE`,
//! `BPF_LINK_UPDATE`, `BPF_LINK_DETACH`) to the agent through a ring buffer,
//! so a misattachment triggers an audit at once instead of at the next poll.
//!
//! Only UAPI-stable data is read: the syscall tracepoint record (a fixed
//! `struct syscall_trace_enter`/`_exit` layout: `nr` at 8, args from 16, `ret`
//! at 16) and the first 16 bytes of the caller's `union bpf_attr`, whose
//! layout for these commands is fixed by the UAPI. No kernel struct is read,
//! so the object loads on any kernel with these tracepoints.

#![no_std]
#![no_main]

mod runtime;

use agent_common::bpf_calls::*;
use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
};
use aya_ebpf::macros::{map, tracepoint};
use aya_ebpf::maps::{HashMap, PerCpuArray, RingBuf};
use aya_ebpf::programs::TracePointContext;
use aya_log_ebpf::warn;

/// Calls seen at entry, completed at exit with their result (by pid_tgid:
/// one bpf() call per thread at a time).
#[map]
static PENDING: HashMap<u64, BpfCallRecord> = HashMap::with_max_entries(4096, 0);

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(256 * 1024, 0);

/// Events dropped because the ring buffer was full (or PENDING was).
#[map]
static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The agent's own tgid, set at load time: its own calls are not reported.
#[unsafe(no_mangle)]
static AGENT_TGID: u32 = 0;

const SYSCALL_ARG0: usize = 16; // bpf(cmd, ...)
const SYSCALL_ARG1: usize = 24; // bpf(.., uattr, ..)
const SYSCALL_RET: usize = 16;

fn count_lost() {
    if let Some(p) = LOST.get_ptr_mut(0) {
        // SAFETY: a per-CPU slot of this map; nothing else writes it on this CPU now.
        unsafe { *p += 1 };
    }
}

#[tracepoint]
pub fn bpf_enter(ctx: TracePointContext) -> u32 {
    // SAFETY: reads within the fixed syscall_trace_enter record.
    let Ok(cmd) = (unsafe { ctx.read_at::<u64>(SYSCALL_ARG0) }) else { return 0 };
    let cmd = cmd as u32;
    if !matches!(cmd, BPF_PROG_ATTACH | BPF_PROG_DETACH | BPF_LINK_CREATE | BPF_LINK_UPDATE | BPF_LINK_DETACH) {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a global written only by the loader.
    if (pid_tgid >> 32) as u32 == unsafe { core::ptr::read_volatile(&AGENT_TGID) } {
        return 0;
    }
    // SAFETY: as above.
    let Ok(uattr) = (unsafe { ctx.read_at::<u64>(SYSCALL_ARG1) }) else { return 0 };
    // The first four u32 of union bpf_attr for these commands:
    //   PROG_ATTACH/DETACH: target_fd, attach_bpf_fd, attach_type, attach_flags
    //   LINK_CREATE:        prog_fd, target_fd, attach_type, flags
    //   LINK_UPDATE:        link_fd, new_prog_fd, flags, old_prog_fd
    //   LINK_DETACH:        link_fd
    // SAFETY: bpf_probe_read_user checks the user pointer and fails cleanly.
    let attr = match unsafe { bpf_probe_read_user(uattr as *const [u32; 4]) } {
        Ok(a) => a,
        Err(e) => {
            warn!(&ctx, "cannot read bpf_attr of cmd {} at {:x}: {}", cmd, uattr, e);
            [0; 4]
        }
    };
    let (target_fd, prog_fd, attach_type, flags) = match cmd {
        BPF_PROG_ATTACH | BPF_PROG_DETACH => (attr[0], attr[1], attr[2], attr[3]),
        BPF_LINK_CREATE => (attr[1], attr[0], attr[2], attr[3]),
        BPF_LINK_UPDATE => (attr[0], attr[1], ATTACH_TYPE_NONE, attr[2]),
        _ => (attr[0], 0, ATTACH_TYPE_NONE, 0),
    };
    let event = BpfCallRecord {
        // SAFETY: helper without preconditions.
        ktime_ns: unsafe { bpf_ktime_get_ns() },
        // SAFETY: helper without preconditions (cgroup v2 id of the caller).
        caller_cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        ret: 0,
        pid_tgid,
        cmd,
        attach_type,
        target_fd,
        prog_fd,
        flags,
        _pad: 0,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    };
    if PENDING.insert(&pid_tgid, &event, 0).is_err() {
        count_lost();
    }
    0
}

#[tracepoint]
pub fn bpf_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the value is copied out before the entry is removed.
    let Some(mut event) = (unsafe { PENDING.get(&pid_tgid) }).copied() else { return 0 };
    let _ = PENDING.remove(&pid_tgid);
    // SAFETY: reads within the fixed syscall_trace_exit record.
    event.ret = unsafe { ctx.read_at::<i64>(SYSCALL_RET) }.unwrap_or(0);
    if EVENTS.output::<BpfCallRecord>(&event, 0).is_err() {
        count_lost();
    }
    0
}
