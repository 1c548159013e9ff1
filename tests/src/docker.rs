//! A real dockerd (Debian's `docker.io`), running containers the way
//! cri-dockerd runs a kubelet's pods.
//!
//! dockerd runs as PID 1's child in a `Sandbox` node: its own PID and mount
//! namespaces, `/run` on tmpfs (its data root, exec root, socket and the
//! containerd it starts live there and vanish with the namespace),
//! `/etc/docker` on tmpfs (its `daemon.json`: the data root is not the
//! default, so the agent must read it there to find the containers' labels),
//! and `/sys/fs/cgroup` a cgroup2 mount as on a pure cgroup-v2 node, where
//! Docker gives every container a private cgroup namespace by default (the
//! seed's cause). No bridge, no iptables, no IP forwarding: nothing of the
//! host's network is touched. Containers go in the kubelet's cgroupfs layout
//! below a `TestCgroup` (`--cgroup-parent`), named and labelled as
//! cri-dockerd names and labels them. On drop, containers are removed, then
//! the sandbox is killed (dockerd, containerd, shims and containers with it)
//! and the cgroups removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgroup::TestCgroup;
use crate::cri::{IMAGE, image_archive, static_fixture};
use crate::kubepods::cgroupfs_pod;
use crate::sandbox::Sandbox;
use crate::spawn::{Run, run};

/// Where dockerd keeps its state, in the sandbox (not `/var/lib/docker`).
pub const DATA_ROOT: &str = "/run/docker-data";

pub struct Dockerd {
    names: Vec<String>,
    pub node: Sandbox,
    /// Parent of every pod's cgroup (`<this>/kubepods/<qos>/pod<uid>`).
    pub cgroup: TestCgroup,
    dir: tempfile::TempDir,
}

/// A container as cri-dockerd runs one.
pub struct PodContainer<'a> {
    pub namespace: &'a str,
    pub pod: &'a str,
    pub uid: &'a str,
    pub container: &'a str,
    pub qos: &'a str,
    /// `docker run` flags before the image (`--privileged`, `--network host`).
    pub flags: &'a [&'a str],
    /// The fixture's arguments (`pause`, `socket-lb-agent DIR`).
    pub args: &'a [&'a str],
}

impl Dockerd {
    pub fn start() -> Dockerd {
        let archive = image_archive();
        let dir = tempfile::Builder::new().prefix("cgaudit-test-docker-").tempdir().expect("tempdir");
        // runc through `fixture runc`, as for containerd: these hosts'
        // cgroup v2 has no cpu controller.
        let runc = dir.path().join("runc");
        fs::write(&runc, format!("#!/bin/sh\nexec {} runc \"$@\"\n", static_fixture().display())).expect("write runc");
        fs::set_permissions(&runc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod runc");
        let config = serde_json::json!({
            "data-root": DATA_ROOT,
            "exec-root": "/run/docker-exec",
            "pidfile": "/run/docker.pid",
            "hosts": ["unix:///run/docker.sock"],
            "exec-opts": ["native.cgroupdriver=cgroupfs"],
            "storage-driver": "vfs",
            "bridge": "none",
            "iptables": false,
            "ip6tables": false,
            "ip-forward": false,
            "ip-masq": false,
            "userland-proxy": false,
            "runtimes": {"cgaudit-runc": {"path": runc}},
            "default-runtime": "cgaudit-runc",
        });
        let log = dir.path().join("dockerd.log");
        let cgroup = TestCgroup::new("docker");
        let setup = format!(
            "mount -t tmpfs tmpfs /run\nmount -t tmpfs tmpfs /etc/docker\nmount -t cgroup2 none /sys/fs/cgroup\n\
             cat > /etc/docker/daemon.json <<'EOF'\n{config}\nEOF\n\
             dockerd --label cgaudit.test={dir} >{log} 2>&1 &",
            log = log.display(),
            // Named so that `cargo xtask test` can tell a dockerd left behind.
            dir = dir.path().display(),
        );
        let node = Sandbox::new(&setup);
        let d = Dockerd { names: Vec::new(), node, cgroup, dir };
        let up = crate::wait_until(Duration::from_secs(60), || d.docker(&["version"]).code == 0);
        assert!(up, "dockerd never answered: {}", d.log());
        let loaded = d.docker(&["load", "--input", archive.to_str().unwrap()]);
        assert_eq!(loaded.code, 0, "docker load: {loaded:?}\n{}", d.log());
        d
    }

    /// `docker ARGS` against this dockerd (the client of the same package).
    pub fn docker(&self, args: &[&str]) -> Run {
        let mut c = self.node.command(Path::new("/usr/bin/docker"), &["--host", "unix:///run/docker.sock"]);
        c.args(args);
        run(c)
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
    }

    /// The cgroup path the agent audits this node's pods under, as the
    /// sandbox sees it (cgroup2 at /sys/fs/cgroup).
    pub fn root_in_node(&self) -> PathBuf {
        let rel = self.cgroup.path.strip_prefix(crate::cgroup::cgroup2_root()).expect("test cgroup below the root");
        Path::new("/sys/fs/cgroup").join(rel)
    }

    /// Runs one container of a pod as cri-dockerd does: named
    /// `k8s_<container>_<pod>_<namespace>_<uid>_0`, with the
    /// `io.kubernetes.*` labels, in the pod's cgroup. Returns its id.
    pub fn run(&mut self, c: &PodContainer<'_>) -> String {
        let name = format!("k8s_{}_{}_{}_{}_0", c.container, c.pod, c.namespace, c.uid);
        let rel = self.cgroup.path.strip_prefix(crate::cgroup::cgroup2_root()).expect("test cgroup below the root");
        let parent = format!("/{}{}", rel.display(), cgroupfs_pod(c.qos, c.uid));
        let labels = [
            format!("io.kubernetes.pod.namespace={}", c.namespace),
            format!("io.kubernetes.pod.name={}", c.pod),
            format!("io.kubernetes.pod.uid={}", c.uid),
            format!("io.kubernetes.container.name={}", c.container),
            "io.kubernetes.docker.type=container".to_owned(),
        ];
        let mut args: Vec<&str> = vec!["run", "--detach", "--name", &name, "--cgroup-parent", &parent];
        for l in &labels {
            args.extend(["--label", l]);
        }
        args.extend(c.flags);
        args.push(IMAGE);
        args.extend(c.args);
        let started = self.docker(&args);
        assert_eq!(started.code, 0, "docker run: {started:?}\n{}", self.log());
        let id = started.stdout.trim().to_owned();
        assert_eq!(id.len(), 64, "{started:?}");
        self.names.push(name);
        id
    }

    pub fn logs(&self, id: &str) -> String {
        let r = self.docker(&["logs", id]);
        format!("{}{}", r.stdout, r.stderr)
    }

    /// The container's main process, as the sandbox numbers it.
    pub fn pid(&self, id: &str) -> u32 {
        let r = self.docker(&["inspect", "--format", "{{.State.Pid}}", id]);
        r.stdout.trim().parse().unwrap_or_else(|_| panic!("docker inspect: {r:?}"))
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        for name in std::mem::take(&mut self.names) {
            let r = self.docker(&["rm", "--force", &name]);
            if r.code != 0 {
                eprintln!("WARNING: docker rm {name}: {r:?}");
            }
        }
        // Then `node` (killing dockerd, containerd, shims and every
        // container) and `cgroup` drop, in that order.
    }
}
