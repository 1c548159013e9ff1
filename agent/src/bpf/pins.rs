//! Objects pinned in a bpffs directory (a CNI's links and programs): what
//! each one is, without following anything but the directory's own entries.
//!
//! The directory is a path in a bpffs others can write (anyone with the
//! node's bpffs mounted): it is resolved beneath the bpffs mount with no
//! symbolic link and no mount crossing (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, or a walk of `O_NOFOLLOW` opens
//! that checks the device before 5.6), so a `cilium` link into a FUSE mount
//! nobody serves is refused rather than followed. Callers read pins under
//! the deadline of untrusted reads all the same.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::sys::{self, CgroupLinkInfo};

/// `BPF_FS_MAGIC`.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// One pinned object: a program, or a link (with its program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub path: PathBuf,
    /// Its name in the directory, and its inode there: what `remove`
    /// removes, and only if it is still that one.
    pub name: std::ffi::OsString,
    pub ino: u64,
    pub prog_id: u32,
    /// For a pinned cgroup link: the link as the kernel describes it.
    pub link: Option<CgroupLinkInfo>,
    /// For any pinned link (a tcx, netkit or XDP link of a device too):
    /// its id and target.
    pub linked: Option<sys::LinkInfo>,
}

/// A map pinned in a directory: its name there and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedMap {
    pub name: String,
    pub map_id: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    #[error("{0}: not a bpffs directory (mount bpffs there, or pass the bpffs mount point)")]
    NotBpffs(PathBuf),
    #[error("{0}: a symbolic link on the way, not followed")]
    Symlink(PathBuf),
    #[error("{0}: another filesystem is mounted on the way, not crossed")]
    OtherMount(PathBuf),
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
}

/// Whether `dir` lies on a bpffs mount.
pub fn is_bpffs(dir: &Path) -> bool {
    rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .is_ok_and(|fd| on_bpffs(fd.as_fd()))
}

fn on_bpffs(fd: BorrowedFd<'_>) -> bool {
    // f_type is i64 on x86_64, other widths elsewhere.
    #[allow(clippy::unnecessary_cast, reason = "f_type's width differs between architectures")]
    rustix::fs::fstatfs(fd).is_ok_and(|fs| fs.f_type as i64 == BPF_FS_MAGIC)
}

/// The bpffs directory at `path` (the mount point), opened `O_PATH`.
pub fn open_bpffs(path: &Path) -> Result<OwnedFd, PinsError> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|_| PinsError::NotBpffs(path.to_owned()))?;
    if !on_bpffs(fd.as_fd()) {
        return Err(PinsError::NotBpffs(path.to_owned()));
    }
    Ok(fd)
}

/// `/sys/fs/bpf` of the process whose root is `root` (`<proc>/<pid>/root`),
/// resolved inside that root with no symbolic link.
pub fn open_bpffs_in(root: &Path) -> Result<OwnedFd, PinsError> {
    let shown = root.join("sys/fs/bpf");
    let top = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|_| PinsError::NotBpffs(shown.clone()))?;
    let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = match rustix::fs::openat2(
        &top,
        "sys/fs/bpf",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    ) {
        Ok(fd) => fd,
        Err(Errno::NOSYS) => walk(top.as_fd(), "sys/fs/bpf", false).map_err(|e| e.at(&shown))?,
        Err(Errno::LOOP) => return Err(PinsError::Symlink(shown)),
        Err(_) => return Err(PinsError::NotBpffs(shown)),
    };
    if !on_bpffs(fd.as_fd()) {
        return Err(PinsError::NotBpffs(shown));
    }
    Ok(fd)
}

/// Why a walk stopped.
enum Stop {
    Symlink,
    OtherMount,
    Missing,
    Io(Errno),
}

