//! The cgroup2 mounts in PID 1's mount namespace and where each is rooted:
//! the cause of the seeds' misattachment (a CNI's mount rooted at its own
//! container's cgroup).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::cgroup::root::{self, ROOT_CGROUP_ID};
use crate::cgroup::{AuditRoot, RootKind};
use crate::mounts::Mount;
use crate::snapshot::{CgroupMount, MountTop, ScanError};

/// Whether the auditor's own cgroup namespace is the initial one: its own
/// cgroup2 mount shows root `/` and its top is the hierarchy root. Only then
/// is mountinfo's field 4 an absolute hierarchy path.
fn in_initial_cgroupns() -> bool {
    let Ok(own) = root::read_mountinfo(Path::new("/proc/self/mountinfo")) else { return false };
    own.mounts
        .iter()
        .filter(|m| m.is_cgroup2() && m.root == "/")
        .any(|m| fs::metadata(&m.mount_point).map(|md| md.ino() == ROOT_CGROUP_ID).unwrap_or(false))
}

/// cgroup2 mounts in PID 1's mount namespace and the id of each one's top.
pub fn pid1_cgroup_mounts(proc: &Path, audit_root: &AuditRoot, errors: &mut Vec<ScanError>) -> Vec<CgroupMount> {
    let path = proc.join("1/mountinfo");
    let mounts = match root::read_mountinfo(&path) {
        Ok(m) => {
            let p = path.display().to_string();
            errors.extend(m.skipped.iter().map(|e| ScanError {
                op: "parse".into(),
                path: p.clone(),
                message: e.to_string(),
            }));
            m.mounts
        }
        Err(e) => {
            errors.push(ScanError { op: "read".into(), path: path.display().to_string(), message: e.to_string() });
            return Vec::new();
        }
    };
    let textual_ok = audit_root.kind == RootKind::Hierarchy && in_initial_cgroupns();
    // Read only when a cgroup2 mount is hidden under another.
    let mut node_view: Option<Result<NodeView, String>> = None;
    mounts
        .iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| {
            let shadow = crate::mounts::shadowing(&mounts, m);
            let top = match shadow {
                // What is at its path is another mount's: its top comes from
                // its own entry, read where field 4 is the node's path.
                Some(_) => {
                    let view = node_view.get_or_insert_with(|| node_view_of(proc));
                    match view {
                        Ok(v) => v.top_of(m),
                        Err(e) => MountTop::Unknown { reason: format!("hidden under another mount, and {e}") },
                    }
                }
                None => match root::mount_top_id(proc, m) {
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
                },
            };
            CgroupMount {
                mount_point: m.mount_point.clone(),
                mountinfo_root: m.root.clone(),
                top,
                shadowed_by: shadow.map(|y| format!("{} at {}", y.fs_type, y.mount_point.display())),
            }
        })
        .collect()
}

/// PID 1's mounts as PID 1's cgroup namespace shows them (field 4 of a
/// cgroup2 mount: its top's path below that namespace's root), and a
/// directory of ours that is that root.
struct NodeView {
    pid1: Vec<Mount>,
    ns_root: PathBuf,
}

impl NodeView {
    /// The top of mount `m` (from the auditor's reading of PID 1's
    /// mountinfo) by its own entry in this view.
    fn top_of(&self, m: &Mount) -> MountTop {
        let Some(entry) = self.pid1.iter().find(|x| x.mount_id == m.mount_id) else {
            return MountTop::Unknown { reason: format!("mount {} went away meanwhile", m.mount_id) };
        };
        if entry.root.starts_with("/..") {
            return MountTop::Unknown {
                reason: format!("its top {} lies outside PID 1's cgroup namespace", entry.root),
            };
        }
        let p = self.ns_root.join(entry.root.trim_start_matches('/'));
        match fs::symlink_metadata(&p) {
            Ok(md) => MountTop::Known { cgroup_id: md.ino(), cgroup: None },
            Err(e) => MountTop::Unknown { reason: format!("{}: {e}", p.display()) },
        }
    }
}

/// Reads PID 1's mountinfo from a thread that joins PID 1's cgroup
/// namespace (nothing else of the agent moves), and finds PID 1's
/// cgroup-namespace root: one of our own cgroup2 mounts rooted there, else
/// one of PID 1's that is not hidden itself (through `<proc>/1/root`).
fn node_view_of(proc: &Path) -> Result<NodeView, String> {
    let ns = proc.join("1/ns/cgroup");
    let (proc_owned, ns_shown) = (proc.to_owned(), ns.display().to_string());
    std::thread::spawn(move || -> Result<NodeView, String> {
        let fd = fs::File::open(&ns).map_err(|e| format!("open {ns_shown}: {e}"))?;
        nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWCGROUP).map_err(|e| format!("setns {ns_shown}: {e}"))?;
        let read = |p: &Path| root::read_mountinfo(p).map(|m| m.mounts).map_err(|e| e.to_string());
        let pid1 = read(&proc_owned.join("1/mountinfo"))?;
        let own = read(Path::new("/proc/thread-self/mountinfo"))?;
        let ns_root = own
            .iter()
            .find(|m| m.is_cgroup2() && m.root == "/")
            .map(|m| m.mount_point.clone())
            .or_else(|| {
                pid1.iter()
                    .filter(|m| m.is_cgroup2() && m.root == "/")
                    .find(|m| crate::mounts::shadowing(&pid1, m).is_none())
                    .map(|m| root::in_root_of(&proc_owned, 1, &m.mount_point))
            })
            .ok_or("no cgroup2 mount at PID 1's cgroup-namespace root was found to read its top from")?;
        Ok(NodeView { pid1, ns_root })
    })
    .join()
    .unwrap_or_else(|_| Err("the thread reading PID 1's mounts panicked".into()))
}
