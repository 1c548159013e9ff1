//! What this binary is: its version and the commit it was built from
//! (`cgaudit_build_info`, the report's `agent` field, `--version`).

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (12 hex digits), or "unknown"
/// (see build.rs).
pub const REVISION: &str = env!("CGAUDIT_REVISION");

/// The target triple it was built for (`x86_64-unknown-linux-musl`).
pub const TARGET: &str = env!("CGAUDIT_TARGET");

/// The day its source was committed (YYYY-MM-DD), or "unknown".
pub const BUILD_DATE: &str = env!("CGAUDIT_BUILD_DATE");

/// `agent --version`: what `cgaudit_build_info` says too.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("CGAUDIT_REVISION"),
    ", ",
    env!("CGAUDIT_TARGET"),
    ", built ",
    env!("CGAUDIT_BUILD_DATE"),
    ")"
);
