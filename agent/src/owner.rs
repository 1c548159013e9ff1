//! Pure: who owns a program, from its name and type and where it is attached.
//!
//! Only CNI-owned socket-LB programs are ever judged misplaced; programs that
//! systemd, container runtimes and sidecar meshes legitimately attach below
//! the root are recognised here so the rules leave them alone.

use serde::Serialize;
use strum::IntoEnumIterator;

use crate::bpf::{AttachType, ProgType};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, strum::IntoStaticStr, strum::EnumIter,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Owner {
    Cilium,
    Calico,
    Systemd,
    /// runc/crun device-cgroup programs.
    Runtime,
    /// Kmesh attaches its own connect hooks per workload, by design.
    Kmesh,
    /// OpenTelemetry eBPF Instrumentation (formerly Grafana Beyla): its
    /// `sock_ops` program at the root cgroup tracks connections for
    /// context propagation.
    Obi,
    /// Inspektor Gadget: gadgets may ship a `sock_ops` program, attached at
    /// the root cgroup while the gadget runs. Named by the gadget, so known
    /// by the process holding it (`gadgettracermanager`, `ig`).
    #[serde(rename = "inspektor_gadget")]
    #[strum(serialize = "inspektor_gadget")]
    InspektorGadget,
    /// Matched the user's `--allow` list.
    Allowed,
    Unknown,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A CNI that does socket load balancing from the root cgroup.
    pub fn is_cni(self) -> bool {
        self.cni().is_some()
    }

    pub fn cni(self) -> Option<Cni> {
        match self {
            Owner::Cilium => Some(Cni::Cilium),
            Owner::Calico => Some(Cni::Calico),
            _ => None,
        }
    }

    /// Legitimately attaches below the root: never flagged, never touched.
    pub fn is_benign(self) -> bool {
        matches!(
            self,
            Owner::Systemd | Owner::Runtime | Owner::Kmesh | Owner::Obi | Owner::InspektorGadget | Owner::Allowed
        )
    }
}

/// A CNI that attaches socket load-balancing programs at the root cgroup,
/// through a cgroup2 mount of its own.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::EnumIter,
    strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Cni {
    Cilium,
    Calico,
}

impl Cni {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn owner(self) -> Owner {
        match self {
            Cni::Cilium => Owner::Cilium,
            Cni::Calico => Owner::Calico,
        }
    }

    /// The command name of its node agent, whose cgroup namespace decides
    /// where its cgroup2 mount is rooted.
    pub fn agent_comm(self) -> &'static str {
        match self {
            Cni::Cilium => "cilium-agent",
            Cni::Calico => "calico-node",
        }
    }

    pub fn from_agent_comm(comm: &str) -> Option<Cni> {
        Cni::iter().find(|c| c.agent_comm() == comm)
    }

    /// Where it mounts cgroup2 to attach (Cilium's default
    /// `cgroup.hostRoot`, Calico's fixed path).
    pub fn mount_point(self) -> &'static str {
        match self {
            Cni::Cilium => "/run/cilium/cgroupv2",
            Cni::Calico => "/run/calico/cgroup",
        }
    }

    /// The CNI that attaches through a cgroup2 mount at `path`.
    pub fn from_mount_point(path: &std::path::Path) -> Option<Cni> {
        Cni::iter().find(|c| path.as_os_str() == c.mount_point())
    }

    /// Where it pins its socket-LB objects, below bpffs: Cilium its cgroup
    /// links (1.14+, reused on restart), Calico its connect-time LB programs.
    pub fn pin_dir(self) -> &'static str {
        match self {
            Cni::Cilium => "cilium/socketlb/links/cgroup",
            Cni::Calico => "ctlb",
        }
    }

    /// How to restart its agent on one node, so it attaches again.
    pub fn restart_command(self, node: &str) -> String {
        let (ns, selector, other) = match self {
            Cni::Cilium => ("kube-system", "k8s-app=cilium", ""),
            // The operator's namespace; manifest installs use kube-system.
            Cni::Calico => ("calico-system", "k8s-app=calico-node", " (kube-system for a manifest install)"),
        };
        format!("kubectl -n {ns} delete pod -l {selector} --field-selector spec.nodeName={node}{other}")
    }

    /// What keeps its cgroup2 mount right, in its own settings.
    pub fn mount_advice(self) -> &'static str {
        match self {
            Cni::Cilium => {
                "keep Cilium's `cgroup.autoMount.enabled=true` with `cgroup.hostRoot=/run/cilium/cgroupv2` (its \
                 mount-cgroup init container mounts from PID 1's namespaces),"
            }
            Cni::Calico => {
                "keep calico-node's init container (`mount-bpffs`, `ebpf-bootstrap` from 3.31; `calico-node -init`, \
                 which mounts from PID 1's namespaces through the host's /proc at /nodeproc; releases before 3.28.5, \
                 3.29.5 and 3.30.2 could fail to enter them silently), with `CALICO_CGROUP_PATH`, if set, the same \
                 in it and in calico-node,"
            }
        }
    }

    /// Where its agent says whether socket LB is on and attached.
    pub fn status_hint(self) -> &'static str {
        match self {
            Cni::Cilium => "`cilium-dbg status --verbose`, \"Socket LB\"",
            Cni::Calico => {
                "felix's log for connect-time load balancing; `bpftool cgroup show /run/calico/cgroup` in calico-node"
            }
        }
    }
}

