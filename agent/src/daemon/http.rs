//! The daemon's HTTP endpoints, served so that no client can hold the
//! agent's memory or connections: hyper's HTTP/1 server with a timeout for
//! the request head and a cap on its size; caps on connections at once, in
//! all and per peer address (so one pod cannot take every slot from
//! Prometheus); a limit on each connection's life; the report is shared
//! bytes, not a copy per request; `/audit` (cgroup paths, pod and container
//! ids, process names) answers loopback peers only unless told otherwise.
//!
//! The kubelet's probes are answered whatever holds the slots: a
//! connection that finds no slot goes to the probe lane, which reads one
//! short request head within half a second and answers `/healthz` and
//! `/readyz` only (a hostNetwork pod shares the kubelet's address, and
//! could otherwise hold every slot of that address with connections that
//! never send a request).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::worker::{Msg, Shared};

/// Who may read `/audit` and `/events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditEndpoint {
    /// Peers on loopback only (`kubectl port-forward`, `kubectl exec`).
    Loopback,
    /// Anyone who can reach --listen.
    Any,
    /// Nobody: 403.
    Off,
}

/// The request head must arrive within this.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// hyper's read buffer, which bounds a request head (its minimum is 8 KiB).
const MAX_HEAD: usize = 16 * 1024;
/// Connections served at once, in all and from one peer address; more are
/// closed at accept.
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_PER_PEER: usize = 8;
/// Connections the probe lane serves at once; each lives at most
/// `LANE_WAIT` and holds `LANE_HEAD` bytes.
const LANE: usize = 256;
const LANE_WAIT: Duration = Duration::from_millis(500);
const LANE_HEAD: usize = 1024;
/// The longest a connection may live, reading or writing.
const CONNECTION_LIFE: Duration = Duration::from_secs(30);
/// How long `/audit` waits for the worker to render.
const RENDER_WAIT: Duration = Duration::from_secs(20);

#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    worker: crossbeam_channel::Sender<Msg>,
    audit: AuditEndpoint,
    /// /readyz fails when the last full pass is older than this.
    stale_after: Duration,
}

/// The peer of the connection a request came on.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// Connections held, by peer address.
#[derive(Default)]
struct Slots(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place; given back on drop.
struct Slot {
    slots: Arc<Slots>,
    ip: IpAddr,
}

impl Slots {
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = held.values().sum();
        let mine = held.entry(ip).or_default();
        if total >= MAX_CONNECTIONS || *mine >= MAX_PER_PEER {
            return None;
        }
        *mine += 1;
        Some(Slot { slots: self.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// Serves on every listener until `stop` turns true.
pub async fn serve(
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    worker: crossbeam_channel::Sender<Msg>,
    audit: AuditEndpoint,
    stale_after: Duration,
    stop: watch::Receiver<bool>,
) {
    let app = App { shared, worker, audit, stale_after };
    let router: Router = Router::new()
        .route("/", get(landing))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/audit", get(latest_audit))
        .route("/events", get(recent_events))
        .fallback(not_found)
        .with_state(app.clone());
    // One count of connections over every listener.
    let slots = Arc::new(Slots::default());
    let lane = Arc::new(AtomicUsize::new(0));
    let mut accepting = tokio::task::JoinSet::new();
    for listener in listeners {
        let probes = Probes { app: app.clone(), lane: lane.clone() };
        accepting.spawn(accept(listener, router.clone(), slots.clone(), probes, stop.clone()));
    }
    while accepting.join_next().await.is_some() {}
}

/// What the probe lane needs: the state its answers are made of, and how
/// many connections it holds.
#[derive(Clone)]
struct Probes {
    app: App,
    lane: Arc<AtomicUsize>,
}

/// A connection that found no slot: one request head, read within
/// `LANE_WAIT`; `/healthz` and `/readyz` are answered, anything else is
/// closed unanswered.
async fn probe_lane(mut stream: tokio::net::TcpStream, app: App) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(LANE_WAIT, async {
        let mut head = [0u8; LANE_HEAD];
        let mut n = 0;
        while n < head.len() && !head[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut head[n..]).await {
                Ok(0) | Err(_) => return,
                Ok(k) => n += k,
            }
        }
        let line = head[..n].split(|b| *b == b'\r').next().unwrap_or_default();
        let mut words = line.split(|b| *b == b' ');
        let (Some(b"GET"), Some(path)) = (words.next(), words.next()) else { return };
        let (status, body) = match path {
            b"/healthz" => health(&app),
            b"/readyz" => readiness(&app),
            _ => return,
        };
        let answer = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Accepts connections on one listener until `stop` turns true.
async fn accept(
    listener: TcpListener,
    router: Router,
    slots: Arc<Slots>,
    probes: Probes,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: wait rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let Some(slot) = slots.take(peer.ip()) else {
            // A lane place is given back when its connection ends.
            if probes.lane.fetch_add(1, Ordering::AcqRel) < LANE {
                let (app, lane) = (probes.app.clone(), probes.lane.clone());
                tokio::spawn(async move {
                    probe_lane(stream, app).await;
                    lane.fetch_sub(1, Ordering::AcqRel);
                });
            } else {
                probes.lane.fetch_sub(1, Ordering::AcqRel);
                drop(stream);
            }
            continue;
        };
        let service = TowerToHyperService::new(router.clone().layer(axum::Extension(Peer(peer))).into_service());
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_LIFE, conn).await;
            drop(slot);
        });
    }
}

/// The page at `/`, as exporters have one: what this is and its endpoints.
const LANDING: &str = concat!(
    "<!DOCTYPE html>\n<html><head><title>cgaudit agent</title></head><body>\n",
    "<h1>cgaudit agent</h1>\n",
    "<p>Audits where eBPF programs are attached in the cgroup v2 hierarchy of this node. Version ",
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("CGAUDIT_REVISION"),
    ").</p>\n<ul>\n",
    "<li><a href=\"metrics\">/metrics</a>: Prometheus metrics</li>\n",
    "<li><a href=\"healthz\">/healthz</a>: 200 while the agent makes progress</li>\n",
    "<li><a href=\"readyz\">/readyz</a>: 200 once an audit of the whole node has completed; why not, otherwise</li>\n",
    "<li><a href=\"audit\">/audit</a>: the node as the agent sees it, JSON (loopback peers only by default)</li>\n",
    "<li><a href=\"events\">/events</a>: the last kernel events about cgroup attachments, JSON (as /audit)</li>\n",
    "</ul>\n</body></html>\n"
);

async fn landing() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], LANDING)
}

