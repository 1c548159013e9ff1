//! The one place cgaudit speaks rtnetlink: the host's links, the tc filters
//! of one of them, and the id a network namespace has in the host's. Only
//! reads (`RTM_GET*`): nothing is created or changed. `RTM_GETNSID` looks an
//! id up and never assigns one; the link dump describes a pair's other end
//! by its namespace's id, which the kernel assigns if it had none
//! (`rtnl_fill_link_netnsid`): a CNI's own set-up (creating, moving,
//! dumping the pair) has already assigned it for every pod, and the suite
//! checks that an audit assigns none (`ip netns list-id` before and after).
//!
//! A netlink socket belongs to the network namespace of the thread that
//! made it, for life. `iface::read` makes this one on a thread of its own
//! that joined PID 1's network namespace (the agent's pod has a network of
//! its own); the main thread never joins any.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoNetkit, LinkAttribute, LinkInfo, LinkMessage, LinkXdp, NetkitPolicy, XdpAttached,
};
use netlink_packet_route::nsid::{NsidAttribute, NsidMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::cls_bpf::{self, Filter};

/// The longest one answer may take (the kernel answers under RTNL, which a
/// busy node's CNI holds while it makes pods).
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// The most messages one answer is read for (a hook's tc filters, one
/// link): past this it is not believed.
const ANSWERS_MAX: usize = 4096;

/// What went wrong, naming the request.
#[derive(Debug, thiserror::Error)]
#[error("netlink {request}: {error}")]
pub struct NetlinkError {
    pub request: &'static str,
    pub error: String,
    /// The kernel's errno, when it answered with one.
    pub errno: Option<i32>,
}

fn err(request: &'static str, error: impl std::fmt::Display) -> NetlinkError {
    NetlinkError { request, error: error.to_string(), errno: None }
}

fn errno(request: &'static str, code: i32) -> NetlinkError {
    NetlinkError { request, error: std::io::Error::from_raw_os_error(code).to_string(), errno: Some(code) }
}

/// A host interface, as the link dump describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    /// The driver (`IFLA_INFO_KIND`): `veth`, `netkit`, `bridge`, ...;
    /// empty for a device without one (a physical NIC, loopback).
    pub driver: String,
    /// For a pair whose other end is in another network namespace: that
    /// namespace's id here (`IFLA_LINK_NETNSID`).
    pub peer_nsid: Option<i32>,
    /// For a pair: the other end's interface index, in its own namespace
    /// (`IFLA_LINK`).
    pub peer_ifindex: Option<u32>,
    /// netkit: whether this is the pair's primary (its programs are read
    /// through the primary only).
    pub netkit_primary: Option<bool>,
    /// The XDP program attached, if any (`IFLA_XDP_PROG_ID`), and how.
    pub xdp_prog_id: Option<u32>,
    pub xdp_mode: Option<crate::snapshot::devices::XdpMode>,
    /// The device it is enslaved to (`IFLA_MASTER`: a bridge, a bond).
    pub master: Option<u32>,
    /// netkit: what its peer's transmit does with no program there
    /// (`IFLA_NETKIT_PEER_POLICY`): `forward` or `blackhole`.
    pub netkit_peer_policy: Option<&'static str>,
}

/// Where on an interface a tc filter sits: clsact's two hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    fn parent(self) -> TcHandle {
        // TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS | TC_H_MIN_EGRESS)
        TcHandle { major: 0xffff, minor: if self == Direction::Ingress { 0xfff2 } else { 0xfff3 } }
    }
}

/// An rtnetlink socket in the network namespace of the thread that made it.
pub struct HostNet {
    socket: Socket,
    seq: u32,
}

