//! The plain data one scan of a node produces. Rules, attribution and
//! reporting are pure functions of it; only `scan` talks to the kernel.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

pub mod devices;
pub mod net;

use crate::bpf::programs::Program;
use crate::bpf::sys::CgroupLinkInfo;
use crate::bpf::{AttachFlags, AttachType};
use crate::cgroup::AuditRoot;
use crate::cgroup::tree::ProcessRef;
use crate::features::{Feature, Verdict as FeatureVerdict};
use crate::owner::Owner;

/// Program ids in effect, per coverage hook (a hook with none is absent).
pub type Effective = BTreeMap<AttachType, Vec<u32>>;

/// An effective set held by a pod or container: one allocation per distinct
/// set (`coverage::Sets`). On a node nearly every cgroup runs the same programs (the
/// CNI's, from the root), so one set serves tens of thousands, and judging
/// them reads each distinct set once (by address) instead of every copy.
pub type Shared = Arc<Effective>;

/// One program attached directly to one cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Relative to the audited root, `/` for the root itself.
    pub cgroup: String,
    pub cgroup_id: u64,
    pub attach_type: AttachType,
    pub attach_flags: AttachFlags,
    pub prog_id: u32,
    /// The bpf_link holding it, when it was attached with `BPF_LINK_CREATE`.
    pub link_id: Option<u32>,
    /// Attached with `BPF_F_PREORDER` (6.15): it runs before the hook's
    /// other programs and those of the cgroups below, not in attach order.
    /// `None` where not known (the syscall walk; kernels before 6.15 have
    /// no such flag: false).
    pub preorder: Option<bool>,
}

/// A pod's own cgroup, the cgroups below it where its processes live, and
/// the socket-LB programs in effect for each (`coverage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroup {
    pub cgroup: String,
    pub cgroup_id: u64,
    pub pod_uid: String,
    /// In effect for sockets made in the pod's own cgroup (shared with
    /// every cgroup that has the same set).
    pub effective: Shared,
    /// Its leaf cgroups that hold processes (its containers' cgroups):
    /// where its sockets are made.
    pub containers: Vec<ContainerCgroup>,
}

/// A leaf cgroup of a pod that holds processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCgroup {
    pub cgroup: String,
    pub cgroup_id: u64,
    pub effective: Shared,
}

/// Where a cgroup2 mount in PID 1's mount namespace is rooted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MountTop {
    /// The top directory's cgroup id, and its path when it lies in the
    /// audited tree (`None`: outside it, e.g. with `--cgroup-root`).
    Known { cgroup_id: u64, cgroup: Option<String> },
    /// Neither `/proc/1/root` nor a trustworthy mountinfo root was available.
    Unknown { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// Field 4 of mountinfo, as read from the auditor's cgroup namespace.
    pub mountinfo_root: String,
    pub top: MountTop,
    /// Another mount made over it (or over a directory above it) later, as
    /// `<type> at <path>`: what is at its path now is not this mount, and
    /// its top was read from its own mountinfo entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed_by: Option<String>,
}

/// A program an owner pinned in its bpffs directory (directly, or the
/// program of a pinned link), as PID 1's namespace shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerPin {
    pub owner: Owner,
    pub path: PathBuf,
    pub prog_id: u32,
    pub link_id: Option<u32>,
    /// What a pinned link is attached to (a cgroup, a device's hook).
    #[serde(skip)]
    pub target: Option<crate::bpf::sys::LinkTarget>,
}

/// A map an owner pinned (its tail-call maps in `tc/globals`), by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerMap {
    pub owner: Owner,
    pub name: String,
    pub map_id: u32,
}

/// A running owner's agent (a process with a registry agent's name) and
/// the cgroup namespace it lives in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentProcess {
    pub pid: u32,
    pub owner: Owner,
    pub comm: String,
    /// Inode of `/proc/<pid>/ns/cgroup`.
    pub cgroupns: u64,
    /// Its cgroup as `/proc/<pid>/cgroup` shows it to the auditor.
    pub cgroup: String,
    /// Runs with what its owner's agent runs with (`owner::Runs`): CAP_SYS_ADMIN
    /// or CAP_BPF in the node's user namespace, and for those that run so
    /// CAP_NET_ADMIN in the node's network namespace (hostNetwork). A
    /// process merely named like one (anyone can name a process), root only
    /// in a user namespace of its own, or a pod with CAP_BPF in its own
    /// network is not taken for the agent, nor what it holds for its owner's.
    pub privileged: bool,
    /// Whether its configuration turns socket load balancing on (Cilium's
    /// and Calico's are read; why not, or what was seen, otherwise).
    pub intent: Intent,
    /// The programs it holds open (a program's or a link's fd), by id: what
    /// proves a program its owner's. Read for agents taken for theirs only.
    pub holds: Vec<u32>,
}

