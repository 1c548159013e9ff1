//! `endpoint_program_stale`: a pod's interface runs a program named like
//! the one an owner pins for each pod (`registry::PROGRAM_PINS`: the AWS
//! network policy agent's `handle_ingress`/`handle_egress`) that the owner
//! has not pinned, on the hook its filter is on.
//!
//! aws-network-policy-agent#514: when aws-node is made again, the new agent
//! loads each pod's programs with new maps and pins them in place of the
//! old (`globals/aws/programs/<pod identity>_handle_*`), but its filters
//! are added with `FilterAdd`, never replaced: the pod's interface keeps
//! the old program and the old maps. Every policy change from then on goes
//! to the new maps, which nothing reads: the pod keeps the policy it had
//! when aws-node was recreated. Nothing says so (the agent's own view is
//! its pins); the pinned program's id and the filter's differ.
//!
//! Proven from the owner's side only: its pins (in its directory, while its
//! privileged agent runs), and the program on the pod's own host-side
//! interface (`scan::net::map`, which a pod cannot forge for another pod).
//! The program on the hook is never taken for the owner's by its name: a
//! pod that put one there itself (with CAP_NET_ADMIN on the node) is said
//! the same way, as what it is, a program the owner did not pin. Critical
//! when the owner pinned one for this very pod (by its identity, from the
//! pod's name) and it is another; a warning when no pin names the pod.

use super::*;
use crate::owner::registry::{Direction, PROGRAM_PINS, PinnedPrograms, aws_pod_identities};
use crate::snapshot::OwnerPin;
use crate::snapshot::net::{IfHook, Interface, PodNet, ProgramOn, Via};

pub(super) const EXPLANATION: &str = "these pods' interfaces run a program named like the one their network policy agent pins for them, that the agent has not pinned: an earlier agent's (aws-network-policy-agent#514) or not its at all. Policy changes go to the pinned program's maps, which nothing on the interface reads.";

/// The owner of `PROGRAM_PINS` whose privileged agent runs with pins read:
/// the node runs its per-pod programs (a pod whose network cannot be read
/// cannot be judged by this rule either: `pod_network_unreadable`).
pub(super) fn pinning_owner(snap: &Snapshot) -> Option<Owner> {
    PROGRAM_PINS
        .iter()
        .find(|o| {
            snap.agents.iter().any(|a| a.owner == o.owner && a.privileged)
                && snap.pins.iter().any(|p| p.owner == o.owner && p.link_id.is_none() && in_dir(p, o.dir))
        })
        .map(|o| o.owner)
}

pub(super) fn stale_programs(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    for owner_pins in PROGRAM_PINS {
        let owner = owner_pins.owner;
        // Its pins prove anything only while its privileged agent runs
        // (issue 47, M3); and with none read, there is nothing to compare.
        if pinning_owner(snap) != Some(owner) {
            continue;
        }
        let pinned: Vec<&OwnerPin> =
            snap.pins.iter().filter(|p| p.owner == owner && p.link_id.is_none() && in_dir(p, owner_pins.dir)).collect();
        for pod in &snap.pod_networks.pods {
            if pod.unread() {
                continue;
            }
            let own = OwnPins::of(snap, pod, &pinned);
            let stale: Vec<Stale<'_>> = pod
                .interfaces()
                .iter()
                .flat_map(|i| i.programs.iter().map(move |p| (i, p)))
                .filter_map(|(i, p)| {
                    let (name, _) = owner_pins.programs.iter().find(|(name, dir)| is_its(p, name, *dir))?;
                    // Proven another owner's: not this rule's.
                    if p.owner.is_some_and(|o| o != owner) {
                        return None;
                    }
                    let mine = own.as_ref().and_then(|o| o.pin(name));
                    let elsewhere = pinned.iter().copied().find(|pin| pin.prog_id == p.prog_id);
                    match (&own, mine, elsewhere) {
                        // The pod's own pin runs there.
                        (_, Some(pin), _) if pin.prog_id == p.prog_id => None,
                        // Its name unknown: any of the owner's pins clears it.
                        (None, _, Some(_)) => None,
                        (_, mine, elsewhere) => Some(Stale { interface: i, program: p, mine, elsewhere }),
                    }
                })
                .collect();
            if !stale.is_empty() {
                out.push(finding(cx, owner_pins, pod, own.as_ref(), &stale));
            }
        }
    }
}

