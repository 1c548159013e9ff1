//! Pure rules: a `Snapshot` in, findings out. Each finding says what is wrong
//! in plain words and what to do about it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::attribution::{Attribution, attribute};
use crate::bpf::{AttachType, BpfCommand};
use crate::cgroup::RootKind;
pub use crate::owner::Policy;
use crate::owner::{Cni, Owner, claimed_owner, classify, intended_hook};
use crate::snapshot::{Attachment, Change, MountTop, ProcessRef, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Kind {
    SocketLbBelowRoot,
    SocketLbMissingAtRoot,
    PodsWithoutSocketLb,
    CgroupMountNotRoot,
    DefunctLink,
    CniAgentPrivateCgroupns,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// What findings of this kind mean, for a group of them.
    pub fn explanation(self) -> &'static str {
        match self {
            Kind::SocketLbBelowRoot => {
                "these socket-LB programs are attached to this cgroup, not the root: only sockets of processes in it are load-balanced, every other pod on the node bypasses them and its connections to Service IPs are not translated."
            }
            Kind::SocketLbMissingAtRoot => {
                "the CNI's socket-LB programs for these hooks are attached on the node or pinned in its bpffs, but not attached at the root cgroup, so pods do not get them while the agent may still report socket LB as enabled."
            }
            Kind::PodsWithoutSocketLb => "these pods have no CNI connect program in effect on their cgroup.",
            Kind::CgroupMountNotRoot => {
                "these cgroup2 mounts are rooted below the hierarchy root: they were made from inside a private cgroup namespace."
            }
            Kind::DefunctLink => "these bpf_links point at cgroups that no longer exist: their programs run nowhere.",
            Kind::CniAgentPrivateCgroupns => {
                "these CNI agents run in a cgroup namespace other than PID 1's: a cgroup2 mount they make is rooted at their own cgroup."
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    pub cgroup: Option<String>,
    pub attach_type: Option<AttachType>,
    pub prog_id: Option<u32>,
    pub prog_name: Option<String>,
    pub owner: Option<Owner>,
    pub link_id: Option<u32>,
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    pub runtime: Option<&'static str>,
    pub qos: Option<&'static str>,
    pub processes: Vec<ProcessRef>,
    /// How many things the finding covers (pods for pods_without_socket_lb).
    pub count: Option<u64>,
    /// The mount point, for cgroup_mount_not_root.
    pub mount_point: Option<String>,
    /// The process whose bpf() call made this attachment, when the daemon's
    /// event tracing saw it (always null for one-shot audits).
    pub attached_by: Option<Actor>,
    pub message: String,
    pub remediation: String,
}

impl Finding {
    fn new(kind: Kind, severity: Severity, message: String, remediation: String) -> Finding {
        Finding {
            kind,
            severity,
            cgroup: None,
            attach_type: None,
            prog_id: None,
            prog_name: None,
            owner: None,
            link_id: None,
            pod_uid: None,
            container_id: None,
            runtime: None,
            qos: None,
            processes: Vec::new(),
            count: None,
            mount_point: None,
            attached_by: None,
            message,
            remediation,
        }
    }

    fn at_cgroup(mut self, cgroup: &str, snap: &Snapshot) -> Finding {
        let Attribution { pod_uid, container_id, runtime, qos, .. } = attribute(cgroup);
        self.cgroup = Some(cgroup.to_owned());
        self.pod_uid = pod_uid;
        self.container_id = container_id;
        self.runtime = runtime;
        self.qos = qos;
        self.processes = snap.processes.get(cgroup).cloned().unwrap_or_default();
        self
    }
}

/// Who made an attachment, from a traced bpf() call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub pid: u32,
    pub comm: String,
    pub command: BpfCommand,
    /// When the call was made, in milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    /// The caller's cgroup, relative to the audited root when inside it.
    pub cgroup: Option<String>,
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
}

/// The latest attach call that made this attachment: the same cgroup, hook
/// and program.
fn actor(snap: &Snapshot, a: &Attachment) -> Option<Actor> {
    let e = snap.events.iter().rev().find(|e| {
        matches!(e.change, Change::BpfCall { command, cgroup_id, attach_type, prog_id, .. }
            if command.attaches() && cgroup_id == Some(a.cgroup_id) && attach_type == Some(a.attach_type)
                && prog_id.is_none_or(|p| p == a.prog_id))
    })?;
    let cgroup = snap.cgroup_paths.get(&e.caller_cgroup_id).cloned();
    let who = cgroup.as_deref().map(attribute).unwrap_or_default();
    Some(Actor {
        pid: e.pid,
        comm: e.comm.clone(),
        command: e.change.command()?,
        time_unix_ms: e.time_unix_ms,
        cgroup,
        pod_uid: who.pod_uid,
        container_id: who.container_id,
    })
}

/// Owner of an attached program.
pub fn owner_of(snap: &Snapshot, prog_id: u32, attach_type: Option<AttachType>, policy: &Policy) -> Owner {
    match snap.programs.get(&prog_id) {
        Some(p) => classify(&p.name, p.prog_type, attach_type, policy),
        None => Owner::Unknown,
    }
}

fn prog_name(snap: &Snapshot, id: u32) -> String {
    snap.programs.get(&id).map_or_else(
        || format!("prog {id} (unloaded)"),
        |p| if p.name.is_empty() { format!("prog {id}") } else { p.name.clone() },
    )
}

const REMOUNT_FIX: &str = "The CNI agent attached through a cgroup2 mount rooted at its own container (it runs in a private cgroup namespace). \
Remount cgroup2 at the CNI's path from PID 1's namespaces and detach what landed below the root \
(`agent remount --apply --detach-misattached --unpin-stale-links`), \
keep Cilium's `cgroup.autoMount.enabled=true` with `cgroup.hostRoot=/run/cilium/cgroupv2`, then restart the CNI agent pod on this node so it re-attaches at the root.";

fn where_(a: &Attribution, cgroup: &str) -> String {
    match (&a.pod_uid, &a.container_id) {
        (Some(p), Some(c)) => format!("container {} of pod {p}", &c[..c.len().min(12)]),
        (Some(p), None) => format!("pod {p}"),
        _ => format!("cgroup {cgroup}"),
    }
}

fn below_root(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    for a in &snap.attachments {
        if a.cgroup_id == snap.root.cgroup_id || !a.attach_type.is_socket_lb() {
            continue;
        }
        let owner = owner_of(snap, a.prog_id, Some(a.attach_type), policy);
        if owner.is_benign() {
            continue;
        }
        let name = prog_name(snap, a.prog_id);
        let attribution = attribute(&a.cgroup);
        let place = where_(&attribution, &a.cgroup);
        let mut message = format!(
            "{name} ({owner}, prog {id}) is attached to {t} on {place}, not on the root cgroup. Only sockets of processes in that cgroup \
             run it; every other pod on this node bypasses {owner} socket load balancing, so connections to Service IPs from them are not translated.",
            owner = owner.as_str(),
            id = a.prog_id,
            t = a.attach_type,
        );
        // A name that claims a benign owner on a hook that owner never uses.
        if let (Owner::Unknown, Some(claimed)) =
            (owner, snap.programs.get(&a.prog_id).and_then(|p| claimed_owner(&p.name)))
            && claimed.is_benign()
        {
            let p = &snap.programs[&a.prog_id];
            message.push_str(&format!(
                " Its name claims {claimed}, but {claimed} attaches no {} program to {}: a name is chosen by whoever loads the program.",
                p.prog_type,
                a.attach_type,
                claimed = if p.name.is_empty() { "a container runtime (unnamed)".to_owned() } else { claimed.as_str().to_owned() },
            ));
        }
        let remediation = if owner.is_cni() {
            REMOUNT_FIX.to_owned()
        } else {
            format!(
                "Find what loaded prog {} (`bpftool prog show id {}`); if it is legitimate, allow it with `--allow <name prefix>`.",
                a.prog_id, a.prog_id
            )
        };
        let mut f =
            Finding::new(Kind::SocketLbBelowRoot, Severity::Critical, message, remediation).at_cgroup(&a.cgroup, snap);
        f.attach_type = Some(a.attach_type);
        f.prog_id = Some(a.prog_id);
        f.prog_name = Some(name);
        f.owner = Some(owner);
        f.link_id = a.link_id;
        f.attached_by = actor(snap, a);
        out.push(f);
    }
}

/// Socket-LB hooks each CNI uses: those its programs are attached to
/// anywhere, and those its programs pinned in its bpffs directory are built
/// for (a pinned link whose cgroup is gone, which the CNI reuses on
/// restart). A program merely loaded with a CNI's name says nothing: anyone
/// can load one.
fn cni_hooks(snap: &Snapshot, policy: &Policy) -> BTreeMap<Owner, BTreeSet<AttachType>> {
    let mut hooks: BTreeMap<Owner, BTreeSet<AttachType>> = BTreeMap::new();
    for a in snap.attachments.iter().filter(|a| a.attach_type.is_socket_lb()) {
        let owner = owner_of(snap, a.prog_id, Some(a.attach_type), policy);
        if owner.is_cni() {
            hooks.entry(owner).or_default().insert(a.attach_type);
        }
    }
    for pin in &snap.cni_pins {
        let Some(p) = snap.programs.get(&pin.prog_id) else { continue };
        let owner = classify(&p.name, p.prog_type, None, policy);
        if let (true, Some(hook)) = (owner == pin.cni.owner(), intended_hook(&p.name)) {
            hooks.entry(owner).or_default().insert(hook);
        }
    }
    hooks
}

fn missing_at_root(
    snap: &Snapshot,
    policy: &Policy,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    for (owner, types) in hooks {
        for &t in types {
            let at_root = snap.attachments.iter().any(|a| {
                a.cgroup_id == snap.root.cgroup_id
                    && a.attach_type == t
                    && owner_of(snap, a.prog_id, Some(t), policy) == *owner
            });
            if at_root || snap.unsupported_attach_types.contains(&t) {
                continue;
            }
            let message = format!(
                "{o} has {t} socket-LB programs attached on this node or pinned in its bpffs, but none is attached to {t} on the root cgroup: \
                 pods on this node do not get {o}'s {t} load balancing, while the agent may still report socket LB as enabled.",
                o = owner.as_str()
            );
            let mut f = Finding::new(Kind::SocketLbMissingAtRoot, Severity::Critical, message, REMOUNT_FIX.to_owned());
            f.cgroup = Some("/".to_owned());
            f.attach_type = Some(t);
            f.owner = Some(*owner);
            out.push(f);
        }
    }
}

fn pods_without(
    snap: &Snapshot,
    policy: &Policy,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    let connect: Vec<AttachType> = ["connect4", "connect6"].into_iter().filter_map(AttachType::from_name).collect();
    for (owner, types) in hooks {
        if !types.iter().any(|t| connect.contains(t)) {
            continue;
        }
        let lacking: Vec<&str> = snap
            .pods
            .iter()
            .filter(|p| !p.effective_connect.iter().any(|&id| owner_of(snap, id, None, policy) == *owner))
            .map(|p| p.pod_uid.as_str())
            .collect();
        if lacking.is_empty() {
            continue;
        }
        let message = format!(
            "{n} of {total} pods on this node have no {o} connect program in effect (BPF_F_QUERY_EFFECTIVE on their pod cgroup): \
             their connections to ClusterIPs are not load-balanced. Pods: {list}",
            n = lacking.len(),
            total = snap.pods.len(),
            o = owner.as_str(),
            list = lacking.join(", "),
        );
        let mut f = Finding::new(Kind::PodsWithoutSocketLb, Severity::Critical, message, REMOUNT_FIX.to_owned());
        f.owner = Some(*owner);
        f.count = Some(lacking.len() as u64);
        out.push(f);
    }
}

fn mounts_not_root(snap: &Snapshot, out: &mut Vec<Finding>) {
    for m in &snap.mounts {
        let MountTop::Known { cgroup_id, cgroup: Some(cgroup) } = &m.top else { continue };
        if *cgroup_id == snap.root.cgroup_id {
            continue;
        }
        let cni = Cni::from_mount_point(&m.mount_point);
        let severity = if cni.is_some() { Severity::Critical } else { Severity::Warning };
        let message = format!(
            "cgroup2 is mounted at {mp} in PID 1's mount namespace, but the mount's top is cgroup {cgroup} (id {cgroup_id}), not the root: \
             it was mounted from inside a private cgroup namespace. {consequence}",
            mp = m.mount_point.display(),
            consequence = match cni {
                Some(c) => format!(
                    "{c} attaches its socket-LB programs to the top of this mount, so they land on that cgroup instead of the root."
                ),
                None => "Anything that attaches programs through this mount attaches below the root.".to_owned(),
            }
        );
        let remediation = format!(
            "Replace the mount with one made from PID 1's cgroup and mount namespaces: `agent remount --path {mp} --apply` \
             (or `nsenter --cgroup=/proc/1/ns/cgroup --mount=/proc/1/ns/mnt sh -c 'umount {mp} && mount -t cgroup2 none {mp}'`); \
             on Docker hosts consider `\"default-cgroupns-mode\": \"host\"`.",
            mp = m.mount_point.display()
        );
        let mut f = Finding::new(Kind::CgroupMountNotRoot, severity, message, remediation).at_cgroup(cgroup, snap);
        f.mount_point = Some(m.mount_point.display().to_string());
        f.owner = cni.map(Cni::owner);
        out.push(f);
    }
}

fn defunct_links(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    for l in snap.cgroup_links.iter().filter(|l| l.cgroup_id == 0) {
        let t = AttachType::from_kernel(l.attach_type);
        let owner = owner_of(snap, l.prog_id, t, policy);
        if !owner.is_cni() {
            continue;
        }
        let name = prog_name(snap, l.prog_id);
        let message = format!(
            "bpf_link {id} holds {name} ({o}, prog {p}) for {t} on a cgroup that no longer exists: the program runs nowhere. \
             A pinned link like this is reused by the CNI on restart instead of attaching at the root.",
            id = l.link_id,
            o = owner.as_str(),
            p = l.prog_id,
            t = t.map_or("an unknown hook", AttachType::name),
        );
        let remediation = "Remove the stale pin (Cilium: /sys/fs/bpf/cilium/socketlb/links/cgroup/) and restart the CNI agent pod so it attaches a fresh link at the root.".to_owned();
        let mut f = Finding::new(Kind::DefunctLink, Severity::Warning, message, remediation);
        f.attach_type = t;
        f.prog_id = Some(l.prog_id);
        f.prog_name = Some(name);
        f.owner = Some(owner);
        f.link_id = Some(l.link_id);
        out.push(f);
    }
}

fn cni_agents(snap: &Snapshot, out: &mut Vec<Finding>) {
    let Some(reference) = snap.reference_cgroupns else { return };
    for p in snap.cni_processes.iter().filter(|p| p.cgroupns != reference) {
        let whose = if snap.reference_ns_is_pid1 { "PID 1's" } else { "the auditor's (PID 1's could not be read)" };
        let message = format!(
            "{comm} (pid {pid}) runs in cgroup namespace {ns}, not {whose} ({reference}): a cgroup2 mount it makes is rooted at its own cgroup. \
             This is the likely cause of the socket-LB findings above.",
            comm = p.comm,
            pid = p.pid,
            ns = p.cgroupns,
        );
        // Name the cgroup as the other findings do (relative to the audited
        // root) when the walk saw the process; else as /proc shows it.
        let cgroup = snap
            .processes
            .iter()
            .find(|(_, procs)| procs.iter().any(|q| q.pid == p.pid))
            .map_or(p.cgroup.as_str(), |(c, _)| c.as_str());
        let mut f = Finding::new(Kind::CniAgentPrivateCgroupns, Severity::Warning, message, REMOUNT_FIX.to_owned())
            .at_cgroup(cgroup, snap);
        f.processes = vec![ProcessRef { pid: p.pid, comm: p.comm.clone() }];
        f.owner = Some(p.cni.owner());
        out.push(f);
    }
}

/// Applies every rule.
pub fn evaluate(snap: &Snapshot, policy: &Policy) -> Vec<Finding> {
    let mut out = Vec::new();
    below_root(snap, policy, &mut out);
    let hooks = cni_hooks(snap, policy);
    missing_at_root(snap, policy, &hooks, &mut out);
    pods_without(snap, policy, &hooks, &mut out);
    mounts_not_root(snap, &mut out);
    defunct_links(snap, policy, &mut out);
    // A CNI agent in a private cgroupns is normal when its init container
    // mounted cgroup2 from the host's namespaces; it only explains a problem.
    if out.iter().any(|f| f.severity == Severity::Critical) {
        cni_agents(snap, &mut out);
    }
    out.sort_by(|a, b| {
        (a.severity, a.kind, &a.cgroup, a.attach_type, a.prog_id).cmp(&(
            b.severity,
            b.kind,
            &b.cgroup,
            b.attach_type,
            b.prog_id,
        ))
    });
    out
}

/// Whether the audit could see everything it judged.
pub fn complete(snap: &Snapshot) -> bool {
    snap.root.kind != RootKind::Namespaced
}

/// Attachments with their owners, for reports.
pub fn owned<'a>(snap: &'a Snapshot, policy: &'a Policy) -> impl Iterator<Item = (&'a Attachment, Owner)> + 'a {
    snap.attachments.iter().map(move |a| (a, owner_of(snap, a.prog_id, Some(a.attach_type), policy)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::ProgType;
    use crate::bpf::sys::CgroupLinkInfo;
    use crate::fixtures::*;
    use crate::snapshot::{CgroupMount, CniPin, CniProcess, PodCgroup};

    fn kinds(f: &[Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.kind.as_str()).collect()
    }

    #[test]
    fn socket_lb_at_the_root_is_clean() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        s.pods.push(PodCgroup {
            cgroup: POD.into(),
            cgroup_id: 44,
            pod_uid: "f8371831-8021-4722-af27-93c925d25a14".into(),
            effective_connect: vec![10, 11],
        });
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    #[test]
    fn seed_yields_one_critical_finding_per_program_attributed_to_the_container() {
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let below: Vec<&Finding> = f.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        assert_eq!(below.len(), 2);
        for b in below {
            assert_eq!(b.severity, Severity::Critical);
            assert_eq!(b.pod_uid.as_deref(), Some("f8371831-8021-4722-af27-93c925d25a14"));
            assert_eq!(b.container_id.as_deref().map(str::len), Some(64));
            assert_eq!(b.runtime, Some("containerd"));
            assert_eq!(b.owner, Some(Owner::Cilium));
            assert_eq!(b.processes[0].comm, "cilium-agent");
            assert!(b.message.contains("not on the root cgroup"));
        }
        // ...and the root lacks both hooks.
        assert_eq!(f.iter().filter(|f| f.kind == Kind::SocketLbMissingAtRoot).count(), 2);
    }

    #[test]
    fn benign_owners_below_root_are_never_flagged() {
        let mut s = node();
        prog(&mut s, 20, "sd_bind4", ProgType::CgroupSockAddr);
        prog(&mut s, 21, "", ProgType::CgroupDevice);
        prog(&mut s, 22, "cgroup_connect4_prog", ProgType::CgroupSockAddr);
        attach(&mut s, "/system.slice/x.service", 5, "bind4", 20);
        attach(&mut s, CTR, CTR_ID, "device", 21);
        attach(&mut s, CTR, CTR_ID, "connect4", 22);
        let kmesh = Policy { kmesh: true, ..Policy::default() };
        assert!(evaluate(&s, &kmesh).is_empty());
        // Kmesh's programs are its own only where the operator says it runs.
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root"]);
        assert!(f[0].message.contains("Its name claims kmesh"), "{}", f[0].message);
    }

    #[test]
    fn a_benign_name_on_a_socket_hook_is_flagged_and_the_claim_named() {
        let mut s = node();
        prog(&mut s, 23, "sd_lb", ProgType::CgroupSockAddr);
        prog(&mut s, 24, "", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 23);
        attach(&mut s, CTR, CTR_ID, "sendmsg4", 24);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_below_root", "socket_lb_below_root"]);
        assert_eq!(f[0].owner, Some(Owner::Unknown));
        assert!(
            f[0].message
                .contains("Its name claims systemd, but systemd attaches no cgroup_sock_addr program to connect4")
        );
        assert!(f[1].message.contains("a container runtime (unnamed)"), "{}", f[1].message);
    }

    #[test]
    fn allowlist_silences_an_unknown_owner() {
        let mut s = node();
        prog(&mut s, 30, "my_lb_connect4", ProgType::CgroupSockAddr);
        attach(&mut s, CTR, CTR_ID, "connect4", 30);
        assert_eq!(kinds(&evaluate(&s, &Policy::default())), ["socket_lb_below_root"]);
        assert!(evaluate(&s, &Policy { allow: vec!["my_lb".into()], ..Policy::default() }).is_empty());
    }

    #[test]
    fn a_cni_program_merely_loaded_says_nothing_one_pinned_by_the_cni_does() {
        let mut s = node();
        prog(&mut s, 40, "cil_sock4_sendm", ProgType::CgroupSockAddr);
        assert!(evaluate(&s, &Policy::default()).is_empty(), "anyone can load a program with Cilium's name");
        s.cni_pins.push(CniPin {
            cni: Cni::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock4_sendmsg".into(),
            prog_id: 40,
            link_id: Some(7),
        });
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_missing_at_root"]);
        assert_eq!(f[0].attach_type, Some(at("sendmsg4")));
    }

    #[test]
    fn unsupported_hook_is_not_reported_missing() {
        let mut s = node();
        prog(&mut s, 41, "cil_sock_release", ProgType::CgroupSock);
        s.cni_pins.push(CniPin {
            cni: Cni::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock_release".into(),
            prog_id: 41,
            link_id: None,
        });
        s.unsupported_attach_types.push(at("sock_release"));
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    #[test]
    fn pods_without_effective_connect_are_counted() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        for (i, eff) in [vec![10, 11], vec![], vec![99]].into_iter().enumerate() {
            s.pods.push(PodCgroup {
                cgroup: format!("/kubepods/pod{i}"),
                cgroup_id: 100 + i as u64,
                pod_uid: format!("uid-{i}"),
                effective_connect: eff,
            });
        }
        prog(&mut s, 99, "other", ProgType::CgroupSockAddr);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["pods_without_socket_lb"]);
        assert_eq!(f[0].count, Some(2));
        assert!(f[0].message.contains("uid-1") && f[0].message.contains("uid-2"));
    }

    #[test]
    fn cni_mount_below_root_is_critical_and_outside_the_tree_is_ignored() {
        let mut s = node();
        let mount = |mp: &str, id: u64, cgroup: Option<&str>| CgroupMount {
            mount_point: mp.into(),
            mountinfo_root: "/".into(),
            top: MountTop::Known { cgroup_id: id, cgroup: cgroup.map(str::to_owned) },
        };
        s.mounts = vec![
            mount("/sys/fs/cgroup", 1, Some("/")),
            mount("/run/cilium/cgroupv2", CTR_ID, Some(CTR)),
            mount("/mnt/elsewhere", 77, Some("/system.slice")),
            mount("/run/calico/cgroup", 999, None),
        ];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cgroup_mount_not_root", "cgroup_mount_not_root"]);
        assert_eq!(
            (f[0].severity, f[0].cgroup.as_deref(), f[0].owner),
            (Severity::Critical, Some(CTR), Some(Owner::Cilium))
        );
        assert_eq!((f[1].severity, f[1].cgroup.as_deref()), (Severity::Warning, Some("/system.slice")));
    }

    #[test]
    fn defunct_link_is_reported_only_for_cni_programs() {
        let mut s = node();
        prog(&mut s, 50, "cil_sock4_connect", ProgType::CgroupSockAddr);
        prog(&mut s, 51, "sd_fw_ingress", ProgType::CgroupSkb);
        attach(&mut s, "/", 1, "connect4", 50);
        s.cgroup_links = vec![
            CgroupLinkInfo { link_id: 5, prog_id: 50, cgroup_id: 0, attach_type: at("connect4").kernel_value() },
            CgroupLinkInfo { link_id: 6, prog_id: 51, cgroup_id: 0, attach_type: at("ingress").kernel_value() },
        ];
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["defunct_link"]);
        assert_eq!((f[0].link_id, f[0].severity), (Some(5), Severity::Warning));
    }

    #[test]
    fn cni_agent_in_private_cgroupns_is_named_only_as_a_cause() {
        let mut s = node();
        let agent =
            CniProcess { pid: 7, cni: Cni::Cilium, comm: "cilium-agent".into(), cgroupns: 200, cgroup: "/x".into() };
        s.cni_processes.push(agent);
        cilium_connect(&mut s, "/", 1);
        assert!(evaluate(&s, &Policy::default()).is_empty(), "normal when socket LB is at the root");

        let mut s = node();
        s.cni_processes.push(CniProcess {
            pid: 7,
            cni: Cni::Cilium,
            comm: "cilium-agent".into(),
            cgroupns: 200,
            cgroup: "/abs/path".into(),
        });
        cilium_connect(&mut s, CTR, CTR_ID);
        s.processes.insert(CTR.into(), vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]);
        let f = evaluate(&s, &Policy::default());
        let cause = f.iter().find(|f| f.kind == Kind::CniAgentPrivateCgroupns).expect("named as the cause");
        assert_eq!(cause.cgroup.as_deref(), Some(CTR), "the walk's path, not /proc's");
        assert!(cause.message.contains("PID 1's"));

        // Same namespace as PID 1: not a cause.
        s.cni_processes[0].cgroupns = 100;
        assert!(evaluate(&s, &Policy::default()).iter().all(|f| f.kind != Kind::CniAgentPrivateCgroupns));
    }
}
