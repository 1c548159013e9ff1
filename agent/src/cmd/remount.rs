//! The `agent remount` command: plan, optionally apply, report.

use std::io::Write as _;

use serde::Serialize;

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::path::PathBuf;

use crate::cli::{HelperArgs, Output, RemountArgs};
use crate::findings::{self, Policy};
use crate::owner::Owner;
use crate::remount::plan::{PathState, Plan};
use crate::remount::programs::{self, Applied, Detach, Unpin};
use crate::remount::{Outcome, RemountError, Replaced, Target};
use crate::scan::{self, ScanOptions};
use crate::snapshot::Snapshot;

#[derive(Debug, Clone, Serialize)]
pub struct RemountReport {
    pub target_pid: u32,
    pub applied: bool,
    /// The owner whose mount point the path is (`null`: another path, with
    /// --force).
    pub owner: Option<Owner>,
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
    /// Steps skipped, and why.
    pub notes: Vec<String>,
    /// What the user should do next, when something changed or would.
    pub next_step: Option<String>,
}

impl RemountReport {
    /// 0 nothing to do or done; 1 a change is needed (dry run); 2 refused or failed.
    pub fn exit_code(&self) -> u8 {
        let results = || self.detach.iter().map(|d| &d.result).chain(self.unpin.iter().map(|u| &u.result));
        if matches!(self.outcome, Outcome::Refused | Outcome::Failed)
            || results().any(|r| matches!(r, Applied::Failed(_)))
        {
            return 2;
        }
        let pending = self.outcome == Outcome::DryRun || results().any(|r| *r == Applied::DryRun);
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
        for n in &self.notes {
            s.line(format_args!("note:  {n}"));
        }
        if let Some(n) = &self.next_step {
            s.line(format_args!("next:  {n}"));
        }
        s.into_string()
    }
}

/// Why `agent remount` could not even report.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Remount(#[from] RemountError),
    #[error("auditing the node: {0}")]
    Audit(#[from] crate::scan::AuditError),
    #[error(
        "--path {}: not a known owner's cgroup2 mount point ({}): refusing to mount cgroup2 there; pass --force if \
         your agent mounts it there (Cilium's cgroup.hostRoot)",
        path.display(), known_mount_points()
    )]
    NotOwnerMountPoint { path: PathBuf },
    #[error("whose cgroup2 mount to repair cannot be told: {why}; pass --path ({})", known_mount_points())]
    UnknownOwner { why: String },
    #[error("--bpffs {0}")]
    Bpffs(String),
}

