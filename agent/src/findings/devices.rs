//! The node's own devices, judged against what each owner pinned (issue
//! 48): `device_duplicate_programs` (the same owner's program twice on one
//! device and direction: cilium#44194, #47847), `device_program_never_runs`
//! (a program after an owner's terminal program on its hook: cilium#41393)
//! and `device_leftover_programs` (an owner's programs on the node's
//! devices while its agent is not running and nothing configures it any
//! more: cilium#30609, calico#12642).
//!
//! Whose a device's program is, is proven the way the owners leave them
//! (`owner::hooks`): its link pinned where the owner pins its devices'
//! links, on that very device, or a map it uses pinned by the owner.
//! Never its name: a pod with CAP_NET_ADMIN and no user namespace can move
//! a device carrying any program into the node's namespace. A critical finding needs the owner's privileged agent
//! running too (docs/security.md, "Proofs").

use super::outside_datapath::InterfaceRef;
use super::*;
use crate::owner::registry::{DATAPATHS, Datapath};
use crate::snapshot::devices::{Device, DeviceProgram};
use crate::snapshot::net::{HookProof, IfHook, Via};

pub(super) const DUPLICATE_EXPLANATION: &str = "an owner's program is on one device and direction more than once (two tcx links, two tc filters, or tc beside tcx): every copy runs, the older ones usually leftovers of an agent restart, and the node's traffic through that device is handled twice or dropped.";
pub(super) const NEVER_RUNS_EXPLANATION: &str = "a program sits after an owner's terminal program on the same device and hook: the owner's program decides every packet and passes none on, so the one after it never runs.";
pub(super) const NOT_MEANT_EXPLANATION: &str = "an owner's programs are on a device its own configuration does not name for its datapath: a device auto-detected, or dropped from the configuration and never cleaned up.";
pub(super) const SHADOWED_EXPLANATION: &str = "a bpffs is mounted over the node's bpffs: the pins in the hidden one are out of every reader's reach, the CNI agent's included, which then attaches its programs again beside the old ones.";
pub(super) const LEFTOVER_EXPLANATION: &str = "an owner's programs are on the node's devices while its agent does not run and nothing on the node configures it any more: left by an uninstall that did not clean up, they keep deciding the node's traffic, often by dropping it.";

/// The datapath of an owner, if it has one.
fn datapath(owner: Owner) -> Option<&'static Datapath> {
    DATAPATHS.iter().find(|d| d.owner == owner)
}

/// Which way a hook faces: tc and tcx ingress are one direction.
fn direction(hook: IfHook) -> u8 {
    match hook {
        IfHook::TcIngress | IfHook::TcxIngress | IfHook::NetkitPeer => 0,
        IfHook::TcEgress | IfHook::TcxEgress | IfHook::NetkitPrimary => 1,
        IfHook::Xdp => 2,
    }
}

fn direction_name(hook: IfHook) -> &'static str {
    ["ingress", "egress", "xdp"][direction(hook) as usize]
}

/// The programs of one direction of a device in the order they run: tcx
/// (or netkit) first, then the legacy tc filters by priority.
fn in_run_order(device: &Device, dir: u8) -> Vec<&DeviceProgram> {
    let mut v: Vec<&DeviceProgram> = device.programs.iter().filter(|p| direction(p.hook) == dir).collect();
    v.sort_by_key(|p| (matches!(p.hook, IfHook::TcIngress | IfHook::TcEgress), p.position));
    v
}

fn described(p: &DeviceProgram) -> String {
    let via = match &p.via {
        Via::Filter { prio, handle, .. } => format!("tc filter pref {prio} handle {handle:#x}"),
        Via::Link { link_id } => format!("{} link {link_id}", p.hook.as_str()),
        Via::Attached => p.hook.as_str().to_owned(),
    };
    let name = if p.prog_name.is_empty() { "(unnamed)" } else { p.prog_name.as_str() };
    let ran = p.run_cnt.map_or(String::new(), |n| format!(", ran {n} times"));
    format!("{name} (prog {}, {via}{ran})", p.prog_id)
}

fn device_ref(d: &Device) -> InterfaceRef {
    InterfaceRef { name: d.name.clone(), ifindex: d.ifindex, driver: d.driver.clone() }
}

