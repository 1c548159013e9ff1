//! `cni_leftover_programs`: a CNI's socket-LB programs attached while no agent of it runs, or its configuration turns socket LB off.

use super::*;

pub(super) const EXPLANATION: &str = "socket-LB programs of a CNI are attached although its agent does not run on this node or its configuration turns socket LB off.";

pub(super) fn leftovers(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    use strum::IntoEnumIterator;
    for cni in Cni::iter() {
        let owner = cni.owner();
        let left: Vec<&Attachment> =
            owned(snap, policy).filter(|(a, o)| *o == owner && a.attach_type.is_socket_lb()).map(|(a, _)| a).collect();
        if left.is_empty() {
            continue;
        }
        let running: Vec<_> = agents(snap, cni).collect();
        // An agent outside the audit's PID view is not visible, not absent:
        // the audit says its view is incomplete instead.
        let reason = if running.is_empty() && !sees_node_processes(snap) {
            continue;
        } else if running.is_empty() {
            // Say what was seen: a process may bear the agent's name and
            // not be taken for it.
            match snap.cni_processes.iter().find(|p| p.cni == cni && !p.privileged) {
                Some(p) => format!(
                    "a process named {} runs (pid {}) but is not taken for the agent: {}",
                    cni.agent_comm(),
                    p.pid,
                    p.intent.evidence
                ),
                None => format!("no {} process runs on this node", cni.agent_comm()),
            }
        } else if let Some(off) = running.iter().find(|p| p.intent.socket_lb == SocketLb::Off) {
            format!("its configuration turns socket LB off ({})", off.intent.evidence)
        } else {
            continue;
        };
        let cgroups: BTreeSet<&str> = left.iter().map(|a| a.cgroup.as_str()).collect();
        let hooks: BTreeSet<&str> = left.iter().map(|a| a.attach_type.name()).collect();
        let message = format!(
            "{n} {cni} socket-LB programs are attached ({hooks}, on {m} cgroup{s}) but {reason}: nothing keeps them current, \
             and they still rewrite connections to Service IPs by whatever maps they last had.",
            n = left.len(),
            hooks = hooks.into_iter().collect::<Vec<_>>().join(", "),
            m = cgroups.len(),
            s = if cgroups.len() == 1 { "" } else { "s" },
        );
        let remediation = format!(
            "If {cni} was removed from this node or its socket LB turned off, detach them (`bpftool cgroup tree` lists them; \
             `bpftool cgroup detach <cgroup> <hook> id <prog>`) and remove its pins under /sys/fs/bpf/{}; if its agent should \
             be running, find out why it is not.",
            cni.pin_dir()
        );
        let mut f = Finding::new(Kind::CniLeftoverPrograms, Severity::Warning, message, remediation);
        if cgroups.len() == 1 {
            let only = left[0];
            f = if at_root(snap, only) {
                Finding { cgroup: Some("/".into()), ..f }
            } else {
                f.at_cgroup(&only.cgroup, snap)
            };
        }
        f.owner = Some(owner);
        f.count = Some(left.len() as u64);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn cni_programs_with_no_agent_or_socket_lb_off_are_leftovers() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cni_leftover_programs"]);
        assert_eq!((f[0].count, f[0].cgroup.as_deref()), (Some(2), Some("/")));
        assert!(f[0].message.contains("no cilium-agent process runs on this node"), "{}", f[0].message);
        cilium_agent(&mut s, SocketLb::Off);
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("its configuration turns socket LB off (kube-proxy"), "{}", f[0].message);
        s.cni_processes[0].intent.socket_lb = SocketLb::On;
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    /// Issue 36: the finding said no cilium-agent runs while the same
    /// report listed one (a process so named, not taken for the agent).
    #[test]
    fn a_process_named_like_the_agent_is_said_to_run_and_why_it_does_not_count() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        let p = cilium_agent(&mut s, SocketLb::Unknown);
        p.privileged = false;
        p.intent = crate::snapshot::Intent::unknown("not in the node's network namespace (no hostNetwork)");
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cni_leftover_programs"]);
        assert!(
            f[0].message.contains(
                "a process named cilium-agent runs (pid 7) but is not taken for the agent: not in the node's network \
                 namespace"
            ),
            "{}",
            f[0].message
        );
        assert!(!f[0].message.contains("no cilium-agent process runs"));
    }

    #[test]
    fn an_agent_out_of_view_is_not_called_absent() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        s.pid_view = crate::snapshot::PidView::NotNode { reason: "the agent is PID 1 of its own PID namespace".into() };
        assert!(evaluate(&s, &Policy::default()).is_empty(), "a cilium-agent may well run where the audit cannot see");
        assert!(incomplete(&s).is_some(), "and the audit says it could not see");
    }
}
