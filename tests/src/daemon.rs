//! `agent run` under test: started on a free loopback port, scraped over
//! plain HTTP, killed on drop.

use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::spawn::agent_bin;

/// Polls `f` every 20 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, f: impl FnMut() -> bool) -> bool {
    poll_until(timeout, Duration::from_millis(20), f)
}

/// Polls `f` every `every` until it returns true or `timeout` passes (the
/// benchmark polls faster, to time what it waits for).
pub fn poll_until(timeout: Duration, every: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(every);
    }
    false
}

/// A plain HTTP/1.0 GET against the daemon on loopback: (status, body).
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

/// A free loopback port (bound then released; the daemon binds it next).
pub fn free_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr")
}

/// `agent run`, killed on drop if it is still running.
pub struct Daemon {
    pub child: Child,
    pub addr: std::net::SocketAddr,
    pub log: tempfile::NamedTempFile,
    /// The network namespace it runs in, when not this process's.
    pub netns: Option<std::path::PathBuf>,
}

impl Daemon {
    /// Starts `agent run --listen <free port> <args>` and waits for /healthz.
    pub fn start(args: &[&str]) -> Daemon {
        Self::start_via(Command::new(agent_bin()), args)
    }

    /// Like `start`, with `base` running the agent (e.g. `nsenter ... agent`
    /// on a sandbox node, where it is killed with the node).
    pub fn start_via(base: Command, args: &[&str]) -> Daemon {
        let mut d = Self::spawn(base, args);
        let up = d.wait_until_answers("/healthz");
        assert!(up, "agent run never answered /healthz:\n{}", d.logs());
        d
    }

    /// Like `start`, for a daemon that may refuse to start (a source this
    /// kernel lacks): ready, or its log.
    pub fn try_start(args: &[&str]) -> Result<Daemon, String> {
        let mut d = Self::spawn(Command::new(agent_bin()), args);
        if d.wait_until_answers("/readyz") { Ok(d) } else { Err(d.logs()) }
    }

    /// Like `start`, listening as `--listen <listen>` says (`:PORT`,
    /// `localhost:PORT`, ...); `addr` is where the test reaches it.
    pub fn start_listening(listen: &str, addr: std::net::SocketAddr, args: &[&str]) -> Daemon {
        let mut d = Self::spawn_at(Command::new(agent_bin()), listen, addr, args);
        let up = d.wait_until_answers("/healthz");
        assert!(up, "agent run --listen {listen} never answered /healthz at {addr}:\n{}", d.logs());
        d
    }

    fn spawn(base: Command, args: &[&str]) -> Daemon {
        let addr = free_addr();
        Self::spawn_at(base, &addr.to_string(), addr, args)
    }

    fn spawn_at(mut base: Command, listen: &str, addr: std::net::SocketAddr, args: &[&str]) -> Daemon {
        let log = tempfile::NamedTempFile::new().expect("log file");
        let child = base
            .arg("run")
            .arg("--listen")
            .arg(listen)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log file"))
            .spawn()
            .expect("spawn agent run");
        Daemon { child, addr, log, netns: None }
    }

    /// `agent run --listen 0.0.0.0:<port> <args>` in network namespace
    /// `netns` (a `crate::net::NetPair`'s node), reached there at
    /// 10.77.0.1; waits for /healthz.
    pub fn start_in_netns(netns: &std::path::Path, args: &[&str]) -> Daemon {
        Self::start_in_netns_of(netns, None, args)
    }

    /// Like `start_in_netns`, in the PID and mount namespaces of the
    /// sandbox node whose PID 1 is `pid1` (its `/proc`, its PID 1's network
    /// namespace another), when given.
    pub fn start_in_netns_of(netns: &std::path::Path, pid1: Option<u32>, args: &[&str]) -> Daemon {
        let mut base = Command::new("nsenter");
        if let Some(pid1) = pid1 {
            base.arg("--target").arg(pid1.to_string()).args(["--pid", "--mount"]);
            base.env("CGAUDIT_NESTED_NODE", "true");
        }
        base.arg(format!("--net={}", netns.display())).arg("--").arg(agent_bin());
        let port = free_addr().port();
        let addr = std::net::SocketAddr::from((crate::net::NODE_IP, port));
        let mut d = Self::spawn_at(base, &format!("0.0.0.0:{port}"), addr, args);
        d.netns = Some(netns.to_owned());
        let up = d.wait_until_answers("/healthz");
        assert!(up, "agent run in {} never answered /healthz:\n{}", netns.display(), d.logs());
        d
    }

    /// GET `path` as the tests reach the daemon (in its netns, if any).
    fn http(&self, path: &str) -> Option<(u16, String)> {
        let (addr, path) = (self.addr, path.to_owned());
        match &self.netns {
            None => http_get(addr, &path),
            Some(ns) => crate::net::NetPair::run_in(ns, move || http_get(addr, &path)),
        }
    }

    /// Whether `path` answers 200 within 10 s, with the daemon still running.
    fn wait_until_answers(&mut self, path: &str) -> bool {
        let answered = wait_until(Duration::from_secs(10), || {
            matches!(self.child.try_wait(), Ok(Some(_))) || self.http(path).is_some_and(|(s, _)| s == 200)
        });
        answered && matches!(self.child.try_wait(), Ok(None))
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        self.http(path).unwrap_or_else(|| panic!("GET {path} failed:\n{}", self.logs()))
    }

    /// The value of the first series whose line starts with `prefix`
    /// (name and, optionally, the beginning of its labels).
    pub fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.get("/metrics").1, series)
    }
}

/// Finds a series in a Prometheus text scrape: `name` or `name{` + label
/// matchers given as `key="value"` fragments that must all be present.
pub fn metric_value(scrape: &str, series: &str) -> Option<f64> {
    let (name, labels) = series.split_once('{').map_or((series, ""), |(n, l)| (n, l.trim_end_matches('}')));
    let wanted: Vec<&str> = labels.split("\",").map(|l| l.trim_end_matches('"')).filter(|l| !l.is_empty()).collect();
    scrape.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (head, value) = line.rsplit_once(' ')?;
        let (n, l) = head.split_once('{').map_or((head, ""), |(n, l)| (n, l));
        (n == name && wanted.iter().all(|w| l.contains(&format!("{w}\"")))).then(|| value.parse().ok())?
    })
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