/// How to take one program off a device, as the owner's own tools would.
fn detach_command(d: &Device, p: &DeviceProgram) -> String {
    match &p.via {
        Via::Filter { prio, handle, .. } => format!(
            "tc filter del dev {} {} pref {prio} handle {handle:#x} bpf",
            crate::text::shell_word(&d.name),
            if direction(p.hook) == 0 { "ingress" } else { "egress" }
        ),
        Via::Link { link_id } => format!("bpftool link detach id {link_id} (and remove its pin, if any)"),
        Via::Attached if p.hook == IfHook::Xdp => {
            format!("ip link set dev {} xdp off", crate::text::shell_word(&d.name))
        }
        Via::Attached => format!("bpftool net detach {} dev {}", p.hook.as_str(), crate::text::shell_word(&d.name)),
    }
}

/// A copy of an owner's program on a device, and what proves it (`None`:
/// named as the proven copy, nothing proving it).
type Copy<'s> = (&'s DeviceProgram, Option<HookProof>);

pub(super) fn duplicates(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    // What would prove them could not be read: not judged (red team N11).
    if snap.pins_unread.is_some() {
        return;
    }
    for d in &snap.devices.devices {
        // Each owner's program by name, per direction: the proven copies,
        // then those of the same name that nothing proves (a copy whose
        // pins and maps are only in a bpffs hidden since, cilium#47847: a
        // pod cannot attach to the node's own devices).
        let mut groups: BTreeMap<(u8, Owner, &str), Vec<Copy<'_>>> = BTreeMap::new();
        for p in &d.programs {
            let Some((owner, proof)) = p.owner.zip(p.proof) else { continue };
            groups.entry((direction(p.hook), owner, p.prog_name.as_str())).or_default().push((p, Some(proof)));
        }
        for p in d.programs.iter().filter(|p| p.owner.is_none() && !p.prog_name.is_empty()) {
            for ((dir, _, name), copies) in groups.iter_mut() {
                if *dir == direction(p.hook) && *name == p.prog_name {
                    copies.push((p, None));
                }
            }
        }
        for ((dir, owner, name), mut copies) in groups {
            if copies.len() < 2 {
                continue;
            }
            copies.sort_by_key(|(p, _)| (matches!(p.hook, IfHook::TcIngress | IfHook::TcEgress), p.position));
            // Stale: not the one its link pin holds (when one is); else
            // those nothing proves; else all but the newest.
            let pinned = copies.iter().any(|(_, proof)| *proof == Some(HookProof::LinkPinned));
            let unproven = copies.iter().any(|(_, proof)| proof.is_none());
            let newest = copies.iter().map(|(p, _)| p.prog_id).max();
            let stale: Vec<&DeviceProgram> = copies
                .iter()
                .filter(|(p, proof)| match (pinned, unproven) {
                    (true, _) => *proof != Some(HookProof::LinkPinned),
                    (false, true) => proof.is_none(),
                    (false, false) => Some(p.prog_id) != newest,
                })
                .map(|(p, _)| *p)
                .collect();
            let Some(first_stale) = stale.first() else { continue };
            let runs = cx.agents_of(owner).next().is_some();
            let listed: Vec<String> = copies
                .iter()
                .map(|(p, proof)| {
                    let by = match proof {
                        Some(HookProof::LinkPinned) => "pinned",
                        Some(_) => "uses its pinned maps",
                        None => "nothing of it visible: its pins are elsewhere",
                    };
                    format!("{} ({by})", described(p))
                })
                .collect();
            let terminal = datapath(owner).is_some_and(|dp| dp.terminal) && dir != 2;
            let order = if terminal {
                format!(
                    "In the kernel's order the first decides every packet and the others never run ({}'s programs \
                     pass nothing on)",
                    owner.title()
                )
            } else {
                "Every copy runs, in the kernel's order".to_owned()
            };
            let message = format!(
                "{n} copies of {title}'s {name} are on the {dirn} of device {dev}: {list}. {order}; prog {stale} \
                 {look} stale ({why}), as an agent restart that did not detach its previous programs, or a second \
                 bpffs mounted over /sys/fs/bpf, leaves them (cilium#44194, #47847).",
                n = copies.len(),
                title = owner.title(),
                dirn = direction_name(first_stale.hook),
                dev = d.name,
                list = listed.join("; "),
                stale = stale.iter().map(|p| p.prog_id.to_string()).collect::<Vec<_>>().join(", prog "),
                look = if stale.len() == 1 { "looks" } else { "look" },
                why = match (pinned, unproven) {
                    (true, _) => format!("not the one {}'s pin holds", owner.title()),
                    (false, true) => format!("nothing of {} proves it", owner.title()),
                    (false, false) => "older than the newest copy".to_owned(),
                },
            );
            let cmds: Vec<String> = stale.iter().take(4).map(|p| format!("`{}`", detach_command(d, p))).collect();
            let remediation = format!(
                "Detach the stale {copy} ({cmds}), then check that exactly one copy is left and that {title}'s agent \
                 sees its pins (a bpffs mounted over /sys/fs/bpf hides them: `grep bpf /proc/1/mountinfo`); upgrade \
                 {title} if every restart leaves copies.",
                copy = if stale.len() == 1 { "copy" } else { "copies" },
                cmds = cmds.join(", "),
                title = owner.title(),
            );
            // A copy nothing proves is critical only where a hidden bpffs
            // explains it (cilium#47847); else it may be a hostNetwork
            // pod's program named like the owner's (red team N10).
            let explained = !unproven || !snap.hidden_bpffs.is_empty();
            let severity = if runs && explained { Severity::Critical } else { Severity::Warning };
            let mut f = Finding::new(Kind::DeviceDuplicatePrograms, severity, message, remediation);
            f.owner = Some(owner);
            f.prog_id = Some(first_stale.prog_id);
            f.prog_name = Some(name.to_owned());
            f.link_id = match first_stale.via {
                Via::Link { link_id } => Some(link_id),
                _ => None,
            };
            f.count = Some(copies.len() as u64);
            f.interfaces.push(device_ref(d));
            out.push(f);
        }
    }
}

