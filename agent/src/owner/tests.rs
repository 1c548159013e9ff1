use super::*;

const SOCK_ADDR: ProgType = ProgType::CgroupSockAddr;
const SOCK: ProgType = ProgType::CgroupSock;
const DEVICE: ProgType = ProgType::CgroupDevice;

fn at(n: &str) -> Option<AttachType> {
    AttachType::from_name(n)
}

fn nothing() -> Evidence {
    Evidence::default()
}

fn judged(name: &str, t: ProgType, hook: &str, e: &Evidence) -> Owned {
    judge(name, t, at(hook), e, &Policy::default())
}

#[test]
fn an_owners_program_is_its_own_by_what_proves_it_and_by_its_name_at_the_root() {
    let held = Evidence { held_by: Some(Owner::Cilium), ..nothing() };
    assert_eq!(judged("cil_sock4_connect", SOCK_ADDR, "connect4", &held).proof, Some(Proof::Held));
    assert_eq!(judged("cil_sock4_conne", SOCK_ADDR, "connect4", &held).owner, Owner::Cilium, "the kernel's 15 bytes");
    assert_eq!(judged("cil_sock_release", SOCK, "sock_release", &held).owner, Owner::Cilium);
    let root = Evidence { at_root: true, ..nothing() };
    assert_eq!(judged("cil_sock4_connect", SOCK_ADDR, "connect4", &root).proof, Some(Proof::AtRoot));
    assert_eq!(judged("calico_connect_v4", SOCK_ADDR, "connect4", &root).owner, Owner::Calico);
    assert_eq!(judged("cgroup_connect4_prog", SOCK_ADDR, "connect4", &root).owner, Owner::Kmesh);
    assert_eq!(judged("mb_sock_connect4", SOCK_ADDR, "connect4", &root).owner, Owner::Merbridge);
    assert_eq!(judged("llb_connect_v4_prog", SOCK_ADDR, "connect4", &root).owner, Owner::Loxilb);
    assert_eq!(judged("obi_sockmap_tracker", ProgType::SockOps, "sock_ops", &root).owner, Owner::Obi);
    assert_eq!(judged("beyla_sockmap_t", ProgType::SockOps, "sock_ops", &root).owner, Owner::Obi);
}

/// Issue 37, M2 of issue 36: a program merely named like Cilium's, in a
/// pod's own cgroup, made three criticals about every pod. A name is not
/// ownership: below the root, nothing proves it Cilium's.
#[test]
fn a_name_alone_below_the_root_is_unknown_named_like_its_owner() {
    let o = judged("cil_sock4_connect", SOCK_ADDR, "connect4", &nothing());
    assert_eq!(o, Owned::unknown(Some(Owner::Cilium)));
    let o = judged("cgroup_connect4_prog", SOCK_ADDR, "connect4", &nothing());
    assert_eq!((o.owner, o.named_like), (Owner::Unknown, Some(Owner::Kmesh)));
    // Proof of another owner does not make it that owner's either.
    let held = Evidence { held_by: Some(Owner::Calico), ..nothing() };
    assert_eq!(judged("cil_sock4_connect", SOCK_ADDR, "connect4", &held).owner, Owner::Unknown);
}

#[test]
fn each_proof_counts_for_what_the_owner_makes_only() {
    for e in [
        Evidence { pinned_by: Some(Owner::Kmesh), ..nothing() },
        Evidence { attached_by: Some(Owner::Kmesh), ..nothing() },
        Evidence { agent_in_cgroup: Some(Owner::Kmesh), ..nothing() },
        Evidence { mount_rooted: Some(Owner::Kmesh), ..nothing() },
    ] {
        assert_eq!(judged("cgroup_connect4_prog", SOCK_ADDR, "connect4", &e).owner, Owner::Kmesh, "{e:?}");
        assert_eq!(judged("cgroup_connect4_prog", SOCK_ADDR, "sendmsg4", &e).owner, Owner::Unknown, "not its hook");
        assert_eq!(judged("cgroup_connect4_prog", DEVICE, "device", &e).owner, Owner::Unknown, "not its type");
    }
    // Inspektor Gadget's gadgets name their own programs: held, any name.
    let held = Evidence { held_by: Some(Owner::InspektorGadget), ..nothing() };
    assert_eq!(judged("whatever", ProgType::SockOps, "sock_ops", &held).owner, Owner::InspektorGadget);
    assert_eq!(judged("whatever", SOCK_ADDR, "connect4", &held).owner, Owner::Unknown);
    assert_eq!(judged("whatever", ProgType::SockOps, "sock_ops", &nothing()).owner, Owner::Unknown);
}

