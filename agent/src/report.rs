//! The audit report: a versioned JSON document for scripts and fleets, and a
//! table for people (`text.rs`). Both are rendered from the same `Report`.

use serde::Serialize;

use crate::bpf::{AttachFlags, AttachType, ProgType};
use crate::cgroup::RootKind;
use std::collections::BTreeMap;

use crate::findings::{self, Finding, Kind, Policy, Severity};
use crate::owner::Owner;
use crate::snapshot::{CgroupMount, ScanError, Skipped, Snapshot, WalkUsed};

/// `--fail-on`: the least severe finding that makes the exit code 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 1 on any finding.
    Warning,
    /// Exit 1 on critical findings only; warnings alone exit 0 (and are
    /// named in the output). What node-problem-detector's plugin uses, so
    /// that warnings seen during a CNI restart (cni_leftover_programs) do
    /// not flip a node condition.
    Critical,
}

/// Bumped on any incompatible change of the JSON layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The longest `--output summary` line: node-problem-detector's
/// `max_output_length` in the shipped plugin config (NPD cuts there).
pub const ONE_LINE_MAX: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct AttachmentOut {
    pub cgroup: String,
    pub cgroup_id: u64,
    pub attach_type: AttachType,
    pub attach_flags: AttachFlags,
    pub prog_id: u32,
    pub prog_name: Option<String>,
    pub prog_type: Option<ProgType>,
    pub prog_tag: Option<String>,
    pub link_id: Option<u32>,
    /// Attached with `BPF_F_PREORDER`: it runs first; null where not known
    /// (the README's JSON fields).
    pub preorder: Option<bool>,
    pub owner: Owner,
    /// What proves it `owner`'s (`held`, `pinned`, `attached_by_agent`,
    /// `agent_in_cgroup`, `mount_rooted`, `at_root`, `named`, `allowed`);
    /// `null` for `unknown`.
    pub proof: Option<crate::owner::Proof>,
    /// For `unknown`: the owner its name is like.
    pub named_like: Option<Owner>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Complete view, nothing wrong.
    Ok,
    /// At least one finding.
    Problem,
    /// No finding, but the view was namespaced: "clean" cannot be claimed.
    Incomplete,
}

/// The audit's verdict: status and how many findings, how many critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    pub findings: usize,
    pub critical: usize,
}

impl Verdict {
    /// The verdict of `findings` on a view that is `incomplete` or not: a
    /// finding is a problem whatever the view; none on an incomplete view
    /// is not OK.
    pub fn of(findings: &[Finding], incomplete: bool) -> Verdict {
        let status = if !findings.is_empty() {
            Status::Problem
        } else if incomplete {
            Status::Incomplete
        } else {
            Status::Ok
        };
        let critical = findings.iter().filter(|f| f.severity == Severity::Critical).count();
        Verdict { status, findings: findings.len(), critical }
    }
}

/// How the tree was read (`--walk`).
#[derive(Debug, Clone, Serialize)]
pub struct WalkOut {
    pub method: WalkUsed,
    /// Why `--walk auto` could not use the in-kernel pass.
    pub fallback_reason: Option<String>,
    /// In-kernel passes run: 1, or more when the record buffer overflowed
    /// and the pass was run again with a larger one (0 for `syscalls`).
    pub passes: u32,
}

/// The agent that wrote a report.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Agent {
    pub version: &'static str,
    /// The commit it was built from.
    pub revision: &'static str,
}

impl Agent {
    pub const THIS: Agent = Agent { version: crate::build::VERSION, revision: crate::build::REVISION };
}

/// Whether the audit saw the whole node, and if not, why.
#[derive(Debug, Clone, Serialize)]
pub struct View {
    pub complete: bool,
    /// What hid part of the node (`null` when complete).
    pub reason: Option<String>,
}

/// Now, as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// What `agent audit --output json` prints when there is no report to
/// print (exit 2): a fleet collector reading JSON gets JSON.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorReport {
    pub schema_version: u32,
    /// Always `error`.
    pub status: &'static str,
    pub error: String,
    pub node: String,
    pub agent: Agent,
    pub generated_at: String,
}

