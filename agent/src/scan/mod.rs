//! The scan: everything the audit reads from the kernel and procfs, gathered
//! into one `Snapshot`. Nothing here changes host state; nothing outside
//! `scan` (and the daemon's readings between passes, through the same
//! readers) talks to the kernel to build a snapshot.
//!
//! One reader per noun, each returning plain data (`snapshot`):
//! - `visit`: the cgroup tree and each cgroup's programs, by either walk
//!   (the in-kernel iterator or syscalls), into a `Sink`;
//! - `host`: the node (its name, kernel, PID 1's view);
//! - `agents`: the owners' agent processes, and `intent`: what their
//!   configuration says of socket LB;
//! - `owner_pins`: what the owners pinned in PID 1's bpffs;
//! - `cgroup_mounts`: PID 1's cgroup2 mounts and where each is rooted;
//! - `v1_net`: cgroup v1's net_cls/net_prio;
//! - `names`: pod and container names from the node's runtimes;
//! - `net`: each pod's network namespace, its host-side interfaces and
//!   the programs on them (rtnetlink, from PID 1's network namespace), and
//!   the datapath the node's configuration says it runs;
//! - `in_root`: files read inside PID 1's root, and `deadline`: the budget
//!   every read of what others wrote is made under.
//!
//! `scan` runs them and resolves what they found (program names, links,
//! mount tops). A new reader goes here, its data in `snapshot`.

pub mod agents;
pub mod cgroup_mounts;
pub mod deadline;
pub mod host;
pub(crate) mod in_root;
pub mod intent;
pub mod names;
pub mod net;
pub mod owner_pins;
pub mod v1_net;
pub mod visit;

use std::collections::{BTreeSet, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::bpf::ProgType;
use crate::bpf::programs;
use crate::bpf::query::{self, Support};
use crate::bpf::sys::SyscallError;
use crate::cgroup::iter::{IterError, Walker};
use crate::cgroup::root;
use crate::cgroup::walk::{self, WalkError};
use crate::coverage;
use crate::features::{self, Feature, Verdict};

impl From<&WalkError> for ScanError {
    fn from(e: &WalkError) -> ScanError {
        ScanError { op: e.op.to_owned(), path: e.cgroup.clone(), message: e.error.clone() }
    }
}
use crate::cgroup::{AuditRoot, RootError};
use crate::placement::{self, Placement};
use crate::snapshot::*;
use visit::{Placing, WalkContext};

#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The procfs whose PID 1 is the node's init (`/proc` with hostPID).
    pub proc: PathBuf,
    /// Audit this directory instead of discovering the hierarchy root.
    pub cgroup_root: Option<PathBuf>,
    pub node_name: Option<String>,
    /// cgroup ids whose paths the snapshot should carry (event callers).
    pub name_cgroups: HashSet<u64>,
    pub walk: WalkMethod,
    /// Keep every cgroup's id, parent and name in `Snapshot::tree`, up to
    /// this many cgroups (0: none); a larger tree is not kept at all
    /// (`Snapshot::tree` is `None`).
    pub tree_max: usize,
    /// `--nested-node`: PID 1's namespaces are a nested node's.
    pub nested_node: bool,
    /// `--cni-conf-dir`: the node's CNI configuration, inside PID 1's root.
    pub cni_conf_dir: PathBuf,
}

impl ScanOptions {
    /// The whole node as PID 1 of `proc` sees it, with the default walk.
    pub fn node(proc: PathBuf) -> ScanOptions {
        ScanOptions {
            proc,
            cgroup_root: None,
            node_name: None,
            name_cgroups: HashSet::new(),
            walk: WalkMethod::default(),
            tree_max: 0,
            nested_node: false,
            cni_conf_dir: PathBuf::from(net::config::CNI_CONF_DIR),
        }
    }
}

/// How the cgroup tree is read (`--walk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WalkMethod {
    /// The in-kernel iterator, or the syscall walk when the kernel cannot
    /// run it (the reason is reported)
    #[default]
    Auto,
    /// The in-kernel iterator only (kernel 6.1+ with BTF); fail otherwise
    BpfIter,
    /// One directory open and a BPF_PROG_QUERY per hook for every cgroup
    Syscalls,
}

