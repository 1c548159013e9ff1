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

use crate::attribution::Place;
use crate::bpf::AttachType;
use crate::bpf::query::Attached;
use crate::bpf::sys::CgroupLinkInfo;
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

/// What re-reading a cgroup after an event must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the event's cgroup came from the kernel's own objects.
    None,
    /// The program the call attached, on the hook it named.
    Holds { prog_id: u32, hook: AttachType },
    /// Something gone that the picture had: what the call detached.
    Removes,
    /// A cgroup link the kernel has begun to release or detach (the
    /// programs see its entry, before the kernel takes cgroup_mutex): the
    /// reading must list fewer than `copies` copies of its program on its
    /// hook, the program's other copies staying. `copies` is what the
    /// picture held at the event, less the releases of the same program on
    /// the same hook still to be borne out (0: unknown to the picture). A
    /// link's id is freed before its release takes it off the hook
    /// (`bpf_link_free`), so a gone id does not say the release is done: a
    /// reading that still lists every copy is made again shortly
    /// (`Picture::release_read`).
    Released { prog_id: u32, hook: AttachType, link_id: u32, copies: u32 },
}

/// How many times a released link's hook is read again before a full pass
/// is asked for instead: with `Schedule::read_again`'s backoff, about 8 s.
pub const RELEASE_TRIES: u32 = 12;

/// What follows a reading made for a release (`Picture::release_read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseNext {
    /// Borne out, or no longer pending: nothing.
    Done,
    /// Not yet: read its hook again, after this many tries.
    Again(u32),
    /// Never borne out: a full pass tells.
    GiveUp,
}

/// A release the picture emitted a check for and no reading has borne out.
#[derive(Debug, Clone, Copy)]
struct Pending {
    cgroup_id: u64,
    check: Check,
    tries: u32,
}

impl Check {
    /// Whether a reading bears the event out: `before` is what the picture
    /// held on the hooks read, `now` what the kernel lists on them.
    pub fn holds(self, before: &[Attached], now: &[Attached]) -> bool {
        match self {
            Check::None => true,
            Check::Holds { prog_id, hook } => now.iter().any(|a| a.prog_id == prog_id && a.attach_type == hook),
            Check::Removes => !before.is_empty(),
            Check::Released { prog_id, hook, copies, .. } => {
                // Unknown to the picture: nothing it holds can be stale.
                copies == 0
                    || now.iter().filter(|a| a.prog_id == prog_id && a.attach_type == hook).count() < copies as usize
            }
        }
    }
}

/// What applying a sweep to the tree did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// cgroups added, to be read again a moment later (runtimes attach
    /// their device programs right after the mkdir).
    pub made: Vec<u64>,
    /// Whether the findings may differ now.
    pub findings: bool,
    /// A cgroup the sweep saw but could not place: a full pass is due.
    pub unplaced: bool,
    /// cgroups removed, added, or whose processes came or went.
    pub changes: u64,
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
}

