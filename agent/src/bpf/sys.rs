//! The agent's `unsafe` for bpf(2): thin wrappers over the syscall (and one
//! libc call that hands freed heap back to the kernel, `release_free_heap`).
//! The few other calls no library wraps are in `os.rs`.
//!
//! Every function fills one command's part of `union bpf_attr` (aya-obj's
//! generated UAPI bindings), issues the syscall through `sys_bpf` and turns
//! the result into an `OwnedFd` or plain data at once. Callers never see raw
//! pointers. Errors name the bpf command that failed, like aya's
//! `SyscallError`.
//!
//! `sys_bpf` is the one place the syscall is made. Unit tests replace it,
//! as aya's `sys` module lets its tests do, with a function that plays the
//! kernel (`fake::Kernel`), so the logic above it is tested without root.

use std::ffi::CStr;
use std::io;
use std::mem::{self, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use aya_obj::generated::{
    BPF_F_QUERY_EFFECTIVE, bpf_attr, bpf_btf_info, bpf_cmd, bpf_func_info, bpf_line_info, bpf_link_info, bpf_link_type,
    bpf_prog_info,
};

/// A failed bpf(2) command, named as the kernel UAPI names it, with the
/// errno in its message (not as a `source()`, which would print it twice).
#[derive(Debug, thiserror::Error)]
#[error("bpf({call}) failed: {io_error}")]
pub struct SyscallError {
    pub call: &'static str,
    pub io_error: io::Error,
}

impl SyscallError {
    pub fn errno(&self) -> Option<i32> {
        self.io_error.raw_os_error()
    }
}

pub type Result<T> = std::result::Result<T, SyscallError>;

fn zeroed_attr() -> bpf_attr {
    // SAFETY: bpf_attr is a plain C union of integers and arrays; all-zero is
    // its documented "unset" value for every command.
    unsafe { mem::zeroed() }
}

/// Issues one bpf(2) command.
///
/// # Safety
///
/// Every pointer stored in `attr` for `cmd` must be valid for the access the
/// kernel makes through it (reads of input buffers, writes of the sizes given
/// next to output buffers) for the duration of the call.
unsafe fn sys_bpf(call: &'static str, cmd: bpf_cmd, attr: &mut bpf_attr) -> Result<i64> {
    #[cfg(test)]
    if let Some(ret) = fake::call(cmd, attr) {
        return ret.map_err(|io_error| SyscallError { call, io_error });
    }
    // SAFETY: `attr` is a valid, initialised bpf_attr of the size we pass; the
    // caller guarantees the pointers inside it.
    let ret =
        unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr as *mut bpf_attr, size_of::<bpf_attr>()) };
    if ret < 0 { Err(SyscallError { call, io_error: io::Error::last_os_error() }) } else { Ok(ret) }
}

/// Takes ownership of a file descriptor a command returned.
///
/// # Safety
///
/// `ret` must be a new file descriptor that nothing else owns: the return
/// value of a successful command that creates one.
unsafe fn owned_fd(ret: i64) -> OwnedFd {
    // SAFETY: the caller guarantees `ret` is a fresh fd owned by no one.
    unsafe { OwnedFd::from_raw_fd(ret as RawFd) }
}

/// Issues a command that returns a new file descriptor.
///
/// # Safety
///
/// As for `sys_bpf`; and `cmd` must be one that returns a new fd on success.
unsafe fn sys_bpf_fd(call: &'static str, cmd: bpf_cmd, attr: &mut bpf_attr) -> Result<OwnedFd> {
    // SAFETY: the caller's guarantees, passed on.
    let ret = unsafe { sys_bpf(call, cmd, attr) }?;
    // SAFETY: on success this command returned a new fd.
    Ok(unsafe { owned_fd(ret) })
}

/// What `BPF_PROG_QUERY` reports for one attach type of one cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// `BPF_F_ALLOW_OVERRIDE` / `BPF_F_ALLOW_MULTI` of the attach point (0 for
    /// effective queries).
    pub attach_flags: u32,
    pub prog_ids: Vec<u32>,
}