/// Why an audit could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("missing capability {cap}: {why}")]
    MissingCapability { cap: &'static str, why: &'static str },
    #[error(transparent)]
    Root(#[from] RootError),
    #[error("--cgroup-root {0}")]
    CgroupRoot(RootError),
    #[error("--walk bpf-iter: {0}")]
    Iter(IterError),
    #[error("{path}: {error}{hint}")]
    Bpf { path: String, error: SyscallError, hint: &'static str },
}

fn bpf_error(path: impl Into<String>, source: SyscallError) -> AuditError {
    let hint = if source.errno() == Some(libc::EPERM) {
        " (needs CAP_SYS_ADMIN, or CAP_NET_ADMIN for queries, in the initial user namespace)"
    } else {
        ""
    };
    AuditError::Bpf { path: path.into(), error: source, hint }
}

/// The walk by syscalls: directories opened one by one, each hook queried.
fn syscall_walk<'s>(
    root_fd: OwnedFd,
    audit_root: &AuditRoot,
    support: &Support,
    ctx: &WalkContext<'_>,
    sink: &mut dyn FnMut() -> Placing<'s>,
) -> Result<(Placing<'s>, walk::WalkStats, u64, programs::Loaded), AuditError> {
    // Only hooks that a loaded program's type can use are queried: a hook no
    // loaded program fits has nothing attached. NB: a program loaded after
    // this enumeration may be attached mid-walk to a hook skipped here; being
    // attached, it is still loaded when programs are enumerated again after
    // the walk, and the tree is then walked again over every hook either
    // enumeration opens.
    let mut programs = programs::loaded_programs().map_err(|e| bpf_error("programs", e))?;
    let mut types: HashSet<ProgType> = programs.table.values().map(|p| p.prog_type).collect();
    let walked = support.for_prog_types(&types);
    let rewalk_fd = root_fd
        .try_clone()
        .map_err(|e| AuditError::Root(root::RootError::Io { op: "dup", path: audit_root.path.clone(), error: e }))?;
    let mut found = sink();
    let mut stats = visit::walk_cgroups(root_fd, &walked, ctx, &mut found);
    let mut vanished = stats.vanished;
    programs::add_new_programs(&mut programs).map_err(|e| bpf_error("programs", e))?;
    types.extend(programs.table.values().map(|p| p.prog_type));
    let all = support.for_prog_types(&types);
    if !all.minus(&walked).supported.is_empty() {
        found = sink();
        stats = visit::walk_cgroups(rewalk_fd, &all, ctx, &mut found);
        vanished += stats.vanished;
    }
    Ok((found, stats, vanished, programs))
}

/// What the kernel reports in effect at the audit root on each coverage
/// hook: its own programs and what runs from above it. A hook the kernel
/// refuses is left out (unsupported, or the root went).
fn root_effective(root: std::os::fd::BorrowedFd<'_>, support: &Support) -> crate::snapshot::Effective {
    support
        .supported
        .iter()
        .filter(|t| coverage::is_coverage_hook(**t))
        .filter_map(|&t| Some((t, query::effective(root, t).ok()?)))
        .filter(|(_, ids)| !ids.is_empty())
        .collect()
}

