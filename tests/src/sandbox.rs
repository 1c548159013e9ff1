//! Sandbox "nodes": a PID and mount namespace whose PID 1 is ours.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::spawn::{Run, agent_bin, run};

/// A stand-in node: a PID namespace whose PID 1 is a shell of ours, with its
/// own mount namespace (private propagation) and `/proc`. Its PID 1 is what a
/// hostPID DaemonSet pod sees as the node's init, and `/proc/1/root`,
/// `/proc/1/ns/*` are open to us, unlike the real PID 1 on these machines.
pub struct Sandbox {
    child: Child,
    /// Host pid of the sandbox's PID 1.
    pub pid1: u32,
}

impl Sandbox {
    /// Starts the sandbox; `setup` runs in its PID 1 before it idles, and
    /// the sandbox is ready once `setup` has finished.
    pub fn new(setup: &str) -> Sandbox {
        Self::with_init(setup, "sleep infinity")
    }

    /// Like `new`, with PID 1 idling as `init` (e.g. under another uid).
    pub fn with_init(setup: &str, init: &str) -> Sandbox {
        Self::spawn(setup, init, false)
    }

    /// Like `new`, in a network namespace of its own too (its loopback up):
    /// a node whose network is not this machine's, where pods' veths and
    /// their programs can be made and go with it.
    pub fn with_network(setup: &str) -> Sandbox {
        Self::spawn(&format!("ip link set lo up\n{setup}"), "sleep infinity", true)
    }

    /// Like `new`, in the network namespace at `netns` (one the test made).
    pub fn in_netns(netns: &Path, setup: &str) -> Sandbox {
        Self::spawn_with(
            Command::new("nsenter").arg(format!("--net={}", netns.display())).arg("--").arg("unshare"),
            setup,
            "sleep infinity",
            false,
        )
    }

    fn spawn(setup: &str, init: &str, own_network: bool) -> Sandbox {
        Self::spawn_with(&mut Command::new("unshare"), setup, init, own_network)
    }

    fn spawn_with(unshare: &mut Command, setup: &str, init: &str, own_network: bool) -> Sandbox {
        let script = format!("set -e\n{setup}\necho ready\nexec {init}\n");
        let net: &[&str] = if own_network { &["--net"] } else { &[] };
        let mut child = unshare
            .args(["--pid", "--fork", "--mount", "--propagation", "private", "--mount-proc"])
            .args(net)
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read sandbox output");
        let pid1 = fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()));
        let mut sb = Sandbox { child, pid1: pid1.unwrap_or(0) };
        if line.trim() != "ready" || sb.pid1 == 0 {
            let status = sb.child.wait();
            panic!("sandbox setup failed ({status:?}): {setup}");
        }
        sb
    }

    /// A command run inside the sandbox's PID and mount namespaces.
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        command_in(self.pid1, program, args)
    }

    /// A command run inside the sandbox's PID, mount and network
    /// namespaces: a hostNetwork process of the node.
    pub fn command_on_network(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("--target").arg(self.pid1.to_string()).args(["--pid", "--mount", "--net", "--"]).arg(program).args(args);
        c.env("CGAUDIT_NESTED_NODE", "true");
        c
    }

    /// `agent <args>` as a hostPID pod on this "node" would run it.
    pub fn agent(&self, args: &[&str]) -> Run {
        run(self.command(&agent_bin(), args))
    }

    /// A path of the sandbox's mount namespace, reachable from ours.
    pub fn path(&self, p: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.pid1, p))
    }
}

/// A command run inside the PID and mount namespaces of the sandbox whose
/// PID 1 is `pid1` (from a thread that does not hold the `Sandbox`). The
/// agent is told the sandbox is a node (`--nested-node`, by its variable):
/// its PID namespace is not the initial one and nothing of a Kubernetes
/// node runs in it, which the agent otherwise takes for a pod without
/// hostPID (tests/tests/suite/deploy.rs runs that case in a real container).
pub fn command_in(pid1: u32, program: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("nsenter");
    c.arg("--target").arg(pid1.to_string()).args(["--pid", "--mount", "--"]).arg(program).args(args);
    c.env("CGAUDIT_NESTED_NODE", "true");
    c
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Killing PID 1 of a PID namespace kills everything in it; the mount
        // namespace and its mounts go with the last process.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid1 as i32), nix::sys::signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
