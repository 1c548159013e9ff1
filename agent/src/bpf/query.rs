//! Attachments of one cgroup: `BPF_PROG_QUERY` for each supported attach type.

use std::os::fd::BorrowedFd;

use super::ProgType;
use super::attach_type::{AttachFlags, AttachType};
use super::sys::{self, SyscallError};

/// Which of the fixed cgroup attach types this kernel knows.
#[derive(Debug, Clone, Default)]
pub struct Support {
    pub supported: Vec<AttachType>,
    /// Types the kernel rejected with EINVAL: too old (or built without the
    /// feature). Reported as unsupported, never as "no programs".
    pub unsupported: Vec<AttachType>,
}

impl Support {
    /// The supported hooks that a program of one of `prog_types` can be
    /// attached to: a hook no loaded program can use has nothing attached.
    pub fn for_prog_types(&self, prog_types: &std::collections::HashSet<ProgType>) -> Support {
        Support {
            supported: self.supported.iter().copied().filter(|t| prog_types.contains(&t.prog_type())).collect(),
            unsupported: self.unsupported.clone(),
        }
    }

    /// Hooks in `self` but not in `other`.
    pub fn minus(&self, other: &Support) -> Support {
        Support {
            supported: self.supported.iter().copied().filter(|t| !other.supported.contains(t)).collect(),
            unsupported: self.unsupported.clone(),
        }
    }
}

/// `BPF_F_PREORDER` (6.15): a program attached with it runs before the
/// others of its hook and of the cgroups below (`compute_effective_progs`);
/// not in this agent's kernel headers.
pub const BPF_F_PREORDER: u32 = 1 << 6;

/// Tries, once per process, whether the kernel gives a cgroup hook's
/// revision on `BPF_PROG_QUERY` (6.16), on the ingress hook of `cgroup`;
/// records what it found. (Each program's own flags are not in the query:
/// for cgroup hooks `prog_attach_flags` repeats the hook's; the in-kernel
/// walk reads them, `cgroup::iter`.)
fn probe_revision(cgroup: BorrowedFd<'_>) -> Result<(), SyscallError> {
    use crate::features::{Feature, Verdict, record};
    let ingress = AttachType::from_name("ingress").expect("ingress").kernel_value();
    let plain = sys::prog_query(cgroup, ingress, false)?;
    record(
        Feature::QueryRevision,
        if plain.revision != 0 {
            Verdict::yes_as(format!("ingress of the audit root at revision {}", plain.revision))
        } else {
            Verdict::no("BPF_PROG_QUERY gives no revision for cgroup hooks (before 6.16)")
        },
    );
    Ok(())
}

/// Probes each attach type once on `cgroup` (the audit root). Any error other
/// than EINVAL (EPERM above all) is returned: the audit cannot go on.
pub fn probe(cgroup: BorrowedFd<'_>) -> Result<Support, SyscallError> {
    probe_revision(cgroup)?;
    let mut support = Support::default();
    for t in AttachType::all() {
        match sys::prog_query(cgroup, t.kernel_value(), false) {
            Ok(_) => support.supported.push(t),
            Err(e) if e.errno() == Some(libc::EINVAL) => support.unsupported.push(t),
            Err(e) => return Err(e),
        }
    }
    let rejected: Vec<&str> = support.unsupported.iter().map(|t| t.name()).collect();
    crate::features::record(
        crate::features::Feature::AttachTypes,
        if rejected.is_empty() {
            crate::features::Verdict::yes_as(format!("all {} known types", support.supported.len()))
        } else {
            crate::features::Verdict::yes_as(format!("rejects {}", rejected.join(", ")))
        },
    );
    Ok(support)
}

/// One program attached directly to a cgroup (not inherited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attached {
    pub attach_type: AttachType,
    pub flags: AttachFlags,
    pub prog_id: u32,
    /// Its own flags, as the kernel keeps them per program
    /// (`BPF_F_PREORDER`): read by the in-kernel walk on kernels that have
    /// them (6.15+); `None` where not known (the syscall walk: the query
    /// gives the hook's flags only).
    pub prog_flags: Option<u32>,
}

impl Attached {
    /// Runs before the others (`BPF_F_PREORDER`), not in attach order;
    /// `None` when not known.
    pub fn preorder(&self) -> Option<bool> {
        self.prog_flags.map(|f| f & BPF_F_PREORDER != 0)
    }
}

/// Programs attached directly to `cgroup`, for every supported type.
/// ENOENT means the cgroup was removed after it was opened.
pub fn attached(cgroup: BorrowedFd<'_>, support: &Support, out: &mut Vec<Attached>) -> Result<(), SyscallError> {
    for &t in &support.supported {
        let r = sys::prog_query(cgroup, t.kernel_value(), false)?;
        let flags = AttachFlags::from_kernel(r.attach_flags);
        out.extend(r.prog_ids.into_iter().map(|prog_id| Attached { attach_type: t, flags, prog_id, prog_flags: None }));
    }
    Ok(())
}

