//! The daemon's Prometheus metrics: one `Metrics` struct owning one registry.
//!
//! Over 500 lines: every series is declared, described and updated here,
//! so that `/metrics` and docs/metrics.md have one source.
//!
//! Naming follows Prometheus conventions (base units, `_total` counters, a
//! `_build_info` gauge). Labels stay bounded: attach type and owner class on
//! counts; only the per-finding series name cgroups, pods and programs, and a
//! node has few findings. Series known in advance are exported as 0.

use prometheus::{
    CounterVec, Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use strum::IntoEnumIterator;

use crate::bpf::{AttachType, BpfCommand};
use crate::daemon::schedule::Trigger;
use crate::daemon::trace::Source;
use crate::findings::{Finding, Kind, Severity};
use crate::owner::Owner;
use crate::report::Report;

/// The labels of `cgaudit_socket_lb_misattached`. The pod and container a
/// series is about are `pod_namespace`, `pod_name`, `container_name` (as
/// in the JSON report), never `namespace`, `pod`, `container`: the
/// Prometheus Operator sets those on every target it scrapes (the agent's
/// own pod), and would rename ours to `exported_*`.
pub const MISATTACHED_LABELS: &[&str] = &[
    "cgroup",
    "attach_type",
    "owner",
    "severity",
    "pod_namespace",
    "pod_name",
    "container_name",
    "pod_uid",
    "container_id",
    "prog_name",
    "attached_by",
];

/// The labels of `cgaudit_pod_outside_datapath`: one series per pod whose
/// interface lacks the CNI's per-endpoint programs.
pub const OUTSIDE_DATAPATH_LABELS: &[&str] =
    &["owner", "severity", "pod_namespace", "pod_name", "pod_uid", "interface"];

/// The labels of `cgaudit_socket_lb_misattached_programs`: one series per
/// misattached cgroup, its hooks in one label.
pub const MISATTACHED_CGROUP_LABELS: &[&str] =
    &["cgroup", "owner", "severity", "pod_namespace", "pod_name", "container_name", "pod_uid", "container_id", "hooks"];

/// The `kind` label of `cgaudit_objects_skipped_total`, in the order of
/// `snapshot::Skipped`'s counts.
const SKIPPED_KINDS: [&str; 4] = ["link", "btf", "unreadable_link", "unreadable_program"];

/// What became of a connection to the HTTP port (`outcome` of
/// `cgaudit_http_connections_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum Connection {
    /// Given a place and served.
    Served,
    /// Closed for saying nothing while places were wanted.
    Silent,
    /// No place: handed to the probe lane (`/healthz`, `/readyz`, `/metrics`).
    Lane,
    /// No place, and the probe lane full too: closed at once.
    Refused,
}