/// `BPF_PROG_QUERY` (kernel 4.15) of a cgroup directory fd.
pub fn prog_query(target: BorrowedFd<'_>, attach_type: u32, effective: bool) -> Result<QueryResult> {
    // 64 is BPF_CGROUP_MAX_PROGS: the most a cgroup can hold per type, but the
    // effective list (own + inherited) can be longer, hence the retry.
    let mut cap = 64usize;
    loop {
        let mut ids = vec![0u32; cap];
        let mut attr = zeroed_attr();
        {
            attr.query.__bindgen_anon_1.target_fd = target.as_raw_fd() as u32;
            attr.query.attach_type = attach_type;
            attr.query.query_flags = if effective { BPF_F_QUERY_EFFECTIVE } else { 0 };
            attr.query.prog_ids = ids.as_mut_ptr() as u64;
            attr.query.__bindgen_anon_2.prog_cnt = cap as u32;
        }
        // SAFETY: prog_ids points at `cap` u32s, the count we pass.
        match unsafe { sys_bpf("BPF_PROG_QUERY", bpf_cmd::BPF_PROG_QUERY, &mut attr) } {
            Ok(_) => {
                // SAFETY: the kernel wrote back the `query` member.
                let (flags, count) = unsafe { (attr.query.attach_flags, attr.query.__bindgen_anon_2.prog_cnt) };
                ids.truncate((count as usize).min(cap));
                return Ok(QueryResult { attach_flags: flags, prog_ids: ids });
            }
            Err(e) if e.errno() == Some(libc::ENOSPC) => {
                // NB: the kernel wrote the real count back, but it may grow again
                // before the next call (another agent attaching): retry with room.
                // SAFETY: reading an integer the kernel wrote back.
                let needed = unsafe { attr.query.__bindgen_anon_2.prog_cnt } as usize;
                cap = needed.max(cap * 2);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Objects that `BPF_*_GET_NEXT_ID` enumerates.
#[derive(Debug, Clone, Copy)]
pub enum Objects {
    Programs,
    Links,
    Btf,
}

fn next_id(objects: Objects, start: u32) -> Result<Option<u32>> {
    let (call, cmd) = match objects {
        Objects::Programs => ("BPF_PROG_GET_NEXT_ID", bpf_cmd::BPF_PROG_GET_NEXT_ID),
        Objects::Links => ("BPF_LINK_GET_NEXT_ID", bpf_cmd::BPF_LINK_GET_NEXT_ID),
        Objects::Btf => ("BPF_BTF_GET_NEXT_ID", bpf_cmd::BPF_BTF_GET_NEXT_ID),
    };
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_6.__bindgen_anon_1.start_id = start;
    // SAFETY: no pointers in this command.
    match unsafe { sys_bpf(call, cmd, &mut attr) } {
        // SAFETY: reading the integer the kernel wrote back.
        Ok(_) => Ok(Some(unsafe { attr.__bindgen_anon_6.next_id })),
        Err(e) if e.errno() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every id of `objects`, in increasing order, as the kernel hands them
/// out one `GET_NEXT_ID` at a time. An error ends the iteration after it.
pub fn ids(objects: Objects) -> impl Iterator<Item = Result<u32>> {
    let mut last = Some(0);
    std::iter::from_fn(move || {
        let start = last?;
        match next_id(objects, start) {
            Ok(Some(id)) => {
                last = Some(id);
                Some(Ok(id))
            }
            Ok(None) => {
                last = None;
                None
            }
            Err(e) => {
                last = None;
                Some(Err(e))
            }
        }
    })
}

fn fd_by_id(call: &'static str, cmd: bpf_cmd, id: u32) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_6.__bindgen_anon_1.prog_id = id;
    // SAFETY: no pointers in this command, which returns a new fd.
    unsafe { sys_bpf_fd(call, cmd, &mut attr) }
}

/// `BPF_PROG_GET_FD_BY_ID` (4.13). ENOENT: the program was unloaded meanwhile.
pub fn prog_fd_by_id(id: u32) -> Result<OwnedFd> {
    fd_by_id("BPF_PROG_GET_FD_BY_ID", bpf_cmd::BPF_PROG_GET_FD_BY_ID, id)
}

/// `BPF_LINK_GET_FD_BY_ID` (5.8).
pub(crate) fn link_fd_by_id(id: u32) -> Result<OwnedFd> {
    fd_by_id("BPF_LINK_GET_FD_BY_ID", bpf_cmd::BPF_LINK_GET_FD_BY_ID, id)
}

/// `BPF_BTF_GET_FD_BY_ID` (5.0).
pub(crate) fn btf_fd_by_id(id: u32) -> Result<OwnedFd> {
    fd_by_id("BPF_BTF_GET_FD_BY_ID", bpf_cmd::BPF_BTF_GET_FD_BY_ID, id)
}

/// # Safety
///
/// `info` must be a bpf_*_info struct whose embedded pointers (if any were set)
/// point at buffers of the sizes set next to them.
unsafe fn obj_info<T>(fd: BorrowedFd<'_>, info: &mut T) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.info.bpf_fd = fd.as_raw_fd() as u32;
    attr.info.info = info as *mut T as u64;
    attr.info.info_len = size_of::<T>() as u32;
    // SAFETY: `info` is valid for size_of::<T>() bytes; the caller vouches for
    // the pointers inside it.
    unsafe { sys_bpf("BPF_OBJ_GET_INFO_BY_FD", bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.map(drop)
}

/// The parts of `bpf_prog_info` the audit uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    pub id: u32,
    pub prog_type: u32,
    /// The kernel's name, truncated to 15 bytes (BPF_OBJ_NAME_LEN - 1).
    pub name: String,
    pub tag: [u8; 8],
    pub btf_id: u32,
    pub nr_func_info: u32,
    /// When it was loaded, in nanoseconds since boot (CLOCK_BOOTTIME).
    pub load_time_ns: u64,
}

pub fn prog_info(fd: BorrowedFd<'_>) -> Result<ProgInfo> {
    // SAFETY: bpf_prog_info is plain data; zero means "no buffers requested".
    let mut info: bpf_prog_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers are set.
    unsafe { obj_info(fd, &mut info)? };
    // SAFETY: the kernel NUL-terminates the 16-byte name.
    let name = unsafe { CStr::from_ptr(info.name.as_ptr()) }.to_string_lossy().into_owned();
    Ok(ProgInfo {
        id: info.id,
        prog_type: info.type_,
        name,
        tag: info.tag,
        btf_id: info.btf_id,
        nr_func_info: info.nr_func_info,
        load_time_ns: info.load_time,
    })
}

/// The BTF type id of the program's entry function: the first `func_info`
/// record (the kernel sorts them by instruction offset; the entry is at 0).
pub(crate) fn prog_main_func_type_id(fd: BorrowedFd<'_>) -> Result<Option<u32>> {
    let mut rec = [bpf_func_info { insn_off: 0, type_id: 0 }; 1];
    // SAFETY: plain data.
    let mut info: bpf_prog_info = unsafe { mem::zeroed() };
    info.nr_func_info = 1;
    info.func_info_rec_size = size_of::<bpf_func_info>() as u32;
    info.func_info = rec.as_mut_ptr() as u64;
    // SAFETY: func_info points at one record of the size given.
    unsafe { obj_info(fd, &mut info)? };
    Ok((info.nr_func_info > 0).then_some(rec[0].type_id))
}

/// The first `len` bytes of the BTF blob behind a BTF object fd (fewer if
/// the blob is shorter), and the blob's whole size: the kernel copies a
/// prefix of what it holds, so a reader need not hold all of it.
pub(crate) fn btf_prefix(fd: BorrowedFd<'_>, len: u32) -> Result<(Vec<u8>, u32)> {
    // SAFETY: plain data.
    let mut info: bpf_btf_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers set.
    unsafe { obj_info(fd, &mut info)? };
    let size = info.btf_size;
    let mut buf = vec![0u8; len.min(size) as usize];
    // SAFETY: plain data.
    let mut info: bpf_btf_info = unsafe { mem::zeroed() };
    info.btf = buf.as_mut_ptr() as u64;
    info.btf_size = buf.len() as u32;
    // SAFETY: `btf` points at `btf_size` writable bytes.
    unsafe { obj_info(fd, &mut info)? };
    Ok((buf, size))
}

/// The raw BTF blob behind a BTF object fd (what `bpftool btf dump` reads).
pub(crate) fn btf_data(fd: BorrowedFd<'_>) -> Result<Vec<u8>> {
    // NB: first call learns the size, second copies; a BTF object is immutable
    // once loaded, so the size cannot change between the two.
    // SAFETY: plain data.
    let mut info: bpf_btf_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers set.
    unsafe { obj_info(fd, &mut info)? };
    let mut buf = vec![0u8; info.btf_size as usize];
    // SAFETY: plain data.
    let mut info: bpf_btf_info = unsafe { mem::zeroed() };
    info.btf = buf.as_mut_ptr() as u64;
    info.btf_size = buf.len() as u32;
    // SAFETY: `btf` points at `btf_size` writable bytes.
    unsafe { obj_info(fd, &mut info)? };
    buf.truncate(info.btf_size as usize);
    Ok(buf)
}

/// Whether a BTF object is the kernel's own (`vmlinux`, not a module's).
pub(crate) fn btf_is_vmlinux(fd: BorrowedFd<'_>) -> Result<bool> {
    let mut name = [0u8; 16];
    // SAFETY: plain data.
    let mut info: bpf_btf_info = unsafe { mem::zeroed() };
    info.name = name.as_mut_ptr() as u64;
    info.name_len = name.len() as u32;
    // SAFETY: `name` points at `name_len` writable bytes.
    unsafe { obj_info(fd, &mut info)? };
    Ok(info.kernel_btf != 0 && name.starts_with(b"vmlinux\0"))
}

/// A cgroup bpf_link as `bpf_link_info` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLinkInfo {
    pub link_id: u32,
    pub prog_id: u32,
    /// 0 once the cgroup is gone: the link is defunct.
    pub cgroup_id: u64,
    pub attach_type: u32,
}

/// `Ok(None)` for links that are not cgroup links.
pub fn cgroup_link_info(fd: BorrowedFd<'_>) -> Result<Option<CgroupLinkInfo>> {
    // SAFETY: plain data.
    let mut info: bpf_link_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers set.
    unsafe { obj_info(fd, &mut info)? };
    if info.type_ != bpf_link_type::BPF_LINK_TYPE_CGROUP as u32 {
        return Ok(None);
    }
    // SAFETY: for BPF_LINK_TYPE_CGROUP the kernel fills the `cgroup` member.
    let cg = unsafe { info.__bindgen_anon_1.cgroup };
    Ok(Some(CgroupLinkInfo {
        link_id: info.id,
        prog_id: info.prog_id,
        cgroup_id: cg.cgroup_id,
        attach_type: cg.attach_type,
    }))
}

// ---------------------------------------------------------------------------
// Commands that change kernel state. The audit never calls these; they exist
// for remediation (detach) and for the test suite's fixtures (load, attach,
// link, pin), so that the fixtures issue no bpf(2) of their own.

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

/// `BPF_PROG_ATTACH` of a program to a cgroup (legacy attachment: it outlives
/// the process and must be detached explicitly).
#[cfg(any(test, feature = "test-support"))]
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
#[cfg(any(test, feature = "test-support"))]
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

/// `BPF_LINK_UPDATE` (5.7): the link runs `new_prog` from now on, as a CNI
/// upgrading in place does.
#[cfg(any(test, feature = "test-support"))]
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
#[cfg(any(test, feature = "test-support"))]
pub fn link_detach_raw_zeroed() {
    let mut attr = zeroed_attr();
    // SAFETY: no pointers in this command.
    let _ = unsafe { sys_bpf("BPF_LINK_DETACH", bpf_cmd::BPF_LINK_DETACH, &mut attr) };
}

/// `BPF_LINK_CREATE` of a cgroup link (5.7). The link lives as long as its fd
/// or a pin does.
#[cfg(any(test, feature = "test-support"))]
pub fn cgroup_link_create(cgroup: BorrowedFd<'_>, prog: BorrowedFd<'_>, attach_type: u32) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.link_create.__bindgen_anon_1.prog_fd = prog.as_raw_fd() as u32;
    attr.link_create.__bindgen_anon_2.target_fd = cgroup.as_raw_fd() as u32;
    attr.link_create.attach_type = attach_type;
    // SAFETY: no pointers in this command; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_LINK_CREATE", bpf_cmd::BPF_LINK_CREATE, &mut attr) }
}

/// `BPF_OBJ_PIN` of a program, map or link fd at a bpffs path.
#[cfg(any(test, feature = "test-support"))]
pub fn obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> Result<()> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_4.pathname = path.as_ptr() as u64;
    attr.__bindgen_anon_4.bpf_fd = fd.as_raw_fd() as u32;
    // SAFETY: pathname is a NUL-terminated string that outlives the call.
    unsafe { sys_bpf("BPF_OBJ_PIN", bpf_cmd::BPF_OBJ_PIN, &mut attr) }.map(drop)
}

/// `BPF_OBJ_GET` of a pinned object.
pub(crate) fn obj_get(path: &CStr) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_4.pathname = path.as_ptr() as u64;
    // SAFETY: pathname is a NUL-terminated string that outlives the call; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_OBJ_GET", bpf_cmd::BPF_OBJ_GET, &mut attr) }
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

/// The kernel's own BTF, `/sys/kernel/btf/vmlinux`, mapped read-only
/// (kernel 6.16+ lets it be mapped; before, reading it is the only way).
pub(crate) struct KernelBtfMap {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
    len: std::num::NonZeroUsize,
}

pub(crate) const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Maps the kernel's BTF: no copy, and only the pages read are touched.
pub(crate) fn map_kernel_btf() -> io::Result<KernelBtfMap> {
    use nix::sys::mman::{MapFlags, ProtFlags, mmap};
    let file = std::fs::File::open(KERNEL_BTF)?;
    let len = std::num::NonZeroUsize::new(file.metadata()?.len() as usize)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty"))?;
    // SAFETY: a private read-only mapping of a whole file we opened; the
    // kernel's BTF never changes while the kernel runs, so the bytes the
    // slice sees cannot change under it (the hazard of file mappings).
    let ptr = unsafe { mmap(None, len, ProtFlags::PROT_READ, MapFlags::MAP_PRIVATE, &file, 0) }?;
    Ok(KernelBtfMap { ptr, len })
}

impl std::ops::Deref for KernelBtfMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr() as *const u8, self.len.get()) }
    }
}

