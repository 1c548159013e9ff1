//! Pods' second layer of coverage, made for real: pods whose network a CNI
//! plugin made (`Containerd::start_with_pod_network`, on the host), or, in
//! the kernel-matrix guests, pods whose veth pair the test makes as `ptp`
//! makes it (`VethPod`); a stand-in CNI agent that attaches its
//! per-endpoint program to their host-side veths as Cilium's loader does;
//! and traffic from inside the pods.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

#[cfg(feature = "cri")]
use crate::cri::{Containerd, Pod};
use crate::spawn::fixture_bin;

/// `fixture endpoint-agent` on the node's network, named as Cilium's agent
/// is: attaches `cil_from_container` to the interfaces it is told, by tc,
/// tcx or netkit, as Cilium's loader does: its maps and links pinned in the
/// node's bpffs (`tc/globals`, `cilium/endpoints/<id>/links/`), no fd kept.
/// Its programs stay when it is killed, as a real agent's do; on drop its
/// pins are removed first (the links go with them), and tc filters go with
/// their interface.
pub struct EndpointAgent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Ended, its programs left behind on purpose.
    left: bool,
}

impl EndpointAgent {
    /// On `node`'s network (a hostNetwork process of the node).
    #[cfg(feature = "cri")]
    pub fn start(node: &Containerd) -> EndpointAgent {
        Self::spawn(node.node.command_on_network(&fixture_bin(), &["endpoint-agent", "cilium-agent"]))
    }

    /// As `start`, its command line saying `--config-dir config_dir` (a
    /// path of the node's), where the audit reads its configuration.
    #[cfg(feature = "cri")]
    pub fn start_configured(node: &Containerd, config_dir: &str) -> EndpointAgent {
        Self::spawn(
            node.node
                .command_on_network(&fixture_bin(), &["endpoint-agent", "cilium-agent", "--config-dir", config_dir]),
        )
    }

    /// On `node`'s network, named `comm` (another CNI's agent: `calico-node`).
    #[cfg(feature = "cri")]
    pub fn start_named(node: &Containerd, comm: &str) -> EndpointAgent {
        Self::spawn(node.node.command_on_network(&fixture_bin(), &["endpoint-agent", comm]))
    }

    /// On a sandbox node's network and in its mount namespace (its own
    /// bpffs), named as Cilium's agent is.
    pub fn start_in(node: &crate::sandbox::Sandbox) -> EndpointAgent {
        Self::spawn(node.command_on_network(&fixture_bin(), &["endpoint-agent", "cilium-agent"]))
    }

    /// In this process's namespaces (a guest's: the node's own).
    pub fn start_here() -> EndpointAgent {
        let mut c = Command::new(fixture_bin());
        c.args(["endpoint-agent", "cilium-agent"]);
        Self::spawn(c)
    }

    fn spawn(mut command: Command) -> EndpointAgent {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn the endpoint agent");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the endpoint agent");
        assert_eq!(line.trim(), "ready", "endpoint agent: {line:?}");
        EndpointAgent { child, stdin, stdout, left: false }
    }

    /// Attaches a program of its own for this endpoint to `ifname`'s
    /// ingress, `how`: `tc`, or `tcx` (tc where the kernel has no tcx), or
    /// to a netkit primary's peer (`netkit`); returns how it did and the
    /// program's id.
    pub fn attach(&mut self, how: &str, ifname: &str) -> (String, u32) {
        writeln!(self.stdin, "{how} {ifname}").expect("tell the endpoint agent");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the endpoint agent");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["attached", used, name, id] if *name == ifname => (used.to_string(), id.parse().expect("a program id")),
            _ => panic!("the endpoint agent could not attach: {line:?}"),
        }
    }

    /// Attaches a native device's two programs as Cilium's loader does:
    /// by tcx (`tc: None`), or by legacy tc filters at a priority; their
    /// ids, ingress first.
    pub fn netdev(&mut self, dev: &str, tc: Option<u16>) -> (u32, u32) {
        match tc {
            Some(prio) => writeln!(self.stdin, "netdev-tc {dev} {prio}"),
            None => writeln!(self.stdin, "netdev {dev}"),
        }
        .expect("tell the endpoint agent");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the endpoint agent");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["attached", _, name, a, b] if *name == dev => (a.parse().expect("an id"), b.parse().expect("an id")),
            _ => panic!("the endpoint agent could not attach to {dev}: {line:?}"),
        }
    }

    /// Ends the agent as a pod deleted without cleanup ends: its programs
    /// and pins stay (the test's node takes them with it).
    pub fn exit_leaving_programs(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.left = true;
    }

    /// Unloads the endpoint on `ifname` as Cilium's `Unload` does: its
    /// links' pins removed (a tcx or netkit program leaves the interface).
    pub fn detach(&mut self, ifname: &str) {
        writeln!(self.stdin, "detach {ifname}").expect("tell the endpoint agent");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the endpoint agent");
        assert_eq!(line.trim(), format!("detached {ifname}"));
    }
}

