//! `agent run`: the long-running node agent, and everything it adds to the
//! audit. A worker thread owns the node's picture (`picture`, `worker`): a
//! full pass at start and every `--interval`, kernel change events applied
//! in between, each due time kept by `schedule`.
//!
//! - `trace`: the event sources (`--events`: fexit, kprobe, syscalls,
//!   reading, none), their programs and the reader thread that feeds the
//!   worker;
//! - `sweep`: one pass over every attachment, for the sources without
//!   cgroup events (reading, syscalls);
//! - `picture`: the node kept by events (pure: events in, effects out);
//! - `schedule`: every due time (pure);
//! - `worker`: the loop that does what is due (reads, passes, judgements,
//!   remediation), and publishes;
//! - `history`: the recent events `/events` shows;
//! - `metrics`: the one registry;
//! - `http` and `listen`: the endpoints, on a small tokio runtime.
//!
//! If the worker ever stops, the process exits non-zero, so the probes and
//! the kubelet see it, rather than serving a stale report.

pub mod history;
pub mod http;
pub mod listen;
pub mod metrics;
pub mod picture;
pub mod rtnl;
pub mod schedule;
pub mod sweep;
pub mod trace;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use trace::TraceMessage;
pub use worker::{Config, Remediate};
use worker::{Msg, Shared, Worker};

use crate::daemon::http::AuditEndpoint;
use crate::daemon::listen::Listen;

/// Events waiting for the worker; beyond this, events count as lost (and
/// lead to a full pass).
const QUEUE: usize = 8192;
/// Requests waiting for the worker (served ahead of events); beyond this,
/// /audit and /events answer busy.
const REQUESTS: usize = 64;

/// What `agent run` serves with, from its flags (`cmd::run`).
pub struct Settings {
    pub listen: Listen,
    /// Where the probes are also answered, off the network (`agent probe`).
    pub probe_socket: Option<std::path::PathBuf>,
    pub audit_endpoint: AuditEndpoint,
    /// What the worker runs with; its `source` is the one asked for
    /// (`--events`), then the one that started.
    pub worker: Config,
}

/// Why `agent run` could not start: what failed, for `cmd::run` to say
/// (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Listen(#[from] listen::ListenError),
    #[error("cannot listen on {listen}")]
    Listener {
        listen: String,
        #[source]
        error: std::io::Error,
    },
    #[error("{0}")]
    ProbeSocket(String),
    #[error("the event source asked for with --events cannot run here")]
    Events(#[source] trace::StartError),
    #[error("cannot start the {thread} thread")]
    Thread {
        thread: &'static str,
        #[source]
        error: std::io::Error,
    },
}

