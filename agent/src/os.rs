//! The few system calls outside bpf(2) that neither nix nor rustix wrap the
//! way the agent needs them, and with them the rest of the agent's `unsafe`
//! (the bpf(2) wrappers are in `bpf/sys.rs`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// `FILEID_KERNFS`: a kernfs file handle is the node id, which for cgroupfs
/// is the cgroup id.
const FILEID_KERNFS: i32 = 0xfe;

/// `struct file_handle` with the 8 bytes of a kernfs handle inline.
#[repr(C)]
struct KernfsHandle {
    handle_bytes: u32,
    handle_type: i32,
    id: u64,
}

/// `open_by_handle_at(2)` of the cgroup with id `id` in the cgroup2
/// filesystem `root` is on (needs CAP_DAC_READ_SEARCH).
pub fn open_cgroup_by_id(root: BorrowedFd<'_>, id: u64) -> io::Result<OwnedFd> {
    let mut handle = KernfsHandle { handle_bytes: 8, handle_type: FILEID_KERNFS, id };
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: `handle` is a valid `struct file_handle` followed by its
    // handle_bytes (8) of f_handle; the kernel reads no more than that.
    let fd = unsafe { libc::open_by_handle_at(root.as_raw_fd(), (&raw mut handle).cast::<libc::file_handle>(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes `fd` the child's descriptor number `to` (without close-on-exec),
/// the way a parent hands a child a pidfd.
pub fn pass_fd(cmd: &mut Command, fd: BorrowedFd<'_>, to: RawFd) {
    let from = fd.as_raw_fd();
    // SAFETY: between fork and exec the closure only calls dup2(2) or
    // fcntl(2), both async-signal-safe; it allocates nothing. `from` stays
    // open in the parent until spawn() returns, as the caller borrows it.
    unsafe {
        cmd.pre_exec(move || {
            let r = if from == to { libc::fcntl(to, libc::F_SETFD, 0) } else { libc::dup2(from, to) };
            if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        });
    }
}

/// Takes ownership of descriptor `n` that the parent passed with `pass_fd`,
/// if it is open.
pub fn inherited_fd(n: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `n` is open, was handed to this process by its parent for
    // this use and nothing else in the process owns it.
    Some(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Sets the real uid of the calling thread only (the raw `setresuid(2)`:
/// libc's wrapper changes every thread of the process). The effective and
/// saved uids stay as they are, and with them the capabilities.
pub fn set_thread_real_uid(uid: u32) -> io::Result<()> {
    // SAFETY: setresuid takes three integers; -1 leaves an id unchanged.
    let r = unsafe { libc::syscall(libc::SYS_setresuid, uid as libc::c_long, -1 as libc::c_long, -1 as libc::c_long) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}
