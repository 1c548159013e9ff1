//! A pod's second layer of coverage: the programs on its host-side
//! interface. A CNI with an eBPF per-endpoint datapath attaches its
//! programs to every pod it manages (Cilium's `cil_from_container` on the
//! `lxc*` veth through tc or tcx, or on the netkit device; Calico's
//! `cali_tc_preamble` on `cali*`). A pod whose interface has none of them,
//! on a node whose other pods have them, is outside the datapath: started
//! before the CNI, it got its network from the previous one.
//!
//! Read from the node, without changing it:
//! - each pod's network namespace from one of its processes
//!   (`/proc/<pid>/ns/net`; PID 1's: a hostNetwork pod, never judged);
//! - the id that namespace has in the host's (`RTM_GETNSID`, a lookup);
//! - the host's links: the veth and netkit pairs whose other end is in it;
//! - on each, the legacy tc filters (`RTM_GETTFILTER`), the tcx and netkit
//!   programs (`BPF_PROG_QUERY` by interface index) and XDP.
//!
//! The interface indexes and the netlink socket are the host network
//! namespace's: all of it runs on a thread of its own that joined PID 1's
//! network namespace (the agent's pod has its own); the main thread never
//! joins one.

pub mod cls_bpf;
pub mod config;
pub mod map;
pub mod netlink;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use crate::bpf::sys;
use crate::features::{self, Feature, Verdict};
use crate::snapshot::{AgentProcess, PodCgroup};
use map::{NetnsProbe, PodProbe};
use netlink::{Direction, HostNet, Link};

/// What was read of the pods' interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PodNetworks {
    /// Why the interfaces could not be read at all (`pods` is then empty).
    pub error: Option<String>,
    /// When they were read (unix seconds): what a pod's age is taken at.
    pub read_at: u64,
    /// When each owner's agent process started.
    pub agents: Vec<AgentStart>,
    /// The per-endpoint datapaths the node's configuration says it runs
    /// (its running agents', its CNI configuration).
    pub configured: Vec<config::Configured>,
    pub pods: Vec<PodNet>,
    /// Host interfaces the link dump described in a way that could not be
    /// decoded (a name that is not UTF-8): left out, counted.
    pub links_undecodable: u64,
    /// The daemon's memory: pods (by UID) whose interface carried an
    /// owner's per-endpoint program at an earlier read. One that lost it
    /// is outside the datapath at once, whatever its age. Empty for a
    /// one-shot audit.
    #[serde(skip)]
    pub had_programs: std::collections::BTreeSet<(String, crate::owner::Owner, u32)>,
}

impl PodNetworks {
    /// Every program on a pod's interface.
    pub fn program_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.interfaces().flat_map(|i| i.programs.iter().map(|p| p.prog_id))
    }

    /// Every pod's host-side interface.
    pub fn interfaces(&self) -> impl Iterator<Item = &Interface> {
        self.pods.iter().flat_map(|p| match &p.net {
            Net::Interfaces { interfaces } => interfaces.as_slice(),
            _ => &[],
        })
    }

    /// Names each program from the node's (full names where resolved). A
    /// program that cannot be named (gone since the query, its id freed as
    /// a CNI replaced it) leaves its interface unjudged this time.
    pub fn name_programs(&mut self, programs: &BTreeMap<u32, crate::bpf::programs::Program>) {
        for p in &mut self.pods {
            if let Net::Interfaces { interfaces } = &mut p.net {
                for i in interfaces.iter_mut() {
                    for prog in &mut i.programs {
                        match programs.get(&prog.prog_id) {
                            Some(known) => prog.prog_name = known.name.clone(),
                            None if prog.prog_name.is_empty() => {
                                i.errors.push(format!("program {} could not be named", prog.prog_id))
                            }
                            None => {}
                        }
                    }
                }
            }
        }
    }

    fn failed(error: String, read_at: u64) -> PodNetworks {
        PodNetworks { error: Some(error), read_at, ..Default::default() }
    }
}

/// When an owner's agent process started (unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentStart {
    pub owner: crate::owner::Owner,
    pub pid: u32,
    pub started: Option<u64>,
}

/// One pod's network, as the node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodNet {
    pub pod_uid: String,
    /// As the node's runtime or kubelet logs name it (the report fills
    /// these in; `null`: not found).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub cgroup: String,
    /// When its oldest process read started (unix seconds).
    pub started: Option<u64>,
    #[serde(flatten)]
    pub net: Net,
}

