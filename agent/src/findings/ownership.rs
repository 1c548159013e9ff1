//! Who owns each program the rules look at, from what proves it (see
//! `owner`): indexed once per judgement, with everything else every rule
//! reads (`Ctx`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Attachers;
use crate::bpf::AttachType;
use crate::owner::{Evidence, Owned, Owner, Policy, judge};
use crate::snapshot::{AgentProcess, Attachment, MountTop, Snapshot};

/// What every rule reads: the snapshot, the user's policy, who owns what
/// and who attached what.
pub struct Ctx<'s> {
    pub snap: &'s Snapshot,
    pub policy: &'s Policy,
    pub attachers: Attachers<'s>,
    /// Programs the owners' agents hold, by id.
    held: HashMap<u32, Owner>,
    /// Programs in the pin directories of owners whose agent runs, by id.
    pinned: HashMap<u32, Owner>,
    /// The agents taken for their owners', by pid.
    agents: HashMap<u32, &'s AgentProcess>,
    /// cgroups an agent runs in, by path (relative to the audited root).
    agent_cgroups: HashMap<&'s str, Owner>,
    /// cgroups an owner's cgroup2 mount is rooted at, by id.
    mount_tops: HashMap<u64, Owner>,
}

impl<'s> Ctx<'s> {
    pub fn new(snap: &'s Snapshot, policy: &'s Policy) -> Ctx<'s> {
        let agents: HashMap<u32, &AgentProcess> =
            snap.agents.iter().filter(|p| p.privileged).map(|p| (p.pid, p)).collect();
        let held = agents.values().flat_map(|p| p.holds.iter().map(move |id| (*id, p.owner))).collect();
        // A pin is the owner's proof only while its agent runs (issue 47,
        // M3): one pinned into its directory while it does not is anyone's.
        let running: BTreeSet<Owner> = agents.values().map(|p| p.owner).collect();
        let pinned = snap.pins.iter().filter(|p| running.contains(&p.owner)).map(|p| (p.prog_id, p.owner)).collect();
        let agent_cgroups = snap
            .processes
            .iter()
            .filter_map(|(cgroup, procs)| {
                procs.iter().find_map(|q| agents.get(&q.pid)).map(|p| (cgroup.as_str(), p.owner))
            })
            .collect();
        let mount_tops = snap
            .mounts
            .iter()
            .filter_map(|m| match (Owner::from_mount_point(&m.mount_point), &m.top) {
                (Some(owner), MountTop::Known { cgroup_id, .. }) => Some((*cgroup_id, owner)),
                _ => None,
            })
            .collect();
        Ctx { snap, policy, attachers: Attachers::new(snap), held, pinned, agents, agent_cgroups, mount_tops }
    }

    /// Who owns an attachment, and why.
    pub fn owned(&self, a: &Attachment) -> Owned {
        self.owned_at(a.cgroup_id, &a.cgroup, a.attach_type, a.prog_id)
    }

    /// Who owns program `prog_id` on `hook` of cgroup `cgroup_id` (at path
    /// `cgroup`, relative to the audited root), and why.
    pub fn owned_at(&self, cgroup_id: u64, cgroup: &str, hook: AttachType, prog_id: u32) -> Owned {
        let Some(p) = self.snap.programs.get(&prog_id) else { return Owned::unknown(None) };
        let e = Evidence {
            held_by: self.held.get(&prog_id).copied(),
            pinned_by: self.pinned.get(&prog_id).copied(),
            attached_by: self
                .attachers
                .event_at(cgroup_id, hook, prog_id)
                .and_then(|e| self.agents.get(&e.pid))
                .map(|p| p.owner),
            agent_in_cgroup: self.agent_cgroups.get(cgroup).copied(),
            mount_rooted: self.mount_tops.get(&cgroup_id).copied(),
            at_root: cgroup_id == self.snap.root.cgroup_id,
        };
        judge(&p.name, p.prog_type, Some(hook), &e, self.policy)
    }

    /// The owner whose agent runs in cgroup `cgroup` (a path relative to
    /// the audited root), if one does.
    pub fn agent_in(&self, cgroup: &str) -> Option<Owner> {
        self.agent_cgroups.get(cgroup).copied()
    }

    pub fn owner(&self, a: &Attachment) -> Owner {
        self.owned(a).owner
    }

    /// Who owns a program that is not (or no longer) attached, from its
    /// agent holding it or its pin only (a link, a pin).
    pub fn program_owner(&self, prog_id: u32, hook: Option<AttachType>) -> Owned {
        let Some(p) = self.snap.programs.get(&prog_id) else { return Owned::unknown(None) };
        let e = Evidence {
            held_by: self.held.get(&prog_id).copied(),
            pinned_by: self.pinned.get(&prog_id).copied(),
            ..Evidence::default()
        };
        judge(&p.name, p.prog_type, hook, &e, self.policy)
    }

    /// Every attachment with its owner.
    pub fn attachments(&self) -> impl Iterator<Item = (&'s Attachment, Owned)> + '_ {
        self.snap.attachments.iter().map(move |a| (a, self.owned(a)))
    }

    /// The agents of `owner` taken for its.
    pub fn agents_of(&self, owner: Owner) -> impl Iterator<Item = &'s AgentProcess> + '_ {
        self.snap.agents.iter().filter(move |p| p.owner == owner && p.privileged)
    }

    /// The socket-address hooks each owner that means them for the root
    /// uses: those its programs are attached to anywhere, proven its. Never
    /// what is merely loaded or pinned with an owner's name (anyone with
    /// CAP_BPF can load a `cil_sock4_connect` and pin it in Cilium's
    /// directory), nor a program named like its and proven nobody's.
    pub fn root_hooks(&self) -> BTreeMap<Owner, BTreeSet<AttachType>> {
        let mut hooks: BTreeMap<Owner, BTreeSet<AttachType>> = BTreeMap::new();
        for (a, o) in self.attachments() {
            if a.attach_type.is_socket_address() && o.owner.intends_root() {
                hooks.entry(o.owner).or_default().insert(a.attach_type);
            }
        }
        hooks
    }
}
