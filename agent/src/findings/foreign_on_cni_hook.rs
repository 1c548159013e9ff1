//! `foreign_program_on_cni_hook`: at the root, a program of another or unknown owner on a hook the CNI uses for socket LB.

use super::*;

pub(super) const EXPLANATION: &str =
    "at the root cgroup, a program of another or unknown owner is attached to a hook the CNI uses for socket LB.";

pub(super) fn foreign_on_cni_hooks(
    snap: &Snapshot,
    policy: &Policy,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    for (cni, types) in hooks {
        for (a, owner) in owned(snap, policy) {
            if !at_root(snap, a) || !types.contains(&a.attach_type) || owner == *cni || owner.is_benign() {
                continue;
            }
            let name = prog_name(snap, a.prog_id);
            let beside = snap.attachments.iter().any(|b| {
                at_root(snap, b)
                    && b.attach_type == a.attach_type
                    && owner_of(snap, b.prog_id, Some(b.attach_type), policy) == *cni
            });
            let by = actor(snap, a);
            let message = format!(
                "{name} ({o}, prog {id}) is attached to {t} at the root cgroup {how} {cni}'s socket-LB program{who}. \
                 It runs for every socket on the node too, in an order neither controls: it can rewrite or refuse connections \
                 {cni} load-balances, and CNIs have stalled on finding a program they did not expect on their hook.",
                o = owner.as_str(),
                id = a.prog_id,
                t = a.attach_type,
                how = if beside { "beside" } else { "instead of" },
                cni = cni.as_str(),
                who = by.as_ref().map_or(String::new(), |b| format!(" (attached by {} pid {})", b.comm, b.pid)),
            );
            let remediation = format!(
                "Find what loaded prog {id} (`bpftool prog show id {id}`); if it belongs on this node, allow it with \
                 `--allow <name prefix>` and make sure it and {cni} agree on the hook; otherwise detach it \
                 (`bpftool cgroup detach <root cgroup> {t} id {id}`).",
                id = a.prog_id,
                t = a.attach_type,
                cni = cni.as_str(),
            );
            let mut f = Finding::new(Kind::ForeignProgramOnCniHook, Severity::Warning, message, remediation);
            f.cgroup = Some("/".into());
            f.attach_type = Some(a.attach_type);
            f.prog_id = Some(a.prog_id);
            f.prog_name = Some(name);
            f.owner = Some(owner);
            f.link_id = a.link_id;
            f.attached_by = by;
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
        assert!(f[0].message.contains("beside cilium's"), "{}", f[0].message);
        // On a hook Cilium does not use, or allowed: not its business.
        assert!(evaluate(&s, &Policy { allow: vec!["mesh_".into()], ..Policy::default() }).is_empty());
        s.attachments.last_mut().unwrap().attach_type = at("bind4");
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }
}
