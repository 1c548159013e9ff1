//! Inside the remount helper, after it entered PID 1's cgroup and the target's
//! mount namespaces: what the mount path holds, and the one change made to
//! it. Every path is walked one component at a time with
//! `openat2(RESOLVE_NO_SYMLINKS)` and every action works on the file
//! descriptors of that walk, so no link, swapped directory or mount stacked
//! in between can redirect it; `--apply` re-checks under a lock that the
//! walk ends at the very directory and mount that were planned.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, ResolveFlags, StatxFlags};
use rustix::io::Errno;
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, UnmountFlags};
use serde::{Deserialize, Serialize};

use super::plan::{Action, Identity, Observed, PathState};
use crate::mounts;

/// The lock two remediations on one node contend for, in the target's /run.
pub const LOCK_FILE: &str = "/run/cgaudit-remediation.lock";

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Why the helper did not do what it was asked. Crosses the process boundary
/// as JSON, hence the errno rather than an `io::Error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    #[error("target pid {pid} exited")]
    TargetExited { pid: u32 },
    #[error("entering pid {pid}'s cgroup and mount namespaces: {} (needs CAP_SYS_ADMIN and hostPID)", errno_text(*errno))]
    Enter { pid: u32, errno: i32 },
    #[error("{call} {}: {}", path.display(), errno_text(*errno))]
    Call { call: String, path: PathBuf, errno: i32 },
    #[error("--path must be absolute, below /, without . or .. components: {}", path.display())]
    BadPath { path: PathBuf },
    #[error("another cgaudit remediation holds {LOCK_FILE}; try again when it is done")]
    Locked,
    #[error("{} changed since it was planned (it was {was}, it is now {now}): nothing done; run again", path.display())]
    Changed { path: PathBuf, was: Box<PathState>, now: Box<PathState> },
    #[error(
        "cgroup2 mounted from PID 1's cgroup namespace would be rooted at cgroup id {would_be}, not the root (id {reference}): \
         nothing changed"
    )]
    WrongRoot { would_be: u64, reference: u64 },
    #[error(
        "{}: the old mount was detached but the new one could not be attached (move_mount: {}); nothing is mounted there \
         now: run again",
        path.display(), errno_text(*errno)
    )]
    HalfDone { path: PathBuf, errno: i32 },
    #[error("after mounting, {} holds {now}, not the new cgroup2 mount rooted at cgroup id {reference}", path.display())]
    NotVerified { path: PathBuf, now: Box<PathState>, reference: u64 },
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

fn call(call: &str, path: &Path) -> impl FnOnce(Errno) -> Failure {
    let (call, path) = (call.to_owned(), path.to_owned());
    move |e| Failure::Call { call, path, errno: e.raw_os_error() }
}

/// The walk's result: what was seen, and the descriptors to act through.
pub struct Inspected {
    pub observed: Observed,
    /// Every component that exists, "/" first, each opened `O_PATH` and
    /// checked to be a directory (not a link).
    dirs: Vec<OwnedFd>,
    /// The components after the last that exists, for `create_and_mount`.
    missing: Vec<OsString>,
    /// The path of the last component that exists.
    existing: PathBuf,
}

fn components(path: &Path) -> Result<Vec<&OsStr>, Failure> {
    let mut out = Vec::new();
    for (i, c) in path.components().enumerate() {
        match c {
            Component::RootDir if i == 0 => {}
            Component::Normal(name) => out.push(name),
            _ => return Err(Failure::BadPath { path: path.to_owned() }),
        }
    }
    if out.is_empty() || !path.is_absolute() {
        return Err(Failure::BadPath { path: path.to_owned() });
    }
    Ok(out)
}

fn open_component(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat2(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH,
    )
}

fn statx(fd: BorrowedFd<'_>, path: &Path) -> Result<rustix::fs::Statx, Failure> {
    let mask = StatxFlags::TYPE | StatxFlags::INO | StatxFlags::MNT_ID;
    let st = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, mask).map_err(call("statx", path))?;
    if st.stx_mask & StatxFlags::MNT_ID.bits() == 0 {
        // Before 5.8; the helper's setns(pidfd) needs 5.8 as well.
        return Err(Failure::Call { call: "statx(STATX_MNT_ID)".into(), path: path.to_owned(), errno: libc::ENOSYS });
    }
    Ok(st)
}

