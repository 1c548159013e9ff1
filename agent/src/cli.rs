//! Command line: clap's types only, and the value parsers that check a
//! flag's text. The doc comments are the `--help` text. What the flags
//! mean for the host (a --proc that is procfs, a --cgroup-root that is a
//! cgroup2 directory) is checked in `cmd::flags`, which also turns them
//! into the modules' own settings; nothing below `cmd` sees a flag.
//!
//! One rule for a flag that takes one of a few words: its values are the
//! variants of the type it sets, which derives `clap::ValueEnum` where it
//! is defined (`--walk`: `scan::WalkMethod`; `--events`:
//! `trace::Source`), each variant's doc comment its `--help` line. An enum
//! is defined here only when nothing but the command line uses it.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{BoolishValueParser, NonEmptyStringValueParser};
use clap::{Parser, Subcommand, ValueEnum};

use crate::daemon::Remediate;
use crate::daemon::http::AuditEndpoint;
pub use crate::daemon::listen::Listen;
use crate::daemon::trace::Source;
use crate::logging::LogFormat;
use crate::report::FailOn;
use crate::scan::WalkMethod;

/// The shortest `--interval`: shorter would audit without pause.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest: the full pass is the safety net for what events miss, and
/// /readyz fails after three intervals without one.
const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);

fn interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_INTERVAL {
        return Err(format!(
            "must be at least {} (kernel events already update the picture at once)",
            humantime::format_duration(MIN_INTERVAL)
        ));
    }
    if d > MAX_INTERVAL {
        return Err(format!(
            "must be at most {} (a full pass is the safety net for what events miss)",
            humantime::format_duration(MAX_INTERVAL)
        ));
    }
    Ok(d)
}

fn endpoint_grace(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d > MAX_INTERVAL {
        return Err(format!("must be at most {}", humantime::format_duration(MAX_INTERVAL)));
    }
    Ok(d)
}

fn absolute_path(s: &str) -> Result<PathBuf, String> {
    use std::path::Component;
    let p = PathBuf::from(s);
    let plain = p.components().skip(1).all(|c| matches!(c, Component::Normal(_)));
    if !p.is_absolute() || !plain || p.parent().is_none() {
        return Err(
            "must be an absolute path below /, without . or .. components, as mounted in the target's mount namespace"
                .into(),
        );
    }
    Ok(p)
}

