//! A walk of every cgroup below a root, one visit per cgroup, without
//! recursion and with a bounded number of open directories.
//!
//! Each directory is opened once, relative to its parent (`openat`), and that
//! fd serves both the visitor's queries and the readdir; child cgroup ids come
//! from `d_ino`, so no `stat` is made. A cgroup removed between readdir and
//! open (ENOENT), or after open (ENOENT from queries, ENODEV from reads), is
//! expected under churn: it is counted as vanished and skipped. Any other
//! failure on one cgroup is recorded and the walk goes on; only the root's
//! failure (handled by the caller) aborts an audit.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{Dir, FileType, Mode, OFlags};

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
    /// The call that failed (`open`, `readdir`, `query`, ...), or `walk`
    /// for a record out of order.
    pub op: &'static str,
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

/// Directory streams open at once at most. Deeper than this, the streams
/// nearest the root are closed, and reopened through `..` of their child
/// when the walk comes back to them, at the entry where they stopped: a
/// chain of cgroups as deep as a pod cares to make costs a fixed number of
/// descriptors and buffers.
const OPEN_STREAMS: usize = 64;

/// The cgroup a walk visits.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub id: u64,
    /// Its parent's id (0 for the walk's root).
    pub parent: u64,
    /// Its name (empty for the root), as the kernel holds it.
    pub name: &'a [u8],
    /// Its path below the root, shown (for messages).
    pub path: &'a str,
}

/// One directory of the current path, from the root down.
struct Frame {
    id: u64,
    /// Length of `path` up to and with this directory's name.
    path_len: usize,
    /// Its stream while open; `None` while closed to bound the descriptors.
    dir: Option<Dir>,
    /// The position after the last entry read (`d_off`), to seek to on reopening.
    resume: i64,
}

/// Walks `root` (whose relative path is `/`) depth first, pre-order,
/// without recursion: any depth costs the same stack, and at most
/// `OPEN_STREAMS` open directories.
///
/// `visit(entry, fd)` runs once per cgroup, before its children.
pub fn walk<F>(root: OwnedFd, root_id: u64, mut visit: F) -> WalkStats
where
    F: FnMut(Entry<'_>, BorrowedFd<'_>) -> Result<Visit, WalkError>,
{
    let mut stats = WalkStats::default();
    let mut path = String::new();
    let entry = Entry { id: root_id, parent: 0, name: b"", path: "/" };
    let Some(dir) = enter(root, entry, &mut visit, &mut stats) else { return stats };
    let mut stack = vec![Frame { id: root_id, path_len: 0, dir: Some(dir), resume: 0 }];
    // Frames below this index have their streams closed.
    let mut first_open = 0;
    while let Some(top) = stack.last_mut() {
        let shown = |path: &str, len: usize| if len == 0 { "/".to_owned() } else { path[..len].to_owned() };
        let dir = top.dir.as_mut().expect("the top of the path is open");
        let entry = match dir.read() {
            Some(Ok(entry)) => entry,
            end => {
                if let Some(Err(e)) = end {
                    let e = nix::Error::from_raw(e.raw_os_error());
                    if is_gone(e) {
                        stats.vanished += 1;
                    } else {
                        let cgroup = shown(&path, top.path_len);
                        stats.errors.push(WalkError { cgroup, op: "readdir", error: e.to_string() });
                    }
                }
                // Done with it: back to its parent, reopened if it was closed.
                let done = stack.pop().expect("a top");
                path.truncate(stack.last().map_or(0, |f| f.path_len));
                if let Some(parent) = stack.last_mut().filter(|p| p.dir.is_none()) {
                    match reopen(&done, parent) {
                        Ok(d) => parent.dir = Some(d),
                        Err(e) => {
                            // The parent went meanwhile (its subtree with it),
                            // or cannot be read again: the walk goes on above.
                            if is_gone(e) {
                                stats.vanished += 1;
                            } else {
                                let cgroup = shown(&path, path.len());
                                stats.errors.push(WalkError { cgroup, op: "reopen", error: e.to_string() });
                            }
                            stack.pop();
                            path.truncate(stack.last().map_or(0, |f| f.path_len));
                            unwind(&mut stack, &mut path, &mut stats);
                        }
                    }
                    first_open = first_open.min(stack.len().saturating_sub(1));
                }
                continue;
            }
        };
        top.resume = entry.offset();
        let name = entry.file_name();
        if entry.file_type() != FileType::Directory || matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let child_id = entry.ino();
        let parent_fd = dir.fd().expect("an open stream has a descriptor");
        let child =
            rustix::fs::openat(parent_fd, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty());
        path.push('/');
        path.push_str(&crate::text::shown(name.to_bytes()));
        let parent_id = top.id;
        match child {
            Ok(child) => {
                let entry = Entry { id: child_id, parent: parent_id, name: name.to_bytes(), path: &path };
                if let Some(dir) = enter(child, entry, &mut visit, &mut stats) {
                    stack.push(Frame { id: child_id, path_len: path.len(), dir: Some(dir), resume: 0 });
                    // Bound the open streams: close the ones nearest the root.
                    if stack.len() - first_open > OPEN_STREAMS {
                        stack[first_open].dir = None;
                        first_open += 1;
                    }
                    continue;
                }
            }
            Err(e) => {
                let e = nix::Error::from_raw(e.raw_os_error());
                if is_gone(e) {
                    stats.vanished += 1;
                } else {
                    stats.errors.push(WalkError { cgroup: path.clone(), op: "open", error: e.to_string() });
                }
            }
        }
        path.truncate(stack.last().map_or(0, |f| f.path_len));
    }
    stats
}

