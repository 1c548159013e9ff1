//! Pure rules: a `Snapshot` in, findings out. Each finding says what is wrong
//! in plain words and what to do about it.
//!
//! Over 500 lines: the `Finding` every rule fills, the `Kind`s with their
//! explanations, and the vocabulary the rules share are one contract with
//! the JSON document; the rules themselves are one file each.
//!
//! One file per kind of finding: its detection, its message and its unit
//! tests. What several kinds share (whose a program is, how a place or a pod
//! is named, who attached it) is here, beside `evaluate`, which applies them
//! all.

mod below_root;
mod cni_agent_cgroupns;
mod configured_not_attached;
mod conflicts;
mod crowded_hooks;
mod defunct_link;
pub(crate) mod devices;
mod duplicates;
mod foreign_on_cni_hook;
mod leftovers;
mod missing_at_root;
mod mount_not_root;
mod network_unreadable;
pub(crate) mod outside_datapath;
mod ownership;
pub(crate) mod pods_without;
mod sockmaps;
mod stale_program;
mod v1_net_conflict;

pub use below_root::misplaced;
pub use crowded_hooks::HOOK_PROGRAMS_WARN;
pub use pods_without::UncoveredPod;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::attribution::{Attribution, attribute};
use crate::bpf::{AttachFlags, AttachType, BpfCommand};
use crate::cgroup::RootKind;
use crate::cgroup::tree::ProcessRef;
use crate::event::{Change, Event};
use crate::owner::Owner;
pub use crate::owner::Policy;
use crate::snapshot::{Attachment, MountTop, NamesWanted, PidView, Snapshot, SocketLb};
pub use ownership::Ctx;

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
    RootHookBelowRoot,
    RootHookConflict,
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
    SockmapBesideSocketLb,
    PodOutsideDatapath,
    PodNetworkUnreadable,
    DeviceDuplicatePrograms,
    DeviceProgramNeverRuns,
    DeviceLeftoverPrograms,
    BpffsShadowed,
    DeviceNotMeant,
    EndpointProgramStale,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The severities findings of this kind can have (each is a metric
    /// series, exported as 0 while absent).
    pub fn severities(self) -> &'static [Severity] {
        match self {
            Kind::SocketLbMissingAtRoot
            | Kind::PodsWithoutSocketLb
            | Kind::SocketLbConfiguredNotAttached
            | Kind::CgroupV1NetControllerConflict
            | Kind::DeviceLeftoverPrograms => &[Severity::Critical],
            Kind::SocketLbBelowRoot
            | Kind::RootHookConflict
            | Kind::CgroupMountNotRoot
            | Kind::DuplicateCniPrograms
            | Kind::HookProgramCountHigh
            | Kind::PodOutsideDatapath
            | Kind::DeviceDuplicatePrograms
            | Kind::BpffsShadowed
            | Kind::EndpointProgramStale => &[Severity::Critical, Severity::Warning],
            Kind::DefunctLink
            | Kind::CniAgentPrivateCgroupns
            | Kind::CniLeftoverPrograms
            | Kind::ForeignProgramOnCniHook
            | Kind::RootHookBelowRoot
            | Kind::SockmapBesideSocketLb
            | Kind::PodNetworkUnreadable
            | Kind::DeviceProgramNeverRuns
            | Kind::DeviceNotMeant => &[Severity::Warning],
        }
    }

    /// What findings of this kind mean, for a group of them.
    pub fn explanation(self) -> &'static str {
        match self {
            Kind::SocketLbBelowRoot => below_root::EXPLANATION,
            Kind::RootHookBelowRoot => below_root::HOOK_EXPLANATION,
            Kind::RootHookConflict => conflicts::EXPLANATION,
            Kind::SockmapBesideSocketLb => sockmaps::EXPLANATION,
            Kind::SocketLbMissingAtRoot => missing_at_root::EXPLANATION,
            Kind::PodsWithoutSocketLb => pods_without::EXPLANATION,
            Kind::CgroupMountNotRoot => mount_not_root::EXPLANATION,
            Kind::DefunctLink => defunct_link::EXPLANATION,
            Kind::CniAgentPrivateCgroupns => cni_agent_cgroupns::EXPLANATION,
            Kind::DuplicateCniPrograms => duplicates::EXPLANATION,
            Kind::HookProgramCountHigh => crowded_hooks::EXPLANATION,
            Kind::SocketLbConfiguredNotAttached => configured_not_attached::EXPLANATION,
            Kind::CniLeftoverPrograms => leftovers::EXPLANATION,
            Kind::ForeignProgramOnCniHook => foreign_on_cni_hook::EXPLANATION,
            Kind::CgroupV1NetControllerConflict => v1_net_conflict::EXPLANATION,
            Kind::PodOutsideDatapath => outside_datapath::EXPLANATION,
            Kind::PodNetworkUnreadable => network_unreadable::EXPLANATION,
            Kind::DeviceDuplicatePrograms => devices::DUPLICATE_EXPLANATION,
            Kind::DeviceProgramNeverRuns => devices::NEVER_RUNS_EXPLANATION,
            Kind::DeviceLeftoverPrograms => devices::LEFTOVER_EXPLANATION,
            Kind::BpffsShadowed => devices::SHADOWED_EXPLANATION,
            Kind::DeviceNotMeant => devices::NOT_MEANT_EXPLANATION,
            Kind::EndpointProgramStale => stale_program::EXPLANATION,
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
    /// When `owner` is `unknown`: the owner its programs are named like
    /// (a name proves nothing: anyone can load a `cil_sock4_connect`).
    pub named_like: Option<Owner>,
    /// The other owner of a conflict (root_hook_conflict: the one refused;
    /// sockmap_beside_socket_lb: Cilium).
    pub other_owner: Option<Owner>,
    /// How the programs of root_hook_conflict hold their hook.
    pub attach_flags: Option<AttachFlags>,
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
    /// pods_without_socket_lb: each pod, and each of its containers, with
    /// the hooks that lack the CNI's programs (empty for other kinds).
    pub pods: Vec<UncoveredPod>,
    /// The hooks a finding about several programs or hooks covers (one
    /// finding per cgroup, owner and kind, however many a tenant attaches).
    pub hooks: Vec<AttachType>,
    /// The programs it is about, at most `PROGRAMS_SHOWN` (`count` says how
    /// many in all); empty for findings about no program or one of a link
    /// or pin (`prog_id` says which).
    pub programs: Vec<ProgramRef>,
    /// pod_outside_datapath: the pod's host-side interfaces (absent for
    /// other kinds).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<outside_datapath::InterfaceRef>,
}

