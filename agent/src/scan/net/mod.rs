//! A pod's second layer of coverage, read: the programs on its host-side
//! interface. A CNI with an eBPF per-endpoint datapath attaches its
//! programs to every pod it manages (Cilium's `cil_from_container` on the
//! `lxc*` veth through tc or tcx, or on the netkit device; Calico's
//! `cali_tc_preamble` on `cali*`); `findings::outside_datapath` judges
//! what is read here (`snapshot::net`).
//!
//! Read from the node, without changing it:
//! - each pod's network namespace from one of its processes
//!   (`/proc/<pid>/ns/net`; PID 1's: a hostNetwork pod, never judged),
//!   which namespaces are whose decided in `namespaces` (pure);
//! - the id that namespace has in the host's (`RTM_GETNSID`, a lookup);
//! - the host's links: the veth and netkit pairs whose other end is in it
//!   (`map`, pure);
//! - on each, the legacy tc filters (`RTM_GETTFILTER`, decoded by
//!   `cls_bpf`), the tcx and netkit programs (`BPF_PROG_QUERY` by
//!   interface index) and XDP.
//!
//! The interface indexes and the netlink socket are the host network
//! namespace's: all of it runs on a thread of its own that joined PID 1's
//! network namespace (the agent's pod has its own); the main thread never
//! joins one.

pub mod cls_bpf;
pub mod config;
pub mod devices;
pub mod map;
pub mod namespaces;
pub mod netlink;

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::bpf::sys;
use crate::features::{self, Feature, Verdict};
use crate::snapshot::devices::HostDevices;
use crate::snapshot::net::{AgentStart, IfHook, Interface, PodNet, PodNetworks, ProgramOn, Via};
use crate::snapshot::{AgentProcess, OwnerMap, OwnerPin, PodCgroup, ScanError};
use map::PodProbe;
use namespaces::{PodNamespaces, ProcessNs};
use netlink::{Direction, HostNet};

/// The longest the interfaces of one read are read for: past it, those
/// left say so (`Interface::errors`) rather than hold the pass (each
/// answer comes under RTNL, which a busy node's CNI holds while it makes
/// pods).
const READ_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// What was read of the node's network: the pods', its own devices', and
/// what the owners pinned, which proves whose the programs on them are
/// (read with them, so that a link pinned a moment ago is not missing).
#[derive(Debug, Clone, Default)]
pub struct Networks {
    pub pods: PodNetworks,
    pub devices: HostDevices,
    pub pins: Pins,
}

impl Networks {
    /// Nothing could be read: the pods' networks fail only when there are
    /// pods to read.
    fn failed(error: String, read_at: u64, pods: bool, pins: Pins) -> Networks {
        Networks {
            pods: if pods {
                PodNetworks::failed(error.clone(), read_at)
            } else {
                PodNetworks { read_at, ..Default::default() }
            },
            devices: HostDevices { error: Some(error), ..Default::default() },
            pins,
        }
    }
}

/// What the owners pinned in PID 1's bpffs (`scan::owner_pins`).
#[derive(Debug, Clone, Default)]
pub struct Pins {
    pub pins: Vec<OwnerPin>,
    pub maps: Vec<OwnerMap>,
    /// What could not be read there.
    pub errors: Vec<ScanError>,
    /// bpffs mounts a later mount hides, with the pins in them.
    pub hidden: Vec<crate::mounts::HiddenBpffs>,
}

