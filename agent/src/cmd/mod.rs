//! One module per subcommand: parse nothing (clap did), check the flags
//! against the host and turn them into settings (`flags`), run, print, and
//! return the exit code.

pub mod audit;
pub mod flags;
pub mod install;
pub mod probe;
pub mod remount;
pub mod run;

/// Exit code for "could not run" and bad input (node-problem-detector:
/// unknown).
pub const EXIT_UNKNOWN: u8 = 2;

/// An error and its causes, each said once, joined by ": ". Many errors
/// here already name their cause in their own message (thiserror's `{0}`
/// with `#[from]`); a cause whose text is already there is not repeated.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Says once why `agent <command>` could not run: as a log line for `run`
/// (whose logs may be JSON for a collector), else on stderr as
/// `agent <command>: error: ...`. Escaped either way: the causes name paths
/// and cgroups that others chose.
pub fn print_failure(command: &str, e: &anyhow::Error) {
    let why = chain(e.as_ref());
    if command == "run" {
        // The log writer escapes (text) or encodes (JSON) it.
        tracing::error!("{why}");
    } else {
        eprintln!("agent {command}: error: {}", crate::text::escape(&why));
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("reading the root: {0}")]
    struct Names(#[from] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("auditing the node")]
    struct Plain(#[source] std::io::Error);

    #[test]
    fn a_chain_says_each_cause_once() {
        let gone = || std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(
            super::chain(&Names(gone())),
            "reading the root: No such file or directory (os error 2)",
            "a cause named in the message is not repeated"
        );
        assert_eq!(super::chain(&Plain(gone())), "auditing the node: No such file or directory (os error 2)");
        let e = anyhow::Error::from(Names(gone())).context("agent audit");
        assert_eq!(super::chain(e.as_ref()), "agent audit: reading the root: No such file or directory (os error 2)");
    }
}
