//! The daemon's HTTP endpoints, served so that no client can hold the
//! agent's memory or connections: hyper's HTTP/1 server with a timeout for
//! the request head and a cap on its size; caps on connections at once, in
//! all and per peer address (so one pod cannot take every slot from
//! Prometheus); a limit on each connection's life; the report is shared
//! bytes, not a copy per request; `/audit` (cgroup paths, pod and container
//! ids, process names) answers loopback peers only unless told otherwise.
//!
//! A connection that sends no byte within a second is closed, one whose
//! request head is not whole within two seconds too, and each connection
//! serves one request: a slot is held for seconds, never for a
//! connection's life. Every address of the node itself (loopback's
//! 127.0.0.0/8 and ::1, the node's own, cni0's, every ClusterIP on
//! kube-ipvs0) counts as one peer: a hostNetwork pod may use any of them as
//! its source, and by that counted as many peers it held every slot (issue
//! 36's red team: 22 addresses, /metrics 0 of 20). They are read in PID 1's
//! network namespace, whatever the agent's own (the chart's default runs
//! it in a network of its own: issue 47, M4). Other addresses count by
//! themselves and, `MAX_PER_PREFIX` at most, by their /24 or /64: the pods
//! of one node share its pod CIDR. A quarter of the slots is kept for
//! peers that hold none.
//!
//! A connection that finds no slot goes to the probe lane, which reads one
//! short request head within half a second and answers `/healthz` and
//! `/readyz` only, with a bounded share per address. The DaemonSet's own
//! probes do not use the network at all (`probe_socket`, `agent probe`): a
//! hostNetwork pod shares the kubelet's address, and can hold whatever that
//! address may hold.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
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

use super::metrics::Connection;
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
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// hyper's read buffer, which bounds a request head (its minimum is 8 KiB).
const MAX_HEAD: usize = 16 * 1024;
/// Connections served at once, in all and from one peer address; more are
/// closed at accept. The last `RESERVED` of them go only to an address
/// that holds none.
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_PER_PEER: usize = 8;
const RESERVED: usize = 16;
/// Connections served at once from one /24 (IPv4) or /64 (IPv6) that is
/// not the node's: 40 pods of one node, each its own address, held every
/// slot (issue 47, M4).
pub const MAX_PER_PREFIX: usize = 16;
/// A connection must send its first byte within this, or be closed, while
/// places are wanted (`MAX_CONNECTIONS / 2` held); otherwise within
/// `FIRST_BYTE_IDLE`: a lone scraper on a busy or emulated node can pause
/// a second between its connect and its request (issue 47, section 2).
const FIRST_BYTE: Duration = Duration::from_secs(1);
const FIRST_BYTE_IDLE: Duration = Duration::from_secs(5);
/// Connections the probe lane serves at once, in all and from one address;
/// each lives at most `LANE_WAIT` and holds `LANE_HEAD` bytes.
const LANE: usize = 256;
const LANE_PER_PEER: usize = 32;
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
    /// PID 1's network namespace (`<proc>/1/ns/net`): where the node's
    /// addresses are read.
    node_netns: Option<std::path::PathBuf>,
}

/// The peer of the connection a request came on.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// Whom a connection's slots count against: the node itself (any of its
/// own addresses), another address, or that address's /24 or /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PeerKey {
    Node,
    Addr(IpAddr),
    Prefix(IpAddr),
}

impl PeerKey {
    /// The prefix an address's connections also count against.
    fn prefix(self) -> Option<PeerKey> {
        let PeerKey::Addr(ip) = self else { return None };
        Some(PeerKey::Prefix(match ip {
            IpAddr::V4(v4) => {
                let [a, b, c, _] = v4.octets();
                IpAddr::V4([a, b, c, 0].into())
            }
            IpAddr::V6(v6) => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        }))
    }
}

