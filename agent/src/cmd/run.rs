//! `agent run`: checks its flags, turns them into the daemon's settings
//! and hands over to it (`daemon::serve`) on a tokio runtime.

use std::time::Duration;

use crate::cli::RunArgs;
use crate::daemon::trace::Source;
use crate::{daemon, logging};

/// `agent run`. Returns the process exit code; `Err` when it could not
/// start (`main` logs why, exit 2).
pub fn main(args: &RunArgs) -> anyhow::Result<u8> {
    logging::init(args.log_format);
    args.scan.validate()?;
    // Before any thread: the probe lowers this process's RLIMIT_MEMLOCK
    // for the time of one bpf() call.
    if let Some(warning) = crate::bpf::memlock::prepare() {
        tracing::warn!("{warning}");
    }
    let rt =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("cgaudit").enable_all().build()
        {
            Ok(rt) => rt,
            Err(e) => return Err(anyhow::Error::new(e).context("cannot start the runtime")),
        };
    let settings = daemon::Settings {
        listen: args.listen.clone(),
        probe_socket: args.probe_socket.clone(),
        audit_endpoint: args.audit_endpoint,
        worker: daemon::Config {
            scan: args.scan.options(),
            policy: args.scan.policy(),
            interval: args.interval,
            remediate: args.remediate,
            source: if args.no_tracing { Source::None } else { args.events },
            max_cgroups: usize::try_from(args.max_cgroups).unwrap_or(usize::MAX),
        },
    };
    let served = rt.block_on(daemon::serve(settings));
    // An audit still walking on the blocking pool is abandoned, not awaited.
    rt.shutdown_timeout(Duration::from_millis(200));
    Ok(served?)
}
