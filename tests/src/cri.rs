//! A real containerd with its CRI plugin, driven as the kubelet drives it.
//!
//! containerd (Debian's, with runc) runs as PID 1's child in a `Sandbox`
//! node: its own PID and mount namespaces, `/run` and `/var/log` on tmpfs
//! (its state, root, socket and the pods' logs live there and vanish with
//! the namespace), `/sys/fs/cgroup` a cgroup2 mount as on a pure cgroup-v2
//! node, so runc installs its device filters as BPF programs and every
//! non-privileged CRI container gets a private cgroup namespace. Pods are
//! created in the kubelet's cgroupfs layout below a `TestCgroup`. On drop,
//! pods are stopped and removed through the CRI, then the sandbox is killed
//! (containerd, shims and containers with it) and the cgroups removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::cgroup::TestCgroup;
use crate::podman::podman;
use crate::sandbox::Sandbox;
use crate::spawn::{Run, run};

/// The image every pod runs: FROM scratch with the static `fixture` binary
/// as its entrypoint (`fixture pause` is the sandbox's pause process).
pub const IMAGE: &str = "localhost/cgaudit-cri-fixture:1";

/// The kubelet's QoS cgroup every test pod goes in.
const QOS: &str = "burstable";

/// A pod, as `RunPodSandbox` made it.
#[derive(Debug, Clone)]
pub struct Pod {
    pub id: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    config: PodSandboxConfig,
}

/// What a container of a pod is given.
#[derive(Debug, Clone, Default)]
pub struct Spec<'a> {
    pub name: &'a str,
    /// The image's entrypoint unless given: `/fixture`, or `/cilium-agent`
    /// (the same binary, named as the CNI agent is).
    pub command: Option<&'a str>,
    /// Arguments to the fixture binary (`["pause"]`, `["socket-lb-agent", DIR]`).
    pub args: &'a [&'a str],
    /// Capabilities added (as `SYS_ADMIN`), the container staying
    /// non-privileged: the cgroup namespace CRI gives it is private.
    pub caps: &'a [&'a str],
}

/// containerd in its own node, with a CRI client.
pub struct Containerd {
    client: RuntimeServiceClient<Channel>,
    rt: tokio::runtime::Runtime,
    pods: Vec<String>,
    pub node: Sandbox,
    /// Parent of every pod's cgroup (`<this>/kubepods/burstable/pod<uid>`).
    pub cgroup: TestCgroup,
    /// For the config and the image archive.
    dir: tempfile::TempDir,
    /// Pods get a network of their own from the CNI plugin
    /// (`start_with_pod_network`); else the node's.
    pod_network: bool,
}

/// The suite's CNI configuration: Debian's containernetworking-plugins,
/// `ptp` (a veth pair per pod, the host side `veth<hex>` in the node's
/// namespace, routes, no NAT) with `host-local` addresses, kept in the
/// node's tmpfs `/run`.
pub const CNI_CONFLIST: &str = r#"{"cniVersion": "1.0.0", "name": "cgaudit-pods", "plugins": [{"type": "ptp", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.99.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "/run/cni/ipam"}}]}"#;

/// The CNI plugins that configuration runs (and containerd's loopback).
pub const CNI_PLUGINS: [&str; 3] = ["/usr/lib/cni/ptp", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"];

/// The static fixture binary the image is built from (`cargo xtask test`
/// builds it and says where).
pub fn static_fixture() -> PathBuf {
    let p = std::env::var_os("CGAUDIT_FIXTURE_STATIC").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/x86_64-unknown-linux-musl/dist/fixture")
    });
    assert!(p.is_file(), "static fixture missing at {}: `cargo xtask test` builds it", p.display());
    p
}

/// The image as a docker-archive, built once per test binary with podman.
pub fn image_archive() -> &'static Path {
    static ARCHIVE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, tar) = ARCHIVE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::copy(static_fixture(), dir.path().join("fixture")).expect("copy the static fixture");
        fs::write(
            dir.path().join("Containerfile"),
            "FROM scratch\nCOPY fixture /fixture\nCOPY fixture /cilium-agent\nENTRYPOINT [\"/fixture\"]\nCMD [\"pause\"]\n",
        )
        .expect("write Containerfile");
        // Built under its final name (docker-archive keeps the tag), and
        // removed from podman's store once saved.
        let tag = IMAGE;
        let built = podman(&format!("build --quiet --tag {tag} {}", dir.path().display()));
        assert_eq!(built.code, 0, "podman build: {built:?}");
        let tar = dir.path().join("image.tar");
        let saved = podman(&format!("save --quiet --format docker-archive --output {} {tag}", tar.display()));
        let _ = podman(&format!("rmi --force {tag}"));
        assert_eq!(saved.code, 0, "podman save: {saved:?}");
        (dir, tar)
    });
    tar
}

