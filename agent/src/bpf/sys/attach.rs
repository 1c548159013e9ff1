//! The fixtures' attach commands: legacy attachments, links, in-place
//! updates and pins, as CNIs and runtimes make them. Built for the tests
//! only (`test-support`): the agent itself never attaches to a cgroup.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use aya_obj::generated::bpf_cmd;

use super::{Result, sys_bpf, sys_bpf_fd, zeroed_attr};

/// `BPF_PROG_ATTACH` of a program to a cgroup (legacy attachment: it outlives
/// the process and must be detached explicitly).
pub fn prog_attach(cgroup: BorrowedFd<'_>, prog: BorrowedFd<'_>, attach_type: u32, flags: u32) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_5.__bindgen_anon_1.target_fd = cgroup.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_bpf_fd = prog.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_type = attach_type;
    attr.__bindgen_anon_5.attach_flags = flags;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_PROG_ATTACH", bpf_cmd::BPF_PROG_ATTACH, &mut attr) }.map(drop)
}

/// `BPF_PROG_ATTACH` with `BPF_F_REPLACE` (5.6): `prog` takes the place of
/// `old` on a hook attached with `BPF_F_ALLOW_MULTI`, in one call.
pub fn prog_attach_replace(
    cgroup: BorrowedFd<'_>,
    prog: BorrowedFd<'_>,
    old: BorrowedFd<'_>,
    attach_type: u32,
) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_5.__bindgen_anon_1.target_fd = cgroup.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_bpf_fd = prog.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_type = attach_type;
    attr.__bindgen_anon_5.attach_flags = aya_obj::generated::BPF_F_ALLOW_MULTI | aya_obj::generated::BPF_F_REPLACE;
    attr.__bindgen_anon_5.replace_bpf_fd = old.as_raw_fd() as u32;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_PROG_ATTACH", bpf_cmd::BPF_PROG_ATTACH, &mut attr) }.map(drop)
}

/// `BPF_LINK_UPDATE` (5.7): the link runs `new_prog` from now on, as a CNI
/// upgrading in place does.
pub fn link_update(link: BorrowedFd<'_>, new_prog: BorrowedFd<'_>) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.link_update.link_fd = link.as_raw_fd() as u32;
    attr.link_update.__bindgen_anon_1.new_prog_fd = new_prog.as_raw_fd() as u32;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_LINK_UPDATE", bpf_cmd::BPF_LINK_UPDATE, &mut attr) }.map(drop)
}

/// `BPF_LINK_DETACH` of link fd 0 (a zeroed attr), whatever it is: what a
/// hostile process calls in a loop to make noise. It fails (EPERM, EINVAL
/// or EBADF); tests use it to show that failing calls cost the daemon
/// nothing.
pub fn link_detach_raw_zeroed() {
    let mut attr = zeroed_attr();
    // SAFETY: no pointers in this command.
    let _ = unsafe { sys_bpf("BPF_LINK_DETACH", bpf_cmd::BPF_LINK_DETACH, &mut attr) };
}

/// `BPF_LINK_CREATE` of a cgroup link (5.7). The link lives as long as its fd
/// or a pin does.
pub fn cgroup_link_create(cgroup: BorrowedFd<'_>, prog: BorrowedFd<'_>, attach_type: u32) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.link_create.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    attr.link_create.__bindgen_anon_2.target_fd = cgroup.as_raw_fd() as u32;
    attr.link_create.attach_type = attach_type;
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_LINK_CREATE", bpf_cmd::BPF_LINK_CREATE, &mut attr) }
}

/// `BPF_LINK_CREATE` of a tcx link (6.6), or a netkit one (6.7: the same
/// attributes), on interface `ifindex` of the calling thread's network
/// namespace, at the end of the hook's programs.
pub fn tcx_link_create(ifindex: u32, prog: BorrowedFd<'_>, attach_type: u32) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.link_create.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    attr.link_create.__bindgen_anon_2.target_ifindex = ifindex;
    attr.link_create.attach_type = attach_type;
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_LINK_CREATE", bpf_cmd::BPF_LINK_CREATE, &mut attr) }
}

