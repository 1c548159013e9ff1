//! Socket load balancing for real, as a CNI does it, and a probe of what
//! the traffic does: the suite's coverage assertions are checked against
//! connections, not only against attachments.
//!
//! The programs rewrite a Service VIP to a backend on loopback, the way
//! Cilium's socket LB rewrites a ClusterIP to a pod IP: `connect4/6` and
//! `sendmsg4/6` turn `VIP:PORT` into `BACKEND:PORT`; `recvmsg4/6` and
//! `getpeername4/6` turn the backend back into the VIP, so the client sees
//! the address it asked for. They carry Cilium's names, so the agent takes
//! them for Cilium's. `post_bind4/6` are allowed-all, as in `bpf.rs`.
//!
//! The probe (`fixture probe <CGROUP>`, which `probe` runs) joins a
//! cgroup, enters a network namespace of its own with only loopback up,
//! listens on the backend, and connects to the VIP. Without a program in
//! effect the VIP is unreachable there (ENETUNREACH at once): nothing ever
//! leaves the namespace.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

use agent::bpf::AttachType;

use crate::bpf::{Prog, prog_type_for};
use crate::spawn::fixture_bin;

/// The Service: a ClusterIP (and its IPv6 twin) and port.
pub const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
pub const VIP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x10);
pub const PORT: u16 = 8080;
/// Its one backend, on loopback.
pub const BACKEND: Ipv4Addr = Ipv4Addr::LOCALHOST;
pub const BACKEND6: Ipv6Addr = Ipv6Addr::LOCALHOST;

/// `struct bpf_sock_addr`: `user_ip4`, `user_ip6[4]`, `user_port`.
const USER_IP4: i16 = 4;
const USER_IP6: i16 = 8;
const USER_PORT: i16 = 24;

/// One `struct bpf_insn` as the kernel reads it.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64 | ((dst | src << 4) as u64) << 8 | (off as u16 as u64) << 16 | (imm as u32 as u64) << 32
}

/// An address word as a 4-byte load of `struct bpf_sock_addr` reads it
/// (network byte order in memory, loaded little-endian).
fn word(bytes: [u8; 4]) -> i32 {
    i32::from_le_bytes(bytes)
}

/// `user_port` as loaded: the port in network byte order, low 16 bits.
fn port_word(port: u16) -> i32 {
    word([(port >> 8) as u8, port as u8, 0, 0])
}

/// A program that, when the address (at `at`, `from.len()` words) and the
/// port are `from` and `PORT`, writes `to` over the address; it always
/// allows the call.
fn rewrite(at: i16, from: &[i32], to: &[i32]) -> Vec<u64> {
    const LDXW: u8 = 0x61; // r_dst = *(u32 *)(r_src + off)
    const JNE32: u8 = 0x56; // if w_dst != imm goto +off
    const MOV: u8 = 0xb7; // r_dst = imm
    const STXW: u8 = 0x63; // *(u32 *)(r_dst + off) = r_src
    const EXIT: u8 = 0x95;
    let compares = from.len() + 1;
    let writes = to.len() * 2;
    let mut p = Vec::new();
    for (i, &w) in from.iter().chain(std::iter::once(&port_word(PORT))).enumerate() {
        let off = if i < from.len() { at + 4 * i as i16 } else { USER_PORT };
        p.push(insn(LDXW, 2, 1, off, 0));
        // To the `r0 = 1` after the remaining compares and the writes.
        let skip = 2 * (compares - i - 1) + writes;
        p.push(insn(JNE32, 2, 0, skip as i16, w));
    }
    for (i, &w) in to.iter().enumerate() {
        p.push(insn(MOV, 3, 0, 0, w));
        p.push(insn(STXW, 1, 3, at + 4 * i as i16, 0));
    }
    p.push(insn(MOV, 0, 0, 0, 1));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

fn words6(a: Ipv6Addr) -> Vec<i32> {
    a.octets().chunks(4).map(|c| word([c[0], c[1], c[2], c[3]])).collect()
}

/// The instructions of the program for `hook`.
fn program(hook: &str) -> Vec<u64> {
    let (vip, backend) = (vec![word(VIP.octets())], vec![word(BACKEND.octets())]);
    let (vip6, backend6) = (words6(VIP6), words6(BACKEND6));
    match hook {
        "connect4" | "sendmsg4" => rewrite(USER_IP4, &vip, &backend),
        "recvmsg4" | "getpeername4" => rewrite(USER_IP4, &backend, &vip),
        "connect6" | "sendmsg6" => rewrite(USER_IP6, &vip6, &backend6),
        "recvmsg6" | "getpeername6" => rewrite(USER_IP6, &backend6, &vip6),
        // r0 = 1; exit
        _ => vec![0xb7 | 1 << 32, 0x95],
    }
}

/// Loads a socket-LB program that really load-balances, under `name`.
pub fn load_lb(name: &str, hook: &str) -> Prog {
    let at = AttachType::from_name(hook).unwrap_or_else(|| panic!("unknown hook {hook}"));
    Prog::load_insns(name, prog_type_for(hook), at, &program(hook))
}

/// Cilium's ten socket-LB programs, each doing what its hook does in a
/// real socket LB (see the module's doc).
pub fn load_socket_lb() -> Vec<Prog> {
    crate::bpf::CILIUM_SOCKET_LB.iter().map(|(n, h)| load_lb(n, h)).collect()
}

/// What a connection to the Service did, from one cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Traffic {
    /// A TCP connect to VIP:PORT reached the backend (connect4).
    pub tcp: bool,
    /// ... and getpeername named the VIP, not the backend (getpeername4).
    pub tcp_peer_is_vip: bool,
    /// A UDP datagram to VIP:PORT reached the backend (sendmsg4).
    pub udp: bool,
    /// ... and the reply came from the VIP (recvmsg4).
    pub udp_reply_from_vip: bool,
    /// A TCP connect to [VIP6]:PORT reached the backend (connect6).
    pub tcp6: bool,
}