impl Drop for KernelBtfMap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; no slice of it outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr, self.len.get()) };
    }
}

/// The bytes of a plain-data value, as the kernel reads a global's value.
pub(crate) fn pod_bytes<T: aya::Pod>(value: &T) -> &[u8] {
    // SAFETY: `Pod` types are plain data without padding (its implementers
    // promise it), so all size_of::<T>() bytes are initialised.
    unsafe { std::slice::from_raw_parts(value as *const T as *const u8, size_of::<T>()) }
}

/// Returns freed heap pages to the kernel (glibc's `malloc_trim`). aya's
/// loader parses all of vmlinux BTF (~30 MB of small allocations) and frees
/// it at once; without this, glibc keeps those pages and the audit's peak RSS
/// is that plus the walk. musl's allocator returns them by itself.
pub(crate) fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A stand-in for the kernel in unit tests: a handler that answers bpf(2)
/// on the thread that installed it, and helpers that write answers where
/// the calls above ask the kernel to.
#[cfg(test)]
pub(crate) mod fake {
    use std::cell::RefCell;
    use std::io;
    use std::os::fd::IntoRawFd;

    use aya_obj::generated::{bpf_attr, bpf_cmd, bpf_prog_info};

    type Handler = Box<dyn FnMut(bpf_cmd, &mut bpf_attr) -> io::Result<i64>>;

