//! `socket_lb_below_root`: a socket-LB program attached to a cgroup other than the root, by an owner that is not benign there.

use super::*;

pub(super) const EXPLANATION: &str = "these socket-LB programs are attached to this cgroup, not the root: only sockets of processes in it are load-balanced, every other pod on the node bypasses them and its connections to Service IPs are not translated.";

/// Socket-LB programs attached below the root by an owner that is not
/// benign there, with their owners: what the rule judges and what
/// `agent remount --detach-misattached` detaches.
pub fn misplaced<'s>(snap: &'s Snapshot, policy: &'s Policy) -> impl Iterator<Item = (&'s Attachment, Owner)> + 's {
    snap.attachments
        .iter()
        .filter(|a| a.cgroup_id != snap.root.cgroup_id && a.attach_type.is_socket_lb())
        .map(|a| (a, owner_of(snap, a.prog_id, Some(a.attach_type), policy)))
        .filter(|(_, owner)| !owner.is_benign())
}

/// One finding per cgroup and owner, naming its hooks and programs.
pub(super) fn below_root(snap: &Snapshot, policy: &Policy, attachers: &Attachers<'_>, out: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(u64, Owner), Vec<&Attachment>> = BTreeMap::new();
    for (a, owner) in misplaced(snap, policy) {
        groups.entry((a.cgroup_id, owner)).or_default().push(a);
    }
    for ((_, owner), mut programs) in groups {
        programs.sort_by_key(|a| (a.attach_type, a.prog_id));
        let first = programs[0];
        let attribution = attribute(&first.cgroup);
        let place = where_(snap, &attribution, &first.cgroup);
        let mut message = match programs[..] {
            [a] => format!(
                "{name} ({owner}, prog {id}) is attached to {t} on {place}, not on the root cgroup. Only sockets of processes in that cgroup \
                 run it; every other pod on this node bypasses {owner} socket load balancing, so connections to Service IPs from them are not translated.",
                name = prog_name(snap, a.prog_id),
                owner = owner.as_str(),
                id = a.prog_id,
                t = a.attach_type,
            ),
            _ => {
                let mut hooks: Vec<&str> = programs.iter().map(|a| a.attach_type.name()).collect();
                hooks.dedup();
                let named: Vec<String> = programs
                    .iter()
                    .take(4)
                    .map(|a| format!("{} (prog {})", prog_name(snap, a.prog_id), a.prog_id))
                    .collect();
                let more = programs.len().saturating_sub(named.len());
                format!(
                    "{n} {owner} socket-LB programs are attached to {hooks} on {place}, not on the root cgroup: {named}{more}. Only sockets of \
                     processes in that cgroup run them; every other pod on this node bypasses {owner} socket load balancing, so connections \
                     to Service IPs from them are not translated.",
                    n = programs.len(),
                    owner = owner.as_str(),
                    hooks = hooks.join(", "),
                    named = named.join(", "),
                    more = if more > 0 { format!(" and {more} more") } else { String::new() },
                )
            }
        };
        // A name that claims a benign owner on a hook that owner never uses.
        if owner == Owner::Unknown
            && let Some((a, p, claimed)) = programs.iter().find_map(|a| {
                let p = snap.programs.get(&a.prog_id)?;
                Some((a, p, claimed_owner(&p.name).filter(|c| c.is_benign())?))
            })
        {
            message.push_str(&format!(
                " {name}'s name claims {claimed}, but {claimed} attaches no {} program to {}: a name is chosen by whoever loads the program.",
                p.prog_type,
                a.attach_type,
                name = prog_name(snap, a.prog_id),
                claimed = if p.name.is_empty() { "a container runtime (unnamed)".to_owned() } else { claimed.as_str().to_owned() },
            ));
        }
        let remediation = if owner.is_cni() {
            fix_for(snap, Some(owner))
        } else {
            let ids: Vec<String> = programs.iter().take(4).map(|a| a.prog_id.to_string()).collect();
            format!(
                "Find what loaded them (`bpftool prog show id {}`); if they are legitimate, allow them with `--allow <name prefix>`.",
                ids.join("`, `bpftool prog show id ")
            )
        };
        let mut f = Finding::new(Kind::SocketLbBelowRoot, Severity::Critical, message, remediation)
            .at_cgroup(&first.cgroup, snap)
            .about(snap, &programs, attachers);
        if owner.is_cni() {
            f = f.with_runtime_fix();
        }
        f.owner = Some(owner);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn seed_yields_one_critical_finding_per_cgroup_naming_its_hooks_and_programs() {
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 1);
        let b = below[0];
        assert_eq!(b.severity, Severity::Critical);
        assert_eq!(b.pod_uid.as_deref(), Some("f8371831-8021-4722-af27-93c925d25a14"));
        assert_eq!(b.container_id.as_deref().map(str::len), Some(64));
        assert_eq!(b.runtime, Some("containerd"));
        assert_eq!(b.owner, Some(Owner::Cilium));
        assert_eq!(b.processes[0].comm, "cilium-agent");
        assert_eq!(b.hooks, [at("connect4"), at("connect6")]);
        assert_eq!(b.count, Some(2));
        let names: Vec<&str> = b.programs.iter().map(|p| p.prog_name.as_str()).collect();
        assert_eq!(names, ["cil_sock4_connect", "cil_sock6_connect"]);
        assert_eq!((b.attach_type, b.prog_id), (None, None), "two programs: no one program's fields");
        assert!(b.message.contains("2 cilium socket-LB programs are attached to connect4, connect6"), "{}", b.message);
        assert!(b.message.contains("not on the root cgroup"));
        // ...and the root lacks both hooks, in one finding.
        let missing: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbMissingAtRoot).collect();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].hooks, [at("connect4"), at("connect6")]);
    }

    /// Issue 36, H2: a tenant filling every socket-LB hook of its cgroups
    /// with 64 programs made one critical finding per program (16,640 at
    /// 20 cgroups, a 50.9 MB report). One finding per cgroup and owner now,
    /// listing at most PROGRAMS_SHOWN programs and counting them all.
    #[test]
    fn a_full_hook_is_one_finding_however_many_programs_fill_it() {
        let mut s = node();
        let hooks = ["connect4", "connect6", "sendmsg4", "sendmsg6", "recvmsg4", "recvmsg6", "bind4", "bind6"];
        let mut id = 1000;
        for cgroup in 0..3u64 {
            let path = format!("/tenant/c{cgroup}");
            for hook in hooks {
                for _ in 0..64 {
                    prog(&mut s, id, &format!("tenant_{id}"), ProgType::CgroupSockAddr);
                    attach(&mut s, &path, 100 + cgroup, hook, id);
                    id += 1;
                }
            }
        }
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 3, "one per cgroup");
        for b in &below {
            assert_eq!(b.count, Some(64 * hooks.len() as u64));
            assert_eq!(b.programs.len(), PROGRAMS_SHOWN);
            assert_eq!(b.hooks.len(), hooks.len());
            assert!(b.message.len() < 1024, "{}", b.message.len());
        }
        let crowded: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::HookProgramCountHigh).collect();
        assert_eq!(crowded.len(), 3, "one per cgroup, its full hooks named: {crowded:#?}");
        assert_eq!(crowded[0].hooks.len(), hooks.len());
        assert_eq!(f.len(), 6, "{:?}", kinds(&f));
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
        let by = |s: &Snapshot| {
            let f = evaluate(s, &Policy::default());
            let b = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).unwrap().clone();
            let p = b.programs.iter().find(|p| p.attach_type == at("connect4")).unwrap().clone();
            (b.attached_by.map(|a| a.pid), p.attached_by.map(|a| a.pid))
        };
        assert_eq!(by(&s), (Some(10), Some(10)), "the program's attacher, and the finding's latest");
        s.events.remove(0);
        assert_eq!(by(&s), (None, None), "a call without its program, or with another, attached nothing here");
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
        assert!(f[0].message.contains("cgroup_connect4_prog's name claims kmesh"), "{}", f[0].message);
    }

    #[test]
    fn a_benign_name_on_a_socket_hook_is_flagged_and_the_claim_named() {
        let mut s = node();
        prog(&mut s, 23, "sd_lb", ProgType::CgroupSockAddr);
        prog(&mut s, 24, "", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 23);
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 24);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"]);
        assert_eq!(f[0].owner, Some(Owner::Unknown));
        assert!(
            f[0].message
                .contains("sd_lb's name claims systemd, but systemd attaches no cgroup_sock_addr program to connect4"),
            "{}",
            f[0].message
        );
        s.attachments.retain(|a| a.prog_id == 24);
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("a container runtime (unnamed)"), "{}", f[0].message);
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
