//! The node's own devices, read: every device of the node's network
//! namespace but the pods' host ends (the pods' section reads those), and
//! on each the legacy tc filters (by priority), the tcx and netkit programs
//! (in `BPF_PROG_QUERY`'s order, which is the order they run, and each
//! hook's revision) and XDP (its mode). Run on the thread that joined the
//! node's network namespace (`super::read`); nothing is created or changed.
//!
//! A pod with CAP_NET_ADMIN and no user namespace can make thousands of
//! devices in the node's namespace, choose their indexes, and churn them:
//! - a device whose other end is in a pod's namespace (its pair, or one
//!   the pod made) is not the node's own, and not read here;
//! - one qdisc dump says which devices legacy filters can be on, and one
//!   tcx query per hook which carry tcx programs: a device with nothing on
//!   it is listed (while there is room) and never read further, so idle
//!   devices push nothing out of the read (red team round 7, R1);
//! - of the devices carrying something, `DEVICES_MAX` are read: NICs first
//!   (no driver kind: no pod can make one), the CNIs' own by name, bonds,
//!   VLANs and tunnels, then the rest by index; the others are counted and
//!   make the view incomplete;
//! - at most `PROGRAMS_MAX` programs in all are listed;
//! - a dump a churn interrupts is read again, `DUMP_TRIES` times at most.

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::netlink::{Direction, HostNet, Link};
use crate::bpf::sys;
use crate::snapshot::devices::{DEVICES_MAX, Device, DeviceProgram, HookRevision, HostDevices, XdpMode};
use crate::snapshot::net::{IfHook, Via};

/// The most qdiscs of the node's dump decoded (a device may have several).
const QDISCS_MAX: usize = 4 * DUMP_MAX;
/// The most links of the node's dump decoded (past it the dump is not
/// believed): far above any node's own.
const DUMP_MAX: usize = 65_536;
/// A dump interrupted by a change (NLM_F_DUMP_INTR) is read again; this
/// many dumps at most (each retries once itself).
const DUMP_TRIES: usize = 3;
/// The most programs of the node's devices listed in all.
const PROGRAMS_MAX: usize = 4096;
/// The devices the CNIs make on a node, by name prefix: read first.
const CNI_DEVICES: &[&str] = &[
    "cilium_",
    "bpfin.cali",
    "bpfout.cali",
    "vxlan.calico",
    "vxlan-v6.calico",
    "tunl0",
    "egress.calico",
    "wireguard.cali",
    "wg-v6.cali",
];

/// How early a device is read when there are more than `DEVICES_MAX`:
/// first what no pod can make (a device without a driver kind: the node's
/// NICs), then the CNIs' own by name, then bonds, VLANs and tunnels, then
/// the rest. A name alone never puts a device before a NIC: a pod can make
/// a thousand `cilium_*` bridges in the node's namespace (red team R1).
fn rank(l: &Link) -> (u8, u32) {
    let class = if l.driver.is_empty() {
        0
    } else if CNI_DEVICES.iter().any(|p| l.name.starts_with(p)) {
        1
    } else if ["bond", "vlan", "team", "macvlan", "vxlan", "geneve", "wireguard", "ipip"].contains(&l.driver.as_str()) {
        2
    } else {
        3
    };
    (class, l.ifindex)
}

