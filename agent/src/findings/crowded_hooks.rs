//! `hook_program_count_high`: one cgroup and hook close to the kernel's limit of 64 programs, whoever fills it.

use super::*;

/// The kernel's limit of programs per cgroup and hook (BPF_CGROUP_MAX_PROGS).
pub const MAX_HOOK_PROGRAMS: usize = 64;
/// `hook_program_count_high` warns from three quarters of it.
pub const HOOK_PROGRAMS_WARN: usize = MAX_HOOK_PROGRAMS * 3 / 4;

pub(super) const EXPLANATION: &str = "these hooks hold close to the kernel's limit of 64 programs per cgroup and hook; at the limit the next attach fails with E2BIG (\"argument list too long\").";

/// Programs per (cgroup, hook), for every owner: what a leaking runtime
/// fills up to the kernel's limit.
fn hook_counts(snap: &Snapshot) -> BTreeMap<(u64, AttachType), (usize, &str)> {
    let mut counts: BTreeMap<(u64, AttachType), (usize, &str)> = BTreeMap::new();
    for a in &snap.attachments {
        counts.entry((a.cgroup_id, a.attach_type)).or_insert((0, a.cgroup.as_str())).0 += 1;
    }
    counts
}

/// One finding per cgroup, naming each of its hooks near the limit.
pub(super) fn crowded_hooks(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    // Owners per crowded (cgroup, hook), in one pass over the attachments.
    let counts = hook_counts(snap);
    let mut owners: BTreeMap<(u64, AttachType), BTreeMap<Owner, usize>> = BTreeMap::new();
    for a in &snap.attachments {
        if counts.get(&(a.cgroup_id, a.attach_type)).is_some_and(|(n, _)| *n >= HOOK_PROGRAMS_WARN) {
            let owner = cx.owner(a);
            *owners.entry((a.cgroup_id, a.attach_type)).or_default().entry(owner).or_default() += 1;
        }
    }
    // Each cgroup's path and its crowded hooks with their counts.
    type Crowded<'s> = (&'s str, Vec<(AttachType, usize)>);
    let mut by_cgroup: BTreeMap<u64, Crowded<'_>> = BTreeMap::new();
    for ((cgroup_id, hook), (n, cgroup)) in counts.into_iter().filter(|(_, (n, _))| *n >= HOOK_PROGRAMS_WARN) {
        by_cgroup.entry(cgroup_id).or_insert((cgroup, Vec::new())).1.push((hook, n));
    }
    for (cgroup_id, (cgroup, hooks)) in by_cgroup {
        let most = hooks.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let full = most >= MAX_HOOK_PROGRAMS;
        let each: Vec<String> = hooks
            .iter()
            .map(|(hook, n)| {
                let by: Vec<String> = owners
                    .get(&(cgroup_id, *hook))
                    .into_iter()
                    .flatten()
                    .map(|(o, k)| format!("{k} {}", o.as_str()))
                    .collect();
                format!("{n} on {hook} ({})", by.join(", "))
            })
            .collect();
        let names: Vec<&str> = hooks.iter().map(|(h, _)| h.name()).collect();
        let message = format!(
            "Programs attached on {place}: {each}. The kernel allows {MAX_HOOK_PROGRAMS} per cgroup and hook: {state}",
            place = place(snap, cgroup),
            each = each.join("; "),
            state = if full {
                "the next BPF_PROG_ATTACH on a full hook fails with E2BIG (\"argument list too long\"), so a container start or agent restart that attaches there fails.".to_owned()
            } else {
                format!(
                    "{} more and attaching there fails with E2BIG (\"argument list too long\").",
                    MAX_HOOK_PROGRAMS - most
                )
            },
        );
        let remediation = format!(
            "See which programs they are (`bpftool cgroup show <cgroup path>`): many copies of one program are a leak, \
             such as a container runtime attaching a new device program on every update without detaching the old one. \
             Detach the stale copies (`bpftool cgroup detach <cgroup path> {} id <prog>`) and upgrade what leaks them.",
            names[0]
        );
        let severity = if full { Severity::Critical } else { Severity::Warning };
        let mut f = Finding::new(Kind::HookProgramCountHigh, severity, message, remediation);
        f = if cgroup_id == snap.root.cgroup_id {
            Finding { cgroup: Some("/".into()), ..f }
        } else {
            f.at_cgroup(cgroup, snap)
        };
        f.hooks = hooks.iter().map(|(h, _)| *h).collect();
        if let [(only, _)] = hooks[..] {
            f.attach_type = Some(only);
        }
        f.count = Some(most as u64);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn a_hook_near_the_kernels_limit_is_flagged_whoever_fills_it() {
        let mut s = node();
        for i in 0..MAX_HOOK_PROGRAMS as u32 {
            prog(&mut s, 100 + i, "", ProgType::CgroupDevice);
        }
        for i in 0..(HOOK_PROGRAMS_WARN as u32 - 1) {
            attach(&mut s, CTR, CTR_ID, "device", 100 + i);
        }
        assert!(evaluate(&s, &Policy::default()).is_empty(), "47 is not yet worth a word");
        attach(&mut s, CTR, CTR_ID, "device", 100 + HOOK_PROGRAMS_WARN as u32 - 1);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["hook_program_count_high"]);
        assert_eq!((f[0].severity, f[0].count), (Severity::Warning, Some(48)));
        assert!(f[0].message.contains("48 on device (48 runtime)"), "{}", f[0].message);
        assert_eq!(f[0].container_id.as_deref().map(str::len), Some(64));
        for i in HOOK_PROGRAMS_WARN as u32..MAX_HOOK_PROGRAMS as u32 {
            attach(&mut s, CTR, CTR_ID, "device", 100 + i);
        }
        let f = evaluate(&s, &Policy::default());
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].message.contains("fails with E2BIG"), "{}", f[0].message);
    }
}
