//! Whose a program on an interface's or a device's hook is, proven the way
//! the owners' loaders leave their programs (issue 48). Pure.
//!
//! The CNIs' agents keep no program fd open once they attached (Cilium's
//! loader closes its objects and links once the links are pinned, Calico's
//! closes its link handle after pinning): what is left is
//! - a link pinned in the owner's directory (`registry::Spec::pin_dirs`:
//!   Cilium's `cilium/endpoints/<id>/links/<prog>` and
//!   `cilium/devices/<dev>/links/<prog>`, Calico's `tcx/<iface>_<hook>`),
//!   that is on this very interface and hook and runs this very program;
//! - the program itself pinned, for the owner that pins programs rather
//!   than links (the AWS network policy agent's
//!   `globals/aws/programs/<pod>_handle_*`, `registry::PROGRAM_PINS`);
//! - the owner's tail-call map, pinned in `tc/globals` with each program it
//!   attaches (Cilium's `cilium_calls_*`, Calico's `cali_jump*`), which the
//!   program uses: a legacy tc filter has no link, and this is its proof;
//! - and, for an agent that does hold its programs (none of the CNIs'
//!   datapaths: `registry::DATAPATHS`), the fd.
//!
//! None of these can be forged by a pod without the node's bpffs or
//! CAP_SYS_ADMIN (a map's fd by id needs it). A name never proves
//! anything: a pod with CAP_BPF and CAP_NET_ADMIN and no user namespace can
//! load a program named `cil_from_container` and move a veth end carrying
//! it into the node's network namespace (issue 47 red team, F2).

use std::collections::HashMap;

use super::Owner;
use crate::bpf::sys::LinkTarget;
use crate::snapshot::net::{HookProof, IfHook, Via};
use crate::snapshot::{AgentProcess, OwnerMap, OwnerPin};

/// What proves hook programs an owner's, indexed once per snapshot.
pub struct Proofs<'a> {
    pins: &'a [OwnerPin],
    maps: HashMap<u32, Owner>,
    held: HashMap<u32, Owner>,
}

/// A program on a hook, as the prover needs it.
pub struct OnHook<'p> {
    pub ifindex: u32,
    pub hook: IfHook,
    pub prog_id: u32,
    pub via: &'p Via,
    pub map_ids: &'p [u32],
}