    thread_local! {
        static KERNEL: RefCell<Option<Handler>> = const { RefCell::new(None) };
    }

    /// Answers this thread's bpf(2) calls until dropped.
    pub struct Kernel(());

    impl Kernel {
        pub fn new(handler: impl FnMut(bpf_cmd, &mut bpf_attr) -> io::Result<i64> + 'static) -> Kernel {
            KERNEL.with(|k| *k.borrow_mut() = Some(Box::new(handler)));
            Kernel(())
        }
    }

    impl Drop for Kernel {
        fn drop(&mut self) {
            KERNEL.with(|k| *k.borrow_mut() = None);
        }
    }

    pub(super) fn call(cmd: bpf_cmd, attr: &mut bpf_attr) -> Option<io::Result<i64>> {
        KERNEL.with(|k| k.borrow_mut().as_mut().map(|h| h(cmd, attr)))
    }

    pub fn errno(e: i32) -> io::Result<i64> {
        Err(io::Error::from_raw_os_error(e))
    }

    /// A new fd, as commands that create one return (`/dev/null`: the
    /// caller owns and closes it).
    pub fn new_fd() -> io::Result<i64> {
        Ok(std::fs::File::open("/dev/null")?.into_raw_fd() as i64)
    }

    /// The attach type a `BPF_PROG_QUERY` asks about.
    pub fn query_attach_type(attr: &bpf_attr) -> u32 {
        // SAFETY: the caller is answering a BPF_PROG_QUERY.
        unsafe { attr.query.attach_type }
    }