/// cgaudit: audit where eBPF programs are attached in the cgroup v2 hierarchy
/// of a Kubernetes node, and catch socket load-balancing programs (Cilium,
/// Calico) attached below the root cgroup, which silently breaks Service
/// traffic for every other pod on the node.
#[derive(Debug, Parser)]
#[command(name = "agent", version = crate::build::LONG_VERSION, max_term_width = 100)]
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
    /// could not see the whole node (the reason is on stderr, in the summary
    /// line and in the JSON). The audit only reads; it changes nothing on
    /// the host.
    ///
    /// Examples:
    ///   agent audit                         # the whole node, as a table
    ///   agent audit --output json | jq .findings
    ///   agent audit --cgroup-root /sys/fs/cgroup/kubepods.slice
    ///   agent audit --proc /host/proc       # from a pod with the host's /proc mounted
    #[command(verbatim_doc_comment)]
    Audit(AuditArgs),

    /// The node daemon (DaemonSet): reads the whole tree at start and every
    /// --interval, and in between follows the kernel's own events (a program
    /// attached to or detached from a cgroup, a cgroup made or removed),
    /// updating only what changed; serves Prometheus metrics.
    ///
    /// Changes come from the best source the kernel allows (--events):
    /// fexit programs on the kernel functions that change cgroup attachments
    /// (and make and remove cgroups), else kprobes on them, else reading (a
    /// sweep of the tree and every attachment every few seconds). None of
    /// these slows other processes' syscalls or cgroup operations. The source is chosen by trying each at
    /// start, logged with why the better ones were refused, and exported as
    /// cgaudit_event_source{source}. Needs BTF, CAP_BPF and CAP_PERFMON; no
    /// tracefs mount.
    ///
    /// HTTP endpoints on --listen:
    ///   /         what this is, and links to the rest
    ///   /metrics  Prometheus text format (cgaudit_* and process_*)
    ///   /healthz  200 while the worker makes progress
    ///   /readyz   200 once an audit has completed, 503 before, when the
    ///             last one is older than three intervals, or while the
    ///             audit cannot see the whole node (no hostPID), with why
    ///   /audit    the node as the daemon sees it now, in the JSON schema of
    ///             `agent audit` (loopback peers only, see --audit-endpoint)
    ///   /events   the last 1,024 attach/detach and cgroup events (callers
    ///             in one cgroup hold at most 256 of them): who, when,
    ///             where in the tree, and what the daemon did with each
    ///             (as /audit)
    ///
    /// SIGTERM or SIGINT stops it within a second, detaching its programs.
    #[command(verbatim_doc_comment)]
    Run(RunArgs),

    /// Repair a CNI's cgroup2 mount: mount cgroup2 at its mount point from
    /// PID 1's cgroup namespace into the target's (by default PID 1's) mount
    /// namespace, as Cilium's mount-cgroup init container does with nsenter,
    /// but planned, verified and loud.
    ///
    /// The path is the mount point of the CNI whose socket-LB programs, agent
    /// or mount the node has (/run/cilium/cgroupv2, /run/calico/cgroup);
    /// --path names it where that cannot be told.
    ///
    /// Without --apply it only prints the plan and changes nothing.
    ///   path absent                      -> create it and mount cgroup2
    ///   an empty directory               -> mount cgroup2
    ///   cgroup2 rooted at the root       -> nothing to do
    ///   cgroup2 from a private namespace -> replace it
    ///   a directory with entries, another
    ///   filesystem, a link, not a dir    -> refuse
    ///
    /// Fixing the mount does not move programs already attached to the wrong
    /// cgroup: --detach-misattached detaches the CNI-owned socket-LB programs
    /// an audit finds below the root, and --unpin-stale-links removes Cilium's
    /// pinned links that point elsewhere (it would reuse them on restart).
    /// Then restart the CNI agent pod on the node (the command is printed).
    ///
    /// Exit codes: 0 nothing to do or done, 1 a change is needed (dry run),
    /// 2 refused or failed. Changes are made under a lock in the target's
    /// mount namespace, /run/cgaudit-remediation.lock, one log line each.
    ///
    /// Examples:
    ///   agent remount                                  # what would change?
    ///   agent remount --apply --detach-misattached --unpin-stale-links
    ///   agent remount --path /run/calico/cgroup --apply
    #[command(verbatim_doc_comment)]
    Remount(RemountArgs),

    /// Ask a running `agent run --probe-socket PATH` whether it is alive or
    /// ready, as the DaemonSet's exec probes do: off the network, so no pod
    /// sharing the kubelet's address can crowd the probes out.
    ///
    /// Prints the daemon's answer; exit 0 when it is alive (ready), 1 when
    /// it is not or does not answer within 3 s.
    ///
    /// Examples:
    ///   agent probe --socket /run/cgaudit/probe.sock live
    ///   agent probe --socket /run/cgaudit/probe.sock ready
    #[command(verbatim_doc_comment)]
    Probe(ProbeArgs),

    /// Copy this binary to DIR/agent, for a tool on the host to run it
    /// (node-problem-detector's custom plugin): the image has no shell and
    /// no `cp`, so the binary copies itself, from an init container that
    /// mounts DIR. Atomic: a reader sees the old binary or the new one,
    /// never half of one. Exit 0 installed, 2 not (the reason on stderr).
    ///
    /// Examples:
    ///   agent install --to /host/usr/local/bin
    ///   agent install --to /opt/npd/bin        # an init container's volume
    #[command(verbatim_doc_comment)]
    Install(InstallArgs),

    /// Internal: the single-threaded helper `remount` runs to enter the
    /// target's namespaces.
    #[command(name = "__remount-helper", hide = true)]
    RemountHelper(HelperArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// The directory to put `agent` in (it must exist).
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The daemon's probe socket (its --probe-socket).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// `live`: the worker makes progress (/healthz); `ready`: an audit that
    /// saw the whole node completed lately (/readyz).
    #[arg(value_enum)]
    pub what: ProbeWhat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeWhat {
    Live,
    Ready,
}

/// Arguments of the hidden helper subcommand `remount` runs; the target
/// itself comes as a pidfd at fd 3.
#[derive(Debug, clap::Args)]
pub struct HelperArgs {
    #[arg(long)]
    pub proc: PathBuf,
    /// For messages, and for entering by /proc/<pid>/ns before Linux 5.8.
    #[arg(long)]
    pub target_pid: u32,
    /// One `remount::helper::Request`, as JSON.
    #[arg(long)]
    pub request: String,
}

#[derive(Debug, clap::Args)]
pub struct RemountArgs {
    /// The CNI's cgroup2 mount point: /run/cilium/cgroupv2 (Cilium's
    /// cgroup.hostRoot) or /run/calico/cgroup (Calico) [default: the mount
    /// point of the CNI whose socket-LB programs, agent or mount the node
    /// has; asked for when that cannot be told]. Any other path is refused
    /// without --force.
    #[arg(long, value_name = "PATH", value_parser = absolute_path)]
    pub path: Option<PathBuf>,

    /// Mount at a --path that is not a known CNI mount point (a Cilium
    /// whose cgroup.hostRoot was changed). A non-empty directory, another
    /// filesystem's mount or a symbolic link is refused all the same.
    #[arg(long, requires = "path")]
    pub force: bool,

    /// PID 1 of <PROC> is a nested node's init (kind, k0s): its cgroup
    /// namespace is the reference root even when nothing of a node is seen.
    #[arg(long, env = "CGAUDIT_NESTED_NODE", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub nested_node: bool,

    /// The process whose mount namespace holds the mount to repair (a CNI
    /// agent's container, for a mount that is not shared with the node's).
    /// The new mount is made from PID 1's cgroup namespace whatever the
    /// target's, so it is rooted at the root.
    #[arg(long, value_name = "PID", default_value_t = 1)]
    pub target_pid: u32,

    /// Make the changes. Without it, nothing on the host is changed.
    #[arg(long)]
    pub apply: bool,

    /// Also detach CNI-owned socket-LB programs attached below the root.
    #[arg(long)]
    pub detach_misattached: bool,

    /// Also remove Cilium's pinned cgroup links that point at a cgroup other
    /// than the root (in <BPFFS>/cilium/socketlb/links/cgroup). Skipped, with
    /// a note, where the target has no bpffs.
    #[arg(long)]
    pub unpin_stale_links: bool,

    /// Where the bpffs holding Cilium's pins is mounted, as this process
    /// sees it [default: <PROC>/<PID>/root/sys/fs/bpf, the target's own];
    /// refused unless it is bpffs.
    #[arg(long, value_name = "DIR")]
    pub bpffs: Option<PathBuf>,

    /// The procfs whose processes include the target.
    #[arg(long, value_name = "PROC", default_value = "/proc")]
    pub proc: PathBuf,

    /// Output format: `table` (the plan, what was done, what to do next) or
    /// `json` (the same as one document).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// Program-name prefixes never to touch (as for audit).
    #[arg(long, value_name = "PREFIX", value_parser = NonEmptyStringValueParser::new())]
    pub allow: Vec<String>,

    /// Node name for the restart hint [default: $NODE_NAME if not empty, else
    /// the hostname].
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
}

/// `agent remount --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Table,
    /// One JSON document.
    Json,
}

