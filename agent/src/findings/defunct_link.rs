//! `defunct_link`: a CNI's cgroup bpf_link whose cgroup is gone.

use super::*;

pub(super) const EXPLANATION: &str =
    "these bpf_links point at cgroups that no longer exist: their programs run nowhere.";

pub(super) fn defunct_links(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    for l in snap.cgroup_links.iter().filter(|l| l.cgroup_id == 0) {
        let t = AttachType::from_kernel(l.attach_type);
        let owner = owner_of(snap, l.prog_id, t, policy);
        if !owner.is_cni() {
            continue;
        }
        let name = prog_name(snap, l.prog_id);
        let message = format!(
            "bpf_link {id} holds {name} ({o}, prog {p}) for {t} on a cgroup that no longer exists: the program runs nowhere. \
             A pinned link like this is reused by the CNI on restart instead of attaching at the root.",
            id = l.link_id,
            o = owner.as_str(),
            p = l.prog_id,
            t = t.map_or("an unknown hook", AttachType::name),
        );
        let remediation = "Remove the stale pin (Cilium: /sys/fs/bpf/cilium/socketlb/links/cgroup/) and restart the CNI agent pod so it attaches a fresh link at the root.".to_owned();
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
        s.cgroup_links = vec![
            CgroupLinkInfo { link_id: 5, prog_id: 50, cgroup_id: 0, attach_type: at("connect4").kernel_value() },
            CgroupLinkInfo { link_id: 6, prog_id: 51, cgroup_id: 0, attach_type: at("ingress").kernel_value() },
        ];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["defunct_link"]);
        assert_eq!((f[0].link_id, f[0].severity), (Some(5), Severity::Warning));
    }
}