/// Reads what the owners pinned, every pod's network and the node's own
/// devices. `root` is the audited cgroup root (the pods' cgroups are read
/// through it), `proc` the node's `/proc`, `cni_conf` the node's CNI
/// configuration directory (inside PID 1's root), `budget` the deadline of
/// the pass's untrusted reads.
pub fn read(
    pods: &[PodCgroup],
    agents: &[AgentProcess],
    root: BorrowedFd<'_>,
    proc: &Path,
    cni_conf: &Path,
    budget: &super::deadline::Budget,
) -> Networks {
    let read_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut pins = Pins::default();
    (pins.pins, pins.maps) = super::owner_pins::owner_pins(proc, budget, &mut pins.errors);
    pins.hidden = super::owner_pins::hidden_bpffs(proc, &mut pins.errors);
    let host_path = proc.join("1/ns/net");
    let host = match std::fs::File::open(&host_path) {
        Ok(f) => OwnedFd::from(f),
        Err(e) => {
            return Networks::failed(format!("open {}: {e}", host_path.display()), read_at, !pods.is_empty(), pins);
        }
    };
    let host_ino = match nix::sys::stat::fstat(host.as_fd()) {
        Ok(st) => st.st_ino,
        Err(e) => {
            return Networks::failed(format!("fstat {}: {e}", host_path.display()), read_at, !pods.is_empty(), pins);
        }
    };
    let boot = boot_time(proc);
    let configured = config::read(agents, proc, cni_conf);
    let agents: Vec<AgentStart> = agents
        .iter()
        .filter(|a| a.privileged)
        .map(|a| AgentStart {
            owner: a.owner,
            pid: a.pid,
            started: boot.and_then(|b| process_start(proc, a.pid).map(|s| b + s)),
        })
        .collect();
    let mut namespaces: Vec<PodNamespaces> = pods
        .iter()
        .map(|p| namespaces::of_pod(&pod_processes(p, root, proc), host_ino, boot, procfs::ticks_per_second()))
        .collect();
    // Each pod network namespace by its inode, and its oldest process:
    // opened one at a time for its id (a node's pods would exhaust the fd
    // limit).
    let lookups = namespaces::assign(&mut namespaces);
    // Everything that names an interface, on a thread in the host's
    // network namespace (and, for a moment each, in each pod's).
    let here = std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).ok();
    let joined = std::thread::scope(|s| {
        s.spawn(|| -> Result<(Vec<PodNet>, HostDevices), String> {
            let into_node = || {
                nix::sched::setns(host.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(|e| format!("setns into {}: {e}", host_path.display()))
            };
            if here != Some(host_ino) {
                into_node()?;
            }
            let mut node = HostNet::here().map_err(|e| e.to_string())?;
            let started = std::time::Instant::now();
            let mut nsids: BTreeMap<u64, Option<i32>> = BTreeMap::new();
            let mut pairs: HashMap<i32, map::PairRead> = HashMap::new();
            for (ino, pid) in &lookups {
                // The same namespace still (the pid may have been reused).
                let Ok(fd) = std::fs::File::open(proc.join(pid.to_string()).join("ns/net")).map(OwnedFd::from) else {
                    continue;
                };
                if nix::sys::stat::fstat(fd.as_fd()).map(|st| st.st_ino).ok() != Some(*ino) {
                    continue;
                }
                let id = match node.nsid(fd.as_fd()) {
                    Ok(id) => id,
                    Err(e) => {
                        tracing::debug!(error = %e, "no netns id");
                        continue;
                    }
                };
                nsids.insert(*ino, id);
                // No id in the node's: nothing of the node leads there.
                let Some(id) = id else { continue };
                let read = if started.elapsed() > READ_BUDGET {
                    map::PairRead::Failed(format!("not read: the read's {}s were spent", READ_BUDGET.as_secs()))
                } else {
                    let pod_side = pod_side(fd.as_fd(), host.as_fd());
                    // Back in the node's namespace whatever the pod's gave.
                    into_node()?;
                    pair(&mut node, pod_side, id)
                };
                pairs.insert(id, read);
            }
            let probes = pods
                .iter()
                .zip(namespaces.iter_mut())
                .map(|(pod, ns)| {
                    namespaces::resolve(ns, &nsids);
                    PodProbe {
                        pod_uid: pod.pod_uid.clone(),
                        cgroup: pod.cgroup.clone(),
                        started: ns.started,
                        netns: ns.probe.clone(),
                    }
                })
                .collect();
            let mut pods = map::pods_on_pairs(probes, &pairs);
            let xdp: HashMap<u32, Option<u32>> = pairs
                .values()
                .filter_map(|r| match r {
                    map::PairRead::Pair(h, ..) => Some((h.ifindex, h.xdp_prog_id)),
                    _ => None,
                })
                .collect();
            for i in pods.iter_mut().flat_map(PodNet::interfaces_mut) {
                if started.elapsed() > READ_BUDGET {
                    i.errors.push(format!("not read: the read's {}s were spent", READ_BUDGET.as_secs()));
                    continue;
                }
                read_programs(&mut node, i, xdp.get(&i.ifindex).copied().flatten());
                if let Some(master) = i.master {
                    i.bridge = node.link_at(master).ok().flatten().map(|l| l.name);
                }
            }
            // The node's own devices, the pods' host ends left to their
            // section; with a budget of their own.
            let skip: std::collections::HashSet<u32> =
                pods.iter().flat_map(PodNet::interfaces).map(|i| i.ifindex).collect();
            let pod_nsids: std::collections::HashSet<i32> = nsids.values().flatten().copied().collect();
            let devices = devices::read(&mut node, &skip, &pod_nsids, READ_BUDGET);
            Ok((pods, devices))
        })
        .join()
    });
    match joined {
        Ok(Ok((pods, devices))) => Networks {
            pods: PodNetworks { error: None, read_at, agents, configured, pods, ..Default::default() },
            devices,
            pins,
        },
        Ok(Err(e)) => Networks::failed(e, read_at, !pods.is_empty(), pins),
        Err(_) => Networks::failed("the interface reader panicked".into(), read_at, !pods.is_empty(), pins),
    }
}

