//! Remediation as `agent run --remediate` asks: the remount of each CNI
//! cgroup2 mount the audit found rooted below the root, planned (dry-run)
//! or applied (on), at most once per path per five minutes, in the
//! single-threaded helper process.

use std::time::Instant;

use super::Worker;
use crate::findings::Kind;
use crate::remount::{Outcome, Target};
use crate::report::Report;

/// `--remediate`: what the daemon does about a CNI cgroup2 mount rooted
/// below the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Remediate {
    /// Nothing but the finding.
    Off,
    /// Plan the remount and log it.
    DryRun,
    /// Remount, as `agent remount --apply` does.
    On,
}

impl Worker {
    /// Plans (and with `--remediate on`, applies) the remount of each CNI
    /// mount the audit found rooted below the root, at most once per path
    /// per window. The remount runs in the single-threaded helper process.
    pub(super) fn remediate(&mut self, report: &Report) {
        if self.config.remediate == Remediate::Off {
            return;
        }
        // Only the owners' own mounts: the finding names the owner of one.
        let paths: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.kind == Kind::CgroupMountNotRoot && f.owner.is_some_and(|o| o.mount_point().is_some()))
            .filter_map(|f| f.mount_point.clone())
            .collect();
        for path in paths {
            if !self.schedule.may_remediate(&path, Instant::now()) {
                continue;
            }
            let apply = self.config.remediate == Remediate::On;
            let (outcome, detail) = match Target::open(&self.config.scan.proc, 1)
                .map(|t| t.nested_node(self.config.scan.nested_node))
                .and_then(|t| t.remediate(std::path::Path::new(&path), apply))
            {
                Err(e) => (Outcome::Failed, e.to_string()),
                Ok(r) => match (r.after, r.error) {
                    (Some(after), _) => (r.outcome, format!("{}; now {after}", r.plan.reason)),
                    (_, Some(e)) => (r.outcome, format!("{}; {e}", r.plan.reason)),
                    _ => (r.outcome, r.plan.reason),
                },
            };
            self.shared.metrics.remediation("remount", outcome.as_str());
            match outcome {
                Outcome::Failed | Outcome::Refused => {
                    tracing::error!(action = "remount", path, result = outcome.as_str(), detail, "remediation")
                }
                _ => tracing::warn!(action = "remount", path, result = outcome.as_str(), detail, "remediation"),
            }
        }
    }
}