impl HostNet {
    /// A socket in the calling thread's network namespace.
    pub fn here() -> Result<HostNet, NetlinkError> {
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| err("socket", e))?;
        socket.bind_auto().map_err(|e| err("bind", e))?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(|e| err("connect", e))?;
        // Answers only to what was asked, and errors with the kernel's words.
        let _ = socket.set_netlink_get_strict_chk(true);
        let _ = socket.set_ext_ack(true);
        let timeout = nix::sys::time::TimeVal::new(ANSWER_WITHIN.as_secs() as i64, 0);
        nix::sys::socket::setsockopt(&socket.as_fd(), nix::sys::socket::sockopt::ReceiveTimeout, &timeout)
            .map_err(|e| err("SO_RCVTIMEO", e))?;
        Ok(HostNet { socket, seq: 0 })
    }

    /// The interface of this network namespace called `name` (`None`:
    /// there is none). One request, answered whole: no dump a churn of
    /// devices can interrupt.
    pub fn link_named(&mut self, name: &str) -> Result<Option<Link>, NetlinkError> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.to_owned()));
        self.one_link(m)
    }

    /// The interface of this network namespace at index `ifindex` (`None`:
    /// there is none), in one request.
    pub fn link_at(&mut self, ifindex: u32) -> Result<Option<Link>, NetlinkError> {
        let mut m = LinkMessage::default();
        m.header.index = ifindex;
        self.one_link(m)
    }

    fn one_link(&mut self, m: LinkMessage) -> Result<Option<Link>, NetlinkError> {
        match self.ask("RTM_GETLINK", RouteNetlinkMessage::GetLink(m), NLM_F_REQUEST) {
            Ok(a) if a.undecodable > 0 => Err(err("RTM_GETLINK", "the answer could not be decoded")),
            Ok(a) => Ok(a.messages.iter().find_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link(l)),
                _ => None,
            })),
            Err(e) if e.errno == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The tc filters on one hook of interface `ifindex` (none without a
    /// clsact qdisc: the dump is empty, nothing is made).
    pub fn filters(&mut self, ifindex: u32, dir: Direction) -> Result<Vec<Filter>, NetlinkError> {
        let mut m = TcMessage::default();
        m.header.index = ifindex as i32;
        m.header.parent = dir.parent();
        let answers = self.dump("RTM_GETTFILTER", RouteNetlinkMessage::GetTrafficFilter(m))?;
        if answers.undecodable > 0 {
            return Err(err("RTM_GETTFILTER", format!("{} filters could not be decoded", answers.undecodable)));
        }
        Ok(answers
            .messages
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewTrafficFilter(f) => Some(cls_bpf::filter(&f)),
                _ => None,
            })
            .filter(|f| *f != Filter::ChainHead)
            .collect())
    }

    /// The addresses of interface `ifindex` (a dump filtered by index, as
    /// strict checking allows; filtered again here).
    pub fn addresses(&mut self, ifindex: u32) -> Result<Vec<std::net::IpAddr>, NetlinkError> {
        use netlink_packet_route::address::{AddressAttribute, AddressMessage};
        let mut m = AddressMessage::default();
        m.header.index = ifindex;
        let answers = self.dump("RTM_GETADDR", RouteNetlinkMessage::GetAddress(m))?;
        Ok(answers
            .messages
            .iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) if a.header.index == ifindex => {
                    a.attributes.iter().find_map(|x| match x {
                        AddressAttribute::Address(ip) => Some(*ip),
                        _ => None,
                    })
                }
                _ => None,
            })
            .collect())
    }

    /// The interfaces of this namespace with a `clsact` or `ingress` qdisc:
    /// where legacy tc filters can be, in one dump (`max` qdiscs at most).
    pub fn filter_hooks(&mut self, max: usize) -> Result<std::collections::HashSet<u32>, NetlinkError> {
        let mut at = std::collections::HashSet::new();
        let undecodable = self.dump_each(
            "RTM_GETQDISC",
            RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
            max,
            &mut |m| match m {
                Some(RouteNetlinkMessage::NewQueueDiscipline(q)) => {
                    if q.attributes.iter().any(|a| matches!(a, TcAttribute::Kind(k) if k == "clsact" || k == "ingress"))
                    {
                        at.insert(q.header.index as u32);
                    }
                }
                Some(_) => {}
                None => at.clear(),
            },
        )?;
        if undecodable > 0 {
            return Err(err("RTM_GETQDISC", format!("{undecodable} qdiscs could not be decoded")));
        }
        Ok(at)
    }

    /// The id the network namespace `netns` (an open `/proc/<pid>/ns/net`)
    /// has in this one; `None` when it has none (no interface here leads
    /// there). A lookup: it assigns nothing.
    pub fn nsid(&mut self, netns: BorrowedFd<'_>) -> Result<Option<i32>, NetlinkError> {
        let mut m = NsidMessage::default();
        m.attributes.push(NsidAttribute::Fd(netns.as_raw_fd() as u32));
        let answers = self.ask("RTM_GETNSID", RouteNetlinkMessage::GetNsId(m), NLM_F_REQUEST)?;
        let id = answers.messages.iter().find_map(|a| match a {
            RouteNetlinkMessage::NewNsId(n) => n.attributes.iter().find_map(|a| match a {
                NsidAttribute::Id(id) => Some(*id),
                _ => None,
            }),
            _ => None,
        });
        // NETNSA_NSID_NOT_ASSIGNED
        Ok(id.filter(|&id| id >= 0))
    }

    fn dump(&mut self, request: &'static str, msg: RouteNetlinkMessage) -> Result<Answers, NetlinkError> {
        let mut messages = Vec::new();
        let undecodable = self.dump_each(request, msg, ANSWERS_MAX, &mut |m| match m {
            Some(m) => messages.push(m),
            None => messages.clear(),
        })?;
        Ok(Answers { messages, undecodable })
    }

    /// A dump, each answer handed to `each` as it comes, `max` at most. A
    /// dump the kernel says changed under it is read once more (`each` is
    /// first given `None`: what it was given is to be forgotten).
    fn dump_each(
        &mut self,
        request: &'static str,
        msg: RouteNetlinkMessage,
        max: usize,
        each: &mut dyn FnMut(Option<RouteNetlinkMessage>),
    ) -> Result<u64, NetlinkError> {
        let flags = NLM_F_REQUEST | NLM_F_DUMP;
        let answer = match self.ask_each(request, msg.clone(), flags, max, &mut |m| each(Some(m))) {
            Err(e) if e.error == INTERRUPTED => {
                each(None);
                self.ask_each(request, msg, flags, max, &mut |m| each(Some(m)))
            }
            other => other,
        };
        if answer.is_err() {
            // A dump given up on runs on in the kernel and makes this
            // socket busy for the next: a new one.
            if let Ok(fresh) = HostNet::here() {
                self.socket = fresh.socket;
            }
        }
        answer
    }

    /// Every interface of this network namespace, decoded as each arrives
    /// (`max` at most: past it the dump is not believed), and how many
    /// could not be decoded.
    pub fn links(&mut self, max: usize) -> Result<(Vec<Link>, u64), NetlinkError> {
        let mut links = Vec::new();
        let undecodable = self.dump_each(
            "RTM_GETLINK",
            RouteNetlinkMessage::GetLink(LinkMessage::default()),
            max,
            &mut |m| match m {
                Some(RouteNetlinkMessage::NewLink(l)) => links.push(link(&l)),
                Some(_) => {}
                None => links.clear(),
            },
        )?;
        Ok((links, undecodable))
    }

    /// Sends one request and reads its answers up to the dump's end or the
    /// kernel's error or ack. A message that cannot be decoded (a name that
    /// is not UTF-8: a device in this namespace can be made by a pod with
    /// CAP_NET_ADMIN, through the netns id its own namespace has for this
    /// one) is skipped and counted, never the whole answer lost.
    fn ask(&mut self, request: &'static str, msg: RouteNetlinkMessage, flags: u16) -> Result<Answers, NetlinkError> {
        let mut messages = Vec::new();
        let undecodable = self.ask_each(request, msg, flags, ANSWERS_MAX, &mut |m| messages.push(m))?;
        Ok(Answers { messages, undecodable })
    }

    /// `ask`, each answer handed to `each` as it is decoded (nothing of a
    /// long dump is held here), at most `max` of them: past that the
    /// answer is not believed. Returns how many could not be decoded.
    fn ask_each(
        &mut self,
        request: &'static str,
        msg: RouteNetlinkMessage,
        flags: u16,
        max: usize,
        each: &mut dyn FnMut(RouteNetlinkMessage),
    ) -> Result<u64, NetlinkError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut packet = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(msg));
        packet.header.flags = flags | if flags & NLM_F_DUMP == 0 { NLM_F_ACK } else { 0 };
        packet.header.sequence_number = seq;
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(|e| err(request, e))?;
        let (mut undecodable, mut answers) = (0u64, 0usize);
        let mut interrupted = false;
        loop {
            let bytes = self.receive().map_err(|e| err(request, e))?;
            let mut at = 0;
            while at + NLMSG_HDRLEN <= bytes.len() {
                let word = |i: usize| u32::from_ne_bytes(bytes[at + i..at + i + 4].try_into().expect("4 bytes"));
                let (len, msg_seq) = (word(0) as usize, word(8));
                let msg_flags = u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]);
                if len < NLMSG_HDRLEN || at + len > bytes.len() {
                    return Err(err(request, format!("a message of length {len} in {} bytes", bytes.len() - at)));
                }
                let this = &bytes[at..at + len];
                // NLMSG_ALIGN
                at += (len + 3) & !3;
                if msg_seq != seq {
                    continue; // an answer to an earlier request, given up on
                }
                interrupted |= msg_flags & NLM_F_DUMP_INTR != 0;
                let m: NetlinkMessage<RouteNetlinkMessage> = match NetlinkMessage::deserialize(this) {
                    Ok(m) => m,
                    Err(_) => {
                        undecodable += 1;
                        continue;
                    }
                };
                match m.payload {
                    NetlinkPayload::Done(d) if d.code < 0 => return Err(errno(request, -d.code)),
                    NetlinkPayload::Done(_) => {
                        return if interrupted { Err(err(request, INTERRUPTED)) } else { Ok(undecodable) };
                    }
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(undecodable),
                            Some(code) => Err(errno(request, -code.get())),
                        };
                    }
                    NetlinkPayload::InnerMessage(inner) => {
                        answers += 1;
                        if answers > max {
                            return Err(err(request, format!("more than {max} answers")));
                        }
                        each(inner);
                    }
                    _ => {}
                }
            }
        }
    }

    /// One datagram, whole: its size peeked first.
    fn receive(&self) -> std::io::Result<Vec<u8>> {
        let size = self.socket.recv(&mut Vec::new(), libc::MSG_PEEK | libc::MSG_TRUNC)?;
        let mut buf = Vec::with_capacity(size);
        let got = self.socket.recv(&mut buf, 0)?;
        buf.truncate(got.min(size));
        Ok(buf)
    }
}

