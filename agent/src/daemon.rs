//! `agent run`: the long-running node agent. It audits at start, on a
//! jittered interval and right after attach events, publishes the results as
//! Prometheus metrics, and serves them over HTTP.
//!
//! Threads: the tokio runtime (HTTP, timers), blocking audits on its blocking
//! pool (the scan is plain syscalls), and the trace reader thread. Anything
//! that must happen while single-threaded (entering a mount namespace for
//! tracefs) happens in `main` before the runtime starts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State as Extract;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use rand::Rng;
use tokio::sync::{mpsc, watch};

use crate::cli::{Remediate, RunArgs};
use crate::findings::Kind;
use crate::metrics::{Metrics, Trigger};
use crate::remount::{self, Outcome, plan::Action};
use crate::report::Report;
use crate::scan;
use crate::snapshot::AttachRecord;
use crate::trace::{self, TraceMessage, Tracer};

/// How long after an attach event the audit starts: later events in this
/// window are folded into the same audit.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// Retry delay while no audit has succeeded yet (e.g. the root is not there).
const RETRY: Duration = Duration::from_secs(1);
/// Attach events kept for "who attached what".
const EVENTS_KEPT: usize = 1024;
/// At most one remediation per mount path in this window.
const REMEDIATION_EVERY: Duration = Duration::from_secs(300);

struct State {
    metrics: Metrics,
    /// The latest report as JSON, served on /audit.
    latest: RwLock<Option<String>>,
    ready: AtomicBool,
    events: Mutex<VecDeque<AttachRecord>>,
}

impl State {
    fn push_event(&self, r: AttachRecord) {
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if ev.len() == EVENTS_KEPT {
            ev.pop_front();
        }
        ev.push_back(r);
    }

    fn events(&self) -> Vec<AttachRecord> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect()
    }
}

fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(rand::rng().random_range(0.9..1.1))
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Serves until SIGTERM or SIGINT; returns the exit code. `tracefs` says
/// whether `cmd::run` could make tracefs visible before threads started.
pub async fn serve(args: &RunArgs, tracefs: Result<(), String>) -> u8 {
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", args.listen);
            return 2;
        }
    };
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let state = Arc::new(State {
        metrics: Metrics::new(kernel.trim()),
        latest: RwLock::new(None),
        ready: AtomicBool::new(false),
        events: Mutex::new(VecDeque::new()),
    });
    let (wake_tx, wake_rx) = mpsc::unbounded_channel::<()>();
    let stop_reader = Arc::new(AtomicBool::new(false));

    let reader = match tracefs.and_then(|()| Tracer::start(std::process::id()).map_err(|e| e.to_string())) {
        Ok(tracer) => {
            state.metrics.set_tracing_active(true);
            tracing::info!("event tracing active: tracepoints on syscalls/sys_enter_bpf and sys_exit_bpf");
            let st = state.clone();
            Some(trace::spawn_reader(tracer, args.scan.proc.clone(), stop_reader.clone(), move |msg| match msg {
                TraceMessage::Event(r) => {
                    tracing::info!(
                        command = r.command.as_str(),
                        attach_type = r.attach_type.map(|t| t.name()),
                        pid = r.pid,
                        comm = %r.comm,
                        result = r.result,
                        "bpf attach event"
                    );
                    st.metrics.attach_event(r.command, r.attach_type);
                    st.push_event(r);
                    let _ = wake_tx.send(());
                }
                TraceMessage::Lost(total) => {
                    tracing::warn!(total, "attach events lost in the kernel");
                    st.metrics.events_lost(total);
                }
            }))
        }
        Err(why) => {
            state.metrics.set_tracing_active(false);
            tracing::warn!(reason = %why, interval = ?args.interval, "event tracing unavailable; auditing on the interval only");
            None
        }
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/audit", get(latest_audit))
        .with_state(state.clone());
    let mut http_stop = stop_rx.clone();
    let http = tokio::spawn(async move {
        let graceful = async move {
            let _ = http_stop.changed().await;
        };
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(graceful).await {
            tracing::error!("http server: {e}");
        }
    });
    tracing::info!(listen = %args.listen, interval = ?args.interval, "cgaudit agent running");
    let auditor = tokio::spawn(audit_loop(args.clone_for_loop(), state.clone(), wake_rx, stop_rx));

    wait_for_signal().await;
    tracing::info!("stopping");
    let _ = stop_tx.send(true);
    stop_reader.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        let _ = http.await;
        let _ = auditor.await;
    })
    .await;
    if let Some(reader) = reader {
        // The reader sees the flag within its 100 ms poll and drops the
        // tracer, which detaches both tracepoints.
        let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    }
    tracing::info!("stopped");
    0
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

/// What the audit loop needs from the command line.
pub struct LoopArgs {
    scan: crate::cli::ScanArgs,
    interval: Duration,
    remediate: Remediate,
}

impl RunArgs {
    fn clone_for_loop(&self) -> LoopArgs {
        LoopArgs { scan: self.scan.clone(), interval: self.interval, remediate: self.remediate }
    }
}

