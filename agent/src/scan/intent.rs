//! What a CNI agent's own configuration says about socket load balancing,
//! read from the node through the agent's process, read-only, one named key
//! at a time: Cilium's `--config-dir` files (by default
//! `/tmp/cilium/config-map/<key>` inside its container, reached through
//! `/proc/<pid>/root`), Calico's `FELIX_*` environment (`/proc/<pid>/environ`).
//! Whatever is missing, unreadable or unexpected makes the intent unknown,
//! said as such, never an error.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::owner::Owner;
use crate::snapshot::{Intent, SocketLb};

/// Cilium's default `--config-dir` (its DaemonSet mounts the ConfigMap there).
pub const CILIUM_CONFIG_DIR: &str = "/tmp/cilium/config-map";
/// The Cilium keys read.
pub const CILIUM_KEYS: [&str; 3] = ["kube-proxy-replacement", "bpf-lb-sock", "bpf-lb-sock-hostns-only"];
/// The Calico variables read.
pub const CALICO_KEYS: [&str; 3] =
    ["FELIX_BPFENABLED", "FELIX_BPFCONNECTTIMELOADBALANCING", "FELIX_BPFCONNECTTIMELOADBALANCINGENABLED"];

/// A value is a short word: more than this is not one.
const MAX_VALUE: usize = 256;
/// An environment larger than this is not read.
const MAX_ENVIRON: u64 = 1 << 20;

/// What `owner`'s agent's configuration says (Cilium's and Calico's are
/// read; the others' say nothing about socket LB the rules use).
pub fn read(proc: &Path, pid: u32, owner: Owner) -> Intent {
    let dir = proc.join(pid.to_string());
    match owner {
        Owner::Cilium => cilium(&dir),
        Owner::Calico => calico(&dir),
        other => Intent::unknown(format!("{}'s configuration is not read", other.title())),
    }
}

fn cilium(dir: &Path) -> Intent {
    let cmdline = read_capped(&dir.join("cmdline"), MAX_ENVIRON).unwrap_or_default();
    let config_dir = config_dir(&cmdline).unwrap_or_else(|| CILIUM_CONFIG_DIR.to_owned());
    let Ok(root) =
        rustix::fs::open(dir.join("root"), OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    else {
        return Intent::unknown("the agent's root could not be opened");
    };
    let value = |key: &str| in_root(&root, &Path::new(&config_dir).join(key));
    let [kpr, sock, hostns] = CILIUM_KEYS.map(value);
    let mut intent = cilium_intent(kpr.as_deref(), sock.as_deref(), hostns.as_deref(), &config_dir);
    // The devices its datapath is for (unset: auto-detected).
    intent.devices = value("devices").filter(|d| !d.is_empty());
    intent.pod_cidrs = ["cluster-pool-ipv4-cidr", "cluster-pool-ipv6-cidr"]
        .into_iter()
        .filter_map(value)
        .flat_map(|v| v.split([' ', ',']).filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>())
        .collect();
    intent
}

/// Cilium's socket LB from its three keys (`None`: the file is absent).
pub fn cilium_intent(kpr: Option<&str>, sock: Option<&str>, hostns: Option<&str>, config_dir: &str) -> Intent {
    let shown: Vec<String> =
        CILIUM_KEYS.iter().zip([kpr, sock, hostns]).filter_map(|(k, v)| Some(format!("{k}={}", v?))).collect();
    let evidence = if shown.is_empty() {
        format!("none of {} in {config_dir}", CILIUM_KEYS.join(", "))
    } else {
        format!("{} (in {config_dir})", shown.join(", "))
    };
    let on = |v: Option<&str>| match v? {
        "true" | "strict" => Some(true),
        "false" | "disabled" => Some(false),
        _ => None,
    };
    let socket_lb = match (on(kpr), on(sock), on(hostns)) {
        (Some(true), _, Some(true)) | (_, Some(true), Some(true)) => SocketLb::HostNamespaceOnly,
        (Some(true), _, _) | (_, Some(true), _) => SocketLb::On,
        (Some(false), Some(false), _) | (Some(false), None, _) | (None, Some(false), _) => SocketLb::Off,
        _ => SocketLb::Unknown,
    };
    Intent { socket_lb, evidence, bpf_dataplane: None, devices: None, l3_devices: None, pod_cidrs: Vec::new() }
}

/// `--config-dir=X` or `--config-dir X` in a NUL-separated command line.
fn config_dir(cmdline: &[u8]) -> Option<String> {
    let args: Vec<&str> = cmdline.split(|&b| b == 0).filter_map(|a| std::str::from_utf8(a).ok()).collect();
    args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--config-dir") {
        Some(v) if v.starts_with('=') => Some(v[1..].to_owned()),
        Some("") => args.get(i + 1).map(|v| (*v).to_owned()),
        _ => None,
    })
}