impl Drop for EndpointAgent {
    fn drop(&mut self) {
        // Its pins, which would outlive it (in a guest's own bpffs).
        if !self.left && writeln!(self.stdin, "clean").is_ok() {
            let mut line = String::new();
            let _ = self.stdout.read_line(&mut line);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `fixture policy-agent` on a node's network, named as the AWS network
/// policy agent is (`controller`): pins each pod's `handle_ingress` and
/// `handle_egress` and their maps under `globals/aws/` and attaches them
/// by `FilterAdd` at priority 1, handle 1, keeping no fd, as its loader
/// does. On drop its pins are removed (its filters go with the pods'
/// interfaces).
pub struct PolicyAgent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// What `PolicyAgent::attach` did on one program: its id, and whether its
/// filter was added (`false`: one was there, and stayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyProgram {
    pub prog_id: u32,
    pub added: bool,
}

impl PolicyAgent {
    #[cfg(feature = "cri")]
    pub fn start(node: &Containerd) -> PolicyAgent {
        let mut command = node.node.command_on_network(&fixture_bin(), &["policy-agent"]);
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("spawn the policy agent");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the policy agent");
        assert_eq!(line.trim(), "ready", "policy agent: {line:?}");
        PolicyAgent { child, stdin, stdout }
    }

    /// Loads, pins and attaches pod `pod` of `namespace`'s programs on its
    /// host-side interface `ifname`: `handle_ingress`, then `handle_egress`.
    pub fn attach(&mut self, ifname: &str, pod: &str, namespace: &str) -> [PolicyProgram; 2] {
        writeln!(self.stdin, "attach {ifname} {pod} {namespace}").expect("tell the policy agent");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the policy agent");
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["attached", name, "handle_ingress", i, ia, "handle_egress", e, ea] if *name == ifname => [
                PolicyProgram { prog_id: i.parse().expect("an id"), added: *ia == "added" },
                PolicyProgram { prog_id: e.parse().expect("an id"), added: *ea == "added" },
            ],
            _ => panic!("the policy agent could not attach: {line:?}"),
        }
    }

    /// Ends it as aws-node's container is ended: its pins and filters stay.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Drop runs too: nothing answers "clean" any more.
    }
}

