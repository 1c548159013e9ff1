//! The fixed list of cgroup attach types the audit queries.
//!
//! Never iterate the whole `bpf_attach_type` enum: querying a non-cgroup type
//! on a cgroup fd can "succeed" (TCX reads the fd as an ifindex). The names
//! are the short ones `bpftool cgroup tree` and Cilium use.

use std::fmt;

use aya_obj::generated::bpf_attach_type::{self, *};
use serde::{Serialize, Serializer};

use super::ProgType;

/// One cgroup attach type: the kernel's enum value and its short name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttachType(u32);

/// (kernel enum, short name, libbpf name, socket load-balancing hook, kernel
/// that added it)
const TABLE: [(bpf_attach_type, &str, &str, bool, &str); 29] = [
    (BPF_CGROUP_INET_INGRESS, "ingress", "cgroup_inet_ingress", false, "4.10"),
    (BPF_CGROUP_INET_EGRESS, "egress", "cgroup_inet_egress", false, "4.10"),
    (BPF_CGROUP_INET_SOCK_CREATE, "sock_create", "cgroup_inet_sock_create", false, "4.10"),
    (BPF_CGROUP_SOCK_OPS, "sock_ops", "cgroup_sock_ops", false, "4.13"),
    (BPF_CGROUP_DEVICE, "device", "cgroup_device", false, "4.15"),
    (BPF_CGROUP_INET4_BIND, "bind4", "cgroup_inet4_bind", true, "4.17"),
    (BPF_CGROUP_INET6_BIND, "bind6", "cgroup_inet6_bind", true, "4.17"),
    (BPF_CGROUP_INET4_CONNECT, "connect4", "cgroup_inet4_connect", true, "4.17"),
    (BPF_CGROUP_INET6_CONNECT, "connect6", "cgroup_inet6_connect", true, "4.17"),
    (BPF_CGROUP_INET4_POST_BIND, "post_bind4", "cgroup_inet4_post_bind", true, "4.17"),
    (BPF_CGROUP_INET6_POST_BIND, "post_bind6", "cgroup_inet6_post_bind", true, "4.17"),
    (BPF_CGROUP_UDP4_SENDMSG, "sendmsg4", "cgroup_udp4_sendmsg", true, "4.18"),
    (BPF_CGROUP_UDP6_SENDMSG, "sendmsg6", "cgroup_udp6_sendmsg", true, "4.18"),
    (BPF_CGROUP_SYSCTL, "sysctl", "cgroup_sysctl", false, "5.2"),
    (BPF_CGROUP_UDP4_RECVMSG, "recvmsg4", "cgroup_udp4_recvmsg", true, "5.2"),
    (BPF_CGROUP_UDP6_RECVMSG, "recvmsg6", "cgroup_udp6_recvmsg", true, "5.2"),
    (BPF_CGROUP_GETSOCKOPT, "getsockopt", "cgroup_getsockopt", false, "5.3"),
    (BPF_CGROUP_SETSOCKOPT, "setsockopt", "cgroup_setsockopt", false, "5.3"),
    (BPF_CGROUP_INET4_GETPEERNAME, "getpeername4", "cgroup_inet4_getpeername", true, "5.8"),
    (BPF_CGROUP_INET6_GETPEERNAME, "getpeername6", "cgroup_inet6_getpeername", true, "5.8"),
    (BPF_CGROUP_INET4_GETSOCKNAME, "getsockname4", "cgroup_inet4_getsockname", false, "5.8"),
    (BPF_CGROUP_INET6_GETSOCKNAME, "getsockname6", "cgroup_inet6_getsockname", false, "5.8"),
    (BPF_CGROUP_INET_SOCK_RELEASE, "sock_release", "cgroup_inet_sock_release", true, "5.9"),
    (BPF_LSM_CGROUP, "lsm_cgroup", "lsm_cgroup", false, "6.0"),
    (BPF_CGROUP_UNIX_CONNECT, "connect_unix", "cgroup_unix_connect", false, "6.7"),
    (BPF_CGROUP_UNIX_SENDMSG, "sendmsg_unix", "cgroup_unix_sendmsg", false, "6.7"),
    (BPF_CGROUP_UNIX_RECVMSG, "recvmsg_unix", "cgroup_unix_recvmsg", false, "6.7"),
    (BPF_CGROUP_UNIX_GETPEERNAME, "getpeername_unix", "cgroup_unix_getpeername", false, "6.7"),
    (BPF_CGROUP_UNIX_GETSOCKNAME, "getsockname_unix", "cgroup_unix_getsockname", false, "6.7"),
];

impl AttachType {
    /// Every cgroup attach type, in kernel enum order of introduction.
    pub fn all() -> impl Iterator<Item = AttachType> {
        TABLE.iter().map(|e| AttachType(e.0 as u32))
    }

    /// The cgroup attach type with this kernel enum value, if it is one.
    pub fn from_kernel(value: u32) -> Option<AttachType> {
        TABLE.iter().any(|e| e.0 as u32 == value).then_some(AttachType(value))
    }

    pub fn from_name(name: &str) -> Option<AttachType> {
        TABLE.iter().find(|e| e.1 == name).map(|e| AttachType(e.0 as u32))
    }