async fn not_found() -> impl IntoResponse {
    (StatusCode::NOT_FOUND, "not found: see / for the endpoints\n")
}

async fn metrics(State(app): State<App>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], app.shared.metrics.render())
}

/// Alive while the worker makes progress: a worker stuck for good (in a
/// read that never returns) fails it, and the kubelet restarts the agent.
async fn healthz(State(app): State<App>) -> impl IntoResponse {
    health(&app)
}

async fn readyz(State(app): State<App>) -> impl IntoResponse {
    readiness(&app)
}

/// `/healthz`'s answer.
fn health(app: &App) -> (StatusCode, String) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    match app.shared.stuck(now) {
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        None => (StatusCode::OK, "ok\n".to_owned()),
    }
}

/// `/readyz`'s answer.
fn readiness(app: &App) -> (StatusCode, String) {
    if !app.shared.ready.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "no audit has completed yet\n".to_owned());
    }
    if let Some(why) = app.shared.incomplete() {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("the audit cannot see the whole node: {why}\n"));
    }
    let last = app.shared.last_success.load(Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let age = now.saturating_sub(last);
    if age as u64 > app.stale_after.as_secs() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the last completed audit is {age} s old (more than {} s)\n", app.stale_after.as_secs()),
        );
    }
    (StatusCode::OK, "ready\n".to_owned())
}

fn json(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Whether `peer` may read `/audit` and `/events`, which name the node's
/// cgroups, pods, containers and processes.
fn may_read(app: &App, peer: std::net::SocketAddr) -> bool {
    match app.audit {
        AuditEndpoint::Off => false,
        AuditEndpoint::Loopback => peer.ip().is_loopback(),
        AuditEndpoint::Any => true,
    }
}

fn refused() -> Response {
    json(
        StatusCode::FORBIDDEN,
        Bytes::from_static(
            b"{\"error\": \"/audit and /events are not served to this address (see --audit-endpoint)\"}\n",
        ),
    )
}

fn busy() -> Response {
    json(StatusCode::SERVICE_UNAVAILABLE, Bytes::from_static(b"{\"error\": \"the agent is busy\"}\n"))
}

async fn latest_audit(State(app): State<App>, Extension(Peer(peer)): Extension<Peer>) -> Response {
    if !may_read(&app, peer) {
        return refused();
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    if app.worker.try_send(Msg::Render(tx)).is_err() {
        return busy();
    }
    match tokio::time::timeout(RENDER_WAIT, rx).await {
        Ok(Ok(Some(body))) => json(StatusCode::OK, body),
        Ok(Ok(None)) => {
            json(StatusCode::SERVICE_UNAVAILABLE, Bytes::from_static(b"{\"error\": \"no audit has completed yet\"}\n"))
        }
        _ => busy(),
    }
}

async fn recent_events(State(app): State<App>, Extension(Peer(peer)): Extension<Peer>) -> Response {
    if !may_read(&app, peer) {
        return refused();
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    if app.worker.try_send(Msg::Events(tx)).is_err() {
        return busy();
    }
    match tokio::time::timeout(RENDER_WAIT, rx).await {
        Ok(Ok(body)) => json(StatusCode::OK, body),
        _ => busy(),
    }
}
