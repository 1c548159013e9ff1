//! `pod_outside_datapath`: a pod whose host-side interface carries none of
//! the CNI's per-endpoint programs, on a node whose other pods' interfaces
//! carry them. Its traffic gets no policy, no load balancing and no
//! encryption from the CNI. The seeds' case: DaemonSet pods that tolerate
//! every `NoExecute` taint were scheduled before Cilium's agent was ready
//! on a new node, got their network from the previous CNI, and were never
//! managed by Cilium.
//!
//! The node runs an owner's eBPF datapath when its configuration says so
//! (`scan::net::config`: the owner's privileged agent runs, Calico's with
//! its eBPF dataplane on, or the node's CNI configuration names it), never
//! because a pod's interface carries a program of some name: a pod with
//! CAP_NET_ADMIN and no user namespace can move a veth end carrying any
//! program into the node's namespace (issue 47, H1). A pod is managed when
//! the host end of its `eth0` pair (`scan::net::map`, which a pod cannot
//! forge for another pod) carries the owner's entry program on the hook
//! that sees what the pod sends (tc or tcx ingress on the host side, or
//! netkit's peer). hostNetwork pods have no interface of their own and are
//! never judged; a pod whose interface could not be read is
//! `pod_network_unreadable`, never a verdict.
//!
//! A pod's entry program counts as the owner's only when proven so
//! (`owner::hooks`: its link pinned in the owner's directory, a map the
//! owner pinned, its agent holding it), never by its name: a pod with
//! CAP_BPF names its programs as it likes (issue 47 red team, F2).
//!
//! With no pod carrying its programs, that is one finding for the node
//! (the datapath is down, or every pod predates it), never one per pod: a
//! process merely named like the agent cannot page for every pod (F4). A
//! pod UID seen at two pod cgroups is never a critical (F3).
//!
//! When: a pod that started before the owner's agent is judged at once (the
//! seeds' case); one younger than `endpoint_grace` that started after it
//! waits, since the CNI adds an endpoint a moment after the sandbox exists.

use super::*;
use crate::owner::registry::DATAPATHS;
use crate::snapshot::net::{EndpointSeen, Interface, Net, PodNet};

pub(super) const EXPLANATION: &str = "these pods' interfaces carry none of the CNI's per-endpoint programs while other pods' do: their traffic gets no policy, no load balancing and no encryption from the CNI.";

/// The owners whose eBPF datapath the node runs: those its configuration
/// says it runs (`scan::net::config`: the owner's privileged agent, its
/// own setting, the node's CNI configuration). Never a program's name on
/// some pod's interface: a pod with CAP_NET_ADMIN and no user namespace
/// can move a veth end carrying any program into the node's namespace
/// (issue 47, H1).
pub fn datapaths(snap: &Snapshot) -> Vec<Owner> {
    let nets = &snap.pod_networks;
    DATAPATHS.iter().map(|d| d.owner).filter(|o| nets.configured.iter().any(|c| c.owner == *o)).collect()
}

