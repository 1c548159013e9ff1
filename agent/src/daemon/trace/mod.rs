//! How the daemon learns that cgroup attachments changed between full
//! passes, without slowing anyone else's syscalls.
//!
//! Event sources, best first, chosen at start by loading and attaching
//! them (never by kernel version):
//!
//! 1. `fexit`: fexit/fentry programs on the kernel functions that change
//!    cgroup attachments. They run only when an attachment changes, see the
//!    kernel's own copy of the call and its result, and a link that ends
//!    because its last fd was closed. x86_64 5.5+ with BTF; refused where
//!    BPF trampolines are (lockdown policies, arm64 before 6.4).
//! 2. `kprobe`: kprobe/kretprobe on the same functions (CONFIG_KPROBES).
//! 3. `reading`: no kernel program at all. The tree and every attachment
//!    are swept in one in-kernel pass on a short period sized from what a
//!    sweep costs (see `daemon::schedule`), and a new cgroup is read again a
//!    moment after a sweep finds it (when runtimes attach their device
//!    programs). No cgroup tracepoint: while one is enabled the kernel
//!    formats every made or removed cgroup's path under cgroup_mutex, for
//!    everyone (issue 36, H3).
//!
//! Not chosen by default: `syscalls`, BTF raw tracepoints on every
//! syscall's exit (what the daemon used to do). It sees every `bpf(2)` call
//! with its caller, but sets the syscall-tracepoint work flag on every task
//! and runs a program at each syscall's exit: a `getppid()` loop +78%,
//! `dd bs=64` +53% (docs/how-it-works.md). `lsm/bpf` is no tier:
//! it needs the same BPF trampolines as fexit, so it is never available
//! where fexit is not. `none` reads the tree only every --interval.
//!
//! Dropping the `Tracer` detaches and unloads everything.

mod programs;
mod reader;

pub use programs::Tracer;

use crate::bpf::memlock;
pub use reader::{TraceMessage, spawn_reader};

/// Where attachment changes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumIter, clap::ValueEnum)]
#[strum(serialize_all = "snake_case")]
pub enum Source {
    /// The best of fexit, kprobe and reading that this kernel allows
    // (asked for only: what runs is never `Auto`)
    Auto,
    /// fexit/fentry on the kernel functions that change cgroup attachments
    /// (no cost to other syscalls; x86_64 5.5+, arm64 6.4+, with BTF)
    Fexit,
    /// kprobes on the same functions (no cost to other syscalls)
    Kprobe,
    /// No kernel program: the tree and every attachment swept every 2 to 8
    /// seconds (no cost to other syscalls)
    Reading,
    /// A program at every syscall's exit: names the caller of every bpf()
    /// call, and every syscall on the node pays (a getppid() loop +78%, dd
    /// bs=64 +53%). x86_64 only: refused at start (exit 2) on other
    /// architectures
    Syscalls,
    /// None: the whole tree every --interval
    None,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// What it is, for the log line at start.
    pub fn describe(self) -> &'static str {
        match self {
            Source::Auto => "the best of fexit, kprobe and reading that this kernel allows",
            Source::Fexit => "fexit/fentry on the kernel functions that change cgroup attachments",
            Source::Kprobe => "kprobes on the kernel functions that change cgroup attachments",
            Source::Reading => {
                "reading: the tree and every attachment swept on a short period, new cgroups read again a moment later; no kernel program runs on other processes' calls"
            }
            Source::Syscalls => "BTF raw tracepoint at every syscall's exit (opt-in; slows every syscall on the node)",
            Source::None => "none: the whole tree is read every --interval",
        }
    }

    /// Whether attachment changes arrive as events naming who made them.
    pub fn traces_calls(self) -> bool {
        matches!(self, Source::Fexit | Source::Kprobe | Source::Syscalls)
    }
}

/// The source the daemon runs with, its programs, and why each better one
/// was refused.
pub struct Started {
    pub source: Source,
    /// `None` for `none` and `reading`, which load no event program.
    pub tracer: Option<Tracer>,
    pub refused: Vec<(Source, String)>,
    /// What else the log should say about it (BPF memory accounting).
    pub notes: Vec<String>,
}

impl Started {
    /// One line for the log: the source, and why better ones were refused.
    pub fn summary(&self) -> String {
        let mut s = format!("event source: {} ({})", self.source.as_str(), self.source.describe());
        for (source, why) in &self.refused {
            s.push_str(&format!("; {} refused: {why}", source.as_str()));
        }
        for note in &self.notes {
            s.push_str(&format!("; {note}"));
        }
        s
    }
}

/// Starts the source asked for: with `Source::Auto`, the first of fexit,
/// kprobe and reading that loads and attaches; otherwise only the one
/// named, and `Err` when it cannot run.
pub fn start(asked: Source) -> Result<Started, StartError> {
    let only;
    let candidates: &[Source] = match asked {
        Source::Auto => &[Source::Fexit, Source::Kprobe, Source::Reading],
        s => {
            only = [s];
            &only
        }
    };
    let mut refused = Vec::new();
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    if memlock::accounting() == memlock::Accounting::Rlimit {
        notes.push(format!(
            "this kernel charges BPF memory to RLIMIT_MEMLOCK (before 5.11): the daemon's programs and maps are charged to uid {}, not root",
            memlock::CHARGE_UID
        ));
    }
    for &source in candidates {
        // Neither loads anything: the sweep, or the full pass, reads.
        if matches!(source, Source::None | Source::Reading) {
            return Ok(Started { source, tracer: None, refused, notes });
        }
        // Made where they count against no one else's locked memory.
        let started = match memlock::charged_apart(|| Tracer::start(source)) {
            Ok(r) => r,
            Err((r, why)) => {
                notes.push(format!("its BPF memory counts against root's RLIMIT_MEMLOCK: {why}"));
                r
            }
        };
        let feature = match source {
            Source::Fexit => Some(crate::features::Feature::Fexit),
            Source::Kprobe => Some(crate::features::Feature::Kprobe),
            _ => None,
        };
        if let Some(feature) = feature {
            let verdict = match &started {
                Ok(_) => crate::features::Verdict::yes(),
                Err(e) => crate::features::Verdict::no(e),
            };
            crate::features::record(feature, verdict);
        }
        match started {
            Ok(mut tracer) => {
                notes.append(&mut tracer.notes);
                return Ok(Started { source, tracer: Some(tracer), refused, notes });
            }
            Err(e) => {
                refused.push((source, e.to_string()));
                errors.push((source, e));
            }
        }
    }
    Err(StartError { refused: errors })
}

/// No event source asked for could start: each one tried, and why the
/// kernel refused it.
#[derive(Debug, thiserror::Error)]
#[error("{}", .refused.iter().map(|(s, e)| format!("{}: {e}", s.as_str())).collect::<Vec<_>>().join("; "))]
pub struct StartError {
    pub refused: Vec<(Source, programs::TraceError)>,
}