/// Scans the node. `Err` only when the audit cannot run at all.
pub fn scan(opts: &ScanOptions) -> Result<Snapshot, AuditError> {
    host::check_capabilities()?;
    let pid_view = host::pid_view(&opts.proc, opts.nested_node);
    let (audit_root, root_fd) = match &opts.cgroup_root {
        Some(dir) => root::given(dir).map_err(AuditError::CgroupRoot)?,
        None => root::discover(&opts.proc, matches!(pid_view, PidView::Node { .. }))?,
    };
    let root_path = audit_root.path.display().to_string();
    let support: Support = query::probe(root_fd.as_fd()).map_err(|e| bpf_error(&root_path, e))?;
    let root_fd_for_effective = root_fd
        .try_clone()
        .map_err(|e| AuditError::Root(root::RootError::Io { op: "dup", path: audit_root.path.clone(), error: e }))?;

    let mut errors = Vec::new();
    host::pid1_out_of_reach(&opts.proc, &mut errors);
    let mut mounts = cgroup_mounts::pid1_cgroup_mounts(&opts.proc, &audit_root, &mut errors);
    let wanted: HashSet<u64> = mounts
        .iter()
        .filter_map(|m| match m.top {
            MountTop::Known { cgroup_id, .. } => Some(cgroup_id),
            MountTop::Unknown { .. } => None,
        })
        .chain(opts.name_cgroups.iter().copied())
        .collect();

    // What runs for each pod's sockets is worked out as the tree is read,
    // from what the kernel reports in effect at the root.
    let root_effective = root_effective(root_fd_for_effective.as_fd(), &support);
    // A tree already past its limit is not even begun (the walk would drop
    // it on the way, after holding it).
    let over = crate::cgroup::count(root_fd.as_fd()).is_some_and(|n| n > opts.tree_max as u64);
    let tree_max = if over { 0 } else { opts.tree_max };
    let ctx = WalkContext { root_id: audit_root.cgroup_id, proc: &opts.proc };
    let root_id = audit_root.cgroup_id;
    let mut new_sink = || Placing::new(Placement::new(root_id, &root_effective, &wanted), root_id, tree_max);
    let mut walk_info = WalkInfo { method: WalkUsed::Syscalls, fallback: None, passes: 0 };
    let iterated = match opts.walk {
        WalkMethod::Syscalls => None,
        WalkMethod::Auto | WalkMethod::BpfIter => {
            let mut sink = new_sink();
            match Walker::shared(|w| visit::iter_cgroups(w, root_fd.as_fd(), None, &ctx, &mut sink)).and_then(|r| r) {
                Ok((stats, iter_stats)) => {
                    features::record(Feature::IterCgroup, Verdict::yes());
                    Some((sink, stats, iter_stats))
                }
                Err(e) if opts.walk == WalkMethod::BpfIter => return Err(AuditError::Iter(e)),
                Err(e) => {
                    if e.kernel_lacks_it() {
                        features::record(Feature::IterCgroup, Verdict::no(&e));
                    }
                    walk_info.fallback = Some(e.to_string());
                    None
                }
            }
        }
    };
    let (sink, stats, vanished, loaded) = match iterated {
        Some((sink, stats, iter_stats)) => {
            walk_info.method = WalkUsed::BpfIter;
            walk_info.passes = iter_stats.passes;
            // Enumerated after the pass, whose own program is gone by now.
            let programs = programs::loaded_programs().map_err(|e| bpf_error("programs", e))?;
            (sink, stats, 0, programs)
        }
        None => syscall_walk(root_fd, &audit_root, &support, &ctx, &mut new_sink)?,
    };
    let Placing { placement, tree, tree_over, .. } = sink;
    let placement::Placed {
        mut attachments,
        pods,
        processes: processes_by_cgroup,
        paths: paths_of_interest,
        errors: misplaced,
    } = placement.finish();
    errors.extend(stats.errors.iter().chain(&misplaced).map(ScanError::from));

    for m in &mut mounts {
        if let MountTop::Known { cgroup_id, cgroup } = &mut m.top {
            *cgroup = paths_of_interest.get(cgroup_id).cloned();
        }
    }

    // One deadline for every read of what others control in this pass.
    let budget = deadline::Budget::new(deadline::READ_DEADLINE);
    let programs::Links { cgroup: cgroup_links, skipped: links_skipped, unreadable: unreadable_links } =
        programs::cgroup_links().map_err(|e| bpf_error("links", e))?;
    let programs::Loaded { table: mut programs, unreadable: unreadable_programs } = loaded;
    let agents = agents::agent_processes(&opts.proc, &budget, &mut errors);
    // The pods' second layer: the programs on their host-side interfaces.
    let net::Networks { pods: mut pod_networks, devices: mut host_devices, pins } =
        net::read(&pods, &agents, root_fd_for_effective.as_fd(), &opts.proc, &opts.cni_conf_dir, &budget);
    let net::Pins { pins, maps: owner_maps, errors: pin_errors, hidden: hidden_bpffs } = pins;
    let pins_unread = pin_errors.first().map(|e| format!("{} {}: {}", e.op, e.path, e.message));
    errors.extend(pin_errors);
    // Full names only where the audit shows them: attached, linked and
    // pinned programs, and the sk_msg programs owners' agents hold (the
    // rules judge them by name).
    let sk_msg = |id: &u32| programs.get(id).is_some_and(|p| p.prog_type == ProgType::SkMsg);
    let named: BTreeSet<u32> = attachments
        .iter()
        .map(|a| a.prog_id)
        .chain(cgroup_links.iter().map(|l| l.prog_id))
        .chain(pins.iter().map(|p| p.prog_id))
        .chain(agents.iter().flat_map(|p| p.holds.iter().copied()).filter(sk_msg))
        .chain(pod_networks.program_ids())
        .chain(host_devices.program_ids())
        .collect();
    // Programs attached to the pods' interfaces and the node's devices
    // since the table was read.
    let attached_since: Vec<u32> =
        pod_networks.program_ids().chain(host_devices.program_ids()).filter(|id| !programs.contains_key(id)).collect();
    for id in attached_since {
        if let Ok(Some(p)) = programs::program_by_id(id) {
            programs.insert(id, p);
        }
    }
    let btf_skipped = programs::resolve_full_names(&mut programs, named);
    pod_networks.name_programs(&programs);
    host_devices.name_programs(&programs);
    placement::link_attachments(&mut attachments, &cgroup_links);

    // Read only where it can change a verdict: v1 net controllers on the
    // node and CNI socket-LB programs below the hierarchy's real root.
    let v1_net_controllers = v1_net::v1_net_controllers(&opts.proc);
    let below_real_root = |a: &Attachment| {
        a.attach_type.is_socket_lb()
            && (a.cgroup_id != audit_root.cgroup_id || audit_root.cgroup_id != root::ROOT_CGROUP_ID)
    };
    let socket_matching = (!v1_net_controllers.is_empty() && attachments.iter().any(below_real_root)).then(|| {
        crate::snapshot::SocketMatching {
            kernel_lacks_fix: v1_net::kernel_lacks_socket_matching_fix(),
            in_use: v1_net::net_controllers_in_use(&opts.proc, &v1_net_controllers),
        }
    });
    let pid1_ns = host::ns_inode(&opts.proc.join("1/ns/cgroup"));
    let reference_cgroupns = pid1_ns.or_else(|| host::ns_inode(Path::new("/proc/self/ns/cgroup")));

    let mut snap = Snapshot {
        node: host::node_name(opts.node_name.as_deref()),
        kernel: host::kernel_release(),
        root: audit_root,
        cgroups_scanned: stats.scanned,
        cgroups_vanished: vanished,
        walk: walk_info,
        unsupported_attach_types: support.unsupported,
        kernel_features: features::found(),
        attachments,
        programs,
        cgroup_links,
        skipped: Skipped {
            links: links_skipped,
            btf: btf_skipped,
            unreadable_links,
            unreadable_programs: unreadable_programs.len() as u64,
        },
        pods,
        root_effective,
        mounts,
        agents,
        pins,
        owner_maps,
        pins_unread,
        hidden_bpffs,
        devices: host_devices,
        v1_net_controllers,
        socket_matching,
        names: Default::default(),
        reference_cgroupns,
        reference_ns_is_pid1: pid1_ns.is_some(),
        pid_view,
        nested_node: opts.nested_node,
        processes: processes_by_cgroup,
        cgroup_paths: paths_of_interest,
        pod_networks,
        events: Vec::new(),
        errors,
        tree: tree.filter(|_| !tree_over),
    };
    snap.prove_hooks();
    Ok(snap)
}
