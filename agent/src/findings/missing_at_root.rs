//! `socket_lb_missing_at_root`: an owner proven to mean its socket-address programs for the root has them attached somewhere, but nothing on that hook at the root.

use super::*;

pub(super) const EXPLANATION: &str = "the owner's programs for these socket-address hooks are attached on the node, proven its, but none is attached at the root cgroup, so pods do not get them while the agent may still report itself healthy.";

/// One finding per owner, naming each hook it lacks at the root. `hooks`:
/// the socket-address hooks each root owner's proven programs are on.
pub(super) fn missing_at_root(cx: &Ctx<'_>, hooks: &BTreeMap<Owner, BTreeSet<AttachType>>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let at_root: BTreeSet<(Owner, AttachType)> =
        cx.attachments().filter(|(a, _)| at_root(snap, a)).map(|(a, o)| (o.owner, a.attach_type)).collect();
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
        let what = if owner.balances_sockets() { "load balancing" } else { "programs" };
        let message = format!(
            "{o} has programs for {hooks} attached on this node (proven its), but none is attached to {them} on the \
             root cgroup: pods on this node do not get {o}'s {what} there, while its agent may still report itself healthy.",
            o = owner.title(),
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
        s.pins.push(OwnerPin {
            owner: Owner::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_sendmsg".into(),
            prog_id: 40,
            link_id: Some(7),
            target: None,
        });
        assert!(evaluate(&s, &Policy::default()).is_empty(), "and pin it in Cilium's directory");
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 40);
        // Issue 47, M3: attached too, while Cilium's agent does not run, the
        // pin proves nothing: no program of Cilium's, nothing missing.
        let f = evaluate(&s, &Policy::default());
        assert!(!kinds(&f).contains(&"socket_lb_missing_at_root"), "{:?}", kinds(&f));
        let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).expect("below the root");
        assert_eq!((below.owner, below.severity), (Some(Owner::Unknown), Severity::Warning));
        // With its agent running, the pin is Cilium's proof.
        agent(&mut s, Owner::Cilium);
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
