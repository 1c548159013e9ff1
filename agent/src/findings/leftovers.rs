//! `cni_leftover_programs`: an owner's programs attached while no agent of it runs, or (Cilium, Calico) its configuration turns socket LB off.

use super::*;

pub(super) const EXPLANATION: &str = "programs of an owner are attached although its agent does not run on this node or its configuration turns socket LB off.";

pub(super) fn leftovers(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let mut by_owner: BTreeMap<Owner, Vec<&Attachment>> = BTreeMap::new();
    for (a, o) in cx.attachments() {
        if o.owner.intends_root() && o.owner.agent_comm().is_some() {
            by_owner.entry(o.owner).or_default().push(a);
        }
    }
    for (owner, left) in by_owner {
        let comm = owner.agent_comm().unwrap_or_default();
        let running: Vec<_> = cx.agents_of(owner).collect();
        // An agent outside the audit's PID view is not visible, not absent:
        // the audit says its view is incomplete instead.
        let reason = if running.is_empty() && !sees_node_processes(snap) {
            continue;
        } else if running.is_empty() {
            // Say what was seen: a process may bear the agent's name and
            // not be taken for it.
            match snap.agents.iter().find(|p| p.owner == owner && !p.privileged) {
                Some(p) => format!(
                    "a process named {} runs (pid {}) but is not taken for the agent: {}",
                    p.comm, p.pid, p.intent.evidence
                ),
                None => format!("no {comm} process runs on this node"),
            }
        } else if let Some(off) = running.iter().find(|p| p.intent.socket_lb == SocketLb::Off) {
            format!("its configuration turns socket LB off ({})", off.intent.evidence)
        } else {
            continue;
        };
        let cgroups: BTreeSet<&str> = left.iter().map(|a| a.cgroup.as_str()).collect();
        let hooks: BTreeSet<&str> = left.iter().map(|a| a.attach_type.name()).collect();
        let message = format!(
            "{n} {o} program{s} {are} attached ({hooks}, on {m} cgroup{cs}) but {reason}: nothing keeps them current, \
             and they still act on sockets by whatever maps they last had{lb}.",
            n = left.len(),
            o = owner.title(),
            s = if left.len() == 1 { "" } else { "s" },
            are = if left.len() == 1 { "is" } else { "are" },
            hooks = hooks.into_iter().collect::<Vec<_>>().join(", "),
            m = cgroups.len(),
            cs = if cgroups.len() == 1 { "" } else { "s" },
            lb = if owner.balances_sockets() { " (rewriting connections to Service IPs)" } else { "" },
        );
        let pins = owner
            .spec()
            .and_then(|s| s.pin_dirs.first())
            .map_or(String::new(), |d| format!(" and remove its pins under /sys/fs/bpf/{d}"));
        let remediation = format!(
            "If {o} was removed from this node or turned off, detach them (`bpftool cgroup tree` lists them; \
             `bpftool cgroup detach <cgroup> <hook> id <prog>`){pins}; if its agent should be running, find out why it is \
             not.",
            o = owner.title(),
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
        // At the root with Cilium's names and types: Cilium's, though no
        // agent holds them.
        named_cilium_connect(&mut s, "/", 1);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cni_leftover_programs"]);
        assert_eq!((f[0].count, f[0].cgroup.as_deref()), (Some(2), Some("/")));
        assert!(f[0].message.contains("no cilium-agent process runs on this node"), "{}", f[0].message);
        cilium_agent(&mut s, SocketLb::Off);
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("its configuration turns socket LB off (kube-proxy"), "{}", f[0].message);
        s.agents[0].intent.socket_lb = SocketLb::On;
        s.agents[0].holds.extend([10, 11]);
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    /// Issue 36: the finding said no cilium-agent runs while the same
    /// report listed one (a process so named, not taken for the agent).
    #[test]
    fn a_process_named_like_the_agent_is_said_to_run_and_why_it_does_not_count() {
        let mut s = node();
        named_cilium_connect(&mut s, "/", 1);
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
        named_cilium_connect(&mut s, "/", 1);
        s.pid_view = crate::snapshot::PidView::NotNode { reason: "the agent is PID 1 of its own PID namespace".into() };
        assert!(evaluate(&s, &Policy::default()).is_empty(), "a cilium-agent may well run where the audit cannot see");
        assert!(incomplete(&s).is_some(), "and the audit says it could not see");
    }
}