impl Connection {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The most series a node exports of each per-finding family
/// (`socket_lb_misattached`, `socket_lb_misattached_programs`); the rest
/// are counted in their `_truncated` gauge.
pub const SERIES_MAX: usize = 64;

/// Why an audit failed or was incomplete.
pub const ERROR_REASONS: [&str; 3] = ["scan_failed", "cgroup_unreadable", "namespaced_view"];

/// Every (kind, severity) a finding can have.
fn finding_series() -> impl Iterator<Item = (Kind, Severity)> {
    Kind::iter().flat_map(|k| k.severities().iter().map(move |&s| (k, s)))
}

pub struct Metrics {
    pub registry: Registry,
    /// The standard `process_*` series (CPU, memory, descriptors, start
    /// time), which carry no `cgaudit_` prefix.
    process: Registry,
    findings: IntGaugeVec,
    findings_by_owner: IntGaugeVec,
    kernel_feature: IntGaugeVec,
    misattached: IntGaugeVec,
    misattached_cgroups: IntGaugeVec,
    misattached_truncated: IntGauge,
    misattached_cgroups_truncated: IntGauge,
    attachments: IntGaugeVec,
    pods_without_socket_lb: IntGauge,
    outside_datapath: IntGaugeVec,
    outside_datapath_truncated: IntGauge,
    device_hook_revision: IntGaugeVec,
    audit_duration: Histogram,
    audits: IntCounterVec,
    incremental: IntCounter,
    audit_errors: IntCounterVec,
    last_success: IntGauge,
    cgroups_scanned: IntGauge,
    cgroups_vanished: IntCounter,
    view_complete: IntGauge,
    attach_events: IntCounterVec,
    events_lost: IntCounter,
    returns_missed: IntCounter,
    tracing_active: IntGauge,
    event_source: IntGaugeVec,
    attachment_sweeps: IntCounter,
    sweep_period: Gauge,
    remediations: IntCounterVec,
    hook_programs_max: IntGaugeVec,
    objects_skipped: IntCounterVec,
    http_connections: IntCounterVec,
    degraded: IntGaugeVec,
    busy: CounterVec,
    /// Bumped when what a scrape shows changed (`changed`).
    generation: AtomicU64,
    /// The last rendering: the generation it showed, when it was made.
    rendered: Mutex<Option<(u64, std::time::Instant, Bytes)>>,
}

/// The most `cgaudit_device_hook_revision` series (a pod with CAP_NET_ADMIN
/// can make thousands of devices in the node's namespace).
const DEVICE_REVISIONS_SHOWN: usize = 64;

/// How long one rendering of /metrics is served while nothing else changed.
const RENDER_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// What the daemon's worker spends its time on (the `work` label of
/// `cgaudit_worker_busy_seconds_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter)]
#[strum(serialize_all = "snake_case")]
pub enum Work {
    /// A full pass over the tree (startup, --interval, lost events, a tree
    /// that differs).
    FullPass,
    /// Judging the picture: the findings, the CNI agents and mounts.
    Judge,
    /// The reading fallback's sweep of every cgroup's own programs, and the
    /// cgroups it reads again.
    Sweep,
    /// Cgroups read again after an event, and new cgroups a moment after
    /// they appear.
    Reread,
    /// Kernel events applied to the picture.
    Event,
}

impl Work {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn register<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: T) -> T {
    r.register(Box::new(c.clone())).expect("metric names are unique");
    c
}

impl Metrics {
    pub fn new(kernel: &str) -> Metrics {
        let r = Registry::new_custom(Some("cgaudit".into()), None).expect("valid prefix");
        let gauge_vec = |name: &str, help: &str, labels: &[&str]| {
            register(&r, IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
        };
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            register(&r, IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
        };
        let gauge = |name: &str, help: &str| register(&r, IntGauge::new(name, help).expect("valid metric"));
        let counter = |name: &str, help: &str| register(&r, IntCounter::new(name, help).expect("valid metric"));

        let build = gauge_vec(
            "build_info",
            "The agent's version, the commit it was built from, the architecture and target it was built for and the day of its commit (what `agent --version` says); always 1.",
            &["version", "revision", "arch", "target", "build_date"],
        );
        build
            .with_label_values(&[
                crate::build::VERSION,
                crate::build::REVISION,
                std::env::consts::ARCH,
                crate::build::TARGET,
                crate::build::BUILD_DATE,
            ])
            .set(1);
        let kernel_info = gauge_vec("kernel_info", "The running kernel's release; always 1.", &["release"]);
        kernel_info.with_label_values(&[kernel]).set(1);
        let process = Registry::new();
        #[cfg(target_os = "linux")]
        process
            .register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))
            .expect("process metrics register once");
        let m = Metrics {
            process,
            findings: gauge_vec("findings", "Findings of the last audit, by kind and severity.", &["kind", "severity"]),
            kernel_feature: gauge_vec(
                "kernel_feature",
                "What the running kernel takes, each feature tried once (the JSON's kernel_features): 1 on the series of its verdict, `works` true or false. Which nodes fell back to reading or to the syscall walk: cgaudit_kernel_feature{feature=\"fexit\",works=\"false\"}.",
                &["feature", "works"],
            ),
            findings_by_owner: gauge_vec(
                "findings_by_owner",
                "Findings of the last audit, by kind, severity and the owner they are about (only those present: what the alerts name).",
                &["kind", "severity", "owner"],
            ),
            misattached: gauge_vec(
                "socket_lb_misattached",
                "1 per program on a socket-address hook below the root cgroup: severity critical when proven an owner's that means it for the root, warning when nobody's is proven (at most 64 series a node, the critical first; the rest are counted in socket_lb_misattached_truncated).",
                MISATTACHED_LABELS,
            ),
            misattached_cgroups: gauge_vec(
                "socket_lb_misattached_programs",
                "Programs on socket-address hooks below the root cgroup, one series per cgroup and owner that holds any, with the hooks they are on and the finding's severity (what the misattachment alert pages on: one incident, one series; the critical first).",
                MISATTACHED_CGROUP_LABELS,
            ),
            misattached_truncated: gauge(
                "socket_lb_misattached_truncated",
                "Misattached socket-LB programs with no socket_lb_misattached series: past 64 series a node, or past the 16 programs one finding lists.",
            ),
            misattached_cgroups_truncated: gauge(
                "socket_lb_misattached_programs_truncated",
                "Misattached cgroups with no socket_lb_misattached_programs series: past 64 series a node.",
            ),
            attachments: gauge_vec(
                "attachments",
                "cgroup BPF attachments of the last audit, by hook, owner and whether at the root.",
                &["attach_type", "owner", "location"],
            ),
            hook_programs_max: gauge_vec(
                "hook_programs_max",
                "The most programs attached to this hook on any one cgroup (the kernel allows 64 per cgroup and hook).",
                &["attach_type"],
            ),
            pods_without_socket_lb: gauge(
                "pods_without_socket_lb",
                "Pods with no CNI connect program in effect while the CNI's socket LB is in use.",
            ),
            outside_datapath: gauge_vec(
                "pod_outside_datapath",
                "1 per pod whose host-side interface carries none of the CNI's per-endpoint programs while other pods' do (at most 64 series a node; the rest are counted in pod_outside_datapath_truncated).",
                OUTSIDE_DATAPATH_LABELS,
            ),
            outside_datapath_truncated: gauge(
                "pod_outside_datapath_truncated",
                "Pods outside the CNI's datapath with no pod_outside_datapath series: past 64 series a node.",
            ),
            device_hook_revision: gauge_vec(
                "device_hook_revision",
                "The tcx (or netkit) revision of a hook of one of the node's own devices: it moves with every attach and detach, so a rate shows re-link churn. Hooks with programs or changed since their device was made, the 64 highest.",
                &["device", "hook"],
            ),
            audit_duration: register(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new("audit_duration_seconds", "Wall time of one audit.")
                        .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
                )
                .expect("valid metric"),
            ),
            audits: counter_vec(
                "audits_total",
                "Full passes over the cgroup tree, by what triggered them.",
                &["trigger"],
            ),
            incremental: counter(
                "incremental_updates_total",
                "Changes applied to the daemon's picture of the node from kernel events, without a full pass.",
            ),
            audit_errors: counter_vec(
                "audit_errors_total",
                "Audits that failed or were incomplete, by reason.",
                &["reason"],
            ),
            last_success: gauge(
                "last_successful_audit_timestamp_seconds",
                "Unix time of the last audit that completed.",
            ),
            cgroups_scanned: gauge("cgroups_scanned", "cgroups walked by the last audit."),
            cgroups_vanished: counter("cgroups_vanished_total", "cgroups removed while an audit was walking them."),
            view_complete: gauge(
                "audit_view_complete",
                "1 when the last audit saw the real root, 0 when its view was namespaced.",
            ),
            attach_events: counter_vec(
                "bpf_attach_events_total",
                "Changes to cgroup attachments the kernel reported, by the bpf() command that makes them and hook.",
                &["command", "attach_type"],
            ),
            events_lost: counter(
                "bpf_events_lost_total",
                "Kernel events dropped (ring buffer full, a CPU over its event budget, or not readable whole); each loss leads to a full pass.",
            ),
            returns_missed: counter(
                "kprobe_returns_missed_total",
                "kprobe source: calls whose return the kretprobe never saw (its instances, maxactive, ran out: many threads inside the attach functions at once), so their events were lost; counted in bpf_events_lost_total too.",
            ),
            tracing_active: gauge(
                "event_tracing_active",
                "1 when changes to cgroup attachments arrive as kernel events (fexit, kprobe or syscall tracing), 0 when they are found by reading.",
            ),
            event_source: gauge_vec(
                "event_source",
                "1 for the source the daemon learns of attachment changes from (fexit, kprobe, reading, syscalls, none), chosen at start by trying each.",
                &["source"],
            ),
            attachment_sweeps: counter(
                "attachment_sweeps_total",
                "Attachment sweeps of the reading fallback (every cgroup's own programs compared with the picture).",
            ),
            sweep_period: register(
                &r,
                Gauge::new(
                    "attachment_sweep_period_seconds",
                    "Time between attachment sweeps of the reading fallback (a hundred times what one takes, 2s to 8s); 0 with another source.",
                )
                .expect("valid metric"),
            ),
            objects_skipped: counter_vec(
                "objects_skipped_total",
                "Objects an audit could not read and went on without, by kind (link: still being made after retries; btf: a program's BTF too large to read for its name; unreadable_link, unreadable_program: the kernel would not describe it).",
                &["kind"],
            ),
            http_connections: counter_vec(
                "http_connections_total",
                "Connections to the HTTP port by what became of them (served; silent: closed for saying nothing while places were wanted; lane: no place, answered by the probe lane; refused: the lane full too).",
                &["outcome"],
            ),
            degraded: gauge_vec(
                "degraded",
                "1 while the daemon works in a reduced mode, by reason (cgroup_count: more cgroups than --max-cgroups, so no tree is kept and changes are found by full passes).",
                &["reason"],
            ),
            busy: register(
                &r,
                CounterVec::new(
                    Opts::new(
                        "worker_busy_seconds_total",
                        "Wall time the daemon's worker spent, by work (full_pass, judge, sweep, reread, event); rate() of the sum is nearly all of the daemon's CPU.",
                    ),
                    &["work"],
                )
                .expect("valid metric"),
            ),
            remediations: counter_vec(
                "remediations_total",
                "Remediations planned or made by the daemon (--remediate), by action and result.",
                &["action", "result"],
            ),
            registry: r,
            generation: AtomicU64::new(0),
            rendered: Mutex::new(None),
        };
        for (kind, severity) in finding_series() {
            m.findings.with_label_values(&[kind.as_str(), severity.as_str()]).set(0);
        }
        for t in Trigger::iter() {
            m.audits.with_label_values(&[t.as_str()]);
        }
        for reason in ERROR_REASONS {
            m.audit_errors.with_label_values(&[reason]);
        }
        for cmd in BpfCommand::iter() {
            if cmd.names_hook() {
                for t in AttachType::all().filter(|t| t.is_socket_lb()) {
                    m.attach_events.with_label_values(&[cmd.as_str(), t.name()]);
                }
            } else {
                m.attach_events.with_label_values(&[cmd.as_str(), "none"]);
            }
        }
        for w in Work::iter() {
            m.busy.with_label_values(&[w.as_str()]);
        }
        for kind in SKIPPED_KINDS {
            m.objects_skipped.with_label_values(&[kind]);
        }
        for c in Connection::iter() {
            m.http_connections.with_label_values(&[c.as_str()]);
        }
        m.degraded.with_label_values(&["cgroup_count"]).set(0);
        // What can run: `auto` is only ever asked for.
        for source in Source::iter().filter(|s| *s != Source::Auto) {
            m.event_source.with_label_values(&[source.as_str()]).set(0);
        }
        for result in ["nothing_to_do", "dry_run", "done", "refused", "failed"] {
            m.remediations.with_label_values(&["remount", result]);
        }
        m.zero_attachments();
        m
    }

    pub fn remediation(&self, action: &str, result: &str) {
        self.changed();
        self.remediations.with_label_values(&[action, result]).inc();
    }

    /// The socket-LB hooks of the socket load balancers (Cilium, Calico)
    /// at and below the root: known in advance, exported as 0 while empty.
    /// Other owners' series appear when they have attachments.
    fn zero_attachments(&self) {
        self.attachments.reset();
        for t in AttachType::all().filter(|t| t.is_socket_lb()) {
            for owner in Owner::known().filter(|o| o.balances_sockets()) {
                for location in ["root", "below_root"] {
                    self.attachments.with_label_values(&[t.name(), owner.as_str(), location]).set(0);
                }
            }
        }
    }

    /// The event source the daemon runs with.
    pub fn set_event_source(&self, source: Source) {
        self.changed();
        for s in Source::iter().filter(|s| *s != Source::Auto) {
            self.event_source.with_label_values(&[s.as_str()]).set(i64::from(s == source));
        }
        self.tracing_active.set(i64::from(source.traces_calls()));
    }

    pub fn set_degraded(&self, reason: &str, on: bool) {
        self.changed();
        self.degraded.with_label_values(&[reason]).set(i64::from(on));
    }

    pub fn objects_skipped(&self, kind: &str, n: u64) {
        self.objects_skipped.with_label_values(&[kind]).inc_by(n);
    }

    pub fn connection(&self, outcome: Connection) {
        self.http_connections.with_label_values(&[outcome.as_str()]).inc();
    }

    pub fn busy(&self, work: Work, took: std::time::Duration) {
        self.busy.with_label_values(&[work.as_str()]).inc_by(took.as_secs_f64());
    }

    pub fn attachment_sweep(&self) {
        self.attachment_sweeps.inc();
    }

    pub fn set_sweep_period(&self, period: std::time::Duration) {
        self.sweep_period.set(period.as_secs_f64());
    }

    pub fn attach_event(&self, command: BpfCommand, attach_type: Option<AttachType>) {
        self.attach_events.with_label_values(&[command.as_str(), attach_type.map_or("none", AttachType::name)]).inc();
    }

    pub fn events_lost(&self, total: u64) {
        let delta = total.saturating_sub(self.events_lost.get());
        self.events_lost.inc_by(delta);
    }

    pub fn returns_missed(&self, total: u64) {
        let delta = total.saturating_sub(self.returns_missed.get());
        self.returns_missed.inc_by(delta);
    }

    pub fn incremental_update(&self) {
        self.incremental.inc();
    }

    pub fn audit_failed(&self, trigger: Trigger, seconds: f64) {
        self.audits.with_label_values(&[trigger.as_str()]).inc();
        self.audit_duration.observe(seconds);
        self.audit_errors.with_label_values(&["scan_failed"]).inc();
    }

    /// Publishes one completed full pass.
    pub fn audit_done(&self, trigger: Trigger, seconds: f64, report: &Report, now_unix: i64) {
        self.changed();
        self.audits.with_label_values(&[trigger.as_str()]).inc();
        self.audit_duration.observe(seconds);
        if !report.errors.is_empty() {
            self.audit_errors.with_label_values(&["cgroup_unreadable"]).inc();
        }
        let complete = report.view_complete();
        if !complete {
            self.audit_errors.with_label_values(&["namespaced_view"]).inc();
        }
        self.view_complete.set(i64::from(complete));
        self.last_success.set(now_unix);
        self.cgroups_scanned.set(report.cgroups_scanned as i64);
        self.cgroups_vanished.inc_by(report.cgroups_vanished);
        let s = report.objects_skipped;
        for (kind, n) in SKIPPED_KINDS.into_iter().zip([s.links, s.btf, s.unreadable_links, s.unreadable_programs]) {
            self.objects_skipped(kind, n);
        }
        self.findings(&report.findings);
        self.zero_attachments();
        for a in &report.attachments {
            self.attachment(a.attach_type, a.owner, a.cgroup == "/", 1);
        }
        let mut counts: std::collections::HashMap<(&str, AttachType), i64> = std::collections::HashMap::new();
        for a in &report.attachments {
            *counts.entry((a.cgroup.as_str(), a.attach_type)).or_default() += 1;
        }
        for t in AttachType::all() {
            let max = counts.iter().filter(|((_, h), _)| *h == t).map(|(_, n)| *n).max().unwrap_or(0);
            self.hook_programs_max.with_label_values(&[t.name()]).set(max);
        }
    }

    /// The tcx and netkit revisions of the node's devices' hooks
    /// (`DEVICE_REVISIONS_SHOWN` at most: the highest).
    pub fn device_revisions(&self, devices: &crate::snapshot::devices::HostDevices) {
        let mut all: Vec<(&str, &str, u64)> = devices
            .devices
            .iter()
            .flat_map(|d| d.revisions.iter().map(move |r| (d.name.as_str(), r.hook.as_str(), r.revision)))
            .collect();
        all.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
        all.truncate(DEVICE_REVISIONS_SHOWN);
        self.changed();
        self.device_hook_revision.reset();
        for (device, hook, revision) in all {
            self.device_hook_revision.with_label_values(&[device, hook]).set(revision as i64);
        }
    }

    pub fn set_hook_programs_max(&self, attach_type: AttachType, n: i64) {
        self.changed();
        self.hook_programs_max.with_label_values(&[attach_type.name()]).set(n);
    }

    /// What the kernel takes, as tried so far: one series per feature.
    pub fn kernel_features(
        &self,
        found: &std::collections::BTreeMap<crate::features::Feature, crate::features::Verdict>,
    ) {
        self.changed();
        self.kernel_feature.reset();
        for (feature, verdict) in found {
            self.kernel_feature
                .with_label_values(&[feature.as_str(), if verdict.works { "true" } else { "false" }])
                .set(1);
        }
    }

    /// Publishes the findings of the node as it is now.
    pub fn findings(&self, findings: &[Finding]) {
        self.changed();
        for (kind, severity) in finding_series() {
            let n = findings.iter().filter(|f| f.kind == kind && f.severity == severity).count();
            self.findings.with_label_values(&[kind.as_str(), severity.as_str()]).set(n as i64);
        }
        // By owner: a series per (kind, severity, owner) found, at most as
        // many as kinds × severities × owners (the registry's, bounded).
        self.findings_by_owner.reset();
        let mut by_owner: std::collections::BTreeMap<(Kind, Severity, &str), i64> = std::collections::BTreeMap::new();
        for f in findings {
            *by_owner.entry((f.kind, f.severity, f.owner.map_or("", Owner::as_str))).or_default() += 1;
        }
        for ((kind, severity, owner), n) in by_owner {
            self.findings_by_owner.with_label_values(&[kind.as_str(), severity.as_str(), owner]).set(n);
        }
        self.misattached.reset();
        self.misattached_cgroups.reset();
        // One series per misattached cgroup and owner (one finding each),
        // naming its hooks; one per program, for the first programs of
        // each. Both stop at SERIES_MAX a node, with the rest counted: a
        // tenant fills 64 programs a hook on as many cgroups as it makes.
        let below: Vec<&Finding> = findings.iter().filter(|f| f.kind == Kind::SocketLbBelowRoot).collect();
        let mut left_out = (0, 0);
        for f in below.iter().skip(SERIES_MAX) {
            left_out.0 += 1;
            left_out.1 += f.count.unwrap_or(0);
        }
        let mut programs_shown = 0;
        for f in below.iter().take(SERIES_MAX) {
            let hooks: Vec<&str> = f.hooks.iter().map(|h| h.name()).collect();
            let pod = [
                f.pod_namespace.as_deref().unwrap_or(""),
                f.pod_name.as_deref().unwrap_or(""),
                f.container_name.as_deref().unwrap_or(""),
                f.pod_uid.as_deref().unwrap_or(""),
                f.container_id.as_deref().unwrap_or(""),
            ];
            let cgroup = f.cgroup.as_deref().unwrap_or("");
            let owner = f.owner.map_or("unknown", Owner::as_str);
            let severity = f.severity.as_str();
            let joined = hooks.join(",");
            let mut labels = vec![cgroup, owner, severity];
            labels.extend(pod);
            labels.push(&joined);
            self.misattached_cgroups.with_label_values(&labels).set(f.count.unwrap_or(0) as i64);
            let mut shown = 0;
            for p in f.programs.iter().take(SERIES_MAX - programs_shown) {
                // The command that attached it; never its pid, which would
                // make a new series at every restart of the attaching process.
                let attached_by = p.attached_by.as_ref().map_or("", |a| a.comm.as_str());
                let mut labels = vec![cgroup, p.attach_type.name(), owner, severity];
                labels.extend(pod);
                labels.extend([p.prog_name.as_str(), attached_by]);
                self.misattached.with_label_values(&labels).set(1);
                shown += 1;
            }
            programs_shown += shown;
            left_out.1 += f.count.unwrap_or(0).saturating_sub(shown as u64);
        }
        self.misattached_cgroups_truncated.set(left_out.0 as i64);
        self.misattached_truncated.set(left_out.1 as i64);
        self.pods_without_socket_lb
            .set(findings.iter().filter(|f| f.kind == Kind::PodsWithoutSocketLb).filter_map(|f| f.count).sum::<u64>()
                as i64);
        self.outside_datapath.reset();
        let outside: Vec<&Finding> = findings.iter().filter(|f| f.kind == Kind::PodOutsideDatapath).collect();
        for f in outside.iter().take(SERIES_MAX) {
            let interface = f.interfaces.first().map_or("", |i| i.name.as_str());
            self.outside_datapath
                .with_label_values(&[
                    f.owner.map_or("unknown", Owner::as_str),
                    f.severity.as_str(),
                    f.pod_namespace.as_deref().unwrap_or(""),
                    f.pod_name.as_deref().unwrap_or(""),
                    f.pod_uid.as_deref().unwrap_or(""),
                    interface,
                ])
                .set(1);
        }
        self.outside_datapath_truncated.set(outside.len().saturating_sub(SERIES_MAX) as i64);
    }

    /// Adds `delta` to the attachments counted for a hook, owner and place.
    pub fn attachment(&self, attach_type: AttachType, owner: Owner, at_root: bool, delta: i64) {
        self.changed();
        let location = if at_root { "root" } else { "below_root" };
        self.attachments.with_label_values(&[attach_type.name(), owner.as_str(), location]).add(delta);
    }

    /// The text exposition format: the agent's series, then `process_*`.
    /// Rendered once and shared by every scrape until the findings or a
    /// full pass change it, or it is `RENDER_FRESH` old (counters and the
    /// process series move on their own): scrapers, however many and how
    /// often, cost one rendering a second at most.
    pub fn render(&self) -> Bytes {
        let generation = self.generation.load(Ordering::Relaxed);
        let mut cached = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, at, bytes)) = cached.as_ref()
            && *g == generation
            && at.elapsed() < RENDER_FRESH
        {
            return bytes.clone();
        }
        let mut families = self.registry.gather();
        families.extend(self.process.gather());
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&families, &mut buf);
        let bytes = Bytes::from(buf);
        *cached = Some((generation, std::time::Instant::now(), bytes.clone()));
        bytes
    }

    /// What the next scrape shows has changed (findings, a full pass).
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Policy, evaluate};
    use crate::fixtures::*;

    fn lines<'a>(scrape: &'a str, family: &str) -> Vec<&'a str> {
        scrape.lines().filter(|l| l.starts_with(&format!("{family}{{"))).collect()
    }

    /// Issue 36, H2: a series per program of attacker-chosen label text made
    /// /metrics 10.3 MB. Each per-finding family stops at SERIES_MAX a
    /// node, the rest counted in its `_truncated` gauge.
    #[test]
    fn per_finding_series_stop_at_their_cap_and_count_the_rest() {
        let mut s = node();
        for c in 0..70u32 {
            for h in ["connect4", "connect6"] {
                let id = 1000 + c * 2 + u32::from(h == "connect6");
                prog(&mut s, id, &format!("tenant_{id}"), crate::bpf::ProgType::CgroupSockAddr);
                attach(&mut s, &format!("/tenant/c{c}"), 100 + u64::from(c), h, id);
            }
        }
        let m = Metrics::new("6.18");
        m.findings(&evaluate(&s, &Policy::default()));
        let scrape = String::from_utf8(m.render().to_vec()).unwrap();
        assert_eq!(lines(&scrape, "cgaudit_socket_lb_misattached").len(), SERIES_MAX);
        assert_eq!(lines(&scrape, "cgaudit_socket_lb_misattached_programs").len(), SERIES_MAX);
        assert!(scrape.contains("cgaudit_socket_lb_misattached_truncated 76\n"), "140 programs, 64 shown");
        assert!(scrape.contains("cgaudit_socket_lb_misattached_programs_truncated 6\n"), "70 cgroups, 64 shown");
        assert!(scrape.contains(r#"hooks="connect4,connect6""#));
    }

    /// Scrapes share one rendering until what it shows changes.
    #[test]
    fn a_rendering_is_shared_until_the_findings_change() {
        let m = Metrics::new("6.18");
        let first = m.render();
        assert_eq!(m.render().as_ptr(), first.as_ptr(), "the same bytes, not a new rendering");
        m.findings(&[]);
        assert_ne!(m.render().as_ptr(), first.as_ptr());
    }
}