/// What a CNI agent's own configuration says about socket LB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SocketLb {
    On,
    /// Cilium's `bpf-lb-sock-hostns-only`: programs at the root, applied to
    /// the host's network namespace only.
    HostNamespaceOnly,
    Off,
    /// Not readable, or not said where the agent could be asked.
    Unknown,
}

/// The socket-LB setting and the keys it was read from, as `key=value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Intent {
    pub socket_lb: SocketLb,
    /// e.g. `kube-proxy-replacement=true (in /tmp/cilium/config-map)`, or
    /// why nothing could be read.
    pub evidence: String,
    /// Calico's `FELIX_BPFENABLED`, as its agent's environment set it when
    /// the agents were read (`None`: not Calico's, or not set): whether
    /// its per-endpoint eBPF datapath runs (`scan::net::config`).
    #[serde(skip)]
    pub bpf_dataplane: Option<bool>,
    /// The devices its configuration names for its datapath, as written
    /// there (Cilium's `devices`: names, `+` a prefix; Calico's
    /// `FELIX_BPFDATAIFACEPATTERN`: a regular expression); `None`: not set
    /// (auto-detected), or not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<String>,
    /// Calico's `FELIX_BPFL3IFACEPATTERN` (its tunnel devices, wireguard or
    /// vxlan, meant in addition to `devices`); `None`: not set, or not
    /// Calico's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l3_devices: Option<String>,
    /// The pod CIDRs its configuration gives pods addresses from (Cilium's
    /// `cluster-pool-ipv4-cidr`/`-ipv6-cidr`, Calico's
    /// `CALICO_IPV4POOL_CIDR`/`CALICO_IPV6POOL_CIDR`), as written there
    /// (empty: not said, as with Kubernetes' own pod CIDRs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pod_cidrs: Vec<String>,
}

impl Intent {
    pub fn unknown(why: impl Into<String>) -> Intent {
        Intent {
            socket_lb: SocketLb::Unknown,
            evidence: why.into(),
            bpf_dataplane: None,
            devices: None,
            l3_devices: None,
            pod_cidrs: Vec::new(),
        }
    }
}

/// A pod's name, as the node knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

/// A container's pod and name, and where they were read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerName {
    pub pod: PodName,
    /// `None` for a pod's sandbox (pause) container.
    pub container: Option<String>,
    /// `containerd`, `cri-o`, `docker` or `kubelet logs`.
    pub source: &'static str,
}

/// Pod and container names read from the node (runtimes' state, kubelet's
/// log directories), never from the API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// By pod UID.
    pub pods: BTreeMap<String, PodName>,
    /// By container id; `None`: looked up, not found.
    pub containers: BTreeMap<String, Option<ContainerName>>,
}

impl Names {
    /// The pod's name: from its containers' sources, else the kubelet's logs.
    pub fn pod(&self, uid: &str, container_id: Option<&str>) -> Option<&PodName> {
        container_id.and_then(|c| self.containers.get(c)?.as_ref()).map(|c| &c.pod).or_else(|| self.pods.get(uid))
    }

    pub fn container(&self, id: &str) -> Option<&str> {
        self.containers.get(id)?.as_ref()?.container.as_deref()
    }
}

/// What findings name: pods by UID, containers by id (with the pod UID and
/// runtime their cgroup path gives).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamesWanted {
    pub pods: BTreeSet<String>,
    /// id -> (pod UID, runtime) from the cgroup path.
    pub containers: BTreeMap<String, (Option<String>, Option<&'static str>)>,
}

impl NamesWanted {
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.containers.is_empty()
    }
}

/// A cgroup v1 hierarchy with `net_cls` or `net_prio` on the node: mounted
/// in PID 1's mount namespace, or bound according to `/proc/cgroups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct V1NetController {
    /// `net_cls` or `net_prio`.
    pub controller: String,
    pub mount_point: Option<PathBuf>,
}

