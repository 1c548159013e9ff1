//! One module per subcommand: parse nothing (clap did), run, print, and
//! return the exit code.

pub mod audit;
pub mod remount;
pub mod run;

/// Exit code for "could not run" and bad input (node-problem-detector:
/// unknown).
pub const EXIT_UNKNOWN: u8 = 2;