impl Traffic {
    /// Everything translated, as with a working socket LB.
    pub const ALL: Traffic =
        Traffic { tcp: true, tcp_peer_is_vip: true, udp: true, udp_reply_from_vip: true, tcp6: true };
    /// Nothing translated: the Service is unreachable.
    pub const NONE: Traffic =
        Traffic { tcp: false, tcp_peer_is_vip: false, udp: false, udp_reply_from_vip: false, tcp6: false };

    /// Only connect4 (the TCP connect): what a connect4-only program gives.
    pub fn translated(self) -> bool {
        self.tcp
    }
}

/// Runs the probe from `cgroup` (a cgroup2 directory): a process placed
/// there, in a network namespace of its own.
pub fn probe(cgroup: &Path) -> Traffic {
    let out = Command::new(fixture_bin()).arg("probe").arg(cgroup).output().expect("run fixture probe");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the probe failed in {}: {}{text}",
        cgroup.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("probe output {text:?}: {e}"))
}

/// The probe itself (`fixture probe`): in `cgroup`, in a new network
/// namespace, tries the Service four ways. Prints one JSON `Traffic`.
pub fn run_probe(cgroup: &Path) -> Traffic {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
    use std::time::Duration;

    std::fs::write(cgroup.join("cgroup.procs"), std::process::id().to_string())
        .unwrap_or_else(|e| panic!("join {}: {e}", cgroup.display()));
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare the network namespace");
    crate::net::loopback_up().expect("lo up");
    let wait = Some(Duration::from_secs(1));

    let tcp_to = |backend: SocketAddr, vip: SocketAddr| -> (bool, bool) {
        let Ok(listener) = TcpListener::bind(backend) else { return (false, false) };
        let Ok(mut client) = TcpStream::connect_timeout(&vip, Duration::from_secs(1)) else { return (false, false) };
        let peer_is_vip = client.peer_addr().is_ok_and(|p| p == vip);
        let _ = client.write_all(b"ping");
        let reached = listener.accept().is_ok_and(|(mut s, _)| {
            let _ = s.set_read_timeout(wait);
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).is_ok() && &buf == b"ping"
        });
        (reached, peer_is_vip)
    };
    let (tcp, tcp_peer_is_vip) = tcp_to(SocketAddr::from((BACKEND, PORT)), SocketAddr::from((VIP, PORT)));
    let (tcp6, _) = tcp_to(SocketAddr::from((BACKEND6, PORT)), SocketAddr::from((VIP6, PORT)));

    let (mut udp, mut udp_reply_from_vip) = (false, false);
    if let (Ok(backend), Ok(client)) = (UdpSocket::bind((BACKEND, PORT)), UdpSocket::bind((BACKEND, 0))) {
        let _ = backend.set_read_timeout(wait);
        let _ = client.set_read_timeout(wait);
        if client.send_to(b"ping", (VIP, PORT)).is_ok() {
            let mut buf = [0u8; 4];
            if let Ok((4, from)) = backend.recv_from(&mut buf) {
                udp = &buf == b"ping";
                let _ = backend.send_to(b"pong", from);
                udp_reply_from_vip =
                    client.recv_from(&mut buf).is_ok_and(|(_, src)| src == SocketAddr::from((VIP, PORT)));
            }
        }
    }
    Traffic { tcp, tcp_peer_is_vip, udp, udp_reply_from_vip, tcp6 }
}