/// `agent audit --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditOutput {
    /// A summary line, findings with explanations, then attachments per cgroup.
    Table,
    /// A versioned document (schema_version) for scripts and fleet
    /// collection; on exit 2 too (`{"status": "error", "error": ...}`).
    Json,
    /// One line naming the verdict and the top finding (kind, pod,
    /// container, hooks), at most 200 bytes, on stdout whatever the exit
    /// code: node-problem-detector's condition message.
    Summary,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = AuditOutput::Table)]
    pub output: AuditOutput,

    /// The least severe finding that makes the exit code 1.
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = FailOn::Warning)]
    pub fail_on: FailOn,

    #[command(flatten)]
    pub scan: ScanArgs,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Where to serve /metrics, /healthz, /readyz, /audit and /events:
    /// `[::]:PORT` or `:PORT` (every address, IPv4 and IPv6; IPv4 only on a
    /// node without IPv6), `IP:PORT`, or `HOST:PORT` (every address the name
    /// resolves to).
    #[arg(long, value_name = "ADDR", default_value = "[::]:9974")]
    pub listen: Listen,

    /// Time between full passes over the cgroup tree (jittered by +-10%),
    /// 1s to 24h. Kernel events update the picture in between.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = interval)]
    pub interval: Duration,

    /// Where the daemon learns of changes to cgroup attachments between
    /// full passes. `auto` tries fexit, then kprobe, then reading, and logs
    /// which runs and why the better ones were refused; the others run that
    /// source or refuse to start. `syscalls` slows every syscall of every
    /// process on the node (measured: a getppid() loop +78%, dd bs=64 +53%)
    /// and is only for when the attaching process must be named and neither
    /// fexit nor kprobe is allowed.
    #[arg(long, value_enum, value_name = "SOURCE", default_value_t = Source::Auto)]
    pub events: Source,

    /// Read the tree only every --interval (the same as `--events none`).
    #[arg(long, conflicts_with = "events")]
    pub no_tracing: bool,

    /// Also answer the liveness and readiness probes on a unix socket at
    /// PATH (`agent probe`), in a directory of the agent's own: the
    /// DaemonSet's probes use it, so that no pod sharing the kubelet's
    /// address can crowd them out. A socket left there by an earlier run is
    /// replaced; anything else at PATH is refused.
    #[arg(long, value_name = "PATH")]
    pub probe_socket: Option<PathBuf>,

    /// Who may read /audit and /events, which name the node's cgroups,
    /// pods, containers and processes.
    #[arg(long, value_enum, value_name = "WHO", default_value_t = AuditEndpoint::Loopback)]
    pub audit_endpoint: AuditEndpoint,

    /// The most cgroups the daemon keeps a tree of, to apply kernel events
    /// to (about 100 bytes a cgroup; 360 measured with 240-byte names). A
    /// node past it (a pod making cgroups by the hundred thousand) is
    /// audited by full passes only: every --interval, and when events or
    /// sweeps see a change, at most every 20 times what a pass takes;
    /// cgaudit_degraded{reason="cgroup_count"} is 1 and one log line says
    /// so. Kubernetes nodes hold a few thousand.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1_000..=10_000_000))]
    pub max_cgroups: u64,

    /// What to do about a CNI cgroup2 mount rooted below the root
    /// (cgroup_mount_not_root): nothing, plan the remount and log it, or
    /// remount (as `agent remount --apply`), at most once per path every 5
    /// minutes. Programs are never detached by the daemon.
    #[arg(long, value_enum, default_value_t = Remediate::Off)]
    pub remediate: Remediate,

    /// Log format; filter with RUST_LOG (default: info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// What to audit and how to judge it: shared by `audit` and `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScanArgs {
    /// The procfs whose PID 1 is the node's init. The cgroup2 mount and the
    /// mounts to check are read from <PROC>/1/mountinfo, and <PROC>/1/root is
    /// used to reach the host's hierarchy from inside a container.
    #[arg(long, value_name = "PROC", default_value = "/proc")]
    pub proc: PathBuf,

    /// Audit this cgroup2 directory instead of discovering the hierarchy root;
    /// its top then counts as the root, and exit 0 says only that nothing is
    /// wrong below it.
    #[arg(long, value_name = "DIR")]
    pub cgroup_root: Option<PathBuf>,

    /// Treat programs whose name starts with PREFIX as benign wherever they
    /// are attached (repeatable). systemd's and the container runtimes'
    /// programs are benign on the hooks they use (sd_fw_*, sd_restrictif_*
    /// on ingress/egress, sd_devices and unnamed runc/crun programs on
    /// device, sd_bind* on bind4/6), never by name alone. An empty prefix,
    /// which would allow everything, is refused.
    #[arg(long, value_name = "PREFIX", value_parser = NonEmptyStringValueParser::new())]
    pub allow: Vec<String>,

    /// How long a pod that started after the CNI's agent may go without
    /// the CNI's per-endpoint programs on its interface before it is
    /// reported outside the datapath (the CNI adds an endpoint a moment
    /// after the pod's sandbox exists). A pod that started before the agent
    /// is judged at once.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = endpoint_grace)]
    pub endpoint_grace: Duration,

    /// The node's CNI configuration directory, inside PID 1's root. The
    /// first file there by name is the network the runtime gives pods: one
    /// that names cilium-cni says the node runs Cilium's datapath even
    /// while its agent is down. k3s keeps it in
    /// /var/lib/rancher/k3s/agent/etc/cni/net.d.
    #[arg(long, value_name = "DIR", default_value = crate::scan::net::config::CNI_CONF_DIR, value_parser = absolute_path)]
    pub cni_conf_dir: PathBuf,

    /// Removed: Kmesh means its programs for the root, and they are judged
    /// as its only when something proves them its (see README, "Owners
    /// cgaudit knows"). Refused with that explanation, so that an old
    /// command line or chart fails clearly.
    #[arg(long, hide = true)]
    pub kmesh: bool,

    /// Node name to report [default: $NODE_NAME if not empty, else the
    /// hostname].
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,

    /// How to read the cgroup tree. `auto` runs one in-kernel pass (an
    /// iter/cgroup BPF program: kernel 6.1+ with BTF, CAP_BPF and
    /// CAP_PERFMON) and falls back to `syscalls` when the kernel cannot,
    /// saying why in the report; `syscalls` opens every cgroup and queries
    /// each hook with BPF_PROG_QUERY, as `bpftool cgroup tree` does.
    #[arg(long, value_enum, value_name = "METHOD", default_value_t = WalkMethod::Auto)]
    pub walk: WalkMethod,

    /// PID 1 of <PROC> is a nested node's init (kind, k0s, a node in a
    /// container) whose PID and cgroup namespaces are not the initial ones:
    /// audit from them even when nothing of a node (kubepods cgroups, a
    /// kubelet, a container runtime, a CNI agent) is visible there. Without
    /// it, such a view counts as incomplete (exit 2): it is what a pod
    /// without hostPID sees.
    #[arg(long, env = "CGAUDIT_NESTED_NODE", value_parser = BoolishValueParser::new(), action = clap::ArgAction::SetTrue)]
    pub nested_node: bool,
}