/// `BPF_ENABLE_STATS` of run time and count (5.8): programs count their
/// runs (`run_cnt`) while the returned fd is open.
pub fn enable_run_stats() -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.enable_stats.type_ = aya_obj::generated::bpf_stats_type::BPF_STATS_RUN_TIME as u32;
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_ENABLE_STATS", bpf_cmd::BPF_ENABLE_STATS, &mut attr) }
}

/// `BPF_OBJ_PIN` of a program, map or link fd at a bpffs path.
pub fn obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_4.pathname = path.as_ptr() as u64;
    attr.__bindgen_anon_4.bpf_fd = fd.as_raw_fd() as u32;
    // SAFETY: pathname is a NUL-terminated string that outlives the call.
    unsafe { sys_bpf("BPF_OBJ_PIN", bpf_cmd::BPF_OBJ_PIN, &mut attr) }.map(drop)
}

/// `BPF_LINK_CREATE` of a `uprobe_multi` link (6.6) on one offset of the
/// file at `path` (resolved as `open` would, relative to the working
/// directory), for any process. A tracing agent's link, not a cgroup one:
/// what a profiler holds on a node. `prog` must be a kprobe program loaded
/// with `BPF_TRACE_UPROBE_MULTI` as its expected attach type.
pub fn uprobe_multi_link_create(prog: BorrowedFd<'_>, path: &CStr, offset: u64) -> Result<OwnedFd> {
    let offsets = [offset];
    let mut attr = zeroed_attr();
    attr.link_create.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    attr.link_create.attach_type = aya_obj::generated::bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
    // SAFETY: writing plain integers into the zeroed union's uprobe_multi
    // member, the one this attach type reads.
    unsafe {
        let u = &mut attr.link_create.__bindgen_anon_3.uprobe_multi;
        u.path = path.as_ptr() as u64;
        u.offsets = offsets.as_ptr() as u64;
        u.cnt = 1;
    }
    // SAFETY: path is NUL-terminated and offsets holds `cnt` u64s, both
    // outliving the call; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_LINK_CREATE", bpf_cmd::BPF_LINK_CREATE, &mut attr) }
}

/// `BPF_MAP_CREATE` of a map of `map_type` named `name` (15 bytes kept),
/// as an agent's loader makes its maps.
pub fn map_create(map_type: u32, key_size: u32, value_size: u32, max_entries: u32, name: &str) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    // SAFETY: writing plain integers and bytes into the zeroed union's
    // map-create member, the one this command reads.
    unsafe {
        let m = &mut attr.__bindgen_anon_1;
        m.map_type = map_type;
        m.key_size = key_size;
        m.value_size = value_size;
        m.max_entries = max_entries;
        for (to, from) in m.map_name.iter_mut().zip(name.bytes().take(15)) {
            *to = from as _;
        }
    }
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_MAP_CREATE", bpf_cmd::BPF_MAP_CREATE, &mut attr) }
}

/// `BPF_MAP_UPDATE_ELEM` of a 4-byte key and value (a PROG_ARRAY slot and a
/// program's fd, as a loader fills its tail calls), or `BPF_MAP_DELETE_ELEM`
/// of that key when `value` is `None`.
pub fn map_set_u32(map: BorrowedFd<'_>, key: u32, value: Option<u32>) -> Result<()> {
    let mut attr = zeroed_attr();
    let value_slot = value.unwrap_or(0);
    // SAFETY: plain integers and pointers to the two locals, which outlive
    // the call, in the zeroed union's element member.
    unsafe {
        let e = &mut attr.__bindgen_anon_2;
        e.map_fd = map.as_raw_fd() as u32;
        e.key = &key as *const u32 as u64;
        e.__bindgen_anon_1.value = &value_slot as *const u32 as u64;
    }
    let (name, cmd) = match value {
        Some(_) => ("BPF_MAP_UPDATE_ELEM", bpf_cmd::BPF_MAP_UPDATE_ELEM),
        None => ("BPF_MAP_DELETE_ELEM", bpf_cmd::BPF_MAP_DELETE_ELEM),
    };
    // SAFETY: key and value point at 4-byte locals that outlive the call.
    unsafe { sys_bpf(name, cmd, &mut attr) }.map(drop)
}
