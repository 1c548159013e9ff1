//! A walk of every cgroup below a root, one visit per cgroup.
//!
//! Each directory is opened once, relative to its parent (`openat`), and that
//! fd serves both the visitor's queries and the readdir; child cgroup ids come
//! from `d_ino`, so no `stat` is made. A cgroup removed between readdir and
//! open (ENOENT), or after open (ENOENT from queries, ENODEV from reads), is
//! expected under churn: it is counted as vanished and skipped. Any other
//! failure on one cgroup is recorded and the walk goes on; only the root's
//! failure (handled by the caller) aborts an audit.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::dir::{Dir, Type};
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// What a visitor reports about one cgroup.
pub enum Visit {
    Done,
    /// The cgroup disappeared while being read.
    Vanished,
}

/// A failure confined to one cgroup.
#[derive(Debug, Clone)]
pub struct WalkError {
    /// Path relative to the walk's root.
    pub cgroup: String,
    pub op: String,
    pub error: String,
}

#[derive(Debug, Default, Clone)]
pub struct WalkStats {
    pub scanned: u64,
    pub vanished: u64,
    pub errors: Vec<WalkError>,
}

fn is_gone(e: nix::Error) -> bool {
    matches!(e, nix::Error::ENOENT | nix::Error::ENODEV)
}

/// Walks `root` (whose relative path is `/`) depth first, pre-order.
///
/// `visit(path, cgroup_id, fd)` runs once per cgroup, before its children.
pub fn walk<F>(root: OwnedFd, root_id: u64, mut visit: F) -> WalkStats
where
    F: FnMut(&str, u64, BorrowedFd<'_>) -> Result<Visit, WalkError>,
{
    let mut stats = WalkStats::default();
    let mut path = String::new();
    descend(root, root_id, &mut path, &mut visit, &mut stats);
    stats
}

fn descend<F>(fd: OwnedFd, id: u64, path: &mut String, visit: &mut F, stats: &mut WalkStats)
where
    F: FnMut(&str, u64, BorrowedFd<'_>) -> Result<Visit, WalkError>,
{
    let shown = if path.is_empty() { "/" } else { path.as_str() };
    match visit(shown, id, fd.as_fd()) {
        Ok(Visit::Done) => stats.scanned += 1,
        Ok(Visit::Vanished) => {
            stats.vanished += 1;
            return;
        }
        Err(e) => {
            stats.scanned += 1;
            stats.errors.push(e);
        }
    }

    // Children are visited as the directory lists them, never collected: a
    // pod can make hundreds of thousands in one directory, with 255-byte
    // names. The stream owns the fd; children are opened through a copy.
    let parent = match fd.try_clone() {
        Ok(p) => p,
        Err(e) => {
            stats.errors.push(WalkError { cgroup: shown.to_owned(), op: "dup".into(), error: e.to_string() });
            return;
        }
    };
    let mut dir = match Dir::from_fd(fd) {
        Ok(d) => d,
        Err(e) => {
            stats.errors.push(WalkError { cgroup: shown.to_owned(), op: "fdopendir".into(), error: e.to_string() });
            return;
        }
    };
    let parent_len = path.len();
    for entry in dir.iter() {
        let (name, child_id) = match entry {
            Ok(e) if e.file_type() == Some(Type::Directory) => {
                let name = e.file_name();
                if name.to_bytes() == b"." || name.to_bytes() == b".." {
                    continue;
                }
                (name.to_owned(), e.ino())
            }
            Ok(_) => continue,
            Err(e) if is_gone(e) => {
                stats.vanished += 1;
                return;
            }
            Err(e) => {
                let cgroup = if parent_len == 0 { "/".to_owned() } else { path[..parent_len].to_owned() };
                stats.errors.push(WalkError { cgroup, op: "readdir".into(), error: e.to_string() });
                break;
            }
        };
        let child = openat(
            parent.as_fd(),
            name.as_c_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        );
        path.push('/');
        path.push_str(&name.to_string_lossy());
        match child {
            Ok(child) => descend(child, child_id, path, visit, stats),
            Err(e) if is_gone(e) => stats.vanished += 1,
            Err(e) => stats.errors.push(WalkError { cgroup: path.clone(), op: "open".into(), error: e.to_string() }),
        }
        path.truncate(parent_len);
    }
}
