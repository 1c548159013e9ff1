//! Networking for the tests' own hosts: a network namespace's loopback
//! brought up, the one interface the traffic probes and the guests need.

use std::io;

/// Brings `lo` of the current network namespace up (`ip link set lo up`).
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments; the fd is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&sock);
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifr_flags of `req`,
    // which lives across the call.
    if unsafe { libc::ioctl(raw, libc::SIOCGIFFLAGS as _, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the flags member of the union, just written by the kernel.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req` during the call.
    if unsafe { libc::ioctl(raw, libc::SIOCSIFFLAGS as _, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Two network namespaces this test made, joined by a veth pair: `node`
/// (10.77.0.1/24 on its end, and loopback) where a daemon runs as on a
/// node, and `pod` (10.77.0.2/24), a client at an address that is not the
/// node's, as Prometheus scrapes from its pod. Deleted on drop, the veth
/// with them; nothing of the host's network changes.
pub struct NetPair {
    pub node: std::path::PathBuf,
    pub pod: std::path::PathBuf,
    names: [String; 2],
}

pub const NODE_IP: [u8; 4] = [10, 77, 0, 1];
pub const POD_IP: [u8; 4] = [10, 77, 0, 2];

impl NetPair {
    pub fn new(tag: &str) -> NetPair {
        let n = format!("cgaudit-{tag}-{}-n", std::process::id());
        let p = format!("cgaudit-{tag}-{}-p", std::process::id());
        let ip = |args: &[&str]| {
            let out = std::process::Command::new("ip").args(args).output().expect("run ip");
            assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        ip(&["netns", "add", &n]);
        let pair = NetPair {
            node: std::path::PathBuf::from("/run/netns").join(&n),
            pod: std::path::PathBuf::from("/run/netns").join(&p),
            names: [n.clone(), p.clone()],
        };
        ip(&["netns", "add", &p]);
        ip(&["link", "add", "va", "netns", &n, "type", "veth", "peer", "name", "vb", "netns", &p]);
        ip(&["-n", &n, "addr", "add", "10.77.0.1/24", "dev", "va"]);
        ip(&["-n", &p, "addr", "add", "10.77.0.2/24", "dev", "vb"]);
        for (ns, dev) in [(&n, "va"), (&p, "vb"), (&n, "lo"), (&p, "lo")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        pair
    }

    /// Runs `f` on a thread of its own in network namespace `ns` (one of
    /// this pair's paths).
    pub fn run_in<T: Send + 'static>(ns: &std::path::Path, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = ns.to_owned();
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&ns).unwrap_or_else(|e| panic!("open {}: {e}", ns.display()));
            nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns into the test's netns");
            f()
        })
        .join()
        .expect("the thread in the test's netns panicked")
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = std::process::Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}