/// What a pod's namespace (`pod_ns`) says of its side of the CNI's pair:
/// its `eth0`, the id the node's namespace (`node_ns`) has there, and,
/// when `eth0` is no pair into the node, how many of its other interfaces
/// lead there. The calling thread joins the pod's namespace to make a
/// socket there (a socket is its maker's namespace's for life) and stays
/// in it: the caller goes back.
fn pod_side(pod_ns: BorrowedFd<'_>, node_ns: BorrowedFd<'_>) -> Result<map::PodSide, String> {
    nix::sched::setns(pod_ns, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns into the pod's network namespace: {e}"))?;
    let mut pod = HostNet::here().map_err(|e| e.to_string())?;
    // First: the answer fills in the other end's namespace id, which the
    // kernel assigns there if it had none; the lookup then finds it. An
    // altname answers for the name too: only a link called `eth0` is it.
    let eth0 = pod.link_named(map::POD_IFNAME).map_err(|e| e.to_string())?.filter(|l| l.name == map::POD_IFNAME);
    let node_id = pod.nsid(node_ns).map_err(|e| e.to_string())?;
    // Its addresses say where its network came from; provenance only, so
    // a failed read leaves them out.
    let addresses = match &eth0 {
        Some(l) => pod.addresses(l.ifindex).unwrap_or_default(),
        None => Vec::new(),
    };
    let mut side = map::PodSide { eth0, node_id, into_node: 0, addresses };
    // Every other way out of it into the node's namespace, whatever its
    // `eth0` is: a pod that keeps its CNI pair and routes through a
    // macvlan on the node's NIC bypasses the CNI (issue 47 red team, N2).
    // A link that cannot be decoded (a name that is not UTF-8) is not
    // skipped: the pod is not judged (N1).
    if let Some(node) = node_id {
        let (links, undecodable) = pod.links(POD_LINKS_MAX).map_err(|e| e.to_string())?;
        if undecodable > 0 {
            return Err(format!(
                "{undecodable} interface(s) of its network namespace could not be decoded (a name that is not UTF-8?): not judged"
            ));
        }
        let eth0 = side.eth0.as_ref().map(|l| l.ifindex);
        side.into_node = links
            .iter()
            .filter(|l| Some(l.ifindex) != eth0 && (l.peer_nsid == Some(node) || l.driver == "wireguard"))
            .count();
    }
    Ok(side)
}

/// The most links of a pod's own namespace read: past it, the pod is
/// unreadable.
const POD_LINKS_MAX: usize = 64;

/// The pair a pod's side names, its host end read from the node's side
/// (`node`: a socket in the node's namespace; `pod_nsid`: the pod's
/// namespace's id there).
fn pair(node: &mut HostNet, side: Result<map::PodSide, String>, pod_nsid: i32) -> map::PairRead {
    let side = match side {
        Ok(s) => s,
        Err(why) => return map::PairRead::Failed(why),
    };
    let host = match side.eth0.as_ref().filter(|_| side.pairs_into_node()).and_then(|l| l.peer_ifindex) {
        Some(index) => match node.link_at(index) {
            Ok(l) => l,
            Err(e) => return map::PairRead::Failed(e.to_string()),
        },
        None => None,
    };
    map::pair_of(&side, host, pod_nsid)
}

/// What a pod's processes say of their network namespaces: those of each
/// cgroup `namespaces::cgroups_to_read` names, its share each,
/// `PROCESSES_READ` at most.
fn pod_processes(pod: &PodCgroup, root: BorrowedFd<'_>, proc: &Path) -> Vec<ProcessNs> {
    let (cgroups, share) = namespaces::cgroups_to_read(pod);
    let mut pids = Vec::new();
    for (id, path) in cgroups {
        if pids.len() >= namespaces::PROCESSES_READ {
            break;
        }
        pids.extend(processes(root, id, path, share.min(namespaces::PROCESSES_READ - pids.len())));
    }
    pids.into_iter()
        .map(|pid| {
            let ns_path = proc.join(pid.to_string()).join("ns/net");
            match std::fs::metadata(&ns_path) {
                Ok(st) => ProcessNs::In { pid, ino: st.ino(), ticks: process_start_ticks(proc, pid) },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => ProcessNs::Gone,
                Err(e) => ProcessNs::Failed(format!("stat {}: {e}", ns_path.display())),
            }
        })
        .collect()
}

/// Up to `max` processes listed in cgroup `id`'s `cgroup.procs`: opened by
/// id, or by `path` below the root without CAP_DAC_READ_SEARCH (and then
/// only if it is still cgroup `id`).
fn processes(root: BorrowedFd<'_>, id: u64, path: &str, max: usize) -> Vec<u32> {
    use std::io::Read;
    let fd = crate::os::open_cgroup_by_id(root, id).ok().or_else(|| {
        let rel = path.trim_start_matches('/');
        let rel = if rel.is_empty() { "." } else { rel };
        let fd = nix::fcntl::openat(
            root,
            rel,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        (nix::sys::stat::fstat(fd.as_fd()).ok()?.st_ino == id).then_some(fd)
    });
    let Some(procs) = fd.and_then(|fd| {
        nix::fcntl::openat(
            fd.as_fd(),
            "cgroup.procs",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()
    }) else {
        return Vec::new();
    };
    let mut text = String::new();
    // A pid is at most 8 characters and its newline.
    let _ = std::fs::File::from(procs).take(max as u64 * 9).read_to_string(&mut text);
    text.lines().filter_map(|l| l.trim().parse().ok()).take(max).collect()
}

/// The node's boot time (unix seconds), from `<proc>/stat`'s `btime`.
fn boot_time(proc: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc.join("stat")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

/// How long after boot process `pid` started, in seconds.
fn process_start(proc: &Path, pid: u32) -> Option<u64> {
    process_start_ticks(proc, pid).map(|t| t / procfs::ticks_per_second())
}

/// How long after boot process `pid` started, in clock ticks.
fn process_start_ticks(proc: &Path, pid: u32) -> Option<u64> {
    let stat = procfs::process::Process::new_with_root(proc.join(pid.to_string())).ok()?.stat().ok()?;
    Some(stat.starttime)
}

/// The programs on one interface's hooks.
fn read_programs(net: &mut HostNet, i: &mut Interface, xdp_prog_id: Option<u32>) {
    use aya_obj::generated::bpf_attach_type as at;
    for (dir, hook) in [(Direction::Ingress, IfHook::TcIngress), (Direction::Egress, IfHook::TcEgress)] {
        match net.filters(i.ifindex, dir) {
            Ok(filters) => i.programs.extend(filters.into_iter().filter_map(|f| match f {
                cls_bpf::Filter::Bpf(f) => Some(ProgramOn::new(
                    hook,
                    f.prog_id,
                    Via::Filter { prio: f.prio, handle: f.handle, filter_name: f.name, direct_action: f.direct_action },
                )),
                _ => None,
            })),
            Err(e) => i.errors.push(format!("{}: {e}", hook.as_str())),
        }
    }
    // With the legacy `ingress` qdisc (not clsact) the egress dump answers
    // the ingress filters again: one program, one hook.
    let ingress: Vec<(u32, Via)> =
        i.programs.iter().filter(|p| p.hook == IfHook::TcIngress).map(|p| (p.prog_id, p.via.clone())).collect();
    i.programs.retain(|p| p.hook != IfHook::TcEgress || !ingress.contains(&(p.prog_id, p.via.clone())));
    let mut mprog = vec![
        (at::BPF_TCX_INGRESS, IfHook::TcxIngress, Feature::Tcx),
        (at::BPF_TCX_EGRESS, IfHook::TcxEgress, Feature::Tcx),
    ];
    if i.driver == "netkit" {
        mprog.push((at::BPF_NETKIT_PEER, IfHook::NetkitPeer, Feature::Netkit));
        mprog.push((at::BPF_NETKIT_PRIMARY, IfHook::NetkitPrimary, Feature::Netkit));
    }
    for (attach, hook, feature) in mprog {
        match sys::ifindex_query(i.ifindex, attach as u32) {
            Ok(q) => {
                features::record(feature, Verdict::yes());
                i.programs.extend(q.prog_ids.iter().zip(&q.link_ids).map(|(&prog_id, &link_id)| {
                    ProgramOn::new(hook, prog_id, if link_id == 0 { Via::Attached } else { Via::Link { link_id } })
                }));
            }
            // The first tcx kernels said so of a hook never used.
            Err(e) if e.errno() == Some(libc::ENOENT) => features::record(feature, Verdict::yes()),
            // A kernel without the attach type.
            Err(e) if e.errno() == Some(libc::EINVAL) => features::record(feature, Verdict::no(&e)),
            Err(e) => i.errors.push(format!("{}: {e}", hook.as_str())),
        }
    }
    if let Some(id) = xdp_prog_id {
        i.programs.push(ProgramOn::new(IfHook::Xdp, id, Via::Attached));
    }
    // The maps each uses: what ties it to its owner's pinned maps.
    for p in &mut i.programs {
        if let Ok(fd) = sys::prog_fd_by_id(p.prog_id) {
            p.map_ids = sys::prog_map_ids(fd.as_fd()).unwrap_or_default();
        }
    }
}
