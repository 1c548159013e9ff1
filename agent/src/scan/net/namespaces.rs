//! Which network namespaces are a pod's: pure decisions over what was read
//! of its processes. A pod decides what its processes are and where they
//! live (it may make many, put them in namespaces of its own, or join
//! another pod's); each rule here is named by the test of the attack it
//! stops.
//!
//! - Each container the runtime made gets a share of the processes read,
//!   before any cgroup a container made below its own (`cgroups_to_read`):
//!   no container crowds the sandbox's process out.
//! - Past `NAMESPACES_MAX` namespaces, those of the pod's oldest processes
//!   are the ones looked up (`of_pod`): its sandbox's is its first.
//! - A namespace is the pod's whose process in it is the oldest (`assign`):
//!   a process put into another pod's namespace does not make that pod's
//!   interface its own.
//! - Only the pod's sandbox namespace (its oldest, of those it was given)
//!   is looked up and judged: one a container made says nothing of the
//!   pod's traffic, and a pod that makes many costs one lookup. It failing
//!   makes the pod unreadable (`resolve`).

use std::collections::BTreeMap;

use crate::snapshot::{ContainerCgroup, PodCgroup};

/// The most processes of one pod read for its network namespaces, and the
/// most namespaces of one pod looked up (those of its oldest processes): a
/// pod makes as many as it likes.
pub const PROCESSES_READ: usize = 64;
pub const NAMESPACES_MAX: usize = 8;
/// The most of a pod's cgroups whose processes are listed (a container may
/// make many below its own, empty by the time they are read).
pub const CGROUPS_READ: usize = 2 * PROCESSES_READ;

/// A namespace's oldest process read: when it started (clock ticks after
/// boot; unknown: `u64::MAX`), and its pid.
pub type Oldest = (u64, u32);

/// A pod's network namespaces, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsProbe {
    /// No process of the pod could be read (gone, or none yet).
    NoProcess,
    /// The node's own only: a hostNetwork pod.
    Host,
    /// Namespaces of its own, by the ids they have in the host's (one
    /// without an id has no host interface leading there).
    Own {
        nsids: Vec<i32>,
    },
    Unreadable(String),
}

/// The cgroups of a pod whose processes are listed, in order, and how many
/// processes of each: the containers the runtime made (the pod cgroup's
/// children, its sandbox's among them) by depth then id (cgroup ids only
/// grow: of the runtime's containers the sandbox's comes first), at most
/// `CGROUPS_READ`, then the pod's own cgroup.
pub fn cgroups_to_read(pod: &PodCgroup) -> (Vec<(u64, &str)>, usize) {
    let order = |c: &&ContainerCgroup| (c.cgroup.matches('/').count(), c.cgroup_id);
    let mut containers: Vec<&ContainerCgroup> = pod.containers.iter().collect();
    containers.sort_by_key(order);
    let cgroups: Vec<(u64, &str)> = containers
        .iter()
        .take(CGROUPS_READ)
        .map(|c| (c.cgroup_id, c.cgroup.as_str()))
        .chain([(pod.cgroup_id, pod.cgroup.as_str())])
        .collect();
    let share = (PROCESSES_READ / cgroups.len()).max(1);
    (cgroups, share)
}

/// What one process of a pod said of its network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessNs {
    /// In the namespace of inode `ino`; started `ticks` clock ticks after
    /// boot, when that could be read.
    In { pid: u32, ino: u64, ticks: Option<u64> },
    /// Gone meanwhile: another of its processes may tell.
    Gone,
    /// Its namespace could not be read, and why.
    Failed(String),
}

/// What a pod's processes say of its network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNamespaces {
    pub probe: NetnsProbe,
    /// Its own namespaces by inode, each with its oldest process read
    /// (empty unless `probe` is `Own`).
    pub inos: Vec<(u64, Oldest)>,
    /// When its oldest process read started (unix seconds).
    pub started: Option<u64>,
}

