//! The audited cgroup tree, keyed by cgroup id: for each cgroup its parent's
//! id, its name as the kernel holds it (bytes: any byte but `/` and NUL),
//! its own programs, whether processes are in it, and where it sits for
//! Kubernetes (`Place`, worked out from its parent's place and its own
//! name). A cgroup costs the same at any depth; paths are built only for
//! what is shown (`Tree::path`), and names are escaped only there (`shown`).
//!
//! Both walks report cgroups as `Record`s, parents first. `placement` turns
//! records into the report's pods, containers and attachments; the daemon
//! keeps a `Tree` and hands its records to the same `placement`.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::attribution::Place;
use crate::bpf::AttachType;
use crate::bpf::query::Attached;
use crate::text::shown;

/// The longest cgroup path a report shows whole (`PATH_MAX`).
pub const PATH_SHOWN_MAX: usize = 4096;

/// A shown path as a report keeps it: whole up to `PATH_SHOWN_MAX` bytes,
/// else its first and last levels around the cgroup's id (unique, so two
/// cgroups never share one), so that a report's size does not grow with
/// depth times the number of things it lists there.
pub fn bounded(path: &str, id: u64) -> String {
    if path.len() <= PATH_SHOWN_MAX {
        return path.to_owned();
    }
    let half = PATH_SHOWN_MAX / 2 - 32;
    let mut head = half;
    while !path.is_char_boundary(head) {
        head -= 1;
    }
    let head = path[..head].rfind('/').filter(|&i| i > 0).unwrap_or(head);
    let mut tail = path.len() - half;
    while !path.is_char_boundary(tail) {
        tail += 1;
    }
    let tail = path[tail..].find('/').map_or(tail, |i| tail + i);
    format!("{}/…(cgroup id {id})…{}", &path[..head], &path[tail..])
}

/// One cgroup as a walk (or the daemon's tree) reports it.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub id: u64,
    /// The parent's id (0 for the audit root).
    pub parent: u64,
    /// Empty for the audit root.
    pub name: &'a [u8],
    /// Its own programs, each hook's in the kernel's (run) order.
    pub own: &'a [Attached],
}

/// A process, as named in findings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProcessRef {
    pub pid: u32,
    pub comm: String,
}

/// One cgroup of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    pub parent: u64,
    pub name: Box<[u8]>,
    pub own: Vec<Attached>,
    /// Processes are in it (asked of cgroups in pods only, whose leaves
    /// with processes are their containers).
    pub populated: bool,
    pub place: Place,
    /// Its processes, for a cgroup below the root holding socket-LB
    /// programs.
    pub processes: Option<Vec<ProcessRef>>,
}

/// The audited tree: the root and every cgroup below it, by id.
#[derive(Debug, Clone)]
pub struct Tree {
    root: u64,
    nodes: HashMap<u64, Node>,
}

impl Tree {
    /// A tree of the root alone (cgroup `root`).
    pub fn new(root: u64) -> Tree {
        let node = Node {
            parent: 0,
            name: Box::default(),
            own: Vec::new(),
            populated: false,
            place: Place::Outside,
            processes: None,
        };
        Tree { root, nodes: HashMap::from([(root, node)]) }
    }

    pub fn root(&self) -> u64 {
        self.root
    }

