//! cgaudit's agent: audits cgroup-v2 BPF attachments on a Kubernetes node.
//!
//! The scan (`scan`) reads the kernel into a plain `Snapshot`; rules
//! (`findings`), attribution and reporting are pure functions of it. All
//! `unsafe` lives in `bpf::sys`. `cmd` holds one module per subcommand,
//! `cli` the flags they take.

pub mod attribution;
pub mod bpf;
pub mod cgroup;
pub mod cli;
pub mod cmd;
pub mod daemon;
pub mod findings;
#[cfg(test)]
mod fixtures;
pub mod logging;
pub mod metrics;
pub mod mounts;
pub mod os;
pub mod owner;
pub mod remount;
pub mod report;
pub mod scan;
pub mod snapshot;
pub mod trace;
