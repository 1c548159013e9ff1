//! The daemon's picture of the node: the last full pass's `Snapshot` and
//! its `Tree`, kept current by the kernel's change events instead of
//! re-reading the tree.
//!
//! Pure: events in, changes to the tree out. What needs the kernel (reading
//! a cgroup's hooks again, a new program's name) the picture asks for in
//! its `Effect`, and the worker answers with `set_hook`. A `bpf(2)` call's
//! event only says which cgroup to read again: what it changed is what the
//! kernel lists afterwards, never what the call's arguments said. The
//! report's pods, containers and attachments are placed from the tree by
//! the full pass's own rules (`placement`), when the snapshot is next
//! asked for.

use std::collections::{HashMap, HashSet};

use crate::bpf::AttachType;
use crate::bpf::query::Attached;
use crate::cgroup::tree::{Node, ProcessRef, Tree};
use crate::coverage::{self, Level};
use crate::event::Event;
use crate::placement::{self, Access, Placement};
use crate::snapshot::{Names, Snapshot};

/// The most of a path kept per event and per caller (a cgroup 4,000 levels
/// down has a path of a megabyte).
pub const SHOWN_MAX: usize = 4096;

/// What the worker must do after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing on the audited tree changed (an event elsewhere on the node).
    Nothing,
    /// Applied; `findings` says whether the findings may differ now.
    Applied { findings: bool },
    /// A cgroup added to the tree: what follows a new cgroup is due
    /// (`Schedule::new_cgroup`; runtimes attach their device programs and
    /// move processes in right after the mkdir).
    Made { cgroup_id: u64, findings: bool },
    /// Read this cgroup's hooks again and hand them to `set_hook`; fetch
    /// `programs` not yet known (or not by their full name). `check`: what
    /// the reading must show, when the event named its cgroup only through
    /// the caller's file descriptor (another of its threads may have swapped
    /// it): if it does not, the event was about another cgroup, and only a
    /// full pass can tell which.
    Reread { cgroup_id: u64, programs: Vec<u32>, check: Check },
    /// A change the picture cannot place (a cgroup call whose target was not
    /// readable): only a full pass can tell what changed.
    Unplaced,
}

/// What one reading of a cgroup's hooks changed (`Picture::set_hook`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct HookRead {
    /// What the picture held on the hooks read, and what the kernel lists.
    pub removed: Vec<Attached>,
    pub added: Vec<Attached>,
    /// Whether the findings may differ now.
    pub findings: bool,
    /// The reading does not show what its event's check asked.
    pub unconfirmed: bool,
    /// What follows.
    pub then: ReleaseNext,
    /// The hooks whose largest count on one cgroup moved, and to what.
    pub hook_max: Vec<(AttachType, usize)>,
}

/// A cgroup of the tree, as placing it asks: what was read of it last.
struct Stored<'a>(&'a Node);

impl Access for Stored<'_> {
    fn populated(&self) -> bool {
        self.0.populated
    }

    fn processes(&self) -> Vec<ProcessRef> {
        self.0.processes.clone().unwrap_or_default()
    }
}

pub struct Picture {
    snap: Snapshot,
    /// Every cgroup of the audited tree. Without it (a tree past
    /// `--max-cgroups`, or dropped for a full pass) events cannot be placed:
    /// those about cgroups ask for a full pass.
    tree: Option<Tree>,
    /// What runs from above the audit root (from the full pass).
    above: Level,
    /// The tree changed since the snapshot's pods and attachments were
    /// placed.
    stale: bool,
    /// Bumped on every change: what a rendered report was made from.
    generation: u64,
    /// `--max-cgroups`: past it between full passes too, the tree goes.
    tree_max: usize,
    /// Releases not yet borne out, by link id.
    releasing: HashMap<u32, Pending>,
    /// The most programs one cgroup holds on each hook read since the full
    /// pass (`metrics::hook_programs_max`), as readings moved it.
    hook_max: HashMap<AttachType, usize>,
    /// When the node's devices were last read whole (unix seconds).
    devices_read_at: Option<u64>,
}

impl Picture {
    /// The picture of a full pass (made with `ScanOptions::tree_max`).
    pub fn new(mut snap: Snapshot) -> Picture {
        let devices_read_at = snap.devices.error.is_none().then_some(snap.pod_networks.read_at);
        let tree = snap.tree.take();
        let root_own = tree.as_ref().and_then(|t| t.get(t.root())).map(|n| own_level(&n.own)).unwrap_or_default();
        let above = Level::above(&root_own, &snap.root_effective);
        Picture {
            snap,
            tree,
            above,
            stale: false,
            generation: 0,
            tree_max: usize::MAX,
            releasing: HashMap::new(),
            hook_max: HashMap::new(),
            devices_read_at,
        }
    }

