//! Pure: the audited tree's cgroups, parents first (`cgroup::tree::Record`s,
//! from either walk or from the daemon's tree) -> the report's attachments,
//! its pods with their containers, and what is in effect for each.
//!
//! One function of the node for `agent audit` and the daemon alike: a pod
//! is a cgroup whose `Place` says so; its containers are the cgroups below
//! it that hold processes with none below them holding any (where its
//! sockets are made); what is in effect for each is the kernel's rule
//! (`coverage::effective`) over the programs of its ancestors.
//!
//! Records are taken one at a time with only the current cgroup's ancestors
//! held (and one path, the current one), so a tree of any size or depth
//! costs its depth, not its size: the daemon keeps a `Tree` only when asked.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::attribution::Place;
use crate::bpf::sys::CgroupLinkInfo;
use crate::cgroup::tree::{ProcessRef, Record, bounded};
use crate::cgroup::walk::WalkError;
use crate::coverage::{self, Level, Sets};
use crate::snapshot::{Attachment, ContainerCgroup, PodCgroup};
use crate::snapshot::{Effective, Shared};
use crate::text::shown;

/// What placing a cgroup needs to read of it, asked only when it matters.
pub trait Access {
    /// Processes are in the cgroup (or below it: either serves, as only
    /// cgroups with none below them become containers). Asked of cgroups in
    /// pods.
    fn populated(&self) -> bool;
    /// Its processes (asked of cgroups below the root holding socket-LB
    /// programs).
    fn processes(&self) -> Vec<ProcessRef>;
    /// Whether processes are in it, when the walk read that already (the
    /// in-kernel pass reports it; the syscall walk would open a file).
    fn populated_known(&self) -> Option<bool> {
        None
    }
}

/// What placing one record read of its cgroup (for the daemon's tree).
#[derive(Debug, Default)]
pub struct Seen {
    pub populated: bool,
    pub processes: Option<Vec<ProcessRef>>,
}

/// The report's part of the tree.
#[derive(Debug, Default)]
pub struct Placed {
    /// By cgroup path, then hook; each hook's programs in the kernel's order.
    pub attachments: Vec<Attachment>,
    /// By cgroup path; each pod's containers too.
    pub pods: Vec<PodCgroup>,
    /// Of the cgroups below the root holding socket-LB programs.
    pub processes: BTreeMap<String, Vec<ProcessRef>>,
    /// Of the cgroups asked for by id.
    pub paths: BTreeMap<u64, String>,
    /// Records that came before their parent.
    pub errors: Vec<WalkError>,
}

/// One ancestor of the cgroup being placed (or that cgroup).
struct Frame {
    id: u64,
    /// Length of `Placement::path` up to and with its name.
    path_len: usize,
    place: Place,
    populated: bool,
    /// Some cgroup below it holds processes.
    populated_below: bool,
}

/// Places records as they come (`add`), then hands out the result (`finish`).
pub struct Placement<'a> {
    root_id: u64,
    /// What the kernel reports in effect at the root.
    root_effective: &'a Effective,
    wanted: &'a HashSet<u64>,
    /// What runs from above the root (from the root's record on).
    above: Level,
    /// The current cgroup's path (empty for the root).
    path: String,
    stack: Vec<Frame>,
    /// The coverage programs of the ancestors that have any, with their
    /// depth in `stack`.
    levels: Vec<(usize, Level)>,
    sets: Sets,
    /// The set in effect where only the root (and above it) holds programs:
    /// most cgroups of most nodes.
    from_root: Option<Shared>,
    pods_by_id: HashMap<u64, usize>,
    out: Placed,
}

