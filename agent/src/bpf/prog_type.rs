//! BPF program types, by the short names bpftool prints.

use aya_obj::generated::bpf_prog_type::*;
use serde::Serialize;

/// The type of a loaded program (`bpf_prog_info.type`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, strum::IntoStaticStr, strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ProgType {
    SocketFilter,
    Kprobe,
    SchedCls,
    SchedAct,
    Tracepoint,
    Xdp,
    PerfEvent,
    CgroupSkb,
    CgroupSock,
    SockOps,
    CgroupDevice,
    /// On a sockmap or sockhash, not a cgroup (a mesh's or a tracer's
    /// socket redirection).
    SkMsg,
    RawTracepoint,
    CgroupSockAddr,
    CgroupSysctl,
    CgroupSockopt,
    Tracing,
    Lsm,
    SkLookup,
    Syscall,
    Netfilter,
    /// A type this agent does not name (none of them attach to cgroups).
    Unknown,
}

/// The kernel's values of the types named.
const TYPES: &[(u32, ProgType)] = &[
    (BPF_PROG_TYPE_SOCKET_FILTER as u32, ProgType::SocketFilter),
    (BPF_PROG_TYPE_KPROBE as u32, ProgType::Kprobe),
    (BPF_PROG_TYPE_SCHED_CLS as u32, ProgType::SchedCls),
    (BPF_PROG_TYPE_SCHED_ACT as u32, ProgType::SchedAct),
    (BPF_PROG_TYPE_TRACEPOINT as u32, ProgType::Tracepoint),
    (BPF_PROG_TYPE_XDP as u32, ProgType::Xdp),
    (BPF_PROG_TYPE_PERF_EVENT as u32, ProgType::PerfEvent),
    (BPF_PROG_TYPE_CGROUP_SKB as u32, ProgType::CgroupSkb),
    (BPF_PROG_TYPE_CGROUP_SOCK as u32, ProgType::CgroupSock),
    (BPF_PROG_TYPE_SOCK_OPS as u32, ProgType::SockOps),
    (BPF_PROG_TYPE_CGROUP_DEVICE as u32, ProgType::CgroupDevice),
    (BPF_PROG_TYPE_SK_MSG as u32, ProgType::SkMsg),
    (BPF_PROG_TYPE_RAW_TRACEPOINT as u32, ProgType::RawTracepoint),
    (BPF_PROG_TYPE_CGROUP_SOCK_ADDR as u32, ProgType::CgroupSockAddr),
    (BPF_PROG_TYPE_CGROUP_SYSCTL as u32, ProgType::CgroupSysctl),
    (BPF_PROG_TYPE_CGROUP_SOCKOPT as u32, ProgType::CgroupSockopt),
    (BPF_PROG_TYPE_TRACING as u32, ProgType::Tracing),
    (BPF_PROG_TYPE_LSM as u32, ProgType::Lsm),
    (BPF_PROG_TYPE_SK_LOOKUP as u32, ProgType::SkLookup),
    (BPF_PROG_TYPE_SYSCALL as u32, ProgType::Syscall),
    (BPF_PROG_TYPE_NETFILTER as u32, ProgType::Netfilter),
];

impl ProgType {
    pub fn from_kernel(t: u32) -> ProgType {
        TYPES.iter().find(|(v, _)| *v == t).map_or(ProgType::Unknown, |&(_, p)| p)
    }

    /// The kernel's `bpf_prog_type` value (`None` for `Unknown`).
    pub fn kernel_value(self) -> Option<u32> {
        TYPES.iter().find(|(_, p)| *p == self).map(|&(v, _)| v)
    }

    /// bpftool's name (`cgroup_sock_addr`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// A program for socket hooks: `cgroup_sock_addr` (connect, sendmsg,
    /// recvmsg, getpeername, bind) or `cgroup_sock` (post_bind, sock_create,
    /// sock_release), the two types socket load balancing uses.
    pub fn is_socket(self) -> bool {
        matches!(self, ProgType::CgroupSockAddr | ProgType::CgroupSock)
    }
}

impl std::fmt::Display for ProgType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn names_are_bpftools_and_serde_says_the_same() {
        assert_eq!(ProgType::CgroupSockAddr.name(), "cgroup_sock_addr");
        assert_eq!(ProgType::SkLookup.name(), "sk_lookup");
        for t in ProgType::iter() {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
        assert_eq!(ProgType::from_kernel(18), ProgType::CgroupSockAddr);
        assert_eq!(ProgType::from_kernel(9999), ProgType::Unknown);
    }
}
