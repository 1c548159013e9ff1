//! Pure: who owns a program, from its name and type and where it is attached.
//!
//! Only CNI-owned socket-LB programs are ever judged misplaced; programs that
//! systemd, container runtimes and sidecar meshes legitimately attach below
//! the root are recognised here so the rules leave them alone.

use serde::Serialize;

use crate::bpf::AttachType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
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
        match self {
            Owner::Cilium => "cilium",
            Owner::Calico => "calico",
            Owner::Systemd => "systemd",
            Owner::Runtime => "runtime",
            Owner::Kmesh => "kmesh",
            Owner::Allowed => "allowed",
            Owner::Unknown => "unknown",
        }
    }

    /// A CNI that does socket load balancing from the root cgroup.
    pub fn is_cni(self) -> bool {
        matches!(self, Owner::Cilium | Owner::Calico)
    }

    /// Legitimately attaches below the root: never flagged, never touched.
    pub fn is_benign(self) -> bool {
        matches!(self, Owner::Systemd | Owner::Runtime | Owner::Kmesh | Owner::Allowed)
    }
}

/// Prefixes of pre-1.9 Cilium socket-LB programs (before the `cil_` prefix).
const OLD_CILIUM: [&str; 3] = ["sock4_", "sock6_", "sock_release"];

/// Classifies a program. `attach_type` is where it is attached, if known;
/// `allow` holds user-supplied benign name prefixes.
pub fn classify(name: &str, prog_type: &str, attach_type: Option<AttachType>, allow: &[String]) -> Owner {
    if !name.is_empty() && allow.iter().any(|p| name.starts_with(p.as_str())) {
        return Owner::Allowed;
    }
    let sock_hook = matches!(prog_type, "cgroup_sock_addr" | "cgroup_sock");
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
    let device = prog_type == "cgroup_device" || attach_type.is_some_and(|t| t.name() == "device");
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

    fn at(n: &str) -> Option<AttachType> {
        AttachType::from_name(n)
    }

    #[test]
    fn cilium_programs_are_cilium_even_truncated() {
        assert_eq!(classify("cil_sock4_connect", "cgroup_sock_addr", at("connect4"), &[]), Owner::Cilium);
        assert_eq!(classify("cil_sock4_conne", "cgroup_sock_addr", at("connect4"), &[]), Owner::Cilium);
        assert_eq!(classify("sock6_connect", "cgroup_sock_addr", at("connect6"), &[]), Owner::Cilium);
        assert_eq!(classify("cil_sock_release", "cgroup_sock", at("sock_release"), &[]), Owner::Cilium);
    }

    #[test]
    fn old_cilium_names_need_a_socket_program_type() {
        assert_eq!(classify("sock4_connect", "kprobe", None, &[]), Owner::Unknown);
    }

    #[test]
    fn calico_systemd_runtime_and_kmesh_are_recognised() {
        assert_eq!(classify("calico_connect_v4", "cgroup_sock_addr", at("connect4"), &[]), Owner::Calico);
        assert_eq!(classify("sd_fw_ingress", "cgroup_skb", at("ingress"), &[]), Owner::Systemd);
        assert_eq!(classify("sd_devices", "cgroup_device", at("device"), &[]), Owner::Systemd);
        assert_eq!(classify("", "cgroup_device", at("device"), &[]), Owner::Runtime);
        assert_eq!(classify("cgroup_connect4_prog", "cgroup_sock_addr", at("connect4"), &[]), Owner::Kmesh);
    }

    #[test]
    fn unnamed_socket_program_is_unknown_not_runtime() {
        assert_eq!(classify("", "cgroup_sock_addr", at("connect4"), &[]), Owner::Unknown);
    }

    #[test]
    fn allowlist_prefix_wins() {
        let allow = vec!["my_lb_".to_owned()];
        assert_eq!(classify("my_lb_connect4", "cgroup_sock_addr", at("connect4"), &allow), Owner::Allowed);
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
