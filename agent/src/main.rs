use std::process::ExitCode;

use agent::cli::{AuditOutput, Cli, Command};
use clap::Parser;
use clap::error::ErrorKind;

/// `agent audit`'s `--output` as written on a command line clap refused:
/// a collector that asked for JSON (or node-problem-detector for the
/// summary) still gets it on stdout.
fn asked_output(args: &[String]) -> Option<AuditOutput> {
    if args.get(1).map(String::as_str) != Some("audit") {
        return None;
    }
    let value = args.iter().zip(args.iter().skip(1)).rev().find_map(|(flag, next)| match flag.as_str() {
        "-o" | "--output" => Some(next.as_str()),
        f => f.strip_prefix("--output=").or_else(|| f.strip_prefix("-o")).filter(|v| !v.is_empty()),
    });
    let value = value.or_else(|| {
        let last = args.last()?;
        last.strip_prefix("--output=").or_else(|| last.strip_prefix("-o")).filter(|v| !v.is_empty())
    })?;
    clap::ValueEnum::from_str(value, false).ok()
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            let args: Vec<String> = std::env::args().collect();
            if let Some(output @ (AuditOutput::Json | AuditOutput::Summary)) = asked_output(&args) {
                let first = e.render().to_string();
                let first = first.lines().next().unwrap_or_default().trim_start_matches("error: ");
                agent::cmd::audit::print_error(output, &format!("bad command line: {first}"), None);
            }
            // Bad input: clap's message on stderr, exit 2.
            e.exit()
        }
    };
    let (name, result) = match &cli.command {
        Command::Audit(args) => ("audit", agent::cmd::audit::main(args)),
        Command::Run(args) => ("run", agent::cmd::run::main(args)),
        Command::Remount(args) => ("remount", agent::cmd::remount::main(args)),
        Command::Probe(args) => ("probe", Ok(agent::cmd::probe::main(args))),
        Command::Install(args) => ("install", agent::cmd::install::main(args)),
        Command::RemountHelper(args) => ("__remount-helper", Ok(agent::cmd::remount::helper(args))),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // Why it could not run, on stderr, for every command (`audit` has
        // also said it on stdout in its JSON or summary line).
        Err(e) => {
            agent::cmd::print_failure(name, &e);
            ExitCode::from(agent::cmd::EXIT_UNKNOWN)
        }
    }
}
