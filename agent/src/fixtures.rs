//! Snapshots for the rules' and the report's unit tests: a node with
//! nothing on it, and builders that add programs and attachments.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::bpf::programs::Program;
use crate::bpf::{AttachFlags, AttachType, ProgType};
use crate::cgroup::{AuditRoot, RootKind};
use crate::owner::Owner;
use crate::snapshot::{AgentProcess, Attachment, Intent, Snapshot, SocketLb};

pub const POD: &str =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podf8371831_8021_4722_af27_93c925d25a14.slice";
pub const CTR: &str = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podf8371831_8021_4722_af27_93c925d25a14.slice/cri-containerd-fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910.scope";
pub const CTR_ID: u64 = 4242;

pub fn at(n: &str) -> AttachType {
    AttachType::from_name(n).unwrap()
}

/// A node with nothing on it; builders below add to it.
pub fn node() -> Snapshot {
    Snapshot {
        node: "n1".into(),
        kernel: "6.18".into(),
        root: AuditRoot { path: PathBuf::from("/sys/fs/cgroup"), cgroup_id: 1, kind: RootKind::Hierarchy, note: None },
        cgroups_scanned: 3,
        cgroups_vanished: 0,
        walk: crate::snapshot::WalkInfo { method: crate::snapshot::WalkUsed::BpfIter, fallback: None, passes: 1 },
        unsupported_attach_types: Vec::new(),
        kernel_features: Default::default(),
        attachments: Vec::new(),
        programs: BTreeMap::new(),
        cgroup_links: Vec::new(),
        skipped: Default::default(),
        pods: Vec::new(),
        root_effective: Default::default(),
        mounts: Vec::new(),
        agents: Vec::new(),
        pins: Vec::new(),
        owner_maps: Vec::new(),
        pins_unread: None,
        hidden_bpffs: Vec::new(),
        devices: Default::default(),
        v1_net_controllers: Vec::new(),
        socket_matching: None,
        names: Default::default(),
        reference_cgroupns: Some(100),
        reference_ns_is_pid1: true,
        pid_view: crate::snapshot::PidView::Node { how: "the initial PID namespace".into() },
        nested_node: false,
        processes: BTreeMap::new(),
        cgroup_paths: BTreeMap::new(),
        pod_networks: Default::default(),
        events: Vec::new(),
        errors: Vec::new(),
        tree: None,
    }
}

pub fn prog(s: &mut Snapshot, id: u32, name: &str, prog_type: ProgType) {
    s.programs.insert(id, Program::new(id, name, prog_type));
}

pub fn attach(s: &mut Snapshot, cgroup: &str, cgroup_id: u64, hook: &str, prog_id: u32) {
    s.attachments.push(Attachment {
        cgroup: cgroup.into(),
        cgroup_id,
        attach_type: at(hook),
        attach_flags: AttachFlags::Multi,
        prog_id,
        link_id: None,
        preorder: Some(false),
    });
}

/// Cilium's connect4/connect6 programs attached to `cgroup`, held by a
/// running Cilium agent (what proves them Cilium's).
pub fn cilium_connect(s: &mut Snapshot, cgroup: &str, cgroup_id: u64) {
    named_cilium_connect(s, cgroup, cgroup_id);
    agent(s, Owner::Cilium).holds.extend([10, 11]);
}

/// Programs with Cilium's connect4/connect6 names attached to `cgroup`,
/// and nothing that proves them Cilium's.
pub fn named_cilium_connect(s: &mut Snapshot, cgroup: &str, cgroup_id: u64) {
    prog(s, 10, "cil_sock4_connect", ProgType::CgroupSockAddr);
    prog(s, 11, "cil_sock6_connect", ProgType::CgroupSockAddr);
    attach(s, cgroup, cgroup_id, "connect4", 10);
    attach(s, cgroup, cgroup_id, "connect6", 11);
}

/// `owner`'s running, privileged agent in PID 1's cgroup namespace (made
/// when there is none yet), as its registry names it.
pub fn agent(s: &mut Snapshot, owner: Owner) -> &mut AgentProcess {
    let at = match s.agents.iter().position(|p| p.owner == owner) {
        Some(at) => at,
        None => {
            s.agents.push(AgentProcess {
                pid: 7 + s.agents.len() as u32 * 100,
                owner,
                comm: owner.agent_comm().unwrap_or("agent").into(),
                cgroupns: 100,
                cgroup: "/x".into(),
                privileged: true,
                intent: Intent::unknown("not read"),
                holds: Vec::new(),
            });
            s.agents.len() - 1
        }
    };
    &mut s.agents[at]
}

/// A running, privileged Cilium agent in PID 1's cgroup namespace whose
/// configuration says `socket_lb`.
pub fn cilium_agent(s: &mut Snapshot, socket_lb: SocketLb) -> &mut AgentProcess {
    let a = agent(s, Owner::Cilium);
    a.intent = Intent {
        socket_lb,
        evidence: "kube-proxy-replacement=true (in /tmp/cilium/config-map)".into(),
        bpf_dataplane: None,
        devices: None,
        l3_devices: None,
        pod_cidrs: Vec::new(),
    };
    a
}

/// A pod's own cgroup with `effective` in effect on connect4 and connect6,
/// and no container holding processes.
pub fn pod_cgroup(cgroup: &str, id: u64, uid: &str, effective: &[u32]) -> crate::snapshot::PodCgroup {
    crate::snapshot::PodCgroup {
        cgroup: cgroup.into(),
        cgroup_id: id,
        pod_uid: uid.into(),
        effective: std::sync::Arc::new(
            ["connect4", "connect6"]
                .iter()
                .filter(|_| !effective.is_empty())
                .map(|h| (crate::bpf::AttachType::from_name(h).unwrap(), effective.to_vec()))
                .collect(),
        ),
        containers: Vec::new(),
    }
}

/// The pod of `one_pod_tree`.
pub const POD_UID: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";

/// A node with its tree: root 1, /kubepods 2, /kubepods/burstable 3, one
/// pod (`POD_UID`) 4.
pub fn one_pod_tree() -> Snapshot {
    use crate::cgroup::tree::{Record, Tree};
    let mut s = node();
    s.pods.push(pod_cgroup(&format!("/kubepods/burstable/pod{POD_UID}"), 4, POD_UID, &[]));
    let mut tree = Tree::new(1);
    let pod = format!("pod{POD_UID}");
    for (id, parent, name) in [(2, 1, "kubepods"), (3, 2, "burstable"), (4, 3, pod.as_str())] {
        assert!(tree.add(Record { id, parent, name: name.as_bytes(), own: &[] }, false, None));
    }
    s.tree = Some(tree);
    s
}