impl Drop for PolicyAgent {
    fn drop(&mut self) {
        if writeln!(self.stdin, "clean").is_ok() {
            let mut line = String::new();
            let _ = self.stdout.read_line(&mut line);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(feature = "cri")]
/// A tool (`ip`, `tc`) run in the node's network namespace; its output.
pub fn on_node_network(node: &Containerd, tool: &str, args: &[&str]) -> String {
    let program = crate::which(tool).unwrap_or_else(|| panic!("{tool} not found"));
    let out = node.node.command_on_network(&program, args).output().expect("run on the node");
    assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(feature = "cri")]
/// The host side of `pod`'s veth: the interface the node routes its
/// address through (`ptp` adds that route).
pub fn host_veth(node: &Containerd, pod: &Pod) -> String {
    let ip = node.pod_ip(pod);
    let route = on_node_network(node, "ip", &["-o", "route", "get", &ip]);
    let dev = route.split_whitespace().skip_while(|w| *w != "dev").nth(1);
    dev.unwrap_or_else(|| panic!("no route to {ip}: {route}")).to_owned()
}

#[cfg(feature = "cri")]
/// `pod`'s pause process (its sandbox's, in the network namespace the CNI
/// made), as this machine's pid.
pub fn pod_pid(node: &Containerd, pod: &Pod) -> u32 {
    let in_node = node.sandbox_pid(pod);
    // The node's PID namespace is its own: find the process by its pid there.
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else { continue };
        let nspid =
            status.lines().find_map(|l| l.strip_prefix("NSpid:")).map(|l| l.split_whitespace().collect::<Vec<_>>());
        if let Some(ids) = nspid
            && ids.len() >= 2
            // This machine's pid, the node's, and the pod's own, if any.
            && ids[1] == in_node.to_string()
            && std::fs::read_to_string(e.path().join("cgroup")).is_ok_and(|c| c.contains(&pod.uid))
        {
            return ids[0].parse().expect("a pid");
        }
    }
    panic!("no pause process of pod {} (pid {in_node} in the node)", pod.name)
}

/// Sends `n` UDP datagrams from inside `pid`'s network namespace to `to`
/// (port 9, discard), from a thread that joins it.
pub fn send_from(pid: u32, to: &str, n: usize) {
    send_from_ns(std::path::Path::new(&format!("/proc/{pid}/ns/net")), to, n);
}

/// Sends `n` UDP datagrams from inside the network namespace at `netns` to
/// `to` (port 9, discard), from a thread that joins it.
pub fn send_from_ns(netns: &std::path::Path, to: &str, n: usize) {
    let ns = std::fs::File::open(netns).unwrap_or_else(|e| panic!("open {}: {e}", netns.display()));
    let pid = netns.display();
    let to = format!("{to}:9");
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns into the pod");
            let sock = std::net::UdpSocket::bind("0.0.0.0:0").expect("bind");
            for _ in 0..n {
                // Sent, or the pod has no route there: never silently none.
                sock.send_to(b"cgaudit", &to).unwrap_or_else(|e| panic!("send to {to} from {pid}: {e}"));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
        .join()
        .expect("the sending thread");
    });
}

/// How many times program `id` ran while run statistics were on.
pub fn run_count(id: u32) -> u64 {
    let fd = agent::bpf::sys::prog_fd_by_id(id).expect("the program");
    agent::bpf::sys::prog_info(fd.as_fd()).expect("its info").run_cnt
}

/// Sends one rtnetlink request from this thread's network namespace and
/// waits for its ack; the kernel's error, if any.
pub fn rtnl(msg: netlink_packet_route::RouteNetlinkMessage, flags: u16) -> std::io::Result<()> {
    use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(msg));
    packet.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    packet.header.sequence_number = 1;
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let (bytes, _) = socket.recv_from_full()?;
    let answer: NetlinkMessage<netlink_packet_route::RouteNetlinkMessage> =
        NetlinkMessage::deserialize(&bytes).map_err(std::io::Error::other)?;
    match answer.payload {
        NetlinkPayload::Error(e) => match e.code {
            Some(code) => Err(std::io::Error::from_raw_os_error(-code.get())),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The id the namespace of `ifname`'s other end has in this one
/// (`IFLA_LINK_NETNSID` of a veth), if it has one.
pub fn link_netnsid(ifname: &str) -> std::io::Result<i32> {
    use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{LinkAttribute, LinkMessage};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut get = LinkMessage::default();
    get.attributes.push(LinkAttribute::IfName(ifname.into()));
    let mut packet =
        NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(RouteNetlinkMessage::GetLink(get)));
    packet.header.flags = NLM_F_REQUEST;
    packet.header.sequence_number = 1;
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let (bytes, _) = socket.recv_from_full()?;
    let answer: NetlinkMessage<RouteNetlinkMessage> =
        NetlinkMessage::deserialize(&bytes).map_err(std::io::Error::other)?;
    match answer.payload {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => l
            .attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::LinkNetNsId(id) => Some(*id),
                _ => None,
            })
            .ok_or_else(|| std::io::Error::other(format!("{ifname} has no other end in another namespace"))),
        NetlinkPayload::Error(e) => Err(std::io::Error::from_raw_os_error(e.code.map_or(0, |c| -c.get()))),
        _ => Err(std::io::Error::other("no answer")),
    }
}

