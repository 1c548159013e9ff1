//! The pods' networks in the picture: each interface read put in, what a
//! gap in the reading keeps, and what the pods' interfaces carried at
//! earlier reads (a pod that lost its program is judged at once).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::snapshot::net::{EndpointSeen, KEPT_FOR, Net, PodNetworks};

use super::Picture;

impl Picture {
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
    pub fn set_pod_networks(&mut self, mut nets: PodNetworks) -> bool {
        nets.name_programs(&self.snap.programs);
        let old = &self.snap.pod_networks;
        // When each pod's reading in `old` was read.
        let read_at = |uid: &str| old.kept.get(uid).copied().unwrap_or(old.read_at);
        // A read that failed, or a pod or interface it could not read, keeps
        // the last good reading for `KEPT_FOR`: a gap must not clear a
        // verdict (nor the alert's `for:` start again), nor a pod that
        // keeps its network unreadable keep an old verdict forever.
        if let Some(error) = &nets.error {
            nets.configured = old.configured.clone();
            nets.pods = old.pods.clone();
            for p in nets.pods.iter_mut().filter(|p| !p.unread()) {
                p.net = Net::Unreadable { reason: format!("the pods' interfaces could not be read: {error}") };
            }
        }
        let mut kept = BTreeMap::new();
        for p in nets.pods.iter_mut().filter(|p| p.unread()) {
            let Some(last) = old.pods.iter().find(|q| q.pod_uid == p.pod_uid && !q.unread()) else { continue };
            let since = read_at(&p.pod_uid);
            if nets.read_at.saturating_sub(since) <= KEPT_FOR {
                *p = last.clone();
                kept.insert(p.pod_uid.clone(), since);
            }
        }
        nets.kept = kept;
        // What the pods still here had, at this read or an earlier one.
        let here: HashSet<&str> = nets.pods.iter().map(|p| p.pod_uid.as_str()).collect();
        let mut had: BTreeSet<EndpointSeen> =
            old.had_programs.iter().filter(|e| here.contains(e.pod_uid.as_str())).cloned().collect();
        had.extend(old.endpoints().filter(|e| here.contains(e.pod_uid.as_str())));
        nets.had_programs = had;
        let changed = nets.error != old.error
            || nets.kept != old.kept
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
    pub fn keep_pod_history(&mut self, old: &PodNetworks) {
        let before = PodNetworks {
            read_at: old.read_at,
            pods: old.pods.clone(),
            kept: old.kept.clone(),
            had_programs: old.had_programs.clone(),
            ..Default::default()
        };
        let fresh = std::mem::replace(&mut self.snap.pod_networks, before);
        self.set_pod_networks(fresh);
    }
}