/// The most programs one finding lists; `count` has them all. The kernel
/// allows 64 programs per hook and cgroup, and a tenant may fill every hook.
pub const PROGRAMS_SHOWN: usize = 16;

/// One program of a finding about several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramRef {
    pub attach_type: AttachType,
    pub prog_id: u32,
    pub prog_name: String,
    pub link_id: Option<u32>,
    /// Who attached it, when the daemon saw the call.
    pub attached_by: Option<Actor>,
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
            named_like: None,
            other_owner: None,
            attach_flags: None,
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
            hooks: Vec::new(),
            programs: Vec::new(),
            interfaces: Vec::new(),
        }
    }

    /// Sets what a finding about `programs` (attachments with their
    /// attachers) names: its hooks, the programs (at most `PROGRAMS_SHOWN`)
    /// and their count, the latest attacher, and the one program's own
    /// fields when there is only one.
    fn about(mut self, snap: &Snapshot, programs: &[&Attachment], attachers: &Attachers<'_>) -> Finding {
        let mut hooks: Vec<AttachType> = programs.iter().map(|a| a.attach_type).collect();
        hooks.sort_unstable();
        hooks.dedup();
        self.hooks = hooks;
        self.count = Some(programs.len() as u64);
        self.programs = programs
            .iter()
            .take(PROGRAMS_SHOWN)
            .map(|a| ProgramRef {
                attach_type: a.attach_type,
                prog_id: a.prog_id,
                prog_name: prog_name(snap, a.prog_id),
                link_id: a.link_id,
                attached_by: attachers.actor(snap, a),
            })
            .collect();
        self.attached_by =
            self.programs.iter().filter_map(|p| p.attached_by.clone()).max_by_key(|a| (a.time_unix_ms, a.event));
        if let [only] = programs {
            self.attach_type = Some(only.attach_type);
            self.prog_id = Some(only.prog_id);
            self.prog_name = Some(prog_name(snap, only.prog_id));
            self.link_id = only.link_id;
        } else if let [only] = self.hooks[..] {
            self.attach_type = Some(only);
        }
        self
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

/// The latest attach call of each (cgroup, hook, program), indexed once per
/// judgement: rules ask it for every attachment they name.
pub(super) struct Attachers<'s>(HashMap<(u64, AttachType, u32), &'s Event>);

