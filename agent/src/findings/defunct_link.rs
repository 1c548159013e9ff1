//! `defunct_link`: a root owner's cgroup bpf_link whose cgroup is gone.

use super::*;

pub(super) const EXPLANATION: &str =
    "these bpf_links point at cgroups that no longer exist: their programs run nowhere.";

/// Links whose cgroup is gone, held or pinned by an owner that means its
/// programs for the root (a pinned link is reused on restart). A warning
/// that says what was seen: a link in an owner's pin directory counts
/// here whether or not its agent runs (the pin is what would be reused).
pub(super) fn defunct_links(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    for l in snap.cgroup_links.iter().filter(|l| l.cgroup_id == 0) {
        let t = AttachType::from_kernel(l.attach_type);
        let pinned_by = snap.pins.iter().find(|p| p.link_id == Some(l.link_id) || p.prog_id == l.prog_id);
        let owner = match (cx.program_owner(l.prog_id, t).owner, pinned_by) {
            (Owner::Unknown, Some(pin))
                if snap
                    .programs
                    .get(&l.prog_id)
                    .is_some_and(|p| crate::owner::makes(pin.owner, &p.name, p.prog_type, t)) =>
            {
                pin.owner
            }
            (owner, _) => owner,
        };
        if !owner.intends_root() {
            continue;
        }
        let name = prog_name(snap, l.prog_id);
        let message = format!(
            "bpf_link {id} holds {name} ({o}, prog {p}) for {t} on a cgroup that no longer exists: the program runs nowhere. \
             A pinned link like this is reused by {o} on restart instead of attaching at the root.",
            id = l.link_id,
            o = owner.title(),
            p = l.prog_id,
            t = t.map_or("an unknown hook", AttachType::name),
        );
        let pins = owner.spec().map(|s| s.pin_dirs).unwrap_or_default();
        let remediation = match pins.first() {
            Some(dir) => format!(
                "Remove the stale pin (under /sys/fs/bpf/{dir}/) and restart {o}'s agent on this node so it attaches a \
                 fresh link at the root.",
                o = owner.title()
            ),
            None => format!(
                "Restart {o}'s agent on this node (closing the link) so it attaches a fresh link at the root.",
                o = owner.title()
            ),
        };
        let mut f = Finding::new(Kind::DefunctLink, Severity::Warning, message, remediation);
        f.attach_type = t;
        f.prog_id = Some(l.prog_id);
        f.prog_name = Some(name);
        f.owner = Some(owner);
        f.link_id = Some(l.link_id);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn defunct_link_is_reported_only_for_cni_programs() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        prog(&mut s, 50, "cil_sock4_connect", ProgType::CgroupSockAddr);
        prog(&mut s, 51, "sd_fw_ingress", ProgType::CgroupSkb);
        attach(&mut s, "/", 1, "connect4", 50);
        // Held by the agent (its link fd), as Cilium holds its links.
        s.agents[0].holds.push(50);
        s.cgroup_links = vec![
            CgroupLinkInfo { link_id: 5, prog_id: 50, cgroup_id: 0, attach_type: at("connect4").kernel_value() },
            CgroupLinkInfo { link_id: 6, prog_id: 51, cgroup_id: 0, attach_type: at("ingress").kernel_value() },
        ];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["defunct_link"]);
        assert_eq!((f[0].link_id, f[0].severity), (Some(5), Severity::Warning));
        assert!(f[0].remediation.contains("/sys/fs/bpf/cilium/socketlb/links/cgroup/"), "{}", f[0].remediation);
        // A name alone on a link nobody holds or pinned proves nothing
        // (and an agent that keeps none of its root programs makes none of
        // them foreign: L3).
        s.agents[0].holds.clear();
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), Vec::<&str>::new());
    }
}
