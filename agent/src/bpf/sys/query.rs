//! Reading the kernel's BPF objects: `BPF_PROG_QUERY` of a cgroup, the
//! ids of every program, link and BTF object, an fd by id, and what
//! `BPF_OBJ_GET_INFO_BY_FD` says about each. What the audit and the daemon
//! read; nothing here changes kernel state.

use std::ffi::CStr;
use std::mem::{self, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use aya_obj::generated::{
    BPF_F_QUERY_EFFECTIVE, bpf_btf_info, bpf_cmd, bpf_func_info, bpf_link_info, bpf_link_type, bpf_map_info,
    bpf_prog_info,
};

use super::{Result, sys_bpf, sys_bpf_fd, zeroed_attr};

/// What `BPF_PROG_QUERY` reports for one attach type of one cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// `BPF_F_ALLOW_OVERRIDE` / `BPF_F_ALLOW_MULTI` of the attach point (0 for
    /// effective queries). Bits this agent does not know are kept, never
    /// refused.
    pub attach_flags: u32,
    pub prog_ids: Vec<u32>,
    /// The hook's revision, which every change to it bumps (6.16+, the
    /// mprog API on cgroups); 0 when the kernel does not give one.
    pub revision: u64,
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
                // SAFETY: the kernel wrote back the `query` member (an
                // older kernel leaves `revision` as we zeroed it).
                let (flags, count, revision) =
                    unsafe { (attr.query.attach_flags, attr.query.__bindgen_anon_2.prog_cnt, attr.query.revision) };
                ids.truncate((count as usize).min(cap));
                return Ok(QueryResult { attach_flags: flags, prog_ids: ids, revision });
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

/// A hook's program count and revision alone (`BPF_PROG_QUERY` with no
/// id array): what a reader that skips unchanged hooks would call first.
pub fn prog_query_revision(target: BorrowedFd<'_>, attach_type: u32) -> Result<(u32, u64)> {
    let mut attr = zeroed_attr();
    attr.query.__bindgen_anon_1.target_fd = target.as_raw_fd() as u32;
    attr.query.attach_type = attach_type;
    // SAFETY: no pointers: prog_ids and prog_cnt are 0, the kernel writes
    // back the count and the revision only.
    unsafe { sys_bpf("BPF_PROG_QUERY", bpf_cmd::BPF_PROG_QUERY, &mut attr) }?;
    // SAFETY: the kernel wrote back the `query` member.
    Ok(unsafe { (attr.query.__bindgen_anon_2.prog_cnt, attr.query.revision) })
}

/// What one of an interface's mprog hooks holds (tcx 6.6+, netkit 6.7+).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IfindexQuery {
    pub prog_ids: Vec<u32>,
    /// Per program, the link holding it (0: attached without a link).
    pub link_ids: Vec<u32>,
    pub revision: u64,
}

