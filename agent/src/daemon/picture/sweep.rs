//! The sweep's rules: what the picture becomes after a sweep of the tree
//! (the sources without cgroup events) or a listing of the cgroup links
//! (a link whose last fd was closed makes no bpf(2) call), and what must
//! be read again.

use std::collections::{HashMap, HashSet};

use crate::bpf::AttachType;
use crate::bpf::query::Attached;
use crate::bpf::sys::CgroupLinkInfo;
use crate::daemon::sweep::Sweep;

use super::{Check, Effect, Picture};

impl Picture {
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
}
