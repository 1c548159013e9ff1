//! `socket_lb_below_root`: a socket-LB program attached to a cgroup other than the root, by an owner that is not benign there.

use super::*;

pub(super) const EXPLANATION: &str = "these socket-LB programs are attached to this cgroup, not the root: only sockets of processes in it are load-balanced, every other pod on the node bypasses them and its connections to Service IPs are not translated.";

pub(super) fn below_root(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    for a in &snap.attachments {
        if a.cgroup_id == snap.root.cgroup_id || !a.attach_type.is_socket_lb() {
            continue;
        }
        let owner = owner_of(snap, a.prog_id, Some(a.attach_type), policy);
        if owner.is_benign() {
            continue;
        }
        let name = prog_name(snap, a.prog_id);
        let attribution = attribute(&a.cgroup);
        let place = where_(snap, &attribution, &a.cgroup);
        let mut message = format!(
            "{name} ({owner}, prog {id}) is attached to {t} on {place}, not on the root cgroup. Only sockets of processes in that cgroup \
             run it; every other pod on this node bypasses {owner} socket load balancing, so connections to Service IPs from them are not translated.",
            owner = owner.as_str(),
            id = a.prog_id,
            t = a.attach_type,
        );
        // A name that claims a benign owner on a hook that owner never uses.
        if let (Owner::Unknown, Some(claimed)) =
            (owner, snap.programs.get(&a.prog_id).and_then(|p| claimed_owner(&p.name)))
            && claimed.is_benign()
        {
            let p = &snap.programs[&a.prog_id];
            message.push_str(&format!(
                " Its name claims {claimed}, but {claimed} attaches no {} program to {}: a name is chosen by whoever loads the program.",
                p.prog_type,
                a.attach_type,
                claimed = if p.name.is_empty() { "a container runtime (unnamed)".to_owned() } else { claimed.as_str().to_owned() },
            ));
        }
        let remediation = if owner.is_cni() {
            fix_for(snap, Some(owner))
        } else {
            format!(
                "Find what loaded prog {} (`bpftool prog show id {}`); if it is legitimate, allow it with `--allow <name prefix>`.",
                a.prog_id, a.prog_id
            )
        };
        let mut f =
            Finding::new(Kind::SocketLbBelowRoot, Severity::Critical, message, remediation).at_cgroup(&a.cgroup, snap);
        if owner.is_cni() {
            f = f.with_runtime_fix();
        }
        f.attach_type = Some(a.attach_type);
        f.prog_id = Some(a.prog_id);
        f.prog_name = Some(name);
        f.owner = Some(owner);
        f.link_id = a.link_id;
        f.attached_by = actor(snap, a);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn seed_yields_one_critical_finding_per_program_attributed_to_the_container() {
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 2);
        for b in below {
            assert_eq!(b.severity, Severity::Critical);
            assert_eq!(b.pod_uid.as_deref(), Some("f8371831-8021-4722-af27-93c925d25a14"));
            assert_eq!(b.container_id.as_deref().map(str::len), Some(64));
            assert_eq!(b.runtime, Some("containerd"));
            assert_eq!(b.owner, Some(Owner::Cilium));
            assert_eq!(b.processes[0].comm, "cilium-agent");
            assert!(b.message.contains("not on the root cgroup"));
        }
        // ...and the root lacks both hooks.
        assert_eq!(f.iter().filter(|f| f.kind == Kind::SocketLbMissingAtRoot).count(), 2);
    }

    /// An attach call is someone's only for the program it attached: one
    /// whose program is unknown names nobody.
    #[test]
    fn who_attached_is_the_caller_that_attached_that_program() {
        use crate::snapshot::{Change, Event};
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        let call = |seq, pid, prog_id| Event {
            seq,
            time_unix_ms: 0,
            change: Change::BpfCall {
                command: crate::bpf::BpfCommand::ProgAttach,
                cgroup_id: Some(CTR_ID),
                attach_type: Some(at("connect4")),
                prog_id,
                link_id: None,
                flags: 0,
                hints: crate::snapshot::Hints::default(),
            },
            pid,
            tid: pid,
            comm: "x".into(),
            caller_cgroup_id: 1,
        };
        let connect4 = s.attachments.iter().find(|a| a.attach_type == at("connect4")).unwrap().prog_id;
        s.events = vec![call(1, 10, Some(connect4)), call(2, 20, None), call(3, 30, Some(connect4 + 100))];
        let f = evaluate(&s, &Policy::default());
        let by = |f: &Finding| f.attached_by.as_ref().map(|a| a.pid);
        let b = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot && f.attach_type == Some(at("connect4"))).unwrap();
        assert_eq!(by(b), Some(10));
        s.events.remove(0);
        let f = evaluate(&s, &Policy::default());
        let b = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot && f.attach_type == Some(at("connect4"))).unwrap();
        assert_eq!(by(b), None, "a call without its program, or with another, attached nothing here");
    }

    #[test]
    fn benign_owners_below_root_are_never_flagged() {
        let mut s = node();
        prog(&mut s, 20, "sd_bind4", ProgType::CgroupSockAddr);
        prog(&mut s, 21, "", ProgType::CgroupDevice);
        prog(&mut s, 22, "cgroup_connect4_prog", ProgType::CgroupSockAddr);
        attach(&mut s, "/system.slice/x.service", 5, "bind4", 20);
        attach(&mut s, CTR, CTR_ID, "device", 21);
        attach(&mut s, CTR, CTR_ID, "connect4", 22);
        let kmesh = Policy { kmesh: true, ..Policy::default() };
        assert!(evaluate(&s, &kmesh).is_empty());
        // Kmesh's programs are its own only where the operator says it runs.
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"]);
        assert!(f[0].message.contains("Its name claims kmesh"), "{}", f[0].message);
    }

    #[test]
    fn a_benign_name_on_a_socket_hook_is_flagged_and_the_claim_named() {
        let mut s = node();
        prog(&mut s, 23, "sd_lb", ProgType::CgroupSockAddr);
        prog(&mut s, 24, "", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 23);
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 24);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root", "socket_lb_below_root"]);
        assert_eq!(f[0].owner, Some(Owner::Unknown));
        assert!(
            f[0].message
                .contains("Its name claims systemd, but systemd attaches no cgroup_sock_addr program to connect4")
        );
        assert!(f[1].message.contains("a container runtime (unnamed)"), "{}", f[1].message);
    }

    #[test]
    fn allowlist_silences_an_unknown_owner() {
        let mut s = node();
        prog(&mut s, 30, "my_lb_connect4", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 30);
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), ["socket_lb_below_root"]);
        assert!(evaluate(&s, &Policy { allow: vec!["my_lb".into()], ..Policy::default() }).is_empty());
    }
}