pub(super) fn never_runs(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    if snap.pins_unread.is_some() {
        return;
    }
    for d in &snap.devices.devices {
        for dir in [0u8, 1] {
            let order = in_run_order(d, dir);
            // The first program of an owner whose programs are terminal,
            // proven its while its agent runs.
            let Some((at, owner)) = order.iter().enumerate().find_map(|(n, p)| {
                let (owner, _) = p.owner.zip(p.proof)?;
                let terminal = datapath(owner).is_some_and(|dp| dp.terminal);
                (terminal && cx.agents_of(owner).next().is_some()).then_some((n, owner))
            }) else {
                continue;
            };
            let terminal = order[at];
            // After it: another owner's programs, or nobody's (the owner's
            // own further copies are duplicates, said there).
            let blocked: Vec<&DeviceProgram> = order[at + 1..]
                .iter()
                .copied()
                .filter(|p| match p.owner {
                    Some(o) => o != owner,
                    // A copy named like the owner's own is a duplicate.
                    None => p.prog_name != terminal.prog_name,
                })
                .collect();
            let Some(first) = blocked.first() else { continue };
            let listed: Vec<String> = blocked.iter().take(4).map(|p| described(p)).collect();
            let message = format!(
                "on the {dirn} of device {dev}, {title}'s {term} runs first and passes nothing on ({title}'s tc programs \
                 are terminal: cilium#36775), so {list} never {run}{ran}. tcx runs before the legacy tc filters, and \
                 each in its order.",
                dirn = direction_name(terminal.hook),
                dev = d.name,
                title = owner.title(),
                term = described(terminal),
                list = listed.join(", "),
                run = if blocked.len() == 1 { "runs" } else { "run" },
                ran = if blocked.iter().any(|p| p.run_cnt.is_some()) { " (the kernel's run counts above)" } else { "" },
            );
            let remediation = format!(
                "Whatever needs {it} to see this device's traffic sees none of it: attach {it} before {title}'s \
                 program (a tcx link with `before`, as Beyla does), or move that function into {title} \
                 (its own policy or monitoring), or detach {it} (`{cmd}`).",
                it = if blocked.len() == 1 { "it" } else { "them" },
                title = owner.title(),
                cmd = detach_command(d, first),
            );
            let mut f = Finding::new(Kind::DeviceProgramNeverRuns, Severity::Warning, message, remediation);
            f.owner = first.owner.or(Some(Owner::Unknown));
            f.other_owner = Some(owner);
            f.prog_id = Some(first.prog_id);
            f.prog_name = Some(first.prog_name.clone());
            f.count = Some(blocked.len() as u64);
            f.interfaces.push(device_ref(d));
            out.push(f);
        }
    }
}

