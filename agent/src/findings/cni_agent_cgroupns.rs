//! `cni_agent_private_cgroupns`: an owner's agent in a cgroup namespace other than PID 1's, named as the likely cause of the findings about that owner.

use super::*;

pub(super) const EXPLANATION: &str = "these agents run in a cgroup namespace other than PID 1's: a cgroup2 mount they make is rooted at their own cgroup.";

/// For each owner in `about` (those with a critical finding or programs
/// below the root), its agents in a cgroup namespace other than PID 1's.
pub(super) fn cni_agents(cx: &Ctx<'_>, about: &BTreeSet<Owner>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let Some(reference) = snap.reference_cgroupns else { return };
    for p in snap.agents.iter().filter(|p| p.privileged && p.cgroupns != reference && about.contains(&p.owner)) {
        let whose = if snap.reference_ns_is_pid1 { "PID 1's" } else { "the auditor's (PID 1's could not be read)" };
        // Name the cgroup as the other findings do (relative to the audited
        // root) when the walk saw the process; else as /proc shows it.
        let cgroup = snap
            .processes
            .iter()
            .find(|(_, procs)| procs.iter().any(|q| q.pid == p.pid))
            .map_or(p.cgroup.as_str(), |(c, _)| c.as_str());
        let mut message = format!(
            "{comm} (pid {pid}, {o}'s agent) runs in cgroup namespace {ns}, not {whose} ({reference}): a cgroup2 mount it \
             makes is rooted at its own cgroup. This is the likely cause of the findings above about {o}.",
            comm = p.comm,
            pid = p.pid,
            ns = p.cgroupns,
            o = p.owner.title(),
        );
        // Where it attached: its own cgroup, through which mount.
        let landed = cx.attachments().any(|(a, o)| o.owner == p.owner && a.cgroup == cgroup && !at_root(snap, a));
        let mounted = p.owner.spec().map(|s| s.mount_points).unwrap_or_default();
        let seen = |mp: &str| snap.mounts.iter().any(|m| m.mount_point.as_os_str() == mp);
        if landed {
            message.push_str(&format!(" Its programs are attached to that very cgroup ({cgroup})"));
            match mounted.iter().find(|mp| seen(mp)) {
                Some(mp) => message.push_str(&format!(", the top of its mount at {mp}.")),
                None => message.push_str(&format!(
                    ", through a cgroup2 mount that is in no mountinfo of PID 1's{at}: made in its own mount namespace \
                     or anonymously (fsmount), it is rooted at the root of its cgroup namespace, which is that cgroup.",
                    at = mounted.first().map_or(String::new(), |mp| format!(" (none at {mp})")),
                )),
            }
        }
        let mut f =
            Finding::new(Kind::CniAgentPrivateCgroupns, Severity::Warning, message, fix_for(snap, Some(p.owner)))
                .at_cgroup(cgroup, snap)
                .with_runtime_fix();
        f.processes = vec![ProcessRef { pid: p.pid, comm: p.comm.clone() }];
        f.owner = Some(p.owner);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn cni_agent_in_private_cgroupns_is_named_only_as_a_cause() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::Unknown).cgroupns = 200;
        cilium_connect(&mut s, "/", 1);
        assert!(evaluate(&s, &Policy::default()).is_empty(), "normal when socket LB is at the root");

        let mut s = node();
        let agent = cilium_agent(&mut s, SocketLb::Unknown);
        (agent.cgroupns, agent.cgroup) = (200, "/abs/path".into());
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let cause = f.iter().find(|f| f.kind == Kind::CniAgentPrivateCgroupns).expect("named as the cause");
        assert_eq!(cause.cgroup.as_deref(), Some(CTR), "the walk's path, not /proc's");
        assert!(cause.message.contains("PID 1's"));

        assert!(!cause.remediation.contains("default-cgroupns-mode"), "containerd's path: no Docker advice");

        // The same agent in a container Docker runs (cri-dockerd, systemd
        // driver): Docker's own setting is the lasting fix, on both.
        let docker = CTR.replace("cri-containerd-", "docker-");
        let mut s = node();
        let agent = cilium_agent(&mut s, SocketLb::Unknown);
        (agent.cgroupns, agent.cgroup) = (200, docker.clone());
        cilium_connect(&mut s, &docker, CTR_ID);
        s.processes.insert(docker.clone(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        for kind in [Kind::CniAgentPrivateCgroupns, Kind::SocketLbBelowRoot] {
            let f = f.iter().find(|f| f.kind == kind).unwrap();
            assert_eq!(f.runtime, Some("docker"), "{kind:?}");
            assert!(
                f.remediation.contains("\"default-cgroupns-mode\": \"host\"")
                    && f.remediation.contains("--cgroupns=host"),
                "{kind:?}: {}",
                f.remediation
            );
            assert!(
                f.remediation.contains("cgroup.autoMount") || f.remediation.contains("remount"),
                "the CNI's fix stays: {}",
                f.remediation
            );
        }

        // Same namespace as PID 1: not a cause.
        s.agents[0].cgroupns = 100;
        assert!(evaluate(&s, &Policy::default()).iter().all(|f| f.kind != Kind::CniAgentPrivateCgroupns));
    }
}

#[cfg(test)]
mod anonymous {
    use super::*;
    use crate::findings::tests::*;
    use crate::owner::Owner;

    /// Issue 37: Kmesh mounts its cgroup2 inside its own container (no
    /// mount in PID 1's mountinfo); the cause is named from where its
    /// programs are and its agent's cgroup namespace.
    #[test]
    fn an_agent_that_attached_through_a_mount_in_no_mountinfo_is_named_the_cause() {
        let mut s = node();
        prog(&mut s, 90, "cgroup_connect4_prog", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 90);
        let a = agent(&mut s, Owner::Kmesh);
        (a.cgroupns, a.cgroup) = (300, CTR.into());
        let pid = a.pid;
        s.processes.insert(CTR.into(), vec![ProcessRef { pid, comm: "kmesh-daemon".into() }]);
        let f = evaluate(&s, &Policy::default());
        let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).expect("Kmesh's, below the root");
        // Its agent's cgroup alone is a place a tenant can attach to too
        // (issue 47, L3): said, not paged. Its pin, while it runs, is proof.
        assert_eq!((below.owner, below.severity), (Some(Owner::Kmesh), Severity::Warning));
        s.pins.push(OwnerPin {
            owner: Owner::Kmesh,
            path: "/sys/fs/bpf/bpf_kmesh_workload/cgroup_connect4_prog".into(),
            prog_id: 90,
            link_id: None,
            target: None,
        });
        let f = evaluate(&s, &Policy::default());
        let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).expect("Kmesh's, below the root");
        assert_eq!((below.owner, below.severity), (Some(Owner::Kmesh), Severity::Critical));
        let cause = f.iter().find(|f| f.kind == Kind::CniAgentPrivateCgroupns).expect("the cause");
        assert_eq!(cause.owner, Some(Owner::Kmesh));
        assert!(cause.message.contains("in no mountinfo of PID 1's (none at /mnt/kmesh_cgroup2)"), "{}", cause.message);
        assert!(cause.remediation.contains("--cgroup2-path"), "{}", cause.remediation);
    }
}