fn file_type_name(t: FileType) -> &'static str {
    match t {
        FileType::Symlink => "symbolic link",
        FileType::RegularFile => "regular file",
        FileType::Socket => "socket",
        FileType::Fifo => "fifo",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        _ => "non-directory",
    }
}

fn identity(st: &rustix::fs::Statx) -> Identity {
    Identity { mount_id: st.stx_mnt_id, dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor), ino: st.stx_ino }
}

/// What `path` holds, seen from the helper's (the target's) root. `proc_self`
/// is the helper's own `/proc/self`, opened before it changed namespaces.
pub fn inspect(proc_self: BorrowedFd<'_>, path: &Path) -> Result<Inspected, Failure> {
    let names = components(path)?;
    let root = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(call("open", Path::new("/")))?;
    let mut dirs = vec![root];
    let mut seen = PathBuf::from("/");
    let mut last = None;
    for (i, name) in names.iter().enumerate() {
        seen.push(name);
        let fd = match open_component(dirs[dirs.len() - 1].as_fd(), name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                let missing = names[i..].iter().map(|n| n.to_os_string()).collect();
                let existing = seen.parent().unwrap_or(Path::new("/")).to_owned();
                let state = PathState::Absent { missing: seen };
                return Ok(Inspected { observed: Observed { state, identity: None }, dirs, missing, existing });
            }
            Err(e) => return Err(call("open", &seen)(e)),
        };
        let st = statx(fd.as_fd(), &seen)?;
        let state = match FileType::from_raw_mode(st.stx_mode.into()) {
            FileType::Directory => None,
            FileType::Symlink => Some(PathState::Symlink { path: seen.clone() }),
            other => Some(PathState::NotDirectory { path: seen.clone(), file_type: file_type_name(other).into() }),
        };
        if let Some(state) = state {
            let observed = Observed { state, identity: None };
            return Ok(Inspected { observed, dirs, missing: Vec::new(), existing: seen });
        }
        dirs.push(fd);
        last = Some(st);
    }
    let top = last.expect("at least one component");
    let parent = statx(dirs[dirs.len() - 2].as_fd(), seen.parent().unwrap_or(Path::new("/")))?;
    let state = if top.stx_mnt_id == parent.stx_mnt_id {
        match entries(dirs[dirs.len() - 1].as_fd(), path)? {
            0 => PathState::Directory,
            entries => PathState::NonEmpty { entries },
        }
    } else {
        let fd = dirs[dirs.len() - 1].as_fd();
        let magic = rustix::fs::fstatfs(fd).map_err(call("fstatfs", path))?.f_type;
        #[allow(clippy::unnecessary_cast, reason = "f_type is i64 on x86_64, u32 or i32 elsewhere")]
        let cgroup2 = magic as i64 == CGROUP2_SUPER_MAGIC;
        let (fs_type, mountinfo_root) = mount_text(proc_self, top.stx_mnt_id);
        PathState::Mounted { fs_type, mountinfo_root, top_cgroup_id: cgroup2.then_some(top.stx_ino) }
    };
    let observed = Observed { state, identity: Some(identity(&top)) };
    Ok(Inspected { observed, dirs, missing: Vec::new(), existing: seen })
}

/// How many entries a directory (held `O_PATH`) has, besides `.` and `..`.
fn entries(dir: BorrowedFd<'_>, path: &Path) -> Result<u64, Failure> {
    let fd = rustix::fs::openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(call("open", path))?;
    let mut n = 0;
    for entry in rustix::fs::Dir::new(fd).map_err(call("getdents", path))? {
        let entry = entry.map_err(call("getdents", path))?;
        if !matches!(entry.file_name().to_bytes(), b"." | b"..") {
            n += 1;
        }
    }
    Ok(n)
}