impl ErrorReport {
    pub fn new(error: String, node: String) -> ErrorReport {
        ErrorReport {
            schema_version: SCHEMA_VERSION,
            status: "error",
            error,
            node,
            agent: Agent::THIS,
            generated_at: now_rfc3339(),
        }
    }
}

/// The most findings of one kind a report lists; the rest are counted
/// (`findings_omitted`, and "and N more" in the table). Findings are one per
/// cgroup, owner and kind, but a tenant makes as many cgroups as it likes.
pub const FINDINGS_SHOWN: usize = 64;

/// The most attachments of one cgroup a report lists. Runtimes and CNIs
/// attach a few per cgroup; the kernel allows 64 per hook, on each of 29
/// hooks, to anyone with CAP_BPF and a cgroup of its own.
pub const ATTACHMENTS_SHOWN: usize = 64;

/// The attachments a report lists: the first `ATTACHMENTS_SHOWN` of each
/// cgroup (they come grouped by cgroup).
pub fn listed(attachments: &[AttachmentOut]) -> impl Iterator<Item = &AttachmentOut> {
    attachments.chunk_by(|a, b| a.cgroup_id == b.cgroup_id).flat_map(|c| c.iter().take(ATTACHMENTS_SHOWN))
}

fn listed_attachments<S: serde::Serializer>(attachments: &[AttachmentOut], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(listed(attachments))
}

/// The findings a report lists: the first `FINDINGS_SHOWN` of each kind
/// (they come sorted by severity, then kind).
pub fn shown(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    let mut seen: BTreeMap<Kind, usize> = BTreeMap::new();
    findings.iter().filter(move |f| {
        let n = seen.entry(f.kind).or_default();
        *n += 1;
        *n <= FINDINGS_SHOWN
    })
}

fn shown_findings<S: serde::Serializer>(findings: &[Finding], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(shown(findings))
}

/// How many findings of each kind a report leaves unlisted.
fn omitted(findings: &[Finding]) -> BTreeMap<Kind, u64> {
    let mut all: BTreeMap<Kind, u64> = BTreeMap::new();
    for f in findings {
        *all.entry(f.kind).or_default() += 1;
    }
    all.into_iter().filter_map(|(k, n)| Some((k, n.checked_sub(FINDINGS_SHOWN as u64).filter(|m| *m > 0)?))).collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub node: String,
    pub agent: Agent,
    /// When the node was seen so (RFC 3339, UTC).
    pub generated_at: String,
    pub kernel: String,
    pub status: Status,
    pub view: View,
    pub cgroup_root: String,
    pub root_cgroup_id: u64,
    pub root_kind: RootKind,
    pub root_note: Option<String>,
    pub cgroups_scanned: u64,
    pub cgroups_vanished: u64,
    pub walk: WalkOut,
    /// Objects the audit could not read and went on without.
    pub objects_skipped: Skipped,
    pub unsupported_attach_types: Vec<AttachType>,
    /// What this kernel takes, each tried once: `{"works": bool, "detail"}`
    /// per feature tried (`features`).
    pub kernel_features: std::collections::BTreeMap<crate::features::Feature, crate::features::Verdict>,
    /// Every attachment; the JSON lists at most `ATTACHMENTS_SHOWN` of one
    /// cgroup and counts the rest in `attachments_omitted`.
    #[serde(serialize_with = "listed_attachments")]
    pub attachments: Vec<AttachmentOut>,
    /// Attachments past `ATTACHMENTS_SHOWN` of their cgroup.
    pub attachments_omitted: u64,
    /// Every finding; the JSON lists at most `FINDINGS_SHOWN` of each kind,
    /// the most severe first, and counts the rest in `findings_omitted`.
    #[serde(serialize_with = "shown_findings")]
    pub findings: Vec<Finding>,
    /// Findings past `FINDINGS_SHOWN` of their kind, by kind.
    pub findings_omitted: BTreeMap<Kind, u64>,
    pub mounts: Vec<CgroupMount>,
    /// The pods' host-side interfaces and the programs on them: the
    /// second layer of coverage (`pod_outside_datapath`).
    pub datapath: Datapath,
    pub errors: Vec<ScanError>,
}

