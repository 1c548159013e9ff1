//! Who attaches what to the cgroup tree, as data: one entry per owner,
//! read by the rules. Adding an owner is one entry here and its test.
//! (Over 500 lines: it is a table, one entry per owner, each citing its
//! upstream source.)
//!
//! Each entry says what its agent is called and runs with (whence the
//! audit believes a process is that agent), what programs it makes (full
//! BTF names or prefixes, types, hooks, how it attaches them), where it
//! mounts cgroup2 and pins, where it means them to be, and the setting of
//! its own that puts its mount at the host's root. The program lists are
//! the upstream sources' (named at each entry); a name alone never makes a
//! program an owner's (`super::judge` weighs what proves it).

use crate::bpf::ProgType;

use super::Owner;

/// How an owner attaches its cgroup programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// bpf_links (multi-program by nature).
    Link,
    /// `BPF_PROG_ATTACH` with `BPF_F_ALLOW_MULTI`.
    Multi,
    /// `BPF_PROG_ATTACH` with no flag: the hook is the program's alone, and
    /// nothing can be attached below it.
    Exclusive,
    /// `BPF_PROG_ATTACH` with `BPF_F_ALLOW_OVERRIDE`: a program below
    /// replaces it for that subtree.
    Override,
    /// Links where the kernel has them, else `BPF_PROG_ATTACH` multi.
    LinkOrMulti,
}

impl Attach {
    /// Whether programs of another owner can run beside it on one hook.
    pub fn shares_hook(self) -> bool {
        matches!(self, Attach::Link | Attach::Multi | Attach::LinkOrMulti)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Attach::Link => "bpf_link",
            Attach::Multi => "multi",
            Attach::Exclusive => "exclusive (no flags)",
            Attach::Override => "override",
            Attach::LinkOrMulti => "bpf_link or multi",
        }
    }
}

/// A program's name as its owner gives it (the full BTF name; the kernel
/// keeps 15 bytes of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    Exact(&'static str),
    Prefix(&'static str),
    /// No name at all (runc's and crun's device filters).
    Unnamed,
    /// Any name: the owner is known by holding it (Inspektor Gadget's
    /// gadgets name their own programs).
    Any,
}

impl Name {
    pub fn matches(self, name: &str) -> bool {
        match self {
            Name::Exact(n) => name == n || (name.len() == 15 && n.starts_with(name)),
            Name::Prefix(p) => name.starts_with(p) || (name.len() == 15 && p.starts_with(name)),
            Name::Unnamed => name.is_empty(),
            Name::Any => true,
        }
    }

    pub fn shown(self) -> String {
        match self {
            Name::Exact(n) => format!("`{n}`"),
            Name::Prefix(p) => format!("`{p}*`"),
            Name::Unnamed => "unnamed".to_owned(),
            Name::Any => "any name".to_owned(),
        }
    }
}

/// Programs of one kind an owner makes.
#[derive(Debug, Clone, Copy)]
pub struct Programs {
    pub name: Name,
    pub prog_type: ProgType,
    /// The cgroup hooks they go on (empty: not a cgroup hook, e.g. sk_msg).
    pub hooks: &'static [&'static str],
    pub attach: Attach,
}

/// What an owner's agent runs with, whence a process of its name is taken
/// for it or not. Anyone can name a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// hostNetwork, with CAP_NET_ADMIN and CAP_SYS_ADMIN or CAP_BPF in the
    /// node's user namespace (CNI agents, load balancers, meshes' CNIs).
    HostNetwork,
    /// Privileged (CAP_SYS_ADMIN or CAP_BPF in the node's user namespace)
    /// in a network namespace of its own: Kmesh's chart runs it so.
    Privileged,
}

/// Where an owner means its programs to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intends {
    /// The root cgroup, for every socket on the node: below it, they act
    /// for one subtree only.
    Root,
    /// Wherever they are: systemd's units, the runtimes' containers.
    Anywhere,
    /// No cgroup program at all: its programs are on the pods' interfaces
    /// (`DATAPATHS`, `PROGRAM_PINS`).
    PodInterfaces,
}