/// A program on a pod's interface that is not the one the owner pinned
/// for the pod.
struct Stale<'s> {
    interface: &'s Interface,
    program: &'s ProgramOn,
    /// The pin for this pod's identity, when there is one.
    mine: Option<&'s OwnerPin>,
    /// The pin that does hold this program (another identity's), if any.
    elsewhere: Option<&'s OwnerPin>,
}

/// The pins the owner made for one pod, by its identity (its name and
/// namespace as the node names them).
struct OwnPins<'s> {
    pins: Vec<&'s OwnerPin>,
    /// The identity the pins were found by.
    identity: String,
    /// Only the form before v1.4.0 names them, which pods of two
    /// namespaces can share (`deny-me-0`@`ns1` and `deny-0`@`me-ns1` are
    /// both `deny-me-ns1`): which pod the pins are for is not proven (red
    /// team 51 S3, 52 T3).
    shared: bool,
    /// The pod's name comes from the runtime's record of its containers;
    /// `false`: only from `/var/log/pods`, which a log shipper's hostPath
    /// can write, so the identity is not proven the pod's (red team 52, T1).
    proven: bool,
}

impl<'s> OwnPins<'s> {
    /// The pod's own pins: by its identity since v1.4.0
    /// (`<prefix>@<namespace>`), else by the legacy one
    /// (`<prefix>-<namespace>`); `None` when the pod's name is not known.
    fn of(snap: &Snapshot, pod: &PodNet, pinned: &[&'s OwnerPin]) -> Option<OwnPins<'s>> {
        let (named, proven) = match runtime_name(snap, &pod.pod_uid) {
            Some(n) => (n, true),
            None => (snap.names.pod(&pod.pod_uid, None)?, false),
        };
        let [at, legacy] = aws_pod_identities(&named.name, &named.namespace);
        let with = |id: &str| -> Vec<&'s OwnerPin> {
            pinned
                .iter()
                .copied()
                .filter(|pin| {
                    pin.path.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_prefix(id)).is_some_and(|rest| {
                        rest.strip_prefix('_').is_some_and(|prog| !prog.is_empty() && !prog.contains('@'))
                    })
                })
                .collect()
        };
        let pins = with(&at);
        if !pins.is_empty() {
            return Some(OwnPins { pins, identity: at, shared: false, proven });
        }
        // The form before v1.4.0 is not unique across namespaces, and which
        // other pods share it cannot be known from the names the audit
        // looks up (only pods with interfaces are named: red team 52, T3):
        // never taken for this pod's alone.
        let pins = with(&legacy);
        let shared = !pins.is_empty();
        Some(OwnPins { identity: if pins.is_empty() { at } else { legacy }, pins, shared, proven })
    }

    /// Its pin of program `name`.
    fn pin(&self, name: &str) -> Option<&'s OwnerPin> {
        let file = format!("{}_{name}", self.identity);
        self.pins.iter().copied().find(|pin| pin.path.file_name().is_some_and(|f| f == file.as_str()))
    }
}

/// The pod's name as a runtime records it for one of its containers
/// (containerd, CRI-O, Docker; not the kubelet's log directories).
fn runtime_name<'s>(snap: &'s Snapshot, uid: &str) -> Option<&'s crate::snapshot::PodName> {
    let pod = snap.pods.iter().find(|p| p.pod_uid == uid)?;
    pod.containers.iter().find_map(|c| {
        let id = crate::attribution::attribute(&c.cgroup).container_id?;
        let named = snap.names.containers.get(&id)?.as_ref()?;
        (named.source != "kubelet logs").then_some(&named.pod)
    })
}

/// Whether pin `p` is in directory `dir` (below bpffs) itself.
fn in_dir(p: &OwnerPin, dir: &str) -> bool {
    p.path.parent().is_some_and(|d| d == std::path::Path::new("/sys/fs/bpf").join(dir))
}

