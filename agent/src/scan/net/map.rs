//! Pods to their host-side interfaces, from what was read: each pod's
//! network namespaces (by the ids they have in the host's), the interface
//! the CNI made in each (`eth0`, the name the kubelet gives every CNI) and
//! the host's interface it says is its other end. Pure.
//!
//! The CNI's pair is the one whose pod end is `eth0` and whose two ends
//! name each other: the host end's peer is `eth0`'s index in the pod's
//! namespace, `eth0`'s peer is the host end's index in the node's. Nothing
//! else counts. A pod with CAP_NET_ADMIN and no user namespace can make
//! pairs between its namespace and the node's (through the id its own
//! namespace has for the node's), carrying any program under any name, and
//! plant pairs into other pods' namespaces through the node's ids: none of
//! them is a pod's `eth0` pair, so none is read as one. The node's links
//! are never dumped: a pod that makes thousands of devices costs nothing,
//! and a churn of devices interrupts nothing (each answer is one link).

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

/// What one pod network namespace says of the CNI's pair, read from both
/// ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairRead {
    /// No `eth0` there (no network, or a CNI that names it otherwise).
    NoPodInterface,
    /// `eth0`, the id the node's namespace has in the pod's (`None`: the
    /// pod's namespace has none for it: nothing leads there), and the
    /// node's interface at the index `eth0` names as its peer, if any.
    Read { pod_end: Link, node_id_in_pod: Option<i32>, host_end: Option<Link> },
    /// It could not be read, and why.
    Failed(String),
}

/// The host end of a pod's CNI pair, if `read` shows one: `eth0` is a
/// veth or a netkit peer whose other end is in the node's namespace, and
/// that end (a veth, or the netkit pair's primary) names `eth0` and the
/// pod's namespace (`pod_nsid`: its id in the node's) back.
pub fn host_end(read: &PairRead, pod_nsid: i32) -> Option<&Link> {
    let PairRead::Read { pod_end, node_id_in_pod: Some(node), host_end: Some(host) } = read else { return None };
    let driver_pairs = match pod_end.driver.as_str() {
        "veth" => host.driver == "veth",
        "netkit" => host.driver == "netkit" && host.netkit_primary != Some(false),
        _ => false,
    };
    (driver_pairs
        && pod_end.peer_nsid == Some(*node)
        && pod_end.peer_ifindex == Some(host.ifindex)
        && host.peer_nsid == Some(pod_nsid)
        && host.peer_ifindex == Some(pod_end.ifindex))
    .then_some(host)
}

/// A host interface as the pods' section lists it.
pub fn interface_of(l: &Link) -> Interface {
    Interface {
        ifindex: l.ifindex,
        name: l.name.clone(),
        driver: l.driver.clone(),
        programs: Vec::new(),
        errors: Vec::new(),
    }
}