impl<'s> Attachers<'s> {
    pub(super) fn new(snap: &'s Snapshot) -> Attachers<'s> {
        let mut latest = HashMap::new();
        for e in &snap.events {
            if let Change::BpfCall { command, cgroup_id: Some(c), attach_type: Some(t), prog_id: Some(p), .. } =
                e.change
                && command.attaches()
            {
                latest.insert((c, t, p), e);
            }
        }
        Attachers(latest)
    }

    /// The latest attach call that made this attachment: the same cgroup,
    /// hook and program.
    pub(super) fn event(&self, a: &Attachment) -> Option<&'s Event> {
        self.event_at(a.cgroup_id, a.attach_type, a.prog_id)
    }

    pub(super) fn event_at(&self, cgroup_id: u64, hook: AttachType, prog_id: u32) -> Option<&'s Event> {
        self.0.get(&(cgroup_id, hook, prog_id)).copied()
    }

    /// Who made this attachment, as findings name them.
    pub(super) fn actor(&self, snap: &Snapshot, a: &Attachment) -> Option<Actor> {
        actor_of(snap, self.event(a)?)
    }
}

fn actor_of(snap: &Snapshot, e: &Event) -> Option<Actor> {
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

pub(super) fn prog_name(snap: &Snapshot, id: u32) -> String {
    snap.programs.get(&id).map_or_else(
        || format!("prog {id} (unloaded)"),
        |p| if p.name.is_empty() { format!("prog {id}") } else { p.name.clone() },
    )
}

/// The fix for programs attached through a misrooted cgroup2 mount: the
/// steps that hold for every owner, then what `owner` itself needs so
/// that it does not happen again (its registry entry's own setting).
pub(super) fn remount_fix(owner: Option<Owner>, node: &str) -> String {
    let spec = owner.and_then(Owner::spec);
    let title = owner.map_or("the agent", Owner::title);
    let remount = match owner.and_then(Owner::mount_point) {
        Some(mp) => format!(
            " Remount cgroup2 at {mp} from PID 1's namespaces and detach what landed below the root (`agent remount \
             --path {mp} --apply --detach-misattached --unpin-stale-links`),"
        ),
        None => " Detach what landed below the root (`agent remount --apply --detach-misattached`, or `bpftool cgroup \
                 detach <cgroup> <hook> id <prog>`),"
            .to_owned(),
    };
    let own = spec.map_or(String::new(), |s| format!(" {}", s.fix));
    let restart = match owner.and_then(|o| o.restart_command(node)) {
        Some(cmd) => format!("restart {title}'s agent on this node (`{cmd}`)"),
        None => format!("restart {title}'s agent on this node"),
    };
    format!(
        "{title} attached through a cgroup2 mount rooted at its own container (its agent runs in a private cgroup \
         namespace, or mounted cgroup2 from one).{remount}{own} then {restart} so it re-attaches at the root."
    )
}

/// The fix for a finding about `owner`'s programs (a root owner's).
pub(super) fn fix_for(snap: &Snapshot, owner: Option<Owner>) -> String {
    remount_fix(owner.filter(|o| o.intends_root()), &snap.node)
}

/// What lasts where an owner's agent runs under Docker (cri-dockerd): its
/// containers get a private cgroup namespace by default on cgroup v2, so
/// every start of the agent's container mounts cgroup2 from there again.
pub const DOCKER_FIX: &str = "The agent's container runs under Docker, which gives containers a private cgroup namespace by \
     default on cgroup v2: set `\"default-cgroupns-mode\": \"host\"` in /etc/docker/daemon.json and restart dockerd (or run \
     the container with `--cgroupns=host`), so that the agent's next start mounts cgroup2 from the node's namespace.";

impl Finding {
    /// The runtime's own lasting fix, after the owner's, where the runtime
    /// that runs the finding's container has one.
    fn with_runtime_fix(mut self) -> Finding {
        if self.runtime == Some("docker") {
            self.remediation.push(' ');
            self.remediation.push_str(DOCKER_FIX);
        }
        self
    }
}

/// A pod by name when the node says it, else by UID.
pub(super) fn pod_named(snap: &Snapshot, uid: &str, container_id: Option<&str>) -> String {
    match snap.names.pod(uid, container_id) {
        Some(p) => format!("{}/{}", p.namespace, p.name),
        None => uid.to_owned(),
    }
}

pub(super) fn where_(snap: &Snapshot, a: &Attribution, cgroup: &str) -> String {
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

pub(super) fn place(snap: &Snapshot, cgroup: &str) -> String {
    if cgroup == "/" { "the root cgroup".to_owned() } else { where_(snap, &attribute(cgroup), cgroup) }
}

pub(super) fn at_root(snap: &Snapshot, a: &Attachment) -> bool {
    a.cgroup_id == snap.root.cgroup_id
}

pub(super) fn unix_ms_text(ms: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).to_string()
}

/// The names a report of `snap` with `found` wants, for `scan::names` to
/// look up: the pods and containers the findings name, and the pods whose
/// interfaces the report lists (`datapath.pods`). One rule for `agent
/// audit` and the daemon's `/audit`.
pub fn names_wanted(snap: &Snapshot, found: &[Finding]) -> NamesWanted {
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
        for p in &f.programs {
            add(p.attached_by.as_ref().and_then(|a| a.cgroup.as_deref()));
        }
    }
    for p in found.iter().flat_map(|f| &f.pods) {
        add(Some(&p.cgroup));
        for c in &p.containers {
            add(Some(&c.cgroup));
        }
    }
    wanted.pods.extend(snap.pod_networks.pods.iter().filter(|p| !p.interfaces().is_empty()).map(|p| p.pod_uid.clone()));
    // Where a policy agent pins each pod's programs by its name, the name
    // is judged by: from the runtime's record of its containers, which no
    // pod writes, not only `/var/log/pods` (red team 52, T1).
    if stale_program::pinning_owner(snap).is_some() {
        let judged: BTreeSet<&str> =
            snap.pod_networks.pods.iter().filter(|p| !p.interfaces().is_empty()).map(|p| p.pod_uid.as_str()).collect();
        for pod in snap.pods.iter().filter(|p| judged.contains(p.pod_uid.as_str())) {
            for c in &pod.containers {
                let a = attribute(&c.cgroup);
                if let Some(id) = a.container_id {
                    wanted.containers.insert(id, (a.pod_uid, a.runtime));
                }
            }
        }
    }
    wanted
}