/// What a reader read of each hook that held programs, with the hook's
/// revision then (6.16+), by (cgroup, hook): a hook whose revision has not
/// moved is not read again. Its count, not its list, is what the kernel
/// gives for a revision: 1.4 us against 5.0 us for a hook of 64 programs
/// (`cargo xtask bench --revision`). Bounded: past `REVISIONS_KEPT` hooks
/// it starts again empty.
#[derive(Debug, Default)]
pub struct Revisions {
    hooks: std::collections::HashMap<(u64, AttachType), (u64, Vec<Attached>)>,
    /// Hooks not read again, their revision unchanged (for the metrics).
    pub skipped: u64,
}

const REVISIONS_KEPT: usize = 16_384;

impl Revisions {
    /// Forgets everything (a full pass read the node again).
    pub fn clear(&mut self) {
        self.hooks.clear();
    }
}

/// Like `attached`, for cgroup `id`, reading again only the hooks whose
/// revision moved since `seen` last read them (all of them on a kernel
/// without revisions), and keeping what it read in `seen`.
pub fn attached_since(
    cgroup: BorrowedFd<'_>,
    id: u64,
    support: &Support,
    seen: &mut Revisions,
    out: &mut Vec<Attached>,
) -> Result<(), SyscallError> {
    for &t in &support.supported {
        if let Some((revision, progs)) = seen.hooks.get(&(id, t)) {
            let (_, now) = sys::prog_query_revision(cgroup, t.kernel_value())?;
            if now == *revision {
                out.extend_from_slice(progs);
                seen.skipped += 1;
                continue;
            }
        }
        let r = sys::prog_query(cgroup, t.kernel_value(), false)?;
        let flags = AttachFlags::from_kernel(r.attach_flags);
        let progs: Vec<Attached> = r
            .prog_ids
            .into_iter()
            .map(|prog_id| Attached { attach_type: t, flags, prog_id, prog_flags: None })
            .collect();
        if r.revision != 0 && !progs.is_empty() {
            if seen.hooks.len() >= REVISIONS_KEPT {
                seen.hooks.clear();
            }
            seen.hooks.insert((id, t), (r.revision, progs.clone()));
        } else {
            seen.hooks.remove(&(id, t));
        }
        out.extend(progs);
    }
    Ok(())
}

/// Program ids that run for sockets in `cgroup` for this type: its own and
/// every ancestor's (`BPF_F_QUERY_EFFECTIVE`, 4.15).
pub fn effective(cgroup: BorrowedFd<'_>, t: AttachType) -> Result<Vec<u32>, SyscallError> {
    sys::prog_query(cgroup, t.kernel_value(), true).map(|r| r.prog_ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::sys::fake;
    use aya_obj::generated::bpf_attach_type::{BPF_CGROUP_INET4_CONNECT, BPF_LSM_CGROUP};

    fn root() -> std::fs::File {
        std::fs::File::open("/").unwrap()
    }

    #[test]
    fn a_hook_the_kernel_does_not_know_is_unsupported_not_empty() {
        let _k = fake::Kernel::new(|_, attr| {
            if fake::query_attach_type(attr) == BPF_LSM_CGROUP as u32 {
                return fake::errno(libc::EINVAL);
            }
            fake::answer_query(attr, 0, &[])
        });
        let s = probe(std::os::fd::AsFd::as_fd(&root())).unwrap();
        assert_eq!(s.unsupported.iter().map(|t| t.name()).collect::<Vec<_>>(), ["lsm_cgroup"]);
        assert_eq!(s.supported.len(), 28);
    }

    #[test]
    fn any_other_refusal_stops_the_probe() {
        let _k = fake::Kernel::new(|_, _| fake::errno(libc::EPERM));
        let e = probe(std::os::fd::AsFd::as_fd(&root())).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EPERM));
    }

    #[test]
    fn attached_lists_each_hook_with_its_flags() {
        let _k = fake::Kernel::new(|_, attr| {
            if fake::query_attach_type(attr) == BPF_CGROUP_INET4_CONNECT as u32 {
                return fake::answer_query(attr, aya_obj::generated::BPF_F_ALLOW_OVERRIDE, &[5, 6]);
            }
            fake::answer_query(attr, 0, &[])
        });
        let support = Support { supported: AttachType::all().collect(), unsupported: vec![] };
        let mut out = Vec::new();
        attached(std::os::fd::AsFd::as_fd(&root()), &support, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|a| a.attach_type.name() == "connect4" && a.flags == AttachFlags::Override));
        assert_eq!(out.iter().map(|a| a.prog_id).collect::<Vec<_>>(), [5, 6], "in the kernel's (run) order");
    }
}
