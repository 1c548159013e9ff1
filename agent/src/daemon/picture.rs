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
use crate::daemon::sweep::Sweep;
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

/// What follows a reading (`Reading::then`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseNext {
    /// Borne out, or no longer pending: nothing.
    #[default]
    Done,
    /// A release not yet borne out: read its hook again, after this many
    /// tries.
    Again(u32),
    /// Not borne out (a release: after its tries): the event was about
    /// another cgroup, or the picture missed a change; a full pass tells.
    GiveUp,
}

/// What one reading of a cgroup's hooks changed (`Picture::set_hook`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reading {
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

/// A release the picture emitted a check for and no reading has borne out.
#[derive(Debug, Clone, Copy)]
struct Pending {
    cgroup_id: u64,
    check: Check,
    tries: u32,
}

impl Check {
    /// The one hook a reading that must bear this check out reads now
    /// (`call_hook`: the hook the event's call named): the check's own, or
    /// for a detach the call's. `None`: every hook.
    pub fn hook(self, call_hook: Option<AttachType>) -> Option<AttachType> {
        match self {
            Check::Holds { hook, .. } | Check::Released { hook, .. } => Some(hook),
            Check::Removes => call_hook,
            Check::None => None,
        }
    }

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
}

impl Picture {
    /// The picture of a full pass (made with `ScanOptions::tree_max`).
    pub fn new(mut snap: Snapshot) -> Picture {
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

    /// Whether a pod of the last interface read is young enough that its
    /// verdict comes with time (within `grace` of its start, and one read
    /// after), on a node with a datapath to be outside of.
    pub fn pods_within_grace(&self, grace: std::time::Duration) -> bool {
        let nets = &self.snap.pod_networks;
        let grace = grace.as_secs() + crate::daemon::schedule::INTERFACES.as_secs();
        nets.pods.iter().any(|p| p.started.is_some_and(|s| nets.read_at.saturating_sub(s) <= grace))
            && !crate::findings::outside_datapath::datapaths(&self.snap).is_empty()
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
    ) -> Reading {
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
    ) -> Reading {
        let Some(tree) = self.tree.as_mut() else { return Reading::default() };
        let Some(before) = tree.get(cgroup_id).map(|n| own_level(&n.own)) else { return Reading::default() };
        // The largest count per hook before: the full pass published it.
        for &t in hooks {
            self.hook_max.entry(t).or_insert_with(|| tree.most_on(t));
        }
        let Some((removed, added)) = tree.set_own(cgroup_id, hooks, attached, processes) else {
            return Reading::default();
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
        Reading { removed, added, findings, hook_max, ..Reading::default() }
    }

    /// The readings a cgroup read again (`Schedule::read_again`) gets:
    /// each release on it not yet borne out, of its own hook with its own
    /// check; with none, every hook and no check.
    pub fn readings_again(&self, cgroup_id: u64) -> Vec<(Check, Option<AttachType>)> {
        let releases: Vec<_> = self.releases_on(cgroup_id).into_iter().map(|c| (c, c.hook(None))).collect();
        if releases.is_empty() { vec![(Check::None, None)] } else { releases }
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
    fn release_read(&mut self, check: Check, borne: bool) -> ReleaseNext {
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

    /// Makes the picture what a sweep saw, and says what follows. With
    /// the tree: cgroups gone are removed, those it named (made since
    /// `max_id`) added, whether processes are in each taken as seen; a
    /// cgroup it saw but could not place is `Unplaced`; the cgroups whose
    /// own programs or links (`links`: what the kernel lists now, when it
    /// could be read) differ from the picture's are read again. Without
    /// the tree nothing can be read again by path: any difference in the
    /// count of cgroups or links, or in any cgroup's programs, is
    /// `Unplaced`. A count that did not move proves nothing, so the
    /// programs are compared too. The sweep is the only word the sources
    /// without cgroup events have of the tree between full passes.
    pub fn after_sweep(&mut self, sweep: &Sweep, links: Option<Vec<CgroupLinkInfo>>) -> Vec<Effect> {
        if self.tree.is_none() {
            let links_differ = links.is_some_and(|l| l.len() != self.snap.cgroup_links.len());
            let differ = sweep.cgroups != self.cgroups() || links_differ || !self.differing(&sweep.attached).is_empty();
            return if differ { vec![Effect::Unplaced] } else { Vec::new() };
        }
        let mut out = Vec::new();
        let mut unplaced = false;
        let now: HashSet<u64> = sweep.seen.iter().map(|s| s.id).collect();
        let gone: Vec<u64> = self.tree.iter().flat_map(|t| t.ids()).filter(|id| !now.contains(id)).collect();
        for id in gone {
            let e = self.removed(id);
            if e != Effect::Nothing {
                out.push(e);
            }
        }
        for s in &sweep.seen {
            let Some(tree) = self.tree.as_mut() else { break };
            if tree.contains(s.id) {
                if let Some(p) = s.populated
                    && self.populated_now(s.id, p)
                {
                    out.push(Effect::Applied { findings: self.in_kube(s.id) });
                }
                continue;
            }
            // New to the picture, yet not named (not new to the kernel):
            // only a full pass can say where it belongs.
            let e = match sweep.named.get(&s.id) {
                Some(name) => self.made(s.id, s.parent, name, s.populated.unwrap_or(true)),
                None => Effect::Unplaced,
            };
            match e {
                Effect::Unplaced => unplaced = true,
                Effect::Nothing => {}
                e => out.push(e),
            }
        }
        if unplaced {
            out.push(Effect::Unplaced);
        }
        if self.tree.is_none() {
            // Dropped on the way (past --max-cgroups): the full pass asked
            // for tells the rest.
            return out;
        }
        let mut differ = self.differing(&sweep.attached);
        if let Some(links) = links {
            differ.extend(self.reconcile_links(links));
        }
        differ.sort_unstable();
        differ.dedup();
        out.extend(differ.into_iter().map(|cgroup_id| Effect::Reread {
            cgroup_id,
            programs: Vec::new(),
            check: Check::None,
        }));
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
