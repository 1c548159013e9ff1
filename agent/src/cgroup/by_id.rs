//! A cgroup reopened by its id, so that what is acted on is the cgroup an
//! audit saw, not whatever holds its path now (a service restarted, a pod
//! made again, a name that did not survive lossy UTF-8).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open};
use nix::sys::stat::{Mode, fstat};

#[derive(Debug, thiserror::Error)]
pub enum ReopenError {
    #[error("cgroup id {id} ({}) no longer exists", path.display())]
    Gone { id: u64, path: PathBuf },
    #[error("cgroup id {id} no longer exists at {} (cgroup id {now} is there now)", path.display())]
    Replaced { id: u64, now: u64, path: PathBuf },
    #[error("open {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
}

/// The cgroup with id `id` in the hierarchy whose root is open at `root`
/// (mounted at `root_path`): by file handle, else (without
/// CAP_DAC_READ_SEARCH) its path `rel` opened without following a link and
/// kept only if its inode is `id`.
pub fn reopen(root: BorrowedFd<'_>, root_path: &Path, rel: &str, id: u64) -> Result<OwnedFd, ReopenError> {
    let path = root_path.join(rel.trim_start_matches('/'));
    match crate::os::open_cgroup_by_id(root, id) {
        Ok(fd) => return Ok(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ESTALE | libc::ENOENT)) => {
            return Err(ReopenError::Gone { id, path });
        }
        Err(_) => {}
    }
    let fd = open(&path, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| match e {
            nix::Error::ENOENT => ReopenError::Gone { id, path: path.clone() },
            e => ReopenError::Io { path: path.clone(), error: e.into() },
        })?;
    let now = fstat(&fd).map_err(|e| ReopenError::Io { path: path.clone(), error: e.into() })?.st_ino;
    if now != id {
        return Err(ReopenError::Replaced { id, now, path });
    }
    Ok(fd)
}