    /// Keeps the tree only while it holds at most `max` cgroups: cgroups
    /// made between full passes count too.
    pub fn limit_tree(&mut self, max: usize) {
        self.tree_max = max;
    }

    /// The snapshot, its pods and attachments placed from the tree as it is.
    pub fn snapshot(&mut self) -> &Snapshot {
        self.place();
        &self.snap
    }

    /// The snapshot as last placed (what does not come from the tree is
    /// always current: programs, links, names, agents, mounts).
    pub fn last(&self) -> &Snapshot {
        &self.snap
    }

    /// Places the report's part of the tree again, if the tree changed.
    fn place(&mut self) {
        let Some(tree) = self.tree.as_ref().filter(|_| self.stale) else { return };
        let wanted = HashSet::new();
        let mut placement = Placement::new(tree.root(), &self.snap.root_effective, &wanted);
        tree.each(|r, n| {
            placement.add(r, &Stored(n));
        });
        let placed = placement.finish();
        self.snap.attachments = placed.attachments;
        placement::link_attachments(&mut self.snap.attachments, &self.snap.cgroup_links);
        self.snap.pods = placed.pods;
        self.snap.processes = placed.processes;
        self.snap.cgroups_scanned = tree.len() as u64;
        self.stale = false;
    }

    fn changed(&mut self) {
        self.stale = true;
        self.generation += 1;
    }

    /// Whether the picture holds the tree, so that events can be placed.
    pub fn tracked(&self) -> bool {
        self.tree.is_some()
    }

