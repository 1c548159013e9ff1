//! Programs already attached to the wrong cgroup, and pinned links that would
//! bring them back: found, and (only with --apply) removed. Only programs
//! proven to be those of an owner that means them for the root (its agent
//! holds them, its pin, its attach call, its own cgroup or mount) are ever
//! touched; a program merely named like one's never is.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bpf::AttachType;
use crate::bpf::sys;
use crate::bpf::{pins, programs};
use crate::cgroup::by_id::{ReopenError, reopen};
use crate::findings::{self, Policy};
use crate::owner::{Owner, makes, registry};
use crate::snapshot::Snapshot;

/// What became of one planned detach or unpin. In JSON: `dry_run`, `done`,
/// or the error itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    DryRun,
    Done,
    Failed(String),
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Applied::DryRun => f.write_str("dry_run"),
            Applied::Done => f.write_str("done"),
            Applied::Failed(e) => f.write_str(e),
        }
    }
}

impl Serialize for Applied {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Detach {
    /// Relative to the hierarchy root.
    pub cgroup: String,
    /// The cgroup the audit saw; detach reopens it by this id.
    pub cgroup_id: u64,
    pub attach_type: AttachType,
    pub prog_id: u32,
    pub prog_name: Option<String>,
    pub owner: Owner,
    pub link_id: Option<u32>,
    /// `dry_run`, `done`, or the error.
    pub result: Applied,
}

/// Why a planned detach was not done.
#[derive(Debug, thiserror::Error)]
pub enum DetachError {
    #[error(transparent)]
    Cgroup(#[from] ReopenError),
    #[error(transparent)]
    Bpf(#[from] sys::SyscallError),
    #[error("open {}: {error}", path.display())]
    Root { path: PathBuf, error: crate::cgroup::RootError },
    #[error(
        "{hook} at {cgroup} holds {}, not the planned prog {planned}: refusing to detach",
        if now.is_empty() { "nothing".to_owned() } else { format!("prog {}", join(now)) }
    )]
    HookChanged { hook: AttachType, cgroup: String, planned: u32, now: Vec<u32> },
    #[error("link {link} now {now}, not the planned prog {planned} at cgroup id {cgroup_id}: refusing to detach it")]
    LinkChanged { link: u32, planned: u32, cgroup_id: u64, now: String },
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Root owners' programs attached below the root, proven theirs, in an
/// audit of the whole node: every one of them (the rules' findings list
/// only some).
pub fn misattached(snap: &Snapshot, allow: &[String]) -> Vec<Detach> {
    let policy = Policy { allow: allow.to_vec(), ..Default::default() };
    findings::misplaced(snap, &policy)
        .into_iter()
        .map(|(a, owner)| Detach {
            cgroup: a.cgroup.clone(),
            cgroup_id: a.cgroup_id,
            attach_type: a.attach_type,
            prog_id: a.prog_id,
            prog_name: snap.programs.get(&a.prog_id).map(|p| p.name.clone()),
            owner,
            link_id: a.link_id,
            result: Applied::DryRun,
        })
        .collect()
}

/// Detaches one program, and only that one: the cgroup is reopened by id,
/// and right before detaching, a link is read again (it must still run the
/// planned program at the planned cgroup; `BPF_LINK_DETACH` then ends that
/// very link, which stays as an object while pinned but runs nowhere), or
/// the hook is queried again (it must still hold the planned program: on a
/// hook attached without `BPF_F_ALLOW_MULTI`, `BPF_PROG_DETACH` removes
/// whatever is there, whichever program it is given).
pub fn detach(root: &Path, d: &Detach) -> Result<(), DetachError> {
    if let Some(link_id) = d.link_id {
        let link = sys::link_fd_by_id(link_id)?;
        let info = sys::cgroup_link_info(link.as_fd())?;
        return match info {
            Some(i)
                if i.prog_id == d.prog_id
                    && i.cgroup_id == d.cgroup_id
                    && i.attach_type == d.attach_type.kernel_value() =>
            {
                Ok(sys::link_detach(link.as_fd())?)
            }
            other => Err(DetachError::LinkChanged {
                link: link_id,
                planned: d.prog_id,
                cgroup_id: d.cgroup_id,
                now: match other {
                    None => "is not a cgroup link".into(),
                    Some(i) if i.cgroup_id == 0 => format!("runs prog {} nowhere (its cgroup is gone)", i.prog_id),
                    Some(i) => format!(
                        "runs prog {} at {} of cgroup id {}",
                        i.prog_id,
                        AttachType::from_kernel(i.attach_type)
                            .map_or_else(|| i.attach_type.to_string(), |t| t.to_string()),
                        i.cgroup_id
                    ),
                },
            }),
        };
    }
    let (root_fd, _) = crate::cgroup::root::open_cgroup_dir(root)
        .map_err(|error| DetachError::Root { path: root.to_owned(), error })?;
    let cgroup = reopen(root_fd.as_fd(), root, &d.cgroup, d.cgroup_id)?;
    let prog = sys::prog_fd_by_id(d.prog_id)?;
    let now = sys::prog_query(cgroup.as_fd(), d.attach_type.kernel_value(), false)?;
    let multi = now.attach_flags & aya_obj::generated::BPF_F_ALLOW_MULTI != 0;
    if !now.prog_ids.contains(&d.prog_id) || (!multi && now.prog_ids.len() != 1) {
        let now = now.prog_ids;
        return Err(DetachError::HookChanged {
            hook: d.attach_type,
            cgroup: d.cgroup.clone(),
            planned: d.prog_id,
            now,
        });
    }
    Ok(sys::prog_detach(cgroup.as_fd(), prog.as_fd(), d.attach_type.kernel_value())?)
}

#[derive(Debug, Clone, Serialize)]
pub struct Unpin {
    pub pin: PathBuf,
    /// The owner whose pin directory it is in.
    pub owner: Owner,
    pub link_id: u32,
    pub prog_id: u32,
    pub prog_name: String,
    /// 0: the cgroup is gone (defunct link).
    pub cgroup_id: u64,
    pub result: Applied,
    /// The pin's directory (below bpffs), name and inode: what `unpin`
    /// removes.
    #[serde(skip)]
    dir: &'static str,
    #[serde(skip)]
    name: std::ffi::OsString,
    #[serde(skip)]
    ino: u64,
}

/// The pinned cgroup links of the owners that mean their programs for the
/// root (Cilium's, Kmesh's: reused on restart) that point anywhere but the
/// root, in the bpffs `bpffs` (shown as `shown`). A missing pin directory
/// is not an error: the owner may not run here, or not use links.
pub fn stale_pins(bpffs: BorrowedFd<'_>, shown: &Path, root_id: u64, allow: &[String]) -> Result<Vec<Unpin>, String> {
    let mut out = Vec::new();
    for spec in registry::OWNERS.iter().filter(|s| s.owner.intends_root()) {
        for dir in spec.pin_dirs {
            out.extend(stale_in(bpffs, shown, root_id, allow, spec.owner, dir)?);
        }
    }
    Ok(out)
}

fn stale_in(
    bpffs: BorrowedFd<'_>,
    shown: &Path,
    root_id: u64,
    allow: &[String],
    owner: Owner,
    dir: &'static str,
) -> Result<Vec<Unpin>, String> {
    let pinned = pins::pinned(bpffs, shown, dir).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for p in pinned {
        let Some(link) = p.link else { continue };
        if link.cgroup_id == root_id {
            continue;
        }
        let Ok(Some(prog)) = programs::program_by_id(link.prog_id) else { continue };
        let mut one = std::collections::BTreeMap::from([(prog.id, prog)]);
        let _ = programs::resolve_full_names(&mut one, [link.prog_id]);
        let Some(prog) = one.remove(&link.prog_id) else { continue };
        let t = AttachType::from_kernel(link.attach_type);
        // Its program must be one the owner makes, and not one the user
        // allowed.
        let allowed = !prog.name.is_empty() && allow.iter().any(|a| prog.name.starts_with(a.as_str()));
        if allowed || !makes(owner, &prog.name, prog.prog_type, t) {
            continue;
        }
        out.push(Unpin {
            pin: p.path,
            owner,
            dir,
            link_id: link.link_id,
            prog_id: link.prog_id,
            prog_name: prog.name,
            cgroup_id: link.cgroup_id,
            result: Applied::DryRun,
            name: p.name,
            ino: p.ino,
        });
    }
    Ok(out)
}

/// Removes one stale pin, relative to the directory resolved again (a
/// directory swapped for a link since the plan cannot point it elsewhere),
/// and only if the name still holds the object planned.
pub fn unpin(bpffs: BorrowedFd<'_>, shown: &Path, u: &Unpin) -> Result<(), pins::PinsError> {
    pins::remove(bpffs, shown, u.dir, &u.name, u.ino)
}
