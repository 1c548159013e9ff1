//! `pods_without_socket_lb`: pods whose processes make sockets where none
//! of the CNI's socket-LB programs is in effect, on a hook it uses (connect,
//! sendmsg/recvmsg, getpeername): their connections to Service IPs are not
//! translated.
//!
//! Judged where the processes are: in each container's leaf cgroup (a
//! program attached between the pod and the container, or at the container,
//! replaces an override parent's there), or at the pod's own cgroup when no
//! leaf of it holds processes.

use serde::Serialize;

use super::*;
use std::collections::HashMap;

use crate::coverage;
use crate::snapshot::PodCgroup;
use crate::snapshot::{Effective, Shared};

pub(super) const EXPLANATION: &str = "these pods make sockets where no CNI socket-LB program is in effect: their connections to Service IPs are not translated.";

/// A pod with processes outside the CNI's socket LB, for scripts: who it
/// is and where, by hook, nothing of the CNI's is in effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncoveredPod {
    pub uid: String,
    /// As the node's runtime or kubelet logs name it (`null`: not found).
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub cgroup: String,
    /// Hooks with none of the CNI's programs in effect at the pod's own
    /// cgroup (what its containers inherit unless something is attached
    /// below it).
    pub hooks: Vec<AttachType>,
    /// Its containers (leaf cgroups holding processes) with hooks lacking;
    /// empty when none of its leaves holds processes (the pod's own cgroup
    /// is judged then).
    pub containers: Vec<UncoveredContainer>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncoveredContainer {
    /// From the cgroup path, when it names one.
    pub id: Option<String>,
    pub name: Option<String>,
    pub cgroup: String,
    pub hooks: Vec<AttachType>,
}

/// The programs of one owner on each hook judged: classified once per
/// judgement from the node's programs (tens), not once per container
/// (thousands, each judged again on every change in the daemon); and what
/// each distinct effective set lacks, worked out once per set (cgroups
/// share their set when it is the same: `snapshot::Shared`).
struct OwnerPrograms(Vec<(AttachType, Vec<u32>)>, HashMap<*const Effective, Vec<AttachType>>);

impl OwnerPrograms {
    /// A program is in effect somewhere only when it is attached on that
    /// hook somewhere: the owner's are its proven attachments.
    fn new(cx: &Ctx<'_>, owner: Owner, hooks: &[AttachType]) -> OwnerPrograms {
        let mut ids: Vec<(AttachType, Vec<u32>)> = hooks.iter().map(|&t| (t, Vec::new())).collect();
        for (a, _) in cx.attachments().filter(|(_, o)| o.owner == owner) {
            if let Some((_, v)) = ids.iter_mut().find(|(t, _)| *t == a.attach_type) {
                v.push(a.prog_id);
            }
        }
        OwnerPrograms(ids, HashMap::new())
    }

    /// The hooks on which none of the owner's programs is in `effective`.
    /// (The address is a key only while the snapshot, which holds every
    /// set, is borrowed: no set is freed or made meanwhile.)
    fn lacking(&mut self, effective: &Shared) -> &[AttachType] {
        let OwnerPrograms(owned, memo) = self;
        memo.entry(std::sync::Arc::as_ptr(effective)).or_insert_with(|| {
            owned
                .iter()
                .filter(|(t, ids)| !effective.get(t).is_some_and(|e| e.iter().any(|id| ids.contains(id))))
                .map(|(t, _)| *t)
                .collect()
        })
    }
}

/// The cgroups with programs of their own on a hook judged: where a
/// container's programs can differ from its pod's.
struct OwnPrograms<'a> {
    /// Their paths, sorted.
    paths: Vec<&'a str>,
    /// The length of the longest.
    longest: usize,
}