/// What the running kernel says of matching sockets to their cgroup v2
/// once cgroup v1 net_cls/net_prio are used (commit 8520e224f547: mainline
/// 5.15, 5.10.y from 5.10.226; a vendor kernel may have it or not whatever
/// its version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SocketMatching {
    /// The kernel still has `cgroup_sk_alloc_disable` (in /proc/kallsyms):
    /// it lacks the fix, and using net_cls/net_prio turns matching off for
    /// the rest of the boot.
    pub kernel_lacks_fix: bool,
    /// Why net_cls/net_prio count as used, when they do: the kernel's own
    /// log line, or a classid, a priority, or a task in a net_prio cgroup.
    pub in_use: Option<String>,
}

/// What the audit could not read and went on without, by kind: no one
/// object can fail a pass (any process with CAP_BPF makes them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// bpf_links still being made when asked (EAGAIN after retries): their
    /// programs are listed, without a link id.
    pub links: u64,
    /// Programs whose BTF was over the size read for names
    /// (`bpf::programs::MAX_PROGRAM_BTF`): named by the kernel's 15-byte name.
    pub btf: u64,
    /// Cgroup links the kernel would not describe (`BPF_OBJ_GET_INFO_BY_FD`
    /// refused): their programs are listed, without a link id.
    pub unreadable_links: u64,
    /// Programs the kernel would not describe: listed by id, owner unknown.
    pub unreadable_programs: u64,
}

impl Skipped {
    /// Each nonzero count as `N what`, for a report's note line.
    pub fn described(&self) -> Vec<String> {
        [
            (self.links, "links still being made"),
            (self.btf, "programs named by their kernel name (BTF over 4 MiB)"),
            (self.unreadable_links, "cgroup links the kernel would not describe"),
            (self.unreadable_programs, "programs the kernel would not describe"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect()
    }
}

/// Something the scan could not read; the audit goes on without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanError {
    pub op: String,
    pub path: String,
    pub message: String,
}

/// Whether the processes the audit sees are the node's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PidView {
    /// The node's PID namespace, and how that is known.
    Node { how: String },
    /// Another (a pod's own, without hostPID), and what that hides.
    NotNode { reason: String },
}

/// How the tree was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WalkUsed {
    /// One pass of the in-kernel iterator.
    BpfIter,
    /// One directory open and a BPF_PROG_QUERY per hook for every cgroup.
    Syscalls,
}

/// How the cgroup tree was read, and why not in the kernel if it was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkInfo {
    pub method: WalkUsed,
    /// Why `--walk auto` fell back to the syscall walk.
    pub fallback: Option<String>,
    /// In-kernel passes run (a pass whose buffer overflowed is run again).
    pub passes: u32,
}

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub node: String,
    pub kernel: String,
    pub root: AuditRoot,
    pub cgroups_scanned: u64,
    pub cgroups_vanished: u64,
    pub walk: WalkInfo,
    pub unsupported_attach_types: Vec<AttachType>,
    /// What this kernel takes, as found so far (`features`).
    pub kernel_features: BTreeMap<Feature, FeatureVerdict>,
    pub attachments: Vec<Attachment>,
    /// Every program loaded on the node, by id.
    pub programs: BTreeMap<u32, Program>,
    pub cgroup_links: Vec<CgroupLinkInfo>,
    /// Objects the scan went on without.
    pub skipped: Skipped,
    pub pods: Vec<PodCgroup>,
    /// What the kernel reports in effect at the audit root, per coverage
    /// hook (`BPF_F_QUERY_EFFECTIVE`): its own programs and what runs from
    /// above it.
    pub root_effective: Effective,
    pub mounts: Vec<CgroupMount>,
    /// The owners' agents running on the node.
    pub agents: Vec<AgentProcess>,
    /// The owners' pins in PID 1's bpffs.
    pub pins: Vec<OwnerPin>,
    /// The owners' pinned tail-call maps in PID 1's bpffs.
    pub owner_maps: Vec<OwnerMap>,
    /// Why the owners' pins could not all be read, if so: the programs on
    /// hooks they would prove are then not judged.
    pub pins_unread: Option<String>,
    /// bpffs mounts of PID 1's namespace that a later mount hides.
    pub hidden_bpffs: Vec<crate::mounts::HiddenBpffs>,
    /// The node's own devices and the programs on them.
    pub devices: devices::HostDevices,
    /// cgroup v1 `net_cls`/`net_prio` hierarchies on the node.
    pub v1_net_controllers: Vec<V1NetController>,
    /// Whether sockets may no longer be matched to their cgroup v2 (read
    /// only where v1 net controllers are and CNI socket-LB programs sit
    /// below the hierarchy's root: the only case it changes anything).
    pub socket_matching: Option<SocketMatching>,
    /// Names of the pods and of the containers findings may be about.
    pub names: Names,
    /// The cgroup namespace CNI agents are compared with: PID 1's, or the
    /// auditor's own when PID 1's cannot be read (then `reference_ns_is_pid1`
    /// is false).
    pub reference_cgroupns: Option<u64>,
    pub reference_ns_is_pid1: bool,
    /// Whether the processes seen (CNI agents, PID 1's mounts) are the node's.
    pub pid_view: PidView,
    /// `--nested-node`: PID 1's namespaces are a nested node's, whatever
    /// the audit sees in them.
    pub nested_node: bool,
    /// Processes of cgroups that hold programs below the root on a hook an
    /// owner means for the root.
    pub processes: BTreeMap<String, Vec<ProcessRef>>,
    /// Paths (relative to the root) of cgroups the scan was asked to name:
    /// callers seen in attach events.
    pub cgroup_paths: BTreeMap<u64, String>,
    /// The pods' host-side interfaces and the programs on them.
    pub pod_networks: net::PodNetworks,
    /// Recent changes (daemon only; empty for one-shot audits).
    pub events: Vec<crate::event::Event>,
    pub errors: Vec<ScanError>,
    /// Every cgroup, when `ScanOptions::tree_max` asked and the tree was
    /// within it (the daemon's).
    pub tree: Option<crate::cgroup::tree::Tree>,
}

