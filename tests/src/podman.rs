//! podman containers for tests that need a real runtime.

use std::process::{Command, Stdio};

use crate::spawn::{Run, run};
use crate::unique;

/// The shell line that runs `podman ARGS` here. crun refuses hybrid hosts
/// (cgroup v1 at /sys/fs/cgroup), so cgroup2 is mounted there first, inside
/// the private mount namespace `podman_command` creates. ARGS are shell words.
pub fn podman_script(args: &str) -> String {
    format!("mount -t cgroup2 none /sys/fs/cgroup && exec podman {args}")
}

/// `podman ARGS` in a private mount namespace (see `podman_script`).
pub fn podman_command(args: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &podman_script(args)]).stdin(Stdio::null());
    c
}

pub fn podman(args: &str) -> Run {
    run(podman_command(args))
}

/// A container started with `podman run -d --name NAME`, removed (with its
/// cgroup and whatever its processes held) on drop.
pub struct Container {
    pub name: String,
    pub id: String,
}

impl Container {
    /// `podman run -d --name <unique> ARGS`.
    pub fn run(tag: &str, args: &str) -> Container {
        let name = unique(tag);
        let started = podman(&format!("run -d --name {name} {args}"));
        assert_eq!(started.code, 0, "podman run: {started:?}");
        let id = started.stdout.trim().to_owned();
        assert_eq!(id.len(), 64, "{started:?}");
        Container { name, id }
    }

    pub fn logs(&self) -> String {
        podman(&format!("logs {}", self.name)).stdout
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let r = podman(&format!("rm --force --time 0 {}", self.name));
        if r.code != 0 {
            eprintln!("WARNING: podman rm {}: {}", self.name, r.stderr);
        }
    }
}

/// The flags every test container needs on these machines: no pids limit
/// and rlimits within the hard limits (podman's defaults exceed them).
pub const PODMAN_LIMITS: &str = "--pids-limit=0 --ulimit nofile=20000:20000 --ulimit nproc=4096:4096";
