//! What a scan saw of the pods' networks: each pod's network namespace,
//! the host-side interfaces that lead into it and the programs on them
//! (`scan::net` reads it; `findings::outside_datapath` judges it), and the
//! per-endpoint datapaths the node's configuration says it runs.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::owner::Owner;

/// What was read of the pods' interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PodNetworks {
    /// Why the interfaces could not be read at all (`pods` is then empty).
    pub error: Option<String>,
    /// When they were read (unix seconds): what a pod's age is taken at.
    pub read_at: u64,
    /// When each owner's agent process started.
    pub agents: Vec<AgentStart>,
    /// The per-endpoint datapaths the node's configuration says it runs
    /// (its running agents', its CNI configuration).
    pub configured: Vec<Configured>,
    pub pods: Vec<PodNet>,
    /// The daemon's memory: the pods unread at this read that keep an
    /// earlier reading, by UID, with when that was read (unix seconds). A
    /// reading is kept at most `KEPT_FOR`: past it the pod is unread.
    #[serde(skip)]
    pub kept: BTreeMap<String, u64>,
    /// The daemon's memory: the pods' interfaces that carried an owner's
    /// per-endpoint program at an earlier read. A pod that lost it is
    /// outside the datapath at once, whatever its age. Empty for a
    /// one-shot audit.
    #[serde(skip)]
    pub had_programs: BTreeSet<EndpointSeen>,
}

/// A pod's interface seen carrying an owner's per-endpoint entry program.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EndpointSeen {
    pub pod_uid: String,
    pub owner: Owner,
    pub ifindex: u32,
}

/// How long the daemon keeps a pod's last good reading while its network
/// cannot be read (a gap must not clear a verdict, nor a pod that keeps
/// its network unreadable keep an old one forever).
pub const KEPT_FOR: u64 = 60;

impl PodNetworks {
    /// Every program on a pod's interface.
    pub fn program_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.interfaces().flat_map(|i| i.programs.iter().map(|p| p.prog_id))
    }

    /// Every pod's host-side interface.
    pub fn interfaces(&self) -> impl Iterator<Item = &Interface> {
        self.pods.iter().flat_map(PodNet::interfaces)
    }

    /// The pods' interfaces that carry an owner's entry program now.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointSeen> + '_ {
        self.pods.iter().flat_map(|p| {
            p.interfaces().iter().flat_map(move |i| {
                crate::owner::registry::DATAPATHS.iter().filter(|d| i.carries(d.owner)).map(move |d| EndpointSeen {
                    pod_uid: p.pod_uid.clone(),
                    owner: d.owner,
                    ifindex: i.ifindex,
                })
            })
        })
    }

    /// Names each program from the node's (full names where resolved). A
    /// program that cannot be named (gone since the query, its id freed as
    /// a CNI replaced it) leaves its interface unjudged this time.
    pub fn name_programs(&mut self, programs: &BTreeMap<u32, crate::bpf::programs::Program>) {
        for i in self.pods.iter_mut().flat_map(PodNet::interfaces_mut) {
            for prog in &mut i.programs {
                match programs.get(&prog.prog_id) {
                    Some(known) => prog.prog_name = known.name.clone(),
                    None if prog.prog_name.is_empty() => {
                        i.errors.push(format!("program {} could not be named", prog.prog_id))
                    }
                    None => {}
                }
            }
        }
    }

    /// A read that could not be made at all.
    pub fn failed(error: String, read_at: u64) -> PodNetworks {
        PodNetworks { error: Some(error), read_at, ..Default::default() }
    }
}

/// When an owner's agent process started (unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentStart {
    pub owner: Owner,
    pub pid: u32,
    pub started: Option<u64>,
}

/// An owner's per-endpoint datapath, and what said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Configured {
    pub owner: Owner,
    /// e.g. `cilium-agent runs (pid 812)`, or
    /// `/etc/cni/net.d/05-cilium.conflist names the cilium-cni plugin`.
    pub source: String,
}

/// One pod's network, as the node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodNet {
    pub pod_uid: String,
    /// As the node's runtime or kubelet logs name it (the report fills
    /// these in; `null`: not found).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub cgroup: String,
    /// When its oldest process read started (unix seconds).
    pub started: Option<u64>,
    #[serde(flatten)]
    pub net: Net,
}

impl PodNet {
    /// Its host-side interfaces (none unless `Net::Interfaces`).
    pub fn interfaces(&self) -> &[Interface] {
        match &self.net {
            Net::Interfaces { interfaces, .. } => interfaces,
            _ => &[],
        }
    }

    pub fn interfaces_mut(&mut self) -> &mut [Interface] {
        match &mut self.net {
            Net::Interfaces { interfaces, .. } => interfaces,
            _ => &mut [],
        }
    }

    /// Whether an interface of it carries `owner`'s entry program.
    pub fn carries(&self, owner: Owner) -> bool {
        self.interfaces().iter().any(|i| i.carries(owner))
    }

    /// Whether its network could not be read whole this time: it keeps
    /// its last reading, and is not judged on this one.
    pub fn unread(&self) -> bool {
        match &self.net {
            Net::Unreadable { .. } => true,
            Net::Interfaces { interfaces, .. } => interfaces.iter().any(|i| !i.errors.is_empty()),
            _ => false,
        }
    }
}

