//! What the owners pinned in PID 1's bpffs, read under the deadline of
//! untrusted reads (the directories are others' to write).

use std::os::fd::AsFd;
use std::path::Path;

use super::deadline;
use crate::bpf::pins;
use crate::cgroup::root;
use crate::owner::Owner;
use crate::snapshot::{OwnerPin, ScanError};

/// What the CNIs pinned in PID 1's bpffs (`<proc>/1/root/sys/fs/bpf`):
/// nothing when bpffs is not mounted there or cannot be reached. Read
/// under the deadline of untrusted reads: the directories are others' to
/// write (see `bpf::pins`).
pub fn owner_pins(proc: &Path, budget: &deadline::Budget, errors: &mut Vec<ScanError>) -> Vec<OwnerPin> {
    let root = root::in_root_of(proc, 1, Path::new("/"));
    type PerCni = Vec<(Owner, &'static str, Result<Vec<pins::Pinned>, String>)>;
    let read = move || -> Result<PerCni, String> {
        let bpffs = match pins::open_bpffs_in(&root) {
            Ok(fd) => fd,
            // Not mounted, or PID 1's root closed to us: nothing to read.
            Err(pins::PinsError::NotBpffs(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.to_string()),
        };
        let shown = Path::new("/sys/fs/bpf");
        Ok(crate::owner::registry::OWNERS
            .iter()
            .flat_map(|s| s.pin_dirs.iter().map(move |d| (s.owner, *d)))
            .map(|(owner, dir)| (owner, dir, pins::pinned(bpffs.as_fd(), shown, dir).map_err(|e| e.to_string())))
            .collect())
    };
    let read = match deadline::within(1, budget, read) {
        Ok(r) => r,
        Err(why) => Err(why.to_string()),
    };
    let mut out = Vec::new();
    match read {
        Ok(per_cni) => {
            for (owner, dir, pinned) in per_cni {
                match pinned {
                    Ok(p) => out.extend(p.into_iter().map(|p| OwnerPin {
                        owner,
                        path: p.path,
                        prog_id: p.prog_id,
                        link_id: p.link.map(|l| l.link_id),
                    })),
                    Err(message) => {
                        let path = Path::new("/sys/fs/bpf").join(dir).display().to_string();
                        errors.push(ScanError { op: "read".into(), path, message });
                    }
                }
            }
        }
        Err(message) => errors.push(ScanError { op: "read".into(), path: "/sys/fs/bpf".into(), message }),
    }
    out
}