/// A pod as the `ptp` CNI plugin makes one, for the kernel-matrix guests
/// (no containerd there): a process (`fixture netns-pause`) in a network
/// namespace of its own and in the pod's cgroup, and a veth pair, `host`
/// in this namespace and `eth0` in the pod's, with 10.99.N.1/24 and
/// 10.99.N.2/24, both up. The pair goes with the pod's namespace when its
/// process is killed (on drop: its namespace goes with its last process).
/// Or (`netkit`) a netkit pair as Cilium makes one in its netkit mode: the
/// primary in this namespace, the peer `eth0` in the pod's, layer 3, the
/// peer's traffic dropped while no program is there (blackhole).
pub struct VethPod {
    _process: NetnsProcess,
    /// The host-side interface.
    pub host: String,
    /// The host side's address: where the pod's packets go.
    pub gateway: String,
    pub pid: u32,
}

/// A process in a network namespace of its own, in `cgroup`; killed on
/// drop.
pub struct NetnsProcess(Child);

impl Drop for NetnsProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl VethPod {
    /// A process (`fixture netns-pause`) in a network namespace of its own,
    /// moved into `cgroup`.
    pub fn process_in_own_netns(cgroup: &std::path::Path) -> NetnsProcess {
        let mut child = Command::new(fixture_bin())
            .arg("netns-pause")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a pod's process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read it");
        assert_eq!(line.trim(), "ready", "the pod's process has no network namespace of its own");
        std::fs::write(cgroup.join("cgroup.procs"), child.id().to_string()).expect("move the pod's process in");
        NetnsProcess(child)
    }

    pub fn new(cgroup: &std::path::Path, n: u8) -> VethPod {
        Self::make(cgroup, n, false).unwrap_or_else(|e| panic!("make a veth pair: {e}"))
    }

    /// A pod whose pair is netkit's; the error if the kernel makes none
    /// (`EOPNOTSUPP` before 6.7, or without `CONFIG_NETKIT`).
    pub fn netkit(cgroup: &std::path::Path, n: u8) -> std::io::Result<VethPod> {
        Self::make(cgroup, n, true)
    }

    fn make(cgroup: &std::path::Path, n: u8, netkit: bool) -> std::io::Result<VethPod> {
        use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
        use netlink_packet_route::RouteNetlinkMessage as M;
        use netlink_packet_route::link::{
            InfoData, InfoKind, InfoNetkit, InfoVeth, LinkAttribute, LinkInfo, LinkMessage, NetkitMode, NetkitPolicy,
        };
        let process = Self::process_in_own_netns(cgroup);
        let pid = process.0.id();
        let host = format!(
            "{}{:08x}",
            if netkit { "nk" } else { "veth" },
            (std::process::id() << 8) ^ u32::from(n) ^ 0x5eed_0000
        );
        let mut peer = LinkMessage::default();
        peer.attributes.push(LinkAttribute::IfName("eth0".into()));
        peer.attributes.push(LinkAttribute::NetNsPid(pid));
        let mut link = LinkMessage::default();
        link.attributes.push(LinkAttribute::IfName(host.clone()));
        link.attributes.push(LinkAttribute::LinkInfo(if netkit {
            vec![
                LinkInfo::Kind(InfoKind::Netkit),
                // As Cilium's connector makes them: the peer's traffic is
                // dropped while no program is there (`PeerPolicy: BLACKHOLE`).
                LinkInfo::Data(InfoData::Netkit(vec![
                    InfoNetkit::Mode(NetkitMode::L3),
                    InfoNetkit::Policy(NetkitPolicy::Pass),
                    InfoNetkit::PeerPolicy(NetkitPolicy::Drop),
                    InfoNetkit::Peer(peer),
                ])),
            ]
        } else {
            vec![LinkInfo::Kind(InfoKind::Veth), LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer)))]
        }));
        rtnl(M::NewLink(link), NLM_F_CREATE | NLM_F_EXCL)?;
        let pod = VethPod { _process: process, host: host.clone(), gateway: format!("10.99.{n}.1"), pid };
        let index = nix::net::if_::if_nametoindex(host.as_str()).expect("the host side");
        up_with_address(index, [10, 99, n, 1]);
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).expect("the pod's netns");
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns into the pod");
                up_with_address(nix::net::if_::if_nametoindex("lo").expect("lo"), [127, 0, 0, 1]);
                up_with_address(nix::net::if_::if_nametoindex("eth0").expect("eth0"), [10, 99, n, 2]);
            })
            .join()
            .expect("the pod's side");
        });
        Ok(pod)
    }
}