/// Where a pod's network is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "network", rename_all = "snake_case")]
pub enum Net {
    /// The node's own network namespace: no interface of its own.
    HostNetwork,
    /// No process of it could be read.
    NoProcess,
    /// Its own namespace, which no host interface leads into (ipvlan,
    /// macvlan, SR-IOV, or no network).
    NoHostInterface,
    Unreadable {
        reason: String,
    },
    /// Its own namespace, and the host's interfaces that lead into it.
    Interfaces {
        interfaces: Vec<Interface>,
    },
}

/// A host-side interface of a pod, and the programs on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub ifindex: u32,
    pub name: String,
    /// `veth` or `netkit`.
    pub driver: String,
    pub programs: Vec<ProgramOn>,
    /// Hooks that could not be read, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl Interface {
    fn of(l: &Link) -> Interface {
        Interface {
            ifindex: l.ifindex,
            name: l.name.clone(),
            driver: l.driver.clone(),
            programs: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// Where on an interface a program runs. Seen from the host's side:
/// ingress is what the pod sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum IfHook {
    TcIngress,
    TcEgress,
    TcxIngress,
    TcxEgress,
    /// netkit: the peer's transmit (what the pod sends).
    NetkitPeer,
    /// netkit: the primary's transmit (what the pod receives).
    NetkitPrimary,
    Xdp,
}

impl IfHook {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the hook runs on what the pod sends: where a CNI's
    /// per-endpoint entry program must be.
    pub fn is_pod_egress(self) -> bool {
        matches!(self, IfHook::TcIngress | IfHook::TcxIngress | IfHook::NetkitPeer)
    }
}

/// A program on an interface's hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramOn {
    pub hook: IfHook,
    pub prog_id: u32,
    /// Its full name, once the scan has the node's programs.
    pub prog_name: String,
    #[serde(flatten)]
    pub via: Via,
}

/// How a program is on its hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "snake_case")]
pub enum Via {
    /// A tc filter: its priority, handle and name, and whether the
    /// program's return code is the verdict.
    Filter { prio: u16, handle: u32, filter_name: Option<String>, direct_action: bool },
    /// A bpf link (tcx, netkit).
    Link { link_id: u32 },
    /// Attached without a link.
    Attached,
}