impl Picture {
    /// The picture of a full pass (made with `ScanOptions::tree_max`).
    pub fn new(mut snap: Snapshot) -> Picture {
        let tree = snap.tree.take();
        let root_own = tree.as_ref().and_then(|t| t.get(t.root())).map(|n| own_level(&n.own)).unwrap_or_default();
        let above = Level::above(&root_own, &snap.root_effective);
        Picture { snap, tree, above, stale: false, generation: 0, tree_max: usize::MAX, releasing: HashMap::new() }
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

    /// The pods' interfaces as read now, their programs named from the
    /// picture's; whether what was read changed (when it was read aside).
    pub fn set_pod_networks(&mut self, mut nets: crate::iface::PodNetworks) -> bool {
        use crate::iface::Net;
        nets.name_programs(&self.snap.programs);
        let old = &self.snap.pod_networks;
        // A read that failed, or a pod or interface it could not read, keeps
        // the last good reading: a gap must not clear a verdict (nor the
        // alert's `for:` start again).
        if nets.error.is_some() {
            nets.pods = old.pods.clone();
            nets.configured = old.configured.clone();
        }
        let unread = |p: &crate::iface::PodNet| match &p.net {
            Net::Unreadable { .. } => true,
            Net::Interfaces { interfaces } => interfaces.iter().any(|i| !i.errors.is_empty()),
            _ => false,
        };
        for p in nets.pods.iter_mut().filter(|p| unread(p)) {
            if let Some(last) = old.pods.iter().find(|q| q.pod_uid == p.pod_uid && !unread(q)) {
                *p = last.clone();
            }
        }
        // What the pods still here had, at this read or an earlier one.
        let here: HashSet<&str> = nets.pods.iter().map(|p| p.pod_uid.as_str()).collect();
        let mut had: std::collections::BTreeSet<(String, crate::owner::Owner, u32)> =
            old.had_programs.iter().filter(|(uid, ..)| here.contains(uid.as_str())).cloned().collect();
        had.extend(crate::findings::outside_datapath::managed(old).filter(|(uid, ..)| here.contains(uid.as_str())));
        nets.had_programs = had;
        let changed = nets.error != old.error
            || nets.agents != old.agents
            || nets.configured != old.configured
            || nets.pods != old.pods
            || nets.had_programs != old.had_programs;
        self.snap.pod_networks = nets;
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// Carries what the pods' interfaces had at the last picture's reads
    /// into this one's (a full pass starts a new picture), as if the old
    /// read had come just before this one.
    pub fn keep_pod_history(&mut self, old: &crate::iface::PodNetworks) {
        let before = crate::iface::PodNetworks {
            pods: old.pods.clone(),
            had_programs: old.had_programs.clone(),
            ..Default::default()
        };
        let fresh = std::mem::replace(&mut self.snap.pod_networks, before);
        self.set_pod_networks(fresh);
    }

    /// The owners' agents running now; whether they changed.
    pub fn set_agents(&mut self, agents: Vec<crate::snapshot::AgentProcess>) -> bool {
        let changed = agents != self.snap.agents;
        if changed {
            self.snap.agents = agents;
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

    /// Takes the cgroup links the kernel lists now (a sweep: a link whose
    /// last fd was closed makes no bpf(2) call); returns the cgroups whose
    /// links changed, to read again.
    pub fn reconcile_links(&mut self, mut now: Vec<CgroupLinkInfo>) -> Vec<u64> {
        now.sort_by_key(|l| l.link_id);
        let mut before = self.snap.cgroup_links.clone();
        before.sort_by_key(|l| l.link_id);
        if now == before {
            return Vec::new();
        }
        // Hash sets: a node may hold tens of thousands of links.
        let (had, has): (HashSet<&CgroupLinkInfo>, HashSet<&CgroupLinkInfo>) =
            (before.iter().collect(), now.iter().collect());
        let mut touched: Vec<u64> = had
            .difference(&has)
            .chain(has.difference(&had))
            .map(|l| l.cgroup_id)
            .filter(|&id| id != 0 && self.known(id))
            .collect();
        drop((had, has));
        touched.sort_unstable();
        touched.dedup();
        self.snap.cgroup_links = now;
        self.changed();
        touched
    }

    /// Replaces what the picture holds for hooks of one cgroup with what
    /// the kernel lists now (`hooks`: the hooks read; `attached`: their
    /// programs), and the cgroup's processes when they were read. Returns
    /// the programs removed and added, and whether findings may differ.
    pub fn set_hook(
        &mut self,
        cgroup_id: u64,
        hooks: &[AttachType],
        attached: &[Attached],
        processes: Option<Vec<ProcessRef>>,
    ) -> (Vec<Attached>, Vec<Attached>, bool) {
        let Some(tree) = self.tree.as_mut() else { return (Vec::new(), Vec::new(), false) };
        let Some(before) = tree.get(cgroup_id).map(|n| own_level(&n.own)) else {
            return (Vec::new(), Vec::new(), false);
        };
        let Some((removed, added)) = tree.set_own(cgroup_id, hooks, attached, processes) else {
            return (Vec::new(), Vec::new(), false);
        };
        let now = tree.get(cgroup_id).map(|n| own_level(&n.own)).unwrap_or_default();
        let coverage_changed = now != before;
        if cgroup_id == tree.root() && coverage_changed {
            // What the kernel has in effect at the root now: its own
            // programs and, as the full pass found them, those from above.
            self.snap.root_effective = coverage::effective([&now, &self.above]);
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
        (removed, added, findings)
    }

    /// The releases on `cgroup_id` no reading has borne out yet.
    pub fn releases_on(&self, cgroup_id: u64) -> Vec<Check> {
        let mut v: Vec<_> = self.releasing.values().filter(|p| p.cgroup_id == cgroup_id).map(|p| p.check).collect();
        v.sort_by_key(|c| match c {
            Check::Released { link_id, .. } => *link_id,
            _ => 0,
        });
        v
    }

    /// A reading made for `check` (a release) did or did not bear it out
    /// (`borne`): what follows.
    pub fn release_read(&mut self, check: Check, borne: bool) -> ReleaseNext {
        let Check::Released { link_id, .. } = check else { return ReleaseNext::Done };
        let Some(p) = self.releasing.get_mut(&link_id) else { return ReleaseNext::Done };
        if borne {
            self.releasing.remove(&link_id);
            return ReleaseNext::Done;
        }
        p.tries += 1;
        if p.tries >= RELEASE_TRIES {
            self.releasing.remove(&link_id);
            return ReleaseNext::GiveUp;
        }
        ReleaseNext::Again(p.tries)
    }

    /// `cgroup_id` could not be read (gone, or out of the picture): none of
    /// its releases can be borne out any more.
    pub fn releases_dropped(&mut self, cgroup_id: u64) {
        self.releasing.retain(|_, p| p.cgroup_id != cgroup_id);
    }

    /// The most programs one cgroup holds on `hook` (without the tree: as
    /// the last placing saw).
    pub fn most_on(&self, hook: AttachType) -> usize {
        match &self.tree {
            Some(t) => t.most_on(hook),
            None => crate::findings::hook_counts(&self.snap)
                .into_iter()
                .filter(|((_, h), _)| *h == hook)
                .map(|(_, (n, _))| n)
                .max()
                .unwrap_or(0),
        }
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

    /// Makes the tree what a sweep saw (`seen`, parents first; `named`: the
    /// names of the cgroups made since `max_id`): cgroups gone are removed,
    /// new ones added, and whether processes are in each is taken as seen.
    /// The sweep is the only word the sources without cgroup events have
    /// of the tree between full passes.
    pub fn after_sweep(&mut self, seen: &[crate::daemon::sweep::Seen], named: &HashMap<u64, Vec<u8>>) -> Swept {
        let mut out = Swept::default();
        let Some(tree) = self.tree.as_ref() else { return out };
        let now: HashSet<u64> = seen.iter().map(|s| s.id).collect();
        let gone: Vec<u64> = tree.ids().filter(|id| !now.contains(id)).collect();
        for id in gone {
            if let Effect::Applied { findings } = self.removed(id) {
                out.findings |= findings;
                out.changes += 1;
            }
        }
        for s in seen {
            let Some(tree) = self.tree.as_mut() else { return out };
            if tree.contains(s.id) {
                if let Some(p) = s.populated
                    && self.populated_now(s.id, p)
                {
                    out.findings |= self.in_kube(s.id);
                    out.changes += 1;
                }
                continue;
            }
            let Some(name) = named.get(&s.id) else {
                // New to the picture, yet not new to the kernel: only a
                // full pass can say where it belongs.
                out.unplaced = true;
                continue;
            };
            match self.made(s.id, s.parent, name, s.populated.unwrap_or(true)) {
                Effect::Applied { findings } => {
                    out.made.push(s.id);
                    out.findings |= findings;
                    out.changes += 1;
                }
                Effect::Unplaced => out.unplaced = true,
                _ => {}
            }
        }
        out
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
        self.tree
            .as_ref()
            .and_then(|t| t.get(id))
            .is_some_and(|n| matches!(n.place, Place::Pod { .. } | Place::InPod { .. }))
    }

    /// The ids of the cgroups whose own programs differ from the sweep's.
    pub fn differing(&self, swept: &HashMap<u64, Vec<Attached>>) -> Vec<u64> {
        let key = |a: &Attached| (a.attach_type, a.prog_id, a.flags as u8);
        let mut mine: HashMap<u64, Vec<(AttachType, u32, u8)>> = HashMap::new();
        match &self.tree {
            Some(t) => t.each(|r, _| {
                if !r.own.is_empty() {
                    mine.insert(r.id, r.own.iter().map(key).collect());
                }
            }),
            None => {
                for a in &self.snap.attachments {
                    mine.entry(a.cgroup_id).or_default().push((a.attach_type, a.prog_id, a.attach_flags as u8));
                }
            }
        }
        let mut differ: Vec<u64> = Vec::new();
        for (id, progs) in swept {
            let mut theirs: Vec<_> = progs.iter().map(key).collect();
            theirs.sort_unstable();
            let ours = mine.remove(id).map(|mut v| {
                v.sort_unstable();
                v
            });
            if ours.as_ref() != Some(&theirs) {
                differ.push(*id);
            }
        }
        // Whatever the picture still has, the sweep found gone.
        differ.extend(mine.into_keys());
        differ.sort_unstable();
        differ
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
#[cfg(test)]
mod tests;