/// What the user told the rules about owners.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Program-name prefixes that are benign wherever they are attached.
    pub allow: Vec<String>,
    /// Kmesh runs on this node: its connect programs below the root are its
    /// design, not a misplacement.
    pub kmesh: bool,
}

/// Prefixes of pre-1.9 Cilium socket-LB programs (before the `cil_` prefix).
const OLD_CILIUM: [&str; 3] = ["sock4_", "sock6_", "sock_release"];

/// The owner a program's name claims, whatever it is and wherever it is
/// attached: a name is chosen by whoever loads the program, so this alone
/// never decides (see `classify`).
pub fn claimed_owner(name: &str) -> Option<Owner> {
    if name.starts_with("cil_") || OLD_CILIUM.iter().any(|p| name.starts_with(p)) {
        Some(Owner::Cilium)
    } else if name.starts_with("calico_") || name.starts_with("cali_") {
        Some(Owner::Calico)
    } else if name.starts_with("sd_") {
        Some(Owner::Systemd)
    } else if name.starts_with("cgroup_connect") {
        Some(Owner::Kmesh)
    } else if name.starts_with("obi_") || name.starts_with("beyla_") {
        Some(Owner::Obi)
    } else if name.is_empty() || name.starts_with("crun") || name.starts_with("runc") {
        Some(Owner::Runtime)
    } else {
        None
    }
}

/// Whether `owner` really attaches a program of `prog_type` named `name`
/// to `hook` (`None`: not attached, only loaded): the (owner, type, hook)
/// pairs each owner uses.
fn owns(owner: Owner, name: &str, prog_type: ProgType, hook: Option<AttachType>) -> bool {
    let on = |hooks: &[&str]| hook.is_none_or(|h| hooks.contains(&h.name()));
    match owner {
        // Socket LB: cgroup_sock_addr / cgroup_sock programs on socket hooks.
        Owner::Cilium | Owner::Calico => prog_type.is_socket() && hook.is_none_or(AttachType::is_socket_lb),
        // IPAddressAllow/Deny (sd_fw_*) and RestrictNetworkInterfaces
        // (sd_restrictif_*) on cgroup_skb, DevicePolicy (sd_devices),
        // SocketBindAllow/Deny (sd_bind4/6).
        Owner::Systemd => {
            if name.starts_with("sd_fw_") || name.starts_with("sd_restrictif") {
                prog_type == ProgType::CgroupSkb && on(&["ingress", "egress"])
            } else if name.starts_with("sd_devices") {
                prog_type == ProgType::CgroupDevice && on(&["device"])
            } else if name.starts_with("sd_bind") {
                prog_type == ProgType::CgroupSockAddr && on(&["bind4", "bind6"])
            } else {
                false
            }
        }
        // runc and crun: one device filter per container.
        Owner::Runtime => prog_type == ProgType::CgroupDevice && on(&["device"]),
        // Kmesh: cgroup_connect4_prog / cgroup_connect6_prog.
        Owner::Kmesh => prog_type == ProgType::CgroupSockAddr && on(&["connect4", "connect6"]),
        // OBI/Beyla: obi_sockmap_tracker (beyla_sockmap_tracker before the
        // donation) on sock_ops; its sk_msg programs attach to a map.
        Owner::Obi => name.contains("sockmap_t") && prog_type == ProgType::SockOps && on(&["sock_ops"]),
        // Known by its holder, not its name (`held_by`).
        Owner::InspektorGadget | Owner::Allowed | Owner::Unknown => false,
    }
}

