//! Events in, effects out: what one kernel event changes in the picture's
//! tree and links, and what the worker must do after it (`Effect`).

use super::{Check, Effect, Picture};
use crate::bpf::sys::CgroupLinkInfo;
use crate::bpf::{AttachType, BpfCommand};
use crate::cgroup::tree::Record;
use crate::event::{Change, Event, Hints};

impl Picture {
    /// Applies one event.
    pub fn apply(&mut self, e: &Event) -> Effect {
        if self.tree.is_none() {
            return self.untracked(e);
        }
        match &e.change {
            // A new cgroup holds no processes yet: whether it does is read
            // a moment later (Schedule::new_cgroup), as the full pass reads
            // it (cgroup.events). Only then is it a pod's container.
            Change::CgroupMade { cgroup_id, parent_id, name } => self.made(*cgroup_id, *parent_id, name, false),
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
                        AttachType::from_kernel(l.attach_type).map(|hook| self.released(l, hook))
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
                    Some(cg) if self.known(cg) => {
                        // Kept until a reading bears it out.
                        if let Check::Released { link_id, .. } = check {
                            self.releasing.insert(link_id, super::Pending { cgroup_id: cg, check, tries: 0 });
                        }
                        self.reread(cg, prog_id, check)
                    }
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

    /// The check a link's release must pass: the copies of its program the picture holds on its hook now,
    /// less the releases of that program there still pending (their copies
    /// are in the picture yet).
    fn released(&mut self, l: CgroupLinkInfo, hook: AttachType) -> Check {
        let held = self
            .tree
            .as_ref()
            .and_then(|t| t.get(l.cgroup_id))
            .map_or(0, |n| n.own.iter().filter(|a| a.prog_id == l.prog_id && a.attach_type == hook).count());
        let pending = self
            .releasing
            .values()
            .filter(|p| {
                p.cgroup_id == l.cgroup_id
                    && matches!(p.check, Check::Released { prog_id, hook: h, link_id, .. }
                        if prog_id == l.prog_id && h == hook && link_id != l.link_id)
            })
            .count();
        Check::Released { prog_id: l.prog_id, hook, link_id: l.link_id, copies: held.saturating_sub(pending) as u32 }
    }

    fn reread(&self, cgroup_id: u64, prog: &Option<u32>, check: Check) -> Effect {
        // Programs the picture does not know, or knows only by a name the
        // full pass did not resolve (it was loaded, not yet attached).
        let programs = self.snap.to_learn(prog.iter().copied());
        Effect::Reread { cgroup_id, programs, check }
    }

    pub(super) fn made(&mut self, id: u64, parent: u64, name: &[u8], populated: bool) -> Effect {
        // Its id was not found: gone again already, or outside the tree.
        if id == 0 {
            return Effect::Nothing;
        }
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
        if !tree.add(Record { id, parent, name, own: &[] }, populated, None) {
            return Effect::Nothing;
        }
        let in_kube = tree.get(id).is_some_and(|n| n.place.in_kube());
        self.changed();
        Effect::Made { cgroup_id: id, findings: in_kube }
    }

    pub(super) fn removed(&mut self, id: u64) -> Effect {
        let Some(node) = self.tree.as_mut().and_then(|t| t.remove(id)) else { return Effect::Nothing };
        self.changed();
        let mut links = false;
        for l in self.snap.cgroup_links.iter_mut().filter(|l| l.cgroup_id == id) {
            l.cgroup_id = 0;
            links = true;
        }
        let in_kube = node.place.in_kube();
        let lb = node.own.iter().any(|a| crate::owner::is_root_hook(a.attach_type));
        Effect::Applied { findings: lb || links || in_kube }
    }
}