impl Containerd {
    /// Starts containerd in a new sandbox node and imports the test image.
    /// Pods share the node's network (no CNI needed).
    pub fn start() -> Containerd {
        Self::start_on(false)
    }

    /// Like `start`, on a node with a network namespace of its own whose
    /// pods get theirs from a real CNI plugin (`CNI_CONFLIST`), as the
    /// kubelet's CNI configuration gives them: `RunPodSandbox` makes the
    /// pod's namespace and its veth pair. The veths and routes go with the
    /// node's namespace.
    pub fn start_with_pod_network() -> Containerd {
        Self::start_on(true)
    }

    fn start_on(pod_network: bool) -> Containerd {
        let archive = image_archive();
        // Named so that `cargo xtask test` can tell a containerd left behind.
        let dir = tempfile::Builder::new().prefix("cgaudit-test-cri-").tempdir().expect("tempdir");
        let config = dir.path().join("config.toml");
        // runc through `fixture runc` (see there): on hosts whose cgroup v2
        // lacks the cpu controller, without the sandbox's CPU weight.
        let runc = dir.path().join("runc");
        fs::write(&runc, format!("#!/bin/sh\nexec {} runc \"$@\"\n", static_fixture().display())).expect("write runc");
        fs::set_permissions(&runc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod runc");
        fs::write(
            &config,
            format!("version = 2\n\
             root = \"/run/containerd-root\"\n\
             state = \"/run/containerd\"\n\
             [grpc]\n  address = \"/run/containerd/containerd.sock\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"localhost/cgaudit-cri-fixture:1\"\n\
             restrict_oom_score_adj = true\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"native\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  BinaryName = \"{runc}\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/run/cni/bin\"\n  conf_dir = \"/run/cni/net.d\"\n",
                runc = runc.display()
            ),
        )
        .expect("write containerd config");
        // restrict_oom_score_adj: these machines run without CAP_SYS_RESOURCE,
        // so runc could not lower a pause container's oom_score_adj to -998.
        let log = dir.path().join("containerd.log");
        let cgroup = TestCgroup::new("cri");
        // containerd's own processes stay out of the audited tree's pods.
        let cni = if pod_network {
            format!(
                "mkdir -p /run/cni/bin /run/cni/net.d /run/cni/ipam\nln -s {} /run/cni/bin/\n\
                 printf '%s' '{CNI_CONFLIST}' > /run/cni/net.d/10-cgaudit-pods.conflist\n",
                CNI_PLUGINS.join(" ")
            )
        } else {
            String::new()
        };
        let setup = format!(
            "mount -t tmpfs tmpfs /run\nmount -t tmpfs tmpfs /var/log\nmount -t cgroup2 none /sys/fs/cgroup\n\
             mount -t bpf bpf /sys/fs/bpf\n\
             mkdir -p /var/log/pods /var/log/containers\n{cni}\
             containerd --config {config} >{log} 2>&1 &",
            config = config.display(),
            log = log.display(),
        );
        let node = if pod_network { Sandbox::with_network(&setup) } else { Sandbox::new(&setup) };
        let socket = PathBuf::from(format!("/proc/{}/root/run/containerd/containerd.sock", node.pid1));
        let up = crate::wait_until(Duration::from_secs(30), || socket.exists());
        assert!(up, "containerd never opened its socket: {}", fs::read_to_string(&log).unwrap_or_default());
        let ctr = |args: &[&str]| -> Run {
            let mut c = node.command(Path::new("/usr/bin/ctr"), &["--address", "/run/containerd/containerd.sock"]);
            c.args(args);
            run(c)
        };
        let imported = ctr(&["--namespace", "k8s.io", "images", "import", archive.to_str().unwrap()]);
        assert_eq!(imported.code, 0, "ctr images import: {imported:?}");
        let images = ctr(&["--namespace", "k8s.io", "images", "list", "--quiet"]);
        assert!(images.stdout.lines().any(|l| l == IMAGE), "{IMAGE} not imported: {images:?}");

        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
        let client = rt.block_on(async {
            let channel = Endpoint::try_from("http://[::]:0")
                .expect("endpoint")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let socket = socket.clone();
                    async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
                }))
                .await
                .expect("connect to containerd's CRI socket");
            RuntimeServiceClient::new(channel)
        });
        Containerd { client, rt, pods: Vec::new(), node, cgroup, dir, pod_network }
    }

    /// containerd's log, for failure messages.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// The cgroup path the agent audits this node's pods under.
    pub fn root(&self) -> &Path {
        &self.cgroup.path
    }

    /// `RunPodSandbox` as the kubelet sends it: metadata, the cgroupfs
    /// layout's `cgroup_parent`, the pod's network (its own from the CNI on
    /// a node started with pod networking, else the node's) and the pod's
    /// log directory, which the kubelet creates first.
    pub fn run_pod(&mut self, namespace: &str, name: &str) -> Pod {
        let own = self.pod_network;
        self.run_pod_on(namespace, name, own)
    }

    /// A `hostNetwork: true` pod: the node's network, whatever the node.
    pub fn run_host_network_pod(&mut self, namespace: &str, name: &str) -> Pod {
        self.run_pod_on(namespace, name, false)
    }

    fn run_pod_on(&mut self, namespace: &str, name: &str, own_network: bool) -> Pod {
        static PODS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = PODS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let uid = format!("{:08x}-{:04x}-4000-8000-{:012x}", std::process::id(), n & 0xffff, nanos());
        let log_dir = format!("/var/log/pods/{namespace}_{name}_{uid}");
        fs::create_dir_all(self.in_node(&log_dir)).expect("mkdir the pod's log directory");
        let rel = self.cgroup.path.strip_prefix(crate::cgroup::cgroup2_root()).expect("test cgroup below the root");
        let config = PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.into(),
                uid: uid.clone(),
                namespace: namespace.into(),
                attempt: 0,
            }),
            // The node's hostname, as the kubelet leaves it.
            log_directory: log_dir,
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: format!("/{}/kubepods/{QOS}/pod{uid}", rel.display()),
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(NamespaceOption {
                        network: if own_network { NamespaceMode::Pod } else { NamespaceMode::Node } as i32,
                        pid: NamespaceMode::Container as i32,
                        ipc: NamespaceMode::Pod as i32,
                        ..Default::default()
                    }),
                    seccomp: unconfined(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let request = RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() };
        let mut client = self.client.clone();
        let id = self
            .rt
            .block_on(client.run_pod_sandbox(request))
            .unwrap_or_else(|e| panic!("RunPodSandbox {namespace}/{name}: {e}\n{}", self.log()))
            .into_inner()
            .pod_sandbox_id;
        self.pods.push(id.clone());
        Pod { id, namespace: namespace.into(), name: name.into(), uid, config }
    }

    /// `CreateContainer` + `StartContainer`; the container's id.
    pub fn run_container(&mut self, pod: &Pod, spec: &Spec<'_>) -> String {
        let log_dir = self.in_node(&pod.config.log_directory).join(spec.name);
        fs::create_dir_all(&log_dir).expect("mkdir the container's log directory");
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata { name: spec.name.into(), attempt: 0 }),
            image: Some(ImageSpec { image: IMAGE.into(), ..Default::default() }),
            command: spec.command.map(|c| vec![c.to_owned()]).unwrap_or_default(),
            args: spec.args.iter().map(|a| a.to_string()).collect(),
            log_path: format!("{}/0.log", spec.name),
            linux: Some(LinuxContainerConfig {
                security_context: Some(LinuxContainerSecurityContext {
                    capabilities: Some(Capability {
                        add_capabilities: spec.caps.iter().map(|c| c.to_string()).collect(),
                        ..Default::default()
                    }),
                    namespace_options: pod
                        .config
                        .linux
                        .as_ref()
                        .and_then(|l| l.security_context.as_ref())
                        .and_then(|s| s.namespace_options.clone()),
                    seccomp: unconfined(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut client = self.client.clone();
        let id = self
            .rt
            .block_on(client.create_container(CreateContainerRequest {
                pod_sandbox_id: pod.id.clone(),
                config: Some(config),
                sandbox_config: Some(pod.config.clone()),
            }))
            .unwrap_or_else(|e| panic!("CreateContainer {} in {}: {e}\n{}", spec.name, pod.name, self.log()))
            .into_inner()
            .container_id;
        self.rt
            .block_on(client.start_container(StartContainerRequest { container_id: id.clone() }))
            .unwrap_or_else(|e| panic!("StartContainer {} in {}: {e}\n{}", spec.name, pod.name, self.log()));
        id
    }

    /// The pid of the pod's sandbox (pause) process in the node's PID
    /// namespace.
    pub fn sandbox_pid(&self, pod: &Pod) -> u32 {
        let status = self.sandbox_status(pod, true);
        let info: serde_json::Value =
            serde_json::from_str(status.info.get("info").map_or("{}", |s| s.as_str())).unwrap_or_default();
        info["pid"].as_u64().unwrap_or_else(|| panic!("no sandbox pid for {}: {info}", pod.name)) as u32
    }

    /// The pod's address, as the CNI plugin gave it.
    pub fn pod_ip(&self, pod: &Pod) -> String {
        let status = self.sandbox_status(pod, false);
        status
            .status
            .and_then(|s| s.network)
            .map(|n| n.ip)
            .filter(|ip| !ip.is_empty())
            .unwrap_or_else(|| panic!("pod {} has no address", pod.name))
    }

    /// `PodSandboxStatus` of `pod` (`verbose`: with containerd's `info`).
    fn sandbox_status(&self, pod: &Pod, verbose: bool) -> PodSandboxStatusResponse {
        let mut client = self.client.clone();
        self.rt
            .block_on(client.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: pod.id.clone(), verbose }))
            .unwrap_or_else(|e| panic!("PodSandboxStatus {}: {e}", pod.name))
            .into_inner()
    }

    /// What the container wrote to its log (CRI log format: one line per
    /// write, prefixed with time and stream).
    pub fn logs(&self, pod: &Pod, container: &str) -> String {
        fs::read_to_string(self.in_node(&pod.config.log_directory).join(container).join("0.log")).unwrap_or_default()
    }

    /// `StopPodSandbox` + `RemovePodSandbox`, as the kubelet deletes a pod.
    pub fn remove_pod(&mut self, pod: &Pod) {
        self.remove_sandbox(&pod.id).unwrap_or_else(|e| panic!("removing pod {}: {e}", pod.name));
        self.pods.retain(|p| *p != pod.id);
        let _ = fs::remove_dir_all(self.in_node(&pod.config.log_directory));
    }

    fn remove_sandbox(&mut self, id: &str) -> Result<(), tonic::Status> {
        let mut client = self.client.clone();
        self.rt.block_on(async {
            client.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: id.into() }).await?;
            client.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: id.into() }).await?;
            Ok(())
        })
    }

    /// A path inside the node's mount namespace, from ours.
    pub fn in_node(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{path}", self.node.pid1))
    }

    /// `agent <args>` run on this node, as its hostPID DaemonSet pod would.
    pub fn agent(&self, args: &[&str]) -> Run {
        self.node.agent(args)
    }

    /// The audit of this node's pods (`--cgroup-root` the pods' parent, as
    /// the node's cgroup2 mount shows it).
    pub fn audit_args(&self) -> Vec<String> {
        let rel = self.cgroup.path.strip_prefix(crate::cgroup::cgroup2_root()).expect("below the root");
        ["audit", "--output", "json", "--cgroup-root"]
            .into_iter()
            .map(str::to_owned)
            .chain([format!("/sys/fs/cgroup/{}", rel.display())])
            .collect()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.pods) {
            if let Err(e) = self.remove_sandbox(&id) {
                eprintln!("WARNING: removing pod sandbox {id}: {e}");
            }
        }
        // Then `node` (killing containerd, its shims and every container)
        // and `cgroup` drop, in that order.
    }
}

/// No seccomp profile, as the kubelet asks unless the pod names one.
fn unconfined() -> Option<SecurityProfile> {
    Some(SecurityProfile { profile_type: security_profile::ProfileType::Unconfined as i32, ..Default::default() })
}

fn nanos() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() as u64)
}