    /// cgroups in the tree, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn get(&self, id: u64) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub fn contains(&self, id: u64) -> bool {
        self.nodes.contains_key(&id)
    }

    /// The place a child named `name` of `parent` would have.
    pub fn place_below(&self, parent: u64, name: &[u8]) -> Option<Place> {
        Some(self.nodes.get(&parent)?.place.below(parent, name))
    }

    /// Adds a cgroup below one the tree holds (the root's record sets the
    /// root's programs). A cgroup already held keeps its place: cgroup ids
    /// are not reused, and cgroups do not move. False when its parent is
    /// not in the tree.
    pub fn add(&mut self, r: Record<'_>, populated: bool, processes: Option<Vec<ProcessRef>>) -> bool {
        if r.id == self.root {
            let root = self.nodes.get_mut(&self.root).expect("the root stays");
            root.own = r.own.to_vec();
            root.processes = None;
            return true;
        }
        if let Some(n) = self.nodes.get_mut(&r.id) {
            if n.parent != r.parent {
                return false;
            }
            n.own = r.own.to_vec();
            n.populated = populated;
            n.processes = processes;
            return true;
        }
        let Some(place) = self.place_below(r.parent, r.name) else { return false };
        self.nodes.insert(
            r.id,
            Node { parent: r.parent, name: r.name.into(), own: r.own.to_vec(), populated, place, processes },
        );
        true
    }

    /// Removes a cgroup (cgroup v2 removes only cgroups without children).
    /// The root stays.
    pub fn remove(&mut self, id: u64) -> Option<Node> {
        if id == self.root {
            return None;
        }
        self.nodes.remove(&id)
    }

    /// Replaces the programs of `hooks` on one cgroup with `now` (what the
    /// kernel lists on those hooks); the programs removed and added.
    pub fn set_own(
        &mut self,
        id: u64,
        hooks: &[AttachType],
        now: &[Attached],
        processes: Option<Vec<ProcessRef>>,
    ) -> Option<(Vec<Attached>, Vec<Attached>)> {
        let root = self.root;
        let n = self.nodes.get_mut(&id)?;
        let (removed, kept): (Vec<Attached>, Vec<Attached>) =
            n.own.iter().partition(|a| hooks.contains(&a.attach_type));
        n.own = kept;
        n.own.extend_from_slice(now);
        // One order whatever was read when: by hook, each hook's programs
        // in the kernel's order (a stable sort).
        n.own.sort_by_key(|a| a.attach_type);
        let lb = id != root && n.own.iter().any(|a| crate::owner::is_root_hook(a.attach_type));
        n.processes = if lb { processes.or(n.processes.take()) } else { None };
        Some((removed, now.to_vec()))
    }

    /// The names from the root's child down to `id` (empty for the root);
    /// `None` when `id` is not in the tree.
    pub fn names(&self, id: u64) -> Option<Vec<&[u8]>> {
        let mut names = Vec::new();
        let mut at = id;
        // Bounded by the tree: a cycle (which no kernel makes) ends it.
        for _ in 0..self.nodes.len() {
            if at == self.root {
                names.reverse();
                return Some(names);
            }
            let n = self.nodes.get(&at)?;
            names.push(&*n.name);
            at = n.parent;
        }
        None
    }

    /// The path of a cgroup relative to the root (`/` for the root), shown.
    pub fn path(&self, id: u64) -> Option<String> {
        let names = self.names(id)?;
        if names.is_empty() {
            return Some("/".into());
        }
        let mut out = String::with_capacity(names.iter().map(|n| n.len() + 1).sum());
        for n in names {
            out.push('/');
            out.push_str(&shown(n));
        }
        Some(out)
    }

    /// The path of a cgroup, shown in at most about `max` bytes: a longer
    /// one keeps its first and last levels, joined by `/…/` (what is kept
    /// per event, whatever the depth).
    pub fn path_within(&self, id: u64, max: usize) -> Option<String> {
        let names = self.names(id)?;
        // Measured as shown: a byte that is not UTF-8 shows as four.
        let names: Vec<Cow<'_, str>> = names.iter().map(|n| shown(n)).collect();
        let total: usize = names.iter().map(|n| n.len() + 1).sum();
        if total <= max {
            return self.path(id);
        }
        let mut head = String::new();
        let mut i = 0;
        while i < names.len() && head.len() + names[i].len() < max / 2 {
            head.push('/');
            head.push_str(&names[i]);
            i += 1;
        }
        let mut len = 0;
        let mut j = names.len();
        while j > i + 1 && len + names[j - 1].len() < max / 2 {
            j -= 1;
            len += names[j].len() + 1;
        }
        let mut out = head;
        out.push_str(&format!("/…({} levels)…", j - i));
        for n in &names[j..] {
            out.push('/');
            out.push_str(n);
        }
        Some(out)
    }

    /// Every cgroup's record, parents first (children of one parent by
    /// name), with its node.
    pub fn each(&self, mut f: impl FnMut(Record<'_>, &Node)) {
        let mut kids: Vec<(u64, &[u8], u64)> =
            self.nodes.iter().filter(|(id, _)| **id != self.root).map(|(id, n)| (n.parent, &*n.name, *id)).collect();
        kids.sort_unstable();
        let children = |parent: u64| {
            let start = kids.partition_point(|k| k.0 < parent);
            let end = kids.partition_point(|k| k.0 <= parent);
            &kids[start..end]
        };
        let mut stack = vec![self.root];
        while let Some(id) = stack.pop() {
            let n = &self.nodes[&id];
            f(Record { id, parent: n.parent, name: &n.name, own: &n.own }, n);
            stack.extend(children(id).iter().rev().map(|k| k.2));
        }
    }

    /// The largest cgroup id held: cgroups made later have larger ones (the
    /// kernel hands out ever larger ids).
    pub fn max_id(&self) -> u64 {
        self.nodes.keys().copied().max().unwrap_or(self.root)
    }

    /// Sets whether processes are in a cgroup; whether that changed.
    pub fn set_populated(&mut self, id: u64, populated: bool) -> bool {
        match self.nodes.get_mut(&id) {
            Some(n) if id != self.root && n.populated != populated => {
                n.populated = populated;
                true
            }
            _ => false,
        }
    }

    /// The ids held, the root included, in no order.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes.keys().copied()
    }

    /// The most programs one cgroup holds on `hook`.
    pub fn most_on(&self, hook: AttachType) -> usize {
        self.nodes.values().map(|n| n.own.iter().filter(|a| a.attach_type == hook).count()).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::attribute;

    const UID: &str = "f8371831-8021-4722-af27-93c925d25a14";
    const CID: &str = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";

    /// Builds the tree of `paths` (parents first) and checks each cgroup's
    /// place against `attribution` of its whole path.
    #[test]
    fn a_place_worked_out_level_by_level_is_what_the_whole_path_says() {
        let systemd_pod = format!("kubepods-burstable-pod{}.slice", UID.replace('-', "_"));
        let paths: Vec<Vec<&[u8]>> = vec![
            vec![b"kubepods.slice"],
            vec![b"kubepods.slice", b"kubepods-burstable.slice"],
            vec![b"kubepods.slice", b"kubepods-burstable.slice", systemd_pod.as_bytes()],
            vec![
                b"kubepods.slice",
                b"kubepods-burstable.slice",
                systemd_pod.as_bytes(),
                format!("cri-containerd-{CID}.scope").leak().as_bytes(),
            ],
            vec![b"kubepods"],
            vec![b"kubepods", b"besteffort"],
            vec![b"kubepods", b"besteffort", format!("pod{UID}").leak().as_bytes()],
            vec![b"kubepods", b"besteffort", format!("pod{UID}").leak().as_bytes(), CID.as_bytes()],
            vec![b"kubepods", b"besteffort", format!("pod{UID}").leak().as_bytes(), CID.as_bytes(), b"\xff"],
            vec![b"kubepods", b"system"],
            vec![b"kubepods", b"system", format!("pod{UID}").leak().as_bytes()],
            vec![b"kubepods", b"\xff.slice"],
            vec![b"kubepods", b"\xff.slice", format!("pod{UID}").leak().as_bytes()],
            vec![b"docker"],
            vec![b"docker", b"kubepods"],
            vec![b"docker", b"kubepods", format!("pod{UID}").leak().as_bytes()],
            vec![b"docker", b"kubepods", format!("pod{UID}").leak().as_bytes(), b"kubepods"],
            vec![b"docker", b"kubepods", format!("pod{UID}").leak().as_bytes(), b"kubepods", b"podx"],
        ];
        let mut tree = Tree::new(1);
        let mut ids: HashMap<Vec<&[u8]>, u64> = HashMap::new();
        for (i, p) in paths.iter().enumerate() {
            let id = 10 + i as u64;
            let parent = if p.len() == 1 { 1 } else { ids[&p[..p.len() - 1].to_vec()] };
            assert!(tree.add(Record { id, parent, name: p[p.len() - 1], own: &[] }, false, None));
            ids.insert(p.clone(), id);
        }
        for (p, &id) in &ids {
            let shown_path = tree.path(id).unwrap();
            let a = attribute(&shown_path);
            let place = &tree.get(id).unwrap().place;
            assert_eq!(place.is_pod(), a.is_pod_level(), "{shown_path}");
            let in_pod = matches!(place, Place::InPod { .. });
            assert_eq!(in_pod, a.pod_uid.is_some() && !a.is_pod_level(), "{shown_path}");
            if let Place::Pod { uid } = place {
                assert_eq!(Some(&**uid), a.pod_uid.as_deref(), "{shown_path}");
            }
            if let Place::InPod { pod } = place {
                let pod_path = tree.path(*pod).unwrap();
                assert!(shown_path.starts_with(&format!("{pod_path}/")), "{shown_path} is below {pod_path}");
                assert!(attribute(&pod_path).is_pod_level());
            }
            assert_eq!(tree.names(id).unwrap(), *p);
        }
    }

    #[test]
    fn names_are_bytes_shown_escaped_and_paths_are_built_only_when_asked() {
        let mut tree = Tree::new(1);
        assert!(tree.add(Record { id: 2, parent: 1, name: b"a\xffb", own: &[] }, false, None));
        assert!(tree.add(Record { id: 3, parent: 2, name: "café".as_bytes(), own: &[] }, false, None));
        assert_eq!(tree.path(3).as_deref(), Some("/a\\xffb/café"));
        assert_eq!(tree.path(1).as_deref(), Some("/"));
        assert_eq!(tree.names(3).unwrap(), [&b"a\xffb"[..], "café".as_bytes()]);
        assert!(!tree.add(Record { id: 5, parent: 4, name: b"x", own: &[] }, false, None), "unknown parent");
        assert!(!tree.add(Record { id: 3, parent: 1, name: b"moved", own: &[] }, false, None), "cgroups do not move");
        assert!(tree.remove(1).is_none(), "the root stays");
        let mut parent = 3;
        for id in 10..4010 {
            assert!(tree.add(Record { id, parent, name: &[b'n'; 255], own: &[] }, false, None));
            parent = id;
        }
        let short = tree.path_within(4009, 4096).unwrap();
        assert!(short.len() <= 4096 + 32, "{}", short.len());
        assert!(short.starts_with("/a\\xffb/café/nnn") && short.ends_with(&format!("/{}", "n".repeat(255))), "{short}");
        assert!(short.contains("/…(3985 levels)…/"), "{short}");
        assert_eq!(tree.path_within(3, 4096), tree.path(3));
    }

    /// The cap holds for what is shown: a byte that is not UTF-8 shows as
    /// four (`\\xff`), so names of them must not pass under it as raw bytes.
    #[test]
    fn the_cap_counts_names_as_shown() {
        let mut tree = Tree::new(1);
        let mut parent = 1;
        for id in 2..7 {
            assert!(tree.add(Record { id, parent, name: &[0xff; 255], own: &[] }, false, None));
            parent = id;
        }
        let path = tree.path_within(6, 4096).unwrap();
        assert!(path.len() <= 4096 + 32, "{} bytes shown", path.len());
        assert!(path.contains("levels)…"), "{path}");
        assert!(path.ends_with(&"\\xff".repeat(255)), "the last level is kept whole");
    }

    #[test]
    fn a_long_path_is_bounded_around_its_id() {
        let short = "/kubepods/pod1/c";
        assert_eq!(bounded(short, 7), short);
        let long: String = (0..40).map(|i| format!("/{i:03}{}", "é".repeat(60))).collect();
        let b = bounded(&long, 4242);
        assert!(b.len() <= PATH_SHOWN_MAX, "{}", b.len());
        assert!(b.starts_with("/000") && b.ends_with(&format!("/039{}", "é".repeat(60))), "{b}");
        assert!(b.contains("/…(cgroup id 4242)…/"), "cut at level boundaries: {b}");
        assert_ne!(bounded(&long, 4243), b);
        let one_name = format!("/{}", "n".repeat(5000));
        assert!(bounded(&one_name, 1).len() <= PATH_SHOWN_MAX);
    }

    #[test]
    fn records_come_parents_first_whatever_the_order_they_were_added_in() {
        let mut tree = Tree::new(1);
        tree.add(Record { id: 9, parent: 1, name: b"b", own: &[] }, false, None);
        tree.add(Record { id: 3, parent: 1, name: b"a", own: &[] }, false, None);
        tree.add(Record { id: 2, parent: 9, name: b"c", own: &[] }, false, None);
        let mut seen = Vec::new();
        tree.each(|r, _| seen.push((r.id, r.parent)));
        assert_eq!(seen, [(1, 0), (3, 1), (9, 1), (2, 9)]);
    }
}
