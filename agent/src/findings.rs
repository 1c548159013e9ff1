//! Pure rules: a `Snapshot` in, findings out. Each finding says what is wrong
//! in plain words and what to do about it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::attribution::{Attribution, attribute};
use crate::bpf::{AttachType, BpfCommand};
use crate::cgroup::RootKind;
pub use crate::owner::Policy;
use crate::owner::{Cni, Owner, claimed_owner, classify, intended_hook};
use crate::snapshot::{Attachment, Change, MountTop, NamesWanted, ProcessRef, Snapshot, SocketLb};

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
    DuplicateCniPrograms,
    HookProgramCountHigh,
    SocketLbConfiguredNotAttached,
    CniLeftoverPrograms,
    ForeignProgramOnCniHook,
    CgroupV1NetControllerConflict,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The severities findings of this kind can have (each is a metric
    /// series, exported as 0 while absent).
    pub fn severities(self) -> &'static [Severity] {
        match self {
            Kind::SocketLbBelowRoot
            | Kind::SocketLbMissingAtRoot
            | Kind::PodsWithoutSocketLb
            | Kind::SocketLbConfiguredNotAttached
            | Kind::CgroupV1NetControllerConflict => &[Severity::Critical],
            Kind::CgroupMountNotRoot | Kind::DuplicateCniPrograms | Kind::HookProgramCountHigh => {
                &[Severity::Critical, Severity::Warning]
            }
            Kind::DefunctLink
            | Kind::CniAgentPrivateCgroupns
            | Kind::CniLeftoverPrograms
            | Kind::ForeignProgramOnCniHook => &[Severity::Warning],
        }
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
            Kind::DuplicateCniPrograms => {
                "more than one copy of the same CNI program is attached to one cgroup and hook: every copy runs for every socket, and the older ones are usually leftovers of a restart or upgrade."
            }
            Kind::HookProgramCountHigh => {
                "these hooks hold close to the kernel's limit of 64 programs per cgroup and hook; at the limit the next attach fails with E2BIG (\"argument list too long\")."
            }
            Kind::SocketLbConfiguredNotAttached => {
                "the CNI's own configuration turns socket LB on and its agent runs, but none of its socket-LB programs is attached at the root cgroup."
            }
            Kind::CniLeftoverPrograms => {
                "socket-LB programs of a CNI are attached although its agent does not run on this node or its configuration turns socket LB off."
            }
            Kind::ForeignProgramOnCniHook => {
                "at the root cgroup, a program of another or unknown owner is attached to a hook the CNI uses for socket LB."
            }
            Kind::CgroupV1NetControllerConflict => {
                "on kernels before 5.15, using the cgroup v1 net_cls or net_prio controller stops the kernel from matching sockets to their cgroup v2, so correctly attached cgroup-v2 socket programs may not take effect."
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
    /// The pod's namespace and name and the container's name, as the node's
    /// runtime or kubelet logs give them (`null`: not found on the node).
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub container_name: Option<String>,
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
    /// UIDs of the pods a finding covers (pods_without_socket_lb), for
    /// naming them.
    #[serde(skip)]
    pub pods: Vec<String>,
}

impl Finding {
    fn new(kind: Kind, severity: Severity, message: String, remediation: String) -> Finding {
        debug_assert!(kind.severities().contains(&severity), "{kind:?} is never {severity:?}: add it to severities()");
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
            pod_namespace: None,
            pod_name: None,
            container_name: None,
            runtime: None,
            qos: None,
            processes: Vec::new(),
            count: None,
            mount_point: None,
            attached_by: None,
            message,
            remediation,
            pods: Vec::new(),
        }
    }

    fn at_cgroup(mut self, cgroup: &str, snap: &Snapshot) -> Finding {
        let Attribution { pod_uid, container_id, runtime, qos, .. } = attribute(cgroup);
        self.cgroup = Some(cgroup.to_owned());
        let named = pod_uid.as_deref().and_then(|uid| snap.names.pod(uid, container_id.as_deref()));
        self.pod_namespace = named.map(|p| p.namespace.clone());
        self.pod_name = named.map(|p| p.name.clone());
        self.container_name = container_id.as_deref().and_then(|c| snap.names.container(c)).map(str::to_owned);
        // The cgroupfs driver's path names no runtime; the runtime that
        // named the container does.
        let source = container_id.as_deref().and_then(|c| snap.names.containers.get(c)?.as_ref()).map(|c| c.source);
        self.runtime = runtime.or(source.filter(|s| *s != "kubelet logs"));
        self.pod_uid = pod_uid;
        self.container_id = container_id;
        self.qos = qos;
        self.processes = snap.processes.get(cgroup).cloned().unwrap_or_default();
        self
    }
}