/// The longest the interfaces of one read are read for: past it, those
/// left say so (`Interface::errors`) rather than hold the pass (each
/// answer comes under RTNL, which a busy node's CNI holds while it makes
/// pods).
const READ_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads every pod's network. `root` is the audited cgroup root (the pods'
/// cgroups are read through it), `proc` the node's `/proc`, `cni_conf` the
/// node's CNI configuration directory (inside PID 1's root).
pub fn read(
    pods: &[PodCgroup],
    agents: &[AgentProcess],
    root: BorrowedFd<'_>,
    proc: &Path,
    cni_conf: &Path,
) -> PodNetworks {
    let read_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // No pods, nothing to read (nor any reason to say it could not be).
    if pods.is_empty() {
        return PodNetworks { read_at, ..Default::default() };
    }
    let host_path = proc.join("1/ns/net");
    let host = match std::fs::File::open(&host_path) {
        Ok(f) => OwnedFd::from(f),
        Err(e) => return PodNetworks::failed(format!("open {}: {e}", host_path.display()), read_at),
    };
    let host_ino = match nix::sys::stat::fstat(host.as_fd()) {
        Ok(st) => st.st_ino,
        Err(e) => return PodNetworks::failed(format!("fstat {}: {e}", host_path.display()), read_at),
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
    let mut probes: Vec<(PodProbe, Vec<(u64, Oldest)>)> = pods
        .iter()
        .map(|p| {
            let (netns, inos, started) = pod_netns(p, root, proc, host_ino, boot);
            (PodProbe { pod_uid: p.pod_uid.clone(), cgroup: p.cgroup.clone(), started, netns }, inos)
        })
        .collect();
    // Each namespace is one pod's: the one whose process in it is the
    // oldest (its sandbox's; pods never share one). A process a pod put in
    // another pod's namespace does not make that pod's interface its own.
    let mut owners: BTreeMap<u64, (Oldest, usize)> = BTreeMap::new();
    for (n, (_, inos)) in probes.iter().enumerate() {
        for (ino, oldest) in inos {
            let at = owners.entry(*ino).or_insert((*oldest, n));
            *at = (*at).min((*oldest, n));
        }
    }
    for (n, (_, inos)) in probes.iter_mut().enumerate() {
        inos.retain(|(ino, _)| owners.get(ino).is_some_and(|(_, owner)| *owner == n));
    }
    // Each pod network namespace by its inode, and its oldest process:
    // opened one at a time for its id (a node's pods would exhaust the fd
    // limit).
    let namespaces: BTreeMap<u64, u32> = owners.iter().map(|(ino, ((_, pid), _))| (*ino, *pid)).collect();
    // Everything that names an interface, on a thread in the host's
    // network namespace.
    let here = std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).ok();
    let joined = std::thread::scope(|s| {
        s.spawn(|| -> Result<(Vec<PodNet>, u64), String> {
            if here != Some(host_ino) {
                nix::sched::setns(host.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(|e| format!("setns into {}: {e}", host_path.display()))?;
            }
            let mut net = HostNet::here().map_err(|e| e.to_string())?;
            let (links, undecodable) = net.links().map_err(|e| e.to_string())?;
            let mut nsids: BTreeMap<u64, Option<i32>> = BTreeMap::new();
            for (ino, pid) in &namespaces {
                // The same namespace still (the pid may have been reused).
                let Ok(fd) = std::fs::File::open(proc.join(pid.to_string()).join("ns/net")).map(OwnedFd::from) else {
                    continue;
                };
                if nix::sys::stat::fstat(fd.as_fd()).map(|st| st.st_ino).ok() != Some(*ino) {
                    continue;
                }
                match net.nsid(fd.as_fd()) {
                    Ok(id) => {
                        nsids.insert(*ino, id);
                    }
                    Err(e) => tracing::debug!(error = %e, "no netns id"),
                }
            }
            for (probe, inos) in &mut probes {
                if let NetnsProbe::Own { nsids: ids } = &mut probe.netns {
                    // Oldest first: the sandbox's must be looked up; one
                    // whose process has gone since is left out.
                    inos.sort_by_key(|(_, oldest)| *oldest);
                    match inos.first().map(|(ino, _)| nsids.contains_key(ino)) {
                        Some(true) => *ids = inos.iter().filter_map(|(i, _)| nsids.get(i).copied().flatten()).collect(),
                        Some(false) => {
                            probe.netns = NetnsProbe::Unreadable("its netns id could not be looked up".into())
                        }
                        None => {
                            probe.netns = NetnsProbe::Unreadable(
                                "its processes are only in other pods' network namespaces".into(),
                            )
                        }
                    }
                }
            }
            let mut pods = map::pods_on_links(probes.drain(..).map(|(p, _)| p).collect(), &links);
            let by_index: BTreeMap<u32, &Link> = links.iter().map(|l| (l.ifindex, l)).collect();
            let started = std::time::Instant::now();
            for p in &mut pods {
                if let Net::Interfaces { interfaces } = &mut p.net {
                    for i in interfaces {
                        if started.elapsed() > READ_BUDGET {
                            i.errors.push(format!("not read: the read's {}s were spent", READ_BUDGET.as_secs()));
                            continue;
                        }
                        read_programs(&mut net, i, by_index.get(&i.ifindex).copied());
                    }
                }
            }
            Ok((pods, undecodable))
        })
        .join()
    });
    match joined {
        Ok(Ok((pods, links_undecodable))) => PodNetworks {
            error: None,
            read_at,
            agents,
            configured,
            pods,
            links_undecodable,
            had_programs: Default::default(),
        },
        Ok(Err(e)) => PodNetworks::failed(e, read_at),
        Err(_) => PodNetworks::failed("the interface reader panicked".into(), read_at),
    }
}

/// The most processes of one pod read for its network namespaces, and the
/// most namespaces of one pod looked up (those of its oldest processes): a
/// pod makes as many as it likes.
const PROCESSES_READ: usize = 64;
const NAMESPACES_MAX: usize = 8;
/// The most of a pod's cgroups whose processes are listed (a container may
/// make many below its own, empty by the time they are read).
const CGROUPS_READ: usize = 2 * PROCESSES_READ;

/// A namespace's oldest process read: when it started (clock ticks after
/// boot; unknown: `u64::MAX`), and its pid.
type Oldest = (u64, u32);

/// A pod's network namespaces, from its processes (every leaf cgroup's and
/// its own, `PROCESSES_READ` at most: a pod cannot hide its pause process
/// behind a process in a namespace of its own), and when its oldest one
/// started.
fn pod_netns(
    pod: &PodCgroup,
    root: BorrowedFd<'_>,
    proc: &Path,
    host_ino: u64,
    boot: Option<u64>,
) -> (NetnsProbe, Vec<(u64, Oldest)>, Option<u64>) {
    // The containers the runtime made (the pod cgroup's children, its
    // sandbox's among them) before any cgroup a container made below its
    // own, and a share of the processes read for each: a container cannot
    // crowd the sandbox's process out with cgroups or processes of its own.
    // By depth, then id: cgroup ids only grow, so of the runtime's
    // containers the sandbox's comes first.
    let order = |c: &&crate::snapshot::ContainerCgroup| (c.cgroup.matches('/').count(), c.cgroup_id);
    let mut containers: Vec<&crate::snapshot::ContainerCgroup> = pod.containers.iter().collect();
    containers.sort_by_key(order);
    let cgroups: Vec<(u64, &str)> = containers
        .iter()
        .take(CGROUPS_READ)
        .map(|c| (c.cgroup_id, c.cgroup.as_str()))
        .chain([(pod.cgroup_id, pod.cgroup.as_str())])
        .collect();
    let share = (PROCESSES_READ / cgroups.len()).max(1);
    let mut pids = Vec::new();
    for (id, path) in cgroups {
        if pids.len() >= PROCESSES_READ {
            break;
        }
        pids.extend(processes(root, id, path, share.min(PROCESSES_READ - pids.len())));
    }
    // Each namespace by its inode: its oldest process read, by start (in
    // clock ticks; unknown: last) then pid.
    let (mut seen, mut host, mut started, mut error) = (BTreeMap::<u64, (u64, u32)>::new(), false, None::<u64>, None);
    for pid in pids {
        let ns_path = proc.join(pid.to_string()).join("ns/net");
        match std::fs::metadata(&ns_path) {
            Ok(st) => {
                let ticks = process_start_ticks(proc, pid);
                let t = boot.zip(ticks).map(|(b, t)| b + t / procfs::ticks_per_second());
                if st.ino() == host_ino {
                    host = true;
                } else {
                    let at = seen.entry(st.ino()).or_insert((u64::MAX, pid));
                    *at = (*at).min((ticks.unwrap_or(u64::MAX), pid));
                }
                started = match (started, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            // Gone meanwhile: another of its processes may tell.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => error = Some(format!("stat {}: {e}", ns_path.display())),
        }
    }
    // More namespaces than are looked up: those of its oldest processes
    // (its sandbox's process is the first it had; no process of a
    // container is older).
    if seen.len() > NAMESPACES_MAX {
        let mut by_age: Vec<(u64, (u64, u32))> = seen.into_iter().collect();
        by_age.sort_by_key(|(_, oldest)| *oldest);
        seen = by_age.into_iter().take(NAMESPACES_MAX).collect();
    }
    let probe = match (seen.len(), host, error) {
        (0, true, _) => NetnsProbe::Host,
        (0, false, Some(e)) => NetnsProbe::Unreadable(e),
        (0, false, None) => NetnsProbe::NoProcess,
        // Its own namespaces (a process of it on the node's network too is
        // a process that joined it: the pod is judged by its own).
        _ => NetnsProbe::Own { nsids: Vec::new() },
    };
    let inos: Vec<(u64, Oldest)> = match probe {
        NetnsProbe::Own { .. } => seen.into_iter().collect(),
        _ => Vec::new(),
    };
    (probe, inos, started)
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
fn read_programs(net: &mut HostNet, i: &mut Interface, link: Option<&Link>) {
    use aya_obj::generated::bpf_attach_type as at;
    for (dir, hook) in [(Direction::Ingress, IfHook::TcIngress), (Direction::Egress, IfHook::TcEgress)] {
        match net.filters(i.ifindex, dir) {
            Ok(filters) => i.programs.extend(filters.into_iter().filter_map(|f| match f {
                cls_bpf::Filter::Bpf(f) => Some(ProgramOn {
                    hook,
                    prog_id: f.prog_id,
                    prog_name: String::new(),
                    via: Via::Filter {
                        prio: f.prio,
                        handle: f.handle,
                        filter_name: f.name,
                        direct_action: f.direct_action,
                    },
                }),
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
                i.programs.extend(q.prog_ids.iter().zip(&q.link_ids).map(|(&prog_id, &link_id)| ProgramOn {
                    hook,
                    prog_id,
                    prog_name: String::new(),
                    via: if link_id == 0 { Via::Attached } else { Via::Link { link_id } },
                }));
            }
            // The first tcx kernels said so of a hook never used.
            Err(e) if e.errno() == Some(libc::ENOENT) => features::record(feature, Verdict::yes()),
            // A kernel without the attach type.
            Err(e) if e.errno() == Some(libc::EINVAL) => features::record(feature, Verdict::no(&e)),
            Err(e) => i.errors.push(format!("{}: {e}", hook.as_str())),
        }
    }
    if let Some(id) = link.and_then(|l| l.xdp_prog_id) {
        i.programs.push(ProgramOn { hook: IfHook::Xdp, prog_id: id, prog_name: String::new(), via: Via::Attached });
    }
}