pub(super) fn leftovers(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    if snap.pins_unread.is_some() {
        return;
    }
    let configured: BTreeSet<Owner> = snap.pod_networks.configured.iter().map(|c| c.owner).collect();
    // Each owner's programs on the devices, while nothing runs or
    // configures it.
    let mut by_owner: BTreeMap<Owner, Vec<(&Device, &DeviceProgram)>> = BTreeMap::new();
    for d in &snap.devices.devices {
        for p in &d.programs {
            if let Some((owner, _)) = p.owner.zip(p.proof)
                && cx.agents_of(owner).next().is_none()
                && !configured.contains(&owner)
            {
                by_owner.entry(owner).or_default().push((d, p));
            }
        }
    }
    // Without the node's processes in view, "its agent is not running" is
    // not known.
    if !super::sees_node_processes(snap) {
        return;
    }
    for (owner, found) in by_owner {
        let mut devices: Vec<&str> = found.iter().map(|(d, _)| d.name.as_str()).collect();
        devices.dedup();
        let listed: Vec<String> =
            found.iter().take(6).map(|(d, p)| format!("{} on {}", described(p), d.name)).collect();
        let message = format!(
            "{n} of {title}'s programs are on the node's devices ({list}) while no {agent} process runs and nothing on \
             the node configures {title} (no agent, no CNI configuration naming it): left by an uninstall that did not \
             clean up, they keep deciding the traffic of {devs}, often by dropping it (cilium#30609, calico#12642).",
            n = found.len(),
            title = owner.title(),
            list = listed.join("; "),
            agent = owner.agent_comm().unwrap_or("agent"),
            devs = devices.join(", "),
        );
        let cmds: Vec<String> = found.iter().take(4).map(|(d, p)| format!("`{}`", detach_command(d, p))).collect();
        let cleanup = match owner {
            Owner::Cilium => " and remove its pins (`rm -r /sys/fs/bpf/cilium /sys/fs/bpf/tc/globals/cilium_*`)",
            Owner::Calico => " and remove its pins (`rm -r /sys/fs/bpf/tcx /sys/fs/bpf/tc/globals/cali_*`)",
            _ => "",
        };
        let remediation = format!(
            "First make sure {title} was uninstalled from this node, not restarting (its DaemonSet gone: \
             `kubectl -n kube-system get ds`); its pins hold its live state. Then detach what it left ({cmds}){cleanup}. \
             If it should run here, find why its agent does not instead.",
            title = owner.title(),
            cmds = cmds.join(", "),
        );
        let mut f = Finding::new(Kind::DeviceLeftoverPrograms, Severity::Critical, message, remediation);
        f.owner = Some(owner);
        f.count = Some(found.len() as u64);
        let mut seen = BTreeSet::new();
        for (d, _) in &found {
            if seen.insert(d.ifindex) {
                f.interfaces.push(device_ref(d));
            }
        }
        out.push(f);
    }
}

/// cilium#47847: a bpffs mounted over the node's (PID 1's mount namespace).
/// Critical when programs named like an owner's that nothing visible
/// proves are on the node's devices or the pods' interfaces: most likely
/// pinned in the hidden bpffs, they run beside (or instead of) what the
/// agent attached again.
pub(super) fn shadowed(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    use crate::owner::registry::{Direction as D, datapath_of, device_program_of};
    // Programs of the node's devices and the pods' interfaces named like
    // an owner's that nothing proves.
    let mut orphans: Vec<(Owner, String)> = Vec::new();
    for d in &snap.devices.devices {
        for p in d.programs.iter().filter(|p| p.owner.is_none()) {
            let dir = match direction(p.hook) {
                0 => D::Ingress,
                1 => D::Egress,
                _ => D::Xdp,
            };
            if let Some((dp, _)) = device_program_of(&p.prog_name, dir) {
                orphans.push((dp.owner, format!("{} on {}", described(p), d.name)));
            }
        }
    }
    for i in snap.pod_networks.interfaces() {
        for p in i.programs.iter().filter(|p| p.owner.is_none()) {
            if let Some(dp) = datapath_of(&p.prog_name) {
                orphans.push((dp.owner, format!("{} (prog {}) on {}", p.prog_name, p.prog_id, i.name)));
            }
        }
    }
    for h in &snap.hidden_bpffs {
        let listed: Vec<&str> = orphans.iter().take(6).map(|(_, s)| s.as_str()).collect();
        let found = if orphans.is_empty() {
            String::new()
        } else {
            format!(
                " {} program{} named like a CNI's that nothing visible proves {} on the node's interfaces, most likely \
                 pinned in the hidden one: {}{}.",
                orphans.len(),
                if orphans.len() == 1 { "" } else { "s" },
                if orphans.len() == 1 { "is" } else { "are" },
                listed.join("; "),
                if orphans.len() > listed.len() {
                    format!("; and {} more", orphans.len() - listed.len())
                } else {
                    String::new()
                },
            )
        };
        let message = format!(
            "mount {by} ({fs} at {at}) hides the bpffs at {point} (mount {id}) in PID 1's mount namespace: the pins in \
             it are out of every reader's reach, the CNI agents' own included. An agent that starts now finds none of \
             its pins and attaches its programs again beside the old ones (cilium#47847).{found}",
            by = h.hidden_by,
            fs = h.hidden_by_fs,
            at = h.hidden_by_point,
            point = h.mount_point,
            id = h.mount_id,
        );
        let remediation = format!(
            "Unmount what hides it, once, on the node (`umount {at}`: the hidden bpffs and its pins come back), and \
             remove the line of /etc/fstab that mounted it again (`mount -a`); then, where an agent attached again \
             meanwhile, detach the copies device_duplicate_programs names.",
            at = crate::text::shell_word(&h.hidden_by_point),
        );
        let severity = if orphans.is_empty() { Severity::Warning } else { Severity::Critical };
        let mut f = Finding::new(Kind::BpffsShadowed, severity, message, remediation);
        f.owner = orphans.first().map(|(o, _)| *o);
        f.mount_point = Some(h.mount_point.clone());
        f.count = Some(orphans.len() as u64);
        out.push(f);
    }
}