/// The filesystem name and root of mount `mount_id`, for display: from the
/// helper's own mountinfo, matched by id (never by path text).
fn mount_text(proc_self: BorrowedFd<'_>, mount_id: u64) -> (String, String) {
    let text = rustix::fs::openat(proc_self, "mountinfo", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .ok()
        .and_then(|fd| std::io::read_to_string(std::fs::File::from(fd)).ok())
        .unwrap_or_default();
    mounts::parse_mountinfo(text.as_bytes())
        .mounts
        .into_iter()
        .find(|m| u64::try_from(m.mount_id).ok() == Some(mount_id))
        .map(|m| (m.fs_type, m.root))
        .unwrap_or_else(|| ("?".into(), "?".into()))
}

/// Holds the node-wide remediation lock: `/run/cgaudit-remediation.lock` in
/// the target's mount namespace, opened without following links, mode 0600.
pub struct Lock {
    _file: OwnedFd,
}

impl Lock {
    pub fn take() -> Result<Lock, Failure> {
        let root = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(call("open", Path::new("/")))?;
        let path = Path::new(LOCK_FILE);
        let fd = rustix::fs::openat2(
            root,
            path.strip_prefix("/").unwrap_or(path),
            OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH,
        )
        .map_err(call("open", path))?;
        let st = rustix::fs::fstat(&fd).map_err(call("fstat", path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Failure::Call { call: "open".into(), path: path.to_owned(), errno: libc::EINVAL });
        }
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Lock { _file: fd }),
            Err(Errno::WOULDBLOCK) => Err(Failure::Locked),
            Err(e) => Err(call("flock", path)(e)),
        }
    }
}

/// How a namespaced mount was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Replaced {
    /// The new mount was put beneath the old one (`MOVE_MOUNT_BENEATH`,
    /// Linux 6.5), then the old one detached: the path always had a mount.
    Beneath,
    /// Before 6.5: the old mount was detached, then the new one (made and
    /// checked beforehand) attached at once.
    DetachedFirst,
}

/// Under the lock: checks that `path` is still exactly what was planned,
/// makes the new cgroup2 mount (detached, so a failure changes nothing),
/// checks it is rooted at `reference_root_id`, then attaches it; a
/// namespaced mount is replaced by putting the new one beneath it and then
/// detaching the old top. Returns what the path holds afterwards, verified,
/// and how a replaced mount was replaced.
pub fn apply(
    proc_self: BorrowedFd<'_>,
    proc_self_fd: BorrowedFd<'_>,
    path: &Path,
    action: Action,
    expected: &Observed,
    reference_root_id: u64,
) -> Result<(Observed, Option<Replaced>), Failure> {
    let _lock = Lock::take()?;
    let mut now = inspect(proc_self, path)?;
    if !expected.is_still(&now.observed) {
        return Err(Failure::Changed {
            path: path.to_owned(),
            was: Box::new(expected.state.clone()),
            now: Box::new(now.observed.state),
        });
    }
    let mount = new_cgroup2(path, reference_root_id)?;
    let mut replaced = None;
    match action {
        Action::Mount => attach(&mount, now.dirs[now.dirs.len() - 1].as_fd(), path)?,
        Action::CreateAndMount => {
            let dir = create(&mut now, path)?;
            attach(&mount, dir.as_fd(), path)?;
        }
        Action::Replace => replaced = Some(replace(&mount, &now, proc_self_fd, path)?),
        Action::Nothing | Action::Refuse => return Ok((now.observed, None)),
    }
    let after = inspect(proc_self, path)?.observed;
    let new_id = statx(mount.as_fd(), path)?.stx_mnt_id;
    match &after {
        Observed { state: PathState::Mounted { top_cgroup_id: Some(id), .. }, identity: Some(i) }
            if *id == reference_root_id && i.mount_id == new_id =>
        {
            Ok((after, replaced))
        }
        _ => Err(Failure::NotVerified {
            path: path.to_owned(),
            now: Box::new(after.state),
            reference: reference_root_id,
        }),
    }
}