/// One owner.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub owner: Owner,
    /// As people name it.
    pub title: &'static str,
    /// What it is, for the README's table.
    pub what: &'static str,
    /// Name prefixes by which its programs say they are its, beyond those
    /// of `programs` (`sd_`): to tell a user what a name claims, never to
    /// prove anything.
    pub claims: &'static [&'static str],
    /// Its agent's command names (`comm`, at most 15 bytes).
    pub agents: &'static [&'static str],
    pub runs: Runs,
    pub programs: &'static [Programs],
    /// Where it mounts cgroup2 to attach at "the root" of that mount.
    pub mount_points: &'static [&'static str],
    /// Where it pins its programs and links, below bpffs.
    pub pin_dirs: &'static [&'static str],
    pub intends: Intends,
    /// Judged as a socket load balancer: the pods whose sockets lack its
    /// connect programs are named (`pods_without_socket_lb`).
    pub balances_sockets: bool,
    /// Its own setting that makes its mount the host's root, in one
    /// sentence ending with a comma (the fix text goes on).
    pub fix: &'static str,
    /// How its agent on one node is restarted: namespace and label selector.
    pub restart: Option<(&'static str, &'static str)>,
    /// The upstream source its entry is read from.
    pub source: &'static str,
}

/// Cilium's and Calico's socket-LB hooks.
pub(super) const SOCKET_LB: &[&str] = &[
    "connect4",
    "connect6",
    "sendmsg4",
    "sendmsg6",
    "recvmsg4",
    "recvmsg6",
    "getpeername4",
    "getpeername6",
    "post_bind4",
    "post_bind6",
    "bind4",
    "bind6",
    "sock_release",
];