impl Snapshot {
    /// Fills in whose each program on the pods' interfaces and the node's
    /// devices is, and what proves it (`owner::hooks`).
    pub fn prove_hooks(&mut self) {
        let mut nets = std::mem::take(&mut self.pod_networks);
        let mut devices = std::mem::take(&mut self.devices);
        self.prove_pods(&mut nets);
        self.prove_devices(&mut devices);
        self.pod_networks = nets;
        self.devices = devices;
    }

    /// Whose each program on the pods' interfaces `nets` is, from this
    /// snapshot's pins, pinned maps and agents. Where the owners' pins
    /// could not be read, an interface with a program nothing proves is not
    /// judged this time (its proof may be among them).
    pub fn prove_pods(&self, nets: &mut net::PodNetworks) {
        use crate::owner::hooks::{OnHook, Proofs};
        let proofs = Proofs::new(&self.pins, &self.owner_maps, &self.agents);
        for i in nets.pods.iter_mut().flat_map(net::PodNet::interfaces_mut) {
            for p in &mut i.programs {
                let on =
                    OnHook { ifindex: i.ifindex, hook: p.hook, prog_id: p.prog_id, via: &p.via, map_ids: &p.map_ids };
                (p.owner, p.proof) = proofs.owner_of(&on).unzip();
            }
            if let Some(why) = &self.pins_unread
                && i.programs.iter().any(|p| p.owner.is_none())
            {
                i.errors.push(format!("the owners' pins could not be read ({why}): not judged"));
            }
        }
    }

    /// Whose each program on the node's devices is (`prove_pods`).
    pub fn prove_devices(&self, devices: &mut devices::HostDevices) {
        use crate::owner::hooks::{OnHook, Proofs};
        let proofs = Proofs::new(&self.pins, &self.owner_maps, &self.agents);
        for d in &mut devices.devices {
            for p in &mut d.programs {
                let on =
                    OnHook { ifindex: d.ifindex, hook: p.hook, prog_id: p.prog_id, via: &p.via, map_ids: &p.map_ids };
                (p.owner, p.proof) = proofs.owner_of(&on).unzip();
            }
        }
    }

    /// Of the programs `ids`, those to read (again) for their names: not
    /// known to the snapshot, or known only by the kernel's 15 bytes
    /// (loaded before the pass, attached only now). One rule for every
    /// reading between full passes.
    pub fn to_learn(&self, ids: impl IntoIterator<Item = u32>) -> Vec<u32> {
        let mut out: Vec<u32> =
            ids.into_iter().filter(|id| self.programs.get(id).is_none_or(|p| p.name_unresolved())).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The cgroup hooks this kernel knows, as the full pass found them.
    pub fn supported_hooks(&self) -> impl Iterator<Item = AttachType> + '_ {
        AttachType::all().filter(|t| !self.unsupported_attach_types.contains(t))
    }
}
