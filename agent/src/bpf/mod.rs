//! Everything the agent asks the kernel about BPF objects.

pub mod attach_type;
pub(crate) mod btf;
pub(crate) mod bytes;
pub(crate) mod command;
pub(crate) mod fdinfo;
pub(crate) mod memlock;

pub(crate) mod object;
pub mod pins;
pub(crate) mod prog_type;
pub(crate) mod programs;
pub(crate) mod query;
pub mod sys;

pub use attach_type::{AttachFlags, AttachType};
pub use command::BpfCommand;
pub use prog_type::ProgType;
pub use query::{BPF_F_PREORDER, Revisions};

/// An error from a library (aya) in one line: its message, then each cause
/// in its `source()` chain that the message does not already quote (aya's
/// variants do both), and of a verifier log only the verdict. The agent's own errors
/// quote their cause in their message and keep no `source()`, so they print
/// the same with `{}` and `{:#}`.
pub fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let cause = s.to_string();
        if !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
        source = s.source();
    }
    match text.split_once("Verifier output:") {
        Some((head, log)) => {
            let verdict = log.lines().rev().map(str::trim).find(|l| {
                !l.is_empty()
                    && !l.starts_with("processed ")
                    && !l.starts_with("verification time")
                    && !l.starts_with("stack depth")
            });
            format!("{} (verifier: {})", head.trim_end_matches(['.', ' ']), verdict.unwrap_or("no log"))
        }
        None => text,
    }
}

/// Whether the kernel counts programs' runs now (`kernel.bpf_stats_enabled`,
/// which the agent never turns on: it costs every program's run).
pub fn stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[derive(Debug, thiserror::Error)]
    enum Lib {
        #[error("program error: {0}")]
        Quotes(#[source] std::io::Error),
        #[error("error relocating function")]
        Hides(#[source] std::io::Error),
        #[error(
            "the BPF_PROG_LOAD syscall returned {0}. Verifier output: 0: (b7) r0 = 0\ninvalid mem access 'scalar'\nprocessed 3 insns\n"
        )]
        Verifier(std::io::Error),
    }

    fn eperm() -> std::io::Error {
        std::io::Error::from_raw_os_error(libc::EPERM)
    }

    #[test]
    fn a_cause_is_said_once_and_a_verifier_log_by_its_verdict() {
        assert_eq!(one_line(&Lib::Quotes(eperm())), "program error: Operation not permitted (os error 1)");
        assert_eq!(one_line(&Lib::Hides(eperm())), "error relocating function: Operation not permitted (os error 1)");
        assert_eq!(
            one_line(&Lib::Verifier(eperm())),
            "the BPF_PROG_LOAD syscall returned Operation not permitted (os error 1) (verifier: invalid mem access 'scalar')"
        );
    }
}