pub(super) fn outside_datapath(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let nets = &snap.pod_networks;
    for owner in datapaths(snap) {
        let managed = nets.pods.iter().filter(|p| p.carries(owner)).count();
        // The owner's agent running now, and when the oldest started.
        let agent_started = nets.agents.iter().filter(|a| a.owner == owner).filter_map(|a| a.started).min();
        let agent_runs = snap.agents.iter().any(|a| a.owner == owner && a.privileged);
        let mut outside = Vec::new();
        // Pods whose eth0 carries it and that have other ways into the node.
        let mut around = Vec::new();
        for p in &nets.pods {
            let Net::Interfaces { interfaces, other_links_into_node, .. } = &p.net else { continue };
            if p.unread() {
                continue;
            }
            if p.carries(owner) {
                if *other_links_into_node > 0 {
                    around.push((p, *other_links_into_node));
                }
                continue;
            }
            let before_agent = matches!((p.started, agent_started), (Some(pod), Some(agent)) if pod < agent);
            // The same interface carried it at an earlier read (a sandbox
            // made again has a new one, and its grace).
            let lost = interfaces.iter().any(|i| {
                nets.had_programs.contains(&EndpointSeen { pod_uid: p.pod_uid.clone(), owner, ifindex: i.ifindex })
            });
            let young = p.started.is_none_or(|s| nets.read_at.saturating_sub(s) < cx.policy.endpoint_grace.as_secs());
            if young && !before_agent && !lost {
                continue; // its endpoint may be a moment away
            }
            let when = if lost {
                When::Lost
            } else if before_agent {
                When::BeforeAgent
            } else {
                When::Late
            };
            outside.push((p, when));
        }
        out.extend(around.into_iter().map(|(p, n)| around_finding(cx, p, owner, n)));
        let said = nets.configured.iter().find(|c| c.owner == owner).map(|c| c.source.as_str());
        // The owner's own state on the node (its pins or pinned maps): what
        // a process merely named like its agent cannot make.
        let state = snap.pins.iter().any(|p| p.owner == owner) || snap.owner_maps.iter().any(|m| m.owner == owner);
        // No pod carries it: the datapath is down on this node (or every pod
        // predates it), not missing from some pods; and a process named
        // like its agent alone must not page for every pod (issue 47 red
        // team, F4). One finding for the node.
        if managed == 0 {
            if let (Some(said), false) = (said, outside.is_empty()) {
                out.push(node_finding(cx, owner, said, &outside, agent_runs, state));
            }
            continue;
        }
        // A UID at more than one pod cgroup: one of them was made by someone
        // who can write the cgroup tree, and "delete the pod" would name the
        // real one (issue 47 red team, F3). Said, never a critical.
        let mut uids: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &nets.pods {
            *uids.entry(p.pod_uid.as_str()).or_default() += 1;
        }
        out.extend(outside.into_iter().map(|(p, when)| {
            let twice = uids.get(p.pod_uid.as_str()).is_some_and(|n| *n > 1);
            // Critical only with the owner's own state on the node too (red
            // team N3: a fake agent with one forged "managed" pod).
            finding(cx, p, owner, managed, said, agent_runs && state && !twice, when, twice)
        }))
    }
}

/// A pod whose `eth0` carries the owner's program and that has other
/// interfaces leading into the node's namespace (issue 47 red team, N2): a
/// warning, never a page (a Multus secondary network is outside the CNI's
/// datapath by design).
fn around_finding(cx: &Ctx<'_>, p: &PodNet, owner: Owner, n: usize) -> Finding {
    let title = owner.title();
    let message = format!(
        "its eth0 carries {title}'s per-endpoint program, but {n} other interface{s} of its network namespace \
         lead{v} into the node's (a macvlan or ipvlan on the node's NIC, a veth, a tunnel): what it sends through \
         {them} bypasses {title}'s policy, load balancing and encryption.",
        s = if n == 1 { "" } else { "s" },
        v = if n == 1 { "s" } else { "" },
        them = if n == 1 { "it" } else { "them" },
    );
    let remediation = format!(
        "if that is a secondary network you attached (Multus), it is outside {title}'s datapath by design; \
         otherwise find who made it (`kubectl debug` into the pod's network: `ip -d link`, `ip route`), and deny \
         CAP_NET_ADMIN to the pod (Pod Security baseline) or run it with `hostUsers: false`."
    );
    let mut f =
        Finding::new(Kind::PodOutsideDatapath, Severity::Warning, message, remediation).at_cgroup(&p.cgroup, cx.snap);
    f.owner = Some(owner);
    f.pod_uid = Some(p.pod_uid.clone());
    f.count = Some(1);
    f.interfaces = p.interfaces().iter().map(InterfaceRef::of).collect();
    f.pods.extend(pod_named(cx.snap, &p.pod_uid));
    f
}

/// Why a pod is judged now.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    /// It started before the owner's agent.
    BeforeAgent,
    /// Its interface carried the owner's program at an earlier read.
    Lost,
    /// Older than --endpoint-grace, and never had it.
    Late,
}

