//! The `agent remount` command: plan, optionally apply, report.

use std::io::Write as _;

use serde::Serialize;

use super::EXIT_UNKNOWN;
use crate::cli::{Output, RemountArgs};
use crate::owner::Cni;
use crate::remount::plan::{PathState, Plan};
use crate::remount::programs::{self, Detach, Unpin};
use crate::remount::{Outcome, RemountError, Replaced, Target};

#[derive(Debug, Clone, Serialize)]
pub struct RemountReport {
    pub target_pid: u32,
    pub applied: bool,
    pub plan: Plan,
    pub outcome: Outcome,
    /// What the path holds after applying.
    pub after: Option<PathState>,
    /// How a namespaced mount was replaced: `beneath` (MOVE_MOUNT_BENEATH,
    /// 6.5+; the path always had a mount) or `detached_first`.
    pub replaced: Option<Replaced>,
    pub error: Option<String>,
    pub detach: Vec<Detach>,
    pub unpin: Vec<Unpin>,
    /// What the user should do next, when something changed or would.
    pub next_step: Option<String>,
}

impl RemountReport {
    /// 0 nothing to do or done; 1 a change is needed (dry run); 2 refused or failed.
    pub fn exit_code(&self) -> u8 {
        let failed = |r: &str| r != "dry_run" && r != "done";
        if matches!(self.outcome, Outcome::Refused | Outcome::Failed)
            || self.detach.iter().any(|d| failed(&d.result))
            || self.unpin.iter().any(|u| failed(&u.result))
        {
            return 2;
        }
        let pending = self.outcome == Outcome::DryRun
            || self.detach.iter().any(|d| d.result == "dry_run")
            || self.unpin.iter().any(|u| u.result == "dry_run");
        u8::from(pending)
    }

    pub fn to_table(&self) -> String {
        let mut s = crate::text::Lines::default();
        let verb = match self.outcome {
            Outcome::NothingToDo => "OK",
            Outcome::DryRun => "CHANGE NEEDED (dry run, nothing changed; add --apply)",
            Outcome::Done => "DONE",
            Outcome::Refused => "REFUSED",
            Outcome::Failed => "FAILED",
        };
        s.line(format_args!("{verb}: {} (target pid {})", self.plan.path.display(), self.target_pid));
        s.line(format_args!("    plan:  {} - {}", self.plan.action.as_str(), self.plan.reason));
        if let Some(after) = &self.after {
            let how = match self.replaced {
                Some(Replaced::Beneath) => " (the new mount went beneath the old one, which was then detached)",
                Some(Replaced::DetachedFirst) => {
                    " (the old mount was detached, then the new one attached: no MOVE_MOUNT_BENEATH before Linux 6.5)"
                }
                None => "",
            };
            s.line(format_args!("    after: {after}{how}"));
        }
        if let Some(e) = &self.error {
            s.line(format_args!("    error: {e}"));
        }
        for d in &self.detach {
            s.line(format_args!(
                "detach {} {} (prog {}{}) at {}: {}",
                d.attach_type,
                d.prog_name.as_deref().unwrap_or("?"),
                d.prog_id,
                d.link_id.map(|l| format!(", link {l}")).unwrap_or_default(),
                d.cgroup,
                d.result
            ));
        }
        for u in &self.unpin {
            s.line(format_args!(
                "unpin {} (link {} of {}, cgroup id {}): {}",
                u.pin.display(),
                u.link_id,
                u.prog_name,
                u.cgroup_id,
                u.result
            ));
        }
        if let Some(n) = &self.next_step {
            s.line(format_args!("next:  {n}"));
        }
        s.into_string()
    }
}

fn restart_hint(path: &std::path::Path, node: &str) -> String {
    let cni = Cni::from_mount_point(path).unwrap_or(Cni::Cilium);
    format!("restart the CNI agent on this node so it attaches at the root: {}", cni.restart_command(node))
}