/// Who made an attachment, from a traced bpf() call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    /// The event that says so, as numbered in the daemon's `/events`.
    pub event: u64,
    pub pid: u32,
    pub comm: String,
    pub command: BpfCommand,
    /// When the call was made, in milliseconds since the Unix epoch.
    pub time_unix_ms: u64,
    /// The caller's cgroup, relative to the audited root when inside it.
    pub cgroup: Option<String>,
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    pub pod_namespace: Option<String>,
    pub pod_name: Option<String>,
    pub container_name: Option<String>,
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
    let named = who.pod_uid.as_deref().and_then(|uid| snap.names.pod(uid, who.container_id.as_deref()));
    Some(Actor {
        pod_namespace: named.map(|p| p.namespace.clone()),
        pod_name: named.map(|p| p.name.clone()),
        container_name: who.container_id.as_deref().and_then(|c| snap.names.container(c)).map(str::to_owned),
        event: e.seq,
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

/// A pod by name when the node says it, else by UID.
fn pod_named(snap: &Snapshot, uid: &str, container_id: Option<&str>) -> String {
    match snap.names.pod(uid, container_id) {
        Some(p) => format!("{}/{}", p.namespace, p.name),
        None => uid.to_owned(),
    }
}

fn where_(snap: &Snapshot, a: &Attribution, cgroup: &str) -> String {
    let short = |c: &str| c[..c.len().min(12)].to_owned();
    match (&a.pod_uid, &a.container_id) {
        (Some(p), Some(c)) => {
            let container = snap.names.container(c).map_or_else(|| short(c), |n| format!("{n} ({})", short(c)));
            format!("container {container} of pod {}", pod_named(snap, p, Some(c)))
        }
        (Some(p), None) => format!("pod {}", pod_named(snap, p, None)),
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
        let place = where_(snap, &attribution, &a.cgroup);
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
        let named: Vec<String> = lacking.iter().map(|uid| pod_named(snap, uid, None)).collect();
        if lacking.is_empty() {
            continue;
        }
        let message = format!(
            "{n} of {total} pods on this node have no {o} connect program in effect (BPF_F_QUERY_EFFECTIVE on their pod cgroup): \
             their connections to ClusterIPs are not load-balanced. Pods: {list}",
            n = lacking.len(),
            total = snap.pods.len(),
            o = owner.as_str(),
            list = named.join(", "),
        );
        let mut f = Finding::new(Kind::PodsWithoutSocketLb, Severity::Critical, message, REMOUNT_FIX.to_owned());
        f.owner = Some(*owner);
        f.count = Some(lacking.len() as u64);
        f.pods = lacking.iter().map(|&u| u.to_owned()).collect();
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
    for p in snap.cni_processes.iter().filter(|p| p.privileged && p.cgroupns != reference) {
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

/// The kernel's limit of programs per cgroup and hook (BPF_CGROUP_MAX_PROGS).
pub const MAX_HOOK_PROGRAMS: usize = 64;
/// `hook_program_count_high` warns from three quarters of it.
pub const HOOK_PROGRAMS_WARN: usize = MAX_HOOK_PROGRAMS * 3 / 4;

fn place(snap: &Snapshot, cgroup: &str) -> String {
    if cgroup == "/" { "the root cgroup".to_owned() } else { where_(snap, &attribute(cgroup), cgroup) }
}

fn at_root(snap: &Snapshot, a: &Attachment) -> bool {
    a.cgroup_id == snap.root.cgroup_id
}

fn unix_ms_text(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

/// The same CNI program attached more than once to one (cgroup, hook): the
/// same full name (or, unnamed, the same tag) under different program ids.
fn duplicates(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(u64, AttachType, Owner, String), Vec<&Attachment>> = BTreeMap::new();
    for (a, owner) in owned(snap, policy).filter(|(_, o)| o.is_cni()) {
        let Some(p) = snap.programs.get(&a.prog_id) else { continue };
        let function = if p.name.is_empty() { format!("tag {}", p.tag) } else { p.name.clone() };
        groups.entry((a.cgroup_id, a.attach_type, owner, function)).or_default().push(a);
    }
    for ((_, hook, owner, function), copies) in groups {
        let mut copies: Vec<&Attachment> = copies;
        copies.sort_by_key(|a| a.prog_id);
        copies.dedup_by_key(|a| a.prog_id);
        if copies.len() < 2 {
            continue;
        }
        let loaded = |a: &Attachment| snap.programs.get(&a.prog_id).and_then(|p| p.loaded_unix_ms);
        let pin = |a: &Attachment| {
            snap.cni_pins.iter().find(|p| p.prog_id == a.prog_id || (a.link_id.is_some() && p.link_id == a.link_id))
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
            format!("not pinned by {}, which keeps only the current one", owner.as_str())
        } else {
            "older than the newest copy".to_owned()
        };
        let message = format!(
            "{n} copies of {function} ({owner}) are attached to {hook} on {place}: {list}. Every copy runs for every socket; \
             prog {stale} {look} stale ({why_stale}), as a CNI agent restart or upgrade that did not detach its previous programs leaves them.",
            n = copies.len(),
            owner = owner.as_str(),
            place = place(snap, &first.cgroup),
            list = list.join("; "),
            stale = stale.iter().map(u32::to_string).collect::<Vec<_>>().join(", prog "),
            look = if stale.len() == 1 { "looks" } else { "look" },
        );
        let remediation = format!(
            "Detach the stale copies (`bpftool cgroup detach <cgroup> {hook} id <prog>`, or for a link remove its pin), \
             then restart the {owner} agent on this node and check that exactly one copy is attached; upgrade the CNI if it \
             leaves copies on every restart.",
            owner = owner.as_str()
        );
        let severity = if root && hook.is_socket_lb() { Severity::Critical } else { Severity::Warning };
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

/// Programs per (cgroup, hook), for every owner: what a leaking runtime
/// fills up to the kernel's limit.
pub fn hook_counts(snap: &Snapshot) -> BTreeMap<(u64, AttachType), (usize, &str)> {
    let mut counts: BTreeMap<(u64, AttachType), (usize, &str)> = BTreeMap::new();
    for a in &snap.attachments {
        counts.entry((a.cgroup_id, a.attach_type)).or_insert((0, a.cgroup.as_str())).0 += 1;
    }
    counts
}

fn crowded_hooks(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    for ((cgroup_id, hook), (n, cgroup)) in hook_counts(snap) {
        if n < HOOK_PROGRAMS_WARN {
            continue;
        }
        let mut owners: BTreeMap<Owner, usize> = BTreeMap::new();
        for a in snap.attachments.iter().filter(|a| a.cgroup_id == cgroup_id && a.attach_type == hook) {
            *owners.entry(owner_of(snap, a.prog_id, Some(hook), policy)).or_default() += 1;
        }
        let by: Vec<String> = owners.iter().map(|(o, k)| format!("{k} {}", o.as_str())).collect();
        let full = n >= MAX_HOOK_PROGRAMS;
        let message = format!(
            "{n} programs are attached to {hook} on {place} ({by}). The kernel allows {MAX_HOOK_PROGRAMS} per cgroup and hook: {state}",
            place = place(snap, cgroup),
            by = by.join(", "),
            state = if full {
                "the next BPF_PROG_ATTACH there fails with E2BIG (\"argument list too long\"), so a container start or agent restart that attaches there fails.".to_owned()
            } else {
                format!(
                    "{} more and attaching there fails with E2BIG (\"argument list too long\").",
                    MAX_HOOK_PROGRAMS - n
                )
            },
        );
        let remediation = format!(
            "See which programs they are (`bpftool cgroup show <cgroup path>`): many copies of one program are a leak, \
             such as a container runtime attaching a new device program on every update without detaching the old one. \
             Detach the stale copies (`bpftool cgroup detach <cgroup path> {hook} id <prog>`) and upgrade what leaks them."
        );
        let severity = if full { Severity::Critical } else { Severity::Warning };
        let mut f = Finding::new(Kind::HookProgramCountHigh, severity, message, remediation);
        f = if cgroup_id == snap.root.cgroup_id {
            Finding { cgroup: Some("/".into()), ..f }
        } else {
            f.at_cgroup(cgroup, snap)
        };
        f.attach_type = Some(hook);
        f.count = Some(n as u64);
        out.push(f);
    }
}

/// The running, privileged agents of `cni`.
fn agents(snap: &Snapshot, cni: Cni) -> impl Iterator<Item = &crate::snapshot::CniProcess> {
    snap.cni_processes.iter().filter(move |p| p.cni == cni && p.privileged)
}

fn configured_not_attached(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    use strum::IntoEnumIterator;
    for cni in Cni::iter() {
        let Some(agent) = agents(snap, cni).find(|p| p.intent.socket_lb == SocketLb::On) else { continue };
        let owner = cni.owner();
        let attached = snap.attachments.iter().any(|a| {
            at_root(snap, a)
                && a.attach_type.is_socket_lb()
                && owner_of(snap, a.prog_id, Some(a.attach_type), policy) == owner
        });
        if attached {
            continue;
        }
        let message = format!(
            "{cni}'s configuration turns socket LB on ({evidence}) and its agent runs ({comm}, pid {pid}), but no {cni} socket-LB \
             program is attached to the root cgroup: pods' connections to ClusterIPs are not load-balanced by socket LB, \
             while the agent may report socket LB as enabled.",
            evidence = agent.intent.evidence,
            comm = agent.comm,
            pid = agent.pid,
        );
        let remediation = format!(
            "Look for socket-LB attach errors in the agent's log and in its status (Cilium: `cilium-dbg status --verbose`, \
             \"Socket LB\"); check the cgroup2 mount it attaches through (`agent audit`: cgroup_mount_not_root; \
             `agent remount`), then restart the agent on this node: `{}`.",
            cni.restart_command(&snap.node)
        );
        let mut f = Finding::new(Kind::SocketLbConfiguredNotAttached, Severity::Critical, message, remediation);
        f.cgroup = Some("/".into());
        f.owner = Some(owner);
        f.processes = vec![ProcessRef { pid: agent.pid, comm: agent.comm.clone() }];
        out.push(f);
    }
}

fn leftovers(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    use strum::IntoEnumIterator;
    for cni in Cni::iter() {
        let owner = cni.owner();
        let left: Vec<&Attachment> =
            owned(snap, policy).filter(|(a, o)| *o == owner && a.attach_type.is_socket_lb()).map(|(a, _)| a).collect();
        if left.is_empty() {
            continue;
        }
        let running: Vec<_> = agents(snap, cni).collect();
        let reason = if running.is_empty() {
            format!("no {} process runs on this node", cni.agent_comm())
        } else if let Some(off) = running.iter().find(|p| p.intent.socket_lb == SocketLb::Off) {
            format!("its configuration turns socket LB off ({})", off.intent.evidence)
        } else {
            continue;
        };
        let cgroups: BTreeSet<&str> = left.iter().map(|a| a.cgroup.as_str()).collect();
        let hooks: BTreeSet<&str> = left.iter().map(|a| a.attach_type.name()).collect();
        let message = format!(
            "{n} {cni} socket-LB programs are attached ({hooks}, on {m} cgroup{s}) but {reason}: nothing keeps them current, \
             and they still rewrite connections to Service IPs by whatever maps they last had.",
            n = left.len(),
            hooks = hooks.into_iter().collect::<Vec<_>>().join(", "),
            m = cgroups.len(),
            s = if cgroups.len() == 1 { "" } else { "s" },
        );
        let remediation = format!(
            "If {cni} was removed from this node or its socket LB turned off, detach them (`bpftool cgroup tree` lists them; \
             `bpftool cgroup detach <cgroup> <hook> id <prog>`) and remove its pins under /sys/fs/bpf/{}; if its agent should \
             be running, find out why it is not.",
            cni.pin_dir()
        );
        let mut f = Finding::new(Kind::CniLeftoverPrograms, Severity::Warning, message, remediation);
        if cgroups.len() == 1 {
            let only = left[0];
            f = if at_root(snap, only) {
                Finding { cgroup: Some("/".into()), ..f }
            } else {
                f.at_cgroup(&only.cgroup, snap)
            };
        }
        f.owner = Some(owner);
        f.count = Some(left.len() as u64);
        out.push(f);
    }
}

fn foreign_on_cni_hooks(
    snap: &Snapshot,
    policy: &Policy,
    hooks: &BTreeMap<Owner, BTreeSet<AttachType>>,
    out: &mut Vec<Finding>,
) {
    for (cni, types) in hooks {
        for (a, owner) in owned(snap, policy) {
            if !at_root(snap, a) || !types.contains(&a.attach_type) || owner == *cni || owner.is_benign() {
                continue;
            }
            let name = prog_name(snap, a.prog_id);
            let beside = snap.attachments.iter().any(|b| {
                at_root(snap, b)
                    && b.attach_type == a.attach_type
                    && owner_of(snap, b.prog_id, Some(b.attach_type), policy) == *cni
            });
            let by = actor(snap, a);
            let message = format!(
                "{name} ({o}, prog {id}) is attached to {t} at the root cgroup {how} {cni}'s socket-LB program{who}. \
                 It runs for every socket on the node too, in an order neither controls: it can rewrite or refuse connections \
                 {cni} load-balances, and CNIs have stalled on finding a program they did not expect on their hook.",
                o = owner.as_str(),
                id = a.prog_id,
                t = a.attach_type,
                how = if beside { "beside" } else { "instead of" },
                cni = cni.as_str(),
                who = by.as_ref().map_or(String::new(), |b| format!(" (attached by {} pid {})", b.comm, b.pid)),
            );
            let remediation = format!(
                "Find what loaded prog {id} (`bpftool prog show id {id}`); if it belongs on this node, allow it with \
                 `--allow <name prefix>` and make sure it and {cni} agree on the hook; otherwise detach it \
                 (`bpftool cgroup detach <root cgroup> {t} id {id}`).",
                id = a.prog_id,
                t = a.attach_type,
                cni = cni.as_str(),
            );
            let mut f = Finding::new(Kind::ForeignProgramOnCniHook, Severity::Warning, message, remediation);
            f.cgroup = Some("/".into());
            f.attach_type = Some(a.attach_type);
            f.prog_id = Some(a.prog_id);
            f.prog_name = Some(name);
            f.owner = Some(owner);
            f.link_id = a.link_id;
            f.attached_by = by;
            out.push(f);
        }
    }
}

/// (major, minor) of a kernel release such as `5.10.0-21-amd64`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn v1_net_conflict(snap: &Snapshot, policy: &Policy, out: &mut Vec<Finding>) {
    let Some(version) = kernel_version(&snap.kernel) else { return };
    if version >= (5, 15) || snap.v1_net_controllers.is_empty() {
        return;
    }
    let at_root_lb: Vec<&Attachment> = owned(snap, policy)
        .filter(|(a, o)| at_root(snap, a) && a.attach_type.is_socket_lb() && o.is_cni())
        .map(|(a, _)| a)
        .collect();
    if at_root_lb.is_empty() {
        return;
    }
    let v1: Vec<String> = snap
        .v1_net_controllers
        .iter()
        .map(|v| match &v.mount_point {
            Some(mp) => format!("{} mounted at {}", v.controller, mp.display()),
            None => format!("{} bound to a v1 hierarchy", v.controller),
        })
        .collect();
    let message = format!(
        "This kernel ({kernel}) predates 5.15, and the cgroup v1 {v1}. Before 5.15 (commit 8520e224f547), once net_cls or \
         net_prio is used the kernel stops matching sockets to their cgroup v2 (dmesg: \"cgroup: disabling cgroup2 socket \
         matching due to net_prio or net_cls activation\"): the {n} socket-LB programs at the root may no longer run for \
         those sockets, although they are attached correctly.",
        kernel = snap.kernel,
        v1 = v1.join(", "),
        n = at_root_lb.len(),
    );
    let remediation = "Check `dmesg` for that line. Stop using net_cls/net_prio on this node (unmount the v1 hierarchy; \
        with systemd boot with a unified cgroup hierarchy), or run a kernel of 5.15 or later, or one whose vendor backported \
        commit 8520e224f547; then restart the CNI agent."
        .to_owned();
    let mut f = Finding::new(Kind::CgroupV1NetControllerConflict, Severity::Critical, message, remediation);
    f.cgroup = Some("/".into());
    f.count = Some(at_root_lb.len() as u64);
    out.push(f);
}

/// The pods and containers `found` names, for `scan::names` to look up.
pub fn names_wanted(found: &[Finding]) -> NamesWanted {
    let mut wanted = NamesWanted::default();
    let mut add = |cgroup: Option<&str>| {
        let a = attribute(cgroup.unwrap_or_default());
        if let Some(id) = a.container_id {
            wanted.containers.insert(id, (a.pod_uid.clone(), a.runtime));
        }
        if let Some(uid) = a.pod_uid {
            wanted.pods.insert(uid);
        }
    };
    for f in found {
        add(f.cgroup.as_deref());
        add(f.attached_by.as_ref().and_then(|a| a.cgroup.as_deref()));
    }
    wanted.pods.extend(found.iter().flat_map(|f| f.pods.iter().cloned()));
    wanted
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
    duplicates(snap, policy, &mut out);
    crowded_hooks(snap, policy, &mut out);
    configured_not_attached(snap, policy, &mut out);
    leftovers(snap, policy, &mut out);
    foreign_on_cni_hooks(snap, policy, &hooks, &mut out);
    v1_net_conflict(snap, policy, &mut out);
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
    use crate::snapshot::{CgroupMount, CniPin, PodCgroup, V1NetController};

    fn kinds(f: &[Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.kind.as_str()).collect()
    }

    #[test]
    fn socket_lb_at_the_root_is_clean() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
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
    fn findings_name_pods_and_containers_the_node_named() {
        use crate::snapshot::{ContainerName, PodName};
        let uid = "f8371831-8021-4722-af27-93c925d25a14";
        let cid = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";
        let mut s = node();
        cilium_connect(&mut s, CTR, CTR_ID);
        s.pods.push(PodCgroup { cgroup: POD.into(), cgroup_id: 44, pod_uid: uid.into(), effective_connect: vec![] });
        let other = "0a0a0a0a-0000-4000-8000-000000000000";
        s.pods.push(PodCgroup {
            cgroup: "/kubepods/pod".into(),
            cgroup_id: 45,
            pod_uid: other.into(),
            effective_connect: vec![],
        });

        // What to look up: the container and pod of the findings, and the
        // pods without socket LB.
        let wanted = names_wanted(&evaluate(&s, &Policy::default()));
        assert_eq!(wanted.containers.get(cid), Some(&(Some(uid.to_owned()), Some("containerd"))));
        assert!(wanted.pods.contains(uid) && wanted.pods.contains(other), "{wanted:?}");

        let pod = PodName { namespace: "kube-system".into(), name: "cilium-x7k2p".into() };
        s.names.containers.insert(
            cid.into(),
            Some(ContainerName { pod: pod.clone(), container: Some("cilium-agent".into()), source: "containerd" }),
        );
        s.names.pods.insert(uid.into(), pod);
        s.names.pods.insert(other.into(), PodName { namespace: "shop".into(), name: "web-0".into() });
        let f = evaluate(&s, &Policy::default());
        let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).unwrap();
        assert_eq!(below.pod_namespace.as_deref(), Some("kube-system"));
        assert_eq!(below.pod_name.as_deref(), Some("cilium-x7k2p"));
        assert_eq!(below.container_name.as_deref(), Some("cilium-agent"));
        assert!(
            below.message.contains("on container cilium-agent (fbbef81081fd) of pod kube-system/cilium-x7k2p"),
            "{}",
            below.message
        );
        let without = f.iter().find(|f| f.kind == Kind::PodsWithoutSocketLb).unwrap();
        assert!(without.message.ends_with("Pods: kube-system/cilium-x7k2p, shop/web-0"), "{}", without.message);
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
        cilium_agent(&mut s, SocketLb::On);
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
        cilium_agent(&mut s, SocketLb::On);
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
        cilium_agent(&mut s, SocketLb::Unknown).cgroupns = 200;
        cilium_connect(&mut s, "/", 1);
        assert!(evaluate(&s, &Policy::default()).is_empty(), "normal when socket LB is at the root");

        let mut s = node();
        let agent = cilium_agent(&mut s, SocketLb::Unknown);
        (agent.cgroupns, agent.cgroup) = (200, "/abs/path".into());
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
        s.cni_pins.push(CniPin {
            cni: Cni::Cilium,
            path: "/sys/fs/bpf/cilium/socketlb/links/cgroup/cil_sock_release".into(),
            prog_id: 51,
            link_id: Some(9),
        });
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["duplicate_cni_programs"]);
        assert_eq!((f[0].prog_id, f[0].count, f[0].cgroup.as_deref()), (Some(50), Some(2), Some("/")));
        let m = &f[0].message;
        assert!(m.contains("prog 50 looks stale (not pinned by cilium"), "{m}");
        assert!(m.contains("prog 51 loaded 1970-01-01T00:33:20Z, link 9, pinned at /sys/fs/bpf/cilium"), "{m}");
        // Without pins, the older copy is the stale one.
        s.cni_pins.clear();
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("prog 50 looks stale (older than the newest copy)"), "{}", f[0].message);
        // Different programs on one hook are not copies.
        s.programs.get_mut(&51).unwrap().name = "cil_sock_release2".into();
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    #[test]
    fn a_hook_near_the_kernels_limit_is_flagged_whoever_fills_it() {
        let mut s = node();
        for i in 0..MAX_HOOK_PROGRAMS as u32 {
            prog(&mut s, 100 + i, "", ProgType::CgroupDevice);
        }
        for i in 0..(HOOK_PROGRAMS_WARN as u32 - 1) {
            attach(&mut s, CTR, CTR_ID, "device", 100 + i);
        }
        assert!(evaluate(&s, &Policy::default()).is_empty(), "47 is not yet worth a word");
        attach(&mut s, CTR, CTR_ID, "device", 100 + HOOK_PROGRAMS_WARN as u32 - 1);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["hook_program_count_high"]);
        assert_eq!((f[0].severity, f[0].count), (Severity::Warning, Some(48)));
        assert!(f[0].message.contains("48 runtime"), "{}", f[0].message);
        assert_eq!(f[0].container_id.as_deref().map(str::len), Some(64));
        for i in HOOK_PROGRAMS_WARN as u32..MAX_HOOK_PROGRAMS as u32 {
            attach(&mut s, CTR, CTR_ID, "device", 100 + i);
        }
        let f = evaluate(&s, &Policy::default());
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].message.contains("fails with E2BIG"), "{}", f[0].message);
    }

    #[test]
    fn configured_socket_lb_with_nothing_at_the_root_is_critical() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["socket_lb_configured_not_attached"]);
        assert_eq!(f[0].severity, Severity::Critical);
        assert!(f[0].message.contains("kube-proxy-replacement=true"), "{}", f[0].message);
        assert_eq!(f[0].processes[0].pid, 7);
        // Anyone can name a process cilium-agent: without privileges it is not the agent.
        s.cni_processes[0].privileged = false;
        assert!(evaluate(&s, &Policy::default()).is_empty());
        // Off, host namespace only, or unknown: nothing is expected at the root.
        for lb in [SocketLb::Off, SocketLb::HostNamespaceOnly, SocketLb::Unknown] {
            s.cni_processes[0] = {
                let mut n = node();
                cilium_agent(&mut n, lb).clone()
            };
            assert!(evaluate(&s, &Policy::default()).is_empty(), "{lb:?}");
        }
    }

    #[test]
    fn cni_programs_with_no_agent_or_socket_lb_off_are_leftovers() {
        let mut s = node();
        cilium_connect(&mut s, "/", 1);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cni_leftover_programs"]);
        assert_eq!((f[0].count, f[0].cgroup.as_deref()), (Some(2), Some("/")));
        assert!(f[0].message.contains("no cilium-agent process runs on this node"), "{}", f[0].message);
        cilium_agent(&mut s, SocketLb::Off);
        let f = evaluate(&s, &Policy::default());
        assert!(f[0].message.contains("its configuration turns socket LB off (kube-proxy"), "{}", f[0].message);
        s.cni_processes[0].intent.socket_lb = SocketLb::On;
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    #[test]
    fn a_foreign_program_on_a_cni_hook_at_the_root_is_named() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        prog(&mut s, 60, "mesh_redirect", ProgType::CgroupSockAddr);
        attach(&mut s, "/", 1, "connect4", 60);
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["foreign_program_on_cni_hook"]);
        assert_eq!((f[0].prog_id, f[0].owner), (Some(60), Some(Owner::Unknown)));
        assert!(f[0].message.contains("beside cilium's"), "{}", f[0].message);
        // On a hook Cilium does not use, or allowed: not its business.
        assert!(evaluate(&s, &Policy { allow: vec!["mesh_".into()], ..Policy::default() }).is_empty());
        s.attachments.last_mut().unwrap().attach_type = at("bind4");
        assert!(evaluate(&s, &Policy::default()).is_empty());
    }

    #[test]
    fn v1_net_controllers_void_root_programs_only_on_kernels_before_5_15() {
        let mut s = node();
        cilium_agent(&mut s, SocketLb::On);
        cilium_connect(&mut s, "/", 1);
        s.v1_net_controllers.push(V1NetController {
            controller: "net_cls".into(),
            mount_point: Some("/sys/fs/cgroup/net_cls,net_prio".into()),
        });
        s.kernel = "5.10.0-21-amd64".into();
        let f = evaluate(&s, &Policy::default());
        assert_eq!(kinds(&f), ["cgroup_v1_net_controller_conflict"]);
        assert_eq!((f[0].severity, f[0].count), (Severity::Critical, Some(2)));
        assert!(f[0].message.contains("net_cls mounted at /sys/fs/cgroup/net_cls,net_prio"), "{}", f[0].message);
        for fixed in ["5.15.0", "6.1.0-13-cloud-amd64", "6.18"] {
            s.kernel = fixed.into();
            assert!(evaluate(&s, &Policy::default()).is_empty(), "{fixed}");
        }
        s.kernel = "4.19.0".into();
        s.attachments.clear();
        let f = evaluate(&s, &Policy::default());
        assert!(f.iter().all(|f| f.kind != Kind::CgroupV1NetControllerConflict), "nothing at the root to void");
        assert_eq!(kernel_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(kernel_version("garbage"), None);
    }
}