/// A new cgroup2 mount, not attached anywhere yet, made in PID 1's cgroup
/// namespace: its root must be the reference root.
fn new_cgroup2(path: &Path, reference_root_id: u64) -> Result<OwnedFd, Failure> {
    let fs = rustix::mount::fsopen("cgroup2", FsOpenFlags::FSOPEN_CLOEXEC).map_err(call("fsopen cgroup2 for", path))?;
    rustix::mount::fsconfig_create(&fs).map_err(call("fsconfig(FSCONFIG_CMD_CREATE) cgroup2 for", path))?;
    let mount = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, MountAttrFlags::empty())
        .map_err(call("fsmount cgroup2 for", path))?;
    let would_be = statx(mount.as_fd(), path)?.stx_ino;
    if would_be != reference_root_id {
        return Err(Failure::WrongRoot { would_be, reference: reference_root_id });
    }
    Ok(mount)
}

fn attach(mount: &OwnedFd, dir: BorrowedFd<'_>, path: &Path) -> Result<(), Failure> {
    let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH;
    rustix::mount::move_mount(mount, "", dir, "", flags).map_err(call("move_mount", path))
}

/// Creates the missing components, each below the last one walked, and
/// returns the new mount point's directory.
fn create(now: &mut Inspected, path: &Path) -> Result<OwnedFd, Failure> {
    let mut at = now.dirs.pop().expect("/ at least");
    let mut shown = now.existing.clone();
    for name in &now.missing {
        shown.push(name);
        rustix::fs::mkdirat(&at, name.as_os_str(), Mode::from_raw_mode(0o755)).map_err(call("mkdir", &shown))?;
        let fd = open_component(at.as_fd(), name).map_err(call("open", &shown))?;
        if FileType::from_raw_mode(statx(fd.as_fd(), &shown)?.stx_mode.into()) != FileType::Directory {
            return Err(Failure::Call { call: "mkdir".into(), path: shown, errno: libc::ENOTDIR });
        }
        at = fd;
    }
    let _ = path;
    Ok(at)
}

/// Replaces the top mount at `path` by `mount`: beneath it first
/// (`MOVE_MOUNT_BENEATH`, 6.5), so the path is never without a mount, then
/// the old top is detached through its own descriptor. Before 6.5 the old
/// top goes first and the new one follows at once; the new one exists and
/// is checked by then, so only the attach itself can still fail.
fn replace(mount: &OwnedFd, now: &Inspected, proc_self_fd: BorrowedFd<'_>, path: &Path) -> Result<Replaced, Failure> {
    let top = now.dirs[now.dirs.len() - 1].as_fd();
    let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH
        | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH
        | MoveMountFlags::MOVE_MOUNT_BENEATH;
    match rustix::mount::move_mount(mount, "", top, "", flags) {
        Ok(()) => detach_top(top, proc_self_fd, path).map(|()| Replaced::Beneath),
        // The flag is unknown before 6.5 (EINVAL): the other way.
        Err(Errno::INVAL) => {
            detach_top(top, proc_self_fd, path)?;
            let parent = now.dirs[now.dirs.len() - 2].as_fd();
            let name = path.file_name().unwrap_or_default();
            rustix::mount::move_mount(mount, "", parent, name, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
                .map_err(|e| Failure::HalfDone { path: path.to_owned(), errno: e.raw_os_error() })?;
            Ok(Replaced::DetachedFirst)
        }
        Err(e) => Err(call("move_mount(MOVE_MOUNT_BENEATH)", path)(e)),
    }
}

/// Lazily unmounts the mount whose root `top` is, named through
/// `/proc/self/fd/N`: the magic link is the mount itself, whatever the path
/// now holds.
fn detach_top(top: BorrowedFd<'_>, proc_self_fd: BorrowedFd<'_>, path: &Path) -> Result<(), Failure> {
    use std::os::fd::AsRawFd;
    rustix::process::fchdir(proc_self_fd).map_err(call("chdir /proc/self/fd for", path))?;
    let r = rustix::mount::unmount(top.as_raw_fd().to_string().as_str(), UnmountFlags::DETACH);
    let _ = rustix::process::chdir("/");
    r.map_err(call("umount", path))
}
