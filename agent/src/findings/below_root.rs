//! `socket_lb_below_root` and `root_hook_below_root`: programs that an
//! owner means for the root cgroup (every socket on the node) attached to a
//! cgroup below it, where they act for that subtree only.

use super::*;
use crate::owner::Owned;

pub(super) const EXPLANATION: &str = "these programs are meant for the root cgroup but are attached to this cgroup: only sockets of processes in it run them, every other pod on the node bypasses them (for a socket load balancer, its connections to Service IPs are not translated).";

pub(super) const HOOK_EXPLANATION: &str = "these programs are meant for the root cgroup but are attached to this cgroup, on hooks that observe or steer sockets rather than rewrite their addresses: for every other pod the owner's data or feature is lost, while its traffic still flows.";

/// Whether `a`, below the root with owner `o`, is misplaced: a program of
/// an owner proven to mean it for the root (proven for a hook it uses), or
/// one nobody is proven to own on a socket-address hook or named like a
/// root owner's on a hook such owners use.
fn misplaced_one(a: &Attachment, o: &Owned) -> bool {
    if o.owner.intends_root() && o.proof.is_some() {
        return true;
    }
    if o.owner != Owner::Unknown {
        return false;
    }
    let like_a_root_owner = o.named_like.is_some_and(Owner::intends_root) && crate::owner::is_root_hook(a.attach_type);
    a.attach_type.is_socket_address() || like_a_root_owner
}

/// The programs of owners proven to mean them for the root, attached below
/// it: what `agent remount --detach-misattached` detaches. Never a program
/// nobody is proven to own.
pub fn misplaced<'s>(snap: &'s Snapshot, policy: &'s Policy) -> Vec<(&'s Attachment, Owner)> {
    let cx = Ctx::new(snap, policy);
    cx.attachments()
        .filter(|(a, o)| !at_root(snap, a) && o.owner.intends_root() && o.proof.is_some())
        .map(|(a, o)| (a, o.owner))
        .collect()
}

/// One finding per cgroup, owner and kind, naming its hooks and programs.
pub(super) fn below_root(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    type Key = (u64, bool, Owner, Option<Owner>);
    // Each group's programs, and whether one of them is proven its owner's
    // by what no tenant can make.
    let mut groups: BTreeMap<Key, (Vec<&Attachment>, bool)> = BTreeMap::new();
    for (a, o) in cx.attachments().filter(|(a, _)| !at_root(snap, a)) {
        if misplaced_one(a, &o) {
            // Unknown programs apart by the root owner they are named like
            // (a benign owner's name is said of each program instead).
            let like = o.named_like.filter(|l| l.intends_root());
            let g = groups.entry((a.cgroup_id, a.attach_type.is_socket_address(), o.owner, like)).or_default();
            g.0.push(a);
            g.1 |= o.proven_strongly();
        }
    }
    for ((_, socket, owner, like), (mut programs, strongly)) in groups {
        programs.sort_by_key(|a| (a.attach_type, a.prog_id));
        let proven = owner != Owner::Unknown;
        // Proven only by where it is (its owner's agent runs in that cgroup):
        // a tenant can attach there too (issue 47, L3), so it is said, not paged.
        let (kind, severity) = match (socket, proven && strongly) {
            (true, true) => (Kind::SocketLbBelowRoot, Severity::Critical),
            (true, false) => (Kind::SocketLbBelowRoot, Severity::Warning),
            (false, _) => (Kind::RootHookBelowRoot, Severity::Warning),
        };
        let first = programs[0];
        let place = where_(snap, &attribute(&first.cgroup), &first.cgroup);
        let mut hooks: Vec<&str> = programs.iter().map(|a| a.attach_type.name()).collect();
        hooks.dedup();
        let named: Vec<String> =
            programs.iter().take(4).map(|a| format!("{} (prog {})", prog_name(snap, a.prog_id), a.prog_id)).collect();
        let more = programs.len().saturating_sub(named.len());
        let named =
            format!("{}{}", named.join(", "), if more > 0 { format!(" and {more} more") } else { String::new() });
        let whose = match (proven, like) {
            (true, _) => owner.title().to_owned(),
            (false, Some(l)) => format!(
                "an unknown owner ({} named like {}'s, but nothing proves {} its)",
                if programs.len() == 1 { "it is" } else { "they are" },
                l.title(),
                them(&programs)
            ),
            (false, None) => "an unknown owner".to_owned(),
        };
        let lost = if !socket {
            format!(
                "for every other pod, what {who} does on {hooks} is lost (data or a feature; traffic still flows).",
                who = if proven { owner.title() } else { "their owner" },
                hooks = hooks.join(", "),
            )
        } else if proven && owner.balances_sockets() {
            format!(
                "every other pod on this node bypasses {t}'s socket load balancing, so connections to Service IPs from \
                 them are not translated.",
                t = owner.title()
            )
        } else if proven {
            format!("every other pod on this node bypasses them: {} does not act on their connections.", owner.title())
        } else {
            "every other pod on this node bypasses them.".to_owned()
        };
        let mut message = format!(
            "{n} program{s} of {whose} {are} attached to {hooks} on {place}, not on the root cgroup: {named}. Only sockets \
             of processes in that cgroup run {it}; {lost}",
            n = programs.len(),
            s = if programs.len() == 1 { "" } else { "s" },
            are = if programs.len() == 1 { "is" } else { "are" },
            it = them(&programs),
            hooks = hooks.join(", "),
        );
        if proven {
            message.push_str(&format!(" {}", proof_text(cx, first, owner)));
        }
        // A name that claims a benign owner on a hook that owner never uses.
        if !proven
            && let Some((a, p, claimed)) = programs.iter().find_map(|a| {
                let p = snap.programs.get(&a.prog_id)?;
                Some((a, p, crate::owner::claimed_by_name(&p.name).filter(|c| c.is_benign())?))
            })
        {
            message.push_str(&format!(
                " {name}'s name claims {claimed}, but {claimed} attaches no {} program to {}: a name is chosen by whoever loads the program.",
                p.prog_type,
                a.attach_type,
                name = prog_name(snap, a.prog_id),
                claimed = if p.name.is_empty() { "a container runtime (unnamed)".to_owned() } else { claimed.as_str().to_owned() },
            ));
        }
        let remediation = if proven {
            fix_for(snap, Some(owner))
        } else {
            let ids: Vec<String> = programs.iter().take(4).map(|a| a.prog_id.to_string()).collect();
            format!(
                "Find what loaded {it} (`bpftool prog show id {}`, and the pids that hold {it}); no owner cgaudit knows is \
                 proven to have attached {it} (its agent holding {it}, its pin, its attach call), so nothing here says \
                 another pod lacks anything. If {they} {are} legitimate, allow {it} with `--allow <name prefix>`.",
                ids.join("`, `bpftool prog show id "),
                it = them(&programs),
                they = if programs.len() == 1 { "it" } else { "they" },
                are = if programs.len() == 1 { "is" } else { "are" },
            )
        };
        let mut f = Finding::new(kind, severity, message, remediation).at_cgroup(&first.cgroup, snap).about(
            snap,
            &programs,
            &cx.attachers,
        );
        if proven {
            f = f.with_runtime_fix();
        }
        f.owner = Some(owner);
        f.named_like = like;
        out.push(f);
    }
}

