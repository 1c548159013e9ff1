//! `agent run`: checks its flags, then hands over to the daemon
//! (`daemon::serve`) on a tokio runtime.

use std::time::Duration;

use super::EXIT_UNKNOWN;
use crate::cli::RunArgs;
use crate::{daemon, logging};

/// `agent run`. Returns the process exit code.
pub fn main(args: &RunArgs) -> u8 {
    logging::init(args.log_format);
    if let Err(e) = args.scan.validate() {
        tracing::error!("{e}");
        return EXIT_UNKNOWN;
    }
    // Before any thread: the probe lowers this process's RLIMIT_MEMLOCK
    // for the time of one bpf() call.
    if let Some(warning) = crate::bpf::memlock::prepare() {
        tracing::warn!("{warning}");
    }
    let rt =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("cgaudit").enable_all().build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("cannot start the runtime: {e}");
                return EXIT_UNKNOWN;
            }
        };
    let code = rt.block_on(daemon::serve(args));
    // An audit still walking on the blocking pool is abandoned, not awaited.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}