/// Applies every rule.
pub fn evaluate(snap: &Snapshot, policy: &Policy) -> Vec<Finding> {
    let mut out = Vec::new();
    let cx = Ctx::new(snap, policy);
    below_root::below_root(&cx, &mut out);
    let hooks = cx.root_hooks();
    missing_at_root::missing_at_root(&cx, &hooks, &mut out);
    pods_without::pods_without(&cx, &hooks, &mut out);
    mount_not_root::mounts_not_root(snap, &mut out);
    defunct_link::defunct_links(&cx, &mut out);
    duplicates::duplicates(&cx, &mut out);
    crowded_hooks::crowded_hooks(&cx, &mut out);
    configured_not_attached::configured_not_attached(&cx, &mut out);
    leftovers::leftovers(&cx, &mut out);
    foreign_on_cni_hook::foreign_on_cni_hooks(&cx, &hooks, &mut out);
    conflicts::conflicts(&cx, &mut out);
    sockmaps::sockmaps(&cx, &mut out);
    v1_net_conflict::v1_net_conflict(&cx, &mut out);
    outside_datapath::outside_datapath(&cx, &mut out);
    network_unreadable::network_unreadable(&cx, &mut out);
    devices::duplicates(&cx, &mut out);
    devices::never_runs(&cx, &mut out);
    devices::leftovers(&cx, &mut out);
    devices::shadowed(&cx, &mut out);
    devices::not_meant(&cx, &mut out);
    stale_program::stale_programs(&cx, &mut out);
    // An agent in a private cgroupns is normal when its init container
    // mounted cgroup2 from the host's namespaces; it only explains a problem
    // of its owner's.
    let about: BTreeSet<Owner> = out
        .iter()
        .filter(|f| f.severity == Severity::Critical || f.kind == Kind::RootHookBelowRoot)
        .filter_map(|f| f.owner.filter(|o| o.intends_root()))
        .collect();
    cni_agent_cgroupns::cni_agents(&cx, &about, &mut out);
    out.sort_by(order);
    out
}