fn calico(dir: &Path) -> Intent {
    let Some(environ) = read_capped(&dir.join("environ"), MAX_ENVIRON) else {
        return Intent::unknown("the agent's environment could not be read");
    };
    let [bpf, ctlb, ctlb_legacy] = CALICO_KEYS.map(|key| env_value(&environ, key));
    let mut intent = calico_intent(bpf.as_deref(), ctlb.as_deref(), ctlb_legacy.as_deref());
    intent.devices = env_value(&environ, "FELIX_BPFDATAIFACEPATTERN").filter(|d| !d.is_empty());
    intent.l3_devices = env_value(&environ, "FELIX_BPFL3IFACEPATTERN").filter(|d| !d.is_empty());
    intent.pod_cidrs = ["CALICO_IPV4POOL_CIDR", "CALICO_IPV6POOL_CIDR"]
        .into_iter()
        .filter_map(|k| env_value(&environ, k))
        .filter(|c| !c.is_empty())
        .collect();
    intent
}

fn env_value(environ: &[u8], key: &str) -> Option<String> {
    environ.split(|&b| b == 0).find_map(|kv| {
        let v = kv.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
        std::str::from_utf8(v).ok().filter(|v| v.len() <= MAX_VALUE).map(str::to_owned)
    })
}

/// Calico's connect-time LB from its environment (`None`: not set there;
/// it may then come from a FelixConfiguration, which the node cannot read).
pub fn calico_intent(bpf: Option<&str>, ctlb: Option<&str>, ctlb_legacy: Option<&str>) -> Intent {
    let shown: Vec<String> =
        CALICO_KEYS.iter().zip([bpf, ctlb, ctlb_legacy]).filter_map(|(k, v)| Some(format!("{k}={}", v?))).collect();
    let evidence = if shown.is_empty() {
        format!("none of {} in the agent's environment", CALICO_KEYS.join(", "))
    } else {
        format!("{} (in the agent's environment)", shown.join(", "))
    };
    let yes = |v: &str| v.eq_ignore_ascii_case("true");
    let socket_lb = match (bpf, ctlb, ctlb_legacy) {
        (Some(b), ..) if !yes(b) => SocketLb::Off,
        (Some(_), Some(c), _) if c.eq_ignore_ascii_case("disabled") => SocketLb::Off,
        (Some(_), Some(c), _) if c.eq_ignore_ascii_case("tcp") || c.eq_ignore_ascii_case("enabled") => SocketLb::On,
        (Some(_), None, Some(l)) => {
            if yes(l) {
                SocketLb::On
            } else {
                SocketLb::Off
            }
        }
        _ => SocketLb::Unknown,
    };
    Intent { socket_lb, evidence, bpf_dataplane: bpf.map(yes), devices: None, l3_devices: None, pod_cidrs: Vec::new() }
}

/// The trimmed contents of `path` inside the root open at `root`: links
/// resolve inside that root (a ConfigMap's files are links into `..data`),
/// only a regular file of at most `MAX_VALUE` bytes is read.
fn in_root(root: &OwnedFd, path: &Path) -> Option<String> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let bytes = super::in_root::read(root.as_fd(), rel.to_str()?, MAX_VALUE as u64)?;
    Some(String::from_utf8(bytes).ok()?.trim().to_owned())
}

fn read_capped(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path).ok()?.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cilium_socket_lb_follows_its_keys() {
        let d = CILIUM_CONFIG_DIR;
        assert_eq!(cilium_intent(Some("true"), None, None, d).socket_lb, SocketLb::On);
        assert_eq!(cilium_intent(Some("false"), Some("true"), None, d).socket_lb, SocketLb::On);
        assert_eq!(cilium_intent(Some("true"), None, Some("true"), d).socket_lb, SocketLb::HostNamespaceOnly);
        assert_eq!(cilium_intent(Some("false"), None, None, d).socket_lb, SocketLb::Off);
        assert_eq!(cilium_intent(Some("false"), Some("false"), Some("false"), d).socket_lb, SocketLb::Off);
        assert_eq!(cilium_intent(None, None, None, d).socket_lb, SocketLb::Unknown);
        assert_eq!(cilium_intent(Some("partial"), None, None, d).socket_lb, SocketLb::Unknown);
        let i = cilium_intent(Some("true"), None, None, d);
        assert_eq!(i.evidence, "kube-proxy-replacement=true (in /tmp/cilium/config-map)");
    }

    #[test]
    fn calico_connect_time_lb_follows_its_environment() {
        assert_eq!(calico_intent(Some("true"), Some("TCP"), None).socket_lb, SocketLb::On);
        assert_eq!(calico_intent(Some("true"), Some("Disabled"), None).socket_lb, SocketLb::Off);
        assert_eq!(calico_intent(Some("false"), None, None).socket_lb, SocketLb::Off);
        assert_eq!(calico_intent(Some("true"), None, Some("true")).socket_lb, SocketLb::On);
        // Set in a FelixConfiguration, perhaps: the node cannot tell.
        assert_eq!(calico_intent(Some("true"), None, None).socket_lb, SocketLb::Unknown);
        assert_eq!(calico_intent(None, None, None).socket_lb, SocketLb::Unknown);
    }

    #[test]
    fn the_config_dir_comes_from_the_command_line() {
        assert_eq!(config_dir(b"cilium-agent\0--config-dir=/x\0"), Some("/x".into()));
        assert_eq!(config_dir(b"cilium-agent\0--config-dir\0/y\0--debug\0"), Some("/y".into()));
        assert_eq!(config_dir(b"cilium-agent\0--debug\0"), None);
    }
}
