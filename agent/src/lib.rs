//! cgaudit's agent: audits cgroup-v2 BPF attachments on a Kubernetes node.
//!
//! The scan (`scan`) reads the kernel into a plain `Snapshot`; rules
//! (`findings`), attribution and reporting are pure functions of it. All
//! `unsafe` lives in `bpf::sys` and `os` (xtask's layout test holds it). `cmd` holds one module per
//! subcommand, `cli` the flags they take. What is `pub` is what the binary
//! and the integration tests use.

pub(crate) mod attribution;
pub mod bpf;
pub mod build;
pub(crate) mod cgroup;
pub mod cli;
pub mod cmd;
pub(crate) mod coverage;
pub(crate) mod daemon;
pub(crate) mod event;
pub mod features;
pub(crate) mod findings;
#[cfg(test)]
mod fixtures;
pub(crate) mod logging;
pub mod mounts;
pub(crate) mod os;
pub mod owner;
pub(crate) mod placement;
pub mod remount;
pub(crate) mod report;
pub(crate) mod scan;
pub(crate) mod snapshot;
pub(crate) mod text;
