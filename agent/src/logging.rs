//! Logs to stderr for `agent run` and `agent remount`: text or one JSON
//! object per line, filtered by RUST_LOG (default info). Log lines carry
//! names others chose (cgroups, processes, paths): text lines are escaped
//! (`text::EscapingWriter`), so they are not colored either.

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| crate::text::EscapingWriter(std::io::stderr()))
        .with_ansi(false);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
