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
use crate::bpf::query::Attached;
use crate::bpf::sys::CgroupLinkInfo;
use crate::bpf::{AttachType, BpfCommand};
use crate::cgroup::tree::{Node, ProcessRef, Record, Tree};
use crate::coverage::{self, Level};
use crate::placement::{self, Access, Placement};
use crate::snapshot::{Change, Event, Hints, Names, Snapshot};

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
    /// programs see its entry): its program leaves the hook whatever a
    /// reading made meanwhile lists, since the kernel takes cgroup_mutex
    /// only after the event is sent and a query may get it first.
    Released { prog_id: u32, hook: AttachType },
}

impl Check {
    /// Whether a reading that removed `removed` and added or kept
    /// `now` (the hook's programs as listed now) bears the event out.
    pub fn holds(self, removed: &[Attached], now: &[Attached]) -> bool {
        match self {
            Check::None => true,
            Check::Holds { prog_id, hook } => now.iter().any(|a| a.prog_id == prog_id && a.attach_type == hook),
            Check::Removes => !removed.is_empty(),
            Check::Released { .. } => true,
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
    /// cgroups made or removed so far (the tree's count moved).
    tree_changes: u64,
    /// `--max-cgroups`: past it between full passes too, the tree goes.
    tree_max: usize,
}

impl Picture {
    /// The picture of a full pass (made with `ScanOptions::tree_max`).
    pub fn new(mut snap: Snapshot) -> Picture {
        let tree = snap.tree.take();
        let root_own = tree.as_ref().and_then(|t| t.get(t.root())).map(|n| own_level(&n.own)).unwrap_or_default();
        let above = Level::above(&root_own, &snap.root_effective);
        Picture { snap, tree, above, stale: false, generation: 0, tree_changes: 0, tree_max: usize::MAX }
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

    /// How many cgroups were made or removed in the tree so far.
    pub fn tree_changes(&self) -> u64 {
        self.tree_changes
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

    /// The CNI agents running now; whether they changed.
    pub fn set_cni_processes(&mut self, agents: Vec<crate::snapshot::CniProcess>) -> bool {
        let changed = agents != self.snap.cni_processes;
        if changed {
            self.snap.cni_processes = agents;
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

    /// Applies one event.
    pub fn apply(&mut self, e: &Event) -> Effect {
        if self.tree.is_none() {
            return self.untracked(e);
        }
        match &e.change {
            Change::CgroupMade { cgroup_id, parent_id, name } => self.made(*cgroup_id, *parent_id, name),
            Change::CgroupRemoved { cgroup_id } => self.removed(*cgroup_id),
            Change::BpfCall { hints, .. } if hints.contains(Hints::UNREAD) => Effect::Unplaced,
            Change::BpfCall { command, cgroup_id, attach_type, prog_id, link_id, hints, .. } => {
                // A link's cgroup as the picture knows it, when the call did
                // not name one (a defunct link, or an unreadable fd).
                let known_link =
                    link_id.and_then(|id| self.snap.cgroup_links.iter().find(|l| l.link_id == id)).copied();
                let cgroup = cgroup_id.or(known_link.map(|l| l.cgroup_id).filter(|&id| id != 0));
                match (command, link_id) {
                    (BpfCommand::LinkCreate, Some(link)) => {
                        if let (Some(cg), Some(t), Some(prog)) = (cgroup, attach_type, prog_id) {
                            self.snap.cgroup_links.retain(|l| l.link_id != *link);
                            self.snap.cgroup_links.push(CgroupLinkInfo {
                                link_id: *link,
                                prog_id: *prog,
                                cgroup_id: cg,
                                attach_type: t.kernel_value(),
                            });
                            self.changed();
                        }
                    }
                    (BpfCommand::LinkDetach, Some(link)) => {
                        // The link object lives on while pinned or held: defunct.
                        let mut any = false;
                        for l in self.snap.cgroup_links.iter_mut().filter(|l| l.link_id == *link) {
                            l.cgroup_id = 0;
                            any = true;
                        }
                        if any {
                            self.changed();
                        }
                    }
                    (BpfCommand::LinkReleased, Some(link)) => {
                        // Its last reference went: the link is no more.
                        self.snap.cgroup_links.retain(|l| l.link_id != *link);
                        self.changed();
                    }
                    (BpfCommand::LinkUpdate, Some(link)) => {
                        for l in self.snap.cgroup_links.iter_mut().filter(|l| l.link_id == *link) {
                            if let Some(prog) = prog_id {
                                l.prog_id = *prog;
                            }
                        }
                    }
                    _ => {}
                }
                // What the reading must show, when the cgroup came through
                // the caller's fd.
                let released = match (command, known_link) {
                    (BpfCommand::LinkReleased | BpfCommand::LinkDetach, Some(l)) if l.cgroup_id != 0 => {
                        AttachType::from_kernel(l.attach_type).map(|hook| Check::Released { prog_id: l.prog_id, hook })
                    }
                    _ => None,
                };
                let check = match (command, prog_id, attach_type) {
                    _ if released.is_some() => released.unwrap_or(Check::None),
                    _ if !hints.contains(Hints::CGROUP) => Check::None,
                    (BpfCommand::ProgAttach | BpfCommand::LinkCreate, Some(prog), Some(hook)) => {
                        Check::Holds { prog_id: *prog, hook: *hook }
                    }
                    (BpfCommand::ProgDetach, _, _) => Check::Removes,
                    _ => Check::None,
                };
                match cgroup {
                    Some(cg) if self.known(cg) => self.reread(cg, prog_id, check),
                    // Elsewhere on the node (outside the audited tree).
                    Some(_) => Effect::Nothing,
                    // A call on a cgroup hook, or on a cgroup link we know,
                    // whose cgroup could not be read: only a full pass tells.
                    None if command.names_hook() && attach_type.is_some() => Effect::Unplaced,
                    None if known_link.is_some() => Effect::Unplaced,
                    // Not a cgroup call (XDP, TCX, sockmap, flow dissector...).
                    None => Effect::Nothing,
                }
            }
        }
    }

    /// An event without the tree: a call about a cgroup (its hook, its
    /// cgroup, or one of its links) asks for a full pass; cgroups made and
    /// removed wait for the next one.
    fn untracked(&self, e: &Event) -> Effect {
        match &e.change {
            Change::CgroupMade { .. } | Change::CgroupRemoved { .. } => Effect::Nothing,
            Change::BpfCall { command, cgroup_id, attach_type, link_id, .. } => {
                let cgroup_link = link_id.is_some_and(|id| self.snap.cgroup_links.iter().any(|l| l.link_id == id));
                if cgroup_id.is_some() || (command.names_hook() && attach_type.is_some()) || cgroup_link {
                    Effect::Unplaced
                } else {
                    Effect::Nothing
                }
            }
        }
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
        let mut touched: Vec<u64> = before
            .iter()
            .filter(|b| !now.contains(b))
            .chain(now.iter().filter(|n| !before.contains(n)))
            .map(|l| l.cgroup_id)
            .filter(|&id| id != 0 && self.known(id))
            .collect();
        touched.sort_unstable();
        touched.dedup();
        self.snap.cgroup_links = now;
        self.changed();
        touched
    }

    fn reread(&self, cgroup_id: u64, prog: &Option<u32>, check: Check) -> Effect {
        // Programs the picture does not know, or knows only by a name the
        // full pass did not resolve (it was loaded, not yet attached).
        let programs =
            prog.iter().copied().filter(|id| self.snap.programs.get(id).is_none_or(|p| p.name_unresolved())).collect();
        Effect::Reread { cgroup_id, programs, check }
    }

    fn made(&mut self, id: u64, parent: u64, name: &[u8]) -> Effect {
        // A parent we do not know lies outside the audited tree (events we
        // lost are counted, and the worker reads the whole tree then).
        if self.tree.as_ref().is_some_and(|t| t.len() >= self.tree_max && !t.contains(id)) {
            // One more would pass --max-cgroups: the full pass this asks
            // for keeps none, as it would have at that count.
            self.drop_tree();
            return Effect::Unplaced;
        }
        let Some(tree) = self.tree.as_mut() else { return Effect::Nothing };
        if name.is_empty() || tree.contains(id) {
            return Effect::Nothing;
        }
        // A new cgroup is made to hold processes: below a pod, the pod's
        // container from now (and its parent one no more).
        if !tree.add(Record { id, parent, name, own: &[] }, true, None) {
            return Effect::Nothing;
        }
        let in_kube = tree.get(id).is_some_and(|n| matches!(n.place, Place::Pod { .. } | Place::InPod { .. }));
        self.tree_changes += 1;
        self.changed();
        Effect::Applied { findings: in_kube }
    }

    fn removed(&mut self, id: u64) -> Effect {
        let Some(node) = self.tree.as_mut().and_then(|t| t.remove(id)) else { return Effect::Nothing };
        self.tree_changes += 1;
        self.changed();
        let mut links = false;
        for l in self.snap.cgroup_links.iter_mut().filter(|l| l.cgroup_id == id) {
            l.cgroup_id = 0;
            links = true;
        }
        let in_kube = matches!(node.place, Place::Pod { .. } | Place::InPod { .. });
        let lb = node.own.iter().any(|a| a.attach_type.is_socket_lb());
        Effect::Applied { findings: lb || links || in_kube }
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
        let findings =
            removed.iter().chain(&added).any(|a| a.attach_type.is_socket_lb()) || coverage_changed || crowded;
        (removed, added, findings)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::AttachFlags;
    use crate::bpf::ProgType;
    use crate::bpf::programs::Program;
    use crate::fixtures::*;
    use crate::snapshot::Effective;

    const POD_UID: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";

    fn ev(change: Change) -> Event {
        Event { seq: 1, time_unix_ms: 1, change, pid: 7, tid: 7, comm: "runc".into(), caller_cgroup_id: 1 }
    }

    fn t(n: &str) -> AttachType {
        AttachType::from_name(n).unwrap()
    }

    fn connect4(e: &Effective) -> Vec<u32> {
        e.get(&t("connect4")).cloned().unwrap_or_default()
    }

    /// A node: root 1, /kubepods 2, /kubepods/burstable 3, one pod 4.
    fn picture() -> Picture {
        let mut s = node();
        s.pods.push(pod_cgroup(&format!("/kubepods/burstable/pod{POD_UID}"), 4, POD_UID, &[]));
        let mut tree = Tree::new(1);
        let pod = format!("pod{POD_UID}");
        for (id, parent, name) in [(2, 1, "kubepods"), (3, 2, "burstable"), (4, 3, pod.as_str())] {
            assert!(tree.add(Record { id, parent, name: name.as_bytes(), own: &[] }, false, None));
        }
        s.tree = Some(tree);
        Picture::new(s)
    }

    fn made(id: u64, parent: u64, name: &str) -> Event {
        ev(Change::CgroupMade { cgroup_id: id, parent_id: parent, name: name.as_bytes().to_vec() })
    }

    /// What is in effect for the pod (or its first container).
    fn pod_effective(p: &mut Picture) -> Effective {
        (*p.snapshot().pods[0].effective).clone()
    }

    /// cgroups made one by one between full passes count against
    /// --max-cgroups too: past it the tree goes, and a full pass is asked for.
    #[test]
    fn cgroups_made_past_the_limit_let_the_tree_go() {
        let mut p = picture();
        p.limit_tree(6);
        assert_eq!(p.apply(&made(5, 4, "c1")), Effect::Applied { findings: true });
        assert_eq!(p.apply(&made(6, 4, "c2")), Effect::Applied { findings: true });
        assert!(p.tracked());
        assert_eq!(p.apply(&made(7, 4, "c3")), Effect::Unplaced, "a 7th cgroup");
        assert!(!p.tracked());
    }

    /// Past --max-cgroups: no tree. A call about a cgroup asks for a full
    /// pass (it cannot be placed); cgroups made and removed wait for one.
    #[test]
    fn without_the_tree_a_cgroup_call_asks_for_a_full_pass() {
        let mut p = picture();
        p.drop_tree();
        assert!(!p.tracked());
        let call = |cgroup_id| {
            ev(Change::BpfCall {
                command: BpfCommand::ProgAttach,
                cgroup_id,
                attach_type: Some(t("connect4")),
                prog_id: Some(9),
                link_id: None,
                flags: 0,
                hints: Hints::default(),
            })
        };
        assert_eq!(p.apply(&call(Some(4))), Effect::Unplaced);
        assert_eq!(p.apply(&call(None)), Effect::Unplaced);
        assert_eq!(p.apply(&made(9, 4, "x")), Effect::Nothing);
        assert_eq!(p.path(4), None);
        assert_eq!(p.cgroups(), p.last().cgroups_scanned);
    }

    fn multi(hook: &str, prog_id: u32) -> Attached {
        Attached { attach_type: t(hook), flags: AttachFlags::Multi, prog_id }
    }

    fn call(command: BpfCommand, cgroup_id: Option<u64>, hook: &str, prog_id: u32, link_id: Option<u32>) -> Change {
        Change::BpfCall {
            command,
            cgroup_id,
            attach_type: AttachType::from_name(hook),
            prog_id: Some(prog_id),
            link_id,
            flags: 2,
            hints: Hints::CGROUP,
        }
    }

    fn all() -> Vec<AttachType> {
        AttachType::all().collect()
    }

    #[test]
    fn a_new_container_is_placed_by_its_parent_and_an_attach_asks_to_read_it_again() {
        let mut p = picture();
        let e = p.apply(&made(5, 4, "ctr"));
        assert_eq!(e, Effect::Applied { findings: true }, "a new container may lack what the pod has");
        assert_eq!(p.snapshot().pods[0].containers.iter().map(|c| c.cgroup_id).collect::<Vec<_>>(), [5]);
        let path = format!("/kubepods/burstable/pod{POD_UID}/ctr");
        assert_eq!(p.path(5).as_deref(), Some(path.as_str()));
        let e = p.apply(&ev(call(BpfCommand::ProgAttach, Some(5), "device", 90, None)));
        let check = Check::Holds { prog_id: 90, hook: t("device") };
        assert_eq!(e, Effect::Reread { cgroup_id: 5, programs: vec![90], check });
        let (removed, added, findings) = p.set_hook(5, &all(), &[multi("device", 90)], None);
        assert!(removed.is_empty() && added.len() == 1 && !findings, "a device program changes no finding");
        assert_eq!(p.snapshot().attachments.len(), 1);
        // Removed with its cgroup.
        assert_eq!(p.apply(&ev(Change::CgroupRemoved { cgroup_id: 5 })), Effect::Applied { findings: true });
        assert!(p.snapshot().pods[0].containers.is_empty());
        assert!(p.snapshot().attachments.is_empty());
        assert_eq!(p.path(5), None);
    }

    #[test]
    fn a_link_the_kernel_releases_leaves_its_hook_whatever_a_reading_meanwhile_lists() {
        let mut p = picture();
        // A link made on the pod's cgroup, then its last fd closed: the
        // release's event arrives before the kernel has taken it off the
        // hook, so the reading it asks for must not put it back.
        assert!(matches!(
            p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 90, Some(7)))),
            Effect::Reread { .. }
        ));
        let released = Change::BpfCall {
            command: BpfCommand::LinkReleased,
            cgroup_id: None,
            attach_type: None,
            prog_id: None,
            link_id: Some(7),
            flags: 0,
            hints: Hints::default(),
        };
        let check = Check::Released { prog_id: 90, hook: t("connect4") };
        assert_eq!(p.apply(&ev(released)), Effect::Reread { cgroup_id: 4, programs: vec![], check });
        assert!(check.holds(&[], &[multi("connect4", 90)]), "borne out even by a reading made before the release");
    }

    #[test]
    fn what_the_call_named_is_a_hint_what_the_kernel_lists_is_the_answer() {
        let mut p = picture();
        // The call said device; the kernel lists a connect4 program: the
        // picture holds what the kernel lists.
        let e = p.apply(&ev(call(BpfCommand::ProgAttach, Some(4), "device", 90, None)));
        assert!(matches!(e, Effect::Reread { cgroup_id: 4, .. }));
        let (_, added, findings) = p.set_hook(4, &all(), &[multi("connect4", 91)], Some(vec![]));
        assert_eq!(added[0].attach_type, t("connect4"));
        assert!(findings, "a socket-LB hook may change findings");
    }

    #[test]
    fn a_cgroup_call_that_cannot_be_placed_asks_for_a_full_pass() {
        let mut p = picture();
        assert_eq!(p.apply(&ev(call(BpfCommand::ProgAttach, None, "connect4", 1, None))), Effect::Unplaced);
        // Not a cgroup hook and no cgroup: an XDP or TCX call.
        let xdp = Change::BpfCall {
            command: BpfCommand::LinkCreate,
            cgroup_id: None,
            attach_type: None,
            prog_id: Some(1),
            link_id: Some(9),
            flags: 0,
            hints: Hints::default(),
        };
        assert_eq!(p.apply(&ev(xdp)), Effect::Nothing);
    }

    #[test]
    fn events_outside_the_audited_tree_change_nothing() {
        let mut p = picture();
        let g = p.generation();
        assert_eq!(p.apply(&made(50, 49, "x")), Effect::Nothing);
        assert_eq!(p.apply(&ev(call(BpfCommand::ProgAttach, Some(51), "connect4", 1, None))), Effect::Nothing);
        assert_eq!(p.apply(&ev(Change::CgroupRemoved { cgroup_id: 52 })), Effect::Nothing);
        assert_eq!(p.generation(), g);
    }

    #[test]
    fn effective_programs_follow_the_kernels_inheritance_rule() {
        let mut p = picture();
        let c4 = [t("connect4")];
        // connect4 at the root (multi) and on /kubepods (multi): both run.
        p.set_hook(1, &c4, &[multi("connect4", 10)], None);
        p.set_hook(2, &c4, &[multi("connect4", 20)], None);
        assert_eq!(connect4(&pod_effective(&mut p)), [20, 10], "the pod was placed again");
        // /kubepods exclusive, an override program on /kubepods/burstable:
        // the nearest runs; /kubepods (not multi) is skipped once one is
        // found; the root (multi) adds its own.
        let none = Attached { attach_type: t("connect4"), flags: AttachFlags::None, prog_id: 20 };
        let over = Attached { attach_type: t("connect4"), flags: AttachFlags::Override, prog_id: 30 };
        p.set_hook(2, &c4, &[none], None);
        p.set_hook(3, &c4, &[over], None);
        assert_eq!(connect4(&pod_effective(&mut p)), [30, 10]);
        // Nothing on the hooks: nothing in effect.
        for cg in [1, 2, 3] {
            p.set_hook(cg, &c4, &[], None);
        }
        assert!(pod_effective(&mut p).is_empty());
    }

    #[test]
    fn a_new_pod_is_judged_by_what_is_in_effect_for_it() {
        let mut p = picture();
        p.snap.programs.insert(10, Program::new(10, "cil_sock4_connect", ProgType::CgroupSockAddr));
        p.set_hook(1, &[t("connect4")], &[multi("connect4", 10)], None);
        let uid = "11111111-2222-4333-8444-555555555555";
        let e = p.apply(&made(6, 3, &format!("pod{uid}")));
        assert_eq!(e, Effect::Applied { findings: true });
        let pod = p.snapshot().pods.iter().find(|q| q.pod_uid == uid).unwrap();
        assert_eq!(connect4(&pod.effective), [10]);
        // Its container's set is the pod's own (judging reads each set once).
        p.apply(&made(7, 6, "ctr"));
        let pod = p.snapshot().pods.iter().find(|q| q.pod_uid == uid).unwrap();
        assert!(std::sync::Arc::ptr_eq(&pod.effective, &pod.containers[0].effective));
    }

    #[test]
    fn links_are_named_go_defunct_on_detach_and_are_reconciled_by_a_sweep() {
        let mut p = picture();
        p.apply(&ev(call(BpfCommand::LinkCreate, Some(4), "connect4", 10, Some(3))));
        p.set_hook(4, &all(), &[multi("connect4", 10)], Some(vec![]));
        assert_eq!(p.snapshot().attachments[0].link_id, Some(3), "the link is named on its attachment");
        // LINK_DETACH names the link; its cgroup comes from the picture.
        let detach = Change::BpfCall {
            command: BpfCommand::LinkDetach,
            cgroup_id: None,
            attach_type: None,
            prog_id: None,
            link_id: Some(3),
            flags: 0,
            hints: Hints::default(),
        };
        assert!(matches!(p.apply(&ev(detach)), Effect::Reread { cgroup_id: 4, .. }));
        assert_eq!(p.snapshot().cgroup_links[0].cgroup_id, 0, "defunct while something holds it");
        // The sweep finds it gone (its last fd closed): nothing to re-read,
        // its cgroup was already.
        assert!(p.reconcile_links(vec![]).is_empty());
        assert!(p.snapshot().cgroup_links.is_empty());
        // A link the picture never saw made (its last fd closed before any
        // event): the sweep names its cgroup to read again.
        let seen = CgroupLinkInfo { link_id: 8, prog_id: 10, cgroup_id: 4, attach_type: t("connect4").kernel_value() };
        assert_eq!(p.reconcile_links(vec![seen]), vec![4]);
        assert!(p.reconcile_links(vec![seen]).is_empty(), "no change, nothing to read");
    }

    #[test]
    fn socket_lb_below_the_root_keeps_its_processes_and_may_change_findings() {
        let mut p = picture();
        let procs = vec![ProcessRef { pid: 9, comm: "cilium-agent".into() }];
        let (_, _, findings) = p.set_hook(4, &all(), &[multi("connect4", 10)], Some(procs.clone()));
        assert!(findings);
        let path = format!("/kubepods/burstable/pod{POD_UID}");
        assert_eq!(p.snapshot().processes.get(&path), Some(&procs));
        let (removed, _, findings) = p.set_hook(4, &all(), &[], None);
        assert!(findings && removed.len() == 1);
        assert!(!p.snapshot().processes.contains_key(&path));
    }
}