    /// Lets the tree go (before a full pass makes the next one, so that
    /// two are never held at once).
    pub fn drop_tree(&mut self) {
        self.place();
        self.tree = None;
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The names of what the findings are about (see `scan::names`);
    /// whether they changed.
    pub fn set_names(&mut self, names: Names) -> bool {
        let changed = names != self.snap.names;
        if changed {
            self.snap.names = names;
            self.generation += 1;
        }
        changed
    }

    /// The owners' agents running now; whether they changed.
    pub fn set_agents(&mut self, agents: Vec<crate::snapshot::AgentProcess>) -> bool {
        let changed = agents != self.snap.agents;
        if changed {
            self.snap.agents = agents;
            // What they hold proves programs on hooks theirs.
            self.snap.prove_hooks();
            self.generation += 1;
        }
        changed
    }

    /// PID 1's cgroup2 mounts as they are now, their tops named by the
    /// picture's tree; whether they changed.
    pub fn set_mounts(&mut self, mut mounts: Vec<crate::snapshot::CgroupMount>) -> bool {
        for m in &mut mounts {
            if let crate::snapshot::MountTop::Known { cgroup_id, cgroup } = &mut m.top {
                *cgroup = self.path(*cgroup_id);
            }
        }
        let changed = mounts != self.snap.mounts;
        if changed {
            self.snap.mounts = mounts;
            self.generation += 1;
        }
        changed
    }

    /// Keeps the recent events, for "who attached what".
    pub fn set_events(&mut self, events: Vec<Event>) {
        for id in events.iter().map(|e| e.caller_cgroup_id) {
            if let Some(p) = self.path_within(id, SHOWN_MAX) {
                self.snap.cgroup_paths.insert(id, p);
            }
        }
        self.snap.events = events;
    }

    /// The path of a cgroup of the audited tree, relative to its root
    /// (shown: for output only).
    pub fn path(&self, id: u64) -> Option<String> {
        if id == self.snap.root.cgroup_id {
            return Some("/".into());
        }
        self.tree.as_ref()?.path(id)
    }

    /// The path of a cgroup, in at most about `max` bytes (`Tree::path_within`).
    pub fn path_within(&self, id: u64, max: usize) -> Option<String> {
        if id == self.snap.root.cgroup_id {
            return Some("/".into());
        }
        self.tree.as_ref()?.path_within(id, max)
    }

    /// The names from the root down to cgroup `id`, to open it by.
    pub fn names(&self, id: u64) -> Option<Vec<&[u8]>> {
        self.tree.as_ref()?.names(id)
    }

    fn known(&self, id: u64) -> bool {
        self.tree.as_ref().is_some_and(|t| t.contains(id))
    }

    /// Replaces what the picture holds for hooks of one cgroup with what
    /// the kernel lists now (`hooks`: the hooks read; `attached`: their
    /// programs), and the cgroup's processes when they were read; `check`:
    /// what the reading must show of the event that asked for it. What the
    /// reading changed, and what follows it.
    pub fn set_hook(
        &mut self,
        cgroup_id: u64,
        hooks: &[AttachType],
        attached: &[Attached],
        processes: Option<Vec<ProcessRef>>,
        check: Check,
    ) -> HookRead {
        let mut r = self.replace_hooks(cgroup_id, hooks, attached, processes);
        r.unconfirmed = !check.holds(&r.removed, attached);
        r.then = match (check, r.unconfirmed) {
            (Check::Released { .. }, unconfirmed) => self.release_read(check, !unconfirmed),
            (_, true) => ReleaseNext::GiveUp,
            (_, false) => ReleaseNext::Done,
        };
        r
    }

    fn replace_hooks(
        &mut self,
        cgroup_id: u64,
        hooks: &[AttachType],
        attached: &[Attached],
        processes: Option<Vec<ProcessRef>>,
    ) -> HookRead {
        let Some(tree) = self.tree.as_mut() else { return HookRead::default() };
        let Some(before) = tree.get(cgroup_id).map(|n| own_level(&n.own)) else { return HookRead::default() };
        // The largest count per hook before: the full pass published it.
        for &t in hooks {
            self.hook_max.entry(t).or_insert_with(|| tree.most_on(t));
        }
        let Some((removed, added)) = tree.set_own(cgroup_id, hooks, attached, processes) else {
            return HookRead::default();
        };
        let now = tree.get(cgroup_id).map(|n| own_level(&n.own)).unwrap_or_default();
        let coverage_changed = now != before;
        if cgroup_id == tree.root() && coverage_changed {
            // What the kernel has in effect at the root now: its own
            // programs and, as the full pass found them, those from above.
            self.snap.root_effective = coverage::effective([&now, &self.above]);
        }
        // The largest count per hook: raised at once; counted again over the
        // tree only when the cgroup that held it shrank.
        let mut hook_max = Vec::new();
        for &t in hooks {
            let n = |v: &[Attached]| v.iter().filter(|a| a.attach_type == t).count();
            let (old, new) = (n(&removed), n(&added));
            let max = self.hook_max.get(&t).copied().unwrap_or(0);
            let now = if new > max {
                new
            } else if old == max && new < old {
                tree.most_on(t)
            } else {
                continue;
            };
            if now != max {
                self.hook_max.insert(t, now);
                hook_max.push((t, now));
            }
        }
        self.changed();
        // Any hook near the kernel's limit, before or after, is judged again
        // (hook_program_count_high), whoever owns its programs.
        let crowded = hooks.iter().any(|&t| {
            let n = |v: &[Attached]| v.iter().filter(|a| a.attach_type == t).count();
            n(&removed).max(n(&added)) >= crate::findings::HOOK_PROGRAMS_WARN
        });
        let findings = removed.iter().chain(&added).any(|a| crate::owner::is_root_hook(a.attach_type))
            || coverage_changed
            || crowded;
        HookRead { removed, added, findings, hook_max, ..HookRead::default() }
    }

    /// cgroups in the tree the picture holds, the root included (without
    /// the tree: as many as the full pass saw).
    pub fn cgroups(&self) -> u64 {
        match &self.tree {
            Some(t) => t.len() as u64,
            None => self.snap.cgroups_scanned,
        }
    }

    /// The largest cgroup id the tree holds: a sweep names the cgroups above
    /// it, those made since (None without the tree).
    pub fn max_id(&self) -> Option<u64> {
        self.tree.as_ref().map(Tree::max_id)
    }

    /// Whether cgroup `id` holds processes (in it or below), as read now;
    /// true when the findings may have changed (the pods' containers).
    pub fn set_populated(&mut self, id: u64, populated: bool) -> bool {
        self.populated_now(id, populated) && self.in_kube(id)
    }

    /// True when `populated` changed what the tree held.
    fn populated_now(&mut self, id: u64, populated: bool) -> bool {
        let changed = self.tree.as_mut().is_some_and(|t| t.set_populated(id, populated));
        if changed {
            self.changed();
        }
        changed
    }

    fn in_kube(&self, id: u64) -> bool {
        self.tree.as_ref().and_then(|t| t.get(id)).is_some_and(|n| n.place.in_kube())
    }

    /// Adds programs the worker read for `Effect::Reread`.
    pub fn add_programs(&mut self, programs: impl IntoIterator<Item = crate::bpf::programs::Program>) {
        for p in programs {
            self.snap.programs.insert(p.id, p);
        }
        self.generation += 1;
    }
}

/// A cgroup's programs on the coverage hooks.
fn own_level(own: &[Attached]) -> Level {
    Level::of(own.iter().map(|a| (a.attach_type, a.flags, a.prog_id)))
}

mod apply;
mod pods;
mod releases;
mod sweep;
#[cfg(test)]
mod tests;

use releases::Pending;
pub use releases::{Check, ReleaseNext};