/// Why `agent remount` could not even report.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Remount(#[from] RemountError),
    #[error("{0}")]
    Programs(String),
}

/// Plans, applies when asked, and reports. `Err`: could not even plan.
pub fn remount(args: &RemountArgs) -> Result<RemountReport, CommandError> {
    let target = Target::open(&args.proc, args.target_pid)?;
    let done = target.remediate(&args.path, args.apply)?;
    let before = done.plan.state.to_string();
    let action = done.plan.action.as_str();
    match (&done.after, &done.error) {
        (Some(after), _) => {
            tracing::info!(action, path = %args.path.display(), before, after = %after, result = "done", "remount")
        }
        (_, Some(e)) => {
            tracing::error!(action, path = %args.path.display(), before, error = %e, result = "failed", "remount")
        }
        _ => {}
    }
    let mut report = RemountReport {
        target_pid: args.target_pid,
        applied: args.apply,
        outcome: done.outcome,
        after: done.after,
        replaced: done.replaced,
        error: done.error.map(|e| e.to_string()),
        detach: Vec::new(),
        unpin: Vec::new(),
        next_step: None,
        plan: done.plan,
    };
    if matches!(report.outcome, Outcome::Refused | Outcome::Failed) {
        return Ok(report);
    }

    if args.detach_misattached {
        let (root, found) = programs::misattached(&args.proc, &args.allow).map_err(CommandError::Programs)?;
        for mut d in found {
            if args.apply {
                d.result = match programs::detach(&root, &d) {
                    Ok(()) => "done".into(),
                    Err(e) => e.to_string(),
                };
                tracing::info!(action = "detach", cgroup = %d.cgroup, attach_type = d.attach_type.name(), prog_id = d.prog_id, link_id = d.link_id, result = %d.result, "detach");
            }
            report.detach.push(d);
        }
    }
    if args.unpin_stale_links {
        let bpffs = args.bpffs.clone().unwrap_or_else(|| {
            crate::cgroup::root::in_root_of(&args.proc, args.target_pid, std::path::Path::new("/sys/fs/bpf"))
        });
        let stale =
            programs::stale_pins(&bpffs, report.plan.reference_root_id, &args.allow).map_err(CommandError::Programs)?;
        for mut u in stale {
            if args.apply {
                u.result = match std::fs::remove_file(&u.pin) {
                    Ok(()) => "done".into(),
                    Err(e) => format!("unlink {}: {e}", u.pin.display()),
                };
                tracing::info!(action = "unpin", pin = %u.pin.display(), link_id = u.link_id, cgroup_id = u.cgroup_id, result = %u.result, "unpin");
            }
            report.unpin.push(u);
        }
    }
    let acted = report.plan.action.changes_something() || !report.detach.is_empty() || !report.unpin.is_empty();
    if acted {
        let node = crate::scan::host::node_name(args.node_name.as_deref());
        let restart = restart_hint(&args.path, &node);
        report.next_step = Some(if args.apply { restart } else { format!("run again with --apply, then {restart}") });
    }
    Ok(report)
}

/// `agent remount`: prints the report and returns the exit code.
pub fn main(args: &RemountArgs) -> u8 {
    crate::logging::init(crate::cli::LogFormat::Text);
    let report = match remount(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent remount: error: {}", crate::text::escape(&e.to_string()));
            return EXIT_UNKNOWN;
        }
    };
    let text = match args.output {
        Output::Table => report.to_table(),
        Output::Json => serde_json::to_string_pretty(&report).unwrap_or_default() + "\n",
    };
    let _ = std::io::stdout().write_all(text.as_bytes());
    if let Some(e) = &report.error {
        eprintln!("agent remount: {}", crate::text::escape(e));
    } else if report.outcome == Outcome::Refused {
        eprintln!("agent remount: refused: {}", crate::text::escape(&report.plan.reason));
    }
    report.exit_code()
}