impl<'a> OwnPrograms<'a> {
    fn new(snap: &'a Snapshot, hooks: &[AttachType]) -> OwnPrograms<'a> {
        let mut own: Vec<&str> =
            snap.attachments.iter().filter(|a| hooks.contains(&a.attach_type)).map(|a| a.cgroup.as_str()).collect();
        own.sort_unstable();
        own.dedup();
        let longest = own.iter().map(|p| p.len()).max().unwrap_or(0);
        OwnPrograms { paths: own, longest }
    }

    /// Whether some cgroup below `pod` has programs of its own on a hook
    /// judged. If none has, each of its containers runs exactly the pod's
    /// programs (a cgroup with none of its own on a hook passes its
    /// parent's on: the kernel's `compute_effective_progs`), and is judged
    /// as the pod is without reading its own set: on a node of 50,000
    /// cgroups that reading was a third of the daemon's CPU under churn.
    fn below(&self, pod: &str) -> bool {
        // Nothing that short is below a path this long (and its text is
        // not read: on the common node, programs only at the root).
        if pod.len() >= self.longest {
            return false;
        }
        let from = self.paths.partition_point(|q| *q < pod);
        self.paths[from..].iter().take_while(|q| q.starts_with(pod)).any(|q| q.as_bytes().get(pod.len()) == Some(&b'/'))
    }
}

/// How one pod fares under an owner's socket LB; `None` when every place
/// its processes are has the CNI's programs in effect.
fn uncovered(snap: &Snapshot, owned: &mut OwnerPrograms, own: &OwnPrograms, pod: &PodCgroup) -> Option<UncoveredPod> {
    let at_pod = owned.lacking(&pod.effective).to_vec();
    let inherited = !own.below(&pod.cgroup);
    if inherited && at_pod.is_empty() {
        return None; // every container runs the pod's programs, which cover it
    }
    let containers: Vec<UncoveredContainer> = pod
        .containers
        .iter()
        .filter_map(|c| {
            let missing = if inherited { at_pod.clone() } else { owned.lacking(&c.effective).to_vec() };
            if missing.is_empty() {
                return None;
            }
            let id = attribute(&c.cgroup).container_id;
            let name = id.as_deref().and_then(|id| snap.names.container(id)).map(str::to_owned);
            Some(UncoveredContainer { id, name, cgroup: c.cgroup.clone(), hooks: missing })
        })
        .collect();
    // Where its processes are: the containers, or the pod's own cgroup.
    let judged_uncovered = if pod.containers.is_empty() { !at_pod.is_empty() } else { !containers.is_empty() };
    if !judged_uncovered {
        return None;
    }
    let named = snap.names.pod(&pod.pod_uid, None);
    Some(UncoveredPod {
        uid: pod.pod_uid.clone(),
        namespace: named.map(|p| p.namespace.clone()),
        name: named.map(|p| p.name.clone()),
        cgroup: pod.cgroup.clone(),
        hooks: at_pod,
        containers,
    })
}

/// One pod for the message: its name, and which containers lack what.
fn described(p: &UncoveredPod, all: usize) -> String {
    let who = match (&p.namespace, &p.name) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        _ => p.uid.clone(),
    };
    if p.containers.is_empty() {
        return who;
    }
    let hooks = |h: &[AttachType]| h.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ");
    let parts: Vec<String> = p
        .containers
        .iter()
        .map(|c| {
            let name = c.name.clone().or_else(|| c.id.as_deref().map(|id| id[..id.len().min(12)].to_owned()));
            format!("{} ({})", name.unwrap_or_else(|| c.cgroup.clone()), hooks(&c.hooks))
        })
        .collect();
    let how = if p.containers.len() < all { "only in container" } else { "container" };
    format!("{who} [{how}{} {}]", if parts.len() == 1 { "" } else { "s" }, parts.join("; "))
}