/// Where a pod's network is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "network", rename_all = "snake_case")]
pub enum Net {
    /// The node's own network namespace: no interface of its own.
    HostNetwork,
    /// No process of it could be read.
    NoProcess,
    /// Its own namespace, which no host interface leads into (ipvlan,
    /// macvlan, SR-IOV, or no network).
    NoHostInterface,
    Unreadable {
        reason: String,
    },
    /// Its own namespace, and the host's interfaces that lead into it.
    Interfaces {
        interfaces: Vec<Interface>,
        /// Besides its `eth0` pair: how many interfaces of its namespace
        /// lead into the node's (a macvlan or ipvlan on the node's NIC, a
        /// veth, a tunnel). What it sends through them bypasses the CNI.
        #[serde(skip_serializing_if = "is_zero")]
        other_links_into_node: usize,
        /// The addresses of its `eth0`, as its namespace says.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        addresses: Vec<std::net::IpAddr>,
    },
}

/// A host-side interface of a pod, and the programs on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub ifindex: u32,
    pub name: String,
    /// `veth` or `netkit`.
    pub driver: String,
    pub programs: Vec<ProgramOn>,
    /// Hooks that could not be read, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// netkit: what the pod's transmit does with no program there
    /// (`forward`; `blackhole`, as Cilium makes its netkit pairs: a pod
    /// without the program is cut off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netkit_peer_policy: Option<&'static str>,
    /// The device it is enslaved to, by index (read), and by name: a
    /// bridge (`cni0`, `cni-podman0`, `docker0`) says which network the
    /// pod's interface came from.
    #[serde(skip)]
    pub master: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
}

impl Interface {
    /// Whether it carries `owner`'s entry program on what the pod sends.
    pub fn carries(&self, owner: Owner) -> bool {
        self.programs.iter().any(|p| p.hook.is_pod_egress() && p.endpoint_owner() == Some(owner))
    }
}

/// Where on an interface a program runs. Seen from the host's side:
/// ingress is what the pod sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum IfHook {
    TcIngress,
    TcEgress,
    TcxIngress,
    TcxEgress,
    /// netkit: the peer's transmit (what the pod sends).
    NetkitPeer,
    /// netkit: the primary's transmit (what the pod receives).
    NetkitPrimary,
    Xdp,
}

impl IfHook {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the hook runs on what the pod sends: where a CNI's
    /// per-endpoint entry program must be.
    pub fn is_pod_egress(self) -> bool {
        matches!(self, IfHook::TcIngress | IfHook::TcxIngress | IfHook::NetkitPeer)
    }
}

/// A program on an interface's hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramOn {
    pub hook: IfHook,
    pub prog_id: u32,
    /// Its full name, once the scan has the node's programs.
    pub prog_name: String,
    #[serde(flatten)]
    pub via: Via,
    /// The maps it uses, by id: what ties it to an owner's pinned maps.
    #[serde(skip)]
    pub map_ids: Vec<u32>,
    /// Whose it is and what proves it (`owner::hooks`; `null`: nothing
    /// does, whatever its name).
    pub owner: Option<Owner>,
    pub proof: Option<HookProof>,
}

impl ProgramOn {
    /// A program on `hook`, its name, maps and owner still to be read.
    pub fn new(hook: IfHook, prog_id: u32, via: Via) -> ProgramOn {
        ProgramOn { hook, prog_id, prog_name: String::new(), via, map_ids: Vec::new(), owner: None, proof: None }
    }

    /// The owner whose per-endpoint entry program this is: proven its
    /// (`owner::hooks`), and named as its entry program is
    /// (`owner::registry::DATAPATHS`). A name alone proves nothing: a pod
    /// with CAP_BPF names its programs as it likes.
    pub fn endpoint_owner(&self) -> Option<Owner> {
        let owner = self.owner?;
        crate::owner::registry::datapath_of(&self.prog_name).filter(|d| d.owner == owner).map(|d| d.owner)
    }
}

/// What proves a program on an interface's or a device's hook an owner's
/// (docs/security.md, "Proofs"): the ways the owners' loaders leave their
/// programs, none of which a pod can forge without the node's bpffs or
/// CAP_SYS_ADMIN. Never a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum HookProof {
    /// Its link is pinned where the owner pins its links (Cilium's
    /// `cilium/endpoints/<id>/links/`, `cilium/devices/<dev>/links/`;
    /// Calico's `tcx/`, `netkit/`), and that link is on this very hook.
    LinkPinned,
    /// It uses a map the owner pinned in `tc/globals` (its tail-call map,
    /// which the owner's loader pins anew with each program it attaches).
    MapsPinned,
    /// The program itself is pinned where an owner that pins programs, not
    /// links, pins them (the AWS network policy agent's
    /// `globals/aws/programs/<pod>_handle_*`).
    ProgramPinned,
    /// The owner's privileged agent holds it open.
    Held,
}

impl HookProof {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How a program is on its hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum Via {
    /// A tc filter: its priority, handle and name, and whether the
    /// program's return code is the verdict.
    Filter { prio: u16, handle: u32, filter_name: Option<String>, direct_action: bool },
    /// A bpf link (tcx, netkit).
    Link { link_id: u32 },
    /// Attached without a link.
    Attached,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