pub static OWNERS: &[Spec] = &[
    Spec {
        owner: Owner::Cilium,
        title: "Cilium",
        what: "CNI, kube-proxy replacement (socket LB)",
        claims: &["cil_"],
        agents: &["cilium-agent"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Prefix("cil_sock"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: SOCKET_LB,
                attach: Attach::LinkOrMulti,
            },
            Programs {
                name: Name::Prefix("cil_sock"),
                prog_type: ProgType::CgroupSock,
                hooks: SOCKET_LB,
                attach: Attach::LinkOrMulti,
            },
            // Before 1.9, without the `cil_` prefix.
            Programs {
                name: Name::Prefix("sock4_"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sock6_"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sock4_"),
                prog_type: ProgType::CgroupSock,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sock6_"),
                prog_type: ProgType::CgroupSock,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
        ],
        mount_points: &["/run/cilium/cgroupv2"],
        // Its socket-LB links; its devices' and endpoints' tcx, netkit and
        // XDP links (pkg/datapath/loader/paths.go: `<dev>` with '.' as '-').
        pin_dirs: &["cilium/socketlb/links/cgroup", "cilium/devices/*/links", "cilium/endpoints/*/links"],
        intends: Intends::Root,
        balances_sockets: true,
        fix: "keep Cilium's `cgroup.autoMount.enabled=true` with `cgroup.hostRoot=/run/cilium/cgroupv2` (its \
              mount-cgroup init container mounts from PID 1's namespaces),",
        restart: Some(("kube-system", "k8s-app=cilium")),
        source: "cilium/cilium pkg/socketlb",
    },
    Spec {
        owner: Owner::Calico,
        title: "Calico",
        what: "CNI, eBPF dataplane (connect-time LB)",
        claims: &["calico_", "cali_"],
        agents: &["calico-node"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Prefix("calico_"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("cali_"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: SOCKET_LB,
                attach: Attach::Multi,
            },
        ],
        mount_points: &["/run/calico/cgroup"],
        // Its connect-time programs; its tcx and netkit links
        // (felix/bpf/tc/attach.go: `<iface>_<hook>`).
        pin_dirs: &["ctlb", "tcx", "netkit"],
        intends: Intends::Root,
        balances_sockets: true,
        fix: "keep calico-node's init container (`mount-bpffs`, `ebpf-bootstrap` from 3.31; `calico-node -init`, which \
              mounts from PID 1's namespaces through the host's /proc at /nodeproc; releases before 3.28.5, 3.29.5 and \
              3.30.2 could fail to enter them silently), with `CALICO_CGROUP_PATH`, if set, the same in it and in \
              calico-node,",
        restart: Some(("calico-system", "k8s-app=calico-node")),
        source: "projectcalico/calico felix/bpf/nat",
    },
    Spec {
        owner: Owner::AwsNetworkPolicy,
        title: "AWS network policy agent",
        what: "EKS network policy (tc programs on the pods' interfaces, no cgroup program)",
        claims: &[],
        // aws-node's `aws-network-policy-agent` container runs `/controller`.
        agents: &["controller"],
        runs: Runs::HostNetwork,
        programs: &[],
        mount_points: &[],
        // pkg/utils: BPF_PROGRAMS_PIN_PATH_DIRECTORY, one program per pod
        // identity and direction: programs, not links.
        pin_dirs: &["globals/aws/programs"],
        intends: Intends::PodInterfaces,
        balances_sockets: false,
        fix: "",
        restart: Some(("kube-system", "k8s-app=aws-node")),
        source: "aws/aws-network-policy-agent pkg/utils/utils.go, pkg/ebpf/bpf_client.go; aws/aws-ebpf-sdk-go pkg/tc",
    },
    Spec {
        owner: Owner::Kmesh,
        title: "Kmesh",
        what: "sidecarless service mesh (workloads chosen inside its programs)",
        claims: &[],
        agents: &["kmesh-daemon"],
        runs: Runs::Privileged,
        programs: &[
            Programs {
                name: Name::Exact("cgroup_connect4_prog"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["connect4"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("cgroup_connect6_prog"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["connect6"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("bpf_redirect_dns_send"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["sendmsg4"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("bpf_restore_dns_recv"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["recvmsg4"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("sockops_prog"),
                prog_type: ProgType::SockOps,
                hooks: &["sock_ops"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("cgroup_skb_ingress_prog"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["ingress"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("cgroup_skb_egress_prog"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["egress"],
                attach: Attach::Link,
            },
        ],
        mount_points: &["/mnt/kmesh_cgroup2"],
        pin_dirs: &["bpf_kmesh_workload"],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "mount cgroup2 for Kmesh from the host's cgroup namespace (the node's `/mnt/kmesh_cgroup2` through its \
              hostPath `/mnt`, mounted from PID 1's namespaces) or point `--cgroup2-path` at such a mount,",
        restart: Some(("kmesh-system", "app=kmesh")),
        source: "kmesh-net/kmesh ec501a98 bpf/kmesh/workload/cgroup_sock.c, daemon/options/bpf.go",
    },
    Spec {
        owner: Owner::Merbridge,
        title: "Merbridge",
        what: "mesh acceleration (redirects to the sidecar)",
        claims: &["mb_"],
        agents: &["mbctl", "merbridge"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Exact("mb_sock_connect4"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["connect4"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_sock_connect6"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["connect6"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_sendmsg4"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["sendmsg4"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_sendmsg6"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["sendmsg6"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_recvmsg4"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["recvmsg4"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_recvmsg6"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["recvmsg6"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_bind"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["bind4"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_get_sockopt"),
                prog_type: ProgType::CgroupSockopt,
                hooks: &["getsockopt"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_sockops"),
                prog_type: ProgType::SockOps,
                hooks: &["sock_ops"],
                attach: Attach::Exclusive,
            },
            Programs {
                name: Name::Exact("mb_msg_redir"),
                prog_type: ProgType::SkMsg,
                hooks: &[],
                attach: Attach::Link,
            },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "set Merbridge's `CGROUP2_PATH` to a cgroup2 mount rooted at the host's root (the node's /sys/fs/cgroup \
              through a hostPath), and keep no other cgroup2 mount before it (merbridge#144),",
        restart: Some(("istio-system", "app=merbridge")),
        source: "merbridge/merbridge 561fc00e bpf/Makefile",
    },
    Spec {
        owner: Owner::Loxilb,
        title: "LoxiLB",
        what: "load balancer (connect-time LB)",
        claims: &["llb_"],
        agents: &["loxilb"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Exact("llb_connect_v4_prog"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["connect4"],
                attach: Attach::Override,
            },
            Programs {
                name: Name::Prefix("llb_"),
                prog_type: ProgType::SockOps,
                hooks: &["sock_ops"],
                attach: Attach::Exclusive,
            },
        ],
        mount_points: &["/opt/loxilb/cgroup"],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "mount LoxiLB's cgroup path (`/opt/loxilb/cgroup`) from the host's cgroup namespace (a hostPath to a \
              mount made from PID 1's namespaces),",
        restart: Some(("kube-system", "app=loxilb")),
        source: "loxilb-io/loxilb-ebpf 6b83b070 kernel/loxilb_libdp.c, common/cgroup.h",
    },
    Spec {
        owner: Owner::Obi,
        title: "OBI (Beyla)",
        what: "OpenTelemetry eBPF Instrumentation (context propagation)",
        claims: &["obi_", "beyla_"],
        agents: &["obi", "beyla"],
        runs: Runs::Privileged,
        programs: &[
            Programs {
                name: Name::Prefix("obi_sockmap_t"),
                prog_type: ProgType::SockOps,
                hooks: &["sock_ops"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Prefix("beyla_sockmap_t"),
                prog_type: ProgType::SockOps,
                hooks: &["sock_ops"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Prefix("obi_socket_ingr"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["ingress"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Prefix("obi_post_bind"),
                prog_type: ProgType::CgroupSock,
                hooks: &["post_bind4", "post_bind6"],
                attach: Attach::Link,
            },
            Programs { name: Name::Prefix("obi_"), prog_type: ProgType::SkMsg, hooks: &[], attach: Attach::Link },
            Programs { name: Name::Prefix("beyla_"), prog_type: ProgType::SkMsg, hooks: &[], attach: Attach::Link },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "run OBI with the host's `/sys/fs/cgroup` mounted (hostPath) for `contextPropagation`, so that it \
              attaches there and not through a cgroup2 of its own,",
        restart: None,
        source: "open-telemetry/opentelemetry-ebpf-instrumentation (formerly grafana/beyla)",
    },
    Spec {
        owner: Owner::InspektorGadget,
        title: "Inspektor Gadget",
        what: "eBPF gadgets (their sock_ops programs at the host's root)",
        claims: &[],
        agents: &["gadgettracerman", "ig"],
        runs: Runs::HostNetwork,
        programs: &[Programs {
            name: Name::Any,
            prog_type: ProgType::SockOps,
            hooks: &["sock_ops"],
            attach: Attach::Link,
        }],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "run the gadget where it sees the host's cgroup root (`HOST_ROOT`),",
        restart: None,
        source: "inspektor-gadget/inspektor-gadget (HOST_ROOT)",
    },
    Spec {
        owner: Owner::DatadogCws,
        title: "Datadog CWS",
        what: "Cloud Workload Security (socket events)",
        claims: &[],
        agents: &["system-probe"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Exact("hook_sock_create"),
                prog_type: ProgType::CgroupSock,
                hooks: &["sock_create"],
                attach: Attach::LinkOrMulti,
            },
            Programs {
                name: Name::Exact("hook_sock_release"),
                prog_type: ProgType::CgroupSock,
                hooks: &["sock_release"],
                attach: Attach::LinkOrMulti,
            },
            Programs {
                name: Name::Prefix("hook_post_bind"),
                prog_type: ProgType::CgroupSock,
                hooks: &["post_bind4", "post_bind6"],
                attach: Attach::LinkOrMulti,
            },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "run system-probe with the host's cgroup root in view (hostPID, the host's /sys/fs/cgroup),",
        restart: None,
        source: "DataDog/datadog-agent pkg/security/ebpf",
    },
    Spec {
        owner: Owner::Tracee,
        title: "Tracee",
        what: "runtime security (network events)",
        claims: &[],
        agents: &["tracee", "tracee-ebpf"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Exact("cgroup_skb_ingress"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["ingress"],
                attach: Attach::Link,
            },
            Programs {
                name: Name::Exact("cgroup_skb_egress"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["egress"],
                attach: Attach::Link,
            },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "run Tracee with the host's cgroup namespace (it mounts its own cgroup2 in a temporary directory, \
              tracee#3422),",
        restart: None,
        source: "aquasecurity/tracee (tracee#3422)",
    },
    Spec {
        owner: Owner::Keploy,
        title: "keploy",
        what: "API test recorder (its own cgroup2 mount)",
        claims: &[],
        agents: &["keploy"],
        runs: Runs::HostNetwork,
        programs: &[],
        mount_points: &["/run/keploy/cgroupv2"],
        pin_dirs: &[],
        intends: Intends::Root,
        balances_sockets: false,
        fix: "mount keploy's `/run/keploy/cgroupv2` from the host's cgroup namespace,",
        restart: None,
        source: "keploy/keploy (its /run/keploy/cgroupv2 mount)",
    },
    Spec {
        owner: Owner::Systemd,
        title: "systemd",
        what: "units' IPAddressAllow/Deny, RestrictNetworkInterfaces, DevicePolicy, SocketBindAllow/Deny",
        claims: &["sd_"],
        agents: &["systemd"],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Prefix("sd_fw_"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["ingress", "egress"],
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sd_restrictif"),
                prog_type: ProgType::CgroupSkb,
                hooks: &["ingress", "egress"],
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sd_devices"),
                prog_type: ProgType::CgroupDevice,
                hooks: &["device"],
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("sd_bind"),
                prog_type: ProgType::CgroupSockAddr,
                hooks: &["bind4", "bind6"],
                attach: Attach::Multi,
            },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Anywhere,
        balances_sockets: false,
        fix: "",
        restart: None,
        source: "systemd/systemd src/core/bpf-*",
    },
    Spec {
        owner: Owner::Runtime,
        title: "runc, crun",
        what: "container runtimes' device filters",
        claims: &["runc", "crun"],
        agents: &[],
        runs: Runs::HostNetwork,
        programs: &[
            Programs {
                name: Name::Unnamed,
                prog_type: ProgType::CgroupDevice,
                hooks: &["device"],
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("runc"),
                prog_type: ProgType::CgroupDevice,
                hooks: &["device"],
                attach: Attach::Multi,
            },
            Programs {
                name: Name::Prefix("crun"),
                prog_type: ProgType::CgroupDevice,
                hooks: &["device"],
                attach: Attach::Multi,
            },
        ],
        mount_points: &[],
        pin_dirs: &[],
        intends: Intends::Anywhere,
        balances_sockets: false,
        fix: "",
        restart: None,
        source: "opencontainers/runc libcontainer/cgroups/devices",
    },
];

/// An owner's eBPF datapath: what it attaches to the host side of every
/// pod it manages, and to the node's own devices.
#[derive(Debug, Clone, Copy)]
pub struct Datapath {
    pub owner: Owner,
    /// Its entry program, on the hook that sees what the pod sends (tc or
    /// tcx ingress of the host-side veth, netkit's peer).
    pub entry: Name,
    /// Its programs on the node's devices, and where each belongs.
    pub devices: &'static [DeviceProgram],
    /// Where below bpffs it pins its maps (`tc/globals`).
    pub maps_dir: &'static str,
    /// The name prefixes of the maps it pins in `maps_dir`: its tail-call
    /// maps, pinned anew with each program it attaches, and the maps every
    /// generation of its programs shares (Cilium's connection tracking,
    /// ipcache, ...). A program that uses one is its, whichever generation
    /// it is of: a copy an agent restart left behind uses them too.
    pub pinned_maps: &'static [&'static str],
    /// Its tc programs decide the packet's fate and pass nothing on (they
    /// return `TC_ACT_OK`, `TC_ACT_SHOT` or redirect, never `TC_ACT_UNSPEC`):
    /// a program after one of them on the same hook never runs.
    pub terminal: bool,
    /// The upstream sources its entry is read from.
    pub source: &'static str,
}

/// Where on a device an owner's program goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// What the device receives: tc or tcx ingress.
    Ingress,
    /// What the device sends: tc or tcx egress.
    Egress,
    Xdp,
}

/// An owner's program on the node's devices.
#[derive(Debug, Clone, Copy)]
pub struct DeviceProgram {
    pub name: Name,
    pub direction: Direction,
    /// The devices it belongs on, as people name them.
    pub devices: &'static str,
}

pub static DATAPATHS: &[Datapath] = &[
    Datapath {
        owner: Owner::Cilium,
        entry: Name::Exact("cil_from_container"),
        devices: &[
            DeviceProgram {
                name: Name::Exact("cil_from_netdev"),
                direction: Direction::Ingress,
                devices: "the native devices (`devices`)",
            },
            DeviceProgram {
                name: Name::Exact("cil_to_netdev"),
                direction: Direction::Egress,
                devices: "the native devices, with kube-proxy replacement, WireGuard or IPsec",
            },
            DeviceProgram {
                name: Name::Exact("cil_to_host"),
                direction: Direction::Ingress,
                devices: "cilium_host, cilium_net",
            },
            DeviceProgram { name: Name::Exact("cil_from_host"), direction: Direction::Egress, devices: "cilium_host" },
            DeviceProgram {
                name: Name::Exact("cil_from_overlay"),
                direction: Direction::Ingress,
                devices: "cilium_vxlan, cilium_geneve",
            },
            DeviceProgram {
                name: Name::Exact("cil_to_overlay"),
                direction: Direction::Egress,
                devices: "cilium_vxlan, cilium_geneve",
            },
            DeviceProgram {
                name: Name::Exact("cil_from_wireguard"),
                direction: Direction::Ingress,
                devices: "cilium_wg0",
            },
            DeviceProgram {
                name: Name::Exact("cil_to_wireguard"),
                direction: Direction::Egress,
                devices: "cilium_wg0",
            },
            DeviceProgram { name: Name::Exact("cil_xdp_entry"), direction: Direction::Xdp, devices: "the XDP devices" },
        ],
        // pkg/bpf: every map is pinned by name in tc/globals (`cilium_*`).
        maps_dir: "tc/globals",
        pinned_maps: &["cilium_"],
        terminal: true,
        source: "cilium/cilium bpf/bpf_lxc.c, bpf_host.c, bpf_overlay.c, bpf_xdp.c; pkg/datapath/loader (host.go, \
                 tc.go, paths.go); tc programs terminal: cilium#36775",
    },
    Datapath {
        owner: Owner::Calico,
        entry: Name::Exact("cali_tc_preamble"),
        devices: &[
            DeviceProgram {
                name: Name::Exact("cali_tc_preamble"),
                direction: Direction::Ingress,
                devices: "the data interfaces (`bpfDataIfacePattern`), bpfout.cali, tunnels",
            },
            DeviceProgram {
                name: Name::Exact("cali_tc_preamble"),
                direction: Direction::Egress,
                devices: "the data interfaces (`bpfDataIfacePattern`), bpfout.cali, tunnels",
            },
            DeviceProgram {
                name: Name::Exact("cali_xdp_preamble"),
                direction: Direction::Xdp,
                devices: "the data interfaces",
            },
        ],
        // felix/bpf/maps: `cali_*` (and `xdp_cali_*`) in tc/globals.
        maps_dir: "tc/globals",
        pinned_maps: &["cali_", "xdp_cali_"],
        terminal: false,
        source: "projectcalico/calico felix/bpf-gpl/tc_preamble.c, xdp_preamble.c; felix/bpf/tc/attach.go",
    },
    Datapath {
        owner: Owner::AwsNetworkPolicy,
        // What the pod sends meets `handle_egress`, on the host-side veth's
        // tc ingress (the agent names its programs from the pod's side).
        entry: Name::Exact("handle_egress"),
        devices: &[],
        // pkg/utils: BPF_MAPS_PIN_PATH_DIRECTORY, each pod identity's maps
        // and the shared `global_aws_conntrack_map`, `global_policy_events`.
        maps_dir: "globals/aws/maps",
        pinned_maps: &[""],
        // BPF_OK or BPF_DROP (TC_ACT_OK, TC_ACT_SHOT): nothing passed on.
        terminal: true,
        source: "aws/aws-network-policy-agent pkg/ebpf/c/tc.v4ingress.bpf.c, tc.v4egress.bpf.c, pkg/utils/utils.go",
    },
];

/// An owner that pins each pod's programs themselves (not links) and
/// attaches them by a legacy tc filter it never replaces: what runs on the
/// pod's interface must be the program it pinned for the pod.
#[derive(Debug, Clone, Copy)]
pub struct PinnedPrograms {
    pub owner: Owner,
    /// Its programs' pin directory, below bpffs: one pin per pod identity
    /// and program, `<identity>_<program>`.
    pub dir: &'static str,
    /// Each program's name and the host-side hook its filter is on.
    pub programs: &'static [(&'static str, Direction)],
    /// The priority and handle of its filters.
    pub prio: u16,
    pub handle: u32,
    pub source: &'static str,
}

pub static PROGRAM_PINS: &[PinnedPrograms] = &[PinnedPrograms {
    owner: Owner::AwsNetworkPolicy,
    dir: "globals/aws/programs",
    // The pod's ingress is the host veth's egress (TCEgressAttach with
    // TC_INGRESS_PROG), and the reverse.
    programs: &[("handle_ingress", Direction::Egress), ("handle_egress", Direction::Ingress)],
    // aws-ebpf-sdk-go pkg/tc: netlink.FilterAdd (never Replace), Priority 1,
    // Handle DEFAULT_BPF_FILTER_HANDLE (1), clsact qdisc ffff:.
    prio: 1,
    handle: 1,
    source: "aws/aws-ebpf-sdk-go pkg/tc/tc.go; aws/aws-network-policy-agent pkg/utils/utils.go (GetPodIdentifier, \
             GetBPFPinPathFromPodIdentifier); filters keeping the old program after aws-node is recreated: \
             aws-network-policy-agent#514",
}];

/// The pod identities the AWS network policy agent pins a pod's programs
/// under (pkg/utils `GetPodIdentifier`, since v1.4.0, and the form before
/// it, `LegacyGetPodIdentifier`): the pod's name without its last
/// `-`-separated part (pods of one ReplicaSet share their programs), `.`
/// made `_`, then `@` (or, before, `-`) and its namespace.
pub fn aws_pod_identities(name: &str, namespace: &str) -> [String; 2] {
    let name = name.replace('.', "_");
    let prefix = match name.rsplit_once('-') {
        Some((prefix, _)) => prefix,
        None => name.as_str(),
    };
    [format!("{prefix}@{namespace}"), format!("{prefix}-{namespace}")]
}

/// The owner whose pinned programs (not links) prove its own: those of
/// `PROGRAM_PINS`.
pub fn pins_programs(owner: Owner) -> bool {
    PROGRAM_PINS.iter().any(|p| p.owner == owner)
}

/// Device drivers of tunnels (`IFLA_INFO_KIND`): what Calico's L3 pattern
/// is for.
const TUNNELS: &[&str] = &[
    "wireguard",
    "ipip",
    "ip6tnl",
    "gre",
    "ip6gre",
    "gretap",
    "ip6gretap",
    "erspan",
    "ip6erspan",
    "sit",
    "vti",
    "vti6",
    "xfrm",
    "vxlan",
    "geneve",
    "tun",
];

/// Whether `owner`'s configuration (`configured`, as its agent has it:
/// `scan::intent`) means its datapath for `device`; `None`: not known
/// (an owner whose configuration is not read, or a pattern that is not
/// one). Each owner's own devices are always meant.
/// - Cilium's `devices`: names separated by spaces or commas, a trailing
///   `+` a prefix (pkg/datapath/linux: `--devices=eth+`); its own devices
///   `cilium_*` and its endpoints' `lxc*`; an exclusion (`!eth1`) is not
///   judged.
/// - Calico's `FELIX_BPFDATAIFACEPATTERN`: a regular expression; its own
///   `cali*` workloads and special devices (felix/bpf bpf_ep_mgr.go); and
///   `l3`, its `FELIX_BPFL3IFACEPATTERN` (tunnels, meant in addition). With
///   no `l3` from the agent's environment it may come from a
///   FelixConfiguration the node cannot read: a tunnel (`driver`
///   wireguard, ipip, vxlan, ...) is then not judged.
pub fn meant_device(owner: Owner, configured: &str, l3: Option<&str>, device: &str, driver: &str) -> Option<bool> {
    match owner {
        Owner::Cilium => {
            if device.starts_with("cilium_") || device.starts_with("lxc") {
                return Some(true);
            }
            let entries: Vec<&str> = configured.split([' ', ',', '\n']).filter(|p| !p.is_empty()).collect();
            // A form this rule does not know (an exclusion, as some
            // releases allow): not judged rather than guessed.
            if entries.iter().any(|p| p.starts_with('!')) {
                return None;
            }
            Some(entries.iter().any(|p| match p.strip_suffix('+') {
                Some(prefix) => device.starts_with(prefix),
                None => device == *p,
            }))
        }
        Owner::Calico => {
            const OWN: &[&str] = &[
                "bpfout.cali",
                "bpfin.cali",
                "tunl0",
                "vxlan.calico",
                "vxlan-v6.calico",
                "wireguard.cali",
                "wg-v6.cali",
                "egress.calico",
            ];
            if device.starts_with("cali") || OWN.contains(&device) {
                return Some(true);
            }
            let matches = |pattern: &str| {
                regex::RegexBuilder::new(pattern).size_limit(1 << 20).build().ok().map(|re| re.is_match(device))
            };
            if matches(configured)? {
                return Some(true);
            }
            match l3 {
                Some(l3) => matches(l3),
                None if TUNNELS.contains(&driver) => None,
                None => Some(false),
            }
        }
        _ => None,
    }
}

/// The owner whose device program `name` on `direction` is, by name (a
/// claim, never a proof: `findings::devices` proves it).
pub fn device_program_of(name: &str, direction: Direction) -> Option<(&'static Datapath, &'static DeviceProgram)> {
    DATAPATHS
        .iter()
        .find_map(|d| d.devices.iter().find(|p| p.direction == direction && p.name.matches(name)).map(|p| (d, p)))
}

/// The datapath whose entry program is called `name` (the kernel's 15
/// bytes are enough).
pub fn datapath_of(name: &str) -> Option<&'static Datapath> {
    DATAPATHS.iter().find(|d| d.entry.matches(name))
}

/// An owner's entry.
pub fn spec(owner: Owner) -> Option<&'static Spec> {
    OWNERS.iter().find(|s| s.owner == owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cilium's rule as pkg/datapath/tables has it (a name, or a prefix
    /// with `+`); Calico's a regular expression; each one's own devices
    /// always meant; what neither rule knows is not judged.
    #[test]
    fn a_device_is_meant_as_each_cnis_own_filter_says() {
        let c = |cfg, dev| meant_device(Owner::Cilium, cfg, None, dev, "");
        assert_eq!(c("eth+ ens5", "eth1"), Some(true));
        assert_eq!(c("eth+,ens5", "ens5"), Some(true));
        assert_eq!(c("eth+ ens5", "ens50"), Some(false));
        assert_eq!(c("eth0", "tailscale0"), Some(false));
        assert_eq!(c("eth0", "cilium_host"), Some(true));
        assert_eq!(c("eth0", "lxc12ab"), Some(true));
        assert_eq!(c("!eth1", "eth0"), None);
        let k = |cfg, dev| meant_device(Owner::Calico, cfg, None, dev, "");
        assert_eq!(k("^(en.*|eth.*)$", "ens5"), Some(true));
        assert_eq!(k("^(en.*|eth.*)$", "wg0"), Some(false));
        assert_eq!(k("^eth0$", "cali1234"), Some(true));
        assert_eq!(k("(unclosed", "eth0"), None);
        assert_eq!(meant_device(Owner::Kmesh, "eth0", None, "eth1", ""), None);
        // Red team R2: Calico's tunnels are meant by its L3 pattern; where
        // the environment does not say it, a tunnel is not judged.
        let t = |l3, dev, driver| meant_device(Owner::Calico, "^eth0$", l3, dev, driver);
        assert_eq!(t(Some("^wg0$"), "wg0", "wireguard"), Some(true));
        assert_eq!(t(Some("^wg0$"), "wg1", "wireguard"), Some(false));
        assert_eq!(t(None, "wg0", "wireguard"), None);
        assert_eq!(t(None, "ens6", ""), Some(false));
    }
}