/// Which per-endpoint datapath the node runs, and each pod's interfaces.
#[derive(Debug, Clone, Serialize)]
pub struct Datapath {
    /// The owners whose datapath `configured` says the node runs (empty:
    /// no eBPF datapath, e.g. bridge, ptp, Calico with iptables or a VPC
    /// CNI alone).
    pub owners: Vec<Owner>,
    /// What says the node runs an owner's datapath: its running agent, its
    /// setting, or the node's CNI configuration.
    pub configured: Vec<crate::snapshot::net::Configured>,
    /// Why the interfaces could not be read, if they could not.
    pub error: Option<String>,
    /// Every pod: hostNetwork, its interfaces and their programs, or why not.
    pub pods: Vec<crate::snapshot::net::PodNet>,
    /// The node's own devices and the programs on them, each with its owner
    /// and what proves it (`owner::hooks`).
    pub devices: crate::snapshot::devices::HostDevices,
}

impl Report {
    pub fn new(snap: &Snapshot, policy: &Policy) -> Report {
        let findings = findings::evaluate(snap, policy);
        let incomplete = findings::incomplete(snap);
        let status = Verdict::of(&findings, incomplete.is_some()).status;
        let attachments: Vec<AttachmentOut> = snap
            .attachments
            .iter()
            .zip(findings::owned(snap, policy))
            .map(|(a, owned)| {
                let p = snap.programs.get(&a.prog_id);
                AttachmentOut {
                    cgroup: a.cgroup.clone(),
                    cgroup_id: a.cgroup_id,
                    attach_type: a.attach_type,
                    attach_flags: a.attach_flags,
                    prog_id: a.prog_id,
                    prog_name: p.map(|p| p.name.clone()),
                    prog_type: p.map(|p| p.prog_type),
                    prog_tag: p.map(|p| p.tag.clone()),
                    link_id: a.link_id,
                    preorder: a.preorder,
                    owner: owned.owner,
                    proof: owned.proof,
                    named_like: owned.named_like,
                }
            })
            .collect();
        Report {
            schema_version: SCHEMA_VERSION,
            node: snap.node.clone(),
            agent: Agent::THIS,
            generated_at: now_rfc3339(),
            kernel: snap.kernel.clone(),
            status,
            view: View { complete: incomplete.is_none(), reason: incomplete },
            cgroup_root: snap.root.path.display().to_string(),
            root_cgroup_id: snap.root.cgroup_id,
            root_kind: snap.root.kind,
            root_note: snap.root.note.clone(),
            cgroups_scanned: snap.cgroups_scanned,
            cgroups_vanished: snap.cgroups_vanished,
            walk: WalkOut {
                method: snap.walk.method,
                fallback_reason: snap.walk.fallback.clone(),
                passes: snap.walk.passes,
            },
            objects_skipped: snap.skipped,
            unsupported_attach_types: snap.unsupported_attach_types.clone(),
            kernel_features: snap.kernel_features.clone(),
            attachments_omitted: attachments.len().saturating_sub(listed(&attachments).count()) as u64,
            attachments,
            findings_omitted: omitted(&findings),
            findings,
            mounts: snap.mounts.clone(),
            datapath: Datapath {
                owners: findings::outside_datapath::datapaths(snap),
                configured: snap.pod_networks.configured.clone(),
                error: snap.pod_networks.error.clone(),
                pods: snap
                    .pod_networks
                    .pods
                    .iter()
                    .map(|p| {
                        let named = snap.names.pod(&p.pod_uid, None);
                        crate::snapshot::net::PodNet {
                            namespace: named.map(|n| n.namespace.clone()),
                            name: named.map(|n| n.name.clone()),
                            ..p.clone()
                        }
                    })
                    .collect(),
                devices: snap.devices.clone(),
            },
            errors: snap.errors.clone(),
        }
    }

    /// What the summary line leads with: a change of it is news.
    pub fn verdict(&self) -> Verdict {
        Verdict::of(&self.findings, !self.view.complete)
    }

    /// The audit saw the whole node: the real root, and the node's processes.
    pub fn view_complete(&self) -> bool {
        self.view.complete
    }

