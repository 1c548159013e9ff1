//! A stand-in for the kernel in unit tests: a handler that answers bpf(2)
//! on the thread that installed it, and helpers that write answers where
//! the calls ask the kernel to.

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
