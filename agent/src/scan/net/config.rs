//! Which per-endpoint eBPF datapath the node is configured for, said by
//! configuration rather than seen on an interface: what makes a node
//! whose pods carry none of the programs a node with a datapath (every
//! pod outside it) rather than a node without one.
//! - Cilium's datapath is per-endpoint in every mode (veth, netkit,
//!   chaining). Its agent running, taken for Cilium's (privileged), says
//!   so; when it is not running, the node's CNI configuration naming the
//!   `cilium-cni` plugin does.
//! - Calico's is per-endpoint only with its eBPF dataplane:
//!   `FELIX_BPFENABLED=true` in its running agent's environment. Its CNI
//!   configuration does not say which dataplane runs.
//!
//! The CNI configuration is the one the runtime uses: the first `.conf`,
//! `.conflist` or `.json` file by name in `--cni-conf-dir` (libcni's order;
//! containerd and CRI-O load that one), read inside PID 1's root so that a
//! link in it cannot lead out.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use crate::owner::Owner;
use crate::snapshot::AgentProcess;
use crate::snapshot::net::Configured;
use rustix::fs::{FileType, Mode, OFlags};

/// Where the kubelet's runtime reads the node's CNI configuration by
/// default (inside PID 1's root; `--cni-conf-dir`).
pub const CNI_CONF_DIR: &str = "/etc/cni/net.d";
/// A CNI configuration is a few hundred bytes: larger is not read.
const MAX_CONF: u64 = 64 << 10;

/// What the node's agents and CNI configuration say (`proc`: the node's
/// `/proc`; `cni_conf`: the CNI configuration directory in PID 1's root).
pub fn read(agents: &[AgentProcess], proc: &Path, cni_conf: &Path) -> Vec<Configured> {
    let mut out = Vec::new();
    for a in agents.iter().filter(|a| a.privileged) {
        let source = match a.owner {
            Owner::Cilium => Some(format!("{} runs (pid {})", a.comm, a.pid)),
            // As the agents' read found it (under its deadline), not read
            // again here: the pid may be another process's by now.
            Owner::Calico => (a.intent.bpf_dataplane == Some(true))
                .then(|| format!("FELIX_BPFENABLED=true in {}'s environment (pid {})", a.comm, a.pid)),
            _ => None,
        };
        if let Some(source) = source.filter(|_| !out.iter().any(|c: &Configured| c.owner == a.owner)) {
            out.push(Configured { owner: a.owner, source });
        }
    }
    if !out.iter().any(|c| c.owner == Owner::Cilium)
        && let Some((file, types)) = cni_config(proc, cni_conf)
        && types.iter().any(|t| t == "cilium-cni")
    {
        let source = format!("{} names the cilium-cni plugin", cni_conf.join(file).display());
        out.push(Configured { owner: Owner::Cilium, source });
    }
    out
}

/// The node's CNI configuration file (its name) and the plugin types it
/// names, if it can be read: under the deadline of untrusted reads (a
/// writer of the directory can put a FUSE file there), following no link
/// and crossing no mount (issue 47, L2).
fn cni_config(proc: &Path, dir: &Path) -> Option<(String, Vec<String>)> {
    let (proc, dir) = (proc.to_owned(), dir.to_owned());
    let budget = crate::scan::deadline::Budget::new(crate::scan::deadline::READ_DEADLINE);
    let key = crate::scan::deadline::CNI_CONFIG;
    crate::scan::deadline::within(key, &budget, move || read_cni_config(&proc, &dir)).ok().flatten()
}