/// Where a pod's network came from when its address is outside every pod
/// CIDR of its family the owner's running agent is configured with
/// (rke2#10360: pods that got podman's 10.88.0.x before Cilium was there).
/// Link-local addresses, on every interface, say nothing.
fn outside_pod_cidrs(snap: &Snapshot, owner: Owner, p: &PodNet) -> Option<String> {
    let Net::Interfaces { addresses, .. } = &p.net else { return None };
    let agent = snap.agents.iter().find(|a| a.owner == owner && a.privileged && !a.intent.pod_cidrs.is_empty())?;
    let cidrs: Vec<ipnet::IpNet> = agent.intent.pod_cidrs.iter().filter_map(|c| c.trim().parse().ok()).collect();
    let link_local = |a: &std::net::IpAddr| match a {
        std::net::IpAddr::V4(v4) => v4.is_link_local(),
        std::net::IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    };
    // Judged per family, and only when none of the pod's addresses of
    // that family is inside: an address a pod adds to its own eth0 cannot
    // make a CNI-given one look foreign (red team round 8, S4).
    let judged = |a: &&std::net::IpAddr| -> bool {
        let family: Vec<&ipnet::IpNet> = cidrs.iter().filter(|c| c.addr().is_ipv4() == a.is_ipv4()).collect();
        !family.is_empty()
            && !addresses.iter().any(|b| b.is_ipv4() == a.is_ipv4() && family.iter().any(|c| c.contains(b)))
    };
    let outside = addresses.iter().filter(|a| !link_local(a)).find(judged)?;
    let family: Vec<String> =
        cidrs.iter().filter(|c| c.addr().is_ipv4() == outside.is_ipv4()).map(ToString::to_string).collect();
    let (s, list) = (if family.len() == 1 { "" } else { "s" }, family.join(", "));
    let title = owner.title();
    Some(match owner {
        // Calico's environment seeds its first pool only; others may exist.
        Owner::Calico => format!(
            " Its address {outside} is outside the IP pool{s} {list} in calico-node's environment \
             (CALICO_IPV4POOL_CIDR/CALICO_IPV6POOL_CIDR; the cluster may have other pools): its network may have \
             come from another CNI configuration."
        ),
        _ => format!(
            " Its address {outside} is outside {title}'s pod CIDR{s} {list} (its configuration): its network came \
             from another CNI configuration, not {title}'s."
        ),
    })
}

fn entry_program(owner: Owner) -> String {
    DATAPATHS.iter().find(|d| d.owner == owner).map(|d| d.entry.shown()).unwrap_or_default()
}

#[allow(clippy::too_many_arguments, reason = "one finding from each fact the rule weighed")]
fn finding(
    cx: &Ctx<'_>,
    p: &PodNet,
    owner: Owner,
    managed: usize,
    said: Option<&str>,
    critical: bool,
    when: When,
    uid_twice: bool,
) -> Finding {
    let snap = cx.snap;
    let interfaces = p.interfaces();
    let shown: Vec<String> = interfaces.iter().map(|i| format!("{} ({})", i.name, i.driver)).collect();
    let mut when = match when {
        When::BeforeAgent => format!(" It started before {}'s agent.", owner.title()),
        When::Lost => " Its interface carried them before: they were detached.".to_owned(),
        When::Late => String::new(),
    };
    if uid_twice {
        when.push_str(&format!(
            " Its UID {} is at more than one pod cgroup on this node: one of them was made by someone who can write \
             the cgroup tree; check which is the runtime's (`crictl inspectp`) before deleting anything.",
            p.pod_uid
        ));
    }
    let _ = said;
    let others = match managed {
        1 => "while 1 other pod's do".to_owned(),
        n => format!("while {n} other pods' do"),
    };
    // What happens to its traffic: a netkit pair whose peer blackholes
    // without a program (as Cilium makes them) cuts the pod off; otherwise
    // it bypasses the CNI. And where its interface came from, when a
    // bridge says so (another CNI's: cni-podman0, cni0, docker0).
    let cut_off = interfaces.iter().any(|i| i.netkit_peer_policy == Some("blackhole"));
    let fate = if cut_off {
        format!(
            "its netkit peer policy is blackhole, so with no program there everything the pod sends is dropped: the \
             pod is cut off from the network, not bypassing {}",
            owner.title()
        )
    } else {
        format!("its traffic bypasses {}'s policy, load balancing and encryption", owner.title())
    };
    let bridges: Vec<&str> = interfaces.iter().filter_map(|i| i.bridge.as_deref()).collect();
    let origin = match bridges.first() {
        Some(b) => format!(
            " Its interface is a port of bridge {b}: its network came from another CNI configuration (a bridge plugin's), \
             not {}'s.",
            owner.title()
        ),
        None => outside_pod_cidrs(snap, owner, p).unwrap_or_default(),
    };
    let message = format!(
        "its interface {} carries none of {}'s per-endpoint programs ({} on what the pod sends), {others}: {fate}.{origin}{when}",
        shown.join(", "),
        owner.title(),
        entry_program(owner),
    );
    let remediation = match owner {
        Owner::Cilium => {
            "delete the pod (not a container restart) so that it is made again under Cilium: `kubectl delete pod -n <namespace> <pod>`. So that it does not happen again, turn on `operator.unmanagedPodWatcher.restart` with a `--pod-restart-selector` that excludes the previous CNI's own pods (e.g. `app.kubernetes.io/name!=aws-node`), and check the pod's tolerations: one that tolerates every `NoExecute` taint lets it start before the CNI is ready."
        }
        _ => {
            "delete the pod (not a container restart) so that it is made again under the CNI: `kubectl delete pod -n <namespace> <pod>`. Check its tolerations: one that tolerates every `NoExecute` taint lets it start before the CNI is ready."
        }
    };
    let severity = if critical { Severity::Critical } else { Severity::Warning };
    let mut f =
        Finding::new(Kind::PodOutsideDatapath, severity, message, remediation.to_owned()).at_cgroup(&p.cgroup, snap);
    f.owner = Some(owner);
    f.pod_uid = Some(p.pod_uid.clone());
    f.count = Some(1);
    f.interfaces = interfaces.iter().map(InterfaceRef::of).collect();
    f.pods.extend(pod_named(snap, &p.pod_uid));
    f
}

