//! `socket_lb_configured_not_attached`: the CNI agent runs and its configuration turns socket LB on, but none of its socket-LB programs is at the root.

use super::*;

pub(super) const EXPLANATION: &str = "the CNI's own configuration turns socket LB on and its agent runs, but none of its socket-LB programs is attached at the root cgroup.";

/// For each socket load balancer whose configuration is read (Cilium,
/// Calico: `scan::intent`).
pub(super) fn configured_not_attached(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    for owner in Owner::known().filter(|o| o.balances_sockets()) {
        let Some(agent) = cx.agents_of(owner).find(|p| p.intent.socket_lb == SocketLb::On) else { continue };
        let cni = owner.title();
        let attached =
            cx.attachments().any(|(a, o)| at_root(snap, a) && a.attach_type.is_socket_address() && o.owner == owner);
        if attached {
            continue;
        }
        let message = format!(
            "{cni}'s configuration turns socket LB on ({evidence}) and its agent runs ({comm}, pid {pid}), but no {cni} socket-LB \
             program is attached to the root cgroup: pods' connections to ClusterIPs are not load-balanced by socket LB, \
             while the agent may report socket LB as enabled.",
            evidence = agent.intent.evidence,
            comm = agent.comm,
            pid = agent.pid,
        );
        let remediation = format!(
            "Look for socket-LB attach errors in the agent's log and in its status ({}); check the cgroup2 mount it \
             attaches through (`agent audit`: cgroup_mount_not_root; `agent remount --path {}`), then restart the agent \
             on this node: `{}`.",
            owner.status_hint().unwrap_or("its log"),
            owner.mount_point().unwrap_or("<its mount>"),
            owner.restart_command(&snap.node).unwrap_or_default()
        );
        let mut f = Finding::new(Kind::SocketLbConfiguredNotAttached, Severity::Critical, message, remediation);
        f.cgroup = Some("/".into());
        f.owner = Some(owner);
        f.processes = vec![ProcessRef { pid: agent.pid, comm: agent.comm.clone() }];
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn configured_socket_lb_with_nothing_at_the_root_is_critical() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_configured_not_attached"]);
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].message.contains("kube-proxy-replacement=true"), "{}", f[0].message);
        assert_eq!(f[0].processes[0].pid, 7);
        // Anyone can name a process cilium-agent: without privileges it is not the agent.
        s.agents[0].privileged = false;
        assert!(evaluate(&s, &Policy::default()).is_empty());
        // Off, host namespace only, or unknown: nothing is expected at the root.
        for lb in [SocketLb::Off, SocketLb::HostNamespaceOnly, SocketLb::Unknown] {
            s.agents[0] = {
                let mut n = node();
                cilium_agent(&mut n, lb).clone()
            };
            assert!(evaluate(&s, &Policy::default()).is_empty(), "{lb:?}");
        }
    }
}
