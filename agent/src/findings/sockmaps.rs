//! `sockmap_beside_socket_lb`: an owner's sk_msg programs, which redirect
//! socket data through a sockmap, beside Cilium's socket LB at the root
//! (grafana/beyla#2691).

use super::*;
use crate::bpf::ProgType;
use crate::owner::Owned;

pub(super) const EXPLANATION: &str = "an owner redirects socket data with sk_msg programs on a sockmap beside Cilium's socket load balancing: the pair is known to stall connections (grafana/beyla#2691).";

/// sk_msg programs of an owner, held by its agent or pinned, beside Cilium's
/// socket LB at the root.
pub(super) fn sockmaps(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    let owned: Vec<(&Attachment, Owned)> = cx.attachments().collect();
    let cilium_lb =
        owned.iter().any(|(a, o)| o.owner == Owner::Cilium && at_root(snap, a) && a.attach_type.is_socket_address());
    if !cilium_lb {
        return;
    }
    let mut by_owner: BTreeMap<Owner, Vec<u32>> = BTreeMap::new();
    for (id, p) in snap.programs.iter().filter(|(_, p)| p.prog_type == ProgType::SkMsg) {
        let o = cx.program_owner(*id, None);
        if o.owner != Owner::Cilium && o.owner.spec().is_some() && o.proof.is_some() {
            by_owner.entry(o.owner).or_default().push(*id);
        }
        let _ = p;
    }
    for (owner, ids) in by_owner {
        let names: Vec<String> = ids.iter().take(4).map(|id| format!("{} (prog {id})", prog_name(snap, *id))).collect();
        let message = format!(
            "{o} redirects socket data with sk_msg program{s} {names} on a sockmap, while Cilium's socket load balancing \
             is attached at the root cgroup: this pair is known to stall connections (grafana/beyla#2691, OBI's sock_ops \
             and sk_msg next to Cilium's L7 proxy).",
            o = owner.title(),
            s = if ids.len() == 1 { "" } else { "s" },
            names = names.join(", "),
        );
        let remediation = format!(
            "If connections through Cilium's proxy stall, turn off {o}'s sockmap feature (OBI: its context propagation; \
             Merbridge: run it without Cilium) and follow grafana/beyla#2691.",
            o = owner.title()
        );
        let mut f = Finding::new(Kind::SockmapBesideSocketLb, Severity::Warning, message, remediation);
        f.owner = Some(owner);
        f.other_owner = Some(Owner::Cilium);
        f.count = Some(ids.len() as u64);
        if let [only] = ids[..] {
            f.prog_id = Some(only);
            f.prog_name = Some(prog_name(snap, only));
        }
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::tests::*;

    #[test]
    fn obis_sk_msg_beside_ciliums_socket_lb_cites_the_known_stall() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        prog(&mut s, 80, "obi_msg_redirect", ProgType::SkMsg);
        let f = evaluate(&s, &Policy::default());
        assert!(!kinds(&f).contains(&"sockmap_beside_socket_lb"), "loaded, held by nobody: {:?}", kinds(&f));
        agent(&mut s, Owner::Obi).holds.push(80);
        let f = evaluate(&s, &Policy::default());
        let m = f.iter().find(|f| f.kind == Kind::SockmapBesideSocketLb).expect("the sockmap warning");
        assert_eq!((m.owner, m.other_owner, m.severity), (Some(Owner::Obi), Some(Owner::Cilium), Severity::Warning));
        assert!(m.message.contains("grafana/beyla#2691"), "{}", m.message);
    }
}
