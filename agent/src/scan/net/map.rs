//! Pods to their host-side interfaces, from what was read: each pod's
//! sandbox network namespace (by the id it has in the host's), the
//! interface the CNI made there (`eth0`, the name the kubelet gives every
//! CNI) and the host's interface it says is its other end. Pure.
//!
//! The CNI's pair is the one whose pod end is `eth0` and whose two ends
//! name each other: the host end's peer is `eth0`'s index in the pod's
//! namespace, `eth0`'s peer is the host end's index in the node's. Nothing
//! else counts. A pod with CAP_NET_ADMIN and no user namespace can make
//! pairs between its namespace and the node's (through the id its own
//! namespace has for the node's), carrying any program under any name, and
//! plant pairs into other pods' namespaces through the node's ids: none of
//! them is a pod's `eth0` pair, so none is read as one. It can also rename
//! its `eth0` and make a decoy of that name: while anything of its
//! namespace leads into the node's and `eth0` does not, it is unreadable,
//! never a pod without an interface (`pair_of`). Only the sandbox's
//! namespace is judged. The node's links are never dumped: a pod that
//! makes thousands of devices costs nothing, and a churn of devices
//! interrupts nothing (each answer is one link).

use std::collections::HashMap;

use super::namespaces::NetnsProbe;
use super::netlink::Link;
use crate::snapshot::net::{Interface, Net, PodNet};

/// The name of the interface a CNI makes in every pod: the kubelet calls
/// each CNI with `CNI_IFNAME=eth0`.
pub const POD_IFNAME: &str = "eth0";

/// What was read of one pod before its interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProbe {
    pub pod_uid: String,
    pub cgroup: String,
    pub started: Option<u64>,
    pub netns: NetnsProbe,
}

/// What a pod's sandbox namespace says of its side of the CNI's pair,
/// read there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSide {
    /// Its `eth0`: the link the kernel answers for that name, if that is
    /// its name (an altname answers too, and is not it).
    pub eth0: Option<Link>,
    /// The id the node's namespace has in the pod's (`None`: nothing
    /// there leads into the node's).
    pub node_id: Option<i32>,
    /// How many of the pod's interfaces other than `eth0` lead into the
    /// node's namespace, of any driver (a macvlan or ipvlan on the node's
    /// NIC, a veth, a tunnel).
    pub into_node: usize,
    /// The addresses of its `eth0` (what its CNI gave it: where it came
    /// from, when that is not the node's CNI).
    pub addresses: Vec<std::net::IpAddr>,
}

impl PodSide {
    /// Whether its `eth0` is, from the pod's side, a pair into the node's
    /// namespace: a veth, or a netkit peer, whose other end is there.
    pub fn pairs_into_node(&self) -> bool {
        let Some(eth0) = &self.eth0 else { return false };
        let driver = match eth0.driver.as_str() {
            "veth" => true,
            "netkit" => eth0.netkit_primary != Some(true),
            _ => false,
        };
        driver && self.node_id.is_some() && eth0.peer_nsid == self.node_id && eth0.peer_ifindex.is_some()
    }
}

/// What one pod's sandbox namespace says of the CNI's pair, read from
/// both ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairRead {
    /// No `eth0` pair and nothing else into the node's namespace (no
    /// network, or an ipvlan or macvlan `eth0`).
    NoPodInterface,
    /// The host end of its `eth0` pair, validated from both ends, and how
    /// many other interfaces of the pod lead into the node's namespace, and
    /// the addresses of its `eth0`.
    Pair(Link, usize, Vec<std::net::IpAddr>),
    /// It could not be read or is not judged, and why.
    Failed(String),
}

