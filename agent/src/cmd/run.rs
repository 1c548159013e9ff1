//! `agent run`: checks its flags, does what must happen while the process
//! is single-threaded, then hands over to the daemon (`daemon::serve`) on a
//! tokio runtime.

use std::time::Duration;

use super::EXIT_UNKNOWN;
use crate::cli::RunArgs;
use crate::{daemon, logging, trace};

/// `agent run`. Returns the process exit code.
pub fn main(args: &RunArgs) -> u8 {
    logging::init(args.log_format);
    if let Err(e) = args.scan.validate() {
        tracing::error!("{e}");
        return EXIT_UNKNOWN;
    }
    // NB: must run while this process has one thread (setns/unshare rule).
    let tracefs = if args.no_tracing {
        Err("disabled by --no-tracing".to_owned())
    } else {
        trace::prepare_tracefs().map_err(|e| e.to_string())
    };
    let rt =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("cgaudit").enable_all().build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("cannot start the runtime: {e}");
                return EXIT_UNKNOWN;
            }
        };
    let code = rt.block_on(daemon::serve(args, tracefs));
    // An audit still walking on the blocking pool is abandoned, not awaited.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}
