//! Where the daemon listens (`--listen`), as exporters take it: `[::]:9974`
//! (the default: every address, IPv4 and IPv6), `0.0.0.0:9974`,
//! `127.0.0.1:9974`, `:9974` (every address) or `localhost:9974` (a host
//! name, resolved when the daemon starts).
//!
//! Every-address listening is one dual-stack socket with `IPV6_V6ONLY`
//! off, whatever `net.ipv6.bindv6only` says; on a node booted with IPv6
//! disabled (`ipv6.disable=1`) it falls back to `0.0.0.0`, with a log line.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// `--listen`'s value, parsed without any lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `[::]:PORT`, `:PORT`: every address, both families where the node has them.
    Any(u16),
    /// A literal address other than `[::]`.
    Addr(SocketAddr),
    /// `HOST:PORT`, resolved at start; every address it resolves to.
    Host(String, u16),
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Any(port) => write!(f, "[::]:{port}"),
            Listen::Addr(a) => write!(f, "{a}"),
            Listen::Host(h, port) => write!(f, "{h}:{port}"),
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Listen, String> {
        const FORMS: &str = "expected [::]:PORT, :PORT, IP:PORT or HOST:PORT";
        if let Ok(addr) = s.parse::<SocketAddr>() {
            if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
                return Ok(Listen::Any(addr.port()));
            }
            return Ok(Listen::Addr(addr));
        }
        let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("no port in {s:?}: {FORMS}"))?;
        let port: u16 = port.parse().map_err(|_| format!("{port:?} is not a port number: {FORMS}"))?;
        if host.is_empty() {
            return Ok(Listen::Any(port));
        }
        if host.contains(':') || host.starts_with('[') {
            return Err(format!("{host:?} is not an address (an IPv6 address goes in brackets: [::1]:{port})"));
        }
        let valid = host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !valid {
            return Err(format!("{host:?} is neither an IP address nor a host name: {FORMS}"));
        }
        Ok(Listen::Host(host.to_owned(), port))
    }
}

/// Sockets bound and listening, and a line saying how, when it is news.
pub struct Bound {
    pub listeners: Vec<std::net::TcpListener>,
    pub note: Option<String>,
}

/// Why nothing could be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("--listen {listen}: cannot resolve {host}: {error}")]
    Resolve { listen: String, host: String, error: std::io::Error },
    #[error("--listen {listen}: {host} resolves to no address")]
    NoAddress { listen: String, host: String },
    #[error("cannot listen on {addr}: {error}")]
    Bind { addr: SocketAddr, error: std::io::Error },
}

/// A listening socket on `addr`; an IPv6 one serves IPv4 too when `dual`.
fn bind(addr: SocketAddr, dual: bool) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(!dual)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    Ok(socket.into())
}

/// Binds what `listen` names.
pub fn listen(listen: &Listen) -> Result<Bound, ListenError> {
    match listen {
        Listen::Any(port) => {
            let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), *port);
            match bind(v6, true) {
                Ok(l) => Ok(Bound { listeners: vec![l], note: None }),
                // No IPv6 on this node (ipv6.disable=1): IPv4 only.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)) => {
                    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), *port);
                    let l = bind(v4, false).map_err(|error| ListenError::Bind { addr: v4, error })?;
                    Ok(Bound {
                        listeners: vec![l],
                        note: Some(format!("IPv6 is not available on this node ({e}): listening on {v4}, IPv4 only")),
                    })
                }
                Err(error) => Err(ListenError::Bind { addr: v6, error }),
            }
        }
        Listen::Addr(addr) => {
            let l = bind(*addr, false).map_err(|error| ListenError::Bind { addr: *addr, error })?;
            Ok(Bound { listeners: vec![l], note: None })
        }
        Listen::Host(host, port) => {
            let resolve_error = |error| ListenError::Resolve { listen: listen.to_string(), host: host.clone(), error };
            let mut addrs: Vec<SocketAddr> = (host.as_str(), *port).to_socket_addrs().map_err(resolve_error)?.collect();
            addrs.sort();
            addrs.dedup();
            if addrs.is_empty() {
                return Err(ListenError::NoAddress { listen: listen.to_string(), host: host.clone() });
            }
            let mut listeners = Vec::new();
            let mut skipped = Vec::new();
            for addr in &addrs {
                match bind(*addr, false) {
                    Ok(l) => listeners.push(l),
                    // `localhost` names ::1 too on a node without IPv6.
                    Err(e)
                        if addr.is_ipv6()
                            && matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)) =>
                    {
                        skipped.push(format!("{addr} ({e})"));
                    }
                    Err(error) => return Err(ListenError::Bind { addr: *addr, error }),
                }
            }
            if listeners.is_empty() {
                return Err(ListenError::NoAddress { listen: listen.to_string(), host: host.clone() });
            }
            let bound: Vec<String> =
                listeners.iter().filter_map(|l| l.local_addr().ok()).map(|a| a.to_string()).collect();
            let mut note = format!("{host} resolves to {}", bound.join(", "));
            if !skipped.is_empty() {
                note.push_str(&format!("; not listening on {}", skipped.join(", ")));
            }
            Ok(Bound { listeners, note: Some(note) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Listen, String> {
        s.parse()
    }

    #[test]
    fn exporter_forms_are_accepted() {
        assert_eq!(parse("[::]:9974"), Ok(Listen::Any(9974)));
        assert_eq!(parse(":9974"), Ok(Listen::Any(9974)));
        assert_eq!(parse("0.0.0.0:9974"), Ok(Listen::Addr("0.0.0.0:9974".parse().unwrap())));
        assert_eq!(parse("127.0.0.1:1"), Ok(Listen::Addr("127.0.0.1:1".parse().unwrap())));
        assert_eq!(parse("[::1]:9974"), Ok(Listen::Addr("[::1]:9974".parse().unwrap())));
        assert_eq!(parse("localhost:9974"), Ok(Listen::Host("localhost".into(), 9974)));
        assert_eq!(parse("node-1.example:80"), Ok(Listen::Host("node-1.example".into(), 80)));
    }

    #[test]
    fn malformed_addresses_say_what_is_wrong() {
        assert!(parse("9974").unwrap_err().contains("no port"));
        assert!(parse("localhost:http").unwrap_err().contains("not a port number"));
        assert!(parse("localhost:70000").unwrap_err().contains("not a port number"));
        assert!(parse("::1:9974").unwrap_err().contains("in brackets"));
        assert!(parse("bad host:9974").unwrap_err().contains("neither an IP address nor a host name"));
        assert!(parse("-x:9974").unwrap_err().contains("neither"));
    }

    #[test]
    fn every_address_is_served_by_one_dual_stack_socket() {
        let bound = listen(&Listen::Any(0)).unwrap();
        assert_eq!(bound.listeners.len(), 1);
        let addr = bound.listeners[0].local_addr().unwrap();
        if addr.is_ipv6() {
            // IPv4 clients reach it too, whatever net.ipv6.bindv6only says.
            std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, addr.port())).unwrap();
            std::net::TcpStream::connect((Ipv6Addr::LOCALHOST, addr.port())).unwrap();
        } else {
            assert!(bound.note.unwrap().contains("IPv4 only"));
        }
    }
}