/// Brings interface `index` up with `addr`/24 (lo: /8) on it.
fn up_with_address(index: u32, addr: [u8; 4]) {
    use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
    use netlink_packet_route::RouteNetlinkMessage as M;
    use netlink_packet_route::address::{AddressAttribute, AddressMessage};
    use netlink_packet_route::link::{LinkFlags, LinkMessage};
    let ip = std::net::IpAddr::from(addr);
    let mut a = AddressMessage::default();
    a.header.family = netlink_packet_route::AddressFamily::Inet;
    a.header.prefix_len = if addr[0] == 127 { 8 } else { 24 };
    a.header.index = index;
    a.attributes.push(AddressAttribute::Local(ip));
    a.attributes.push(AddressAttribute::Address(ip));
    rtnl(M::NewAddress(a), NLM_F_CREATE | NLM_F_REPLACE).unwrap_or_else(|e| panic!("address {ip}: {e}"));
    let mut l = LinkMessage::default();
    l.header.index = index;
    l.header.flags = LinkFlags::Up;
    l.header.change_mask = LinkFlags::Up;
    rtnl(M::SetLink(l), 0).unwrap_or_else(|e| panic!("set {index} up: {e}"));
}

/// A direct-action cls_bpf filter as Cilium's `upsertTCProgram` makes it:
/// on the clsact qdisc of interface `ifindex` (made if missing; `parent`:
/// 0xfff2 ingress, 0xfff3 egress), handle 1, every protocol, named
/// `<program>-<interface>`, replacing what is at that priority only.
pub fn tc_filter(ifindex: u32, ifname: &str, prog: std::os::fd::BorrowedFd<'_>, name: &str, parent: u16, prio: u16) {
    use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
    tc_filter_with(ifindex, prog, &format!("{name}-{ifname}"), parent, prio, NLM_F_CREATE | NLM_F_REPLACE)
        .unwrap_or_else(|e| panic!("{name} filter on {ifname}: {e}"));
}

/// A clsact qdisc on interface `ifindex` (made if missing) and a
/// direct-action cls_bpf filter on its `parent` (0xfff2 ingress, 0xfff3
/// egress), handle 1, every protocol, named `filter_name`, at `prio`, sent
/// with `flags` (`NLM_F_CREATE | NLM_F_REPLACE` as Cilium's loader,
/// `NLM_F_CREATE | NLM_F_EXCL` as netlink's `FilterAdd`); the kernel's answer.
pub fn tc_filter_with(
    ifindex: u32,
    prog: std::os::fd::BorrowedFd<'_>,
    filter_name: &str,
    parent: u16,
    prio: u16,
    flags: u16,
) -> std::io::Result<()> {
    use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::tc::{TcAttribute, TcBpfFlags, TcFilterBpfOption, TcHandle, TcMessage, TcOption};
    use std::os::fd::AsRawFd;
    let mut qdisc = TcMessage::default();
    qdisc.header.index = ifindex as i32;
    qdisc.header.handle = TcHandle { major: 0xffff, minor: 0 };
    qdisc.header.parent = TcHandle { major: 0xffff, minor: 0xfff1 };
    qdisc.attributes.push(TcAttribute::Kind("clsact".into()));
    // EEXIST: there from a first attach.
    let _ = rtnl(RouteNetlinkMessage::NewQueueDiscipline(qdisc), NLM_F_CREATE | NLM_F_EXCL);
    let mut filter = TcMessage::default();
    filter.header.index = ifindex as i32;
    filter.header.handle = TcHandle { major: 0, minor: 1 };
    filter.header.parent = TcHandle { major: 0xffff, minor: parent };
    filter.header.info = (u32::from(prio) << 16) | u32::from(0x0003u16.to_be());
    filter.attributes.push(TcAttribute::Kind("bpf".into()));
    filter.attributes.push(TcAttribute::Options(vec![
        TcOption::Bpf(TcFilterBpfOption::ProgFd(prog.as_raw_fd() as u32)),
        TcOption::Bpf(TcFilterBpfOption::ProgName(filter_name.to_owned())),
        TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
    ]));
    rtnl(RouteNetlinkMessage::NewTrafficFilter(filter), flags)
}