/// After the frames above were abandoned: the new top is reopened if it was
/// closed (from the root down is not possible without its child, so such
/// frames are abandoned too: their remaining entries are not walked, and
/// the walk says so).
fn unwind(stack: &mut Vec<Frame>, path: &mut String, stats: &mut WalkStats) {
    while stack.last().is_some_and(|f| f.dir.is_none()) {
        let f = stack.pop().expect("a top");
        stats.errors.push(WalkError {
            cgroup: if f.path_len == 0 { "/".to_owned() } else { path[..f.path_len.min(path.len())].to_owned() },
            op: "walk",
            error: "a cgroup below it went away while its siblings were still to be read".into(),
        });
        path.truncate(stack.last().map_or(0, |f| f.path_len));
    }
}

/// Visits one cgroup; its stream, to list its children, unless it went.
fn enter<F>(fd: OwnedFd, entry: Entry<'_>, visit: &mut F, stats: &mut WalkStats) -> Option<Dir>
where
    F: FnMut(Entry<'_>, BorrowedFd<'_>) -> Result<Visit, WalkError>,
{
    let shown = entry.path;
    match visit(entry, fd.as_fd()) {
        Ok(Visit::Done) => stats.scanned += 1,
        Ok(Visit::Vanished) => {
            stats.vanished += 1;
            return None;
        }
        Err(e) => {
            stats.scanned += 1;
            stats.errors.push(e);
        }
    }
    match Dir::new(fd) {
        Ok(d) => Some(d),
        Err(e) => {
            stats.errors.push(WalkError { cgroup: shown.to_owned(), op: "fdopendir", error: e.to_string() });
            None
        }
    }
}

/// `parent`'s stream again, through `..` of its child `done` (still open),
/// at the entry after `done`: it must be the same cgroup (cgroup
/// directories cannot be moved, so `..` of a child is its parent).
fn reopen(done: &Frame, parent: &Frame) -> Result<Dir, nix::Error> {
    let child = done.dir.as_ref().expect("a frame done with was open");
    let child_fd = child.fd().map_err(|e| nix::Error::from_raw(e.raw_os_error()))?;
    let up = rustix::fs::openat(child_fd, "..", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| nix::Error::from_raw(e.raw_os_error()))?;
    let st = rustix::fs::fstat(&up).map_err(|e| nix::Error::from_raw(e.raw_os_error()))?;
    if st.st_ino != parent.id {
        return Err(nix::Error::ENOENT);
    }
    let mut dir = Dir::new(up).map_err(|e| nix::Error::from_raw(e.raw_os_error()))?;
    dir.seek(parent.resume).map_err(|e| nix::Error::from_raw(e.raw_os_error()))?;
    Ok(dir)
}