impl<'a> Placement<'a> {
    /// Places the tree below cgroup `root_id`, where the kernel reports
    /// `root_effective` in effect; the paths of the `wanted` cgroups are
    /// kept.
    pub fn new(root_id: u64, root_effective: &'a Effective, wanted: &'a HashSet<u64>) -> Placement<'a> {
        Placement {
            root_id,
            root_effective,
            wanted,
            above: Level::default(),
            path: String::new(),
            stack: Vec::new(),
            levels: Vec::new(),
            sets: Sets::default(),
            from_root: None,
            pods_by_id: HashMap::new(),
            out: Placed::default(),
        }
    }

    /// Starts again (a walk that began anew).
    pub fn restart(&mut self) {
        *self = Placement::new(self.root_id, self.root_effective, self.wanted);
    }

    fn shown_path(&self, len: usize) -> &str {
        if len == 0 { "/" } else { &self.path[..len] }
    }

    /// Places one cgroup. Its parent must have come before it.
    pub fn add(&mut self, r: Record<'_>, access: &impl Access) -> Seen {
        let is_root = r.id == self.root_id;
        let place = if is_root {
            self.stack.clear();
            self.levels.clear();
            self.path.clear();
            Place::Outside
        } else {
            while self.stack.last().is_some_and(|f| f.id != r.parent) {
                self.leave();
            }
            let Some(parent) = self.stack.last() else {
                self.out.errors.push(WalkError {
                    cgroup: shown(r.name).into_owned(),
                    op: "walk",
                    error: format!("cgroup {} came before its parent {}", r.id, r.parent),
                });
                return Seen::default();
            };
            self.path.truncate(parent.path_len);
            self.path.push('/');
            self.path.push_str(&shown(r.name));
            parent.place.below(parent.id, r.name)
        };
        let level = Level::of(r.own.iter().map(|a| (a.attach_type, a.flags, a.prog_id)));
        if is_root {
            self.above = Level::above(&level, self.root_effective);
            self.from_root = None;
        }
        if !level.is_empty() {
            self.levels.push((self.stack.len(), level));
        }
        // Its path is copied only for what shows it.
        let shown = if self.path.is_empty() { "/" } else { self.path.as_str() };
        let path = || bounded(shown, r.id);
        let populated = matches!(place, Place::InPod { .. }) && access.populated();
        let mut seen = Seen { populated, processes: None };
        if !is_root && r.own.iter().any(|a| crate::owner::is_root_hook(a.attach_type)) {
            let procs = access.processes();
            self.out.processes.insert(path(), procs.clone());
            seen.processes = Some(procs);
        }
        if self.wanted.contains(&r.id) {
            self.out.paths.insert(r.id, path());
        }
        if !r.own.is_empty() {
            let cgroup = path();
            self.out.attachments.extend(r.own.iter().map(|a| Attachment {
                cgroup: cgroup.clone(),
                cgroup_id: r.id,
                attach_type: a.attach_type,
                attach_flags: a.flags,
                prog_id: a.prog_id,
                link_id: None,
                preorder: a.preorder(),
            }));
        }
        if let Place::Pod { uid } = &place {
            let cgroup = path();
            let effective = self.effective_here();
            self.pods_by_id.insert(r.id, self.out.pods.len());
            self.out.pods.push(PodCgroup {
                cgroup,
                cgroup_id: r.id,
                pod_uid: uid.to_string(),
                effective,
                containers: Vec::new(),
            });
        }
        self.stack.push(Frame { id: r.id, path_len: self.path.len(), place, populated, populated_below: false });
        seen
    }

    /// What is in effect for sockets of the current cgroup.
    fn effective_here(&mut self) -> Shared {
        if self.levels.iter().all(|(depth, _)| *depth == 0) {
            if let Some(s) = &self.from_root {
                return s.clone();
            }
            let chain = self.levels.iter().map(|(_, l)| l).chain([&self.above]);
            let s = self.sets.share(coverage::effective(chain));
            self.from_root = Some(s.clone());
            return s;
        }
        let chain = self.levels.iter().rev().map(|(_, l)| l).chain([&self.above]);
        self.sets.share(coverage::effective(chain))
    }

    /// Done with the current cgroup (all below it came): a cgroup of a pod
    /// holding processes, with none below it holding any, is a container.
    fn leave(&mut self) {
        let Some(top) = self.stack.last() else { return };
        if let Place::InPod { pod } = top.place
            && top.populated
            && !top.populated_below
            && let Some(&i) = self.pods_by_id.get(&pod)
        {
            let (id, len) = (top.id, top.path_len);
            let effective = self.effective_here();
            let cgroup = bounded(self.shown_path(len), id);
            self.out.pods[i].containers.push(ContainerCgroup { cgroup, cgroup_id: id, effective });
        }
        let done = self.stack.pop().expect("a top");
        let depth = self.stack.len();
        while self.levels.last().is_some_and(|(d, _)| *d >= depth) {
            self.levels.pop();
        }
        if let Some(parent) = self.stack.last_mut() {
            parent.populated_below |= done.populated || done.populated_below;
            self.path.truncate(parent.path_len);
        }
    }

    /// The report's part of the tree: in one order whatever the walk.
    pub fn finish(mut self) -> Placed {
        while !self.stack.is_empty() {
            self.leave();
        }
        let mut out = self.out;
        // Stable: a hook's programs keep the kernel's (run) order.
        out.attachments.sort_by(|a, b| a.cgroup.cmp(&b.cgroup).then(a.attach_type.cmp(&b.attach_type)));
        out.pods.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));
        for p in &mut out.pods {
            p.containers.sort_by(|a, b| a.cgroup.cmp(&b.cgroup));
        }
        out
    }
}