/// The pair a pod's side shows (`host`: the node's interface at the index
/// `eth0` names as its peer, read in the node's namespace; `pod_nsid`: the
/// pod's namespace's id in the node's). The CNI's pair is `eth0` and a
/// host end that name each other (a veth, or the netkit pair's primary);
/// anything else that leads into the node's namespace while `eth0` does
/// not is a pod that moved its network off `eth0` (renamed it and made
/// another `eth0`: a bridge, a macvlan, an altname), and is not judged by
/// the decoy: it is unreadable, and says why.
pub fn pair_of(side: &PodSide, host: Option<Link>, pod_nsid: i32) -> PairRead {
    let eth0 = match &side.eth0 {
        Some(eth0) if side.pairs_into_node() => eth0,
        other => {
            return match (other, side.into_node) {
                (_, 0) => PairRead::NoPodInterface,
                (None, n) => PairRead::Failed(format!(
                    "it has no {POD_IFNAME} but {n} interface(s) leading into the node's network namespace (renamed?): not judged"
                )),
                (Some(l), n) => PairRead::Failed(format!(
                    "its {POD_IFNAME} is {}, not a pair into the node's network namespace, while {n} other interface(s) lead there (renamed?): not judged",
                    if l.driver.is_empty() {
                        "a device without a driver".to_owned()
                    } else {
                        format!("a {}", l.driver)
                    },
                )),
            };
        }
    };
    let named_back = host.filter(|h| {
        let driver = match eth0.driver.as_str() {
            "veth" => h.driver == "veth",
            _ => h.driver == "netkit" && h.netkit_primary != Some(false),
        };
        driver
            && eth0.peer_ifindex == Some(h.ifindex)
            && h.peer_nsid == Some(pod_nsid)
            && h.peer_ifindex == Some(eth0.ifindex)
    });
    match named_back {
        Some(h) => PairRead::Pair(h, side.into_node, side.addresses.clone()),
        None => PairRead::Failed(format!(
            "its {POD_IFNAME}'s other end (index {} in the node's network namespace) does not name it back: not judged",
            eth0.peer_ifindex.unwrap_or(0)
        )),
    }
}

/// A host interface as the pods' section lists it (its bridge named once
/// the node's side is read).
pub fn interface_of(l: &Link) -> Interface {
    Interface {
        ifindex: l.ifindex,
        name: l.name.clone(),
        driver: l.driver.clone(),
        programs: Vec::new(),
        errors: Vec::new(),
        netkit_peer_policy: l.netkit_peer_policy,
        master: l.master,
        bridge: None,
    }
}