/// The order findings are reported, listed and exported in: by severity
/// and kind, then the known owners' before the unknown (nothing a tenant
/// attaches can push an owner's finding past a cap: issue 36's red team
/// hid Cilium's misattachment behind 64 BestEffort cgroups, whose paths
/// sort first), then by place.
pub fn order(a: &Finding, b: &Finding) -> std::cmp::Ordering {
    let unknown = |f: &Finding| f.owner == Some(Owner::Unknown);
    (a.severity, a.kind, unknown(a), &a.cgroup, a.attach_type, a.prog_id).cmp(&(
        b.severity,
        b.kind,
        unknown(b),
        &b.cgroup,
        b.attach_type,
        b.prog_id,
    ))
}

/// Why the audit could not see everything it judges, if it could not: a
/// namespaced cgroup view, processes that are not the node's (no hostPID),
/// or a nested node's cgroup namespace with nothing of a node in it.
pub fn incomplete(snap: &Snapshot) -> Option<String> {
    // The PID view first: without hostPID, the cgroup view is usually
    // namespaced too, and hostPID is what fixes both.
    if let PidView::NotNode { reason } = &snap.pid_view {
        return Some(reason.clone());
    }
    // A node configured for an eBPF datapath whose pods' interfaces could
    // not be read at all: no pod can be judged.
    if let Some(error) = &snap.pod_networks.error
        && let Some(owner) = outside_datapath::datapaths(snap).first()
    {
        return Some(format!(
            "the pods' interfaces could not be read ({error}) on a node configured for {}'s datapath",
            owner.title()
        ));
    }
    // The node's devices could not be read (a churn of devices in its
    // namespace interrupts every dump: red team N6) on a node with a CNI's
    // datapath or state: its device findings cannot be.
    if let Some(error) = &snap.devices.error
        && (!outside_datapath::datapaths(snap).is_empty() || !snap.owner_maps.is_empty())
    {
        return Some(format!("the node's devices could not be read ({error})"));
    }
    // More devices than are read, or some that cannot be decoded: a
    // device finding on those cannot be (red team R1: a pod's thousand
    // decoys must not leave the node "OK").
    if snap.devices.not_read > 0 {
        return Some(format!(
            "{} of the node's network devices that may carry programs were not read (more than the audit reads, \
             the read's time or program cap spent, a hook that could not be read, or names it cannot decode): a \
             problem on them cannot be seen",
            snap.devices.not_read
        ));
    }
    if snap.root.kind == RootKind::Namespaced {
        return Some(snap.root.note.clone().unwrap_or_else(|| "the audit saw only a namespaced view".to_owned()));
    }
    if snap.root.kind == RootKind::Pid1Namespace && !snap.nested_node && snap.pods.is_empty() && snap.agents.is_empty()
    {
        return Some(format!(
            "PID 1's cgroup namespace is not the initial one (its root is cgroup id {}) and nothing of a Kubernetes \
             node (kubepods cgroups, a CNI agent) is visible in it: this may be a pod's own cgroup. Run the agent \
             with hostPID: true, or pass --nested-node on a nested node (kind, k0s)",
            snap.root.cgroup_id
        ));
    }
    None
}

/// Whether the processes the audit sees are the node's: only then can a CNI
/// agent be said not to run.
pub(super) fn sees_node_processes(snap: &Snapshot) -> bool {
    matches!(snap.pid_view, PidView::Node { .. })
}

/// Each attachment's owner, in the snapshot's order, for reports and
/// metrics.
pub fn owned(snap: &Snapshot, policy: &Policy) -> Vec<crate::owner::Owned> {
    let cx = Ctx::new(snap, policy);
    snap.attachments.iter().map(|a| cx.owned(a)).collect()
}

#[cfg(test)]
pub(crate) mod tests;