fn them(programs: &[&Attachment]) -> &'static str {
    if programs.len() == 1 { "it" } else { "them" }
}

/// What proves `a` (below the root) `owner`'s, in words.
fn proof_text(cx: &Ctx<'_>, a: &Attachment, owner: Owner) -> String {
    use crate::owner::Proof;
    let o = cx.owned(a);
    let agent = cx.agents_of(owner).next().map(|p| format!("{} (pid {})", p.comm, p.pid));
    let agent = agent.as_deref().unwrap_or("its agent");
    match o.proof {
        Some(Proof::Held) => format!("{agent} holds them: they are {}'s.", owner.title()),
        Some(Proof::Pinned) => format!("They are pinned in {}'s bpffs directory.", owner.title()),
        Some(Proof::AttachedByAgent) => format!("{agent} attached them (its bpf() call was traced)."),
        Some(Proof::AgentInCgroup) => format!(
            "{agent} runs in that very cgroup: the programs may have landed on its own container. Nothing else \
             proves them {}'s (its agent does not hold them, they are not pinned, no attach call of its was seen), \
             and a pod with CAP_BPF and CAP_NET_ADMIN can attach to that cgroup too: a warning, not a page.",
            owner.title()
        ),
        Some(Proof::MountRooted) if cx.agent_in(&a.cgroup) == Some(owner) => format!(
            "{agent} runs in that very cgroup, where {}'s cgroup2 mount is rooted: the programs landed on its own \
             container.",
            owner.title()
        ),
        Some(Proof::MountRooted) => format!("{}'s cgroup2 mount is rooted at that cgroup.", owner.title()),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn seed_yields_one_critical_finding_per_cgroup_naming_its_hooks_and_programs() {
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 1);
        let b = below[0];
        assert_eq!(b.severity, Severity::Critical);
        assert_eq!(b.pod_uid.as_deref(), Some("f8371831-8021-4722-af27-93c925d25a14"));
        assert_eq!(b.container_id.as_deref().map(str::len), Some(64));
        assert_eq!(b.runtime, Some("containerd"));
        assert_eq!(b.owner, Some(Owner::Cilium));
        assert_eq!(b.processes[0].comm, "cilium-agent");
        assert_eq!(b.hooks, [at("connect4"), at("connect6")]);
        assert_eq!(b.count, Some(2));
        let names: Vec<&str> = b.programs.iter().map(|p| p.prog_name.as_str()).collect();
        assert_eq!(names, ["cil_sock4_connect", "cil_sock6_connect"]);
        assert_eq!((b.attach_type, b.prog_id), (None, None), "two programs: no one program's fields");
        assert!(b.message.contains("2 programs of Cilium are attached to connect4, connect6"), "{}", b.message);
        assert!(b.message.contains("not on the root cgroup"));
        // ...and the root lacks both hooks, in one finding.
        let missing: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbMissingAtRoot).collect();
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].hooks, [at("connect4"), at("connect6")]);
    }

    /// Issue 36, H2: a tenant filling every socket-LB hook of its cgroups
    /// with 64 programs made one critical finding per program (16,640 at
    /// 20 cgroups, a 50.9 MB report). One finding per cgroup and owner now,
    /// listing at most PROGRAMS_SHOWN programs and counting them all.
    #[test]
    fn a_full_hook_is_one_finding_however_many_programs_fill_it() {
        let mut s = node();
        let hooks = ["connect4", "connect6", "sendmsg4", "sendmsg6", "recvmsg4", "recvmsg6", "bind4", "bind6"];
        let mut id = 1000;
        for cgroup in 0..3u64 {
            let path = format!("/tenant/c{cgroup}");
            for hook in hooks {
                for _ in 0..64 {
                    prog(&mut s, id, &format!("tenant_{id}"), ProgType::CgroupSockAddr);
                    attach(&mut s, &path, 100 + cgroup, hook, id);
                    id += 1;
                }
            }
        }
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 3, "one per cgroup");
        for b in &below {
            assert_eq!(b.count, Some(64 * hooks.len() as u64));
            assert_eq!(b.programs.len(), PROGRAMS_SHOWN);
            assert_eq!(b.hooks.len(), hooks.len());
            assert!(b.message.len() < 1024, "{}", b.message.len());
        }
        let crowded: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::HookProgramCountHigh).collect();
        assert_eq!(crowded.len(), 3, "one per cgroup, its full hooks named: {crowded:#?}");
        assert_eq!(crowded[0].hooks.len(), hooks.len());
        assert_eq!(f.len(), 6, "{:?}", kinds(&f));
    }

    /// An attach call is someone's only for the program it attached: one
    /// whose program is unknown names nobody.
    #[test]
    fn who_attached_is_the_caller_that_attached_that_program() {
        use crate::event::{Change, Event};
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        let call = |seq, pid, prog_id| Event {
            seq,
            time_unix_ms: 0,
            change: Change::BpfCall {
                command: crate::bpf::BpfCommand::ProgAttach,
                cgroup_id: Some(CTR_ID),
                attach_type: Some(at("connect4")),
                prog_id,
                link_id: None,
                flags: 0,
                hints: crate::event::Hints::default(),
            },
            pid,
            tid: pid,
            comm: "x".into(),
            caller_cgroup_id: 1,
        };
        let connect4 = s.attachments.iter().find(|a| a.attach_type == at("connect4")).unwrap().prog_id;
        s.events = vec![call(1, 10, Some(connect4)), call(2, 20, None), call(3, 30, Some(connect4 + 100))];
        let by = |s: &Snapshot| {
            let f = evaluate(s, &Policy::default());
            let b = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).unwrap().clone();
            let p = b.programs.iter().find(|p| p.attach_type == at("connect4")).unwrap().clone();
            (b.attached_by.map(|a| a.pid), p.attached_by.map(|a| a.pid))
        };
        assert_eq!(by(&s), (Some(10), Some(10)), "the program's attacher, and the finding's latest");
        s.events.remove(0);
        assert_eq!(by(&s), (None, None), "a call without its program, or with another, attached nothing here");
    }

    #[test]
    fn benign_owners_below_root_are_never_flagged() {
        let mut s = node();
        prog(&mut s, 20, "sd_bind4", ProgType::CgroupSockAddr);
        prog(&mut s, 21, "", ProgType::CgroupDevice);
        attach(&mut s, "/system.slice/x.service", 5, "bind4", 20);
        attach(&mut s, CTR, CTR_ID, "device", 21);
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    /// Issue 37: `--kmesh` called Kmesh's programs below the root benign
    /// "by design"; Kmesh means them for the root (it picks workloads
    /// inside them). Named like Kmesh's, proven nobody's: a warning that
    /// names the owner it is like and claims nothing about other pods.
    #[test]
    fn kmesh_named_programs_below_the_root_are_unknown_and_at_most_a_warning() {
        let mut s = node();
        prog(&mut s, 22, "cgroup_connect4_prog", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 22);
        s.pods.push(pod_cgroup(POD, 44, "f8371831-8021-4722-af27-93c925d25a14", &[]));
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"]);
        assert_eq!(
            (f[0].severity, f[0].owner, f[0].named_like),
            (Severity::Warning, Some(Owner::Unknown), Some(Owner::Kmesh))
        );
        assert!(f[0].message.contains("named like Kmesh's, but nothing proves it its"), "{}", f[0].message);
        assert!(!f[0].remediation.contains("restart"), "{}", f[0].remediation);

        // Held by kmesh-daemon: Kmesh's, critical, with Kmesh's own fix.
        agent(&mut s, Owner::Kmesh).holds.push(22);
        let f = evaluate(&s, &Policy::default());
        let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).unwrap();
        assert_eq!((below.severity, below.owner), (Severity::Critical, Some(Owner::Kmesh)));
        assert!(below.remediation.contains("--cgroup2-path"), "{}", below.remediation);
        assert!(below.remediation.contains("kubectl -n kmesh-system delete pod -l app=kmesh"), "{}", below.remediation);
        assert!(below.message.contains("kmesh-daemon (pid 7) holds them"), "{}", below.message);
        // Kmesh does not balance sockets for pods: no pods_without finding.
        assert!(!kinds(&f).contains(&"pods_without_socket_lb"), "{:?}", kinds(&f));
    }

    /// Issue 37, M2 of issue 36's red team: a do-nothing program named
    /// `cil_sock4_connect`, attached by an ordinary pod to its own cgroup,
    /// made three criticals (a Cilium misattachment with "restart Cilium",
    /// missing at root, every pod without socket LB).
    #[test]
    fn a_program_named_like_ciliums_in_a_pod_raises_no_critical() {
        let mut s = node();
        named_cilium_connect(&mut s, CTR, CTR_ID);
        s.pods.push(pod_cgroup(POD, 44, "f8371831-8021-4722-af27-93c925d25a14", &[]));
        s.pods.push(pod_cgroup(
            "/kubepods/pod0a0a0a0a-0000-4000-8000-000000000000",
            45,
            "0a0a0a0a-0000-4000-8000-000000000000",
            &[],
        ));
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"], "{f:#?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].named_like, Some(Owner::Cilium));
        assert!(!f[0].remediation.contains("Cilium"), "no Cilium fix: {}", f[0].remediation);
        // And a Cilium agent that runs elsewhere proves nothing about them.
        cilium_agent(&mut s, SocketLb::Unknown);
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), ["socket_lb_below_root"]);
    }

    /// The rest of what an owner means for the root, below it: a warning.
    #[test]
    fn an_owners_other_root_hooks_below_the_root_are_a_warning() {
        let mut s = node();
        prog(&mut s, 50, "sockops_prog", ProgType::SockOps);
        attach(&mut s, CTR, CTR_ID, "sock_ops", 50);
        agent(&mut s, Owner::Kmesh).holds.push(50);
        let f = evaluate(&s, &Policy::default());
        let hook = f.iter().find(|f| f.kind == Kind::RootHookBelowRoot).expect("root_hook_below_root");
        assert_eq!((hook.severity, hook.owner), (Severity::Warning, Some(Owner::Kmesh)));
        assert!(hook.message.contains("traffic still flows"), "{}", hook.message);
        assert!(f.iter().all(|f| f.severity == Severity::Warning), "{:?}", kinds(&f));
    }

    #[test]
    fn a_benign_name_on_a_socket_hook_is_flagged_and_the_claim_named() {
        let mut s = node();
        prog(&mut s, 23, "sd_lb", ProgType::CgroupSockAddr);
        prog(&mut s, 24, "", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 23);
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 24);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"]);
        assert_eq!(f[0].owner, Some(Owner::Unknown));
        assert!(
            f[0].message
                .contains("sd_lb's name claims systemd, but systemd attaches no cgroup_sock_addr program to connect4"),
            "{}",
            f[0].message
        );
        s.attachments.retain(|a| a.prog_id == 24);
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("a container runtime (unnamed)"), "{}", f[0].message);
    }

    #[test]
    fn allowlist_silences_an_unknown_owner() {
        let mut s = node();
        prog(&mut s, 30, "my_lb_connect4", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 30);
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), ["socket_lb_below_root"]);
        assert!(evaluate(&s, &Policy { allow: vec!["my_lb".into()], ..Default::default() }).is_empty());
    }
}