/// Each pod and the host end of its sandbox's `eth0` pair (`pairs`: what
/// each sandbox namespace, by its id in the node's, says). Only the
/// sandbox's namespace is judged: one a container of the pod made (with
/// any pair into the node, carrying any program) says nothing of the
/// pod's traffic.
pub fn pods_on_pairs(pods: Vec<PodProbe>, pairs: &HashMap<i32, PairRead>) -> Vec<PodNet> {
    pods.into_iter()
        .map(|p| {
            let net = match p.netns {
                NetnsProbe::NoProcess => Net::NoProcess,
                NetnsProbe::Host => Net::HostNetwork,
                NetnsProbe::Unreadable(reason) => Net::Unreadable { reason },
                NetnsProbe::Own { nsids } => match nsids.first().map(|n| pairs.get(n)) {
                    // Its sandbox's namespace has no id in the node's.
                    None => Net::NoHostInterface,
                    Some(None) => Net::Unreadable { reason: "its network namespace was not read".into() },
                    Some(Some(PairRead::Failed(why))) => Net::Unreadable { reason: why.clone() },
                    Some(Some(PairRead::NoPodInterface)) => Net::NoHostInterface,
                    Some(Some(PairRead::Pair(host, others, addresses))) => Net::Interfaces {
                        interfaces: vec![interface_of(host)],
                        other_links_into_node: *others,
                        addresses: addresses.clone(),
                    },
                },
            };
            PodNet { pod_uid: p.pod_uid, namespace: None, name: None, cgroup: p.cgroup, started: p.started, net }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `eth0` in a pod's namespace (index 2), its other end at `host` in
    /// the node's, where the node's namespace has id 0 in the pod's.
    fn eth0(driver: &str, host: u32) -> Link {
        Link {
            ifindex: 2,
            name: POD_IFNAME.into(),
            driver: driver.into(),
            peer_nsid: Some(0),
            peer_ifindex: Some(host),
            netkit_primary: (driver == "netkit").then_some(false),
            xdp_prog_id: None,
            xdp_mode: None,
            master: None,
            netkit_peer_policy: None,
        }
    }

    /// A host interface at `ifindex` whose other end is index 2 in the
    /// namespace of id `nsid` in the node's.
    fn host(ifindex: u32, name: &str, driver: &str, nsid: i32) -> Link {
        Link {
            ifindex,
            name: name.into(),
            driver: driver.into(),
            peer_nsid: Some(nsid),
            peer_ifindex: Some(2),
            netkit_primary: (driver == "netkit").then_some(true),
            xdp_prog_id: None,
            xdp_mode: None,
            master: None,
            netkit_peer_policy: None,
        }
    }

    fn side(eth0: Option<Link>, into_node: usize) -> PodSide {
        PodSide { eth0, node_id: Some(0), into_node, addresses: Vec::new() }
    }

    fn pod(uid: &str, netns: NetnsProbe) -> PodProbe {
        PodProbe { pod_uid: uid.into(), cgroup: format!("/kubepods/pod{uid}"), started: Some(1), netns }
    }

    fn own(nsids: &[i32]) -> NetnsProbe {
        NetnsProbe::Own { nsids: nsids.to_vec() }
    }

    fn names(p: &PodNet) -> Vec<&str> {
        p.interfaces().iter().map(|i| i.name.as_str()).collect()
    }

    fn failed(r: &PairRead) -> &str {
        match r {
            PairRead::Failed(why) => why,
            other => panic!("not a failed read: {other:?}"),
        }
    }

    #[test]
    fn a_pod_gets_the_host_end_of_its_eth0_pair() {
        let pairs = HashMap::from([
            (4, pair_of(&side(Some(eth0("veth", 5)), 0), Some(host(5, "lxc0123", "veth", 4)), 4)),
            (6, pair_of(&side(Some(eth0("netkit", 7)), 0), Some(host(7, "lxc4567", "netkit", 6)), 6)),
            (8, pair_of(&side(None, 0), None, 8)),
        ]);
        let pods = pods_on_pairs(
            vec![
                pod("a", own(&[4])),
                pod("c", own(&[6])),
                pod("d", NetnsProbe::Host),
                pod("e", own(&[])),
                pod("f", own(&[8])),
                pod("g", NetnsProbe::NoProcess),
            ],
            &pairs,
        );
        assert_eq!(names(&pods[0]), ["lxc0123"]);
        assert_eq!(names(&pods[1]), ["lxc4567"]);
        assert_eq!(pods[2].net, Net::HostNetwork);
        assert_eq!(pods[3].net, Net::NoHostInterface, "no id here: nothing of the host leads there");
        assert_eq!(pods[4].net, Net::NoHostInterface, "no eth0 and nothing into the node: no network");
        assert_eq!(pods[5].net, Net::NoProcess);
        // An ipvlan or macvlan eth0 (its parent in the node) and nothing else.
        let mut ipvlan = eth0("ipvlan", 3);
        ipvlan.peer_ifindex = None;
        assert_eq!(pair_of(&side(Some(ipvlan), 0), None, 4), PairRead::NoPodInterface);
    }

    /// Issue 47, H1: a pod's own pair, one end moved into the node's
    /// namespace carrying a program named like a CNI's, is not its
    /// interface: it is not `eth0`'s other end.
    #[test]
    fn a_pair_a_pod_moved_into_the_nodes_namespace_is_not_its_interface() {
        // eth0's other end is 5; the pod's own pair ends at 9 in the node.
        let moved = host(9, "cali-fake", "veth", 4);
        assert!(matches!(pair_of(&side(Some(eth0("veth", 5)), 0), Some(moved), 4), PairRead::Failed(_)));
        // The host end that eth0 names, which names another namespace back.
        let r = pair_of(&side(Some(eth0("veth", 5)), 0), Some(host(5, "lxc", "veth", 3)), 4);
        assert!(failed(&r).contains("does not name it back"), "{r:?}");
        // ... or another index there.
        let mut other = host(5, "lxc", "veth", 4);
        other.peer_ifindex = Some(3);
        assert!(matches!(pair_of(&side(Some(eth0("veth", 5)), 0), Some(other), 4), PairRead::Failed(_)));
    }

    /// An `eth0` that is a pair into another pod's namespace, not the
    /// node's (the pod made it, or another pod planted it), leads nowhere
    /// on the node.
    #[test]
    fn an_eth0_whose_other_end_is_not_in_the_nodes_namespace_leads_nowhere() {
        let mut into_other = eth0("veth", 5);
        into_other.peer_nsid = Some(7);
        assert_eq!(pair_of(&side(Some(into_other), 0), Some(host(5, "lxc", "veth", 4)), 4), PairRead::NoPodInterface);
        // A netkit pair read from its primary's side in the pod.
        let mut primary = eth0("netkit", 5);
        primary.netkit_primary = Some(true);
        assert_eq!(pair_of(&side(Some(primary), 0), Some(host(5, "nk", "netkit", 4)), 4), PairRead::NoPodInterface);
        let mut peer = host(5, "nk", "netkit", 4);
        peer.netkit_primary = Some(false);
        assert!(matches!(pair_of(&side(Some(eth0("netkit", 5)), 0), Some(peer), 4), PairRead::Failed(_)));
        // The node's namespace has no id in the pod's: nothing leads there.
        let none = PodSide { eth0: Some(eth0("veth", 5)), node_id: None, into_node: 0, addresses: Vec::new() };
        assert_eq!(pair_of(&none, Some(host(5, "l", "veth", 4)), 4), PairRead::NoPodInterface);
    }

    /// Issue 47 red team, F1: the pod renames its `eth0` (traffic still
    /// leaves through it) and makes another `eth0` that is no pair into the
    /// node: a bridge, a macvlan. It is not read as a pod without an
    /// interface: the renamed pair still leads into the node.
    #[test]
    fn a_decoy_eth0_beside_a_renamed_pair_is_unreadable_not_silent() {
        let mut bridge = eth0("bridge", 0);
        bridge.peer_nsid = None;
        bridge.peer_ifindex = None;
        let r = pair_of(&side(Some(bridge), 1), None, 4);
        assert!(failed(&r).contains("its eth0 is a bridge, not a pair into the node's network namespace"), "{r:?}");
        // No eth0 at all (renamed, or an altname answered for it).
        let r = pair_of(&side(None, 2), None, 4);
        assert!(failed(&r).contains("it has no eth0 but 2 interface(s)"), "{r:?}");
        // A veth eth0 whose other end is in another pod's namespace.
        let mut elsewhere = eth0("veth", 5);
        elsewhere.peer_nsid = Some(9);
        assert!(matches!(pair_of(&side(Some(elsewhere), 1), None, 4), PairRead::Failed(_)));
    }

    /// Issue 47 red team, F2: a second namespace of the pod (a container's
    /// own) with a pair into the node carrying anything says nothing: the
    /// sandbox's is judged.
    #[test]
    fn only_the_sandboxs_namespace_is_judged() {
        let pairs = HashMap::from([
            (4, PairRead::NoPodInterface),
            (5, pair_of(&side(Some(eth0("veth", 5)), 0), Some(host(5, "forged", "veth", 5)), 5)),
        ]);
        let pods = pods_on_pairs(vec![pod("a", own(&[4, 5]))], &pairs);
        assert_eq!(pods[0].net, Net::NoHostInterface);
    }

    /// Issue 47, M1: a pod's sandbox namespace that could not be read
    /// leaves the pod unread (a warning, never a verdict).
    #[test]
    fn a_pod_whose_sandbox_namespace_could_not_be_read_is_unread() {
        let pairs = HashMap::from([(4, PairRead::Failed("RTM_GETLINK: timed out".into()))]);
        let pods = pods_on_pairs(vec![pod("a", own(&[4])), pod("b", own(&[6]))], &pairs);
        assert_eq!(pods[0].net, Net::Unreadable { reason: "RTM_GETLINK: timed out".into() });
        assert_eq!(pods[1].net, Net::Unreadable { reason: "its network namespace was not read".into() });
    }
}
