//! Test cgroups: the real cgroup-v2 root in our view, and subtrees made for
//! one test and removed on drop.

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::unique;

/// The mount point of the real cgroup-v2 root (top inode 1) in our view.
pub fn cgroup2_root() -> PathBuf {
    let text = fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    let mounts = agent::mounts::parse_mountinfo(text.as_bytes()).mounts;
    mounts
        .into_iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| m.mount_point)
        .find(|p| fs::metadata(p).map(|m| m.ino() == 1).unwrap_or(false))
        .expect("no cgroup2 mount whose top is the hierarchy root")
}

/// A cgroup subtree created for one test and removed, deepest first, on drop.
/// Processes still inside are killed so the removal cannot fail on them.
pub struct TestCgroup {
    pub path: PathBuf,
}

impl TestCgroup {
    /// `<cgroup2 root>/cgaudit-test-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> TestCgroup {
        let path = cgroup2_root().join(unique(tag));
        fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        TestCgroup { path }
    }

    /// Creates `rel` (and its parents) below this cgroup.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path.join(rel.trim_start_matches('/'));
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
        p
    }

    pub fn id(&self) -> u64 {
        cgroup_id(&self.path)
    }
}

pub fn cgroup_id(path: &Path) -> u64 {
    fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display())).ino()
}

pub fn open_dir(path: &Path) -> OwnedFd {
    fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())).into()
}

/// Removes `path` and every cgroup below it, deepest first, killing what
/// still runs there and waiting out children still going offline.
pub fn remove_tree(path: &Path) {
    let Ok(entries) = fs::read_dir(path) else { return };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&e.path());
        }
    }
    // A child removed a moment ago goes offline asynchronously (an RCU grace
    // period, then a workqueue); until then its parent's rmdir is EBUSY. On a
    // loaded two-core machine after heavy churn that has taken over 2 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut last = None;
    while std::time::Instant::now() < deadline {
        match fs::remove_dir(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                if let Ok(procs) = fs::read_to_string(path.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                    }
                }
                last = Some(e);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    // `cargo xtask test` fails the run on any cgroup left behind.
    eprintln!("WARNING: could not remove test cgroup {}: {last:?}", path.display());
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        remove_tree(&self.path);
    }
}

/// A chain of cgroups `depth` deep below `parent`, each named `name`: made
/// and removed through directory descriptors, since its paths outgrow
/// PATH_MAX. Removed deepest first on drop (through `..`, two descriptors
/// at a time), before the test's own cgroup.
pub struct Chain {
    parent: PathBuf,
    name: String,
    depth: usize,
}

fn mkdirat_or_open(dir: &OwnedFd, name: &str) -> OwnedFd {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => panic!("mkdirat {name}: {e}"),
    }
    rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .unwrap_or_else(|e| panic!("openat {name}: {e}"))
}

impl Chain {
    pub fn make(parent: &Path, name: &str, depth: usize) -> Chain {
        let mut at = open_dir(parent);
        for _ in 0..depth {
            at = mkdirat_or_open(&at, name);
        }
        Chain { parent: parent.to_owned(), name: name.to_owned(), depth }
    }

    /// The deepest cgroup, open.
    pub fn bottom(&self) -> OwnedFd {
        let mut at = open_dir(&self.parent);
        for _ in 0..self.depth {
            at = mkdirat_or_open(&at, &self.name);
        }
        at
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let mut at = self.bottom();
        for level in (0..self.depth).rev() {
            let up = match rustix::fs::openat(
                &at,
                "..",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(up) => up,
                Err(e) => {
                    eprintln!("WARNING: chain below {} at level {level}: {e}", self.parent.display());
                    return;
                }
            };
            drop(at);
            // A child removed a moment ago may keep its parent busy briefly.
            let mut tries = 0;
            while let Err(e) = rustix::fs::unlinkat(&up, self.name.as_str(), AtFlags::REMOVEDIR) {
                tries += 1;
                if e == rustix::io::Errno::NOENT || tries > 600 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            at = up;
        }
    }
}