/// For each socket load balancer (`Owner::balances_sockets`) proven to use
/// `hooks`, the pods without its programs there. Never for a program
/// nobody is proven to own.
pub(super) fn pods_without(cx: &Ctx<'_>, hooks: &BTreeMap<Owner, BTreeSet<AttachType>>, out: &mut Vec<Finding>) {
    let snap = cx.snap;
    for (owner, types) in hooks.iter().filter(|(o, _)| o.balances_sockets()) {
        let judged: Vec<AttachType> = types.iter().copied().filter(|t| coverage::is_coverage_hook(*t)).collect();
        if judged.is_empty() {
            continue;
        }
        let mut owned = OwnerPrograms::new(cx, *owner, &judged);
        let own = OwnPrograms::new(snap, &judged);
        let pods: Vec<(usize, UncoveredPod)> = snap
            .pods
            .iter()
            .filter_map(|p| Some((p.containers.len(), uncovered(snap, &mut owned, &own, p)?)))
            .collect();
        if pods.is_empty() {
            continue;
        }
        let partly = pods.iter().filter(|(n, p)| !p.containers.is_empty() && p.containers.len() < *n).count();
        let message = format!(
            "{n} of {total} pods on this node make sockets where no {o} socket-LB program is in effect for {hooks} \
             (judged in each container's cgroup, where its processes are){partly}: their connections to Service IPs \
             are not translated. Pods: {list}",
            n = pods.len(),
            total = snap.pods.len(),
            o = owner.title(),
            hooks = judged.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
            partly = if partly > 0 { format!("; {partly} of them only in some containers") } else { String::new() },
            list = pods.iter().map(|(n, p)| described(p, *n)).collect::<Vec<_>>().join(", "),
        );
        let mut f = Finding::new(Kind::PodsWithoutSocketLb, Severity::Critical, message, fix_for(snap, Some(*owner)));
        f.owner = Some(*owner);
        f.count = Some(pods.len() as u64);
        f.pods = pods.into_iter().map(|(_, p)| p).collect();
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::AttachFlags;
    use crate::findings::tests::*;
    use crate::snapshot::ContainerCgroup;

    fn eff(ids: &[u32]) -> Effective {
        ["connect4", "connect6"].iter().map(|h| (AttachType::from_name(h).unwrap(), ids.to_vec())).collect()
    }

    fn uid(i: usize) -> String {
        format!("0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0{i}")
    }

    fn pod(i: usize, at_pod: &[u32], containers: &[&[u32]]) -> PodCgroup {
        PodCgroup {
            cgroup: format!("/kubepods/burstable/pod{}", uid(i)),
            cgroup_id: 100 + i as u64,
            pod_uid: uid(i),
            effective: eff(at_pod).into(),
            containers: containers
                .iter()
                .enumerate()
                .map(|(j, ids)| ContainerCgroup {
                    cgroup: format!("/kubepods/burstable/pod{}/{}", uid(i), format!("{j}").repeat(64)),
                    cgroup_id: 1000 + j as u64,
                    effective: eff(ids).into(),
                })
                .collect(),
        }
    }

    fn node_with_lb() -> Snapshot {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        prog(&mut s, 99, "other", crate::bpf::ProgType::CgroupSockAddr);
        s
    }

    #[test]
    fn pods_are_judged_where_their_processes_are() {
        let mut s = node_with_lb();
        s.pods = vec![
            pod(0, &[10, 11], &[&[10, 11]]),        // covered everywhere
            pod(1, &[], &[]),                       // no processes below: its own cgroup lacks
            pod(2, &[99], &[]),                     // another program replaced the CNI's
            pod(3, &[10, 11], &[&[10, 11], &[99]]), // one container's program replaced it
        ];
        let ctr = s.pods[3].containers[1].clone();
        attach(&mut s, &ctr.cgroup, ctr.cgroup_id, "connect4", 99);
        attach(&mut s, &ctr.cgroup, ctr.cgroup_id, "connect6", 99);
        let all = evaluate(&s, &Policy::default());
        // The program at the container is also one below the root: nobody's
        // proven, so a warning, after the critical.
        assert_eq!(kinds(&all), ["pods_without_socket_lb", "socket_lb_below_root"]);
        let f: Vec<Finding> = all.into_iter().filter(|f| f.kind == Kind::PodsWithoutSocketLb).collect();
        assert_eq!(f[0].count, Some(3));
        let uids: Vec<&str> = f[0].pods.iter().map(|p| p.uid.as_str()).collect();
        assert_eq!(uids, [uid(1), uid(2), uid(3)]);
        let partly = &f[0].pods[2];
        assert!(partly.hooks.is_empty(), "covered at the pod's own cgroup");
        assert_eq!(partly.containers.len(), 1, "the container that lacks it, named: {partly:?}");
        assert_eq!(partly.containers[0].hooks.iter().map(|t| t.name()).collect::<Vec<_>>(), ["connect4", "connect6"]);
        assert!(f[0].message.contains("1 of them only in some containers"), "{}", f[0].message);
        let expect = format!("{} [only in container 111111111111 (connect4, connect6)]", uid(3));
        assert!(f[0].message.contains(&expect), "{}", f[0].message);
        assert_eq!(partly.containers[0].id.as_deref(), Some("1".repeat(64).as_str()));
    }

    #[test]
    fn a_program_between_the_pod_and_its_container_is_seen() {
        let mut s = node_with_lb();
        let mut p = pod(0, &[10, 11], &[&[99]]);
        // The container two levels down; the program on the level between.
        let sub = format!("{}/sub", p.cgroup);
        p.containers[0].cgroup = format!("{sub}/ctr");
        s.pods = vec![p];
        attach(&mut s, &sub, 7, "connect4", 99);
        attach(&mut s, &sub, 7, "connect6", 99);
        // A sibling whose name only begins like the pod's changes nothing.
        let mut q = pod(1, &[10, 11], &[&[10, 11]]);
        q.cgroup = format!("{}x", s.pods[0].cgroup);
        s.pods.push(q);
        let f = evaluate(&s, &Policy::default());
        let uncovered = f.iter().find(|f| f.kind == Kind::PodsWithoutSocketLb).expect("finding");
        assert_eq!(uncovered.pods.len(), 1, "{uncovered:?}");
        assert_eq!(uncovered.pods[0].containers[0].cgroup, format!("{sub}/ctr"));
    }

    #[test]
    fn every_hook_the_cni_uses_counts_not_only_connect() {
        let mut s = node_with_lb();
        prog(&mut s, 12, "cil_sock4_sendmsg", crate::bpf::ProgType::CgroupSockAddr);
        attach(&mut s, "/", 1, "sendmsg4", 12);
        agent(&mut s, Owner::Cilium).holds.push(12);
        s.attachments.last_mut().unwrap().attach_flags = AttachFlags::Multi;
        s.pods = vec![pod(0, &[10, 11], &[&[10, 11]])];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["pods_without_socket_lb"], "connect in effect, sendmsg4 not");
        assert_eq!(f[0].pods[0].containers[0].hooks.iter().map(|t| t.name()).collect::<Vec<_>>(), ["sendmsg4"]);
    }

    #[test]
    fn the_pods_are_in_the_json_for_scripts() {
        let mut s = node_with_lb();
        s.pods = vec![pod(1, &[], &[])];
        let f = evaluate(&s, &Policy::default());
        let json = serde_json::to_value(&f[0]).unwrap();
        assert_eq!(json["pods"][0]["uid"], uid(1));
        assert_eq!(json["pods"][0]["cgroup"], format!("/kubepods/burstable/pod{}", uid(1)));
        assert_eq!(json["pods"][0]["hooks"], serde_json::json!(["connect4", "connect6"]));
        assert_eq!(json["pods"][0]["containers"], serde_json::json!([]));
    }
}
