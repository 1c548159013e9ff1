//! Pods to their host-side interfaces, from what was read: each pod's
//! network namespaces (by the ids they have in the host's) and the host's
//! links. Pure.
//!
//! The host side is what counts: a pod controls its own namespace (names,
//! fake devices, its own tc programs on `eth0`), not the host's. Every host
//! pair into any of a pod's namespaces is the pod's: a pod that puts a
//! process in a namespace of its own still has its pause process, and the
//! CNI's pair, in the namespace the CNI made.

use std::collections::HashMap;

use super::namespaces::NetnsProbe;
use super::netlink::Link;
use crate::snapshot::net::{Net, PodNet};

/// The most host interfaces one pod is read with: a CNI gives a pod one or
/// two; a pod with CAP_NET_ADMIN can make thousands in the host's namespace
/// through the netns id its own has for it.
pub const INTERFACES_MAX: usize = 8;

/// What was read of one pod before its interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProbe {
    pub pod_uid: String,
    pub cgroup: String,
    pub started: Option<u64>,
    pub netns: NetnsProbe,
}

/// Each pod and the interfaces that lead into its namespaces (veth or
/// netkit pairs; a netkit pair through its primary).
pub fn pods_on_links(pods: Vec<PodProbe>, links: &[Link]) -> Vec<PodNet> {
    let mut by_nsid: HashMap<i32, Vec<&Link>> = HashMap::new();
    for l in links {
        let pair = match l.driver.as_str() {
            "veth" => true,
            "netkit" => l.netkit_primary != Some(false),
            _ => false,
        };
        if let (true, Some(nsid)) = (pair, l.peer_nsid) {
            by_nsid.entry(nsid).or_default().push(l);
        }
    }
    pods.into_iter()
        .map(|p| {
            let net = match p.netns {
                NetnsProbe::NoProcess => Net::NoProcess,
                NetnsProbe::Host => Net::HostNetwork,
                NetnsProbe::Unreadable(reason) => Net::Unreadable { reason },
                NetnsProbe::Own { nsids } => {
                    let links: Vec<&Link> = nsids.iter().filter_map(|n| by_nsid.get(n)).flatten().copied().collect();
                    match links.len() {
                        0 => Net::NoHostInterface,
                        n if n > INTERFACES_MAX => Net::Unreadable {
                            reason: format!("{n} host interfaces lead into it, more than {INTERFACES_MAX}"),
                        },
                        _ => Net::Interfaces { interfaces: links.into_iter().map(super::interface_of).collect() },
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

    fn link(ifindex: u32, name: &str, driver: &str, nsid: Option<i32>) -> Link {
        Link {
            ifindex,
            name: name.into(),
            driver: driver.into(),
            peer_nsid: nsid,
            netkit_primary: (driver == "netkit").then_some(true),
            xdp_prog_id: None,
        }
    }

    fn pod(uid: &str, netns: NetnsProbe) -> PodProbe {
        PodProbe { pod_uid: uid.into(), cgroup: format!("/kubepods/pod{uid}"), started: Some(1), netns }
    }

    fn own(nsids: &[i32]) -> NetnsProbe {
        NetnsProbe::Own { nsids: nsids.to_vec() }
    }

    fn names(p: &PodNet) -> Vec<&str> {
        match &p.net {
            Net::Interfaces { interfaces: i } => i.iter().map(|i| i.name.as_str()).collect(),
            _ => vec![],
        }
    }

    #[test]
    fn a_pod_gets_the_host_pairs_that_lead_into_its_namespace() {
        let links = [
            link(1, "lo", "", None),
            link(2, "eth0", "", None),
            link(5, "lxc0123", "veth", Some(0)),
            link(6, "veth9abc", "veth", Some(1)),
            link(7, "lxc4567", "netkit", Some(2)),
            // A pair inside the host (Calico's tcx probe): no other side.
            link(8, "testTcx", "veth", None),
            // A tunnel's link-netnsid is no pod.
            link(9, "vxlan0", "vxlan", Some(1)),
        ];
        let pods = pods_on_links(
            vec![
                pod("a", own(&[0])),
                pod("b", own(&[1])),
                pod("c", own(&[2])),
                pod("d", NetnsProbe::Host),
                pod("e", own(&[])),
                pod("f", own(&[3])),
                pod("g", NetnsProbe::NoProcess),
            ],
            &links,
        );
        assert_eq!(names(&pods[0]), ["lxc0123"]);
        assert_eq!(names(&pods[1]), ["veth9abc"]);
        assert_eq!(names(&pods[2]), ["lxc4567"]);
        assert_eq!(pods[3].net, Net::HostNetwork);
        assert_eq!(pods[4].net, Net::NoHostInterface, "no id here: nothing of the host leads there");
        assert_eq!(pods[5].net, Net::NoHostInterface);
        assert_eq!(pods[6].net, Net::NoProcess);
    }

    /// A netkit pair is read through its primary; a peer in the host (the
    /// pair turned round) leads nowhere.
    #[test]
    fn a_netkit_peer_in_the_host_is_not_the_pods_interface() {
        let mut peer = link(7, "nk-peer", "netkit", Some(0));
        peer.netkit_primary = Some(false);
        let pods = pods_on_links(vec![pod("a", own(&[0]))], &[peer]);
        assert_eq!(pods[0].net, Net::NoHostInterface);
    }

    /// A pod that put a process in a namespace of its own keeps the pair
    /// the CNI made into its first one: it is judged by that.
    #[test]
    fn a_pod_with_several_namespaces_has_every_pair_into_any_of_them() {
        let links = [link(5, "veth1", "veth", Some(4)), link(6, "veth2", "veth", Some(4))];
        let pods = pods_on_links(vec![pod("a", own(&[9, 4]))], &links);
        assert_eq!(names(&pods[0]), ["veth1", "veth2"]);
    }

    /// A pod with CAP_NET_ADMIN makes pairs into its namespace from the
    /// host's: past INTERFACES_MAX it is not read, never read at length.
    #[test]
    fn a_pod_with_too_many_host_pairs_is_not_read() {
        let links: Vec<Link> = (0..20).map(|i| link(10 + i, &format!("v{i}"), "veth", Some(4))).collect();
        let pods = pods_on_links(vec![pod("a", own(&[4]))], &links);
        assert!(matches!(&pods[0].net, Net::Unreadable { reason } if reason.contains("more than 8")), "{:?}", pods[0]);
    }
}