    /// The findings that make the exit code 1 under `fail_on`.
    pub fn failing(&self, fail_on: FailOn) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| fail_on == FailOn::Warning || f.severity == Severity::Critical)
    }

    /// node-problem-detector's plugin contract: 0 OK, 1 problem, 2 unknown.
    /// A finding at `fail_on` or above is a problem whatever the view (it
    /// is there however much else was hidden); below it, an incomplete view
    /// cannot be called OK.
    pub fn exit_code(&self, fail_on: FailOn) -> u8 {
        if self.failing(fail_on).next().is_some() {
            1
        } else if !self.view.complete {
            2
        } else {
            0
        }
    }

    /// The JSON document and a newline, written as it is serialized.
    pub fn write_json(&self, mut out: impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut out, self)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    #[cfg(test)]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

mod text;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::snapshot::WalkInfo;

    #[test]
    fn the_walk_and_a_fallback_reason_are_reported() {
        let mut snap = node();
        let report = Report::new(&snap, &Policy::default());
        assert_eq!(report.walk.method, WalkUsed::BpfIter);
        assert!(!report.to_table().contains("not in one kernel pass"));
        snap.walk = WalkInfo {
            method: WalkUsed::Syscalls,
            fallback: Some("no struct cgroup in the kernel's BTF".into()),
            passes: 0,
        };
        let report = Report::new(&snap, &Policy::default());
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["walk"]["method"], "syscalls");
        assert_eq!(json["walk"]["fallback_reason"], "no struct cgroup in the kernel's BTF");
        assert!(
            report.to_table().contains("note: cgroups read by syscalls, not in one kernel pass: no struct cgroup"),
            "{}",
            report.to_table()
        );
    }

    /// Issue 36, H2: what a report lists is bounded whatever a tenant
    /// attaches: 64 findings of a kind and 64 attachments of a cgroup, the
    /// rest counted; the verdict and the exit code count them all.
    #[test]
    fn a_report_lists_at_most_so_many_findings_of_a_kind_and_attachments_of_a_cgroup() {
        let mut s = node();
        for i in 0..70u32 {
            prog(&mut s, 1000 + i, &format!("tenant_{i}"), crate::bpf::ProgType::CgroupSockAddr);
            attach(&mut s, &format!("/tenant/c{i}"), 100 + u64::from(i), "connect4", 1000 + i);
        }
        for i in 0..100u32 {
            prog(&mut s, 5000 + i, "", crate::bpf::ProgType::CgroupDevice);
            attach(&mut s, "/tenant/full", 99, "device", 5000 + i);
        }
        let r = Report::new(&s, &Policy::default());
        assert_eq!(r.verdict().findings, 71, "70 cgroups misattached, one hook crowded");
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let below = json["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").count();
        assert_eq!(below, FINDINGS_SHOWN);
        assert_eq!(json["findings_omitted"], serde_json::json!({"socket_lb_below_root": 6}));
        assert_eq!(json["attachments"].as_array().unwrap().len(), 70 + ATTACHMENTS_SHOWN);
        assert_eq!(json["attachments_omitted"], 36);
        let table = r.to_table();
        assert!(table.contains("... and 6 more socket_lb_below_root findings"), "{table}");
        assert!(table.contains("... and 36 more on this cgroup"), "{table}");
        assert_eq!(r.exit_code(FailOn::Critical), 1);
    }

    #[test]
    fn namespaced_view_is_incomplete_never_ok() {
        let mut s = node();
        s.root.kind = RootKind::Namespaced;
        let r = Report::new(&s, &Policy::default());
        assert_eq!((r.status, r.exit_code(FailOn::Warning)), (Status::Incomplete, 2));
        cilium_connect(&mut s, CTR, CTR_ID);
        let r = Report::new(&s, &Policy::default());
        assert_eq!(r.exit_code(FailOn::Warning), 1, "a problem seen through a partial view is still a problem");
        s.root.kind = RootKind::Hierarchy;
        s.attachments.clear();
        s.programs.clear();
        assert_eq!(Report::new(&s, &Policy::default()).exit_code(FailOn::Warning), 0);
    }
}
