//! `root_hook_conflict`: two owners that both mean a hook for the root
//! cgroup, where one of them attaches exclusively (no flags) or with
//! `BPF_F_ALLOW_OVERRIDE` and the other attaches multi-programs: the
//! kernel keeps one flag mode per cgroup and hook, so whichever came second
//! is refused (EPERM), and an exclusive program at the root refuses every
//! attach below it too.

use super::*;
use crate::bpf::AttachFlags;
use crate::owner::Owned;

pub(super) const EXPLANATION: &str = "two owners mean the same hook at the root cgroup, one attaching exclusively or with override and the other multi-programs: the kernel keeps one mode per cgroup and hook, so the second to attach is refused.";

/// The way `owner` attaches to `hook` by its registry entry, if it uses it.
fn attaches(owner: Owner, hook: AttachType) -> Option<crate::owner::Attach> {
    owner.spec()?.programs.iter().find(|p| p.hooks.contains(&hook.name())).map(|p| p.attach)
}

/// Whether `owner` is on this node: an agent of its runs, or a program
/// proven its is attached.
fn present(cx: &Ctx<'_>, owner: Owner, owned: &[(&Attachment, Owned)]) -> bool {
    cx.agents_of(owner).next().is_some() || owned.iter().any(|(_, o)| o.owner == owner)
}

pub(super) fn conflicts(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let owned: Vec<(&Attachment, Owned)> = cx.attachments().collect();
    // (hook, holder, refused) already said.
    let mut said: BTreeSet<(AttachType, Owner, Owner)> = BTreeSet::new();
    let root: Vec<&(&Attachment, Owned)> = owned.iter().filter(|(a, _)| at_root(snap, a)).collect();
    // What holds each hook at the root, and how.
    type Held<'a> = (AttachFlags, Vec<(&'a Attachment, Owner)>);
    let mut holders: BTreeMap<AttachType, Held<'_>> = BTreeMap::new();
    for (a, o) in &root {
        let e = holders.entry(a.attach_type).or_insert((a.attach_flags, Vec::new()));
        e.1.push((a, o.owner));
    }
    for (hook, (flags, held)) in &holders {
        let holder_owners: BTreeSet<Owner> = held.iter().map(|(_, o)| *o).collect();
        // Every root owner that uses this hook in the other mode, present
        // on the node, and not among its holders: refused.
        for other in Owner::known().filter(|o| o.intends_root() && !holder_owners.contains(o)) {
            let Some(mode) = attaches(other, *hook) else { continue };
            let refused = match flags {
                AttachFlags::Multi => !mode.shares_hook(),
                AttachFlags::None | AttachFlags::Override => mode.shares_hook(),
            };
            if !refused || !present(cx, other, &owned) {
                continue;
            }
            for holder in &holder_owners {
                if !said.insert((*hook, *holder, other)) {
                    continue;
                }
                let programs: Vec<&Attachment> = held.iter().filter(|(_, o)| o == holder).map(|(a, _)| *a).collect();
                out.push(conflict(cx, *hook, *flags, *holder, &programs, other, mode));
            }
        }
    }
}