impl Stop {
    fn at(self, path: &Path) -> PinsError {
        match self {
            Stop::Symlink => PinsError::Symlink(path.to_owned()),
            Stop::OtherMount => PinsError::OtherMount(path.to_owned()),
            Stop::Missing => PinsError::Io { path: path.to_owned(), error: Errno::NOENT.into() },
            Stop::Io(e) => PinsError::Io { path: path.to_owned(), error: e.into() },
        }
    }
}

/// Before `openat2` (5.6): one component at a time, `O_NOFOLLOW`, each on
/// the device of `from` unless crossing is allowed.
fn walk(from: BorrowedFd<'_>, rel: &str, same_device: bool) -> Result<OwnedFd, Stop> {
    let dev = rustix::fs::fstat(from).map_err(Stop::Io)?.st_dev;
    let mut at = rustix::fs::openat(from, ".", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(Stop::Io)?;
    for name in rel.split('/').filter(|c| !c.is_empty()) {
        let next = rustix::fs::openat(&at, name, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| if e == Errno::NOENT { Stop::Missing } else { Stop::Io(e) })?;
        let st = rustix::fs::fstat(&next).map_err(Stop::Io)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => return Err(Stop::Symlink),
            FileType::Directory => {}
            _ => return Err(Stop::Io(Errno::NOTDIR)),
        }
        if same_device && st.st_dev != dev {
            return Err(Stop::OtherMount);
        }
        at = next;
    }
    Ok(at)
}