impl<'a> Proofs<'a> {
    /// From the owners' pins and pinned maps, and the programs their
    /// privileged agents hold.
    pub fn new(pins: &'a [OwnerPin], maps: &[OwnerMap], agents: &[AgentProcess]) -> Proofs<'a> {
        Proofs {
            pins,
            maps: maps.iter().map(|m| (m.map_id, m.owner)).collect(),
            // Not for an owner whose loader keeps no fd once attached (the
            // CNIs': every real program of theirs has its pins): a fd held
            // by a process merely named like their agent is no proof (issue
            // 47 red team, N3-N5).
            held: agents
                .iter()
                .filter(|a| a.privileged && !crate::owner::registry::DATAPATHS.iter().any(|d| d.owner == a.owner))
                .flat_map(|a| a.holds.iter().map(|id| (*id, a.owner)))
                .collect(),
        }
    }

    /// Whose `p` is and what proves it, strongest proof first; `None`: no
    /// proof, whatever its name.
    pub fn owner_of(&self, p: &OnHook<'_>) -> Option<(Owner, HookProof)> {
        self.pinned_link(p)
            .map(|o| (o, HookProof::LinkPinned))
            .or_else(|| self.pinned_program(p.prog_id).map(|o| (o, HookProof::ProgramPinned)))
            .or_else(|| p.map_ids.iter().find_map(|m| self.maps.get(m)).map(|o| (*o, HookProof::MapsPinned)))
            .or_else(|| self.held.get(&p.prog_id).map(|o| (*o, HookProof::Held)))
    }

    /// The owner that pinned program `prog_id` itself, for an owner whose
    /// loader pins programs rather than links (`registry::PROGRAM_PINS`:
    /// for any other, a program in its link directories proves nothing).
    fn pinned_program(&self, prog_id: u32) -> Option<Owner> {
        self.pins
            .iter()
            .find(|pin| pin.prog_id == prog_id && pin.link_id.is_none() && super::registry::pins_programs(pin.owner))
            .map(|pin| pin.owner)
    }

    /// The owner whose pinned link runs `p` on its very interface and hook.
    fn pinned_link(&self, p: &OnHook<'_>) -> Option<Owner> {
        use aya_obj::generated::bpf_attach_type as at;
        let attach = match p.hook {
            IfHook::TcxIngress => Some(at::BPF_TCX_INGRESS),
            IfHook::TcxEgress => Some(at::BPF_TCX_EGRESS),
            IfHook::NetkitPeer => Some(at::BPF_NETKIT_PEER),
            IfHook::NetkitPrimary => Some(at::BPF_NETKIT_PRIMARY),
            IfHook::Xdp | IfHook::TcIngress | IfHook::TcEgress => None,
        }
        .map(|a| a as u32);
        self.pins
            .iter()
            .find(|pin| {
                pin.prog_id == p.prog_id
                    && match (p.via, pin.target) {
                        (Via::Link { link_id }, Some(LinkTarget::Tcx { ifindex, attach_type }))
                        | (Via::Link { link_id }, Some(LinkTarget::Netkit { ifindex, attach_type })) => {
                            pin.link_id == Some(*link_id) && ifindex == p.ifindex && Some(attach_type) == attach
                        }
                        // An XDP link is not named by IFLA_XDP: by its
                        // program and device.
                        (_, Some(LinkTarget::Xdp { ifindex })) => p.hook == IfHook::Xdp && ifindex == p.ifindex,
                        _ => false,
                    }
            })
            .map(|pin| pin.owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya_obj::generated::bpf_attach_type as at;

    fn pin(link_id: u32, prog_id: u32, target: LinkTarget) -> OwnerPin {
        OwnerPin {
            owner: Owner::Cilium,
            path: "/sys/fs/bpf/cilium/endpoints/1234/links/cil_from_container".into(),
            prog_id,
            link_id: Some(link_id),
            target: Some(target),
        }
    }

    fn tcx(ifindex: u32) -> LinkTarget {
        LinkTarget::Tcx { ifindex, attach_type: at::BPF_TCX_INGRESS as u32 }
    }

    fn on<'p>(ifindex: u32, hook: IfHook, prog_id: u32, via: &'p Via, map_ids: &'p [u32]) -> OnHook<'p> {
        OnHook { ifindex, hook, prog_id, via, map_ids }
    }

    #[test]
    fn a_link_pinned_on_this_very_hook_proves_its_program() {
        let pins = [pin(30, 9, tcx(7))];
        let proofs = Proofs::new(&pins, &[], &[]);
        let via = Via::Link { link_id: 30 };
        assert_eq!(
            proofs.owner_of(&on(7, IfHook::TcxIngress, 9, &via, &[])),
            Some((Owner::Cilium, HookProof::LinkPinned))
        );
        // The same link id on another interface, another hook, another
        // program: no proof.
        assert_eq!(proofs.owner_of(&on(8, IfHook::TcxIngress, 9, &via, &[])), None);
        assert_eq!(proofs.owner_of(&on(7, IfHook::TcxEgress, 9, &via, &[])), None);
        assert_eq!(proofs.owner_of(&on(7, IfHook::TcxIngress, 10, &via, &[])), None);
        // Another link of the same program on the same hook (a duplicate):
        // not the pinned one.
        assert_eq!(proofs.owner_of(&on(7, IfHook::TcxIngress, 9, &Via::Link { link_id: 31 }, &[])), None);
    }

    /// Issue 47 red team, F2: a program named like the CNI's entry, on a
    /// pair a pod moved into the node's namespace, is nobody's.
    #[test]
    fn a_name_proves_nothing_a_map_the_owner_pinned_does() {
        let maps = [OwnerMap { owner: Owner::Cilium, name: "cilium_calls_01234".into(), map_id: 55 }];
        let proofs = Proofs::new(&[], &maps, &[]);
        let filter = Via::Filter {
            prio: 1,
            handle: 1,
            filter_name: Some("cil_from_container-lxc1".into()),
            direct_action: true,
        };
        assert_eq!(proofs.owner_of(&on(7, IfHook::TcIngress, 9, &filter, &[3, 4])), None);
        assert_eq!(
            proofs.owner_of(&on(7, IfHook::TcIngress, 9, &filter, &[3, 55])),
            Some((Owner::Cilium, HookProof::MapsPinned))
        );
    }

    /// Issue 47 red team, N3: a process named `cilium-agent` holding a
    /// program on a pod's interface proves nothing (Cilium's loader keeps
    /// no fd); an owner that does hold its programs is proven by it.
    #[test]
    fn a_program_its_privileged_agent_holds_is_its_and_an_unprivileged_ones_is_not() {
        let via = Via::Attached;
        let mut s = crate::fixtures::node();
        crate::fixtures::agent(&mut s, Owner::Cilium).holds = vec![9];
        let proofs = Proofs::new(&[], &[], &s.agents);
        assert_eq!(proofs.owner_of(&on(7, IfHook::TcxIngress, 9, &via, &[])), None, "Cilium keeps no fd");
        let mut s = crate::fixtures::node();
        crate::fixtures::agent(&mut s, Owner::Kmesh).holds = vec![9];
        let mut agent = s.agents[0].clone();
        let proofs = Proofs::new(&[], &[], std::slice::from_ref(&agent));
        assert_eq!(proofs.owner_of(&on(7, IfHook::Xdp, 9, &via, &[])), Some((Owner::Kmesh, HookProof::Held)));
        agent.privileged = false;
        let proofs = Proofs::new(&[], &[], std::slice::from_ref(&agent));
        assert_eq!(proofs.owner_of(&on(7, IfHook::Xdp, 9, &via, &[])), None);
    }
}
