//! Which socket-LB programs run for the sockets of a cgroup: the kernel's
//! rule, pure, over the programs each level holds.
//!
//! A socket runs the *effective* programs of the cgroup its process was in
//! when it was made (a container's leaf cgroup, not its pod's). The kernel
//! builds them from that cgroup upward (`compute_effective_progs`,
//! kernel/bpf/cgroup.c): a level's own programs count while no level below
//! it contributed any, or when that level was attached with
//! `BPF_F_ALLOW_MULTI` (bpf_links always are). So under a root attached
//! with `BPF_F_ALLOW_OVERRIDE`, a program attached to a pod's or a
//! container's cgroup replaces the root's there; under `BPF_F_ALLOW_MULTI`
//! both run.
//!
//! Every level below the audit root is known exactly (the walk reads each
//! cgroup's own programs and flags). What runs from above the audit root
//! (a nested node, `--cgroup-root`) is what the kernel reports in effect at
//! the root beyond its own programs (`BPF_F_QUERY_EFFECTIVE`); how each of
//! those levels was attached is not known, so they are taken to allow
//! multiple programs, as links and CNIs attach.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::bpf::{AttachFlags, AttachType};
use crate::snapshot::{Effective, Shared};

/// The socket-LB hooks that translate a pod's Service traffic: TCP
/// connects, UDP sends and receives, and the peer address a socket reports.
/// (`post_bind`, `bind` and `sock_release` keep ports and state, they do not
/// translate.)
pub const HOOKS: [&str; 8] =
    ["connect4", "connect6", "sendmsg4", "sendmsg6", "recvmsg4", "recvmsg6", "getpeername4", "getpeername6"];

/// Whether `t` is one of `HOOKS`.
pub fn is_coverage_hook(t: AttachType) -> bool {
    HOOKS.contains(&t.name())
}

/// Hands out one `Shared` per distinct effective set.
#[derive(Debug, Default)]
pub struct Sets {
    by_value: HashMap<Effective, Shared>,
    /// Sets no cgroup holds any more are let go when the map reaches this.
    prune_at: usize,
}

impl Sets {
    pub fn share(&mut self, e: Effective) -> Shared {
        if let Some(s) = self.by_value.get(&e) {
            return s.clone();
        }
        if self.by_value.len() >= self.prune_at {
            // Bounded by the sets in use: crafted attachments that make a
            // new set for each cgroup cannot grow it past twice those.
            self.by_value.retain(|_, s| Arc::strong_count(s) > 1);
            self.prune_at = (self.by_value.len() * 2).max(64);
        }
        let s = Arc::new(e.clone());
        self.by_value.insert(e, s.clone());
        s
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_value.len()
    }
}

/// One cgroup's own programs on the coverage hooks, and the flags each hook
/// was attached with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Level {
    pub hooks: BTreeMap<AttachType, (AttachFlags, Vec<u32>)>,
}

impl Level {
    /// The level of a cgroup whose own programs are `attached`
    /// ((hook, flags, program) in the kernel's order).
    pub fn of(attached: impl IntoIterator<Item = (AttachType, AttachFlags, u32)>) -> Level {
        let mut level = Level::default();
        for (t, flags, prog) in attached {
            if is_coverage_hook(t) {
                let h = level.hooks.entry(t).or_insert((flags, Vec::new()));
                h.0 = flags;
                h.1.push(prog);
            }
        }
        level
    }

    /// What runs from above the audit root: `effective` (the kernel's, at
    /// the root) minus the root's own programs, as one level allowing
    /// multiple programs.
    pub fn above(root: &Level, effective: &Effective) -> Level {
        let mut level = Level::default();
        for (&t, ids) in effective {
            let own = root.hooks.get(&t).map(|h| h.1.as_slice()).unwrap_or(&[]);
            let rest: Vec<u32> = ids.iter().copied().filter(|id| !own.contains(id)).collect();
            if !rest.is_empty() {
                level.hooks.insert(t, (AttachFlags::Multi, rest));
            }
        }
        level
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }
}

/// The programs in effect for sockets of a cgroup whose levels are `up`:
/// the cgroup itself first, then each ancestor, ending with the audit root
/// and, where known, `Level::above` it.
pub fn effective<'a>(up: impl IntoIterator<Item = &'a Level> + Clone) -> Effective {
    let mut out = Effective::new();
    for name in HOOKS {
        let Some(t) = AttachType::from_name(name) else { continue };
        let mut progs: Vec<u32> = Vec::new();
        for level in up.clone() {
            if let Some((flags, own)) = level.hooks.get(&t)
                && (progs.is_empty() || *flags == AttachFlags::Multi)
            {
                progs.extend(own);
            }
        }
        if !progs.is_empty() {
            out.insert(t, progs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> AttachType {
        AttachType::from_name(name).unwrap()
    }

    fn level(flags: AttachFlags, progs: &[u32]) -> Level {
        Level::of(progs.iter().map(|&p| (t("connect4"), flags, p)))
    }

    fn connect4(e: &Effective) -> Vec<u32> {
        e.get(&t("connect4")).cloned().unwrap_or_default()
    }

    #[test]
    fn a_lower_program_replaces_an_override_parents_and_runs_beside_a_multi_one() {
        let root_override = level(AttachFlags::Override, &[1]);
        let root_multi = level(AttachFlags::Multi, &[1]);
        let pod = Level::default();
        let ctr = level(AttachFlags::Override, &[9]);
        assert_eq!(connect4(&effective([&ctr, &pod, &root_override])), [9], "the container's replaces the root's");
        assert_eq!(connect4(&effective([&ctr, &pod, &root_multi])), [9, 1], "both run, the lower one first");
        assert_eq!(connect4(&effective([&Level::default(), &pod, &root_override])), [1], "inherited");
    }

    #[test]
    fn sets_no_cgroup_holds_are_let_go() {
        let mut sets = Sets::default();
        let held: Vec<Shared> = (0..10).map(|i| sets.share([(t("connect4"), vec![i])].into())).collect();
        assert!(Arc::ptr_eq(&held[3], &sets.share([(t("connect4"), vec![3])].into())));
        // Ten thousand sets made and dropped at once (crafted attachments,
        // one per cgroup): the map stays near what is held.
        for i in 100..10_100 {
            drop(sets.share([(t("connect4"), vec![i])].into()));
        }
        assert!(sets.len() <= 2 * 64 + 10, "{} sets kept", sets.len());
        assert!(Arc::ptr_eq(&held[9], &sets.share([(t("connect4"), vec![9])].into())), "held sets stay shared");
    }

    #[test]
    fn only_the_coverage_hooks_count() {
        let l = Level::of([(t("post_bind4"), AttachFlags::Multi, 3), (t("device"), AttachFlags::Multi, 4)]);
        assert!(l.is_empty());
        assert_eq!(HOOKS.iter().filter(|h| AttachType::from_name(h).is_some()).count(), 8);
    }

    #[test]
    fn what_runs_from_above_the_root_is_the_kernels_rest_taken_as_multi() {
        let root = level(AttachFlags::Multi, &[2]);
        let kernel: Effective = [(t("connect4"), vec![2, 7])].into();
        let above = Level::above(&root, &kernel);
        assert_eq!(connect4(&effective([&Level::default(), &root, &above])), [2, 7]);
        assert_eq!(connect4(&effective([&level(AttachFlags::None, &[5]), &root, &above])), [5, 2, 7]);
        assert!(Level::above(&root, &[(t("connect4"), vec![2])].into()).is_empty(), "nothing above");
    }
}
