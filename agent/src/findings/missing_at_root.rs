//! `socket_lb_missing_at_root`: a CNI uses a socket-LB hook (attached somewhere, or pinned) but has nothing on it at the root.

use super::*;

pub(super) const EXPLANATION: &str = "the CNI's socket-LB programs for these hooks are attached on the node or pinned in its bpffs, but not attached at the root cgroup, so pods do not get them while the agent may still report socket LB as enabled.";

/// One finding per CNI, naming each hook it lacks at the root.
pub(super) fn missing_at_root(
    snap: &Snapshot,
    policy: &Policy,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    let at_root: BTreeSet<(Owner, AttachType)> = snap
        .attachments
        .iter()
        .filter(|a| a.cgroup_id == snap.root.cgroup_id)
        .map(|a| (owner_of(snap, a.prog_id, Some(a.attach_type), policy), a.attach_type))
        .collect();
    for (owner, types) in hooks {
        let missing: Vec<AttachType> = types
            .iter()
            .copied()
            .filter(|t| !at_root.contains(&(*owner, *t)) && !snap.unsupported_attach_types.contains(t))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let names: Vec<&str> = missing.iter().map(|t| t.name()).collect();
        let message = format!(
            "{o} has socket-LB programs for {hooks} attached on this node, but none is attached to {them} on the root cgroup: \
             pods on this node do not get {o}'s load balancing there, while the agent may still report socket LB as enabled.",
            o = owner.as_str(),
            hooks = names.join(", "),
            them = if missing.len() == 1 { "it" } else { "them" },
        );
        let mut f = Finding::new(Kind::SocketLbMissingAtRoot, Severity::Critical, message, fix_for(snap, Some(*owner)));
        f.cgroup = Some("/".to_owned());
        if let [only] = missing[..] {
            f.attach_type = Some(only);
        }
        f.hooks = missing;
        f.owner = Some(*owner);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    /// Issue 28, M3: an unattached program named like Cilium's, pinned in
    /// Cilium's directory by anyone with CAP_BPF and the bpffs, made two
    /// criticals naming every pod (missing at root, pods without socket LB).
    #[test]
    fn only_attachments_say_a_cni_uses_a_hook_never_a_load_or_a_pin() {
        let mut s = node();
        prog(&mut s, 40, "cil_sock4_sendm", ProgType::CgroupSockAddr);
        s.pods.push(pod_cgroup(POD, 44, "f8371831-8021-4722-af27-93c925d25a14", &[]));
        assert!(evaluate(&s, &Policy::default()).is_empty(), "anyone can load a program with Cilium's name");
        s.cni_pins.push(CniPin {
            cni: Cni::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_sendmsg".into(),
            prog_id: 40,
            link_id: Some(7),
        });
        assert!(evaluate(&s, &Policy::default()).is_empty(), "and pin it in Cilium's directory");
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 40);
        let f = evaluate(&s, &Policy::default());
        let missing = f.iter().find(|f| f.kind == Kind::SocketLbMissingAtRoot).expect("attached, not at the root");
        assert_eq!(missing.attach_type, Some(at("sendmsg4")));
    }

    #[test]
    fn unsupported_hook_is_not_reported_missing() {
        let mut s = node();
        prog(&mut s, 41, "cil_sock_release", ProgType::CgroupSock);
        attach(&mut s, CTR, CTR_ID, "sock_release", 41);
        s.unsupported_attach_types.push(at("sock_release"));
        assert!(!kinds(&evaluate(&s, &Policy::default())).contains(&"socket_lb_missing_at_root"));
    }
}
