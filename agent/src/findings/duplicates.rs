//! `duplicate_cni_programs`: the same program of a root owner attached more than once to one cgroup and hook.

use super::*;

pub(super) const EXPLANATION: &str = "more than one copy of the same program of an owner is attached to one cgroup and hook: every copy runs for every socket, and the older ones are usually leftovers of a restart or upgrade.";

/// The same program of an owner that means it for the root attached more
/// than once to one (cgroup, hook): the same full name (or, unnamed, the
/// same tag) under different program ids, proven the owner's.
pub(super) fn duplicates(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    type Key = (u64, AttachType, Owner, String);
    // Each group's copies, and whether one is proven its owner's by what no
    // tenant can make (a copy named like it at the root is anyone's).
    let mut groups: BTreeMap<Key, (Vec<&Attachment>, bool)> = BTreeMap::new();
    for (a, o) in cx.attachments().filter(|(_, o)| o.owner.intends_root()) {
        let Some(p) = snap.programs.get(&a.prog_id) else { continue };
        let function = if p.name.is_empty() { format!("tag {}", p.tag) } else { p.name.clone() };
        let g = groups.entry((a.cgroup_id, a.attach_type, o.owner, function)).or_default();
        g.0.push(a);
        g.1 |= o.proven_strongly();
    }
    for ((_, hook, owner, function), (copies, strongly)) in groups {
        let mut copies: Vec<&Attachment> = copies;
        copies.sort_by_key(|a| a.prog_id);
        copies.dedup_by_key(|a| a.prog_id);
        if copies.len() < 2 {
            continue;
        }
        let loaded = |a: &Attachment| snap.programs.get(&a.prog_id).and_then(|p| p.loaded_unix_ms);
        let pin = |a: &Attachment| {
            snap.pins.iter().find(|p| {
                p.owner == owner && (p.prog_id == a.prog_id || (a.link_id.is_some() && p.link_id == a.link_id))
            })
        };
        // Stale: not referenced by the CNI's pins when some copy is;
        // otherwise all but the newest.
        let pinned: Vec<bool> = copies.iter().map(|a| pin(a).is_some()).collect();
        let newest = copies.iter().max_by_key(|a| (loaded(a), a.prog_id)).map(|a| a.prog_id);
        let stale: Vec<u32> = copies
            .iter()
            .zip(&pinned)
            .filter(|(a, p)| if pinned.contains(&true) { !**p } else { Some(a.prog_id) != newest })
            .map(|(a, _)| a.prog_id)
            .collect();
        let list: Vec<String> = copies
            .iter()
            .map(|a| {
                let mut d = format!("prog {}", a.prog_id);
                if let Some(ms) = loaded(a) {
                    d.push_str(&format!(" loaded {}", unix_ms_text(ms)));
                }
                if let Some(l) = a.link_id {
                    d.push_str(&format!(", link {l}"));
                }
                if let Some(p) = pin(a) {
                    d.push_str(&format!(", pinned at {}", p.path.display()));
                }
                d
            })
            .collect();
        let first = copies[0];
        let root = at_root(snap, first);
        let why_stale = if pinned.contains(&true) {
            format!("not pinned by {}, which keeps only the current one", owner.title())
        } else {
            "older than the newest copy".to_owned()
        };
        let message = format!(
            "{n} copies of {function} ({owner}) are attached to {hook} on {place}: {list}. Every copy runs for every socket; \
             prog {stale} {look} stale ({why_stale}), as an agent restart or upgrade that did not detach its previous programs leaves them.",
            n = copies.len(),
            owner = owner.title(),
            place = place(snap, &first.cgroup),
            list = list.join("; "),
            stale = stale.iter().map(u32::to_string).collect::<Vec<_>>().join(", prog "),
            look = if stale.len() == 1 { "looks" } else { "look" },
        );
        let remediation = format!(
            "Detach the stale copies (`bpftool cgroup detach <cgroup> {hook} id <prog>`, or for a link remove its pin), \
             then restart {owner}'s agent on this node and check that exactly one copy is attached; upgrade {owner} if it \
             leaves copies on every restart.",
            owner = owner.title()
        );
        let severity = if root && hook.is_socket_lb() && strongly { Severity::Critical } else { Severity::Warning };
        let mut f = Finding::new(Kind::DuplicateCniPrograms, severity, message, remediation);
        f = if root { Finding { cgroup: Some("/".into()), ..f } } else { f.at_cgroup(&first.cgroup, snap) };
        let shown = copies.iter().find(|a| stale.contains(&a.prog_id)).copied().unwrap_or(first);
        f.attach_type = Some(hook);
        f.prog_id = Some(shown.prog_id);
        f.prog_name = Some(function);
        f.owner = Some(owner);
        f.link_id = shown.link_id;
        f.count = Some(copies.len() as u64);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn the_same_cni_program_twice_on_one_hook_names_the_unpinned_copy_stale() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        for (id, loaded) in [(50, 1_000_000), (51, 2_000_000)] {
            prog(&mut s, id, "cil_sock_release", ProgType::CgroupSock);
            s.programs.get_mut(&id).unwrap().loaded_unix_ms = Some(loaded);
            attach(&mut s, "/", 1, "sock_release", id);
        }
        s.attachments.last_mut().unwrap().link_id = Some(9);
        // The CNI pinned the newer one's link; the older one is the orphan.
        s.pins.push(OwnerPin {
            owner: Owner::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock_release".into(),
            prog_id: 51,
            link_id: Some(9),
            target: None,
        });
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["duplicate_cni_programs"]);
        assert_eq!((f[0].prog_id, f[0].count, f[0].cgroup.as_deref()), (Some(50), Some(2), Some("/")));
        let m = &f[0].message;
        assert!(m.contains("prog 50 looks stale (not pinned by Cilium"), "{m}");
        assert!(m.contains("prog 51 loaded 1970-01-01T00:33:20Z, link 9, pinned at /sys/fs/bpf/cilium"), "{m}");
        // Without pins, the older copy is the stale one.
        s.pins.clear();
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("prog 50 looks stale (older than the newest copy)"), "{}", f[0].message);
        // Different programs on one hook are not copies.
        s.programs.get_mut(&51).unwrap().name = "cil_sock_release2".into();
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }
}