/// Each pod and the host ends of the CNI pairs into its namespaces
/// (`pairs`: what each namespace, by its id in the node's, says).
pub fn pods_on_pairs(pods: Vec<PodProbe>, pairs: &HashMap<i32, PairRead>) -> Vec<PodNet> {
    pods.into_iter()
        .map(|p| {
            let net = match p.netns {
                NetnsProbe::NoProcess => Net::NoProcess,
                NetnsProbe::Host => Net::HostNetwork,
                NetnsProbe::Unreadable(reason) => Net::Unreadable { reason },
                NetnsProbe::Own { nsids } => {
                    // Its sandbox's namespace first: a failure to read it
                    // leaves the pod unread; others' are only left out.
                    let failed = nsids.first().and_then(|n| match pairs.get(n) {
                        Some(PairRead::Failed(why)) => Some(why.clone()),
                        _ => None,
                    });
                    let ends: Vec<Interface> = nsids
                        .iter()
                        .filter_map(|n| pairs.get(n).and_then(|r| host_end(r, *n)))
                        .map(interface_of)
                        .collect();
                    match (failed, ends.is_empty()) {
                        (Some(reason), _) => Net::Unreadable { reason },
                        (None, true) => Net::NoHostInterface,
                        (None, false) => Net::Interfaces { interfaces: ends },
                    }
                }
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
        }
    }

    fn read(pod_end: Link, host_end: Option<Link>) -> PairRead {
        PairRead::Read { pod_end, node_id_in_pod: Some(0), host_end }
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

    #[test]
    fn a_pod_gets_the_host_end_of_its_eth0_pair() {
        let pairs = HashMap::from([
            (4, read(eth0("veth", 5), Some(host(5, "lxc0123", "veth", 4)))),
            (6, read(eth0("netkit", 7), Some(host(7, "lxc4567", "netkit", 6)))),
            (8, PairRead::NoPodInterface),
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
        assert_eq!(pods[4].net, Net::NoHostInterface, "no eth0: ipvlan, macvlan, or no network");
        assert_eq!(pods[5].net, Net::NoProcess);
    }

    /// Issue 47, H1: a pod's own pair, one end moved into the node's
    /// namespace carrying a program named like a CNI's, is not its
    /// interface: it is not `eth0`'s other end.
    #[test]
    fn a_pair_a_pod_moved_into_the_nodes_namespace_is_not_its_interface() {
        // eth0's other end is 5; the pod's own pair ends at 9 in the node.
        let moved = host(9, "cali-fake", "veth", 4);
        assert_eq!(host_end(&read(eth0("veth", 5), Some(moved)), 4), None, "eth0 does not name it");
        // The host end that eth0 names, which names another namespace back.
        assert_eq!(host_end(&read(eth0("veth", 5), Some(host(5, "lxc", "veth", 3))), 4), None);
        // ... or another index there.
        let mut other = host(5, "lxc", "veth", 4);
        other.peer_ifindex = Some(3);
        assert_eq!(host_end(&read(eth0("veth", 5), Some(other)), 4), None);
    }

    /// An `eth0` that is a pair into another pod's namespace, not the
    /// node's (the pod made it, or another pod planted it), leads nowhere
    /// on the node.
    #[test]
    fn an_eth0_whose_other_end_is_not_in_the_nodes_namespace_leads_nowhere() {
        let mut into_other = eth0("veth", 5);
        into_other.peer_nsid = Some(7);
        assert_eq!(host_end(&read(into_other, Some(host(5, "lxc", "veth", 4))), 4), None);
        // A netkit pair read from its primary's side in the pod.
        let mut primary = eth0("netkit", 5);
        primary.netkit_primary = Some(true);
        let mut peer = host(5, "nk", "netkit", 4);
        peer.netkit_primary = Some(false);
        assert_eq!(host_end(&read(primary, Some(peer)), 4), None, "the node's end must be the primary");
        // The node's namespace has no id in the pod's: nothing leads there.
        let r =
            PairRead::Read { pod_end: eth0("veth", 5), node_id_in_pod: None, host_end: Some(host(5, "l", "veth", 4)) };
        assert_eq!(host_end(&r, 4), None);
    }

    /// Issue 47, M1: a pod's namespace its sandbox's process is in that
    /// could not be read leaves the pod unread (a warning, never a verdict);
    /// one of a container's own is only left out.
    #[test]
    fn a_pod_whose_sandbox_namespace_could_not_be_read_is_unread() {
        let pairs = HashMap::from([
            (4, PairRead::Failed("RTM_GETLINK: timed out".into())),
            (5, read(eth0("veth", 5), Some(host(5, "lxc", "veth", 5)))),
        ]);
        let pods = pods_on_pairs(vec![pod("a", own(&[4, 5])), pod("b", own(&[5, 4]))], &pairs);
        assert_eq!(pods[0].net, Net::Unreadable { reason: "RTM_GETLINK: timed out".into() });
        assert_eq!(names(&pods[1]), ["lxc"]);
    }
}