#[test]
fn benign_owners_are_known_by_name_type_and_hook() {
    assert_eq!(judged("sd_fw_ingress", ProgType::CgroupSkb, "ingress", &nothing()).owner, Owner::Systemd);
    assert_eq!(judged("sd_restrictif_e", ProgType::CgroupSkb, "egress", &nothing()).owner, Owner::Systemd);
    assert_eq!(judged("sd_devices", DEVICE, "device", &nothing()).owner, Owner::Systemd);
    assert_eq!(judged("sd_bind6", SOCK_ADDR, "bind6", &nothing()).owner, Owner::Systemd);
    assert_eq!(judged("", DEVICE, "device", &nothing()).owner, Owner::Runtime);
    assert!(Owner::Systemd.is_benign() && Owner::Runtime.is_benign() && !Owner::Kmesh.is_benign());
}

/// A name is chosen by whoever loads the program: claiming a benign owner
/// on a hook that owner never uses is no cover.
#[test]
fn a_benign_name_on_a_hook_its_owner_never_uses_is_unknown() {
    let o = judged("sd_lb", SOCK_ADDR, "connect4", &nothing());
    assert_eq!((o.owner, o.named_like), (Owner::Unknown, Some(Owner::Systemd)));
    assert_eq!(judged("sd_bind4", SOCK_ADDR, "connect4", &nothing()).owner, Owner::Unknown);
    assert_eq!(judged("", SOCK_ADDR, "connect4", &nothing()).owner, Owner::Unknown);
    assert_eq!(judged("runc_x", SOCK_ADDR, "sendmsg4", &nothing()).owner, Owner::Unknown);
    let root = Evidence { at_root: true, ..nothing() };
    assert_eq!(judged("cil_sock4_connect", DEVICE, "device", &root).owner, Owner::Unknown, "no device program");
}

#[test]
fn the_allow_list_wins() {
    let policy = Policy { allow: vec!["my_lb_".to_owned()], ..Default::default() };
    assert_eq!(judge("my_lb_connect4", SOCK_ADDR, at("connect4"), &nothing(), &policy).owner, Owner::Allowed);
    assert!(Owner::Allowed.is_benign() && !Owner::Unknown.is_benign());
}

#[test]
fn the_registry_knows_each_owner_once_and_every_hook_it_names() {
    let mut seen = std::collections::BTreeSet::new();
    for s in registry::OWNERS {
        assert!(seen.insert(s.owner), "{:?} twice", s.owner);
        for p in s.programs {
            for h in p.hooks {
                assert!(AttachType::from_name(h).is_some(), "{}: no hook {h}", s.title);
            }
        }
        for a in s.agents {
            assert!(a.len() <= 15, "{}: {a} is longer than a command name", s.title);
        }
        if s.intends == Intends::Root {
            assert!(s.fix.ends_with(','), "{}'s fix goes on in a sentence", s.title);
        }
    }
    assert_eq!(Owner::from_agent_comm("kmesh-daemon"), Some(Owner::Kmesh));
    assert_eq!(Owner::from_mount_point(std::path::Path::new("/mnt/kmesh_cgroup2")), Some(Owner::Kmesh));
    assert_eq!(
        Owner::Kmesh.restart_command("n1").unwrap(),
        "kubectl -n kmesh-system delete pod -l app=kmesh --field-selector spec.nodeName=n1"
    );
}

/// The README's table is the registry's (`markdown_table`, below).
#[test]
fn the_readmes_owners_table_is_the_registry() {
    let readme = include_str!("../../../README.md");
    let (start, end) = ("<!-- owners: written from agent/src/owner/registry.rs; do not edit -->\n", "<!-- /owners -->");
    let table = readme.split_once(start).and_then(|(_, rest)| rest.split_once(end)).map(|(t, _)| t);
    let want = markdown_table();
    if std::env::var_os("UPDATE_GOLDEN").is_some() && table != Some(want.as_str()) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let now = std::fs::read_to_string(path).expect("README.md");
        let (head, rest) = now.split_once(start).expect("the start marker");
        let (_, tail) = rest.split_once(end).expect("the end marker");
        std::fs::write(path, format!("{head}{start}{want}{end}{tail}")).expect("write README.md");
        return;
    }
    assert_eq!(
        table,
        Some(want.as_str()),
        "the README's owners table differs from the registry: run again with UPDATE_GOLDEN=1, or put this between \
         its markers:\n{want}"
    );
}