/// The node's devices but those in `skip` (the pods' host ends) and those
/// whose other end is in a pod's namespace (`pods`: those namespaces' ids
/// in the node's), read for `budget` at most.
pub(super) fn read(node: &mut HostNet, skip: &HashSet<u32>, pods: &HashSet<i32>, budget: Duration) -> HostDevices {
    let started = Instant::now();
    let mut dumped = node.links(DUMP_MAX);
    for _ in 1..DUMP_TRIES {
        if dumped.is_ok() || started.elapsed() > budget {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        dumped = node.links(DUMP_MAX);
    }
    let (links, undecodable) = match dumped {
        Ok(l) => l,
        Err(e) => return HostDevices { error: Some(e.to_string()), ..Default::default() },
    };
    let mine: Vec<&Link> = links
        .iter()
        .filter(|l| !skip.contains(&l.ifindex) && !l.peer_nsid.is_some_and(|n| pods.contains(&n)))
        .collect();
    // Where legacy filters can hang (`None`: not known, so anywhere).
    let filter_hooks = node
        .filter_hooks(QDISCS_MAX)
        .map_err(|e| tracing::debug!(error = %e, "the node's qdiscs could not be dumped: every device is read"))
        .ok();
    // Each device looked at once (its XDP id, the qdiscs, a tcx query);
    // those the read's time did not reach are not known to carry nothing:
    // they are counted unread (red team round 8, S1).
    let (mut busy, mut idle, mut unexamined) = (Vec::new(), Vec::new(), 0u64);
    for l in mine {
        if started.elapsed() > budget {
            unexamined += 1;
        } else if carries(l, filter_hooks.as_ref()) {
            busy.push(l);
        } else {
            idle.push(l);
        }
    }
    busy.sort_by_key(|l| rank(l));
    idle.sort_by_key(|l| rank(l));
    // Every device that may carry something and whose hooks were not all
    // read makes the view incomplete: past the cap, past the read's time,
    // past the program cap, or a hook that could not be read.
    let mut not_read = busy.len().saturating_sub(DEVICES_MAX) as u64 + undecodable + unexamined;
    let room = DEVICES_MAX.saturating_sub(busy.len());
    let idle_not_listed = idle.len().saturating_sub(room) as u64;
    let mut devices: Vec<Device> = idle.into_iter().take(room).map(device).collect();
    let mut listed = 0;
    for l in busy.into_iter().take(DEVICES_MAX) {
        let mut d = device(l);
        if started.elapsed() > budget {
            d.errors.push(format!("not read: the read's {}s were spent", budget.as_secs()));
            not_read += 1;
        } else if listed >= PROGRAMS_MAX {
            d.errors.push(format!("not read: {PROGRAMS_MAX} programs of the node's devices are listed already"));
            not_read += 1;
        } else {
            if !read_device(node, &mut d, l) {
                not_read += 1;
            }
            listed += d.programs.len();
        }
        devices.push(d);
    }
    devices.sort_by_key(|d| d.ifindex);
    HostDevices { error: None, kept_after: None, not_read, idle_not_listed, devices }
}

/// A device as listed, before its hooks are read.
fn device(l: &Link) -> Device {
    Device {
        ifindex: l.ifindex,
        name: l.name.clone(),
        driver: l.driver.clone(),
        master: l.master,
        programs: Vec::new(),
        revisions: Vec::new(),
        errors: Vec::new(),
    }
}

/// The tcx and netkit hooks of a device (netkit's through its primary).
fn mprog_hooks(l: &Link) -> Vec<(u32, IfHook)> {
    use aya_obj::generated::bpf_attach_type as at;
    let mut hooks =
        vec![(at::BPF_TCX_INGRESS as u32, IfHook::TcxIngress), (at::BPF_TCX_EGRESS as u32, IfHook::TcxEgress)];
    if l.driver == "netkit" && l.netkit_primary != Some(false) {
        hooks.push((at::BPF_NETKIT_PEER as u32, IfHook::NetkitPeer));
        hooks.push((at::BPF_NETKIT_PRIMARY as u32, IfHook::NetkitPrimary));
    }
    hooks
}

/// Whether anything is on a device, or may be: an XDP program, a qdisc
/// legacy filters hang on (or that not known), a tcx or netkit program or
/// a hook that changed, or a query that failed (read, to say why).
fn carries(l: &Link, filter_hooks: Option<&HashSet<u32>>) -> bool {
    if l.xdp_prog_id.is_some() || filter_hooks.is_none_or(|h| h.contains(&l.ifindex)) {
        return true;
    }
    mprog_hooks(l).iter().any(|&(attach, _)| match sys::ifindex_query(l.ifindex, attach) {
        Ok(q) => q.revision > 1 || !q.prog_ids.is_empty(),
        Err(e) => !matches!(e.errno(), Some(libc::EINVAL | libc::ENOENT)),
    })
}

/// Every hook of one device, each hook's programs in the order they run;
/// whether every hook was read (a device gone meanwhile has none left).
fn read_device(node: &mut HostNet, d: &mut Device, l: &Link) -> bool {
    let mut whole = true;
    // tcx first: on one device it runs before the legacy tc filters (which
    // run only when tcx passes the packet on).
    for (attach, hook) in mprog_hooks(l) {
        // What the kernel takes is decided by this query, as on the pods'
        // interfaces: a node without pods says it too.
        use crate::features::{self, Feature, Verdict};
        let feature =
            if matches!(hook, IfHook::TcxIngress | IfHook::TcxEgress) { Feature::Tcx } else { Feature::Netkit };
        let query = sys::ifindex_query(d.ifindex, attach);
        match &query {
            Ok(_) => features::record(feature, Verdict::yes()),
            Err(e) if e.errno() == Some(libc::ENOENT) => features::record(feature, Verdict::yes()),
            Err(e) if e.errno() == Some(libc::EINVAL) => features::record(feature, Verdict::no(e)),
            Err(_) => {}
        }
        match query {
            Ok(q) => {
                // A hook never attached to is at revision 1: only one that
                // has changed, or holds programs, says something.
                if q.revision > 1 || !q.prog_ids.is_empty() {
                    d.revisions.push(HookRevision { hook, revision: q.revision });
                }
                for (n, (&prog_id, &link_id)) in q.prog_ids.iter().zip(&q.link_ids).enumerate() {
                    let via = if link_id == 0 { Via::Attached } else { Via::Link { link_id } };
                    d.programs.push(program(hook, n as u32, prog_id, via, None));
                }
            }
            // No tcx here, or never used on the first tcx kernels.
            Err(e) if matches!(e.errno(), Some(libc::EINVAL | libc::ENOENT)) => {}
            Err(e) => {
                whole &= e.errno() == Some(libc::ENODEV);
                d.errors.push(format!("{}: {e}", hook.as_str()));
            }
        }
    }
    for (dir, hook) in [(Direction::Ingress, IfHook::TcIngress), (Direction::Egress, IfHook::TcEgress)] {
        match node.filters(d.ifindex, dir) {
            Ok(filters) => {
                let mut bpf: Vec<super::cls_bpf::BpfFilter> = filters
                    .into_iter()
                    .filter_map(|f| match f {
                        super::cls_bpf::Filter::Bpf(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                // By priority, then handle: the order the kernel runs them.
                bpf.sort_by_key(|f| (f.prio, f.handle));
                for (n, f) in bpf.into_iter().enumerate() {
                    let via = Via::Filter {
                        prio: f.prio,
                        handle: f.handle,
                        filter_name: f.name,
                        direct_action: f.direct_action,
                    };
                    d.programs.push(program(hook, n as u32, f.prog_id, via, None));
                }
            }
            Err(e) => {
                whole &= e.errno == Some(libc::ENODEV);
                d.errors.push(format!("{}: {e}", hook.as_str()));
            }
        }
    }
    // With the legacy `ingress` qdisc (not clsact) the egress dump answers
    // the ingress filters again: one program, one hook.
    let ingress: Vec<(u32, Via)> =
        d.programs.iter().filter(|p| p.hook == IfHook::TcIngress).map(|p| (p.prog_id, p.via.clone())).collect();
    d.programs.retain(|p| p.hook != IfHook::TcEgress || !ingress.contains(&(p.prog_id, p.via.clone())));
    if let Some(id) = l.xdp_prog_id {
        d.programs.push(program(IfHook::Xdp, 0, id, Via::Attached, l.xdp_mode));
    }
    // What each program uses (its maps prove whose it is) and how often it
    // ran, when the kernel counts.
    for p in &mut d.programs {
        if let Ok(fd) = sys::prog_fd_by_id(p.prog_id) {
            p.map_ids = sys::prog_map_ids(fd.as_fd()).unwrap_or_default();
            p.run_cnt = sys::prog_info(fd.as_fd()).ok().map(|i| i.run_cnt).filter(|_| crate::bpf::stats_enabled());
        }
    }
    whole
}

fn program(hook: IfHook, position: u32, prog_id: u32, via: Via, xdp_mode: Option<XdpMode>) -> DeviceProgram {
    DeviceProgram {
        hook,
        position,
        prog_id,
        prog_name: String::new(),
        via,
        xdp_mode,
        map_ids: Vec::new(),
        owner: None,
        proof: None,
        run_cnt: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red team R1: a pod's thousand `cilium_*` bridges moved into the
    /// node's namespace come after the node's NIC, whatever their index.
    #[test]
    fn a_thousand_devices_named_like_the_cnis_cannot_push_a_nic_out_of_the_read() {
        let link = |ifindex, name: &str, driver: &str| Link {
            ifindex,
            name: name.into(),
            driver: driver.into(),
            ..Default::default()
        };
        let mut links: Vec<Link> = (0..1100).map(|i| link(3 + i, &format!("cilium_{i}"), "bridge")).collect();
        links.push(link(2000, "eth0", ""));
        links.sort_by_key(rank);
        let read: Vec<&str> = links.iter().take(DEVICES_MAX).map(|l| l.name.as_str()).collect();
        assert_eq!(read[0], "eth0");
        // What is not read is counted: the audit's view is then incomplete.
        assert_eq!(links.len() - DEVICES_MAX, 77);
    }
}
