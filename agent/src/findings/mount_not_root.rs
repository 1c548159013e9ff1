//! `cgroup_mount_not_root`: a cgroup2 mount in PID 1's mount namespace whose top is not the root (the cause of the seed), critical at an owner's mount point.

use super::*;

pub(super) const EXPLANATION: &str =
    "these cgroup2 mounts are rooted below the hierarchy root: they were made from inside a private cgroup namespace.";

pub(super) fn mounts_not_root(snap: &Snapshot, out: &mut Vec<Finding>) {
    for m in &snap.mounts {
        let MountTop::Known { cgroup_id, cgroup: Some(cgroup) } = &m.top else { continue };
        if *cgroup_id == snap.root.cgroup_id {
            continue;
        }
        let owner = Owner::from_mount_point(&m.mount_point);
        let severity = if owner.is_some() { Severity::Critical } else { Severity::Warning };
        let message = format!(
            "cgroup2 is mounted at {mp} in PID 1's mount namespace, but the mount's top is cgroup {cgroup} (id {cgroup_id}), not the root: \
             it was mounted from inside a private cgroup namespace. {consequence}",
            mp = m.mount_point.display(),
            consequence = match owner {
                Some(o) => format!(
                    "{} attaches its programs to the top of this mount, so they land on that cgroup instead of the root.",
                    o.title()
                ),
                None => "Anything that attaches programs through this mount attaches below the root.".to_owned(),
            }
        );
        let message = match &m.shadowed_by {
            Some(over) => format!(
                "{message} The mount is hidden under {over}, mounted over it later: what that path shows now is not \
                 this mount, but an agent that opened it before (or holds it open) still attaches through it."
            ),
            None => message,
        };
        // One shell word each (red team 52, T4): as an argument, and inside
        // the `sh -c` script (which is then quoted as a whole).
        let shown = m.mount_point.display().to_string();
        let mp = crate::text::shell_word(&shown);
        let script = crate::text::shell_word(&format!("umount {mp} && mount -t cgroup2 none {mp}")).into_owned();
        let mut remediation = format!(
            "Replace the mount with one made from PID 1's cgroup and mount namespaces: `agent remount --path {mp} --apply` \
             (or `nsenter --cgroup=/proc/1/ns/cgroup --mount=/proc/1/ns/mnt sh -c {script}`)"
        );
        match owner.and_then(Owner::spec) {
            Some(spec) => remediation.push_str(&format!(
                "; then {} and on Docker hosts consider \
                 `\"default-cgroupns-mode\": \"host\"`.",
                spec.fix
            )),
            None => remediation.push_str("; on Docker hosts consider `\"default-cgroupns-mode\": \"host\"`."),
        }
        let mut f = Finding::new(Kind::CgroupMountNotRoot, severity, message, remediation).at_cgroup(cgroup, snap);
        f.mount_point = Some(m.mount_point.display().to_string());
        f.owner = owner;
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn cni_mount_below_root_is_critical_and_outside_the_tree_is_ignored() {
        let mut s = node();
        let mount = |mp: &str, id: u64, cgroup: Option<&str>| CgroupMount {
            mount_point: mp.into(),
            mountinfo_root: "/".into(),
            top: MountTop::Known { cgroup_id: id, cgroup: cgroup.map(str::to_owned) },
            shadowed_by: None,
        };
        s.mounts = vec![
            mount("/sys/fs/cgroup", 1, Some("/")),
            mount("/run/cilium/cgroupv2", CTR_ID, Some(CTR)),
            mount("/mnt/elsewhere", 77, Some("/system.slice")),
            mount("/run/calico/cgroup", 999, None),
        ];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cgroup_mount_not_root", "cgroup_mount_not_root"]);
        // The command a person pastes, for a plain path as it always was.
        assert!(
            f[0].remediation
                .contains("sh -c 'umount /run/cilium/cgroupv2 && mount -t cgroup2 none /run/cilium/cgroupv2'"),
            "{}",
            f[0].remediation
        );
        assert_eq!(
            (f[0].severity, f[0].cgroup.as_deref(), f[0].owner),
            (Severity::Critical, Some(CTR), Some(Owner::Cilium))
        );
        assert_eq!((f[1].severity, f[1].cgroup.as_deref()), (Severity::Warning, Some("/system.slice")));
        // A mount point someone named with shell syntax stays one word,
        // inside the script too (red team 52, T4).
        s.mounts = vec![mount("/mnt/$(touch${IFS}P)", CTR_ID, Some(CTR))];
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].remediation.contains("--path '/mnt/$(touch${IFS}P)' --apply"), "{}", f[0].remediation);
        assert!(
            f[0].remediation.contains(r#"sh -c 'umount '\''/mnt/$(touch${IFS}P)'\'' && mount"#),
            "{}",
            f[0].remediation
        );
    }
}