    fn entry(self) -> &'static (bpf_attach_type, &'static str, &'static str, bool, &'static str) {
        // Constructed only from TABLE, so the entry exists.
        TABLE.iter().find(|e| e.0 as u32 == self.0).unwrap_or(&TABLE[0])
    }

    pub fn kernel_value(self) -> u32 {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.entry().1
    }

    /// A hook that socket load balancing (Cilium KPR, Calico eBPF) attaches at
    /// the root cgroup: connect, sendmsg, recvmsg, getpeername, post_bind,
    /// bind (4 and 6) and sock_release.
    pub fn is_socket_lb(self) -> bool {
        self.entry().3
    }

    /// A hook where a program rewrites or refuses a socket's address
    /// (connect, sendmsg, recvmsg, getpeername, bind, post_bind; 4 and 6):
    /// one below the root breaks the traffic of every other pod. The rest of
    /// the socket-LB set (sock_release) and the other hooks an owner wants at
    /// the root lose data or a feature there, not traffic.
    pub fn is_socket_address(self) -> bool {
        self.is_socket_lb() && self.name() != "sock_release"
    }

    /// Accepts both the short and the libbpf name.
    pub fn from_any_name(name: &str) -> Option<AttachType> {
        TABLE.iter().find(|e| e.1 == name || e.2 == name).map(|e| AttachType(e.0 as u32))
    }

    /// The program type that can be attached to this hook.
    pub fn prog_type(self) -> ProgType {
        match self.name() {
            "ingress" | "egress" => ProgType::CgroupSkb,
            "sock_create" | "post_bind4" | "post_bind6" | "sock_release" => ProgType::CgroupSock,
            "sock_ops" => ProgType::SockOps,
            "device" => ProgType::CgroupDevice,
            "sysctl" => ProgType::CgroupSysctl,
            "getsockopt" | "setsockopt" => ProgType::CgroupSockopt,
            "lsm_cgroup" => ProgType::Lsm,
            _ => ProgType::CgroupSockAddr,
        }
    }

    /// The kernel release that introduced the hook, for "unsupported" messages.
    pub fn since(self) -> &'static str {
        self.entry().4
    }
}

impl fmt::Display for AttachType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for AttachType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for AttachType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// How programs of one type share a cgroup (`BPF_F_ALLOW_*` of the attach point).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum AttachFlags {
    /// Exclusive: one program, descendants may not attach their own.
    None,
    /// `BPF_F_ALLOW_OVERRIDE`: a descendant's program replaces this one.
    Override,
    /// `BPF_F_ALLOW_MULTI`: all programs run, own and inherited (also links).
    Multi,
}

impl AttachFlags {
    pub fn from_kernel(flags: u32) -> AttachFlags {
        use aya_obj::generated::{BPF_F_ALLOW_MULTI, BPF_F_ALLOW_OVERRIDE};
        if flags & BPF_F_ALLOW_MULTI != 0 {
            AttachFlags::Multi
        } else if flags & BPF_F_ALLOW_OVERRIDE != 0 {
            AttachFlags::Override
        } else {
            AttachFlags::None
        }
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_twenty_nine_distinct_cgroup_types() {
        let mut values: Vec<u32> = AttachType::all().map(AttachType::kernel_value).collect();
        values.sort();
        values.dedup();
        assert_eq!(values.len(), 29);
    }

    #[test]
    fn socket_lb_set_matches_cilium_hooks() {
        let lb: Vec<&str> = AttachType::all().filter(|t| t.is_socket_lb()).map(AttachType::name).collect();
        assert_eq!(
            lb,
            [
                "bind4",
                "bind6",
                "connect4",
                "connect6",
                "post_bind4",
                "post_bind6",
                "sendmsg4",
                "sendmsg6",
                "recvmsg4",
                "recvmsg6",
                "getpeername4",
                "getpeername6",
                "sock_release"
            ]
        );
    }

    #[test]
    fn non_cgroup_types_are_rejected() {
        assert!(AttachType::from_kernel(BPF_TCX_INGRESS as u32).is_none());
        assert_eq!(AttachType::from_kernel(10).map(AttachType::name), Some("connect4"));
        assert_eq!(AttachType::from_name("sock_release").map(AttachType::kernel_value), Some(34));
        assert_eq!(AttachType::from_any_name("cgroup_udp6_recvmsg").map(AttachType::name), Some("recvmsg6"));
        assert_eq!(AttachType::from_any_name("cgroup_inet4_connect").map(AttachType::name), Some("connect4"));
    }

    #[test]
    fn every_hook_names_its_program_type() {
        let t = |n| AttachType::from_name(n).unwrap().prog_type().name();
        assert_eq!(t("connect4"), "cgroup_sock_addr");
        assert_eq!(t("connect_unix"), "cgroup_sock_addr");
        assert_eq!(t("post_bind6"), "cgroup_sock");
        assert_eq!(t("sock_release"), "cgroup_sock");
        assert_eq!(t("device"), "cgroup_device");
        assert_eq!(t("egress"), "cgroup_skb");
        assert_eq!(t("setsockopt"), "cgroup_sockopt");
        let types: std::collections::BTreeSet<ProgType> = AttachType::all().map(AttachType::prog_type).collect();
        assert_eq!(types.len(), 8);
    }

    #[test]
    fn multi_wins_over_override() {
        assert_eq!(AttachFlags::from_kernel(3), AttachFlags::Multi);
        assert_eq!(AttachFlags::from_kernel(1), AttachFlags::Override);
        assert_eq!(AttachFlags::from_kernel(0), AttachFlags::None);
    }
}