fn conflict(
    cx: &Ctx<'_>,
    hook: AttachType,
    flags: AttachFlags,
    holder: Owner,
    programs: &[&Attachment],
    refused: Owner,
    mode: crate::owner::Attach,
) -> Finding {
    let snap = cx.snap;
    let names: Vec<String> =
        programs.iter().take(4).map(|a| format!("{} (prog {})", prog_name(snap, a.prog_id), a.prog_id)).collect();
    let how = match flags {
        AttachFlags::None => "exclusively (attach flags: none)",
        AttachFlags::Override => "with BPF_F_ALLOW_OVERRIDE",
        AttachFlags::Multi => "as multi-programs (BPF_F_ALLOW_MULTI or bpf_link)",
    };
    let holder_name = if holder == Owner::Unknown {
        "A program nobody is proven to own".to_owned()
    } else {
        holder.title().to_owned()
    };
    let below = match flags {
        AttachFlags::None => " An exclusive program at the root also refuses every attach to this hook below it.",
        AttachFlags::Override => " A program attached below the root replaces it for that subtree.",
        AttachFlags::Multi => "",
    };
    let lost = if refused.balances_sockets() && hook.is_socket_address() {
        format!(
            " {r}'s socket load balancing is missing on {hook}: connections to Service IPs there are not translated.",
            r = refused.title()
        )
    } else {
        format!(" What {r} does on {hook} is lost on this node.", r = refused.title())
    };
    let message = format!(
        "{holder_name} holds {hook} at the root cgroup {how}: {names}. {r} attaches to {hook} {mode} \
         (by its registry entry), and its agent runs or its programs are attached on this node, but the kernel keeps one \
         attach mode per cgroup and hook: {r}'s attach there is refused with EPERM.{below}{lost}",
        names = names.join(", "),
        r = refused.title(),
        mode = match mode {
            crate::owner::Attach::Exclusive => "exclusively (no flags)".to_owned(),
            crate::owner::Attach::Override => "with BPF_F_ALLOW_OVERRIDE".to_owned(),
            m => format!("as multi-programs ({})", m.as_str()),
        },
    );
    let remediation = format!(
        "Run only one of {h} and {r} on this hook, or configure the exclusive one to attach multi-programs ({why}); \
         after detaching (`bpftool cgroup detach <root cgroup> {hook} id <prog>`), restart {r}'s agent so it attaches.",
        h = if holder == Owner::Unknown { "the unknown program" } else { holder.title() },
        r = refused.title(),
        why = "Merbridge's `bpftool cgroup attach` in bpf/Makefile takes `multi`; LoxiLB's sock_ops and connect4 take no \
               flag of choice upstream",
    );
    let severity =
        if refused.balances_sockets() && hook.is_socket_address() { Severity::Critical } else { Severity::Warning };
    let mut f =
        Finding::new(Kind::RootHookConflict, severity, message, remediation).about(snap, programs, &cx.attachers);
    f.cgroup = Some("/".into());
    f.owner = Some(holder);
    f.other_owner = Some(refused);
    f.attach_flags = Some(flags);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::ProgType;
    use crate::findings::tests::*;

    fn exclusive(s: &mut Snapshot, id: u32, name: &str, hook: &str) {
        prog(s, id, name, ProgType::CgroupSockAddr);
        attach(s, "/", 1, hook, id);
        s.attachments.last_mut().unwrap().attach_flags = AttachFlags::None;
    }

    /// Issue 37: Merbridge attaches with no flags (`bpftool cgroup attach`
    /// in its bpf/Makefile); beside Cilium's multi programs at the root,
    /// the second to attach is refused.
    #[test]
    fn merbridge_exclusive_at_the_root_beside_ciliums_multi_programs_is_a_conflict_naming_both() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        prog(&mut s, 12, "cil_sock4_sendmsg", ProgType::CgroupSockAddr);
        attach(&mut s, "/", 1, "sendmsg4", 12);
        exclusive(&mut s, 70, "mb_sock_connect4", "connect4");
        let f = evaluate(&s, &Policy::default());
        let c = f.iter().find(|f| f.kind == Kind::RootHookConflict).expect("a conflict");
        assert_eq!((c.owner, c.other_owner), (Some(Owner::Merbridge), Some(Owner::Cilium)));
        assert_eq!(
            (c.severity, c.attach_flags, c.attach_type),
            (Severity::Critical, Some(AttachFlags::None), Some(at("connect4")))
        );
        assert!(c.message.contains("Merbridge holds connect4 at the root cgroup exclusively"), "{}", c.message);
        assert!(c.message.contains("Cilium's attach there is refused with EPERM"), "{}", c.message);
        // Without Cilium on the node, nothing is refused.
        let mut s2 = node();
        exclusive(&mut s2, 70, "mb_sock_connect4", "connect4");
        assert!(!kinds(&evaluate(&s2, &Policy::default())).contains(&"root_hook_conflict"));
    }

    /// The reverse: Cilium's multi programs got there first; Merbridge,
    /// running, cannot attach its exclusive program.
    #[test]
    fn an_exclusive_owner_refused_by_multi_programs_at_the_root_is_a_warning() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        agent(&mut s, Owner::Merbridge);
        let f = evaluate(&s, &Policy::default());
        let c: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::RootHookConflict).collect();
        assert_eq!(c.len(), 2, "connect4 and connect6: {f:#?}");
        assert_eq!(
            (c[0].owner, c[0].other_owner, c[0].severity),
            (Some(Owner::Cilium), Some(Owner::Merbridge), Severity::Warning)
        );
        assert!(c[0].message.contains("Merbridge attaches to connect4 exclusively (no flags)"), "{}", c[0].message);
    }

    /// LoxiLB attaches connect4 with BPF_F_ALLOW_OVERRIDE.
    #[test]
    fn override_at_the_root_refuses_multi_programs_too() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        exclusive(&mut s, 71, "llb_connect_v4_prog", "connect4");
        s.attachments.last_mut().unwrap().attach_flags = AttachFlags::Override;
        let f = evaluate(&s, &Policy::default());
        let c = f.iter().find(|f| f.kind == Kind::RootHookConflict).expect("a conflict");
        assert_eq!(
            (c.owner, c.other_owner, c.attach_flags),
            (Some(Owner::Loxilb), Some(Owner::Cilium), Some(AttachFlags::Override))
        );
        assert!(c.message.contains("with BPF_F_ALLOW_OVERRIDE"), "{}", c.message);
    }
}
