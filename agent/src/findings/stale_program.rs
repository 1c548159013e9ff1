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

pub(super) fn stale_programs(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    for owner_pins in PROGRAM_PINS {
        let owner = owner_pins.owner;
        // Its pins prove anything only while its privileged agent runs
        // (issue 47, M3); and with none read, there is nothing to compare.
        if !snap.agents.iter().any(|a| a.owner == owner && a.privileged) {
            continue;
        }
        let pinned: Vec<&OwnerPin> =
            snap.pins.iter().filter(|p| p.owner == owner && p.link_id.is_none() && in_dir(p, owner_pins.dir)).collect();
        if pinned.is_empty() {
            continue;
        }
        for pod in &snap.pod_networks.pods {
            if pod.unread() {
                continue;
            }
            let stale: Vec<(&Interface, &ProgramOn, &str)> = pod
                .interfaces()
                .iter()
                .flat_map(|i| i.programs.iter().map(move |p| (i, p)))
                .filter_map(|(i, p)| {
                    let (name, _) = owner_pins.programs.iter().find(|(name, dir)| is_its(p, name, *dir))?;
                    // Proven another owner's: not this rule's.
                    let other = p.owner.is_some_and(|o| o != owner);
                    (!other && !pinned.iter().any(|pin| pin.prog_id == p.prog_id)).then_some((i, p, *name))
                })
                .collect();
            if !stale.is_empty() {
                out.push(finding(cx, owner_pins, pod, &pinned, &stale));
            }
        }
    }
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
    pinned: &[&OwnerPin],
    stale: &[(&Interface, &ProgramOn, &str)],
) -> Finding {
    let snap = cx.snap;
    let owner = owner_pins.owner;
    let named = snap.names.pod(&pod.pod_uid, None);
    // The pins the owner made for this very pod, by its identity.
    let identities = named.map(|n| aws_pod_identities(&n.name, &n.namespace));
    let pin_for = |program: &str| -> Option<&OwnerPin> {
        let ids = identities.as_ref()?;
        pinned.iter().copied().find(|pin| {
            pin.path
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| ids.iter().any(|id| f == format!("{id}_{program}")))
        })
    };
    let mut critical = false;
    let mut said = Vec::new();
    let mut fixes = Vec::new();
    for (i, p, program) in stale {
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
        match pin_for(program) {
            Some(pin) => {
                critical = true;
                said.push(format!(
                    "{} runs {runs} on its {on}, while the program {} pinned for this pod is prog {} ({})",
                    i.name,
                    owner.title(),
                    pin.prog_id,
                    pin.path.display()
                ));
                fixes.push(format!(
                    "`tc filter replace dev {} {hook} protocol all pref {} handle {:#x} bpf object-pinned {} direct-action`",
                    i.name,
                    owner_pins.prio,
                    owner_pins.handle,
                    pin.path.display()
                ));
            }
            None => said.push(format!(
                "{} runs {runs} on its {on}, which {} has not pinned (none of its pins in /sys/fs/bpf/{} names this \
                 pod)",
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
    let remediation = if fixes.is_empty() {
        format!(
            "find what put the program there (`tc filter show dev <interface> ingress|egress`, `bpftool prog show id \
             <id>`); delete the pod so that it is made again and {} attaches its own: `kubectl delete pod -n \
             <namespace> <pod>`.",
            owner.title()
        )
    } else {
        format!(
            "point the filter at the pinned program on the node: {}; or delete the pod so that it is made again: \
             `kubectl delete pod -n <namespace> <pod>`. After every recreation of aws-node, check again (the upstream \
             fix is aws-network-policy-agent#514).",
            fixes.join("; ")
        )
    };
    let severity = if critical { Severity::Critical } else { Severity::Warning };
    let mut f = Finding::new(Kind::EndpointProgramStale, severity, message, remediation).at_cgroup(&pod.cgroup, snap);
    f.owner = Some(owner);
    f.pod_uid = Some(pod.pod_uid.clone());
    f.count = Some(stale.len() as u64);
    if let [(_, p, _)] = stale {
        f.prog_id = Some(p.prog_id);
        f.prog_name = Some(p.prog_name.clone());
    }
    let mut interfaces: Vec<outside_datapath::InterfaceRef> =
        stale.iter().map(|(i, ..)| outside_datapath::InterfaceRef::of(i)).collect();
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
                pod_uid: "u1".into(),
                namespace: None,
                name: None,
                cgroup: "/kubepods/besteffort/podu1".into(),
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
        s.names.pods.insert("u1".into(), PodName { namespace: "shop".into(), name: "web-7f9c".into() });
        s
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
        // The identity before v1.4.0 is found too.
        let s =
            node_with(vec![filter("handle_egress", IfHook::TcIngress, 11)], vec![pin("web-shop_handle_egress", 21)]);
        assert_eq!(judged(&s)[0].severity, Severity::Critical);
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