/// `BPF_PROG_QUERY` of interface `ifindex` (in the calling thread's network
/// namespace: the kernel looks the index up there) on `attach_type`
/// (`BPF_TCX_*`, `BPF_NETKIT_*`). A hook holds at most 64 programs.
pub fn ifindex_query(ifindex: u32, attach_type: u32) -> Result<IfindexQuery> {
    let mut cap = 64usize;
    loop {
        let (mut ids, mut links) = (vec![0u32; cap], vec![0u32; cap]);
        let mut attr = zeroed_attr();
        {
            attr.query.__bindgen_anon_1.target_ifindex = ifindex;
            attr.query.attach_type = attach_type;
            attr.query.prog_ids = ids.as_mut_ptr() as u64;
            attr.query.link_ids = links.as_mut_ptr() as u64;
            attr.query.__bindgen_anon_2.prog_cnt = cap as u32;
        }
        // SAFETY: prog_ids and link_ids each point at `cap` u32s, the count
        // we pass.
        match unsafe { sys_bpf("BPF_PROG_QUERY", bpf_cmd::BPF_PROG_QUERY, &mut attr) } {
            Ok(_) => {
                // SAFETY: the kernel wrote back the `query` member.
                let (count, revision) = unsafe { (attr.query.__bindgen_anon_2.prog_cnt, attr.query.revision) };
                let n = (count as usize).min(cap);
                ids.truncate(n);
                links.truncate(n);
                return Ok(IfindexQuery { prog_ids: ids, link_ids: links, revision });
            }
            Err(e) if e.errno() == Some(libc::ENOSPC) && cap < 1024 => {
                // SAFETY: reading an integer the kernel wrote back.
                let needed = unsafe { attr.query.__bindgen_anon_2.prog_cnt } as usize;
                cap = needed.max(cap * 2).min(1024);
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
pub fn link_fd_by_id(id: u32) -> Result<OwnedFd> {
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
    /// How many times it ran while run statistics were on
    /// (`kernel.bpf_stats_enabled`, or a `BPF_ENABLE_STATS` fd).
    pub run_cnt: u64,
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
        run_cnt: info.run_cnt,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// What a link is attached to, as `bpf_link_info` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkTarget {
    /// A cgroup (its id; 0 once it is gone) and hook.
    Cgroup { cgroup_id: u64, attach_type: u32 },
    /// A tcx hook of interface `ifindex` (0 once the device is gone).
    Tcx { ifindex: u32, attach_type: u32 },
    /// A netkit hook of primary `ifindex` (0 once it is gone).
    Netkit { ifindex: u32, attach_type: u32 },
    /// XDP on `ifindex` (0 once the device is gone).
    Xdp { ifindex: u32 },
    /// Another kind of link (`bpf_link_type`).
    Other(u32),
}

/// A link, as `bpf_link_info` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkInfo {
    pub link_id: u32,
    pub prog_id: u32,
    pub target: LinkTarget,
}

/// Any link's id, program and target.
pub fn link_info(fd: BorrowedFd<'_>) -> Result<LinkInfo> {
    // SAFETY: plain data.
    let mut info: bpf_link_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers set.
    unsafe { obj_info(fd, &mut info)? };
    let u = &info.__bindgen_anon_1;
    // SAFETY: each union member read is the one the kernel fills for the
    // link's type.
    let target = unsafe {
        match info.type_ {
            t if t == bpf_link_type::BPF_LINK_TYPE_CGROUP as u32 => {
                LinkTarget::Cgroup { cgroup_id: u.cgroup.cgroup_id, attach_type: u.cgroup.attach_type }
            }
            t if t == bpf_link_type::BPF_LINK_TYPE_TCX as u32 => {
                LinkTarget::Tcx { ifindex: u.tcx.ifindex, attach_type: u.tcx.attach_type }
            }
            t if t == bpf_link_type::BPF_LINK_TYPE_NETKIT as u32 => {
                LinkTarget::Netkit { ifindex: u.netkit.ifindex, attach_type: u.netkit.attach_type }
            }
            t if t == bpf_link_type::BPF_LINK_TYPE_XDP as u32 => LinkTarget::Xdp { ifindex: u.xdp.ifindex },
            t => LinkTarget::Other(t),
        }
    };
    Ok(LinkInfo { link_id: info.id, prog_id: info.prog_id, target })
}

/// The maps a program uses, by id (at most 256 are read: Cilium's
/// largest object uses some 70).
pub fn prog_map_ids(fd: BorrowedFd<'_>) -> Result<Vec<u32>> {
    let mut ids = [0u32; 256];
    // SAFETY: plain data.
    let mut info: bpf_prog_info = unsafe { mem::zeroed() };
    info.nr_map_ids = ids.len() as u32;
    info.map_ids = ids.as_mut_ptr() as u64;
    // SAFETY: map_ids points at nr_map_ids writable u32s.
    unsafe { obj_info(fd, &mut info)? };
    Ok(ids[..(info.nr_map_ids as usize).min(ids.len())].to_vec())
}

/// A map's id and (15-byte) name.
pub fn map_info(fd: BorrowedFd<'_>) -> Result<(u32, String)> {
    // SAFETY: plain data.
    let mut info: bpf_map_info = unsafe { mem::zeroed() };
    // SAFETY: no embedded pointers set.
    unsafe { obj_info(fd, &mut info)? };
    // SAFETY: the kernel NUL-terminates the 16-byte name.
    let name = unsafe { CStr::from_ptr(info.name.as_ptr()) }.to_string_lossy().into_owned();
    Ok((info.id, name))
}

/// `BPF_OBJ_GET` of a pinned object.
pub fn obj_get(path: &CStr) -> Result<OwnedFd> {
    let mut attr = zeroed_attr();
    attr.__bindgen_anon_4.pathname = path.as_ptr() as u64;
    // SAFETY: pathname is a NUL-terminated string that outlives the call; the command returns a new fd.
    unsafe { sys_bpf_fd("BPF_OBJ_GET", bpf_cmd::BPF_OBJ_GET, &mut attr) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::sys::fake;

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