/// Names the bpf_link holding each attachment, where one does.
pub fn link_attachments(attachments: &mut [Attachment], links: &[CgroupLinkInfo]) {
    let by_target: HashMap<(u64, u32, u32), u32> =
        links.iter().map(|l| ((l.cgroup_id, l.attach_type, l.prog_id), l.link_id)).collect();
    for a in attachments {
        a.link_id = by_target.get(&(a.cgroup_id, a.attach_type.kernel_value(), a.prog_id)).copied();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::bpf::query::Attached;
    use crate::bpf::{AttachFlags, AttachType};
    use crate::cgroup::tree::PATH_SHOWN_MAX;

    fn t(name: &str) -> AttachType {
        AttachType::from_name(name).unwrap()
    }

    fn connect4(e: &Effective) -> Vec<u32> {
        e.get(&t("connect4")).cloned().unwrap_or_default()
    }

    /// A cgroup the test describes instead of the kernel.
    struct Described(bool);

    impl Access for Described {
        fn populated(&self) -> bool {
            self.0
        }
        fn processes(&self) -> Vec<ProcessRef> {
            vec![ProcessRef { pid: 7, comm: "cilium-agent".into() }]
        }
    }

    const POD_A: &[u8] = b"pod0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";
    const POD_B: &[u8] = b"podf8371831-8021-4722-af27-93c925d25a14";

    type Rec = (u64, u64, &'static [u8], Vec<Attached>, bool);

    fn rec(id: u64, parent: u64, name: &'static [u8], own: Vec<Attached>, populated: bool) -> Rec {
        (id, parent, name, own, populated)
    }

    fn place(records: &[Rec], wanted: &HashSet<u64>) -> Placed {
        let effective: Effective = [(t("connect4"), vec![1])].into();
        let mut p = Placement::new(1, &effective, wanted);
        for (id, parent, name, own, populated) in records {
            p.add(Record { id: *id, parent: *parent, name, own }, &Described(*populated));
        }
        p.finish()
    }

    fn att(hook: &str, flags: AttachFlags, prog_id: u32) -> Attached {
        Attached { attach_type: t(hook), flags, prog_id, prog_flags: None }
    }

    #[test]
    fn containers_are_the_cgroups_of_a_pod_with_processes_and_none_below_them() {
        let root = vec![att("connect4", AttachFlags::Override, 1)];
        let own = vec![att("connect4", AttachFlags::None, 9)];
        let placed = place(
            &[
                rec(1, 0, b"", root, false),
                rec(2, 1, b"kubepods", vec![], false),
                rec(3, 2, POD_A, vec![], false),
                rec(4, 3, b"ctr1", vec![], true),
                rec(5, 3, b"ctr2", own, true),
                rec(6, 3, b"empty", vec![], false),
                rec(7, 2, POD_B, vec![], false),
                rec(8, 7, b"mid", vec![], true),
                rec(9, 8, b"leaf", vec![], true),
                rec(10, 8, b"idle", vec![], false),
            ],
            &HashSet::from([8]),
        );
        assert_eq!(placed.pods.len(), 2);
        let a = &placed.pods[0];
        assert_eq!(a.cgroup, "/kubepods/pod0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d");
        let names: Vec<&str> = a.containers.iter().map(|c| c.cgroup.rsplit('/').next().unwrap()).collect();
        assert_eq!(names, ["ctr1", "ctr2"], "leaves holding processes only");
        assert_eq!(connect4(&a.effective), [1]);
        assert_eq!(connect4(&a.containers[0].effective), [1]);
        assert_eq!(connect4(&a.containers[1].effective), [9], "its own program replaced the root's");
        assert!(Arc::ptr_eq(&a.effective, &a.containers[0].effective), "one set for the same programs");
        let b: Vec<&str> = placed.pods[1].containers.iter().map(|c| c.cgroup.rsplit('/').next().unwrap()).collect();
        assert_eq!(b, ["leaf"], "a cgroup with processes below it is no container");
        assert_eq!(placed.attachments.len(), 2);
        assert_eq!(placed.attachments[0].cgroup, "/");
        assert_eq!(placed.processes.keys().collect::<Vec<_>>(), [&format!("{}/ctr2", a.cgroup)], "not the root's");
        assert_eq!(placed.paths[&8], format!("{}/mid", placed.pods[1].cgroup));
    }

    #[test]
    fn a_record_before_its_parent_is_an_error_not_a_guess() {
        let placed = place(&[rec(1, 0, b"", vec![], false), rec(3, 2, b"orphan", vec![], false)], &HashSet::new());
        assert_eq!(placed.errors.len(), 1);
        assert!(placed.errors[0].error.contains("came before its parent 2"));
    }

    #[test]
    fn a_deep_chain_costs_one_path_and_its_ancestors() {
        let mut records: Vec<Rec> = vec![
            rec(1, 0, b"", vec![att("connect4", AttachFlags::Multi, 1)], false),
            rec(2, 1, b"kubepods", vec![], false),
            rec(3, 2, POD_A, vec![], false),
        ];
        static NAME: [u8; 255] = [b'n'; 255];
        for i in 0..2000u64 {
            records.push(rec(4 + i, 3 + i, &NAME, vec![], true));
        }
        // 64 links on one hook at the bottom (the kernel takes one program
        // on many links): the report names that cgroup 64 times.
        records.last_mut().unwrap().3 = (0..64).map(|i| att("connect4", AttachFlags::Multi, 100 + i)).collect();
        let placed = place(&records, &HashSet::new());
        let c = &placed.pods[0].containers;
        assert_eq!(c.len(), 1, "the bottom of the chain only");
        assert_eq!(c[0].cgroup_id, 2003);
        assert!(c[0].cgroup.len() <= PATH_SHOWN_MAX && c[0].cgroup.contains("(cgroup id 2003)"), "{}", c[0].cgroup);
        let below: Vec<_> = placed.attachments.iter().filter(|a| a.cgroup_id == 2003).collect();
        assert_eq!(below.len(), 64);
        let bytes: usize = placed.attachments.iter().map(|a| a.cgroup.len()).sum();
        assert!(bytes <= 65 * PATH_SHOWN_MAX, "the report's paths take {bytes} bytes");
        assert!(placed.processes.keys().all(|p| p.len() <= PATH_SHOWN_MAX));
    }
}