/// The node's own addresses, read again at most every `LOCAL_FRESH`: in
/// `node_netns` (PID 1's network namespace) on a thread that joins it for
/// the read, else, where it cannot be entered, in the agent's own.
/// After the first, each read runs on a thread of its own while the
/// connections are keyed by the last one: a node with thousands of
/// addresses (a pod with CAP_NET_ADMIN can make devices there) never holds
/// the accept loop (issue 47 red team, F11).
struct Local {
    node_netns: Option<std::path::PathBuf>,
    addrs: std::collections::HashSet<IpAddr>,
    read: Option<std::time::Instant>,
    /// Whether the last read was of the agent's own namespace instead.
    own: Option<bool>,
    /// A read under way, and where it leaves its answer.
    pending: Option<Arc<Mutex<Option<NodeAddresses>>>>,
}

/// What one read of the node's addresses found: in PID 1's namespace, or,
/// where that could not be entered (why), in the agent's own.
type NodeAddresses = (Result<std::collections::HashSet<IpAddr>, String>, Option<std::collections::HashSet<IpAddr>>);

const LOCAL_FRESH: Duration = Duration::from_secs(10);

/// Every address of every interface of the calling thread's network
/// namespace (getifaddrs(3); kube-ipvs0's ClusterIPs among them).
fn addresses_here() -> Option<std::collections::HashSet<IpAddr>> {
    let all = nix::ifaddrs::getifaddrs().ok()?;
    Some(
        all.filter_map(|i| {
            let a = i.address?;
            a.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .collect(),
    )
}

/// The addresses of the network namespace at `netns`, read from a thread
/// that joins it (the caller's stays where it is).
fn addresses_in(netns: &std::path::Path) -> Result<std::collections::HashSet<IpAddr>, String> {
    let fd = std::fs::File::open(netns).map_err(|e| format!("open {}: {e}", netns.display()))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("setns into {}: {e}", netns.display()))?;
            addresses_here().ok_or_else(|| "getifaddrs failed".to_owned())
        })
        .join()
        .unwrap_or_else(|_| Err("the address reader panicked".to_owned()))
    })
}

impl Local {
    fn new(node_netns: Option<std::path::PathBuf>) -> Local {
        Local { node_netns, addrs: Default::default(), read: None, own: None, pending: None }
    }

    /// Reads the node's addresses: in PID 1's namespace, and in the
    /// agent's own where that cannot be.
    fn read_addresses(node_netns: Option<&std::path::Path>) -> NodeAddresses {
        let node = node_netns.map_or_else(|| Err("no PID 1 to read".to_owned()), addresses_in);
        let own = if node.is_ok() { None } else { addresses_here() };
        (node, own)
    }

    fn apply(&mut self, (node, here): NodeAddresses) {
        let own = node.is_err();
        match node {
            Ok(addrs) => self.addrs = addrs,
            Err(why) => {
                if self.own != Some(true) {
                    tracing::warn!(
                        "the node's addresses are read in the agent's own network namespace ({why}): with \
                         hostNetwork false, a hostNetwork pod's connections from the node's addresses count \
                         as separate peers"
                    );
                }
                if let Some(addrs) = here {
                    self.addrs = addrs;
                }
            }
        }
        self.own = Some(own);
        self.read = Some(std::time::Instant::now());
    }

