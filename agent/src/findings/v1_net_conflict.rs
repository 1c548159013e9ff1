//! `cgroup_v1_net_controller_conflict`: the kernel matches sockets to the
//! cgroup-v2 root only, because cgroup v1 net_cls/net_prio were used on a
//! kernel without commit 8520e224f547 (mainline 5.15, 5.10.y from 5.10.226):
//! from then on, for the rest of the boot, socket programs attached below the
//! hierarchy's real root run for no socket at all, while those at the real
//! root run for every socket (measured on Debian's 5.10.0-32, 6.1 and 6.12 by
//! the kernel-matrix suite, with traffic).
//!
//! Judged from the running kernel (its `cgroup_sk_alloc_disable` symbol),
//! never from its version string: vendors backport.

use super::*;
use crate::cgroup::root::ROOT_CGROUP_ID;

pub(super) const EXPLANATION: &str = "the kernel lacks the fix for cgroup v1 net_cls/net_prio and they were used: sockets are matched to the cgroup-v2 root only, so socket-LB programs attached below the hierarchy's real root run for no socket at all.";

/// Whether `a` is below the hierarchy's real root (the audit root is not
/// the real root on a nested node or with --cgroup-root).
fn below_real_root(snap: &Snapshot, a: &Attachment) -> bool {
    a.cgroup_id != snap.root.cgroup_id || snap.root.cgroup_id != ROOT_CGROUP_ID
}

pub(super) fn v1_net_conflict(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let Some(sm) = &snap.socket_matching else { return };
    let Some(in_use) = sm.in_use.as_deref().filter(|_| sm.kernel_lacks_fix) else { return };
    let voided: Vec<&Attachment> = cx
        .attachments()
        .filter(|(a, o)| {
            o.owner.intends_root() && o.proof.is_some() && a.attach_type.is_socket_address() && below_real_root(snap, a)
        })
        .map(|(a, _)| a)
        .collect();
    if voided.is_empty() {
        return;
    }
    let cgroups: BTreeSet<&str> = voided.iter().map(|a| a.cgroup.as_str()).collect();
    let message = format!(
        "This kernel ({kernel}) lacks commit 8520e224f547 (its cgroup_sk_alloc_disable is in /proc/kallsyms) and cgroup v1 \
         net_cls/net_prio were used ({in_use}): since then every new socket belongs to the cgroup-v2 root, not to its own \
         cgroup, so the {n} socket-address programs of {owners} attached below the hierarchy's real root ({where_}) run for no socket at \
         all: pods' connections to Service IPs are not translated. (Writing net_cls.classid, net_prio.ifpriomap, or a task \
         joining a net_prio cgroup does it, for the rest of the boot; programs at the real root keep running.)",
        kernel = snap.kernel,
        n = voided.len(),
        owners = {
            let mut o: Vec<&str> = voided.iter().map(|a| cx.owner(a).title()).collect();
            o.sort_unstable();
            o.dedup();
            o.join(", ")
        },
        where_ = cgroups.into_iter().map(|c| place(snap, c)).collect::<Vec<_>>().join(", "),
    );
    let remediation =
        "Attach the owner's socket programs at the hierarchy's real root (on a nested node, run its agent \
        with the host's cgroup namespace), or stop using net_cls/net_prio (boot with a unified cgroup hierarchy) and \
        reboot, or run a kernel with commit 8520e224f547 (5.15+, 5.10.226+, or a vendor backport); then restart its \
        agent."
            .to_owned();
    let mut f = Finding::new(Kind::CgroupV1NetControllerConflict, Severity::Critical, message, remediation);
    f.count = Some(voided.len() as u64);
    out.push(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    use crate::snapshot::SocketMatching;

    fn matching(lacks: bool, in_use: Option<&str>) -> Option<SocketMatching> {
        Some(SocketMatching { kernel_lacks_fix: lacks, in_use: in_use.map(str::to_owned) })
    }

    #[test]
    fn programs_below_the_real_root_are_void_only_on_a_kernel_without_the_fix_once_net_cls_is_used() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, CTR, CTR_ID);
        s.v1_net_controllers.push(V1NetController {
            controller: "net_cls".into(),
            mount_point: Some("/sys/fs/cgroup/net_cls,net_prio".into()),
        });
        s.kernel = "5.10.0-32-amd64".into();
        let fires = |s: &Snapshot| {
            evaluate(s, &Policy::default()).iter().any(|f| f.kind == Kind::CgroupV1NetControllerConflict)
        };
        s.socket_matching = matching(true, Some("net_cls.classid 1048577 in /sys/fs/cgroup/net_cls,net_prio/x"));
        let f = evaluate(&s, &Policy::default());
        let c = f.iter().find(|f| f.kind == Kind::CgroupV1NetControllerConflict).expect("fires");
        assert_eq!((c.severity, c.count), (Severity::Critical, Some(2)));
        assert!(c.message.contains("net_cls.classid 1048577"), "{}", c.message);
        // Not used (yet), or a kernel with the fix whatever its version: nothing stops.
        s.socket_matching = matching(true, None);
        assert!(!fires(&s));
        s.socket_matching = matching(false, Some("x"));
        assert!(!fires(&s), "a 5.10 with the fix backported");
        // At the real root, they keep running.
        s.socket_matching = matching(true, Some("x"));
        s.attachments.clear();
        cilium_connect(&mut s, "/", 1);
        assert!(!fires(&s));
        // A nested node's root is below the real root.
        s.root.cgroup_id = 77;
        s.attachments.iter_mut().for_each(|a| a.cgroup_id = 77);
        assert!(fires(&s));
    }
}