fn read_cni_config(proc: &Path, dir: &Path) -> Option<(String, Vec<String>)> {
    use crate::scan::in_root::{STRICT, open_dir, read_resolved};
    let root: OwnedFd =
        rustix::fs::open(proc.join("1/root"), OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .ok()?;
    let dir_path = dir.to_str()?.trim_start_matches('/').to_owned();
    let dir = dir_path.as_str();
    // The directory the runtime reads (it may be on a mount of its own:
    // /etc on some distributions, /run), through no link; the files in
    // it through no link and no mount.
    let dir = open_dir(root.as_fd(), dir, rustix::fs::ResolveFlags::NO_SYMLINKS)?;
    let dir_path = format!("/{dir_path}");
    let entries = rustix::fs::Dir::read_from(&dir).ok()?;
    let (first, kind) = first_conf(entries.filter_map(Result::ok).take(MAX_ENTRIES).filter_map(|e| {
        let name = e.file_name().to_str().ok()?.to_owned();
        Some((name, e.file_type()))
    }))?;
    // libcni reads a link too: one to a file of the same directory is
    // followed here (by name, no further); one that leads elsewhere is not
    // read, and the node is taken as not configured.
    let file = if kind == FileType::Symlink {
        let target = rustix::fs::readlinkat(&dir, first.as_str(), Vec::new()).ok()?;
        let target = target.to_str().ok()?.to_owned();
        // A file of this directory, by its name or its absolute path
        // there (red team N7); nothing elsewhere.
        let here = Path::new("/").join(dir_path.trim_start_matches('/'));
        let name = match target.rsplit_once('/') {
            None => target.clone(),
            Some((parent, name)) if Path::new(parent) == here => name.to_owned(),
            Some(_) => return None,
        };
        (name != first && !name.is_empty()).then_some(name)?
    } else {
        first.clone()
    };
    let text = read_resolved(dir.as_fd(), &file, MAX_CONF, STRICT)?;
    let mut types = plugin_types(&text)?;
    // Multus delegates the pods' network: to the configuration its
    // `clusterNetwork` names (a file of this directory, or a network's
    // name), or those of its `delegates` (red team N7: Multus in front of
    // Cilium is the usual layout).
    if types.iter().any(|t| t.starts_with("multus")) {
        let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
        for d in v.get("delegates").and_then(|d| d.as_array()).into_iter().flatten() {
            types.extend(plugin_types(d.to_string().as_bytes()).unwrap_or_default());
        }
        if let Some(cluster) = v.get("clusterNetwork").and_then(|c| c.as_str()) {
            types.extend(cluster_network(dir.as_fd(), cluster).unwrap_or_default());
        }
    }
    Some((first, types))
}

/// The plugin types of the network Multus's `clusterNetwork` names: a file
/// of the configuration directory (by its name, or its path there), or the
/// `name` of one of its first `NETWORKS_READ` files.
fn cluster_network(dir: std::os::fd::BorrowedFd<'_>, cluster: &str) -> Option<Vec<String>> {
    use crate::scan::in_root::{STRICT, read_resolved};
    let file = cluster.rsplit('/').next()?;
    if let Some(text) = read_resolved(dir, file, MAX_CONF, STRICT) {
        return plugin_types(&text);
    }
    let entries = rustix::fs::Dir::read_from(dir).ok()?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .take(MAX_ENTRIES)
        .filter(|e| e.file_type() == FileType::RegularFile)
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
        .filter(|n| [".conf", ".conflist", ".json"].iter().any(|x| n.ends_with(x)))
        .collect();
    names.sort();
    names.into_iter().take(NETWORKS_READ).find_map(|n| {
        let text = read_resolved(dir, &n, MAX_CONF, STRICT)?;
        let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
        (v.get("name").and_then(|x| x.as_str()) == Some(cluster)).then(|| plugin_types(&text)).flatten()
    })
}

/// The most configuration files looked at for Multus's `clusterNetwork`.
const NETWORKS_READ: usize = 64;

/// The most entries of the CNI configuration directory looked at.
const MAX_ENTRIES: usize = 200_000;

/// The file the runtime loads: the first by name with a CNI extension,
/// directories skipped (libcni's `ConfFiles`). The entries are looked at
/// as they stream: a directory of 200,000 names costs one name's memory
/// (issue 47 red team, F7).
pub fn first_conf(entries: impl IntoIterator<Item = (String, FileType)>) -> Option<(String, FileType)> {
    entries
        .into_iter()
        .filter(|(n, kind)| {
            *kind != FileType::Directory && [".conf", ".conflist", ".json"].iter().any(|e| n.ends_with(e))
        })
        .min_by(|a, b| a.0.cmp(&b.0))
}

/// The plugin types a network configuration (`.conf`) or list
/// (`.conflist`) names; `None` if it is not one.
pub fn plugin_types(text: &[u8]) -> Option<Vec<String>> {
    let v: serde_json::Value = serde_json::from_slice(text).ok()?;
    let ty = |p: &serde_json::Value| p.get("type").and_then(|t| t.as_str()).map(str::to_owned);
    match v.get("plugins") {
        Some(serde_json::Value::Array(plugins)) => Some(plugins.iter().filter_map(ty).collect()),
        _ => Some(vec![ty(&v)?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<(String, FileType)> {
        names.iter().map(|n| (n.to_string(), FileType::RegularFile)).collect()
    }

    #[test]
    fn the_runtime_loads_the_first_file_by_name() {
        let names = ["10-aws.conflist", "05-cilium.conflist", "00-readme.txt", "99-loopback.conf"];
        assert_eq!(first_conf(files(&names)).map(|f| f.0).as_deref(), Some("05-cilium.conflist"));
        assert_eq!(first_conf(files(&["cni.conf.bak"])), None);
    }

    /// Issue 47 red team, F7: a directory named like a configuration is not
    /// the first file (libcni skips it), and a link is one.
    #[test]
    fn a_directory_named_like_a_configuration_is_skipped_as_libcni_skips_it() {
        let mut entries = files(&["05-cilium.conflist"]);
        entries.push(("00-x.conf".into(), FileType::Directory));
        assert_eq!(first_conf(entries.clone()).map(|f| f.0).as_deref(), Some("05-cilium.conflist"));
        entries.push(("01-y.conflist".into(), FileType::Symlink));
        assert_eq!(first_conf(entries), Some(("01-y.conflist".to_owned(), FileType::Symlink)));
    }

    /// Cilium's own list, its chaining on another CNI, and a plain `.conf`.
    #[test]
    fn plugin_types_come_from_a_list_or_a_single_network() {
        let cilium =
            br#"{"cniVersion":"0.3.1","name":"cilium","plugins":[{"type":"cilium-cni","enable-debug":false}]}"#;
        assert_eq!(plugin_types(cilium), Some(vec!["cilium-cni".to_owned()]));
        let chained = br#"{"name":"aws-cni","plugins":[{"type":"aws-cni"},{"type":"egress-cni"},{"type":"portmap"},{"type":"cilium-cni"}]}"#;
        assert_eq!(plugin_types(chained).unwrap().last().map(String::as_str), Some("cilium-cni"));
        let single = br#"{"cniVersion":"1.0.0","name":"pods","type":"ptp","ipam":{"type":"host-local"}}"#;
        assert_eq!(plugin_types(single), Some(vec!["ptp".to_owned()]));
        assert_eq!(plugin_types(b"not json"), None);
        assert_eq!(plugin_types(br#"{"name":"x"}"#), None);
    }
}