/// The objects pinned directly in `rel` (e.g. `cilium/socketlb/links/cgroup`)
/// below the bpffs mount `bpffs` (shown as `shown` in errors). `Ok(empty)`
/// when the directory does not exist (nothing pinned). Entries that are
/// not files (links, directories) are skipped; objects that are neither a
/// program nor a link (maps) too.
pub fn pinned(bpffs: BorrowedFd<'_>, shown: &Path, rel: &str) -> Result<Vec<Pinned>, PinsError> {
    let dir_path = shown.join(rel);
    let Some((dir, entries)) = list_dir(bpffs, shown, rel)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        // Pinned objects are regular files of bpffs; anything else is
        // skipped, and a file swapped for a link meanwhile is not followed
        // by this check but by BPF_OBJ_GET, which callers bound in time.
        let Ok(st) = rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            continue;
        }
        let via = format!("/proc/self/fd/{}/", dir.as_raw_fd());
        let Ok(c) = CString::new([via.as_bytes(), name].concat()) else { continue };
        let Ok(fd) = sys::obj_get(&c) else { continue };
        // The object's kind first: the info of a program read as a link's
        // is garbage of the right size.
        let (prog_id, link, linked) = match super::fdinfo::object(fd.as_fd()).map(|o| (o, sys::link_info(fd.as_fd()))) {
            Some((super::fdinfo::Object::Link, Ok(l))) => {
                let cgroup = match l.target {
                    sys::LinkTarget::Cgroup { cgroup_id, attach_type } => {
                        Some(CgroupLinkInfo { link_id: l.link_id, prog_id: l.prog_id, cgroup_id, attach_type })
                    }
                    _ => None,
                };
                (l.prog_id, cgroup, Some(l))
            }
            Some((super::fdinfo::Object::Program, _)) => match sys::prog_info(fd.as_fd()) {
                Ok(info) => (info.id, None, None),
                Err(_) => continue,
            },
            // A map, a link the kernel will not describe, or not known.
            _ => continue,
        };
        let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name);
        out.push(Pinned { path: dir_path.join(name), name: name.to_owned(), ino: st.st_ino, prog_id, link, linked });
        if out.len() >= PINS_MAX {
            break;
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The most objects read of one pin directory: an owner pins a few per
/// device or endpoint; a directory others can write may hold any number.
pub const PINS_MAX: usize = 4096;

/// The subdirectories of `rel` below `bpffs` (a CNI's `devices/`, one per
/// device), by name, `PINS_MAX` at most; empty when it does not exist.
pub fn subdirs(bpffs: BorrowedFd<'_>, shown: &Path, rel: &str) -> Result<Vec<String>, PinsError> {
    let Some((dir, entries)) = list_dir(bpffs, shown, rel)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().to_str() else { continue };
        if name == "." || name == ".." || name.contains('/') {
            continue;
        }
        let Ok(st) = rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            out.push(name.to_owned());
            if out.len() >= PINS_MAX {
                break;
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The maps pinned directly in `rel` whose names start with one of
/// `prefixes` (an owner's maps in `tc/globals`), `PINS_MAX` at
/// most: their ids, to tell the owner's programs by the maps they use.
pub fn pinned_maps(
    bpffs: BorrowedFd<'_>,
    shown: &Path,
    rel: &str,
    prefixes: &[&str],
) -> Result<Vec<PinnedMap>, PinsError> {
    let Some((dir, entries)) = list_dir(bpffs, shown, rel)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().to_str() else { continue };
        if !prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let Ok(st) = rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) else { continue };
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            continue;
        }
        let via = format!("/proc/self/fd/{}/{name}", dir.as_raw_fd());
        let Ok(c) = CString::new(via) else { continue };
        let Ok(fd) = sys::obj_get(&c) else { continue };
        if let Ok((map_id, _)) = sys::map_info(fd.as_fd()) {
            out.push(PinnedMap { name: name.to_owned(), map_id });
            if out.len() >= PINS_MAX {
                break;
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Removes the pin `name` of directory `rel` below `bpffs`, if it is still
/// the object `ino` was: the directory is resolved again as `pinned` does
/// (a directory swapped for a link since cannot point the removal
/// elsewhere), and the name unlinked relative to it.
pub fn remove(
    bpffs: BorrowedFd<'_>,
    shown: &Path,
    rel: &str,
    name: &std::ffi::OsStr,
    ino: u64,
) -> Result<(), PinsError> {
    let path = shown.join(rel).join(name);
    let Some(dir) = open_dir(bpffs, shown, rel)? else {
        return Err(PinsError::Io { path, error: Errno::NOENT.into() });
    };
    let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| PinsError::Io { path: path.clone(), error: e.into() })?;
    if st.st_ino != ino || FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(PinsError::Io { path, error: std::io::Error::other("replaced since it was listed: not removed") });
    }
    rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| PinsError::Io { path, error: e.into() })
}

/// Directory `rel` below `bpffs` as `open_dir` opens it, and its entries
/// to read; `None` when it does not exist.
fn list_dir(bpffs: BorrowedFd<'_>, shown: &Path, rel: &str) -> Result<Option<(OwnedFd, rustix::fs::Dir)>, PinsError> {
    let Some(dir) = open_dir(bpffs, shown, rel)? else { return Ok(None) };
    let io = |e: Errno| PinsError::Io { path: shown.join(rel), error: e.into() };
    let readable = rustix::fs::openat(&dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(io)?;
    let entries = rustix::fs::Dir::new(readable).map_err(io)?;
    Ok(Some((dir, entries)))
}

/// Directory `rel` below `bpffs`, with no link and no mount on the way;
/// `None` when it does not exist.
fn open_dir(bpffs: BorrowedFd<'_>, shown: &Path, rel: &str) -> Result<Option<OwnedFd>, PinsError> {
    let dir_path = shown.join(rel);
    let resolve =
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_XDEV | ResolveFlags::NO_MAGICLINKS;
    let dir = match rustix::fs::openat2(
        bpffs,
        rel,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve,
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(PinsError::Symlink(dir_path)),
        Err(Errno::XDEV) => return Err(PinsError::OtherMount(dir_path)),
        Err(Errno::NOSYS) => match walk(bpffs, rel, true) {
            Ok(fd) => fd,
            Err(Stop::Missing) => return Ok(None),
            Err(e) => return Err(e.at(&dir_path)),
        },
        Err(e) => return Err(PinsError::Io { path: dir_path, error: e.into() }),
    };
    Ok(Some(dir))
}
