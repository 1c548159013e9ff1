//! Loading and attaching the agent's own programs: BTF, programs (with the
//! verifier's log on failure), the one-element maps their constants live
//! in, the `iter/cgroup` link and its reading fd, and tracing attachments.

use std::ffi::CStr;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use aya_obj::generated::{bpf_cmd, bpf_func_info, bpf_line_info};

use super::{Result, SyscallError, sys_bpf, sys_bpf_fd, zeroed_attr};

/// `BPF_BTF_LOAD` of a raw BTF blob.
pub fn btf_load(data: &[u8]) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_7.btf = data.as_ptr() as u64;
    attr.__bindgen_anon_7.btf_size = data.len() as u32;
    // SAFETY: `btf` points at `btf_size` readable bytes; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_BTF_LOAD", bpf_cmd::BPF_BTF_LOAD, &mut attr) }
}

/// What `BPF_PROG_LOAD` needs.
pub struct ProgLoad<'a> {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    /// For tracing programs (iterators, fexit): the BTF id in the kernel's
    /// BTF of the function or iterator target they attach to.
    pub attach_btf_id: u32,
    /// At most 15 bytes; longer names are cut, as the kernel would refuse them.
    pub name: &'a str,
    pub license: &'a CStr,
    /// Raw `struct bpf_insn`s (8 bytes each, as `insn_word` encodes them).
    pub insns: &'a [u64],
    /// The program's own BTF and where its functions (and lines) start:
    /// needed for subprograms called back by helpers (`bpf_loop`), and to
    /// keep a full name past the kernel's 15-byte truncation.
    pub btf: Option<ProgBtf<'a>>,
}

pub struct ProgBtf<'a> {
    pub fd: BorrowedFd<'a>,
    pub func_info: &'a [bpf_func_info],
    pub line_info: &'a [bpf_line_info],
}

/// A program the kernel refused, with the end of the verifier's log.
#[derive(Debug, thiserror::Error)]
#[error("{error}{}", verifier.as_deref().map(|v| format!(" (verifier: {v})")).unwrap_or_default())]
pub struct LoadFailure {
    pub error: SyscallError,
    pub verifier: Option<String>,
}

/// The last meaningful line of a verifier log: what it refused.
fn verdict(log: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(log.split(|&b| b == 0).next().unwrap_or_default()).into_owned();
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
        })
        .map(str::to_owned)
}

/// `BPF_PROG_LOAD`. A refused program is loaded again with the verifier's
/// log on, once, so the failure says why.
pub fn prog_load(p: &ProgLoad<'_>) -> std::result::Result<OwnedFd, LoadFailure> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_3.prog_type = p.prog_type;
    attr.__bindgen_anon_3.expected_attach_type = p.expected_attach_type;
    attr.__bindgen_anon_3.attach_btf_id = p.attach_btf_id;
    attr.__bindgen_anon_3.insns = p.insns.as_ptr() as u64;
    attr.__bindgen_anon_3.insn_cnt = p.insns.len() as u32;
    attr.__bindgen_anon_3.license = p.license.as_ptr() as u64;
    let mut name = [0 as libc::c_char; 16];
    for (dst, src) in name.iter_mut().zip(p.name.bytes().take(15)) {
        *dst = src as libc::c_char;
    }
    attr.__bindgen_anon_3.prog_name = name;
    if let Some(btf) = &p.btf {
        attr.__bindgen_anon_3.prog_btf_fd = btf.fd.as_raw_fd() as u32;
        attr.__bindgen_anon_3.func_info = btf.func_info.as_ptr() as u64;
        attr.__bindgen_anon_3.func_info_cnt = btf.func_info.len() as u32;
        attr.__bindgen_anon_3.func_info_rec_size = size_of::<bpf_func_info>() as u32;
        attr.__bindgen_anon_3.line_info = btf.line_info.as_ptr() as u64;
        attr.__bindgen_anon_3.line_info_cnt = btf.line_info.len() as u32;
        attr.__bindgen_anon_3.line_info_rec_size = size_of::<bpf_line_info>() as u32;
    }
    let mut retry = attr;
    // SAFETY: insns, license, func_info and line_info outlive the call and
    // match their counts; the command returns a new fd.
    let error = match unsafe { sys_bpf_fd("BPF_PROG_LOAD", bpf_cmd::BPF_PROG_LOAD, &mut attr) } {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    let mut log = vec![0u8; 1 << 16];
    retry.__bindgen_anon_3.log_level = 1;
    retry.__bindgen_anon_3.log_buf = log.as_mut_ptr() as u64;
    retry.__bindgen_anon_3.log_size = log.len() as u32;
    // SAFETY: as above, and log_buf points at log_size writable bytes.
    match unsafe { sys_bpf_fd("BPF_PROG_LOAD", bpf_cmd::BPF_PROG_LOAD, &mut retry) } {
        // Loaded the second time (the first failure was transient).
        Ok(fd) => Ok(fd),
        Err(_) => Err(LoadFailure { error, verifier: verdict(&log) }),
    }
}

/// `BPF_MAP_UPDATE_ELEM` of key 0 of an array map, with `value` (exactly
/// the map's value size).
pub(crate) fn array_map_set(map: BorrowedFd<'_>, value: &[u8]) -> Result<()> {
    let key = 0u32;
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_2.map_fd = map.as_raw_fd() as u32;
    attr.__bindgen_anon_2.key = &key as *const u32 as u64;
    attr.__bindgen_anon_2.__bindgen_anon_1.value = value.as_ptr() as u64;
    // SAFETY: key and value point at the key and value sizes of an array
    // map whose value size the caller matched; both outlive the call.
    unsafe { sys_bpf("BPF_MAP_UPDATE_ELEM", bpf_cmd::BPF_MAP_UPDATE_ELEM, &mut attr) }.map(drop)
}

/// `BPF_MAP_FREEZE` (5.2): no more writes from userspace, so the verifier
/// may treat the map's values as constants.
pub(crate) fn map_freeze(map: BorrowedFd<'_>) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_2.map_fd = map.as_raw_fd() as u32;
    // SAFETY: no pointers in this command.
    unsafe { sys_bpf("BPF_MAP_FREEZE", bpf_cmd::BPF_MAP_FREEZE, &mut attr) }.map(drop)
}

/// `BPF_MAP_CREATE` of the smallest map there is (an array of one u32):
/// what probing the kernel's memory accounting needs.
pub(crate) fn tiny_map() -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_1.map_type = aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_ARRAY as u32;
    attr.__bindgen_anon_1.key_size = 4;
    attr.__bindgen_anon_1.value_size = 4;
    attr.__bindgen_anon_1.max_entries = 1;
    // SAFETY: no pointers in this command; it returns a new fd.
    unsafe { sys_bpf_fd("BPF_MAP_CREATE", bpf_cmd::BPF_MAP_CREATE, &mut attr) }
}