/// A pod's network namespaces from what its processes said (`host_ino`:
/// the node's; `boot`: the node's boot time in unix seconds; `hz`: clock
/// ticks per second).
pub fn of_pod(seen: &[ProcessNs], host_ino: u64, boot: Option<u64>, hz: u64) -> PodNamespaces {
    let (mut own, mut host, mut started, mut error) = (BTreeMap::<u64, Oldest>::new(), false, None::<u64>, None);
    for s in seen {
        match s {
            ProcessNs::In { pid, ino, ticks } => {
                if *ino == host_ino {
                    host = true;
                } else {
                    let at = own.entry(*ino).or_insert((u64::MAX, *pid));
                    *at = (*at).min((ticks.unwrap_or(u64::MAX), *pid));
                }
                let t = boot.zip(*ticks).map(|(b, t)| b + t / hz.max(1));
                started = match (started, t) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            ProcessNs::Gone => {}
            ProcessNs::Failed(e) => error = Some(e.clone()),
        }
    }
    // More namespaces than are looked up: those of its oldest processes
    // (its sandbox's process is the first it had; no process of a
    // container is older).
    let mut by_age: Vec<(u64, Oldest)> = own.into_iter().collect();
    by_age.sort_by_key(|(_, oldest)| *oldest);
    by_age.truncate(NAMESPACES_MAX);
    let probe = match (by_age.len(), host, error) {
        (0, true, _) => NetnsProbe::Host,
        (0, false, Some(e)) => NetnsProbe::Unreadable(e),
        (0, false, None) => NetnsProbe::NoProcess,
        // Its own namespaces (a process of it on the node's network too is
        // a process that joined it: the pod is judged by its own).
        _ => NetnsProbe::Own { nsids: Vec::new() },
    };
    let inos = if matches!(probe, NetnsProbe::Own { .. }) { by_age } else { Vec::new() };
    PodNamespaces { probe, inos, started }
}

/// Gives each namespace to one pod: the one whose process in it is the
/// oldest (its sandbox's; pods never share one), ties to the first pod.
/// Each pod keeps only the namespaces it was given; returns each pod's
/// sandbox namespace (the oldest it was given) and its oldest process, by
/// inode, to look its id up through.
pub fn assign(pods: &mut [PodNamespaces]) -> BTreeMap<u64, u32> {
    let mut owners: BTreeMap<u64, (Oldest, usize)> = BTreeMap::new();
    for (n, p) in pods.iter().enumerate() {
        for (ino, oldest) in &p.inos {
            let at = owners.entry(*ino).or_insert((*oldest, n));
            *at = (*at).min((*oldest, n));
        }
    }
    for (n, p) in pods.iter_mut().enumerate() {
        p.inos.retain(|(ino, _)| owners.get(ino).is_some_and(|(_, owner)| *owner == n));
    }
    // Only each pod's sandbox namespace (its oldest) is judged, so only
    // those are looked up: a pod that makes many costs one lookup.
    pods.iter()
        .filter_map(|p| p.inos.iter().min_by_key(|(_, oldest)| *oldest))
        .map(|(ino, (_, pid))| (*ino, *pid))
        .collect()
}

/// A pod's namespaces once their ids were looked up (`nsids`: each
/// namespace looked up, by inode, with the id it has in the node's, if
/// any; a namespace missing from it could not be looked up): its oldest
/// must have been, and is the one it is judged by.
pub fn resolve(p: &mut PodNamespaces, nsids: &BTreeMap<u64, Option<i32>>) {
    let NetnsProbe::Own { nsids: ids } = &mut p.probe else { return };
    p.inos.sort_by_key(|(_, oldest)| *oldest);
    match p.inos.first().map(|(ino, _)| nsids.contains_key(ino)) {
        // The sandbox's only: it is the one judged (`map::pods_on_pairs`).
        Some(true) => *ids = p.inos.first().and_then(|(i, _)| nsids.get(i).copied().flatten()).into_iter().collect(),
        Some(false) => p.probe = NetnsProbe::Unreadable("its netns id could not be looked up".into()),
        None => p.probe = NetnsProbe::Unreadable("its processes are only in other pods' network namespaces".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const HOST: u64 = 4026531840;
    const HZ: u64 = 100;

    fn at(pid: u32, ino: u64, ticks: u64) -> ProcessNs {
        ProcessNs::In { pid, ino, ticks: Some(ticks) }
    }

    fn container(id: u64, path: &str) -> ContainerCgroup {
        ContainerCgroup { cgroup: path.into(), cgroup_id: id, effective: Arc::default() }
    }

    /// The sandbox's namespace is the pod's even when it has 70 more, one
    /// per process of a container: those of its oldest processes are read.
    #[test]
    fn seventy_namespaces_do_not_hide_the_sandboxs() {
        let mut seen = vec![at(100, 7000, 10)];
        seen.extend((0..70).map(|i| at(200 + i, 8000 + u64::from(i), 500 + u64::from(i))));
        let p = of_pod(&seen, HOST, Some(1_000), HZ);
        assert_eq!(p.inos.len(), NAMESPACES_MAX);
        assert_eq!(p.inos[0], (7000, (10, 100)), "the sandbox's first");
        assert_eq!(p.probe, NetnsProbe::Own { nsids: vec![] });
        assert_eq!(p.started, Some(1_000), "its oldest process, in seconds after boot");
    }

    /// A container that makes 1,000 cgroups below its own and a process in
    /// each cannot crowd the sandbox out of the processes read: the runtime's
    /// containers come first, each with its share.
    #[test]
    fn a_container_with_many_cgroups_below_its_own_does_not_crowd_out_the_sandbox() {
        let mut containers = vec![container(50, "/kubepods/podu/app"), container(40, "/kubepods/podu/sandbox")];
        containers.extend((0..1000).map(|i| container(1000 + i, &format!("/kubepods/podu/app/c{i}"))));
        let pod = PodCgroup {
            cgroup: "/kubepods/podu".into(),
            cgroup_id: 30,
            pod_uid: "u".into(),
            effective: Arc::default(),
            containers,
        };
        let (cgroups, share) = cgroups_to_read(&pod);
        assert_eq!(cgroups[0], (40, "/kubepods/podu/sandbox"));
        assert_eq!(cgroups[1], (50, "/kubepods/podu/app"));
        assert_eq!(cgroups.len(), CGROUPS_READ + 1);
        assert_eq!(cgroups.last(), Some(&(30, "/kubepods/podu")), "and the pod's own");
        assert_eq!(share, 1);
    }

    /// A process of pod B put into pod A's namespace: the namespace stays
    /// A's (A's sandbox is older there), and B is judged by its own.
    #[test]
    fn a_process_put_into_another_pods_namespace_does_not_make_it_its_own() {
        let a = of_pod(&[at(10, 7000, 5)], HOST, None, HZ);
        let b = of_pod(&[at(20, 7100, 8), at(21, 7000, 900)], HOST, None, HZ);
        let mut pods = [a, b];
        let lookups = assign(&mut pods);
        assert_eq!(lookups, BTreeMap::from([(7000, 10), (7100, 20)]), "each through its oldest process");
        // A pod with many namespaces: its sandbox's only is looked up.
        let mut many = [of_pod(&[at(10, 7000, 5), at(11, 7001, 50), at(12, 7002, 60)], HOST, None, HZ)];
        assert_eq!(assign(&mut many), BTreeMap::from([(7000, 10)]));
        assert_eq!(pods[0].inos, [(7000, (5, 10))]);
        assert_eq!(pods[1].inos, [(7100, (8, 20))]);
        // With only the borrowed namespace, B has none of its own.
        let mut pods = [of_pod(&[at(10, 7000, 5)], HOST, None, HZ), of_pod(&[at(21, 7000, 900)], HOST, None, HZ)];
        let lookups = assign(&mut pods);
        resolve(&mut pods[1], &lookups.keys().map(|&i| (i, Some(3))).collect());
        assert_eq!(
            pods[1].probe,
            NetnsProbe::Unreadable("its processes are only in other pods' network namespaces".into())
        );
    }

    /// A namespace whose process exited between the listing and the id
    /// lookup is left out; the pod is read by the rest. Only its oldest
    /// failing makes it unreadable.
    #[test]
    fn a_namespace_gone_before_its_lookup_is_left_out() {
        let mut p = of_pod(&[at(10, 7000, 5), at(11, 7001, 50)], HOST, None, HZ);
        resolve(&mut p, &BTreeMap::from([(7000, Some(4))]));
        assert_eq!(p.probe, NetnsProbe::Own { nsids: vec![4] });
        let mut p = of_pod(&[at(10, 7000, 5), at(11, 7001, 50)], HOST, None, HZ);
        resolve(&mut p, &BTreeMap::from([(7001, Some(5))]));
        assert_eq!(p.probe, NetnsProbe::Unreadable("its netns id could not be looked up".into()));
        // Looked up, with no id: nothing of the node leads there.
        let mut p = of_pod(&[at(10, 7000, 5)], HOST, None, HZ);
        resolve(&mut p, &BTreeMap::from([(7000, None)]));
        assert_eq!(p.probe, NetnsProbe::Own { nsids: vec![] });
    }

    #[test]
    fn a_pod_on_the_nodes_network_only_is_host_network_and_one_with_its_own_is_judged_by_it() {
        assert_eq!(of_pod(&[at(10, HOST, 5)], HOST, None, HZ).probe, NetnsProbe::Host);
        let joined = of_pod(&[at(10, 7000, 5), at(11, HOST, 9)], HOST, None, HZ);
        assert_eq!(joined.probe, NetnsProbe::Own { nsids: vec![] });
        assert_eq!(of_pod(&[ProcessNs::Gone], HOST, None, HZ).probe, NetnsProbe::NoProcess);
        let failed = of_pod(&[ProcessNs::Gone, ProcessNs::Failed("stat: EACCES".into())], HOST, None, HZ);
        assert_eq!(failed.probe, NetnsProbe::Unreadable("stat: EACCES".into()));
    }
}
