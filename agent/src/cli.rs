//! Command line. The doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// cgaudit: audit where eBPF programs are attached in the cgroup v2 hierarchy
/// of a Kubernetes node, and catch socket load-balancing programs (Cilium,
/// Calico) attached below the root cgroup, which silently breaks Service
/// traffic for every other pod on the node.
#[derive(Debug, Parser)]
#[command(name = "agent", version, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One-shot audit of this node: every cgroup, every cgroup BPF attachment,
    /// and what is wrong with them.
    ///
    /// Exit codes follow node-problem-detector's custom-plugin contract:
    /// 0 nothing wrong, 1 a problem was found, 2 the audit could not run or
    /// could not see the real root (the reason is on stderr). The audit only
    /// reads; it changes nothing on the host.
    ///
    /// Examples:
    ///   agent audit                         # the whole node, as a table
    ///   agent audit --output json | jq .findings
    ///   agent audit --cgroup-root /sys/fs/cgroup/kubepods.slice
    ///   agent audit --proc /host/proc       # from a pod with the host's /proc mounted
    #[command(verbatim_doc_comment)]
    Audit(AuditArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A summary line, findings with explanations, then attachments per cgroup.
    Table,
    /// A versioned document (schema_version) for scripts and fleet collection.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// The procfs whose PID 1 is the node's init. The cgroup2 mount and the
    /// mounts to check are read from <PROC>/1/mountinfo, and <PROC>/1/root is
    /// used to reach the host's hierarchy from inside a container.
    #[arg(long, value_name = "PROC", default_value = "/proc")]
    pub proc: PathBuf,

    /// Audit this cgroup2 directory instead of discovering the hierarchy root;
    /// its top then counts as the root.
    #[arg(long, value_name = "DIR")]
    pub cgroup_root: Option<PathBuf>,

    /// Treat programs whose name starts with PREFIX as benign wherever they
    /// are attached (repeatable). systemd (sd_*), container runtimes (unnamed
    /// device programs) and Kmesh are always benign.
    #[arg(long, value_name = "PREFIX")]
    pub allow: Vec<String>,

    /// Node name to report [default: $NODE_NAME, else the hostname].
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
}
