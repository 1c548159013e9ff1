use std::process::ExitCode;

use agent::cli::{Cli, Command};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Audit(args) => agent::cmd::audit::main(args),
        Command::Run(args) => agent::cmd::run::main(args),
        Command::Remount(args) => agent::cmd::remount::main(args),
        Command::RemountHelper(args) => agent::remount::helper::main(args),
    };
    ExitCode::from(code)
}
