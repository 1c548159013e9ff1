//! Stand-in CNI agents: a process named as the real one is, with the
//! configuration a real one would have, that the audit finds in procfs.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::which;

/// A `cilium-agent` (a copy of `sleep` under that name) in a mount namespace
/// of its own, whose `/tmp/cilium/config-map` holds `config` the way a
/// ConfigMap volume does: each key a link into `..data`, itself a link to a
/// timestamped directory. Killed on drop.
pub struct CiliumAgent {
    child: Child,
    _bin: tempfile::TempDir,
    pub pid: u32,
}

impl CiliumAgent {
    /// Runs as root, with root's capabilities, as a real agent does.
    pub fn new(config: &[(&str, &str)]) -> CiliumAgent {
        Self::start(config, "", "")
    }

    /// Runs as nobody with no capabilities: anyone can name a process so.
    pub fn unprivileged(config: &[(&str, &str)]) -> CiliumAgent {
        Self::start(
            config,
            "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all",
            "",
        )
    }

    /// Started by nobody in a user namespace of its own where it is root
    /// with every capability (`unshare -Ur`): anyone can do that.
    pub fn in_user_namespace(config: &[(&str, &str)]) -> CiliumAgent {
        Self::start_as(
            config,
            "setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all unshare --user --map-root-user",
            "",
            "",
        )
    }

    /// Root, but with CAP_BPF alone: what a pod granted CAP_BPF has.
    pub fn bpf_only(config: &[(&str, &str)]) -> CiliumAgent {
        Self::start(config, "setpriv --bounding-set=-all,+bpf --inh-caps=-all", "")
    }

    /// Root with every capability, in a network namespace of its own: a
    /// pod that is not on the host's network, as every CNI agent is.
    pub fn in_own_network(config: &[(&str, &str)]) -> CiliumAgent {
        Self::start_as(config, "unshare --net", "", "")
    }

    /// Inside the sandbox node whose PID 1 is `pid1` (its PID, mount and
    /// network namespaces), as root: the node's own agent, on its network,
    /// which an audit run in that node sees running.
    pub fn in_node(pid1: u32, config: &[(&str, &str)]) -> CiliumAgent {
        let outer = format!("nsenter --target {pid1} --pid --mount --net --");
        Self::start_as(config, &outer, "", "")
    }

    /// Also puts `extra` (shell) in the config dir before starting.
    pub fn with_extra(config: &[(&str, &str)], extra: &str) -> CiliumAgent {
        Self::start(config, "", extra)
    }

    fn start(config: &[(&str, &str)], wrapper: &str, extra: &str) -> CiliumAgent {
        Self::start_as(config, "", wrapper, extra)
    }

