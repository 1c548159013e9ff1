//! What the owners pinned in PID 1's bpffs, read under the deadline of
//! untrusted reads (the directories are others' to write).

use std::os::fd::AsFd;
use std::path::Path;

use super::deadline;
use crate::bpf::pins;
use crate::cgroup::root;
use crate::owner::Owner;
use crate::snapshot::{OwnerMap, OwnerPin, ScanError};

/// What the CNIs pinned in PID 1's bpffs (`<proc>/1/root/sys/fs/bpf`): their
/// programs and links, and their maps (`tc/globals`, AWS's `globals/aws/maps`); nothing
/// when bpffs is not mounted there or cannot be reached. Read under the
/// deadline of untrusted reads: the directories are others' to write (see
/// `bpf::pins`).
pub fn owner_pins(
    proc: &Path,
    budget: &deadline::Budget,
    errors: &mut Vec<ScanError>,
) -> (Vec<OwnerPin>, Vec<OwnerMap>) {
    let root = root::in_root_of(proc, 1, Path::new("/"));
    type Maps = Vec<(Owner, &'static str, Result<Vec<pins::PinnedMap>, String>)>;
    type PerCni = (Vec<(Owner, String, Result<Vec<pins::Pinned>, String>)>, Maps);
    let read = move || -> Result<PerCni, String> {
        let bpffs = match pins::open_bpffs_in(&root) {
            Ok(fd) => fd,
            // Not mounted, or PID 1's root closed to us: nothing to read.
            Err(pins::PinsError::NotBpffs(_)) => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(e.to_string()),
        };
        let shown = Path::new("/sys/fs/bpf");
        let mut out = Vec::new();
        for (owner, dir) in
            crate::owner::registry::OWNERS.iter().flat_map(|s| s.pin_dirs.iter().map(move |d| (s.owner, *d)))
        {
            // `*`: one level of directories (a device's, an endpoint's).
            match dir.split_once("/*/") {
                Some((parent, below)) => match pins::subdirs(bpffs.as_fd(), shown, parent) {
                    Ok(subs) => {
                        for sub in subs {
                            let rel = format!("{parent}/{sub}/{below}");
                            out.push((
                                owner,
                                rel.clone(),
                                pins::pinned(bpffs.as_fd(), shown, &rel).map_err(|e| e.to_string()),
                            ));
                        }
                    }
                    Err(e) => out.push((owner, parent.to_owned(), Err(e.to_string()))),
                },
                None => out.push((
                    owner,
                    dir.to_owned(),
                    pins::pinned(bpffs.as_fd(), shown, dir).map_err(|e| e.to_string()),
                )),
            }
        }
        let maps: Maps = crate::owner::registry::DATAPATHS
            .iter()
            .map(|d| {
                (
                    d.owner,
                    d.maps_dir,
                    pins::pinned_maps(bpffs.as_fd(), shown, d.maps_dir, d.pinned_maps).map_err(|e| e.to_string()),
                )
            })
            .collect();
        Ok((out, maps))
    };
    let read = match deadline::within(1, budget, read) {
        Ok(r) => r,
        Err(why) => Err(why.to_string()),
    };
    let (mut out, mut owner_maps) = (Vec::new(), Vec::new());
    match read {
        Ok((per_cni, maps)) => {
            for (owner, dir, found) in maps {
                match found {
                    Ok(m) => {
                        owner_maps.extend(m.into_iter().map(|m| OwnerMap { owner, name: m.name, map_id: m.map_id }))
                    }
                    Err(message) => {
                        let path = Path::new("/sys/fs/bpf").join(dir).display().to_string();
                        errors.push(ScanError { op: "read".into(), path, message })
                    }
                }
            }
            for (owner, dir, pinned) in per_cni {
                match pinned {
                    Ok(p) => out.extend(p.into_iter().map(|p| OwnerPin {
                        owner,
                        path: p.path,
                        prog_id: p.prog_id,
                        link_id: p.linked.map(|l| l.link_id),
                        target: p.linked.map(|l| l.target),
                    })),
                    Err(message) => {
                        let path = Path::new("/sys/fs/bpf").join(&dir).display().to_string();
                        errors.push(ScanError { op: "read".into(), path, message });
                    }
                }
            }
        }
        Err(message) => errors.push(ScanError { op: "read".into(), path: "/sys/fs/bpf".into(), message }),
    }
    (out, owner_maps)
}

/// The bpffs mounts of PID 1's mount namespace that a later mount hides
/// (`mounts::hidden_bpffs`); none when its mountinfo cannot be read (said
/// in `errors`).
pub fn hidden_bpffs(proc: &Path, errors: &mut Vec<ScanError>) -> Vec<crate::mounts::HiddenBpffs> {
    let path = proc.join("1/mountinfo");
    match root::read_mountinfo(&path) {
        Ok(m) => crate::mounts::hidden_bpffs(&m.mounts),
        Err(e) => {
            errors.push(ScanError { op: "read".into(), path: path.display().to_string(), message: e.to_string() });
            Vec::new()
        }
    }
}
