//! The scan: everything the audit reads from the kernel and procfs, gathered
//! into one `Snapshot`. Nothing here changes host state.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::attribution;
use crate::bpf::AttachType;
use crate::bpf::programs;
use crate::bpf::query::{self, Support};
use crate::bpf::sys::SyscallError;
use crate::cgroup::root::{self, ROOT_CGROUP_ID};
use crate::cgroup::walk::{self, Visit, WalkError};
use crate::cgroup::{AuditRoot, RootError, RootKind};
use crate::snapshot::*;

/// CNI agents whose cgroup namespace decides where their mount is rooted.
pub const CNI_AGENT_COMMS: [&str; 2] = ["cilium-agent", "calico-node"];

#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The procfs whose PID 1 is the node's init (`/proc` with hostPID).
    pub proc: PathBuf,
    /// Audit this directory instead of discovering the hierarchy root.
    pub cgroup_root: Option<PathBuf>,
    pub node_name: Option<String>,
    /// cgroup ids whose paths the snapshot should carry (event callers).
    pub name_cgroups: HashSet<u64>,
}

/// Why an audit could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("missing capability {cap}: {why}")]
    MissingCapability { cap: &'static str, why: &'static str },
    #[error(transparent)]
    Root(#[from] RootError),
    #[error("--cgroup-root {0}")]
    CgroupRoot(#[source] RootError),
    #[error("{path}: {source}{hint}")]
    Bpf {
        path: String,
        #[source]
        source: SyscallError,
        hint: &'static str,
    },
}

const CAP_SYS_ADMIN: u32 = 21;

fn bpf_error(path: impl Into<String>, source: SyscallError) -> AuditError {
    let hint = if source.errno() == Some(libc::EPERM) {
        " (needs CAP_SYS_ADMIN, or CAP_NET_ADMIN for queries, in the initial user namespace)"
    } else {
        ""
    };
    AuditError::Bpf { path: path.into(), source, hint }
}

fn check_capabilities() -> Result<(), AuditError> {
    let capeff = procfs::process::Process::myself().and_then(|p| p.status()).map(|s| s.capeff).unwrap_or(u64::MAX);
    if capeff & (1 << CAP_SYS_ADMIN) == 0 {
        return Err(AuditError::MissingCapability {
            cap: "CAP_SYS_ADMIN",
            why: "reading BPF program and link info (BPF_PROG_GET_FD_BY_ID, BPF_LINK_GET_NEXT_ID) requires it; run as root or grant it",
        });
    }
    Ok(())
}

fn node_name(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn is_gone(e: &SyscallError) -> bool {
    e.errno() == Some(libc::ENOENT)
}

/// Reads the pids in a cgroup and their command names.
fn processes(cgroup: BorrowedFd<'_>, proc: &Path) -> Vec<ProcessRef> {
    let Ok(fd) = openat(cgroup, "cgroup.procs", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
        return Vec::new();
    };
    let mut text = String::new();
    if fs::File::from(fd).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .map(|pid| {
            let comm = fs::read_to_string(proc.join(pid.to_string()).join("comm")).map(|s| s.trim().to_owned());
            ProcessRef { pid, comm: comm.unwrap_or_default() }
        })
        .collect()
}

/// The cgroup-v2 path of a process, from `/proc/<pid>/cgroup`.
fn proc_cgroup(proc: &Path, pid: &str) -> Option<String> {
    let text = fs::read_to_string(proc.join(pid).join("cgroup")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_owned)
}

fn ns_inode(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.ino())
}

fn cni_processes(proc: &Path, errors: &mut Vec<ScanError>) -> Vec<CniProcess> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(proc) {
        Ok(e) => e,
        Err(e) => {
            errors.push(ScanError { op: "readdir".into(), path: proc.display().to_string(), message: e.to_string() });
            return out;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim();
        if !CNI_AGENT_COMMS.contains(&comm) {
            continue;
        }
        // NB: the process may exit between reads; skip it then.
        let (Some(ns), Some(cgroup)) = (ns_inode(&entry.path().join("ns/cgroup")), proc_cgroup(proc, pid)) else {
            continue;
        };
        out.push(CniProcess { pid: pid.parse().unwrap_or(0), comm: comm.to_owned(), cgroupns: ns, cgroup });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// Whether the auditor's own cgroup namespace is the initial one: its own
/// cgroup2 mount shows root `/` and its top is the hierarchy root. Only then
/// is mountinfo's field 4 an absolute hierarchy path.
fn in_initial_cgroupns() -> bool {
    let Ok(own) = root::read_mountinfo(Path::new("/proc/self/mountinfo")) else { return false };
    own.iter()
        .filter(|m| m.is_cgroup2() && m.root == "/")
        .any(|m| fs::metadata(&m.mount_point).map(|md| md.ino() == ROOT_CGROUP_ID).unwrap_or(false))
}

/// cgroup2 mounts in PID 1's mount namespace and the id of each one's top.
fn pid1_cgroup_mounts(proc: &Path, audit_root: &AuditRoot, errors: &mut Vec<ScanError>) -> Vec<CgroupMount> {
    let path = proc.join("1/mountinfo");
    let mounts = match root::read_mountinfo(&path) {
        Ok(m) => m,
        Err(e) => {
            errors.push(ScanError { op: "read".into(), path: path.display().to_string(), message: e.to_string() });
            return Vec::new();
        }
    };
    let textual_ok = audit_root.kind == RootKind::Hierarchy && in_initial_cgroupns();
    mounts
        .into_iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| {
            let top = match root::mount_top_id(proc, &m) {
                Ok(id) => MountTop::Known { cgroup_id: id, cgroup: None },
                Err(e) if textual_ok && !m.root.starts_with("/..") => {
                    // PID 1's mount namespace is closed to us, but we read
                    // from the initial cgroupns: field 4 is a real path.
                    let p = audit_root.path.join(m.root.trim_start_matches('/'));
                    match fs::metadata(&p) {
                        Ok(md) => MountTop::Known { cgroup_id: md.ino(), cgroup: None },
                        Err(e2) => MountTop::Unknown { reason: format!("{e}; {}: {e2}", p.display()) },
                    }
                }
                Err(e) => MountTop::Unknown {
                    reason: format!("{}: {e}", root::in_root_of(proc, 1, &m.mount_point).display()),
                },
            };
            CgroupMount { mount_point: m.mount_point, mountinfo_root: m.root, top }
        })
        .collect()
}

/// Scans the node. `Err` only when the audit cannot run at all.
pub fn scan(opts: &ScanOptions) -> Result<Snapshot, AuditError> {
    check_capabilities()?;
    let (audit_root, root_fd) = match &opts.cgroup_root {
        Some(dir) => root::given(dir).map_err(AuditError::CgroupRoot)?,
        None => root::discover(&opts.proc)?,
    };
    let root_path = audit_root.path.display().to_string();
    let support: Support = query::probe(root_fd.as_fd()).map_err(|e| bpf_error(&root_path, e))?;

    let mut errors = Vec::new();
    let mut mounts = pid1_cgroup_mounts(&opts.proc, &audit_root, &mut errors);
    let wanted: HashSet<u64> = mounts
        .iter()
        .filter_map(|m| match m.top {
            MountTop::Known { cgroup_id, .. } => Some(cgroup_id),
            MountTop::Unknown { .. } => None,
        })
        .chain(opts.name_cgroups.iter().copied())
        .collect();

    let mut attachments = Vec::new();
    let mut pods = Vec::new();
    let mut processes_by_cgroup = BTreeMap::new();
    let mut paths_of_interest: HashMap<u64, String> = HashMap::new();
    let connect: Vec<AttachType> = ["connect4", "connect6"]
        .into_iter()
        .filter_map(AttachType::from_name)
        .filter(|t| support.supported.contains(t))
        .collect();
    let mut raw = Vec::new();

    let stats = walk::walk(root_fd, audit_root.cgroup_id, |path, id, fd| {
        let fail = |op: &str, e: SyscallError| {
            if is_gone(&e) {
                Ok(Visit::Vanished)
            } else {
                Err(WalkError { cgroup: path.to_owned(), op: op.to_owned(), error: e.to_string() })
            }
        };
        raw.clear();
        if let Err(e) = query::attached(fd, &support, &mut raw) {
            return fail("query", e);
        }
        let attribution = attribution::attribute(path);
        if attribution.is_pod_level() {
            let mut effective = Vec::new();
            for &t in &connect {
                match query::effective(fd, t) {
                    Ok(ids) => effective.extend(ids),
                    Err(e) => return fail("query effective", e),
                }
            }
            pods.push(PodCgroup {
                cgroup: path.to_owned(),
                pod_uid: attribution.pod_uid.unwrap_or_default(),
                effective_connect: effective,
            });
        }
        if id != audit_root.cgroup_id && raw.iter().any(|a| a.attach_type.is_socket_lb()) {
            processes_by_cgroup.insert(path.to_owned(), processes(fd, &opts.proc));
        }
        if wanted.contains(&id) {
            paths_of_interest.insert(id, path.to_owned());
        }
        attachments.extend(raw.iter().map(|a| Attachment {
            cgroup: path.to_owned(),
            cgroup_id: id,
            attach_type: a.attach_type,
            attach_flags: a.flags,
            prog_id: a.prog_id,
            link_id: None,
        }));
        Ok(Visit::Done)
    });
    errors.extend(stats.errors.iter().map(|e| ScanError {
        op: e.op.clone(),
        path: e.cgroup.clone(),
        message: e.error.clone(),
    }));

    for m in &mut mounts {
        if let MountTop::Known { cgroup_id, cgroup } = &mut m.top {
            *cgroup = paths_of_interest.get(cgroup_id).cloned();
        }
    }

    // Programs and links are read after the walk: anything the walk saw
    // attached was loaded before it, so it is in the table unless unloaded.
    let mut programs = programs::loaded_programs().map_err(|e| bpf_error("programs", e))?;
    // Full names only where the audit shows them: attached programs, and
    // socket programs (the CNI candidates that rules classify by name).
    let named: BTreeSet<u32> = attachments
        .iter()
        .map(|a| a.prog_id)
        .chain(programs.values().filter(|p| matches!(p.prog_type, "cgroup_sock_addr" | "cgroup_sock")).map(|p| p.id))
        .collect();
    programs::resolve_full_names(&mut programs, named);
    let cgroup_links = programs::cgroup_links().map_err(|e| bpf_error("links", e))?;
    let by_target: HashMap<(u64, u32, u32), u32> =
        cgroup_links.iter().map(|l| ((l.cgroup_id, l.attach_type, l.prog_id), l.link_id)).collect();
    for a in &mut attachments {
        a.link_id = by_target.get(&(a.cgroup_id, a.attach_type.kernel_value(), a.prog_id)).copied();
    }

    let pid1_ns = ns_inode(&opts.proc.join("1/ns/cgroup"));
    let reference_cgroupns = pid1_ns.or_else(|| ns_inode(Path::new("/proc/self/ns/cgroup")));
    let cni_processes = cni_processes(&opts.proc, &mut errors);

    Ok(Snapshot {
        node: node_name(opts.node_name.as_deref()),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).unwrap_or_default(),
        root: audit_root,
        cgroups_scanned: stats.scanned,
        cgroups_vanished: stats.vanished,
        unsupported_attach_types: support.unsupported,
        attachments,
        programs,
        cgroup_links,
        pods,
        mounts,
        cni_processes,
        reference_cgroupns,
        reference_ns_is_pid1: pid1_ns.is_some(),
        processes: processes_by_cgroup,
        cgroup_paths: paths_of_interest.into_iter().collect(),
        events: Vec::new(),
        errors,
    })
}
