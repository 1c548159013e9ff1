//! The cgroup v2 hierarchy: which directory is the root to audit, the two
//! walks of every cgroup below it (`walk`: syscalls from userspace; `iter`:
//! one in-kernel pass of an iter/cgroup program), and the node model they
//! both fill (`tree`).

pub mod by_id;
pub(crate) mod iter;
pub mod root;
pub mod tree;
pub mod walk;

pub use root::{AuditRoot, RootError, RootKind};

/// The number of live cgroups at and below the cgroup open at `dir`, from
/// its `cgroup.stat` (`nr_descendants`, plus itself).
pub fn count(dir: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    use std::io::Read;
    let fd = nix::fcntl::openat(
        dir,
        "cgroup.stat",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text).ok()?;
    let n = text.lines().find_map(|l| l.strip_prefix("nr_descendants "))?.trim().parse::<u64>().ok()?;
    Some(n + 1)
}