/// A process living in a cgroup (`fixture pause`), as a container's does,
/// so that the audit finds the cgroup holding processes; killed on drop.
pub struct Resident(std::process::Child);

impl Resident {
    pub fn new(cgroup: &Path) -> Resident {
        Resident::spawn(cgroup, &["pause"])
    }

    /// A resident whose process name (comm) is `comm`, as it chose.
    pub fn named(cgroup: &Path, comm: &str) -> Resident {
        let r = Resident::spawn(cgroup, &["named", comm]);
        let want: Vec<u8> = comm.bytes().take(15).collect();
        let named = crate::wait_until(std::time::Duration::from_secs(5), || {
            std::fs::read(format!("/proc/{}/comm", r.0.id())).is_ok_and(|c| c.strip_suffix(b"\n") == Some(&want[..]))
        });
        assert!(named, "fixture named {comm:?} did not take its name");
        r
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// `n` processes in `cgroup` (one resident and its children, who die
    /// with it).
    pub fn crowd(cgroup: &Path, n: usize) -> Resident {
        let mut child = Command::new(fixture_bin())
            .args(["crowd", &n.to_string()])
            .arg(cgroup)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn fixture crowd");
        let out = child.stdout.take().expect("stdout");
        let resident = Resident(child);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("read fixture crowd");
        assert_eq!(line.trim(), "ready", "fixture crowd {n}");
        resident
    }

    fn spawn(cgroup: &Path, args: &[&str]) -> Resident {
        let child = Command::new(fixture_bin())
            .args(args)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn fixture pause");
        let pid = child.id();
        let resident = Resident(child);
        std::fs::write(cgroup.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("move {pid} into {}: {e}", cgroup.display()));
        resident
    }
}

impl Drop for Resident {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What an audit says of each container's sockets, by hook: the hooks
/// `pods_without_socket_lb` names for it (none: covered). Every container
/// the report's pods list is there; containers of pods not listed are
/// covered.
pub fn uncovered_hooks(report: &serde_json::Value) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    let findings = report["findings"].as_array().expect("findings");
    for f in findings.iter().filter(|f| f["kind"] == "pods_without_socket_lb") {
        for pod in f["pods"].as_array().expect("pods") {
            for c in pod["containers"].as_array().expect("containers") {
                let hooks = c["hooks"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect();
                out.insert(c["cgroup"].as_str().unwrap().to_owned(), hooks);
            }
        }
    }
    out
}

/// Which part of the probe a hook's program makes work.
type Part = fn(&Traffic) -> bool;

/// The hooks each part of the probe depends on, and the part it needs to
/// have worked first (the peer of a connection that never reached the
/// backend, or a reply to a datagram it never got, says nothing).
const PROBED: [(&str, Part, Option<Part>); 5] = [
    ("connect4", |t| t.tcp, None),
    ("getpeername4", |t| t.tcp_peer_is_vip, Some(|t| t.tcp)),
    ("sendmsg4", |t| t.udp, None),
    ("recvmsg4", |t| t.udp_reply_from_vip, Some(|t| t.udp)),
    ("connect6", |t| t.tcp6, None),
];

/// Panics unless, for every container (`root` + its path relative to the
/// audited root), what the report says (`uncovered_hooks`) is what the
/// traffic from there does: a hook the report names as lacking is one whose
/// translation the probe sees fail, and the other way round.
pub fn assert_verdict_is_traffic(root: &Path, report: &serde_json::Value, containers: &[&str]) {
    let said = uncovered_hooks(report);
    for c in containers {
        let traffic = probe(&root.join(c.trim_start_matches('/')));
        let lacking = said.get(*c).cloned().unwrap_or_default();
        for (hook, translated, needs) in PROBED {
            if needs.is_some_and(|first| !first(&traffic)) {
                continue;
            }
            assert_eq!(
                !lacking.iter().any(|h| h == hook),
                translated(&traffic),
                "{c}: the report says {hook} is {}, the traffic says it is {} ({traffic:?}); report:\n{report:#}",
                if lacking.iter().any(|h| h == hook) { "not in effect" } else { "in effect" },
                if translated(&traffic) { "translated" } else { "not translated" },
            );
        }
    }
}