/// Classifies a program: the owner its name claims, when that owner really
/// attaches such a program to such a hook; `Unknown` otherwise (a
/// `connect4` program named `sd_lb` is not systemd's). `attach_type` is
/// where it is attached, if known; `policy` holds the user's allowed
/// prefixes and whether Kmesh runs here.
pub fn classify(name: &str, prog_type: ProgType, attach_type: Option<AttachType>, policy: &Policy) -> Owner {
    if !name.is_empty() && policy.allow.iter().any(|p| name.starts_with(p.as_str())) {
        return Owner::Allowed;
    }
    match claimed_owner(name) {
        Some(Owner::Kmesh) if !policy.kmesh => Owner::Unknown,
        Some(owner) if owns(owner, name, prog_type, attach_type) => owner,
        _ => Owner::Unknown,
    }
}

/// Command names of processes whose programs are known by holding them:
/// Inspektor Gadget's daemon (`gadgettracermanager`, cut at 15 bytes by
/// the kernel) and its standalone `ig`.
pub const HOLDERS: &[(&str, Owner)] =
    [("gadgettracerman", Owner::InspektorGadget), ("ig", Owner::InspektorGadget)].as_slice();

/// The owner of a program no name claims, by the process that holds it
/// (`comm`): only on the hook and type that owner uses (a gadget's
/// `sock_ops` program at the root).
pub fn held_by(comm: &str, prog_type: ProgType, attach_type: Option<AttachType>) -> Option<Owner> {
    let (_, owner) = HOLDERS.iter().find(|(c, _)| *c == comm)?;
    let on_sock_ops = attach_type.is_none_or(|h| h.name() == "sock_ops");
    (prog_type == ProgType::SockOps && on_sock_ops).then_some(*owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOCK_ADDR: ProgType = ProgType::CgroupSockAddr;
    const SOCK: ProgType = ProgType::CgroupSock;
    const DEVICE: ProgType = ProgType::CgroupDevice;

    fn at(n: &str) -> Option<AttachType> {
        AttachType::from_name(n)
    }

    fn c(name: &str, t: ProgType, hook: &str) -> Owner {
        classify(name, t, at(hook), &Policy::default())
    }

    #[test]
    fn cilium_programs_are_cilium_even_truncated() {
        assert_eq!(c("cil_sock4_connect", SOCK_ADDR, "connect4"), Owner::Cilium);
        assert_eq!(c("cil_sock4_conne", SOCK_ADDR, "connect4"), Owner::Cilium);
        assert_eq!(c("sock6_connect", SOCK_ADDR, "connect6"), Owner::Cilium);
        assert_eq!(c("cil_sock_release", SOCK, "sock_release"), Owner::Cilium);
        assert_eq!(classify("cil_sock4_connect", SOCK_ADDR, None, &Policy::default()), Owner::Cilium, "loaded only");
    }

    #[test]
    fn old_cilium_names_need_a_socket_program_type() {
        assert_eq!(classify("sock4_connect", ProgType::Kprobe, None, &Policy::default()), Owner::Unknown);
    }

    #[test]
    fn calico_systemd_runtime_are_recognised_on_the_hooks_they_use() {
        assert_eq!(c("calico_connect_v4", SOCK_ADDR, "connect4"), Owner::Calico);
        assert_eq!(c("sd_fw_ingress", ProgType::CgroupSkb, "ingress"), Owner::Systemd);
        assert_eq!(c("sd_restrictif_e", ProgType::CgroupSkb, "egress"), Owner::Systemd);
        assert_eq!(c("sd_devices", DEVICE, "device"), Owner::Systemd);
        assert_eq!(c("sd_bind6", SOCK_ADDR, "bind6"), Owner::Systemd);
        assert_eq!(c("", DEVICE, "device"), Owner::Runtime);
    }

    /// A name is chosen by whoever loads the program: claiming a benign
    /// owner on a hook that owner never uses is no cover.
    #[test]
    fn a_benign_name_on_a_hook_its_owner_never_uses_is_unknown() {
        assert_eq!(c("sd_lb", SOCK_ADDR, "connect4"), Owner::Unknown);
        assert_eq!(c("sd_bind4", SOCK_ADDR, "connect4"), Owner::Unknown, "systemd's bind programs are on bind4/6");
        assert_eq!(c("sd_fw_ingress", SOCK_ADDR, "connect4"), Owner::Unknown);
        assert_eq!(c("", SOCK_ADDR, "connect4"), Owner::Unknown, "runtimes attach device programs only");
        assert_eq!(c("runc_x", SOCK_ADDR, "sendmsg4"), Owner::Unknown);
        assert_eq!(c("cil_sock4_connect", DEVICE, "device"), Owner::Unknown, "Cilium attaches no device program");
        assert_eq!(claimed_owner("sd_lb"), Some(Owner::Systemd), "what it claims is still known");
    }

    #[test]
    fn node_agents_at_the_root_are_named_by_name_or_holder() {
        let ops = ProgType::SockOps;
        assert_eq!(c("obi_sockmap_tracker", ops, "sock_ops"), Owner::Obi);
        assert_eq!(c("beyla_sockmap_t", ops, "sock_ops"), Owner::Obi, "Beyla's, cut at 15 bytes");
        assert_eq!(c("obi_sockmap_tracker", SOCK_ADDR, "connect4"), Owner::Unknown, "not on a socket-LB hook");
        assert_eq!(c("obi_lb", ops, "sock_ops"), Owner::Unknown, "not the program OBI attaches");
        assert_eq!(held_by("gadgettracerman", ops, at("sock_ops")), Some(Owner::InspektorGadget));
        assert_eq!(held_by("ig", ops, at("sock_ops")), Some(Owner::InspektorGadget));
        assert_eq!(held_by("gadgettracerman", SOCK_ADDR, at("connect4")), None, "gadgets attach no socket-LB program");
        assert_eq!(held_by("cilium-agent", ops, at("sock_ops")), None);
        assert_eq!(Owner::InspektorGadget.as_str(), "inspektor_gadget");
    }

    #[test]
    fn kmesh_is_only_kmesh_where_the_operator_says_it_runs() {
        assert_eq!(c("cgroup_connect4_prog", SOCK_ADDR, "connect4"), Owner::Unknown);
        let kmesh = Policy { kmesh: true, ..Policy::default() };
        assert_eq!(classify("cgroup_connect4_prog", SOCK_ADDR, at("connect4"), &kmesh), Owner::Kmesh);
        assert_eq!(classify("cgroup_connect4_prog", SOCK_ADDR, at("sendmsg4"), &kmesh), Owner::Unknown);
    }

    #[test]
    fn unnamed_socket_program_is_unknown_not_runtime() {
        assert_eq!(c("", SOCK_ADDR, "connect4"), Owner::Unknown);
    }

    #[test]
    fn allowlist_prefix_wins() {
        let policy = Policy { allow: vec!["my_lb_".to_owned()], ..Policy::default() };
        assert_eq!(classify("my_lb_connect4", SOCK_ADDR, at("connect4"), &policy), Owner::Allowed);
        assert!(Owner::Allowed.is_benign());
        assert!(!Owner::Unknown.is_benign());
        assert!(Owner::Cilium.is_cni() && !Owner::Cilium.is_benign());
    }
}