/// An owner's programs on a device its own configuration does not name
/// (Cilium's `devices`, Calico's `FELIX_BPFDATAIFACEPATTERN`, as its
/// running agent has them): a device auto-detected that should not be
/// (cilium#48695: tailscale0 and wg0, re-linked again and again), or one
/// dropped from the pattern and never cleaned (calico#6450). One finding
/// per owner and device; only where the configuration says which devices.
pub(super) fn not_meant(cx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    if snap.pins_unread.is_some() {
        return;
    }
    let mut judged: Vec<Owner> = Vec::new();
    for agent in cx.agents_of(Owner::Cilium).chain(cx.agents_of(Owner::Calico)) {
        let Some(configured) = agent.intent.devices.as_deref() else { continue };
        let owner = agent.owner;
        // One agent of an owner says it (red team R3: not one for all).
        if judged.contains(&owner) {
            continue;
        }
        judged.push(owner);
        let l3 = agent.intent.l3_devices.as_deref();
        for d in &snap.devices.devices {
            let mine: Vec<&DeviceProgram> = d.programs.iter().filter(|p| p.owner == Some(owner)).collect();
            let Some(first) = mine.first() else { continue };
            if crate::owner::registry::meant_device(owner, configured, l3, &d.name, &d.driver) != Some(false) {
                continue;
            }
            let setting = if owner == Owner::Cilium { "devices" } else { "FELIX_BPFDATAIFACEPATTERN" };
            let key = match (owner, l3) {
                (Owner::Cilium, _) => format!("devices={configured}"),
                (_, None) => format!("FELIX_BPFDATAIFACEPATTERN={configured}"),
                (_, Some(l3)) => format!("FELIX_BPFDATAIFACEPATTERN={configured}, FELIX_BPFL3IFACEPATTERN={l3}"),
            };
            let listed: Vec<String> = mine.iter().take(4).map(|p| described(p)).collect();
            let message = format!(
                "{title}'s programs are on device {dev} ({list}), which its configuration does not name for its \
                 datapath ({key}): {title} decides that device's traffic though nobody meant it to \
                 (cilium#48695, calico#6450).",
                title = owner.title(),
                dev = d.name,
                list = listed.join(", "),
            );
            let remediation = format!(
                "If {title} should handle {dev}, add it to {setting}; if not, restart {title}'s agent on this node so \
                 that it detaches from devices it no longer means (its cleanup), or detach them yourself (`{cmd}`).",
                title = owner.title(),
                dev = d.name,
                cmd = detach_command(d, first),
            );
            let mut f = Finding::new(Kind::DeviceNotMeant, Severity::Warning, message, remediation);
            f.owner = Some(owner);
            f.prog_id = Some(first.prog_id);
            f.prog_name = Some(first.prog_name.clone());
            f.count = Some(mine.len() as u64);
            f.interfaces.push(device_ref(d));
            out.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::sys::LinkTarget;
    use crate::findings::tests::*;
    use crate::snapshot::devices::HostDevices;
    use crate::snapshot::net::Configured;
    use crate::snapshot::{OwnerMap, OwnerPin};

    const CALLS: u32 = 77;

    fn prog(hook: IfHook, position: u32, id: u32, name: &str, via: Via, maps: &[u32]) -> DeviceProgram {
        DeviceProgram {
            hook,
            position,
            prog_id: id,
            prog_name: name.into(),
            via,
            xdp_mode: None,
            map_ids: maps.to_vec(),
            owner: None,
            proof: None,
            run_cnt: None,
        }
    }

    fn device(ifindex: u32, name: &str, programs: Vec<DeviceProgram>) -> Device {
        Device {
            ifindex,
            name: name.into(),
            driver: String::new(),
            master: None,
            programs,
            revisions: vec![],
            errors: vec![],
        }
    }

    /// A node where Cilium's agent runs and its calls map for eth0 is pinned.
    fn cilium_node(devices: Vec<Device>) -> Snapshot {
        let mut s = node();
        agent(&mut s, Owner::Cilium);
        s.owner_maps.push(OwnerMap { owner: Owner::Cilium, name: "cilium_calls_netdev_00002".into(), map_id: CALLS });
        s.devices = HostDevices { devices, ..Default::default() };
        s
    }

    fn pin_link(s: &mut Snapshot, dev: &str, ifindex: u32, link_id: u32, prog_id: u32) {
        s.pins.push(OwnerPin {
            owner: Owner::Cilium,
            path: format!("/sys/fs/bpf/cilium/devices/{dev}/links/cil_from_netdev").into(),
            prog_id,
            link_id: Some(link_id),
            target: Some(LinkTarget::Tcx { ifindex, attach_type: 46 }),
        });
    }

    fn judged(s: &Snapshot) -> Vec<Finding> {
        let mut s = s.clone();
        s.prove_hooks();
        evaluate(&s, &Policy::default())
    }

    /// The healthy node: Cilium's programs where its pins say, once each:
    /// nothing from this layer.
    #[test]
    fn ciliums_device_programs_once_each_where_its_pins_say_raise_nothing() {
        let eth0 = device(
            2,
            "eth0",
            vec![
                prog(IfHook::TcxIngress, 0, 10, "cil_from_netdev", Via::Link { link_id: 5 }, &[CALLS]),
                prog(IfHook::TcxEgress, 0, 11, "cil_to_netdev", Via::Link { link_id: 6 }, &[CALLS]),
            ],
        );
        let mut s = cilium_node(vec![eth0]);
        pin_link(&mut s, "eth0", 2, 5, 10);
        assert!(judged(&s).is_empty(), "{:#?}", judged(&s));
        s.prove_hooks();
        let proofs: Vec<_> = s.devices.devices[0].programs.iter().map(|p| p.proof).collect();
        assert_eq!(proofs, [Some(HookProof::LinkPinned), Some(HookProof::MapsPinned)]);
    }

    /// cilium#44194: an old tcx link left beside the new one after a
    /// restart; the stale copy is the one the pin does not hold.
    #[test]
    fn two_copies_of_ciliums_netdev_program_name_the_one_its_pin_does_not_hold() {
        let eth0 = device(
            2,
            "eth0",
            vec![
                prog(IfHook::TcxIngress, 0, 9, "cil_from_netdev", Via::Link { link_id: 3 }, &[CALLS]),
                prog(IfHook::TcxIngress, 1, 10, "cil_from_netdev", Via::Link { link_id: 5 }, &[CALLS]),
            ],
        );
        let mut s = cilium_node(vec![eth0]);
        pin_link(&mut s, "eth0", 2, 5, 10);
        let f = judged(&s);
        let dup: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::DeviceDuplicatePrograms).collect();
        let [d] = dup[..] else { panic!("{f:#?}") };
        assert_eq!((d.severity, d.prog_id, d.link_id, d.count), (Severity::Critical, Some(9), Some(3), Some(2)));
        assert!(d.remediation.contains("bpftool link detach id 3"), "{}", d.remediation);
        // A tc filter beside a tcx link is a copy too (one direction).
        s.devices.devices[0].programs[0] = prog(
            IfHook::TcIngress,
            0,
            9,
            "cil_from_netdev",
            Via::Filter { prio: 1, handle: 1, filter_name: Some("cil_from_netdev-eth0".into()), direct_action: true },
            &[CALLS],
        );
        let f = judged(&s);
        assert!(f.iter().any(|f| f.kind == Kind::DeviceDuplicatePrograms && f.prog_id == Some(9)), "{f:#?}");
    }

    /// cilium#47847: a copy named like Cilium's that nothing proves (its
    /// pins and maps in a bpffs hidden since) beside the pinned one is the
    /// stale copy; it is not also "a program that never runs".
    #[test]
    fn a_copy_named_like_ciliums_that_nothing_proves_is_the_stale_one() {
        let eth0 = device(
            2,
            "eth0",
            vec![
                prog(IfHook::TcxIngress, 0, 66, "cil_from_netdev", Via::Link { link_id: 8 }, &[900]),
                prog(IfHook::TcxIngress, 1, 10, "cil_from_netdev", Via::Link { link_id: 5 }, &[CALLS]),
            ],
        );
        let mut s = cilium_node(vec![eth0]);
        pin_link(&mut s, "eth0", 2, 5, 10);
        let f = judged(&s);
        let [d] = &f[..] else { panic!("{f:#?}") };
        // Nothing explains a copy nothing proves (a hostNetwork pod can
        // name a program so: red team N10): a warning.
        assert_eq!((d.kind, d.prog_id, d.severity), (Kind::DeviceDuplicatePrograms, Some(66), Severity::Warning));
        assert!(d.message.contains("the first decides every packet and the others never run"), "{}", d.message);
        assert!(d.message.contains("nothing of it visible"), "{}", d.message);
        // A bpffs hidden under another explains it: critical.
        let mut hidden = s.clone();
        hidden.hidden_bpffs.push(crate::mounts::HiddenBpffs {
            mount_point: "/sys/fs/bpf".into(),
            mount_id: 30,
            hidden_by: 40,
            hidden_by_point: "/sys/fs/bpf".into(),
            hidden_by_fs: "bpf".into(),
        });
        let f = judged(&hidden);
        let d = f.iter().find(|f| f.kind == Kind::DeviceDuplicatePrograms).expect("a duplicate");
        assert_eq!(d.severity, Severity::Critical);
        // An unrelated program after Cilium's, nothing's: it never runs.
        s.devices.devices[0].programs[0] = prog(IfHook::TcxIngress, 2, 67, "my_monitor", Via::Link { link_id: 9 }, &[]);
        let f = judged(&s);
        let never: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::DeviceProgramNeverRuns).collect();
        let [n] = never[..] else { panic!("{f:#?}") };
        assert_eq!((n.prog_id, n.owner, n.other_owner), (Some(67), Some(Owner::Unknown), Some(Owner::Cilium)));
    }

    /// cilium#41393: a user's legacy tc filter on a device where Cilium's
    /// tcx program runs first never sees a packet; before it, it runs.
    #[test]
    fn a_filter_after_ciliums_tcx_program_never_runs() {
        let filter = Via::Filter { prio: 1, handle: 1, filter_name: Some("mon".into()), direct_action: true };
        let eth0 = device(
            2,
            "eth0",
            vec![
                prog(IfHook::TcxIngress, 0, 10, "cil_from_netdev", Via::Link { link_id: 5 }, &[CALLS]),
                prog(IfHook::TcIngress, 0, 70, "monitor", filter, &[]),
            ],
        );
        let mut s = cilium_node(vec![eth0]);
        s.devices.devices[0].programs[1].run_cnt = Some(0);
        let f = judged(&s);
        let n = f.iter().find(|f| f.kind == Kind::DeviceProgramNeverRuns).expect("never runs");
        assert!(
            n.message.contains("monitor (prog 70, tc filter pref 1 handle 0x1, ran 0 times) never runs"),
            "{}",
            n.message
        );
        // A program before Cilium's on tcx runs.
        s.devices.devices[0].programs[1] = prog(IfHook::TcxIngress, 0, 70, "beyla", Via::Link { link_id: 9 }, &[]);
        s.devices.devices[0].programs[0].position = 1;
        assert!(!judged(&s).iter().any(|f| f.kind == Kind::DeviceProgramNeverRuns));
        // Without Cilium's agent, nothing is proven terminal now.
        let mut s = cilium_node(vec![device(2, "eth0", vec![])]);
        s.agents.clear();
        assert!(!judged(&s).iter().any(|f| f.kind == Kind::DeviceProgramNeverRuns));
    }

    /// cilium#30609: Cilium uninstalled, its filters left on the NIC: a
    /// critical with the cleanup; with its CNI configuration still there
    /// (an agent restart), nothing from this rule.
    #[test]
    fn ciliums_programs_left_on_the_nic_after_an_uninstall_are_a_critical_leftover() {
        let filter =
            Via::Filter { prio: 1, handle: 1, filter_name: Some("cil_from_netdev-eth0".into()), direct_action: true };
        let eth0 = device(2, "eth0", vec![prog(IfHook::TcIngress, 0, 10, "cil_from_netdev", filter, &[CALLS])]);
        let mut s = cilium_node(vec![eth0]);
        s.agents.clear();
        let f = judged(&s);
        let l = f.iter().find(|f| f.kind == Kind::DeviceLeftoverPrograms).expect("a leftover");
        assert_eq!((l.severity, l.owner), (Severity::Critical, Some(Owner::Cilium)));
        assert!(l.remediation.contains("tc filter del dev eth0 ingress pref 1 handle 0x1 bpf"), "{}", l.remediation);
        s.pod_networks.configured.push(Configured { owner: Owner::Cilium, source: "05-cilium.conflist".into() });
        assert!(!judged(&s).iter().any(|f| f.kind == Kind::DeviceLeftoverPrograms));
    }

    /// Red team round 7, R1: devices carrying something that were left
    /// unread make the view incomplete; idle ones past the list do not.
    #[test]
    fn devices_left_unread_make_the_view_incomplete() {
        let mut s = cilium_node(vec![]);
        s.devices.idle_not_listed = 500;
        assert_eq!(crate::findings::incomplete(&s), None);
        s.devices.not_read = 3;
        let why = crate::findings::incomplete(&s);
        assert!(
            why.as_deref().is_some_and(|w| w.starts_with("3 of the node's network devices that may carry programs were not read")),
            "{why:?}"
        );
    }

    /// cilium#48695: Cilium's programs on a device its `devices` does not
    /// name are said; on one it names (by prefix), or its own, nothing.
    #[test]
    fn ciliums_programs_on_a_device_its_configuration_does_not_name_are_said() {
        let netdev = |ifindex, name: &str| {
            device(
                ifindex,
                name,
                vec![prog(IfHook::TcxIngress, 0, 10 + ifindex, "cil_from_netdev", Via::Link { link_id: 5 }, &[CALLS])],
            )
        };
        let mut s = cilium_node(vec![netdev(2, "eth0"), netdev(3, "tailscale0"), netdev(4, "cilium_host")]);
        s.agents[0].intent.devices = Some("eth+".into());
        let f = judged(&s);
        let [n] = &f[..] else { panic!("{f:#?}") };
        assert_eq!((n.kind, n.severity, n.prog_id), (Kind::DeviceNotMeant, Severity::Warning, Some(13)));
        assert!(n.message.contains("device tailscale0") && n.message.contains("devices=eth+"), "{}", n.message);
        // Auto-detected (not set): not judged.
        s.agents[0].intent.devices = None;
        assert!(judged(&s).is_empty());
    }

    /// cilium#47847: a bpffs over the node's hides its pins; with a copy of
    /// Cilium's program nothing visible proves on a device, critical.
    #[test]
    fn a_bpffs_mounted_over_the_nodes_is_said_with_what_it_hides() {
        let hidden = crate::mounts::HiddenBpffs {
            mount_point: "/sys/fs/bpf".into(),
            mount_id: 30,
            hidden_by: 40,
            hidden_by_point: "/sys/fs/bpf".into(),
            hidden_by_fs: "bpf".into(),
        };
        let mut s = cilium_node(vec![device(2, "eth0", vec![])]);
        s.hidden_bpffs.push(hidden);
        let f = judged(&s);
        let [h] = &f[..] else { panic!("{f:#?}") };
        assert_eq!((h.kind, h.severity), (Kind::BpffsShadowed, Severity::Warning));
        assert!(h.remediation.contains("umount /sys/fs/bpf"), "{}", h.remediation);
        s.devices.devices[0].programs.push(prog(
            IfHook::TcxIngress,
            0,
            66,
            "cil_from_netdev",
            Via::Link { link_id: 8 },
            &[900],
        ));
        let f = judged(&s);
        let h = f.iter().find(|f| f.kind == Kind::BpffsShadowed).expect("shadowed");
        assert_eq!(h.severity, Severity::Critical);
        assert!(h.message.contains("cil_from_netdev (prog 66, tcx_ingress link 8) on eth0"), "{}", h.message);
    }
}
