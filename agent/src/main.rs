use std::process::ExitCode;

use agent::cli::{Cli, Command};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Audit(args) => agent::audit::main(args),
        Command::Run(args) => agent::daemon::main(args),
        Command::Remount(args) => agent::remount::command::main(args),
        Command::RemountHelper(args) => agent::remount::helper::main(args),
    };
    ExitCode::from(code)
}
