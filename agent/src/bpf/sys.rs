//! The agent's `unsafe` for bpf(2): thin wrappers over the syscall, like
//! aya's `sys/`: reading the kernel's objects (`query`), loading and
//! attaching the agent's own programs (`load`), changing cgroup attachments
//! (`write`: remediation's detach; `attach`: the fixtures'), memory the kernel maps or the
//! allocator hands back (`memory`), and the stand-in kernel of the unit
//! tests (`fake`). The few other calls no library wraps are in `os.rs`.
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

use std::io;
use std::mem::{self, size_of};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use aya_obj::generated::{bpf_attr, bpf_cmd};

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

/// The bytes of a plain-data value, as the kernel reads a global's value.
pub(crate) fn pod_bytes<T: aya::Pod>(value: &T) -> &[u8] {
    // SAFETY: `Pod` types are plain data without padding (its implementers
    // promise it), so all size_of::<T>() bytes are initialised.
    unsafe { std::slice::from_raw_parts(value as *const T as *const u8, size_of::<T>()) }
}

#[cfg(any(test, feature = "test-support"))]
mod attach;
mod load;
mod memory;
mod query;
mod write;

#[cfg(test)]
pub(crate) mod fake;

#[cfg(any(test, feature = "test-support"))]
pub use attach::*;
pub use load::*;
pub(crate) use memory::*;
pub use query::*;
pub use write::*;
