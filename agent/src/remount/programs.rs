//! Programs already attached to the wrong cgroup, and pinned links that would
//! bring them back: found, and (only with --apply) removed. Only CNI-owned
//! socket-LB programs are ever touched.

use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bpf::AttachType;
use crate::bpf::sys;
use crate::bpf::{pins, programs};
use crate::findings::{self, Kind, Policy};
use crate::owner::{Cni, Owner, classify};
use crate::scan::{self, ScanOptions};

#[derive(Debug, Clone, Serialize)]
pub struct Detach {
    /// Relative to the hierarchy root.
    pub cgroup: String,
    pub attach_type: AttachType,
    pub prog_id: u32,
    pub prog_name: Option<String>,
    pub owner: Owner,
    pub link_id: Option<u32>,
    /// `dry_run`, `done`, or the error.
    pub result: String,
}

/// CNI-owned socket-LB programs attached below the root, from a fresh audit
/// of the whole node. Returns the hierarchy root's path too.
pub fn misattached(proc: &Path, allow: &[String]) -> Result<(PathBuf, Vec<Detach>), String> {
    let snap = scan::scan(&ScanOptions::node(proc.to_owned())).map_err(|e| format!("auditing the node: {e:#}"))?;
    let policy = Policy { allow: allow.to_vec(), ..Policy::default() };
    let found = findings::evaluate(&snap, &policy)
        .into_iter()
        .filter(|f| f.kind == Kind::SocketLbBelowRoot && f.owner.is_some_and(Owner::is_cni))
        .filter_map(|f| {
            Some(Detach {
                cgroup: f.cgroup?,
                attach_type: f.attach_type?,
                prog_id: f.prog_id?,
                prog_name: f.prog_name,
                owner: f.owner?,
                link_id: f.link_id,
                result: "dry_run".into(),
            })
        })
        .collect();
    Ok((snap.root.path, found))
}

/// Detaches one program: `BPF_LINK_DETACH` for a link (the link object stays
/// while pinned, but runs nowhere), `BPF_PROG_DETACH` for a legacy attachment.
pub fn detach(root: &Path, d: &Detach) -> Result<(), String> {
    if let Some(link_id) = d.link_id {
        let link = sys::link_fd_by_id(link_id).map_err(|e| e.to_string())?;
        return sys::link_detach(link.as_fd()).map_err(|e| e.to_string());
    }
    let dir = root.join(d.cgroup.trim_start_matches('/'));
    let cgroup = fs::File::open(&dir).map_err(|e| format!("open {}: {e}", dir.display()))?;
    let prog = sys::prog_fd_by_id(d.prog_id).map_err(|e| e.to_string())?;
    sys::prog_detach(cgroup.as_fd(), prog.as_fd(), d.attach_type.kernel_value()).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Serialize)]
pub struct Unpin {
    pub pin: PathBuf,
    pub link_id: u32,
    pub prog_id: u32,
    pub prog_name: String,
    /// 0: the cgroup is gone (defunct link).
    pub cgroup_id: u64,
    pub result: String,
}

/// Cilium's pinned cgroup links that point anywhere but the root, in the
/// bpffs mounted at `bpffs` (refused unless it is bpffs). No pin directory
/// is not an error: Cilium may not use links.
pub fn stale_pins(bpffs: &Path, root_id: u64, allow: &[String]) -> Result<Vec<Unpin>, String> {
    let dir = bpffs.join(Cni::Cilium.pin_dir());
    let pinned = pins::pinned(bpffs, &dir).map_err(|e| format!("--bpffs {e}"))?;
    let policy = Policy { allow: allow.to_vec(), ..Policy::default() };
    let mut out = Vec::new();
    for p in pinned {
        let Some(link) = p.link else { continue };
        if link.cgroup_id == root_id {
            continue;
        }
        let Ok(Some(prog)) = programs::program_by_id(link.prog_id) else { continue };
        let mut one = std::collections::BTreeMap::from([(prog.id, prog)]);
        programs::resolve_full_names(&mut one, [link.prog_id]);
        let Some(prog) = one.remove(&link.prog_id) else { continue };
        let t = AttachType::from_kernel(link.attach_type);
        if !classify(&prog.name, prog.prog_type, t, &policy).is_cni() {
            continue;
        }
        out.push(Unpin {
            pin: p.path,
            link_id: link.link_id,
            prog_id: link.prog_id,
            prog_name: prog.name,
            cgroup_id: link.cgroup_id,
            result: "dry_run".into(),
        });
    }
    Ok(out)
}