fn known_mount_points() -> String {
    Owner::known()
        .filter_map(|o| Some(format!("{} for {}", o.mount_point()?, o.title())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The owner whose cgroup2 mount this node needs repaired, among those that
/// mount one at a path of their own, by the strongest evidence an audit
/// finds: its programs below the root (proven its), then attached anywhere,
/// then its running agent, then a cgroup2 mount at its mount point.
pub fn node_owner(snap: &Snapshot, policy: &Policy) -> Result<Owner, String> {
    let mounts = |o: &Owner| o.mount_point().is_some();
    let below: BTreeSet<Owner> = findings::evaluate(snap, policy)
        .iter()
        .filter(|f| matches!(f.kind, findings::Kind::SocketLbBelowRoot | findings::Kind::RootHookBelowRoot))
        .filter_map(|f| f.owner)
        .filter(mounts)
        .collect();
    let attached: BTreeSet<Owner> = findings::owned(snap, policy)
        .into_iter()
        .map(|o| o.owner)
        .filter(|o| o.intends_root())
        .filter(mounts)
        .collect();
    let agents: BTreeSet<Owner> = snap.agents.iter().filter(|p| p.privileged).map(|p| p.owner).filter(mounts).collect();
    let mounted: BTreeSet<Owner> = snap.mounts.iter().filter_map(|m| Owner::from_mount_point(&m.mount_point)).collect();
    for (what, owners) in [
        ("programs below the root", below),
        ("programs attached", attached),
        ("agents running", agents),
        ("cgroup2 mounts", mounted),
    ] {
        match owners.len() {
            0 => continue,
            1 => return Ok(owners.into_iter().next().expect("one")),
            _ => {
                let names: Vec<&str> = owners.iter().map(|c| c.title()).collect();
                return Err(format!("this node has {what} of {}", names.join(" and ")));
            }
        }
    }
    Err("no programs, agent or cgroup2 mount of an owner that mounts cgroup2 itself is on this node".into())
}

/// Plans, applies when asked, and reports. `Err`: could not even plan.
pub fn remount(args: &RemountArgs) -> Result<RemountReport, CommandError> {
    // What no choice of path can fix is refused first, before anything is read.
    if let Some(path) = &args.path
        && Owner::from_mount_point(path).is_none()
        && !args.force
    {
        return Err(CommandError::NotOwnerMountPoint { path: path.clone() });
    }
    if let Some(b) = &args.bpffs
        && args.unpin_stale_links
        && !crate::bpf::pins::is_bpffs(b)
    {
        return Err(CommandError::Bpffs(format!("{}: not a bpffs mount", b.display())));
    }
    let target = Target::open(&args.proc, args.target_pid)?.nested_node(args.nested_node);
    let policy = Policy { allow: args.allow.clone(), ..Default::default() };
    // One audit of the node, when the path or the programs depend on it.
    let snap = if args.path.is_none() || args.detach_misattached {
        let opts = ScanOptions { nested_node: args.nested_node, ..ScanOptions::node(args.proc.clone()) };
        Some(scan::scan(&opts)?)
    } else {
        None
    };
    let (path, owner) = match (&args.path, &snap) {
        (Some(p), _) => (p.clone(), Owner::from_mount_point(p)),
        (None, Some(snap)) => {
            let owner = node_owner(snap, &policy).map_err(|why| CommandError::UnknownOwner { why })?;
            (PathBuf::from(owner.mount_point().unwrap_or_default()), Some(owner))
        }
        (None, None) => unreachable!("the node is audited when no --path is given"),
    };
    let done = target.remediate(&path, args.apply)?;
    let before = done.plan.state.to_string();
    let action = done.plan.action.as_str();
    match (&done.after, &done.error) {
        (Some(after), _) => {
            tracing::info!(action, path = %path.display(), before, after = %after, result = "done", "remount")
        }
        (_, Some(e)) => {
            tracing::error!(action, path = %path.display(), before, error = %e, result = "failed", "remount")
        }
        _ => {}
    }
    let mut report = RemountReport {
        target_pid: args.target_pid,
        applied: args.apply,
        owner,
        outcome: done.outcome,
        after: done.after,
        replaced: done.replaced,
        error: done.error.map(|e| e.to_string()),
        detach: Vec::new(),
        unpin: Vec::new(),
        notes: Vec::new(),
        next_step: None,
        plan: done.plan,
    };
    if matches!(report.outcome, Outcome::Refused | Outcome::Failed) {
        return Ok(report);
    }

    if let (true, Some(snap)) = (args.detach_misattached, &snap) {
        let root = snap.root.path.clone();
        for mut d in programs::misattached(snap, &args.allow) {
            if args.apply {
                d.result = match programs::detach(&root, &d) {
                    Ok(()) => Applied::Done,
                    Err(e) => Applied::Failed(e.to_string()),
                };
                tracing::info!(action = "detach", cgroup = %d.cgroup, attach_type = d.attach_type.name(), prog_id = d.prog_id, link_id = d.link_id, result = %d.result, "detach");
            }
            report.detach.push(d);
        }
    }
    if args.unpin_stale_links {
        // The bpffs named, or the target's own /sys/fs/bpf, resolved in its
        // root with no link.
        let (opened, shown) = match &args.bpffs {
            Some(b) => (crate::bpf::pins::open_bpffs(b), b.clone()),
            None => {
                let root = crate::cgroup::root::in_root_of(&args.proc, args.target_pid, std::path::Path::new("/"));
                (crate::bpf::pins::open_bpffs_in(&root), root.join("sys/fs/bpf"))
            }
        };
        let stale = opened.map_err(|e| e.to_string()).and_then(|fd| {
            programs::stale_pins(fd.as_fd(), &shown, report.plan.reference_root_id, &args.allow).map(|s| (fd, s))
        });
        match stale {
            Ok((fd, stale)) => {
                for mut u in stale {
                    if args.apply {
                        u.result = match programs::unpin(fd.as_fd(), &shown, &u) {
                            Ok(()) => Applied::Done,
                            Err(e) => Applied::Failed(format!("unlink {e}")),
                        };
                        tracing::info!(action = "unpin", pin = %u.pin.display(), link_id = u.link_id, cgroup_id = u.cgroup_id, result = %u.result, "unpin");
                    }
                    report.unpin.push(u);
                }
            }
            Err(e) if args.bpffs.is_some() => return Err(CommandError::Bpffs(e)),
            // No bpffs where the target keeps it: nothing can be pinned there.
            Err(e) => report.notes.push(format!("--unpin-stale-links skipped: {e}")),
        }
    }
    let acted = report.plan.action.changes_something() || !report.detach.is_empty() || !report.unpin.is_empty();
    if acted {
        let node = crate::scan::host::node_name(args.node_name.as_deref());
        let restart = match owner.and_then(|o| Some((o, o.restart_command(&node)?))) {
            Some((o, cmd)) => format!("restart {}'s agent on this node so it attaches at the root: {cmd}", o.title()),
            None => "restart the agent on this node so it attaches at the root".to_owned(),
        };
        report.next_step = Some(if args.apply { restart } else { format!("run again with --apply, then {restart}") });
    }
    Ok(report)
}

/// `agent remount`: prints the report and returns the exit code; `Err`
/// when it could not run (`main` says why, exit 2).
pub fn main(args: &RemountArgs) -> anyhow::Result<u8> {
    crate::logging::init(crate::logging::LogFormat::Text);
    let report = remount(args)?;
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
    Ok(report.exit_code())
}

/// `agent __remount-helper`: the single-threaded process `remount` starts
/// to enter the target (`remount::helper`).
pub fn helper(args: &HelperArgs) -> u8 {
    crate::remount::helper::main(&crate::remount::helper::Args {
        proc: args.proc.clone(),
        target_pid: args.target_pid,
        request: args.request.clone(),
    })
}
