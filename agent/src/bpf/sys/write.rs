//! Commands that end cgroup attachments: what remediation calls (the
//! audit never does).

use std::os::fd::{AsRawFd, BorrowedFd};

use aya_obj::generated::bpf_cmd;

use super::{Result, sys_bpf, zeroed_attr};

/// `BPF_PROG_DETACH` of one program from a cgroup.
pub fn prog_detach(cgroup: BorrowedFd<'_>, prog: BorrowedFd<'_>, attach_type: u32) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_5.__bindgen_anon_1.target_fd = cgroup.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_bpf_fd = prog.as_raw_fd() as u32;
    attr.__bindgen_anon_5.attach_type = attach_type;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_PROG_DETACH", bpf_cmd::BPF_PROG_DETACH, &mut attr) }.map(drop)
}

/// `BPF_LINK_DETACH` (5.9): ends a link's attachment even while pins or
/// other fds keep the link object itself alive (it then reads as defunct).
pub fn link_detach(link: BorrowedFd<'_>) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.link_detach.link_fd = link.as_raw_fd() as u32;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_LINK_DETACH", bpf_cmd::BPF_LINK_DETACH, &mut attr) }.map(drop)
}
