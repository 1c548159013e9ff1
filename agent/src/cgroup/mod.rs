//! The cgroup v2 hierarchy: which directory is the root to audit, and a walk
//! of every cgroup below it.

pub mod by_id;
pub mod root;
pub mod walk;

pub use root::{AuditRoot, RootError, RootKind};
