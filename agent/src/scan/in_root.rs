//! Files of the node, or of a process, read inside its root: every path
//! resolved with `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` from an
//! `O_PATH` descriptor of that root (`/proc/<pid>/root`), so a symlink, even
//! an absolute one, cannot lead out of it; only regular files, size-capped.
//! Whatever cannot be read is `None`, never an error: the callers treat a
//! missing file as "not said".

use std::io::Read;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

/// A directory with more entries than this is read no further.
const MAX_ENTRIES: usize = 200_000;

/// The file at `path` (relative) inside `root`: a regular file of at most
/// `max` bytes, links resolved inside the root. What is there is looked at
/// first through an `O_PATH` descriptor, which opens nothing: a device node
/// or a FIFO put where a file should be never has its open handler run (a
/// watchdog device would reboot the node; a FIFO's writer would wake). Only
/// a regular file is then opened for reading, through that descriptor.
pub fn read(root: BorrowedFd<'_>, path: &str, max: u64) -> Option<Vec<u8>> {
    read_resolved(root, path, max, ResolveFlags::empty())
}

/// `read`, resolving `path` with `resolve` too (`Strict`: no symlink
/// followed, no mount crossed).
pub fn read_resolved(root: BorrowedFd<'_>, path: &str, max: u64, resolve: ResolveFlags) -> Option<Vec<u8>> {
    let at = open_with(root, path, OFlags::PATH, resolve)?;
    let st = rustix::fs::fstat(&at).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size as u64 > max {
        return None;
    }
    // The magic link is the file `at` names, wherever its path leads now.
    let proc_fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&at));
    let fd = rustix::fs::open(
        proc_fd.as_str(),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let now = rustix::fs::fstat(&fd).ok()?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
        return None;
    }
    let mut out = Vec::new();
    std::fs::File::from(fd).take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The names in directory `path` inside `root` (empty when unreadable).
pub fn list(root: BorrowedFd<'_>, path: &str) -> Vec<String> {
    list_resolved(root, path, ResolveFlags::empty())
}

/// The directory at `path` inside `root`, resolved with `resolve` too.
pub fn open_dir(root: BorrowedFd<'_>, path: &str, resolve: ResolveFlags) -> Option<OwnedFd> {
    open_with(root, path, OFlags::RDONLY | OFlags::DIRECTORY, resolve)
}

/// `list`, resolving `path` with `resolve` too.
fn list_resolved(root: BorrowedFd<'_>, path: &str, resolve: ResolveFlags) -> Vec<String> {
    let Some(fd) = open_with(root, path, OFlags::RDONLY | OFlags::DIRECTORY, resolve) else { return Vec::new() };
    let Ok(dir) = rustix::fs::Dir::read_from(&fd) else { return Vec::new() };
    dir.filter_map(Result::ok)
        .take(MAX_ENTRIES)
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
        .filter(|n| n != "." && n != "..")
        .collect()
}

pub fn open_in(root: BorrowedFd<'_>, path: &str, flags: OFlags) -> Option<OwnedFd> {
    open_with(root, path, flags, ResolveFlags::empty())
}

/// Resolving with `RESOLVE_NO_SYMLINKS` and `RESOLVE_NO_XDEV` besides: for
/// files a tenant may write (in the node's CNI configuration directory),
/// no link is followed and no mount crossed, so none can lead the read to
/// a FUSE file nobody serves.
pub const STRICT: ResolveFlags = ResolveFlags::NO_SYMLINKS.union(ResolveFlags::NO_XDEV);

fn open_with(root: BorrowedFd<'_>, path: &str, flags: OFlags, resolve: ResolveFlags) -> Option<OwnedFd> {
    rustix::fs::openat2(
        root,
        path,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | resolve,
    )
    .ok()
}