/// Plans (and with `--remediate on`, applies) the remount of each CNI mount
/// the audit found rooted below the root, at most once per path per window.
/// The remount runs in the single-threaded helper process, as for the CLI.
async fn remediate(
    args: &LoopArgs,
    state: &State,
    report: &Report,
    last: &mut std::collections::HashMap<String, Instant>,
) {
    if args.remediate == Remediate::Off {
        return;
    }
    // Only the CNIs' own mounts: the finding names the CNI that owns one.
    let paths: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.kind == Kind::CgroupMountNotRoot && f.owner.is_some_and(|o| o.is_cni()))
        .filter_map(|f| f.mount_point.clone())
        .collect();
    for path in paths {
        if last.get(&path).is_some_and(|t| t.elapsed() < REMEDIATION_EVERY) {
            continue;
        }
        last.insert(path.clone(), Instant::now());
        let proc = args.scan.proc.clone();
        let apply = args.remediate == Remediate::On;
        let p = std::path::PathBuf::from(&path);
        let done = tokio::task::spawn_blocking(move || {
            let plan = remount::make_plan(&proc, 1, &p).map_err(|e| (Outcome::Failed, e.to_string()))?;
            match plan.action {
                Action::Nothing => Ok((Outcome::NothingToDo, plan.reason)),
                Action::Refuse => Err((Outcome::Refused, plan.reason)),
                _ if !apply => Ok((Outcome::DryRun, plan.reason)),
                _ => remount::apply(&proc, 1, &plan)
                    .map(|after| (Outcome::Done, format!("{}; now {after}", plan.reason)))
                    .map_err(|e| (Outcome::Failed, e)),
            }
        })
        .await
        .unwrap_or_else(|e| Err((Outcome::Failed, e.to_string())));
        let (outcome, detail) = match done {
            Ok(x) | Err(x) => x,
        };
        state.metrics.remediation("remount", outcome.as_str());
        match outcome {
            Outcome::Failed | Outcome::Refused => {
                tracing::error!(action = "remount", path, result = outcome.as_str(), detail, "remediation")
            }
            _ => tracing::warn!(action = "remount", path, result = outcome.as_str(), detail, "remediation"),
        }
    }
}

async fn audit_loop(
    args: LoopArgs,
    state: Arc<State>,
    mut wake: mpsc::UnboundedReceiver<()>,
    mut stop: watch::Receiver<bool>,
) {
    let policy = args.scan.policy();
    let mut trigger = Trigger::Startup;
    let mut last_verdict = None;
    let mut remediated = std::collections::HashMap::new();
    let mut last_fallback: Option<String> = None;
    loop {
        let events = state.events();
        let mut opts = args.scan.options();
        opts.name_cgroups = events.iter().map(|e| e.caller_cgroup_id).collect();
        let policy = policy.clone();
        let started = Instant::now();
        let result = tokio::task::spawn_blocking(move || {
            scan::scan(&opts).map(|mut snap| {
                snap.events = events;
                Report::new(&snap, &policy)
            })
        })
        .await;
        let seconds = started.elapsed().as_secs_f64();
        let wait = match result {
            Ok(Ok(report)) => {
                state.metrics.audit_done(trigger, seconds, &report, unix_now());
                let summary = report.summary();
                if last_verdict != Some(report.verdict()) {
                    tracing::info!(trigger = trigger.as_str(), findings = report.findings.len(), "{summary}");
                } else {
                    tracing::debug!(trigger = trigger.as_str(), "{summary}");
                }
                last_verdict = Some(report.verdict());
                if report.walk.fallback_reason != last_fallback {
                    if let Some(reason) = &report.walk.fallback_reason {
                        tracing::warn!(reason = %reason, "reading cgroups by syscalls: the in-kernel walk is unavailable");
                    }
                    last_fallback = report.walk.fallback_reason.clone();
                }
                *state.latest.write().unwrap_or_else(|e| e.into_inner()) = Some(report.to_json());
                state.ready.store(true, Ordering::Relaxed);
                remediate(&args, &state, &report, &mut remediated).await;
                jittered(args.interval)
            }
            Ok(Err(e)) => {
                state.metrics.audit_failed(trigger, seconds);
                tracing::warn!(trigger = trigger.as_str(), error = %format!("{e:#}"), "audit failed");
                if state.ready.load(Ordering::Relaxed) { jittered(args.interval) } else { RETRY.min(args.interval) }
            }
            Err(e) => {
                state.metrics.audit_failed(trigger, seconds);
                tracing::error!(trigger = trigger.as_str(), error = %e, "audit task panicked");
                jittered(args.interval)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => trigger = Trigger::Interval,
            Some(()) = wake.recv() => {
                tokio::select! {
                    _ = tokio::time::sleep(DEBOUNCE) => {}
                    _ = stop.changed() => return,
                }
                // Fold the events of the window into this one audit.
                while wake.try_recv().is_ok() {}
                trigger = Trigger::Event;
            }
            _ = stop.changed() => return,
        }
    }
}

async fn metrics(Extract(state): Extract<Arc<State>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics.render())
}

async fn readyz(Extract(state): Extract<Arc<State>>) -> impl IntoResponse {
    if state.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "no audit has completed yet\n")
    }
}

async fn latest_audit(Extract(state): Extract<Arc<State>>) -> impl IntoResponse {
    match state.latest.read().unwrap_or_else(|e| e.into_inner()).clone() {
        Some(json) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], json),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"error\": \"no audit has completed yet\"}\n".to_owned(),
        ),
    }
}
