//! `agent audit`: scan, judge, print, exit code.

use std::io::Write;
use std::path::Path;

use nix::sys::statfs::{PROC_SUPER_MAGIC, statfs};

use crate::cgroup::root::RootError;
use crate::cli::{AuditArgs, Output, ScanArgs};
use crate::findings::Policy;
use crate::report::Report;
use crate::scan::{self, ScanOptions};

/// Exit code for "could not audit" (node-problem-detector: unknown).
pub const EXIT_UNKNOWN: u8 = 2;

pub fn check_proc(proc: &Path) -> anyhow::Result<()> {
    match statfs(proc) {
        Ok(fs) if fs.filesystem_type() == PROC_SUPER_MAGIC => Ok(()),
        Ok(_) => anyhow::bail!("--proc {}: not a procfs mount", proc.display()),
        Err(e) => anyhow::bail!("--proc {}: {e}", proc.display()),
    }
}

/// The flags that name host paths, checked before the daemon starts: a
/// wrong one (not procfs, not a cgroup2 directory) is refused at once
/// (exit 2) rather than logged as a failed audit every interval. A
/// `--cgroup-root` that does not exist yet is not wrong: the daemon may
/// start before the hierarchy below it is made, and stays unready until it is.
pub fn check_scan_args(args: &ScanArgs) -> anyhow::Result<()> {
    check_proc(&args.proc)?;
    if let Some(dir) = &args.cgroup_root {
        match crate::cgroup::root::open_cgroup_dir(dir) {
            Ok(_) | Err(RootError::NotFound { .. }) => {}
            Err(e) => anyhow::bail!("--cgroup-root {e}"),
        }
    }
    Ok(())
}

/// Scan options for the command-line flags.
pub fn scan_options(args: &ScanArgs) -> ScanOptions {
    ScanOptions {
        proc: args.proc.clone(),
        cgroup_root: args.cgroup_root.clone(),
        node_name: args.node_name.clone(),
        name_cgroups: Default::default(),
        walk: args.walk,
    }
}

/// Runs one audit; returns the report, or why it could not run.
pub fn run(args: &ScanArgs) -> anyhow::Result<Report> {
    check_proc(&args.proc)?;
    let snap = scan::scan(&scan_options(args))?;
    Ok(Report::new(&snap, &Policy { allow: args.allow.clone() }))
}

/// The `audit` subcommand: prints the report and returns the exit code.
pub fn main(args: &AuditArgs) -> u8 {
    let report = match run(&args.scan) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent audit: error: {e:#}");
            return EXIT_UNKNOWN;
        }
    };
    // A closed pipe (`| head`) is not an audit failure.
    let _ = match args.output {
        Output::Table => std::io::stdout().write_all(report.to_table().as_bytes()),
        // Streamed: on a 50,000-cgroup node the document is ~15 MB.
        Output::Json => report.write_json(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    if report.exit_code() == EXIT_UNKNOWN {
        eprintln!("agent audit: {}", report.summary());
        if let Some(note) = &report.root_note {
            eprintln!("agent audit: {note}");
        }
    }
    report.exit_code()
}