    /// The key of a connection from `ip` (canonical: a v4 peer on a
    /// dual-stack socket is its v4 address).
    fn key(&mut self, ip: IpAddr) -> PeerKey {
        if ip.is_loopback() {
            return PeerKey::Node;
        }
        let done = self.pending.as_ref().and_then(|p| p.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(found) = done {
            self.pending = None;
            self.apply(found);
        }
        match self.read {
            // The first: read here, once.
            None => {
                let found = Self::read_addresses(self.node_netns.as_deref());
                self.apply(found);
            }
            Some(at) if at.elapsed() >= LOCAL_FRESH && self.pending.is_none() => {
                let slot = Arc::new(Mutex::new(None));
                let (into, netns) = (slot.clone(), self.node_netns.clone());
                let spawned = std::thread::Builder::new().name("node-addresses".into()).spawn(move || {
                    let found = Self::read_addresses(netns.as_deref());
                    *into.lock().unwrap_or_else(|e| e.into_inner()) = Some(found);
                });
                match spawned {
                    Ok(_) => self.pending = Some(slot),
                    // Read again at the next connection.
                    Err(e) => tracing::debug!(error = %e, "cannot start the node's address reader"),
                }
            }
            Some(_) => {}
        }
        if self.addrs.contains(&ip) { PeerKey::Node } else { PeerKey::Addr(ip) }
    }
}

/// Connections held, by peer.
#[derive(Default)]
struct Slots(Mutex<HashMap<PeerKey, usize>>);

/// One connection's place; given back on drop.
struct Slot {
    slots: Arc<Slots>,
    ip: PeerKey,
}

impl Slots {
    /// A place for a connection from `ip`, within `limits.0` in all,
    /// `limits.1` from one peer and `per_prefix` from its prefix (an
    /// address not the node's); the last `reserved` only for a peer that
    /// holds none.
    fn take(self: &Arc<Self>, ip: PeerKey, limits: (usize, usize), per_prefix: usize, reserved: usize) -> Option<Slot> {
        let (max, per_peer) = limits;
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = held.iter().filter(|(k, _)| !matches!(k, PeerKey::Prefix(_))).map(|(_, n)| n).sum();
        let mine = held.get(&ip).copied().unwrap_or(0);
        let prefix = ip.prefix();
        let of_prefix = prefix.and_then(|p| held.get(&p).copied()).unwrap_or(0);
        let room = if mine == 0 { max } else { max - reserved };
        if total >= room || mine >= per_peer || of_prefix >= per_prefix.min(max) {
            return None;
        }
        for k in std::iter::once(ip).chain(prefix) {
            *held.entry(k).or_default() += 1;
        }
        Some(Slot { slots: self.clone(), ip })
    }
}

impl Slots {
    /// Whether places are wanted: half of them or more held.
    fn wanted(&self) -> bool {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.iter().filter(|(k, _)| !matches!(k, PeerKey::Prefix(_))).map(|(_, n)| n).sum::<usize>()
            >= MAX_CONNECTIONS / 2
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.0.lock().unwrap_or_else(|e| e.into_inner());
        for k in std::iter::once(self.ip).chain(self.ip.prefix()) {
            if let Some(n) = held.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&k);
                }
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
    (stale_after, node_netns): (Duration, Option<std::path::PathBuf>),
    stop: watch::Receiver<bool>,
) {
    let app = App { shared, worker, audit, stale_after, node_netns };
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
    let lane = Arc::new(Slots::default());
    let mut accepting = tokio::task::JoinSet::new();
    for listener in listeners {
        let probes = Probes { app: app.clone(), lane: lane.clone() };
        accepting.spawn(accept(listener, router.clone(), slots.clone(), probes, stop.clone()));
    }
    while accepting.join_next().await.is_some() {}
}

/// What the probe lane needs: the state its answers are made of, and the
/// connections it holds, by address.
#[derive(Clone)]
struct Probes {
    app: App,
    lane: Arc<Slots>,
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
        let (status, body, kind) = match path {
            b"/healthz" => {
                let (s, b) = health(&app.shared);
                (s, Bytes::from(b), "text/plain; charset=utf-8")
            }
            b"/readyz" => {
                let (s, b) = readiness(&app.shared, app.stale_after);
                (s, Bytes::from(b), "text/plain; charset=utf-8")
            }
            // Rendered at most once a second whoever asks: a scraper that
            // found no place is answered too, within the lane's time.
            b"/metrics" => (StatusCode::OK, app.shared.metrics.render(), "text/plain; version=0.0.4; charset=utf-8"),
            _ => return,
        };
        let head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(&body).await;
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
    let mut local = Local::new(probes.app.node_netns.clone());
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
        // A v4 peer on a dual-stack socket arrives as ::ffff:a.b.c.d: one
        // address, one count; the node's own addresses are one peer.
        let ip = local.key(peer.ip().to_canonical());
        let metrics = &probes.app.shared.metrics;
        let Some(slot) = slots.take(ip, (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, RESERVED) else {
            // A lane place is given back when its connection ends. Half the
            // lane per prefix: two addresses in Prometheus's /24 must not
            // refuse its scrapes (issue 47 red team, F10), nor one /24 take
            // it all (N14); the lane's places are short and bounded per
            // address.
            match probes.lane.take(ip, (LANE, LANE_PER_PEER), LANE / 2, 0) {
                Some(place) => {
                    metrics.connection(Connection::Lane);
                    let app = probes.app.clone();
                    tokio::spawn(async move {
                        probe_lane(stream, app).await;
                        drop(place);
                    });
                }
                None => metrics.connection(Connection::Refused),
            }
            continue;
        };
        let service = TowerToHyperService::new(router.clone().layer(axum::Extension(Peer(peer))).into_service());
        let (slots, shared) = (slots.clone(), probes.app.shared.clone());
        tokio::spawn(async move {
            // A connection that says nothing gives its place up at once
            // while places are wanted; a slow one keeps it while they are not.
            // (A peek: readiness alone can be spurious; a byte is a byte.)
            let mut first = [0u8; 1];
            let said = match tokio::time::timeout(FIRST_BYTE, stream.peek(&mut first)).await {
                Ok(r) => matches!(r, Ok(n) if n > 0),
                Err(_) if !slots.wanted() => {
                    let more = FIRST_BYTE_IDLE.saturating_sub(FIRST_BYTE);
                    matches!(tokio::time::timeout(more, stream.peek(&mut first)).await, Ok(Ok(n)) if n > 0)
                }
                Err(_) => false,
            };
            if !said {
                shared.metrics.connection(Connection::Silent);
                return;
            }
            shared.metrics.connection(Connection::Served);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .keep_alive(false)
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
    health(&app.shared)
}

async fn readyz(State(app): State<App>) -> impl IntoResponse {
    readiness(&app.shared, app.stale_after)
}

/// `/healthz`'s answer.
fn health(shared: &Shared) -> (StatusCode, String) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    match shared.stuck(now) {
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        None => (StatusCode::OK, "ok\n".to_owned()),
    }
}

/// `/readyz`'s answer: not ready after `stale_after` without a full pass.
fn readiness(shared: &Shared, stale_after: Duration) -> (StatusCode, String) {
    if !shared.ready.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "no audit has completed yet\n".to_owned());
    }
    if let Some(why) = shared.incomplete() {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("the audit cannot see the whole node: {why}\n"));
    }
    let last = shared.last_success.load(Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let age = now.saturating_sub(last);
    if age as u64 > stale_after.as_secs() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the last completed audit is {age} s old (more than {} s)\n", stale_after.as_secs()),
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
        // IPv4 loopback on the default dual-stack socket arrives as
        // ::ffff:127.0.0.1, which is not IPv6's loopback.
        AuditEndpoint::Loopback => peer.ip().to_canonical().is_loopback(),
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

/// The DaemonSet's probes, off the network: one line (`live` or `ready`)
/// on a unix socket in the agent's own container, answered with the status
/// code and the reason, then closed. A hostNetwork pod can hold any TCP
/// place the kubelet's address may hold; it cannot reach this file.
pub async fn serve_probes(listener: tokio::net::UnixListener, shared: Arc<Shared>, stale_after: Duration) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let mut read = tokio::io::BufReader::new(read.take(64));
                read.read_line(&mut line).await.ok()?;
                let (status, body) = match line.trim() {
                    "live" => health(&shared),
                    "ready" => readiness(&shared, stale_after),
                    _ => (StatusCode::BAD_REQUEST, "ask live or ready\n".to_owned()),
                };
                write.write_all(format!("{} {body}", status.as_u16()).as_bytes()).await.ok()?;
                write.shutdown().await.ok()
            })
            .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4]) -> PeerKey {
        PeerKey::Addr(IpAddr::V4(a.into()))
    }

    /// Issue 47, M4: 40 pods of one node, each its own address in the
    /// node's pod CIDR, held every slot; a /24 holds `MAX_PER_PREFIX` now,
    /// and a scraper elsewhere (another node's pods) always finds room.
    #[test]
    fn one_prefix_holds_at_most_its_share_whatever_its_addresses() {
        let slots = Arc::new(Slots::default());
        let mut held = Vec::new();
        for i in 1..=40u8 {
            for _ in 0..MAX_PER_PEER {
                if let Some(s) =
                    slots.take(v4([10, 244, 1, i]), (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, RESERVED)
                {
                    held.push(s);
                }
            }
        }
        assert_eq!(held.len(), MAX_PER_PREFIX, "the pods' /24 holds its share only");
        for n in 0..MAX_PER_PEER {
            let s = slots.take(v4([10, 244, 7, 9]), (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, RESERVED);
            assert!(s.is_some(), "a scraper in another /24 is refused at its connection {n}");
            held.push(s.unwrap());
        }
        // The node's own addresses are one peer, of no prefix.
        let node: Vec<_> = (0..MAX_PER_PEER + 2)
            .filter_map(|_| slots.take(PeerKey::Node, (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, 0))
            .collect();
        assert_eq!(node.len(), MAX_PER_PEER);
        // Places are given back: the prefix's count too.
        held.truncate(0);
        assert!(slots.take(v4([10, 244, 1, 99]), (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, RESERVED).is_some());
    }

    /// Issue 47 red team, F10: the probe lane has no share per prefix: two
    /// addresses in Prometheus's /24 holding all they may there do not
    /// refuse a third of that /24.
    #[test]
    fn the_probe_lane_has_no_share_per_prefix() {
        let lane = Arc::new(Slots::default());
        let mut held = Vec::new();
        for i in [1u8, 2] {
            for _ in 0..LANE_PER_PEER {
                held.extend(lane.take(v4([10, 0, 9, i]), (LANE, LANE_PER_PEER), LANE / 2, 0));
            }
        }
        assert_eq!(held.len(), 2 * LANE_PER_PEER);
        assert!(lane.take(v4([10, 0, 9, 3]), (LANE, LANE_PER_PEER), LANE / 2, 0).is_some(), "Prometheus is refused");
        // One /24 fills half the lane at most: another's scraper finds room.
        for i in 3..=8u8 {
            for _ in 0..LANE_PER_PEER {
                held.extend(lane.take(v4([10, 0, 9, i]), (LANE, LANE_PER_PEER), LANE / 2, 0));
            }
        }
        assert!(lane.take(v4([10, 0, 7, 1]), (LANE, LANE_PER_PEER), LANE / 2, 0).is_some(), "another /24 is refused");
        // The main places keep their share per prefix.
        let slots = Arc::new(Slots::default());
        let main: Vec<Slot> = (1..=4u8)
            .flat_map(|i| std::iter::repeat_n(i, MAX_PER_PEER))
            .filter_map(|i| slots.take(v4([10, 0, 9, i]), (MAX_CONNECTIONS, MAX_PER_PEER), MAX_PER_PREFIX, RESERVED))
            .collect();
        assert_eq!(main.len(), MAX_PER_PREFIX);
    }

    #[test]
    fn a_prefix_is_the_addresss_24_or_64() {
        assert_eq!(v4([10, 244, 1, 7]).prefix(), Some(PeerKey::Prefix(IpAddr::V4([10, 244, 1, 0].into()))));
        let v6 = PeerKey::Addr("fd00:1:2:3:4:5:6:7".parse().unwrap());
        assert_eq!(v6.prefix(), Some(PeerKey::Prefix("fd00:1:2:3::".parse().unwrap())));
        assert_eq!(PeerKey::Node.prefix(), None);
    }
}
