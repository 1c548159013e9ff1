//! `agent audit`: scan, judge, print, exit code.

use std::io::Write;

use super::EXIT_UNKNOWN;
use crate::cli::{AuditArgs, AuditOutput, ScanArgs};
use crate::findings;
use crate::report::{ErrorReport, Report};
use crate::scan;
use crate::scan::names::Namer;

/// Runs one audit; returns the report, or why it could not run.
pub fn run(args: &ScanArgs) -> anyhow::Result<Report> {
    args.validate()?;
    let opts = args.options();
    let policy = args.policy();
    let mut snap = scan::scan(&opts)?;
    let wanted = findings::names_wanted(&snap, &findings::evaluate(&snap, &policy));
    snap.names = Namer::new(&opts.proc).lookup(&wanted);
    Ok(Report::new(&snap, &policy))
}

/// What to print on stdout when the audit could not run (exit 2), where a
/// collector or node-problem-detector reads: nothing for the table (the
/// error is on stderr), a JSON document, or the summary line.
pub fn print_error(output: AuditOutput, error: &str, node_name: Option<&str>) {
    let error = crate::text::escape(error).into_owned();
    let out = match output {
        AuditOutput::Table => return,
        AuditOutput::Json => {
            let node = scan::host::node_name(node_name);
            serde_json::to_string_pretty(&ErrorReport::new(error, node)).unwrap_or_default()
        }
        AuditOutput::Summary => format!("UNKNOWN: {error}"),
    };
    let _ = writeln!(std::io::stdout(), "{out}");
}

/// The `audit` subcommand: prints the report and returns the exit code;
/// `Err` when it could not run (`main` says why on stderr, exit 2), after
/// the JSON or summary output has said so on stdout.
pub fn main(args: &AuditArgs) -> anyhow::Result<u8> {
    let report = match run(&args.scan) {
        Ok(r) => r,
        Err(e) => {
            print_error(args.output, &super::chain(e.as_ref()), args.scan.node_name.as_deref());
            return Err(e);
        }
    };
    let code = report.exit_code(args.fail_on);
    // A closed pipe (`| head`) is not an audit failure.
    let _ = match args.output {
        AuditOutput::Table => std::io::stdout().write_all(report.to_table().as_bytes()),
        // Streamed: on a 50,000-cgroup node the document is ~15 MB.
        AuditOutput::Json => report.write_json(std::io::BufWriter::new(std::io::stdout().lock())),
        AuditOutput::Summary => writeln!(std::io::stdout(), "{}", report.one_line(args.fail_on)),
    };
    if code == EXIT_UNKNOWN {
        eprintln!("agent audit: {}", report.summary());
        if let Some(why) = report.view.reason.as_ref().or(report.root_note.as_ref()) {
            eprintln!("agent audit: {}", crate::text::escape(why));
        }
    }
    Ok(code)
}