/// The most pods and interfaces one node-level finding lists (`count` has
/// them all).
pub(super) const NODE_SHOWN: usize = 16;

/// One finding for the node: its configuration says it runs `owner`'s
/// datapath and no pod carries it. With its agent not running, the
/// datapath is down (a warning: nothing pages for a stopped agent here).
/// With its agent running, every pod predates it, or the agent attaches
/// nothing: critical when the owner's own state is on the node too (its
/// pins or pinned maps, which a process merely named like its agent cannot
/// make), else a warning that says so (`state`).
fn node_finding(
    cx: &Ctx<'_>,
    owner: Owner,
    said: &str,
    outside: &[(&PodNet, When)],
    agent_runs: bool,
    state: bool,
) -> Finding {
    let snap = cx.snap;
    let title = owner.title();
    let n = outside.len();
    let (pods, their, are) = if n == 1 { ("pod", "its", "is") } else { ("pods", "their", "are") };
    let (why, severity, remediation) = match (agent_runs, state) {
        (false, _) => (
            format!("{title}'s agent is not running"),
            Severity::Warning,
            format!(
                "find why {title}'s agent is not running on this node (its pod's status and logs: `kubectl -n \
                 kube-system get pods -o wide --field-selector spec.nodeName=<node>`). Once it runs, cgaudit names \
                 each pod it does not manage: delete those (not a container restart) so that they are made again \
                 under {title}. If {title} is not meant to run here, the node's CNI configuration is stale: remove it."
            ),
        ),
        (true, true) => (
            format!("{title}'s agent runs"),
            Severity::Critical,
            format!(
                "every pod listed started before {title} managed this node, or its agent attaches nothing: check its \
                 logs for endpoint errors (`cilium-dbg endpoint list` for Cilium), then delete the pods (not a \
                 container restart) so that they are made again under {title}: `kubectl delete pod -n <namespace> \
                 <pod>`."
            ),
        ),
        (true, false) => (
            format!(
                "a process named like {title}'s agent runs, yet nothing of {title}'s datapath is pinned on this node"
            ),
            Severity::Warning,
            format!(
                "find what that process is (`ps -o pid,comm,args -p <pid>`, its pod): {title}'s own agent pins its \
                 maps and links in /sys/fs/bpf. If {title} is meant to run here, check its agent's logs; if not, the \
                 process is not {title}'s."
            ),
        ),
    };
    let message = format!(
        "{said}, but no pod's interface carries {title}'s per-endpoint programs ({} on what a pod sends) and {why}: \
         the {n} {pods} with an interface of {their} own {are} outside {title}'s datapath (no policy, load balancing \
         or encryption from {title}).",
        entry_program(owner),
    );
    let mut f = Finding::new(Kind::PodOutsideDatapath, severity, message, remediation);
    f.owner = Some(owner);
    f.count = Some(n as u64);
    for (p, _) in outside.iter().take(NODE_SHOWN) {
        f.interfaces.extend(p.interfaces().iter().map(InterfaceRef::of));
        f.pods.extend(pod_named(snap, &p.pod_uid));
    }
    f
}

