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

/// A memory cgroup of its own with a limit, for a process the test starts
/// through `command` (a DaemonSet's `resources.limits.memory`): cgroup v1's
/// memory controller where it is mounted, else cgroup v2's. Processes left
/// in it are killed and it is removed on drop.
pub struct MemoryLimit {
    path: PathBuf,
    v1: bool,
}

impl MemoryLimit {
    pub fn new(tag: &str, bytes: u64) -> MemoryLimit {
        let v1_root = Path::new("/sys/fs/cgroup/memory");
        let (path, v1) = if v1_root.join("memory.limit_in_bytes").exists() {
            let ours = fs::read_to_string("/proc/self/cgroup")
                .ok()
                .and_then(|t| t.lines().find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_owned())))
                .unwrap_or_else(|| "/".into());
            (v1_root.join(ours.trim_start_matches('/')).join(unique(tag)), true)
        } else {
            let root = cgroup2_root();
            let controllers = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "memory") {
                fs::write(root.join("cgroup.subtree_control"), "+memory")
                    .unwrap_or_else(|e| panic!("enable the memory controller at {}: {e}", root.display()));
            }
            (root.join(unique(tag)), false)
        };
        fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        let file = if v1 { "memory.limit_in_bytes" } else { "memory.max" };
        fs::write(path.join(file), bytes.to_string()).unwrap_or_else(|e| panic!("{}/{file}: {e}", path.display()));
        MemoryLimit { path, v1 }
    }

    /// `program`, started inside the limit.
    pub fn command(&self, program: &Path) -> std::process::Command {
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(r#"echo $$ > "$0" && exec "$@""#).arg(self.path.join("cgroup.procs")).arg(program);
        c
    }

    /// Processes the kernel killed for going over the limit.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v1 { "memory.oom_control" } else { "memory.events" };
        let text = fs::read_to_string(self.path.join(file)).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }

    /// The most memory the processes in it held at once (v1; v2 from 5.19).
    pub fn peak(&self) -> Option<u64> {
        let file = if self.v1 { "memory.max_usage_in_bytes" } else { "memory.peak" };
        fs::read_to_string(self.path.join(file)).ok()?.trim().parse().ok()
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        for _ in 0..100 {
            let procs = fs::read_to_string(self.path.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                break;
            }
            for pid in procs.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Err(e) = fs::remove_dir(&self.path) {
            eprintln!("WARNING: rmdir {}: {e}", self.path.display());
        }
    }
}

/// A process of the test's own, moved into a cgroup by descriptor (its path
/// may outgrow PATH_MAX), killed on drop.
pub struct Resident(std::process::Child);

impl Resident {
    pub fn into(cgroup: &std::os::fd::OwnedFd) -> Resident {
        // The fixture's pause (the guests have no sleep).
        let child = std::process::Command::new(crate::spawn::fixture_bin()).arg("pause").spawn().expect("spawn pause");
        let procs = rustix::fs::openat(
            cgroup,
            "cgroup.procs",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .expect("open cgroup.procs");
        let r = Resident(child);
        std::io::Write::write_all(&mut std::fs::File::from(procs), r.0.id().to_string().as_bytes())
            .expect("move into the chain");
        r
    }
}

impl Drop for Resident {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 28, H1's attack: below a fresh test cgroup, a chain `depth` deep of
/// 255-byte names in a pod's container (systemd layout), with a process and
/// a socket-LB program (`cil_sock4_connect`) at its bottom. Fields drop in
/// order: the process leaves, the program is detached, the chain and the
/// test cgroup are removed.
pub struct DeepPodChain {
    _resident: Resident,
    _attached: crate::bpf::Attached,
    pub prog: crate::bpf::Prog,
    _chain: Chain,
    pub t: TestCgroup,
}

impl DeepPodChain {
    pub fn make(tag: &str, depth: usize) -> DeepPodChain {
        use crate::kubepods::{OTHER_CONTAINER, OTHER_POD_UID, systemd_container};
        let t = TestCgroup::new(tag);
        let ctr = t.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
        let chain = Chain::make(&ctr, &"n".repeat(255), depth);
        let bottom = chain.bottom();
        let prog = crate::bpf::Prog::load("cil_sock4_connect", "connect4");
        let attached = crate::bpf::Attached::new_fd(bottom.try_clone().expect("dup"), &prog, crate::bpf::ALLOW_MULTI);
        let resident = Resident::into(&bottom);
        DeepPodChain { _resident: resident, _attached: attached, prog, _chain: chain, t }
    }
}

/// Issue 36, H3's attack: a pod making and removing a cgroup at the bottom
/// of a chain `depth` deep of 255-byte names, as fast as it can, on a
/// thread of its own until stopped (below a fresh test cgroup, `t`).
pub struct DeepChurn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
    _chain: Chain,
    pub t: TestCgroup,
}

impl DeepChurn {
    pub fn start(tag: &str, depth: usize) -> DeepChurn {
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = TestCgroup::new(tag);
        let chain = Chain::make(&t.path, &"n".repeat(255), depth);
        let bottom = chain.bottom();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut pairs = 0;
            while !flag.load(Ordering::Relaxed) {
                if rustix::fs::mkdirat(&bottom, "churn", rustix::fs::Mode::from_raw_mode(0o755)).is_ok() {
                    let _ = rustix::fs::unlinkat(&bottom, "churn", rustix::fs::AtFlags::REMOVEDIR);
                    pairs += 1;
                }
            }
            pairs
        });
        DeepChurn { stop, thread: Some(thread), _chain: chain, t }
    }

    /// Stops the churn: the pairs it made.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map(|t| t.join().unwrap_or(0)).unwrap_or(0)
    }
}

impl Drop for DeepChurn {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Another pod's containers coming and going: mkdir+rmdir pairs of a
/// cgroup below `parent` for `window`. How many it made, the median and
/// the 99th percentile of a pair.
pub struct Latency {
    pub pairs: usize,
    pub median: Duration,
    pub p99: Duration,
}

pub fn mkdir_latency(parent: &Path, window: Duration) -> Latency {
    let start = std::time::Instant::now();
    let mut took = Vec::new();
    while start.elapsed() < window {
        let d = parent.join(format!("victim{}", took.len()));
        let pair = std::time::Instant::now();
        fs::create_dir(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
        fs::remove_dir(&d).unwrap_or_else(|e| panic!("rmdir {}: {e}", d.display()));
        took.push(pair.elapsed());
    }
    took.sort();
    let n = took.len();
    Latency { pairs: n, median: took[n / 2], p99: took[(n * 99 / 100).min(n - 1)] }
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} pairs, median {:?}, p99 {:?}", self.pairs, self.median, self.p99)
    }
}
