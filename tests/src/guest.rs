//! What the guest suite (tests/guest/, run by `cargo xtask test` in each
//! kernel of the matrix) needs: knowing it runs in a throwaway guest, a
//! tree of cgroups at the real root, and a CNI agent shaped as production
//! runs it.
//!
//! A guest is a machine of its own: these fixtures use the real root
//! cgroup, PID 1's namespaces and real mounts (`/run/cilium/cgroupv2`),
//! which host tests must never touch. They still clean up after each test,
//! because the next test of the boot shares the kernel.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cgroup::{cgroup2_root, remove_tree};
use crate::spawn::fixture_bin;

/// The kernel a guest test runs on.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The matrix's label: `5.10`, `6.1`, `6.12`, or `6.1-arm64` and the like.
    pub label: String,
}

impl Guest {
    /// (major, minor) of the label, to say what a kernel is expected to do.
    pub fn version(&self) -> (u32, u32) {
        let release = self.label.split('-').next().unwrap_or_default();
        let mut parts = release.split('.').map(|p| p.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    }

    /// Whether the kernel accepts `source` (`fexit`, `kprobe`): what the
    /// matrix measured, which the tests hold it to. Every x86_64 kernel
    /// takes both; arm64 gained fexit on kernel functions only in 6.4
    /// (the BPF trampoline, commit efc9909fdce0), so 5.10 and 6.1 refuse it.
    pub fn accepts(&self, source: &str) -> bool {
        match source {
            "fexit" => !cfg!(target_arch = "aarch64") || self.version() >= (6, 4),
            // Its decoder knows x86_64's syscall ABI only.
            "syscalls" => cfg!(target_arch = "x86_64"),
            _ => true,
        }
    }
}

/// One fact of this platform for the README's "Supported platforms"
/// table: xtask reads `cgaudit-platform: KEY=VALUE` from each guest's
/// console (the tests run with their output shown) and writes the table.
pub fn platform(key: &str, value: &str) {
    println!("cgaudit-platform: {key}={value}");
}

/// `agent run --events SOURCE`, on a kernel that refuses it, ends at start
/// with exit 2 and a log line that names the source and the reason.
pub fn assert_refused(source: &str) {
    let out = std::process::Command::new(crate::spawn::agent_bin())
        .args(["run", "--listen", "127.0.0.1:0", "--events", source])
        .output()
        .expect("run the agent");
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "--events {source}: {log}");
    assert!(log.contains("cannot run here") && log.contains(source), "the refusal names the source: {log}");
    let why = log.lines().find(|l| l.contains("cannot run here")).unwrap_or_default();
    println!("--events {source} refused: {why}");
}

/// Panics unless this runs inside a kernel-matrix guest booted with
/// `profile` (`v2` or `v1`): these tests change the machine they run on.
pub fn require(profile: &str) -> Guest {
    let label = std::env::var("CGAUDIT_GUEST").unwrap_or_default();
    let boot = std::env::var("CGAUDIT_BOOT").unwrap_or_default();
    let init = std::fs::read_link("/proc/1/exe").unwrap_or_default();
    assert!(
        !label.is_empty() && init == Path::new("/init"),
        "the guest suite runs only as PID 1's child in a kernel-matrix guest (`cargo xtask test --kernel 6.1`): \
         it uses the real root cgroup and PID 1's namespaces"
    );
    assert_eq!(boot, profile, "a {profile} test in a {boot} boot");
    Guest { label }
}

/// Cgroups made below the real root for one test (the kubepods layout a
/// node has), removed deepest first on drop; directories that were there
/// before are left alone.
pub struct RootTree {
    pub root: PathBuf,
    made: Vec<PathBuf>,
}

impl RootTree {
    pub fn new() -> RootTree {
        RootTree { root: cgroup2_root(), made: Vec::new() }
    }

    /// At `root`: a cgroup2 mount whose top is the hierarchy root.
    pub fn at(root: &Path) -> RootTree {
        RootTree { root: root.to_owned(), made: Vec::new() }
    }

    /// Makes `rel` and any missing parent; returns its path.
    pub fn mkdir(&mut self, rel: &str) -> PathBuf {
        let mut p = self.root.clone();
        for part in rel.trim_start_matches('/').split('/') {
            p.push(part);
            if !p.exists() {
                std::fs::create_dir(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
                self.made.push(p.clone());
            }
        }
        p
    }
}

impl Default for RootTree {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RootTree {
    fn drop(&mut self) {
        for p in self.made.iter().rev() {
            remove_tree(p);
        }
    }
}

/// A CNI agent as production runs it: `fixture socket-lb-agent`, named
/// `cilium-agent`, in the container cgroup `join`, in a cgroup namespace of
/// its own when `private`, mounting cgroup2 at `mount` in PID 1's mount
/// namespace and attaching the ten socket-LB programs to its top (`attach`:
/// `links`, `multi`, `override`, `none`). Killed on drop, and its mount
/// detached; programs it attached with `BPF_PROG_ATTACH` stay (see
/// `detach_all`).
pub struct StandInCni {
    child: Child,
    pub pid: u32,
    pub mount: PathBuf,
    /// The id of the cgroup2 mount it made (none with `--use-mount`).
    mount_id: Option<i32>,
}

/// The id of the top mount at `path` in this mount namespace.
fn top_mount_id(path: &Path) -> Option<i32> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mi = agent::mounts::parse_mountinfo(text.as_bytes());
    mi.mounts.iter().rev().find(|m| m.mount_point == path).map(|m| m.mount_id)
}

impl StandInCni {
    pub fn start(mount: &str, join: &Path, private: bool, attach: &str) -> StandInCni {
        Self::start_with(mount, join, private, attach, &[])
    }

    /// With more flags of `fixture socket-lb-agent` (`--real-lb`,
    /// `--use-mount`).
    pub fn start_with(mount: &str, join: &Path, private: bool, attach: &str, extra: &[&str]) -> StandInCni {
        let mut cmd = Command::new(fixture_bin());
        cmd.args(["socket-lb-agent", mount, "--join"]).arg(join).args(["--attach", attach, "--name", "cilium-agent"]);
        cmd.args(extra);
        if private {
            cmd.arg("--private-cgroupns");
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn().expect("spawn fixture socket-lb-agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read the stand-in CNI");
        let pid = child.id();
        let mount_id = if extra.contains(&"--use-mount") { None } else { top_mount_id(Path::new(mount)) };
        let cni = StandInCni { child, pid, mount: PathBuf::from(mount), mount_id };
        assert_eq!(line.trim(), "attached 10", "the stand-in CNI did not attach");
        cni
    }
}

impl Drop for StandInCni {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its mount outlives it in PID 1's mount namespace, unless a repair
        // replaced it meanwhile.
        if self.mount_id.is_some() && top_mount_id(&self.mount) == self.mount_id {
            let _ = nix::mount::umount2(&self.mount, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}