    /// Answers a `BPF_PROG_QUERY` as the kernel does: the real count always
    /// written back, ENOSPC when the caller's buffer is too small.
    pub fn answer_query(attr: &mut bpf_attr, flags: u32, ids: &[u32]) -> io::Result<i64> {
        // SAFETY: the caller is answering a BPF_PROG_QUERY, whose `query`
        // member prog_query filled.
        let (buf, cap) = unsafe { (attr.query.prog_ids as *mut u32, attr.query.__bindgen_anon_2.prog_cnt as usize) };
        attr.query.attach_flags = flags;
        attr.query.__bindgen_anon_2.prog_cnt = ids.len() as u32;
        if ids.len() > cap {
            return errno(libc::ENOSPC);
        }
        // SAFETY: prog_query passes a buffer of `cap` u32s; we write fewer.
        unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr(), buf, ids.len()) };
        Ok(0)
    }

    /// The id after which a `BPF_*_GET_NEXT_ID` asks, and the answer.
    pub fn start_id(attr: &bpf_attr) -> u32 {
        // SAFETY: the caller is answering a GET_NEXT_ID command.
        unsafe { attr.__bindgen_anon_6.__bindgen_anon_1.start_id }
    }

    pub fn answer_next_id(attr: &mut bpf_attr, next: Option<u32>) -> io::Result<i64> {
        match next {
            Some(id) => {
                attr.__bindgen_anon_6.next_id = id;
                Ok(0)
            }
            None => errno(libc::ENOENT),
        }
    }

    /// The id a `BPF_*_GET_FD_BY_ID` asks for.
    pub fn asked_id(attr: &bpf_attr) -> u32 {
        // SAFETY: the caller is answering a GET_FD_BY_ID command.
        unsafe { attr.__bindgen_anon_6.__bindgen_anon_1.prog_id }
    }

    /// Answers `BPF_OBJ_GET_INFO_BY_FD` for a program.
    pub fn answer_prog_info(attr: &mut bpf_attr, id: u32, prog_type: u32, name: &str) -> io::Result<i64> {
        // SAFETY: plain data.
        let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
        info.id = id;
        info.type_ = prog_type;
        for (dst, src) in info.name.iter_mut().zip(name.bytes().take(15)) {
            *dst = src as libc::c_char;
        }
        // SAFETY: the caller is answering OBJ_GET_INFO_BY_FD for a program:
        // `info` points at a bpf_prog_info of `info_len` bytes.
        unsafe {
            let len = (attr.info.info_len as usize).min(std::mem::size_of::<bpf_prog_info>());
            std::ptr::copy_nonoverlapping(&info as *const bpf_prog_info as *const u8, attr.info.info as *mut u8, len);
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_retries_with_the_count_the_kernel_wrote_back_even_as_it_grows() {
        let mut calls = 0;
        let _k = fake::Kernel::new(move |cmd, attr| {
            assert_eq!(cmd, bpf_cmd::BPF_PROG_QUERY);
            calls += 1;
            // 70 programs, then 200 by the time the caller asks again.
            let n = if calls == 1 { 70 } else { 200 };
            let ids: Vec<u32> = (1..=n).collect();
            fake::answer_query(attr, aya_obj::generated::BPF_F_ALLOW_MULTI, &ids)
        });
        let fd = std::fs::File::open("/").unwrap();
        let r = prog_query(std::os::fd::AsFd::as_fd(&fd), 10, true).unwrap();
        assert_eq!(r.prog_ids.len(), 200);
        assert_eq!((r.prog_ids[0], r.prog_ids[199]), (1, 200));
        assert_eq!(r.attach_flags, aya_obj::generated::BPF_F_ALLOW_MULTI);
    }

    #[test]
    fn ids_stop_at_enoent_and_end_after_an_error() {
        let _k = fake::Kernel::new(|_, attr| match fake::start_id(attr) {
            0 => fake::answer_next_id(attr, Some(3)),
            3 => fake::answer_next_id(attr, Some(9)),
            _ => fake::answer_next_id(attr, None),
        });
        let found: Vec<u32> = ids(Objects::Programs).map(|r| r.unwrap()).collect();
        assert_eq!(found, [3, 9]);
        drop(_k);
        let _k = fake::Kernel::new(|_, _| fake::errno(libc::EPERM));
        let all: Vec<Result<u32>> = ids(Objects::Links).collect();
        assert_eq!(all.len(), 1);
        assert_eq!(
            all[0].as_ref().unwrap_err().to_string(),
            "bpf(BPF_LINK_GET_NEXT_ID) failed: Operation not permitted (os error 1)"
        );
    }
}
