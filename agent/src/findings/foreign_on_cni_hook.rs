//! `foreign_program_on_cni_hook`: at the root, a program of another or unknown owner on a hook a socket load balancer (Cilium, Calico) uses.
//!
//! A program at the root named like the balancer's own, while its agent
//! runs and keeps others of its root programs (holds them, pinned them),
//! that nothing the agent keeps proves its (the agent does not hold it, it
//! is not pinned in the agent's directory, no attach call of the agent's
//! was seen) counts as unknown here (issue 47, L3): both Cilium (its
//! links, since 1.14) and Calico (its programs) pin what they attach at
//! the root, and a tenant with CAP_BPF, CAP_NET_ADMIN and the root
//! cgroup's fd can attach a program of any name there. An agent that keeps
//! none of them (attaching without links, as on kernels before bpf_link)
//! proves none: its programs are judged by name and place.

use super::*;

pub(super) const EXPLANATION: &str =
    "at the root cgroup, a program of another or unknown owner is attached to a hook the CNI uses for socket LB.";

/// One finding per CNI and foreign owner, naming the hooks and programs.
pub(super) fn foreign_on_cni_hooks(
    cx: &Ctx<'_>,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    let (snap, attachers) = (cx.snap, &cx.attachers);
    // Programs named like a balancer's own that nothing of its agent
    // proves, where its agent keeps (holds or pinned) others of its root
    // programs: unknown (an agent that keeps its programs keeps them all;
    // one that keeps none, attaching without links as before bpf_link, is
    // judged by name and place as before). Not judged when the pins that
    // would prove them could not be read (issue 47 red team, F9).
    let root: Vec<(&Attachment, crate::owner::Owned)> = cx.attachments().filter(|(a, _)| at_root(snap, a)).collect();
    let keeps: BTreeSet<Owner> = root
        .iter()
        .filter(|(_, o)| o.proof.is_some_and(|p| p != crate::owner::Proof::AtRoot))
        .map(|(_, o)| o.owner)
        .collect();
    let mut named_like: BTreeMap<u32, Owner> = BTreeMap::new();
    let at_root: Vec<(&Attachment, Owner)> = root
        .into_iter()
        .map(|(a, o)| {
            let by_name_only = o.proof == Some(crate::owner::Proof::AtRoot)
                && keeps.contains(&o.owner)
                && cx.agents_of(o.owner).next().is_some();
            if by_name_only && snap.pins_unread.is_none() {
                named_like.insert(a.prog_id, o.owner);
                (a, Owner::Unknown)
            } else {
                (a, o.owner)
            }
        })
        .collect();
    for (cni, types) in hooks.iter().filter(|(o, _)| o.balances_sockets()) {
        // The hooks where the CNI's own program is at the root too.
        let cni_there: BTreeSet<AttachType> =
            at_root.iter().filter(|(_, o)| o == cni).map(|(a, _)| a.attach_type).collect();
        let mut groups: BTreeMap<Owner, Vec<&Attachment>> = BTreeMap::new();
        for (a, owner) in &at_root {
            if types.contains(&a.attach_type) && owner != cni && !owner.is_benign() {
                groups.entry(*owner).or_default().push(a);
            }
        }
        for (owner, mut programs) in groups {
            programs.sort_by_key(|a| (a.attach_type, a.prog_id));
            let described: Vec<String> = programs
                .iter()
                .take(4)
                .map(|a| {
                    let by = attachers
                        .actor(snap, a)
                        .map_or(String::new(), |b| format!(", attached by {} pid {}", b.comm, b.pid));
                    format!(
                        "{} (prog {}) on {} {} {cni}'s{by}",
                        prog_name(snap, a.prog_id),
                        a.prog_id,
                        a.attach_type,
                        if cni_there.contains(&a.attach_type) { "beside" } else { "instead of" },
                        cni = cni.title(),
                    )
                })
                .collect();
            let more = programs.len().saturating_sub(described.len());
            let message = format!(
                "{n} program{s} of {o} owner {are} attached at the root cgroup on hooks {cni} uses for socket LB: {list}{more}. \
                 {they} run for every socket on the node too, in an order neither controls: {they_l} can rewrite or refuse \
                 connections {cni} load-balances, and CNIs have stalled on finding a program they did not expect on their hook.",
                n = programs.len(),
                s = if programs.len() == 1 { "" } else { "s" },
                o = if owner == Owner::Unknown { "unknown".to_owned() } else { format!("another ({})", owner.title()) },
                are = if programs.len() == 1 { "is" } else { "are" },
                cni = cni.title(),
                list = described.join("; "),
                more = if more > 0 { format!("; and {more} more") } else { String::new() },
                they = if programs.len() == 1 { "It" } else { "They" },
                they_l = if programs.len() == 1 { "it" } else { "they" },
            );
            let first = programs[0];
            let remediation = if programs.iter().any(|a| named_like.get(&a.prog_id) == Some(cni)) {
                // Never "detach" what may be the balancer's own: detaching
                // it breaks Service load balancing on the node.
                format!(
                    "They are named like {cni}'s own, yet its agent neither holds nor pinned them: compare with what \
                     {cni}'s agent says it attached (`bpftool link show`, its pins under /sys/fs/bpf) before touching \
                     them; detaching {cni}'s own programs breaks Service load balancing. If they are not {cni}'s, find \
                     what loaded them (`bpftool prog show id {id}`).",
                    cni = cni.title(),
                    id = first.prog_id,
                )
            } else {
                format!(
                    "Find what loaded them (`bpftool prog show id {id}`); if they belong on this node, allow them with \
                     `--allow <name prefix>` and make sure they and {cni} agree on the hook; otherwise detach them \
                     (`bpftool cgroup detach <root cgroup> {t} id {id}`).",
                    id = first.prog_id,
                    t = first.attach_type,
                    cni = cni.title(),
                )
            };
            let mut f = Finding::new(Kind::ForeignProgramOnCniHook, Severity::Warning, message, remediation)
                .about(snap, &programs, attachers);
            f.cgroup = Some("/".into());
            f.owner = Some(owner);
            out.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn a_foreign_program_on_a_cni_hook_at_the_root_is_named() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        prog(&mut s, 60, "mesh_redirect", ProgType::CgroupSockAddr);
        attach(&mut s, "/", 1, "connect4", 60);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["foreign_program_on_cni_hook"]);
        assert_eq!((f[0].prog_id, f[0].owner), (Some(60), Some(Owner::Unknown)));
        assert!(f[0].message.contains("beside Cilium's"), "{}", f[0].message);
        // On a hook Cilium does not use, or allowed: not its business.
        assert!(evaluate(&s, &Policy { allow: vec!["mesh_".into()], ..Default::default() }).is_empty());
        s.attachments.last_mut().unwrap().attach_type = at("bind4");
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    /// Issue 47, L3: a `cil_sock*` program at the root was Cilium's by its
    /// name and place and raised nothing: a tenant with CAP_BPF, CAP_NET_ADMIN
    /// and the root cgroup's fd rewrote every pod's connections unseen.
    /// While Cilium's agent runs and keeps nothing of it, it is unknown here.
    #[test]
    fn a_program_named_like_the_cnis_at_the_root_that_its_agent_keeps_nothing_of_is_said() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        assert!(evaluate(&s, &Policy::default()).is_empty(), "held by its agent: Cilium's");
        prog(&mut s, 61, "cil_sock4_sendmsg", ProgType::CgroupSockAddr);
        attach(&mut s, "/", 1, "sendmsg4", 61);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["foreign_program_on_cni_hook"]);
        assert_eq!((f[0].prog_id, f[0].owner), (Some(61), Some(Owner::Unknown)));
        assert!(f[0].message.contains("instead of Cilium's"), "{}", f[0].message);
        // Named like Cilium's own: never "detach them".
        assert!(!f[0].remediation.contains("bpftool cgroup detach"), "{}", f[0].remediation);
        // Issue 47 red team, F9: the pins could not be read this pass: not
        // judged (they may prove it Cilium's).
        s.pins_unread = Some("read /sys/fs/bpf: timed out".into());
        assert!(evaluate(&s, &Policy::default()).is_empty());
        s.pins_unread = None;
        // Pinned where Cilium pins, while its agent runs: Cilium's.
        s.pins.push(OwnerPin {
            owner: Owner::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_sendmsg".into(),
            prog_id: 61,
            link_id: None,
            target: None,
        });
        assert!(evaluate(&s, &Policy::default()).is_empty());
        // Without its agent, a leftover: said by cni_leftover_programs.
        s.agents.clear();
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), ["cni_leftover_programs"]);
    }
}
