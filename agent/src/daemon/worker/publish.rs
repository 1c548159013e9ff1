//! What the worker publishes: the full pass that makes a new picture, the
//! judgement of the picture's findings (logged, in the metrics and
//! /readyz), and the JSON of `/audit` and `/events`, rendered again only
//! when what they show changed.

use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Bytes;

use super::{Worker, jittered, unix_now};
use crate::cgroup::root;
use crate::daemon::history::{self, Recorded};
use crate::daemon::metrics::Work;
use crate::daemon::picture::Picture;
use crate::daemon::schedule::Trigger;
use crate::findings::{self, Finding, Policy};
use crate::report::{Report, Verdict};
use crate::scan;
use crate::scan::names::Namer;

impl Worker {
    /// The recent events as JSON, rendered again only when one arrived.
    pub(super) fn render_events(&mut self) -> Bytes {
        let last = self.next_seq;
        if let Some((seq, bytes)) = &self.events_rendered
            && *seq == last
        {
            return bytes.clone();
        }
        #[derive(serde::Serialize)]
        struct Page<'a> {
            /// Events kept: the most recent, at most `capacity`.
            capacity: usize,
            /// Events received since start (older ones are dropped).
            received: u64,
            events: Vec<&'a Recorded>,
        }
        let page = Page { capacity: history::KEPT, received: last - 1, events: self.history.recent().collect() };
        let mut out = serde_json::to_vec_pretty(&page).unwrap_or_default();
        out.push(b'\n');
        let bytes = Bytes::from(out);
        self.events_rendered = Some((last, bytes.clone()));
        bytes
    }

    /// Judges the picture, naming what the report wants named (the
    /// findings' pods and containers, the pods with interfaces): judged
    /// again only when a name changed. Names found are kept (`Namer`); a
    /// pod whose name is not found is looked for again at the next
    /// judgement, under the read deadline.
    fn name(namer: &mut Namer, picture: &mut Picture, policy: &Policy) -> Vec<Finding> {
        let found = findings::evaluate(picture.snapshot(), policy);
        let wanted = findings::names_wanted(picture.last(), &found);
        if picture.set_names(namer.lookup(&wanted)) { findings::evaluate(picture.snapshot(), policy) } else { found }
    }

    /// Judges the picture again and publishes the findings.
    pub(super) fn judge(&mut self) {
        let started = Instant::now();
        self.evaluate_and_publish();
        let ended = Instant::now();
        self.schedule.judged(started, ended);
        self.shared.metrics.busy(Work::Judge, ended - started);
    }

    fn evaluate_and_publish(&mut self) {
        // The owners' agents and mounts as they are now, read at most every
        // two seconds: a judgement that comes sooner is made again once
        // they are read.
        let read_node_state = self.schedule.judging(Instant::now());
        let Some(picture) = self.picture.as_mut() else { return };
        if read_node_state {
            let mut errors = Vec::new();
            let budget = scan::deadline::Budget::new(scan::deadline::READ_DEADLINE);
            picture.set_agents(scan::agents::agent_processes(&self.config.scan.proc, &budget, &mut errors));
            let root = picture.last().root.clone();
            picture.set_mounts(scan::cgroup_mounts::pid1_cgroup_mounts(&self.config.scan.proc, &root, &mut errors));
        }
        self.history.prune(picture.snapshot());
        picture.set_events(self.history.attachers());
        self.findings = Self::name(&mut self.namer, picture, &self.config.policy);
        self.shared.metrics.findings(&self.findings);
        self.shared.metrics.device_revisions(&picture.snapshot().devices);
        let incomplete = findings::incomplete(picture.snapshot());
        let report_verdict = Verdict::of(&self.findings, incomplete.is_some());
        self.shared.set_incomplete(incomplete);
        if self.verdict != Some(report_verdict) {
            tracing::info!(
                findings = report_verdict.findings,
                critical = report_verdict.critical,
                "findings changed (kernel event): {:?}",
                report_verdict.status
            );
        }
        self.verdict = Some(report_verdict);
    }

    pub(super) fn full_pass(&mut self, trigger: Trigger) {
        let started = Instant::now();
        self.schedule.pass_started(started);
        let mut opts = self.config.scan.clone();
        opts.tree_max = self.config.max_cgroups;
        opts.name_cgroups = self.history.attacher_cgroups();
        // The pass makes the next tree: never two at once.
        if let Some(p) = self.picture.as_mut() {
            p.drop_tree();
        }
        let result = scan::scan(&opts);
        let took = started.elapsed();
        let seconds = took.as_secs_f64();
        let snap = match result {
            Ok(s) => s,
            Err(e) => {
                self.shared.metrics.audit_failed(trigger, seconds);
                tracing::warn!(trigger = trigger.as_str(), error = %format!("{e:#}"), "audit failed");
                let ready = self.shared.ready.load(Ordering::Relaxed);
                self.schedule.pass_failed(Instant::now(), took, ready, jittered(self.config.interval));
                return;
            }
        };
        // Single cgroups are re-read below the root this pass found; it
        // must still be that directory.
        self.root =
            root::open_cgroup_dir(&snap.root.path).ok().filter(|(_, id)| *id == snap.root.cgroup_id).map(|(fd, _)| fd);
        // The node's network is read between passes: its own devices
        // always, its pods' interfaces while there are pods.
        self.schedule.pods_seen(Instant::now(), true);
        let untracked = snap.tree.is_none();
        if untracked != self.schedule.untracked() {
            if untracked {
                tracing::warn!(
                    cgroups = snap.cgroups_scanned,
                    max = self.config.max_cgroups,
                    "more cgroups than --max-cgroups: no tree is kept; changes are found by full passes only"
                );
            } else {
                tracing::info!(cgroups = snap.cgroups_scanned, "cgroups within --max-cgroups again: the tree is kept");
            }
            self.shared.metrics.set_degraded("cgroup_count", untracked);
        }
        // What the pods had on their interfaces, kept across passes.
        let had = self.picture.as_ref().map(|p| p.last().pod_networks.clone());
        let mut picture = Picture::new(snap);
        if let Some(old) = had {
            picture.keep_pod_history(&old);
        }
        picture.limit_tree(self.config.max_cgroups);
        self.history.prune(picture.snapshot());
        picture.set_events(self.history.attachers());
        let _ = Self::name(&mut self.namer, &mut picture, &self.config.policy);
        let report = Report::new(picture.snapshot(), &self.config.policy);
        self.shared.metrics.audit_done(trigger, seconds, &report, unix_now());
        if report.view.reason != self.shared.incomplete() {
            match &report.view.reason {
                Some(why) => tracing::warn!("the audit cannot see the whole node: {why}"),
                None => tracing::info!("the audit sees the whole node again"),
            }
        }
        self.shared.set_incomplete(report.view.reason.clone());
        let summary = report.summary();
        if self.verdict != Some(report.verdict()) {
            tracing::info!(trigger = trigger.as_str(), findings = report.findings.len(), "{summary}");
        } else {
            tracing::debug!(trigger = trigger.as_str(), "{summary}");
        }
        if report.walk.fallback_reason != self.last_fallback {
            if let Some(reason) = &report.walk.fallback_reason {
                tracing::warn!(reason = %reason, "reading cgroups by syscalls: the in-kernel walk is unavailable");
            }
            self.last_fallback = report.walk.fallback_reason.clone();
        }
        self.verdict = Some(report.verdict());
        self.findings = report.findings.clone();
        self.picture = Some(picture);
        // A full pass read every hook again: nothing is known to be unchanged.
        self.revisions.clear();
        // The pass's own allocations (the walk, the last picture) go back
        // to the kernel, not into the next pass's peak.
        crate::bpf::sys::release_free_heap();
        self.rendered = None;
        self.shared.last_success.store(unix_now(), Ordering::Relaxed);
        // What the kernel takes, as decided so far (the first pass has
        // tried what the event source did not): one series per feature.
        let found = crate::features::found();
        self.shared.metrics.kernel_features(&found);
        if !self.shared.ready.swap(true, Ordering::Relaxed) {
            tracing::info!("kernel features: {}", crate::features::summary(&found));
        }
        self.remediate(&report);
        self.schedule.pass_done(Instant::now(), took, untracked, jittered(self.config.interval));
    }

    /// The report of the picture as JSON, rendered again only when the
    /// picture changed since.
    pub(super) fn render(&mut self) -> Option<Bytes> {
        let picture = self.picture.as_mut()?;
        let key = (picture.generation(), self.next_seq);
        if let Some((g, n, bytes)) = &self.rendered
            && (*g, *n) == key
        {
            return Some(bytes.clone());
        }
        picture.set_events(self.history.attachers());
        let mut out = Vec::new();
        Report::new(picture.snapshot(), &self.config.policy).write_json(&mut out).ok()?;
        let bytes = Bytes::from(out);
        self.rendered = Some((key.0, key.1, bytes.clone()));
        Some(bytes)
    }
}
