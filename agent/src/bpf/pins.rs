//! Objects pinned in a bpffs directory (a CNI's links and programs): what
//! each one is, without following anything but the directory's own entries.

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sys::statfs::{FsType, statfs};

use super::sys::{self, CgroupLinkInfo};

/// `BPF_FS_MAGIC`.
const BPF_FS_MAGIC: FsType = FsType(0xcafe_4a11);

/// One pinned object: a program, or a link (with its program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub path: PathBuf,
    pub prog_id: u32,
    /// For a pinned cgroup link: the link as the kernel describes it.
    pub link: Option<CgroupLinkInfo>,
}

#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    #[error("{0}: not a bpffs directory (mount bpffs there, or pass the bpffs mount point)")]
    NotBpffs(PathBuf),
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
}

/// Whether `dir` lies on a bpffs mount.
pub fn is_bpffs(dir: &Path) -> bool {
    statfs(dir).is_ok_and(|fs| fs.filesystem_type() == BPF_FS_MAGIC)
}

/// The objects pinned directly in `dir`. `Ok(empty)` when `dir` does not
/// exist below a bpffs mount (nothing pinned); `NotBpffs` when `bpffs` (the
/// mount point it should be below) is not one. Symlinks and directories
/// are skipped: only the directory's own pins are read; objects that are
/// neither a program nor a link (maps) are skipped too.
pub fn pinned(bpffs: &Path, dir: &Path) -> Result<Vec<Pinned>, PinsError> {
    if !is_bpffs(bpffs) {
        return Err(PinsError::NotBpffs(bpffs.to_owned()));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(PinsError::Io { path: dir.to_owned(), error }),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { continue };
        let Ok(fd) = sys::obj_get(&c) else { continue };
        let (prog_id, link) = match sys::cgroup_link_info(fd.as_fd()) {
            Ok(Some(link)) => (link.prog_id, Some(link)),
            // A program (or another kind of link, or a map: prog_info fails).
            _ => match sys::prog_info(fd.as_fd()) {
                Ok(info) => (info.id, None),
                Err(_) => continue,
            },
        };
        out.push(Pinned { path, prog_id, link });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
