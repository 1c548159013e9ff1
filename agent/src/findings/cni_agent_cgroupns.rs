//! `cni_agent_private_cgroupns`: a CNI agent in a cgroup namespace other than PID 1's, named as the likely cause of a critical finding.

use super::*;

pub(super) const EXPLANATION: &str = "these CNI agents run in a cgroup namespace other than PID 1's: a cgroup2 mount they make is rooted at their own cgroup.";

pub(super) fn cni_agents(snap: &Snapshot, out: &mut Vec<Finding>) {
    let Some(reference) = snap.reference_cgroupns else { return };
    for p in snap.cni_processes.iter().filter(|p| p.privileged && p.cgroupns != reference) {
        let whose = if snap.reference_ns_is_pid1 { "PID 1's" } else { "the auditor's (PID 1's could not be read)" };
        let message = format!(
            "{comm} (pid {pid}) runs in cgroup namespace {ns}, not {whose} ({reference}): a cgroup2 mount it makes is rooted at its own cgroup. \
             This is the likely cause of the socket-LB findings above.",
            comm = p.comm,
            pid = p.pid,
            ns = p.cgroupns,
        );
        // Name the cgroup as the other findings do (relative to the audited
        // root) when the walk saw the process; else as /proc shows it.
        let cgroup = snap
            .processes
            .iter()
            .find(|(_, procs)| procs.iter().any(|q| q.pid == p.pid))
            .map_or(p.cgroup.as_str(), |(c, _)| c.as_str());
        let mut f =
            Finding::new(Kind::CniAgentPrivateCgroupns, Severity::Warning, message, fix_for(snap, Some(p.cni.owner())))
                .at_cgroup(cgroup, snap)
                .with_runtime_fix();
        f.processes = vec![ProcessRef { pid: p.pid, comm: p.comm.clone() }];
        f.owner = Some(p.cni.owner());
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
        s.cni_processes[0].cgroupns = 100;
        assert!(evaluate(&s, &Policy::default()).iter().all(|f| f.kind != Kind::CniAgentPrivateCgroupns));
    }
}