/// A pod and its containers, named like those of pods_without_socket_lb.
pub(super) fn pod_named(snap: &Snapshot, uid: &str) -> Option<pods_without::UncoveredPod> {
    let pod = snap.pods.iter().find(|q| q.pod_uid == uid)?;
    let named = snap.names.pod(&pod.pod_uid, None);
    Some(pods_without::UncoveredPod {
        uid: pod.pod_uid.clone(),
        namespace: named.map(|n| n.namespace.clone()),
        name: named.map(|n| n.name.clone()),
        cgroup: pod.cgroup.clone(),
        hooks: vec![],
        containers: pod
            .containers
            .iter()
            .map(|c| {
                let id = attribute(&c.cgroup).container_id;
                let name = id.as_deref().and_then(|id| snap.names.container(id)).map(str::to_owned);
                pods_without::UncoveredContainer { id, name, cgroup: c.cgroup.clone(), hooks: vec![] }
            })
            .collect(),
    })
}

/// An interface a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterfaceRef {
    pub name: String,
    pub ifindex: u32,
    pub driver: String,
}

impl InterfaceRef {
    pub(super) fn of(i: &Interface) -> InterfaceRef {
        InterfaceRef { name: i.name.clone(), ifindex: i.ifindex, driver: i.driver.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::snapshot::net::{AgentStart, Configured, IfHook, PodNetworks, ProgramOn, Via};

    const NOW: u64 = 1_000_000;

    /// A program proven its owner's (its link pinned), if named like an
    /// owner's entry program.
    fn prog(name: &str, hook: IfHook) -> ProgramOn {
        let mut p = ProgramOn::new(hook, 9, Via::Link { link_id: 3 });
        p.prog_name = name.into();
        p.owner = crate::owner::registry::datapath_of(name).map(|d| d.owner);
        p.proof = p.owner.map(|_| crate::snapshot::net::HookProof::LinkPinned);
        p
    }

    /// A program named anything, that nothing proves anyone's.
    fn forged(name: &str, hook: IfHook) -> ProgramOn {
        ProgramOn { prog_name: name.into(), ..ProgramOn::new(hook, 66, Via::Link { link_id: 8 }) }
    }

    fn pod(uid: &str, started: u64, programs: Vec<ProgramOn>) -> PodNet {
        PodNet {
            pod_uid: uid.into(),
            namespace: None,
            name: None,
            cgroup: format!("/kubepods/besteffort/pod{uid}"),
            started: Some(started),
            net: Net::Interfaces {
                other_links_into_node: 0,
                addresses: Vec::new(),
                interfaces: vec![Interface {
                    ifindex: 7,
                    name: format!("lxc{uid}"),
                    driver: "veth".into(),
                    programs,
                    errors: vec![],
                    netkit_peer_policy: None,
                    master: None,
                    bridge: None,
                }],
            },
        }
    }

    fn node_with(pods: Vec<PodNet>, agent_started: Option<u64>) -> Snapshot {
        let mut s = node();
        if let Some(t) = agent_started {
            agent(&mut s, Owner::Cilium);
            // Its maps, pinned at its start.
            s.owner_maps.push(crate::snapshot::OwnerMap { owner: Owner::Cilium, name: "cilium_lxc".into(), map_id: 4 });
            s.pod_networks.agents.push(AgentStart { owner: Owner::Cilium, pid: 7, started: Some(t) });
            s.pod_networks
                .configured
                .push(Configured { owner: Owner::Cilium, source: "cilium-agent runs (pid 7)".into() });
        }
        s.pod_networks = PodNetworks { read_at: NOW, pods, ..std::mem::take(&mut s.pod_networks) };
        s
    }

    fn judged(s: &Snapshot) -> Vec<(String, Severity)> {
        evaluate(s, &Policy::default())
            .into_iter()
            .filter(|f| f.kind == Kind::PodOutsideDatapath)
            .map(|f| (f.pod_uid.unwrap_or_default(), f.severity))
            .collect()
    }

    fn managed(uid: &str) -> PodNet {
        pod(uid, NOW - 3600, vec![prog("cil_from_container", IfHook::TcxIngress)])
    }

    #[test]
    fn a_pod_that_started_before_the_agent_is_outside_at_once() {
        let s = node_with(vec![managed("a"), pod("b", NOW - 20, vec![])], Some(NOW - 10));
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Critical)]);
        assert_eq!(datapaths(&s), [Owner::Cilium]);
    }

    #[test]
    fn a_young_pod_after_the_agent_waits_for_its_endpoint_then_is_judged() {
        let s = node_with(vec![managed("a"), pod("b", NOW - 5, vec![])], Some(NOW - 100));
        assert!(judged(&s).is_empty(), "within --endpoint-grace");
        let s = node_with(vec![managed("a"), pod("b", NOW - 31, vec![])], Some(NOW - 100));
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Critical)]);
    }

    /// The programs count only on what the pod sends, and only the
    /// owner's: the 15-byte kernel name is enough.
    #[test]
    fn only_the_owners_entry_program_on_what_the_pod_sends_counts() {
        let egress_only = pod("b", NOW - 3600, vec![prog("cil_from_container", IfHook::TcxEgress)]);
        let truncated = pod("c", NOW - 3600, vec![prog("cil_from_contai", IfHook::TcIngress)]);
        let other = pod("d", NOW - 3600, vec![prog("my_tracer", IfHook::TcxIngress)]);
        let s = node_with(vec![managed("a"), egress_only, truncated, other], Some(NOW - 7200));
        let uids: Vec<String> = judged(&s).into_iter().map(|(u, _)| u).collect();
        assert_eq!(uids, ["b", "d"]);
    }

    /// The daemon's memory: a young pod whose interface carried the
    /// program at an earlier read and lost it is judged at once.
    #[test]
    fn a_pod_that_lost_its_program_is_outside_at_once_however_young() {
        let mut s = node_with(vec![managed("a"), pod("b", NOW - 5, vec![])], Some(NOW - 100));
        assert!(judged(&s).is_empty());
        s.pod_networks.had_programs.insert(EndpointSeen { pod_uid: "b".into(), owner: Owner::Cilium, ifindex: 7 });
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Critical)]);
        let f = evaluate(&s, &Policy::default()).into_iter().find(|f| f.kind == Kind::PodOutsideDatapath).unwrap();
        assert!(f.message.contains("they were detached"), "{}", f.message);
    }

    #[test]
    fn without_an_ebpf_datapath_no_pod_is_outside_it() {
        let s = node_with(vec![pod("a", 1, vec![]), pod("b", 1, vec![prog("my_tracer", IfHook::TcIngress)])], None);
        assert!(judged(&s).is_empty());
        assert!(datapaths(&s).is_empty());
    }

    #[test]
    fn host_network_pods_and_unreadable_interfaces_are_never_judged() {
        let mut host = pod("h", 1, vec![]);
        host.net = Net::HostNetwork;
        let mut unreadable = pod("u", 1, vec![]);
        unreadable.interfaces_mut()[0].errors.push("tc_ingress: EPERM".into());
        let s = node_with(vec![managed("a"), host, unreadable], Some(NOW - 10));
        assert!(judged(&s).is_empty());
    }

    /// Its agent not running: the datapath's programs stay on the managed
    /// pods, the unmanaged one is a warning, not an outage.
    #[test]
    fn without_the_agent_running_it_is_a_warning() {
        let mut s = node_with(vec![managed("a"), pod("b", NOW - 3600, vec![])], None);
        configured(&mut s, "/etc/cni/net.d/05-cilium.conflist names the cilium-cni plugin");
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Warning)]);
    }

    /// Issue 47, H1: on a node not configured for an eBPF datapath (Calico
    /// with iptables), a pod whose interface carries a program named
    /// `cali_tc_preamble` (one it moved into the node's namespace itself)
    /// does not make every other pod "outside Calico's datapath".
    #[test]
    fn a_program_named_like_an_owners_on_one_pod_does_not_make_the_node_its_datapath() {
        let mut s = node_with(
            vec![
                pod("a", NOW - 3600, vec![prog("cali_tc_preamble", IfHook::TcxIngress)]),
                pod("b", NOW - 3600, vec![]),
            ],
            None,
        );
        agent(&mut s, Owner::Calico);
        assert!(datapaths(&s).is_empty());
        assert!(judged(&s).is_empty(), "{:?}", judged(&s));
    }

    fn configured(s: &mut Snapshot, source: &str) {
        s.pod_networks.configured.push(Configured { owner: Owner::Cilium, source: source.into() });
    }

    /// The node's CNI configuration names Cilium, its agent is not running
    /// and no pod carries its programs: one finding for the node, not one
    /// per pod; young pods are not counted yet.
    #[test]
    fn a_configured_datapath_that_no_pod_carries_without_its_agent_is_one_node_finding() {
        let mut s =
            node_with(vec![pod("a", NOW - 3600, vec![]), pod("b", NOW - 600, vec![]), pod("c", NOW - 5, vec![])], None);
        assert!(judged(&s).is_empty(), "nothing says the node runs a datapath");
        configured(&mut s, "/etc/cni/net.d/05-cilium.conflist names the cilium-cni plugin");
        assert_eq!(datapaths(&s), [Owner::Cilium]);
        let found: Vec<Finding> =
            evaluate(&s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect();
        let [f] = &found[..] else { panic!("one node finding: {found:?}") };
        assert_eq!((f.severity, f.pod_uid.as_deref(), f.count), (Severity::Warning, None, Some(2)));
        assert!(
            f.message.starts_with("/etc/cni/net.d/05-cilium.conflist names the cilium-cni plugin, but no pod"),
            "{}",
            f.message
        );
        assert!(f.remediation.contains("not running"), "{}", f.remediation);
        assert_eq!(f.interfaces.len(), 2);
    }

    /// Issue 47 red team, F4: its agent runs and no pod carries its
    /// programs: one finding for the node, never one critical per pod.
    /// Critical only with the owner's own state on the node (its pins or
    /// pinned maps): a process merely named `cilium-agent` makes a warning
    /// that says so.
    #[test]
    fn a_running_agent_whose_programs_no_pod_carries_is_one_node_finding() {
        let mut s = node_with(vec![pod("a", NOW - 3600, vec![]), pod("b", NOW - 5, vec![])], Some(NOW - 60));
        // Nothing of Cilium pinned: a process merely named like its agent.
        s.owner_maps.clear();
        configured(&mut s, "cilium-agent runs (pid 7)");
        let found = |s: &Snapshot| -> Vec<Finding> {
            evaluate(s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect()
        };
        let f = found(&s);
        let [f] = &f[..] else { panic!("one node finding: {f:?}") };
        assert_eq!((f.severity, f.pod_uid.as_deref(), f.count), (Severity::Warning, None, Some(1)));
        assert!(
            f.message.contains("a process named like Cilium's agent runs, yet nothing of Cilium's datapath is pinned"),
            "{}",
            f.message
        );
        s.owner_maps.push(crate::snapshot::OwnerMap { owner: Owner::Cilium, name: "cilium_lxc".into(), map_id: 4 });
        let f = found(&s);
        let [f] = &f[..] else { panic!("one node finding: {f:?}") };
        assert_eq!((f.severity, f.count), (Severity::Critical, Some(1)));
        assert!(f.message.contains("and Cilium's agent runs"), "{}", f.message);
    }

    /// Issue 47 red team, N3: with one pod managed, the others page only
    /// where the owner's own state is on the node (a fake agent holding a
    /// forged program on one pod made every other pod critical).
    #[test]
    fn without_the_owners_state_a_pod_outside_is_a_warning() {
        let mut s = node_with(vec![managed("a"), pod("b", NOW - 3600, vec![])], Some(NOW - 7200));
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Critical)]);
        s.owner_maps.clear();
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Warning)]);
    }

    /// Issue 47 red team, N2: a managed pod that also leads into the node
    /// another way (a macvlan on the node's NIC) is said, as a warning.
    #[test]
    fn a_managed_pod_with_another_way_into_the_node_is_a_warning() {
        let mut around = managed("b");
        if let Net::Interfaces { other_links_into_node, .. } = &mut around.net {
            *other_links_into_node = 1;
        }
        let s = node_with(vec![managed("a"), around], Some(NOW - 7200));
        let f: Vec<Finding> =
            evaluate(&s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect();
        let [f] = &f[..] else { panic!("{f:?}") };
        assert_eq!((f.severity, f.pod_uid.as_deref()), (Severity::Warning, Some("b")));
        assert!(
            f.message.contains("1 other interface of its network namespace leads into the node's"),
            "{}",
            f.message
        );
    }

    /// Issue 47 red team, F2: a pod's interface carrying a program named
    /// `cil_from_container` that nothing proves Cilium's (a pair the pod
    /// made and moved into the node) is outside the datapath.
    #[test]
    fn an_entry_program_nothing_proves_the_owners_does_not_make_a_pod_managed() {
        let forger = pod("b", NOW - 3600, vec![forged("cil_from_container", IfHook::TcxIngress)]);
        let s = node_with(vec![managed("a"), forger], Some(NOW - 7200));
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Critical)]);
    }

    /// Issue 48: a netkit pod whose peer policy is blackhole (as Cilium
    /// makes them) without the program is cut off, and the text says so;
    /// a veth on another CNI's bridge says where its network came from.
    #[test]
    fn a_blackholed_netkit_pod_is_cut_off_and_a_bridged_one_names_its_bridge() {
        let mut nk = pod("b", NOW - 3600, vec![]);
        nk.interfaces_mut()[0].netkit_peer_policy = Some("blackhole");
        let mut bridged = pod("c", NOW - 3600, vec![]);
        bridged.interfaces_mut()[0].bridge = Some("cni-podman0".into());
        let s = node_with(vec![managed("a"), nk, bridged], Some(NOW - 7200));
        let f: Vec<Finding> =
            evaluate(&s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect();
        assert!(f[0].message.contains("the pod is cut off from the network, not bypassing Cilium"), "{}", f[0].message);
        assert!(f[1].message.contains("Its interface is a port of bridge cni-podman0"), "{}", f[1].message);
        assert!(f[1].message.contains("bypasses Cilium's policy"), "{}", f[1].message);
    }

    /// Issue 48: a veth pod on no bridge whose address is outside the pod
    /// CIDR Cilium's agent is configured with names where it came from;
    /// inside it, or with only a link-local address outside, nothing.
    #[test]
    fn a_pod_whose_address_is_outside_the_cnis_pod_cidr_says_so() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let with = |uid: &str, addresses: &[&str]| {
            let mut p = pod(uid, NOW - 3600, vec![]);
            if let Net::Interfaces { addresses: a, .. } = &mut p.net {
                *a = addresses.iter().map(|s| ip(s)).collect();
            }
            p
        };
        // d adds an outside address beside the one its CNI gave it.
        let pods = vec![
            managed("a"),
            with("b", &["10.88.0.5", "fe80::1"]),
            with("c", &["10.0.3.7", "fe80::2"]),
            with("d", &["10.0.3.8", "8.8.8.8"]),
        ];
        let mut s = node_with(pods, Some(NOW - 7200));
        agent(&mut s, Owner::Cilium).intent.pod_cidrs = vec!["10.0.0.0/16".into(), "fd00::/104".into()];
        let f: Vec<Finding> =
            evaluate(&s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect();
        let b = f.iter().find(|f| f.pod_uid.as_deref() == Some("b")).expect("b");
        assert!(b.message.contains("Its address 10.88.0.5 is outside Cilium's pod CIDR 10.0.0.0/16"), "{}", b.message);
        let c = f.iter().find(|f| f.pod_uid.as_deref() == Some("c")).expect("c");
        assert!(!c.message.contains("pod CIDR"), "{}", c.message);
        let d = f.iter().find(|f| f.pod_uid.as_deref() == Some("d")).expect("d");
        assert!(!d.message.contains("pod CIDR"), "{}", d.message);
    }

    /// Issue 47 red team, F3: a cgroup made with another pod's UID (by a
    /// writer of the cgroup tree) must not page "delete the pod" about the
    /// real one: both copies are warnings, and say why.
    #[test]
    fn a_pod_uid_at_two_cgroups_is_never_a_critical() {
        let mut twin = pod("b", NOW - 3600, vec![]);
        twin.cgroup = "/kubepods/burstable/podb/forged".into();
        let s = node_with(vec![managed("a"), pod("b", NOW - 3600, vec![]), twin], Some(NOW - 7200));
        assert_eq!(judged(&s), [("b".to_owned(), Severity::Warning), ("b".to_owned(), Severity::Warning)]);
        let f = evaluate(&s, &Policy::default()).into_iter().find(|f| f.kind == Kind::PodOutsideDatapath).unwrap();
        assert!(f.message.contains("is at more than one pod cgroup"), "{}", f.message);
    }
}