/// The cgroup member of UAPI `union bpf_iter_link_info` (6.1), which
/// aya-obj's bindings do not carry.
#[repr(C)]
struct CgroupIterInfo {
    order: u32,
    cgroup_fd: u32,
    cgroup_id: u64,
}

/// `BPF_LINK_CREATE` of an `iter/cgroup` program over `cgroup` and its
/// descendants, pre-order (`BPF_CGROUP_ITER_DESCENDANTS_PRE`). aya 0.14's
/// `Iter::attach` passes no iter_info, which a cgroup iterator rejects.
pub(crate) fn cgroup_iter_link_create(prog: BorrowedFd<'_>, cgroup: BorrowedFd<'_>) -> Result<OwnedFd> {
    let info = CgroupIterInfo {
        order: aya_obj::generated::bpf_cgroup_iter_order::BPF_CGROUP_ITER_DESCENDANTS_PRE as u32,
        cgroup_fd: cgroup.as_raw_fd() as u32,
        cgroup_id: 0,
    };
    let mut attr = zeroed_attr();
    attr.link_create.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    attr.link_create.attach_type = aya_obj::generated::bpf_attach_type::BPF_TRACE_ITER as u32;
    attr.link_create.__bindgen_anon_3.__bindgen_anon_1.iter_info = &info as *const CgroupIterInfo as u64;
    attr.link_create.__bindgen_anon_3.__bindgen_anon_1.iter_info_len = size_of::<CgroupIterInfo>() as u32;
    // SAFETY: iter_info points to a live CgroupIterInfo of the length given; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_LINK_CREATE", bpf_cmd::BPF_LINK_CREATE, &mut attr) }
}

/// `BPF_RAW_TRACEPOINT_OPEN` of a BTF-typed tracing program (fentry,
/// fexit, tp_btf: 5.5): attaches it to the target its `attach_btf_id`
/// named at load. The attachment lives as long as the returned fd.
pub(crate) fn tracing_attach(prog: BorrowedFd<'_>) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.raw_tracepoint.prog_fd = prog.as_raw_fd() as u32;
    // SAFETY: no pointers in this command (name NULL: the BTF target); the
    // command returns a new fd.
    unsafe { sys_bpf_fd("BPF_RAW_TRACEPOINT_OPEN", bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr) }
}

/// `BPF_ITER_CREATE`: a readable fd that runs the iterator link once.
pub(crate) fn iter_create(link: BorrowedFd<'_>) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.iter_create.link_fd = link.as_raw_fd() as u32;
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_ITER_CREATE", bpf_cmd::BPF_ITER_CREATE, &mut attr) }
}

/// aya's handle on a kprobe program this process loaded itself (aya wraps
/// a loaded program only from its `ProgramInfo`), to attach it with aya's
/// perf-event code. The caller loaded it as `BPF_PROG_TYPE_KPROBE` from a
/// section of the kind `kind` says.
pub(crate) fn kprobe_of_loaded(
    info: aya::programs::ProgramInfo,
    name: &'static str,
    kind: aya::programs::ProbeKind,
) -> std::result::Result<aya::programs::KProbe, aya::programs::ProgramError> {
    // SAFETY: aya requires the program to be of the kind `kind` names; the
    // only caller (daemon::trace::programs::kprobe) loaded it as a kprobe
    // program from a kprobe or kretprobe section of that kind.
    unsafe { aya::programs::KProbe::from_program_info(info, name.into(), kind) }
}