/// Whether `p` is where the owner's program `name` goes (`dir`, the tc hook
/// of the host-side interface), named so by the program or by its filter.
fn is_its(p: &ProgramOn, name: &str, dir: Direction) -> bool {
    let hook = match dir {
        Direction::Ingress => IfHook::TcIngress,
        Direction::Egress => IfHook::TcEgress,
        Direction::Xdp => return false,
    };
    let filter_named = matches!(&p.via, Via::Filter { filter_name: Some(f), .. } if f == name);
    p.hook == hook && (p.prog_name == name || filter_named)
}

fn finding(
    cx: &Ctx<'_>,
    owner_pins: &PinnedPrograms,
    pod: &PodNet,
    own: Option<&OwnPins<'_>>,
    stale: &[Stale<'_>],
) -> Finding {
    use crate::text::shell_word;
    let snap = cx.snap;
    let owner = owner_pins.owner;
    let shared = own.is_some_and(|o| o.shared);
    let proven = own.is_some_and(|o| o.proven);
    let mut critical = false;
    let mut said = Vec::new();
    let mut fixes = Vec::new();
    for s in stale {
        let (i, p) = (s.interface, s.program);
        let hook = if p.hook == IfHook::TcIngress { "ingress" } else { "egress" };
        let on = match &p.via {
            Via::Filter { prio, handle, .. } => format!("tc {hook} filter pref {prio} handle {handle:#x}"),
            _ => format!("tc {hook}"),
        };
        let runs = if p.prog_name.is_empty() {
            format!("prog {}", p.prog_id)
        } else {
            format!("{} (prog {})", p.prog_name, p.prog_id)
        };
        let whose = match s.elsewhere {
            Some(other) => {
                format!("; the program it runs is the one pinned at {}, for another pod", other.path.display())
            }
            None => String::new(),
        };
        match s.mine {
            Some(pin) if !shared && proven => {
                critical = true;
                said.push(format!(
                    "{} runs {runs} on its {on}, while the program {} pinned for this pod is prog {} ({}){whose}",
                    i.name,
                    owner.title(),
                    pin.prog_id,
                    pin.path.display()
                ));
                fixes.push(format!(
                    "`tc filter replace dev {} {hook} protocol all pref {} handle {:#x} bpf object-pinned {} \
                     direct-action`",
                    shell_word(&i.name),
                    owner_pins.prio,
                    owner_pins.handle,
                    shell_word(&pin.path.display().to_string())
                ));
            }
            Some(pin) if !shared => said.push(format!(
                "{} runs {runs} on its {on}, not prog {} pinned at {}; but the pod's name that identity comes from \
                 is only in /var/log/pods (no runtime's record of its containers was read), which others can write: \
                 not proof that the pin is this pod's{whose}",
                i.name,
                pin.prog_id,
                pin.path.display()
            )),
            Some(pin) => said.push(format!(
                "{} runs {runs} on its {on}, not prog {} pinned at {}; but that is an identity of the agent before \
                 v1.4.0, which pods of two namespaces can share, so which pod it is for is not known{whose}",
                i.name,
                pin.prog_id,
                pin.path.display()
            )),
            None if s.elsewhere.is_some() => said.push(format!(
                "{} runs {runs} on its {on}, and {} pinned none for this pod{whose}",
                i.name,
                owner.title(),
            )),
            None => said.push(format!(
                "{} runs {runs} on its {on}, which {} has not pinned (none of its pins in /sys/fs/bpf/{} is this \
                 program, nor names this pod)",
                i.name,
                owner.title(),
                owner_pins.dir
            )),
        }
    }
    let message = format!(
        "{}: policy changes go to the programs and maps {} pinned, which nothing on this interface reads: the pod \
         keeps the policy of an earlier program (when aws-node was made again, its filters kept the old program: \
         aws-network-policy-agent#514), or of one that is not the agent's at all.",
        said.join("; "),
        owner.title(),
    );
    let delete = match runtime_name(snap, &pod.pod_uid) {
        Some(n) => format!("`kubectl delete pod -n {} {}`", shell_word(&n.namespace), shell_word(&n.name)),
        None => "`kubectl delete pod -n <namespace> <pod>`".to_owned(),
    };
    let remediation = if fixes.is_empty() {
        format!(
            "find what put the program there (`tc filter show dev <interface> ingress|egress`, `bpftool prog show id \
             <id>`); delete the pod so that it is made again and {} attaches its own: {delete}.",
            owner.title()
        )
    } else {
        format!(
            "point the filter at the pinned program on the node: {}; or delete the pod so that it is made again: \
             {delete}. After every recreation of aws-node, check again (the upstream fix is \
             aws-network-policy-agent#514).",
            fixes.join("; ")
        )
    };
    let severity = if critical { Severity::Critical } else { Severity::Warning };
    let mut f = Finding::new(Kind::EndpointProgramStale, severity, message, remediation).at_cgroup(&pod.cgroup, snap);
    f.owner = Some(owner);
    f.pod_uid = Some(pod.pod_uid.clone());
    f.count = Some(stale.len() as u64);
    if let [only] = stale {
        f.prog_id = Some(only.program.prog_id);
        f.prog_name = Some(only.program.prog_name.clone());
    }
    let mut interfaces: Vec<outside_datapath::InterfaceRef> =
        stale.iter().map(|s| outside_datapath::InterfaceRef::of(s.interface)).collect();
    interfaces.dedup();
    f.interfaces = interfaces;
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::snapshot::net::{Net, PodNetworks};
    use crate::snapshot::{Names, PodName};

    const AWS: Owner = Owner::AwsNetworkPolicy;
    const U1: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c01";
    const U2: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c02";

    fn filter(name: &str, hook: IfHook, id: u32) -> ProgramOn {
        let mut p = ProgramOn::new(
            hook,
            id,
            Via::Filter { prio: 1, handle: 1, filter_name: Some(name.into()), direct_action: true },
        );
        p.prog_name = name.into();
        p
    }

    fn pin(file: &str, id: u32) -> OwnerPin {
        OwnerPin {
            owner: AWS,
            path: format!("/sys/fs/bpf/globals/aws/programs/{file}").into(),
            prog_id: id,
            link_id: None,
            target: None,
        }
    }

    /// A node with aws-node's agent, pod `web-7f9c` of `shop` whose
    /// interface runs `programs`, and the agent's pins.
    fn node_with(programs: Vec<ProgramOn>, pins: Vec<OwnerPin>) -> Snapshot {
        let mut s = node();
        agent(&mut s, AWS);
        s.pins = pins;
        s.pod_networks = PodNetworks {
            pods: vec![PodNet {
                pod_uid: U1.into(),
                namespace: None,
                name: None,
                cgroup: format!("/kubepods/besteffort/pod{U1}"),
                started: Some(1),
                net: Net::Interfaces {
                    other_links_into_node: 0,
                    addresses: Vec::new(),
                    interfaces: vec![Interface {
                        ifindex: 7,
                        name: "eni1a2b3c".into(),
                        driver: "veth".into(),
                        programs,
                        errors: vec![],
                        netkit_peer_policy: None,
                        master: None,
                        bridge: None,
                    }],
                },
            }],
            ..Default::default()
        };
        s.names = Names::default();
        name_from_runtime(&mut s, U1, "shop", "web-7f9c");
        s
    }

    /// Pod `uid` named `namespace/name` by containerd's record of its
    /// sandbox, as a real audit names a pod it judges here.
    fn name_from_runtime(s: &mut Snapshot, uid: &str, namespace: &str, name: &str) {
        let id = format!("{:0>64}", s.pods.len() + 1);
        let mut pod = crate::fixtures::pod_cgroup(&format!("/kubepods/besteffort/pod{uid}"), 50, uid, &[]);
        pod.containers.push(crate::snapshot::ContainerCgroup {
            cgroup: format!("/kubepods/besteffort/pod{uid}/{id}"),
            cgroup_id: 51,
            effective: pod.effective.clone(),
        });
        s.pods.retain(|p| p.pod_uid != uid);
        s.pods.push(pod);
        let pod = PodName { namespace: namespace.into(), name: name.into() };
        s.names.pods.insert(uid.into(), pod.clone());
        let named = crate::snapshot::ContainerName { pod, container: None, source: "containerd" };
        s.names.containers.insert(id, Some(named));
    }

    fn judged(s: &Snapshot) -> Vec<Finding> {
        evaluate(s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::EndpointProgramStale).collect()
    }

    #[test]
    fn the_programs_the_agent_pinned_for_the_pod_are_no_finding() {
        let s = node_with(
            vec![filter("handle_ingress", IfHook::TcEgress, 10), filter("handle_egress", IfHook::TcIngress, 11)],
            vec![pin("web@shop_handle_ingress", 10), pin("web@shop_handle_egress", 11)],
        );
        assert!(judged(&s).is_empty());
    }

    /// aws-network-policy-agent#514: the agent made again pinned new
    /// programs; the filter kept the old one.
    #[test]
    fn a_filter_that_kept_the_old_program_is_critical_with_the_pinned_one_named() {
        let s = node_with(
            vec![filter("handle_ingress", IfHook::TcEgress, 10), filter("handle_egress", IfHook::TcIngress, 11)],
            vec![pin("web@shop_handle_ingress", 20), pin("web@shop_handle_egress", 11)],
        );
        let f = judged(&s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!(f[0].prog_id, Some(10));
        assert!(
            f[0].message.contains("prog 20 (/sys/fs/bpf/globals/aws/programs/web@shop_handle_ingress)"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].remediation.contains(
                "tc filter replace dev eni1a2b3c egress protocol all pref 1 handle 0x1 bpf object-pinned \
                 /sys/fs/bpf/globals/aws/programs/web@shop_handle_ingress direct-action"
            ),
            "{}",
            f[0].remediation
        );
        // The identity before v1.4.0 is found too, but proves no pod's.
        let s =
            node_with(vec![filter("handle_egress", IfHook::TcIngress, 11)], vec![pin("web-shop_handle_egress", 21)]);
        assert_eq!(judged(&s)[0].severity, Severity::Warning);
    }

    /// What no pin names the pod for, and a program on the other hook or
    /// proven another owner's, are a warning at most, or nothing.
    #[test]
    fn what_the_rule_cannot_tie_to_the_pod_is_a_warning_or_nothing() {
        let s =
            node_with(vec![filter("handle_ingress", IfHook::TcEgress, 10)], vec![pin("api@shop_handle_ingress", 20)]);
        assert_eq!(judged(&s)[0].severity, Severity::Warning);
        // handle_ingress goes on the host veth's egress: on its ingress it is
        // not the agent's filter.
        let s =
            node_with(vec![filter("handle_ingress", IfHook::TcIngress, 10)], vec![pin("web@shop_handle_ingress", 20)]);
        assert!(judged(&s).is_empty());
        let mut p = filter("handle_ingress", IfHook::TcEgress, 10);
        p.owner = Some(Owner::Cilium);
        let s = node_with(vec![p], vec![pin("web@shop_handle_ingress", 20)]);
        assert!(judged(&s).is_empty());
    }

    /// Red team 51, S2: a pod running the program pinned for another pod
    /// (another identity's) while its own pin holds another is critical;
    /// with no pin of its own, a warning that names whose it runs. With its
    /// name not known, any of the agent's pins clears it.
    #[test]
    fn another_pods_pinned_program_is_not_this_pods() {
        let pins = || vec![pin("deny@me-ns1_handle_ingress", 30), pin("web@shop_handle_ingress", 20)];
        let s = node_with(vec![filter("handle_ingress", IfHook::TcEgress, 30)], pins());
        let f = judged(&s);
        assert_eq!(f[0].severity, Severity::Critical, "{f:#?}");
        assert!(f[0].message.contains("deny@me-ns1_handle_ingress, for another pod"), "{}", f[0].message);
        let s = node_with(
            vec![filter("handle_ingress", IfHook::TcEgress, 30)],
            vec![pin("deny@me-ns1_handle_ingress", 30)],
        );
        let f = judged(&s);
        assert_eq!(f[0].severity, Severity::Warning, "{f:#?}");
        assert!(f[0].message.contains("pinned none for this pod"), "{}", f[0].message);
        let mut s = node_with(vec![filter("handle_ingress", IfHook::TcEgress, 30)], pins());
        s.names = Names::default();
        assert!(judged(&s).is_empty());
    }

    /// Red team 51, S3: the identity before v1.4.0 can be another
    /// namespace's pod's too (`deny-me-0` of `ns1` and `deny-0` of `me-ns1`
    /// are both `deny-me-ns1`): a warning, and no command that would hand
    /// this pod the other's program.
    #[test]
    fn a_legacy_identity_two_namespaces_share_gives_no_command() {
        let mut s = node_with(
            vec![filter("handle_ingress", IfHook::TcEgress, 10)],
            vec![pin("deny-me-ns1_handle_ingress", 20)],
        );
        name_from_runtime(&mut s, U1, "ns1", "deny-me-0");
        // Even with no other pod named (red team 52, T3: a pod that moved
        // its eth0 away is never named), a legacy pin is not proven the pod's.
        let f = judged(&s);
        assert_eq!(f[0].severity, Severity::Warning, "{f:#?}");
        assert!(!f[0].remediation.contains("tc filter replace"), "{}", f[0].remediation);
        let mut other = s.pod_networks.pods[0].clone();
        other.pod_uid = U2.into();
        other.cgroup = format!("/kubepods/besteffort/pod{U2}");
        other.net = Net::HostNetwork;
        s.pod_networks.pods.push(other);
        name_from_runtime(&mut s, U2, "me-ns1", "deny-0");
        let f = judged(&s);
        assert_eq!(f[0].severity, Severity::Warning, "{f:#?}");
        assert!(!f[0].remediation.contains("tc filter replace"), "{}", f[0].remediation);
        assert!(f[0].message.contains("which pod it is for is not known"), "{}", f[0].message);
    }

    /// Red team 52, T1: a name only `/var/log/pods` gives (which a log
    /// shipper's hostPath can write) does not prove which pins are the
    /// pod's: a warning, and no command that would move programs.
    #[test]
    fn a_name_only_the_log_directories_give_proves_no_pin() {
        let mut s =
            node_with(vec![filter("handle_ingress", IfHook::TcEgress, 10)], vec![pin("evil@shop_handle_ingress", 20)]);
        s.names.containers.clear();
        s.names.pods.insert(U1.into(), PodName { namespace: "shop".into(), name: "evil-x".into() });
        let f = judged(&s);
        assert_eq!(f[0].severity, Severity::Warning, "{f:#?}");
        assert!(!f[0].remediation.contains("tc filter replace"), "{}", f[0].remediation);
        assert!(f[0].message.contains("only in /var/log/pods"), "{}", f[0].message);
    }

    /// Red team 51, S4: a name put in a command is one shell word.
    #[test]
    fn an_interface_name_in_the_command_is_quoted() {
        let mut s =
            node_with(vec![filter("handle_ingress", IfHook::TcEgress, 10)], vec![pin("web@shop_handle_ingress", 20)]);
        if let Net::Interfaces { interfaces, .. } = &mut s.pod_networks.pods[0].net {
            interfaces[0].name = "e;touch${IFS}P".into();
        }
        let f = judged(&s);
        assert!(f[0].remediation.contains("tc filter replace dev 'e;touch${IFS}P' egress"), "{}", f[0].remediation);
        assert!(f[0].remediation.contains("`kubectl delete pod -n shop web-7f9c`"), "{}", f[0].remediation);
    }

    /// Red team 51, S1: a pod that renamed its eth0 cannot be judged, and
    /// says so on a node whose policy agent pins each pod's programs.
    #[test]
    fn a_pod_whose_network_cannot_be_read_is_said() {
        let mut s = node_with(vec![], vec![pin("web@shop_handle_ingress", 20)]);
        s.pod_networks.pods[0].net = Net::Unreadable { reason: "it has no eth0 (renamed?)".into() };
        let f: Vec<Finding> =
            evaluate(&s, &Policy::default()).into_iter().filter(|f| f.kind == Kind::PodNetworkUnreadable).collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].owner, Some(AWS));
    }

    /// Its pins prove nothing without its agent, and with none read there is
    /// nothing to compare.
    #[test]
    fn without_the_agent_or_its_pins_nothing_is_said() {
        let mut s =
            node_with(vec![filter("handle_ingress", IfHook::TcEgress, 10)], vec![pin("web@shop_handle_ingress", 20)]);
        s.agents.clear();
        assert!(judged(&s).is_empty());
        let s = node_with(vec![filter("handle_ingress", IfHook::TcEgress, 10)], vec![]);
        assert!(judged(&s).is_empty());
    }
}