/// A kernel name of 15 bytes that is the truncation of two owners' names
/// (Kmesh's `cgroup_skb_ingress_prog`, Tracee's `cgroup_skb_ingress`) says
/// neither's, even at the root; held, it is the holder's.
#[test]
fn a_name_like_two_owners_is_neither_without_proof() {
    let root = Evidence { at_root: true, ..nothing() };
    let o = judged("cgroup_skb_ingr", ProgType::CgroupSkb, "ingress", &root);
    assert_eq!((o.owner, o.named_like), (Owner::Unknown, Some(Owner::Kmesh)));
    let held = Evidence { held_by: Some(Owner::Tracee), ..root };
    assert_eq!(judged("cgroup_skb_ingr", ProgType::CgroupSkb, "ingress", &held).owner, Owner::Tracee);
    // The full BTF name tells them apart.
    assert_eq!(judged("cgroup_skb_ingress_prog", ProgType::CgroupSkb, "ingress", &root).owner, Owner::Kmesh);
}

/// The registry's socket-LB hook list is a const (its entries are
/// statics); it must stay the attach types' socket-LB set.
#[test]
fn the_registrys_socket_lb_hooks_are_the_attach_types_set() {
    let mut registry: Vec<&str> = super::registry::SOCKET_LB.to_vec();
    let mut kernel: Vec<&str> = AttachType::all().filter(|t| t.is_socket_lb()).map(AttachType::name).collect();
    registry.sort_unstable();
    kernel.sort_unstable();
    assert_eq!(registry, kernel);
}

/// How a list of hooks is shown: the socket-LB set by name.
fn hooks_shown(hooks: &[&str]) -> String {
    if hooks == registry::SOCKET_LB {
        "the socket-LB hooks".to_owned()
    } else if hooks.is_empty() {
        "a sockmap".to_owned()
    } else {
        hooks.join(", ")
    }
}

/// The README's "Owners cgaudit knows" table: one row per owner, its
/// programs grouped by the hooks they go on.
fn markdown_table() -> String {
    let mut out = String::from(
        "| owner | what | agent | programs (type: names on hooks) | attaches | cgroup2 mount | pins | wants them |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for s in registry::OWNERS {
        // Per program type, in the registry's order: its names with their
        // hooks, the hooks once when all share them.
        type Named = (String, &'static [&'static str]);
        let mut types: Vec<(ProgType, Vec<Named>)> = Vec::new();
        for p in s.programs {
            let at = match types.iter().position(|(t, _)| *t == p.prog_type) {
                Some(at) => at,
                None => {
                    types.push((p.prog_type, Vec::new()));
                    types.len() - 1
                }
            };
            let item = (p.name.shown(), p.hooks);
            if !types[at].1.contains(&item) {
                types[at].1.push(item);
            }
        }
        let progs: Vec<String> = types
            .iter()
            .map(|(t, items)| {
                let names: Vec<&str> = items.iter().map(|(n, _)| n.as_str()).collect();
                if items.iter().all(|(_, h)| *h == items[0].1) {
                    format!("{t}: {} on {}", names.join(", "), hooks_shown(items[0].1))
                } else {
                    let each: Vec<String> = items.iter().map(|(n, h)| format!("{n} on {}", hooks_shown(h))).collect();
                    format!("{t}: {}", each.join(", "))
                }
            })
            .collect();
        // An owner with no cgroup program: its programs on the pods' tc hooks.
        let progs: Vec<String> = match registry::PROGRAM_PINS.iter().find(|p| p.owner == s.owner) {
            Some(pp) if progs.is_empty() => pp
                .programs
                .iter()
                .map(|(name, dir)| format!("sched_cls: `{name}` on the host veth's tc {dir:?}").to_lowercase())
                .collect(),
            _ => progs,
        };
        let mut attach: Vec<&str> = s.programs.iter().map(|p| p.attach.as_str()).collect();
        if registry::PROGRAM_PINS.iter().any(|p| p.owner == s.owner) {
            attach.push("tc filter");
        }
        attach.sort_unstable();
        attach.dedup();
        let list = |v: &[&str]| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ")
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.title,
            s.what,
            list(s.agents),
            if progs.is_empty() { "not known: judged by its mount".to_owned() } else { progs.join("; ") },
            if attach.is_empty() { "-".to_owned() } else { attach.join(", ") },
            list(s.mount_points),
            list(s.pin_dirs),
            match s.intends {
                Intends::Root => "at the root",
                Intends::Anywhere => "anywhere",
                Intends::PodInterfaces => "the pods' interfaces",
            },
        ));
    }
    out
}
