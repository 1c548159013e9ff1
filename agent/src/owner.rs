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
        matches!(self, Owner::Systemd | Owner::Runtime | Owner::Kmesh | Owner::Allowed)
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

    /// How to restart its agent on one node, so it attaches again.
    pub fn restart_command(self, node: &str) -> String {
        let (ns, selector) = match self {
            Cni::Cilium => ("kube-system", "k8s-app=cilium"),
            Cni::Calico => ("calico-system", "k8s-app=calico-node"),
        };
        format!("kubectl -n {ns} delete pod -l {selector} --field-selector spec.nodeName={node}")
    }
}

/// Prefixes of pre-1.9 Cilium socket-LB programs (before the `cil_` prefix).
const OLD_CILIUM: [&str; 3] = ["sock4_", "sock6_", "sock_release"];

/// Classifies a program. `attach_type` is where it is attached, if known;
/// `allow` holds user-supplied benign name prefixes.
pub fn classify(name: &str, prog_type: ProgType, attach_type: Option<AttachType>, allow: &[String]) -> Owner {
    if !name.is_empty() && allow.iter().any(|p| name.starts_with(p.as_str())) {
        return Owner::Allowed;
    }
    let sock_hook = prog_type.is_socket();
    if name.starts_with("cil_") || (sock_hook && OLD_CILIUM.iter().any(|p| name.starts_with(p))) {
        return Owner::Cilium;
    }
    if name.starts_with("calico_") || name.starts_with("cali_") {
        return Owner::Calico;
    }
    if name.starts_with("sd_") {
        return Owner::Systemd;
    }
    if name.starts_with("cgroup_connect") && sock_hook {
        return Owner::Kmesh;
    }
    // runc and crun load an unnamed cgroup_device program per container.
    let device = prog_type == ProgType::CgroupDevice || attach_type.is_some_and(|t| t.name() == "device");
    if device && (name.is_empty() || name.starts_with("crun") || name.starts_with("runc")) {
        return Owner::Runtime;
    }
    Owner::Unknown
}

/// The socket-LB hook a CNI program is built for, from its name
/// (`cil_sock4_connect` -> connect4, `calico_sendmsg_v6` -> sendmsg6).
pub fn intended_hook(name: &str) -> Option<AttachType> {
    let (fam, rest) = if let Some(r) = name.strip_prefix("cil_sock4_").or_else(|| name.strip_prefix("sock4_")) {
        ("4", r)
    } else if let Some(r) = name.strip_prefix("cil_sock6_").or_else(|| name.strip_prefix("sock6_")) {
        ("6", r)
    } else if name.starts_with("cil_sock_release") || name == "sock_release" {
        return AttachType::from_name("sock_release");
    } else if let Some(r) = name.strip_prefix("calico_") {
        let (op, fam) = r.rsplit_once("_v")?;
        // _v46 programs handle v4-mapped addresses on the v6 hooks.
        return AttachType::from_name(&format!("{op}{}", if fam == "4" { "4" } else { "6" }));
    } else {
        return None;
    };
    // Cilium names are cut at 15 bytes by the kernel: match on prefixes.
    let op = ["connect", "sendmsg", "recvmsg", "getpeername", "post_bind", "pre_bind"]
        .into_iter()
        .find(|op| op.starts_with(rest) || rest.starts_with(op))
        .filter(|_| !rest.is_empty())?;
    let op = if op == "pre_bind" { "bind" } else { op };
    AttachType::from_name(&format!("{op}{fam}"))
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

    #[test]
    fn cilium_programs_are_cilium_even_truncated() {
        assert_eq!(classify("cil_sock4_connect", SOCK_ADDR, at("connect4"), &[]), Owner::Cilium);
        assert_eq!(classify("cil_sock4_conne", SOCK_ADDR, at("connect4"), &[]), Owner::Cilium);
        assert_eq!(classify("sock6_connect", SOCK_ADDR, at("connect6"), &[]), Owner::Cilium);
        assert_eq!(classify("cil_sock_release", SOCK, at("sock_release"), &[]), Owner::Cilium);
    }

    #[test]
    fn old_cilium_names_need_a_socket_program_type() {
        assert_eq!(classify("sock4_connect", ProgType::Kprobe, None, &[]), Owner::Unknown);
    }

    #[test]
    fn calico_systemd_runtime_and_kmesh_are_recognised() {
        assert_eq!(classify("calico_connect_v4", SOCK_ADDR, at("connect4"), &[]), Owner::Calico);
        assert_eq!(classify("sd_fw_ingress", ProgType::CgroupSkb, at("ingress"), &[]), Owner::Systemd);
        assert_eq!(classify("sd_devices", DEVICE, at("device"), &[]), Owner::Systemd);
        assert_eq!(classify("", DEVICE, at("device"), &[]), Owner::Runtime);
        assert_eq!(classify("cgroup_connect4_prog", SOCK_ADDR, at("connect4"), &[]), Owner::Kmesh);
    }

    #[test]
    fn unnamed_socket_program_is_unknown_not_runtime() {
        assert_eq!(classify("", SOCK_ADDR, at("connect4"), &[]), Owner::Unknown);
    }

    #[test]
    fn allowlist_prefix_wins() {
        let allow = vec!["my_lb_".to_owned()];
        assert_eq!(classify("my_lb_connect4", SOCK_ADDR, at("connect4"), &allow), Owner::Allowed);
        assert!(Owner::Allowed.is_benign());
        assert!(!Owner::Unknown.is_benign());
        assert!(Owner::Cilium.is_cni() && !Owner::Cilium.is_benign());
    }

    #[test]
    fn intended_hooks_follow_names() {
        let h = |n| intended_hook(n).map(AttachType::name);
        assert_eq!(h("cil_sock4_connect"), Some("connect4"));
        assert_eq!(h("cil_sock6_conne"), Some("connect6"));
        assert_eq!(h("cil_sock4_getpe"), Some("getpeername4"));
        assert_eq!(h("cil_sock4_post_bind"), Some("post_bind4"));
        assert_eq!(h("cil_sock6_pre_bind"), Some("bind6"));
        assert_eq!(h("cil_sock_release"), Some("sock_release"));
        assert_eq!(h("calico_connect_v4"), Some("connect4"));
        assert_eq!(h("calico_sendmsg_v46"), Some("sendmsg6"));
        assert_eq!(h("calico_recvmsg_v6"), Some("recvmsg6"));
        assert_eq!(h("cil_from_netdev"), None);
        assert_eq!(h("cil_sock4_"), None);
    }
}