/// What one request was answered, and how many of its messages could not
/// be decoded.
#[derive(Default)]
struct Answers {
    messages: Vec<RouteNetlinkMessage>,
    undecodable: u64,
}

const NLMSG_HDRLEN: usize = 16;

const INTERRUPTED: &str = "the dump was interrupted by a change (NLM_F_DUMP_INTR), twice";

fn link(l: &LinkMessage) -> Link {
    let mut out = Link {
        ifindex: l.header.index,
        name: String::new(),
        driver: String::new(),
        peer_nsid: None,
        peer_ifindex: None,
        netkit_primary: None,
        xdp_prog_id: None,
        xdp_mode: None,
        master: None,
        netkit_peer_policy: None,
    };
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => out.name = n.clone(),
            LinkAttribute::LinkNetNsId(id) => out.peer_nsid = Some(*id),
            LinkAttribute::Link(index) => out.peer_ifindex = Some(*index),
            LinkAttribute::Controller(index) => out.master = Some(*index),
            LinkAttribute::Xdp(x) => {
                use crate::snapshot::devices::XdpMode;
                out.xdp_prog_id = x.iter().find_map(|x| match x {
                    LinkXdp::ProgId(id) if *id != 0 => Some(*id),
                    _ => None,
                });
                out.xdp_mode = x.iter().find_map(|x| match x {
                    LinkXdp::Attached(XdpAttached::Driver) => Some(XdpMode::Native),
                    LinkXdp::Attached(XdpAttached::SocketBuffer) => Some(XdpMode::Generic),
                    LinkXdp::Attached(XdpAttached::Hardware) => Some(XdpMode::Offload),
                    _ => None,
                });
            }
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(k) => out.driver = driver(k),
                        LinkInfo::Data(InfoData::Netkit(n)) => {
                            out.netkit_primary = n.iter().find_map(|n| match n {
                                InfoNetkit::Primary(p) => Some(*p),
                                _ => None,
                            });
                            out.netkit_peer_policy = n.iter().find_map(|n| match n {
                                InfoNetkit::PeerPolicy(p) => Some(match p {
                                    NetkitPolicy::Pass => "forward",
                                    NetkitPolicy::Drop => "blackhole",
                                    NetkitPolicy::Redirect => "redirect",
                                    _ => "unknown",
                                }),
                                _ => None,
                            });
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The kernel's own name of a driver (`IFLA_INFO_KIND`: `gre`, `sit`,
/// `ip6gretap`, as `ip -d link` says it; red team round 8, S2).
fn driver(k: &InfoKind) -> String {
    k.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red team round 8, S2: a driver is named as the kernel names it
    /// (`ip -d link`), so that the tunnels' rules can match it.
    #[test]
    fn drivers_are_named_as_the_kernel_names_them() {
        let names: Vec<String> = [
            InfoKind::GreTun,
            InfoKind::GreTun6,
            InfoKind::SitTun,
            InfoKind::GreTap6,
            InfoKind::Veth,
            InfoKind::MacVlan,
        ]
        .iter()
        .map(driver)
        .collect();
        assert_eq!(names, ["gre", "ip6gre", "sit", "ip6gretap", "veth", "macvlan"]);
        assert_eq!(driver(&InfoKind::Other("cilium_weird".into())), "cilium_weird");
    }

    /// A message as the kernel sends it: serialized, then read back as the
    /// reader reads each message of a datagram.
    fn on_the_wire(attributes: Vec<LinkAttribute>, ifindex: u32) -> Result<Link, String> {
        let mut l = LinkMessage::default();
        l.header.index = ifindex;
        l.attributes = attributes;
        let mut packet =
            NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(RouteNetlinkMessage::NewLink(l)));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf).map_err(|e| e.to_string())?.payload {
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => Ok(link(&l)),
            other => Err(format!("{other:?}")),
        }
    }

    fn kind(k: InfoKind, data: Option<InfoData>) -> LinkAttribute {
        LinkAttribute::LinkInfo([Some(LinkInfo::Kind(k)), data.map(LinkInfo::Data)].into_iter().flatten().collect())
    }

    /// The host side of a pod's veth: its other end is in the namespace
    /// whose id here is 3.
    #[test]
    fn a_veth_says_the_netns_id_of_its_other_end() {
        let l = on_the_wire(
            vec![
                LinkAttribute::IfName("lxc0a1b".into()),
                LinkAttribute::Link(2),
                LinkAttribute::LinkNetNsId(3),
                kind(InfoKind::Veth, None),
            ],
            17,
        )
        .unwrap();
        assert_eq!((l.ifindex, l.name.as_str(), l.driver.as_str(), l.peer_nsid), (17, "lxc0a1b", "veth", Some(3)));
        assert_eq!(l.peer_ifindex, Some(2), "its other end's index, in that namespace");
        assert_eq!((l.netkit_primary, l.xdp_prog_id), (None, None));
    }

    /// netkit: the primary (in the host) carries the programs of both
    /// sides; a peer says it is not the primary.
    #[test]
    fn a_netkit_pair_says_which_side_is_the_primary() {
        for primary in [true, false] {
            let l = on_the_wire(
                vec![
                    LinkAttribute::IfName("nk0".into()),
                    LinkAttribute::LinkNetNsId(5),
                    kind(InfoKind::Netkit, Some(InfoData::Netkit(vec![InfoNetkit::Primary(primary)]))),
                ],
                9,
            )
            .unwrap();
            assert_eq!((l.driver.as_str(), l.netkit_primary, l.peer_nsid), ("netkit", Some(primary), Some(5)));
        }
    }

    /// An XDP program by its id; a device without one says 0, which is
    /// none.
    #[test]
    fn an_xdp_program_is_read_by_its_id() {
        let xdp = |id| LinkAttribute::Xdp(vec![LinkXdp::Attached(XdpAttached::Driver), LinkXdp::ProgId(id)]);
        let l = on_the_wire(vec![LinkAttribute::IfName("eth0".into()), xdp(42)], 2).unwrap();
        assert_eq!((l.driver.as_str(), l.xdp_prog_id), ("", Some(42)));
        assert_eq!(l.xdp_mode, Some(crate::snapshot::devices::XdpMode::Native), "driver mode is native");
        let l = on_the_wire(vec![LinkAttribute::IfName("eth0".into()), xdp(0)], 2).unwrap();
        assert_eq!(l.xdp_prog_id, None);
    }

    /// A driver this crate has no name for is kept by its own word.
    #[test]
    fn a_driver_is_named_as_the_kernel_names_it() {
        let l = on_the_wire(vec![LinkAttribute::IfName("vxlan.calico".into()), kind(InfoKind::Vxlan, None)], 4);
        assert_eq!(l.unwrap().driver, "vxlan");
        let l = on_the_wire(vec![kind(InfoKind::Other("cilium_fancy".into()), None)], 4);
        assert_eq!(l.unwrap().driver, "cilium_fancy");
    }
}
