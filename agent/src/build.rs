//! What this binary is: its version and the commit it was built from
//! (`cgaudit_build_info`, the report's `agent` field, `--version`).

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (12 hex digits), or "unknown"
/// (see build.rs).
pub const REVISION: &str = env!("CGAUDIT_REVISION");