/// Serves until SIGTERM or SIGINT (exit 0), or until the worker stops
/// (exit 1). Returns the exit code; `Err` when it could not start.
pub async fn serve(args: Settings) -> Result<u8, ServeError> {
    let bound = listen::listen(&args.listen)?;
    if let Some(note) = &bound.note {
        tracing::info!(listen = %args.listen, "{note}");
    }
    let mut listeners = Vec::new();
    for l in bound.listeners {
        let l = tokio::net::TcpListener::from_std(l)
            .map_err(|error| ServeError::Listener { listen: args.listen.to_string(), error })?;
        listeners.push(l);
    }
    let probes = args.probe_socket.as_deref().map(probe_listener).transpose().map_err(ServeError::ProbeSocket)?;
    let shared = Arc::new(Shared::new(&crate::scan::host::kernel_release()));
    let (tx, rx) = crossbeam_channel::bounded::<Msg>(REQUESTS);
    let (events_tx, events_rx) = crossbeam_channel::bounded::<crate::event::Event>(QUEUE);
    let stop_reader = Arc::new(AtomicBool::new(false));

    let mut config = args.worker;
    let config_proc = config.scan.proc.clone();
    let started = trace::start(config.source).map_err(ServeError::Events)?;
    let source = started.source;
    tracing::info!(source = source.as_str(), "{}", started.summary());
    let reader = match started.tracer {
        Some(tracer) => {
            let (events, wake, shared) = (events_tx, tx.clone(), shared.clone());
            let reader = trace::spawn_reader(tracer, stop_reader.clone(), move |msg| match msg {
                TraceMessage::Event(e) => events.try_send(e).is_ok(),
                TraceMessage::Lost(total) => {
                    // Kept where no full queue can drop it; the wake-up
                    // may find the queue full (the worker looks anyway).
                    shared.events_lost.fetch_max(total, Ordering::Relaxed);
                    let _ = wake.try_send(Msg::Wake);
                    true
                }
                // Counted in `Lost` too (which asks for the full pass).
                TraceMessage::MissedReturns(total) => {
                    shared.metrics.returns_missed(total);
                    true
                }
            });
            Some(reader.map_err(|error| ServeError::Thread { thread: "event reader", error })?)
        }
        None => None,
    };
    shared.metrics.set_event_source(source);

    config.source = source;
    let interval = config.interval;
    let (worker_done_tx, mut worker_done) = watch::channel(false);
    let worker_shared = shared.clone();
    let worker = std::thread::Builder::new().name("cgaudit-worker".into()).spawn(move || {
        // Tells serve the worker is gone, however it ends (a panic too).
        struct Done(watch::Sender<bool>);
        impl Drop for Done {
            fn drop(&mut self) {
                let _ = self.0.send(true);
            }
        }
        let _done = Done(worker_done_tx);
        Worker::new(config, worker_shared).run(rx, events_rx);
    });
    let worker = worker.map_err(|error| ServeError::Thread { thread: "worker", error })?;

    let (stop_tx, stop_rx) = watch::channel(false);
    // The report is stale (and /readyz fails) after three intervals without
    // a full pass.
    let stale_after = interval.saturating_mul(3).max(Duration::from_secs(10));
    let node_netns = Some(config_proc.join("1/ns/net"));
    // Links and tc filters changing: the node's network read at once.
    let _rtnl = rtnl::watch(config_proc.join("1/ns/net"), tx.clone());
    let http = tokio::spawn(http::serve(
        listeners,
        shared.clone(),
        tx.clone(),
        args.audit_endpoint,
        (stale_after, node_netns),
        stop_rx,
    ));
    let probe_task = probes.map(|l| tokio::spawn(http::serve_probes(l, shared.clone(), stale_after)));
    tracing::info!(listen = %args.listen, interval = ?interval, "cgaudit agent running");

    let code = tokio::select! {
        _ = wait_for_signal() => {
            tracing::info!("stopping");
            0
        }
        _ = worker_done.changed() => {
            tracing::error!("the audit worker stopped; exiting so the kubelet restarts the agent");
            1
        }
    };
    let _ = stop_tx.send(true);
    stop_reader.store(true, Ordering::Relaxed);
    let _ = tx.try_send(Msg::Stop);
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_millis(500), http).await;
    if let Some(task) = probe_task {
        task.abort();
    }
    if let Some(path) = &args.probe_socket {
        let _ = std::fs::remove_file(path);
    }
    // The worker ends at its next message (Stop) unless a full pass or a
    // remediation is under way; it is not waited for then.
    let _ = tokio::time::timeout(Duration::from_millis(500), tokio::task::spawn_blocking(move || worker.join())).await;
    if let Some(reader) = reader {
        // The reader sees the flag within its 100 ms poll and drops the
        // tracer, which detaches the programs.
        let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    }
    tracing::info!("stopped");
    Ok(code)
}

/// The probe socket at `path`: one left by an earlier run is replaced,
/// anything else there is refused.
fn probe_listener(path: &std::path::Path) -> Result<tokio::net::UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| format!("--probe-socket {}: removing the old socket: {e}", path.display()))?,
        Ok(_) => return Err(format!("--probe-socket {}: something other than a socket is there", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("--probe-socket {}: {e}", path.display())),
    }
    tokio::net::UnixListener::bind(path).map_err(|e| format!("--probe-socket {}: {e}", path.display()))
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