    /// `outer` runs the whole set-up (`unshare --mount ...`), `wrapper` only
    /// the agent.
    fn start_as(config: &[(&str, &str)], outer: &str, wrapper: &str, extra: &str) -> CiliumAgent {
        // Not below /tmp, which the agent's mount namespace covers.
        let bin = tempfile::Builder::new().prefix("cgaudit-agent-").tempdir_in("/var/tmp").expect("tempdir");
        let fake = bin.path().join("cilium-agent");
        std::fs::copy(which("sleep").expect("sleep"), &fake).expect("copy sleep");
        let mut script = String::from(
            "set -e\nmount -t tmpfs cgaudit-cfg /tmp\nd=/tmp/cilium/config-map\nmkdir -p $d/..2026_11_23_00_00_00.1\n\
             ln -s ..2026_11_23_00_00_00.1 $d/..data\n",
        );
        for (k, v) in config {
            script.push_str(&format!("printf '%s\\n' '{v}' > $d/..data/{k}\nln -s ..data/{k} $d/{k}\n"));
        }
        script.push_str(extra);
        script.push_str(&format!("\necho ready\nexec {wrapper} {} infinity\n", fake.display()));
        // Reachable by whoever runs it (nobody, in a user namespace).
        std::fs::set_permissions(bin.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let mut words: Vec<&str> = outer.split_whitespace().collect();
        words.extend(["unshare", "--mount", "--propagation", "private", "sh", "-c", &script]);
        let mut child = Command::new(words[0])
            .args(&words[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "ready", "the stand-in agent did not start");
        // nsenter --pid forks: the agent is its child, in that namespace.
        let mut pid = child.id();
        let named = crate::wait_until(std::time::Duration::from_secs(5), || {
            let comm = |p: u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            if comm(pid).trim() == "nsenter" {
                let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
                if let Some(c) = children.split_whitespace().next().and_then(|c| c.parse().ok()) {
                    pid = c;
                }
            }
            comm(pid).trim() == "cilium-agent"
        });
        assert!(named, "the stand-in agent never became cilium-agent");
        CiliumAgent { child, _bin: bin, pid }
    }
}

impl Drop for CiliumAgent {
    fn drop(&mut self) {
        // The agent itself (nsenter's child, in a node's PID namespace),
        // then what started it; gone before the next test looks.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), nix::sys::signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        let gone = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
        };
        crate::wait_until(std::time::Duration::from_secs(5), || gone(self.pid));
    }
}

/// A `cilium-agent` (a copy of `fixture pause`) in the node's own mount
/// namespace, as root, whose command line says `--config-dir <dir>`: where
/// the audit reads its configuration from. Killed on drop.
pub struct CiliumAgentAt {
    child: Child,
    _bin: tempfile::TempDir,
    pub pid: u32,
}

impl CiliumAgentAt {
    pub fn new(config_dir: &std::path::Path) -> CiliumAgentAt {
        let bin = tempfile::Builder::new().prefix("cgaudit-agent-").tempdir_in("/var/tmp").expect("tempdir");
        let fake = bin.path().join("cilium-agent");
        std::fs::copy(crate::spawn::fixture_bin(), &fake).expect("copy fixture");
        let child = Command::new(&fake)
            .arg("pause")
            .arg("--config-dir")
            .arg(config_dir)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn cilium-agent");
        let pid = child.id();
        let named = crate::wait_until(std::time::Duration::from_secs(5), || {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "cilium-agent")
        });
        assert!(named, "the stand-in agent never became cilium-agent");
        CiliumAgentAt { child, _bin: bin, pid }
    }
}

impl Drop for CiliumAgentAt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process named `comm` (a copy of `fixture pause`), root in the node's
/// namespaces, that holds `fds` open (program or link descriptors, as an
/// agent holds what it loaded and attached): what proves those programs
/// its owner's. Killed on drop.
pub struct Holder {
    child: Child,
    _bin: tempfile::TempDir,
    pub pid: u32,
}

impl Holder {
    pub fn new(comm: &str, fds: &[std::os::fd::BorrowedFd<'_>]) -> Holder {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let bin = tempfile::Builder::new().prefix("cgaudit-holder-").tempdir().expect("tempdir");
        let fake = bin.path().join(comm);
        std::fs::copy(crate::spawn::fixture_bin(), &fake).expect("copy fixture");
        let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let mut cmd = Command::new(&fake);
        cmd.arg("pause").stdin(Stdio::null());
        // SAFETY: between fork and exec only fcntl, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                for fd in &raw {
                    if libc::fcntl(*fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn the holder");
        let pid = child.id();
        let named = crate::wait_until(std::time::Duration::from_secs(5), || {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        });
        assert!(named, "the holder never became {comm}");
        Holder { child, _bin: bin, pid }
    }

    /// Holds the programs of `progs`, named as Cilium's agent.
    pub fn cilium(progs: &[&crate::Prog]) -> Holder {
        let fds: Vec<_> = progs.iter().map(|p| std::os::fd::AsFd::as_fd(&p.fd)).collect();
        Holder::new("cilium-agent", &fds)
    }

    /// Holds every program of `progs`, named as Cilium's agent.
    pub fn cilium_all(progs: &[crate::Prog]) -> Holder {
        Holder::cilium(&progs.iter().collect::<Vec<_>>())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A program this test loaded that a `cilium-agent` holds too (`Holder`):
/// Cilium's, proven, wherever it is attached. Derefs to the `Prog`.
pub struct CiliumProg {
    pub prog: crate::Prog,
    _holder: Holder,
}

impl CiliumProg {
    pub fn load(name: &str, hook: &str) -> CiliumProg {
        let prog = crate::Prog::load(name, hook);
        let holder = Holder::cilium(&[&prog]);
        CiliumProg { prog, _holder: holder }
    }
}

impl std::ops::Deref for CiliumProg {
    type Target = crate::Prog;
    fn deref(&self) -> &crate::Prog {
        &self.prog
    }
}
