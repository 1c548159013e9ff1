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

    /// What the interface reader read (the owners' pins, the pods'
    /// interfaces, the node's devices), whose each program is proven from
    /// the pins read with it; whether the findings may have changed.
    pub fn set_networks(&mut self, nets: crate::scan::net::Networks) -> bool {
        let crate::scan::net::Pins { pins, maps, errors, hidden } = nets.pins;
        let unread = errors.first().map(|e| format!("{} {}: {}", e.op, e.path, e.message));
        let pins_changed = pins != self.snap.pins
            || maps != self.snap.owner_maps
            || unread != self.snap.pins_unread
            || hidden != self.snap.hidden_bpffs;
        // The pins first: the interfaces and devices are proven by them.
        self.snap.pins = pins;
        self.snap.owner_maps = maps;
        self.snap.pins_unread = unread;
        self.snap.hidden_bpffs = hidden;
        let changed = self.set_pod_networks(nets.pods) | self.set_devices(nets.devices) | pins_changed;
        if pins_changed {
            self.generation += 1;
        }
        changed
    }

    /// The pods' interfaces as read now, their programs named from the
    /// picture's and proven from its pins; whether what was read changed
    /// (when it was read aside).
    pub fn set_pod_networks(&mut self, mut nets: PodNetworks) -> bool {
        nets.name_programs(&self.snap.programs);
        self.snap.prove_pods(&mut nets);
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
            // By UID and cgroup: a cgroup made with another pod's UID does
            // not inherit that pod's reading.
            let Some(last) = old.pods.iter().find(|q| q.pod_uid == p.pod_uid && q.cgroup == p.cgroup && !q.unread())
            else {
                continue;
            };
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

    /// The node's devices as read now, their programs named from the
    /// picture's and proven from its pins; whether they changed. A read
    /// that failed keeps the last good one for `KEPT_FOR` (a churn in the
    /// node's namespace must not clear a finding: red team N6), then says
    /// so.
    pub fn set_devices(&mut self, mut devices: crate::snapshot::devices::HostDevices) -> bool {
        devices.name_programs(&self.snap.programs);
        self.snap.prove_devices(&mut devices);
        let now = self.snap.pod_networks.read_at;
        match &devices.error {
            None => self.devices_read_at = Some(now),
            Some(_) if self.devices_read_at.is_some_and(|at| now.saturating_sub(at) <= KEPT_FOR) => {
                let error = devices.error.take();
                devices = self.snap.devices.clone();
                devices.kept_after = error;
            }
            Some(_) => {}
        }
        let changed = devices != self.snap.devices;
        if changed {
            self.snap.devices = devices;
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
