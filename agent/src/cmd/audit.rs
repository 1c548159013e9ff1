//! `agent audit`: scan, judge, print, exit code.

use std::io::Write;

use super::EXIT_UNKNOWN;
use crate::cli::{AuditArgs, Output, ScanArgs};
use crate::findings;
use crate::report::Report;
use crate::scan;
use crate::scan::names::Namer;

/// Runs one audit; returns the report, or why it could not run.
pub fn run(args: &ScanArgs) -> anyhow::Result<Report> {
    args.validate()?;
    let opts = args.options();
    let policy = args.policy();
    let mut snap = scan::scan(&opts)?;
    // Names only for what the findings are about.
    let wanted = findings::names_wanted(&findings::evaluate(&snap, &policy));
    snap.names = Namer::new(&opts.proc).lookup(&wanted);
    Ok(Report::new(&snap, &policy))
}

/// The `audit` subcommand: prints the report and returns the exit code.
pub fn main(args: &AuditArgs) -> u8 {
    let report = match run(&args.scan) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agent audit: error: {}", crate::text::escape(&format!("{e:#}")));
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
            eprintln!("agent audit: {}", crate::text::escape(note));
        }
    }
    report.exit_code()
}
