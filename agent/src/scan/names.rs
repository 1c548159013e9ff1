//! Pod and container names, read from the node itself through PID 1's root
//! (`<proc>/1/root`), never from the API server: the names an SRE acts on
//! (`kube-system/cilium-x7k2p`, container `cilium-agent`) instead of a pod
//! UID and a container id.
//!
//! Sources, by container id:
//!
//! - containerd: its task bundle's OCI `config.json` annotations
//!   (`io.kubernetes.cri.sandbox-namespace`, `-name`, `-uid`,
//!   `io.kubernetes.cri.container-name`), under
//!   `/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/` (k3s:
//!   `/run/k3s/containerd/...`);
//! - CRI-O and podman: containers/storage's `userdata/config.json`
//!   annotations (`io.kubernetes.pod.namespace`, `.name`, `.uid`,
//!   `io.kubernetes.container.name`), under `/run/containers/storage` or
//!   `/var/lib/containers/storage`, `overlay-containers/<id>/userdata/`;
//! - Docker with cri-dockerd: the same keys as container labels in
//!   `/var/lib/docker/containers/<id>/config.v2.json`;
//! - any runtime: the kubelet's log links
//!   `/var/log/containers/<pod>_<ns>_<container>-<id>.log`.
//!
//! Pods by UID: the kubelet's `/var/log/pods/<ns>_<name>_<uid>/`.
//!
//! Everything is read lazily, only for what a finding names; each file
//! through `openat2(RESOLVE_IN_ROOT)` (a link cannot leave the node's root),
//! only a regular file, size-capped, never waiting on a FIFO. Anything
//! missing, malformed or not a valid Kubernetes name is "name unknown",
//! never an error. A source that states a pod UID other than the one the
//! cgroup path gives is not believed, nor are the kubelet's logs where two
//! entries disagree about one pod or one container (a log shipper's pod
//! can write /var/log; it cannot write the runtimes' state under /run).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use serde::Deserialize;

use super::in_root::{list, open_in};

use crate::snapshot::{ContainerName, Names, NamesWanted as Wanted, PodName};

/// A runtime's JSON file larger than this is not read (an OCI config is
/// tens of KiB; a huge environment could make one a few MiB).
const MAX_CONFIG: u64 = 8 << 20;

fn read(root: BorrowedFd<'_>, path: &str) -> Option<Vec<u8>> {
    super::in_root::read(root, path, MAX_CONFIG)
}

/// containerd's state directories (`state` in its config): the default and
/// k3s/RKE2's.
const CONTAINERD_STATES: [&str; 2] = ["run/containerd", "run/k3s/containerd"];
/// containers/storage's run and graph roots (CRI-O, podman).
const STORAGE_ROOTS: [&str; 2] = ["run/containers/storage", "var/lib/containers/storage"];

/// Looks names up and remembers what it found (a container's or a pod's
/// name never changes), for as long as something still asks for it.
#[derive(Debug)]
pub struct Namer {
    root: std::path::PathBuf,
    found: Names,
}

impl Namer {
    /// Reads through `<proc>/1/root`.
    pub fn new(proc: &Path) -> Namer {
        Namer { root: proc.join("1/root"), found: Names::default() }
    }

    /// The names of what `wanted` lists that can be found; only those are
    /// kept for next time.
    pub fn lookup(&mut self, wanted: &Wanted) -> Names {
        self.found.pods.retain(|uid, _| wanted.pods.contains(uid));
        self.found.containers.retain(|id, c| c.is_some() && wanted.containers.contains_key(id));
        if wanted.is_empty() {
            return Names::default();
        }
        let missing_containers: Vec<(String, Wanting)> = wanted
            .containers
            .iter()
            .filter(|(id, _)| !self.found.containers.contains_key(*id))
            .map(|(id, w)| (id.clone(), w.clone()))
            .collect();
        let missing_pods: Vec<String> =
            wanted.pods.iter().filter(|u| !self.found.pods.contains_key(*u)).cloned().collect();
        if !missing_pods.is_empty() || !missing_containers.is_empty() {
            // Files others write (the kubelet's logs, a log shipper's pod
            // can write there too) on file systems that may never answer:
            // read under the pass's deadline for such reads, like the CNI
            // agents' configuration.
            let root = self.root.clone();
            let read = move || read_names(&root, &missing_containers, &missing_pods);
            let budget = super::deadline::Budget::new(super::deadline::READ_DEADLINE);
            if let Ok((containers, pods)) = super::deadline::within(1, &budget, read) {
                for (uid, pod) in pods {
                    self.found.pods.entry(uid).or_insert(pod);
                }
                self.found.containers.extend(containers);
            }
        }
        let mut out = self.found.clone();
        out.containers.retain(|id, _| wanted.containers.contains_key(id));
        // Not found this time: asked again next time (a container's files
        // may appear after its cgroup).
        self.found.containers.retain(|_, c| c.is_some());
        out
    }
}

/// A container asked for: the pod UID and runtime its cgroup path gives.
type Wanting = (Option<String>, Option<&'static str>);

/// What could be read of the names asked for, through the node's root at
/// `root`: each container's (or `None`), and the pods' (by UID).
#[expect(clippy::type_complexity, reason = "the two answers, each a plain list")]
fn read_names(
    root: &Path,
    containers: &[(String, Wanting)],
    pods: &[String],
) -> (Vec<(String, Option<ContainerName>)>, Vec<(String, PodName)>) {
    let mut found_containers = Vec::new();
    let mut found_pods: Vec<(String, PodName)> = Vec::new();
    let Ok(root) = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) else {
        return (found_containers, found_pods);
    };
    let mut log_links = None;
    for (id, (uid, runtime)) in containers {
        let named = container(root.as_fd(), id, *runtime)
            .or_else(|| {
                let links = log_links.get_or_insert_with(|| list(root.as_fd(), "var/log/containers"));
                from_log_link(root.as_fd(), links, id)
            })
            .filter(|(_, stated_uid)| match (uid, stated_uid) {
                (Some(path_uid), Some(stated)) => path_uid == stated,
                _ => true,
            })
            .map(|(name, _)| name);
        // The container's source names its pod too.
        if let (Some(uid), Some(n)) = (uid, &named)
            && !found_pods.iter().any(|(u, _)| u == uid)
        {
            found_pods.push((uid.clone(), n.pod.clone()));
        }
        found_containers.push((id.clone(), named));
    }
    let unnamed: Vec<&String> = pods.iter().filter(|u| !found_pods.iter().any(|(f, _)| f == *u)).collect();
    if !unnamed.is_empty() {
        // A pod has one log directory. Two for one UID: someone who can
        // write /var/log made one; neither is believed.
        let mut dirs: HashMap<&str, Option<PodName>> = HashMap::new();
        let entries = list(root.as_fd(), "var/log/pods");
        for (uid, pod) in entries.iter().filter_map(|e| pod_log_dir(e)) {
            if unnamed.iter().any(|u| u.as_str() == uid) {
                dirs.entry(uid).and_modify(|seen| agree(seen, &pod)).or_insert(Some(pod));
            }
        }
        found_pods.extend(dirs.into_iter().filter_map(|(uid, pod)| Some((uid.to_owned(), pod?))));
    }
    (found_containers, found_pods)
}

/// A container's names and the pod UID its source states.
type Found = (ContainerName, Option<String>);

fn container(root: BorrowedFd<'_>, id: &str, runtime: Option<&'static str>) -> Option<Found> {
    if !is_container_id(id) {
        return None;
    }
    let containerd = || {
        CONTAINERD_STATES.iter().find_map(|state| {
            let path = format!("{state}/io.containerd.runtime.v2.task/k8s.io/{id}/config.json");
            from_annotations(&read(root, &path)?, "containerd")
        })
    };
    let storage = |source| {
        STORAGE_ROOTS.iter().find_map(|r| {
            let path = format!("{r}/overlay-containers/{id}/userdata/config.json");
            from_annotations(&read(root, &path)?, source)
        })
    };
    let docker = || {
        docker_roots(root)
            .iter()
            .find_map(|r| from_docker(&read(root, &format!("{r}/containers/{id}/config.v2.json"))?))
    };
    match runtime {
        Some("containerd") => containerd(),
        Some("cri-o") => storage("cri-o"),
        Some("podman") => storage("podman"),
        Some("docker") => docker(),
        // The cgroupfs driver names no runtime: the id is looked up in each.
        _ => containerd().or_else(|| storage("cri-o")).or_else(docker),
    }
}

/// `/etc/docker/daemon.json`, for where Docker keeps its state.
#[derive(Deserialize)]
struct DockerDaemon {
    #[serde(rename = "data-root")]
    data_root: Option<String>,
    /// The key's name before Docker 17.05.
    graph: Option<String>,
}

/// Docker's data roots, relative to the node's root: the default, and
/// `data-root` from the node's `/etc/docker/daemon.json` (root's file; read
/// in the node's root like the rest, so no path there leaves it).
fn docker_roots(root: BorrowedFd<'_>) -> Vec<String> {
    let mut roots = vec!["var/lib/docker".to_owned()];
    let configured = read(root, "etc/docker/daemon.json")
        .and_then(|json| serde_json::from_slice::<DockerDaemon>(&json).ok())
        .and_then(|d| d.data_root.or(d.graph));
    if let Some(dir) = configured {
        let dir = dir.trim_matches('/').to_owned();
        if !dir.is_empty() && !roots.contains(&dir) {
            roots.push(dir);
        }
    }
    roots
}

#[derive(Deserialize)]
struct OciConfig {
    #[serde(default)]
    annotations: HashMap<String, String>,
}

/// Names from OCI annotations, containerd's CRI keys or the
/// `io.kubernetes.*` keys CRI-O and podman write.
pub fn from_annotations(json: &[u8], source: &'static str) -> Option<Found> {
    let a = serde_json::from_slice::<OciConfig>(json).ok()?.annotations;
    let get = |k: &str| a.get(k).map(String::as_str);
    if let (Some(ns), Some(name)) = (get("io.kubernetes.cri.sandbox-namespace"), get("io.kubernetes.cri.sandbox-name"))
    {
        let sandbox = get("io.kubernetes.cri.container-type") == Some("sandbox");
        let container = if sandbox { None } else { Some(get("io.kubernetes.cri.container-name")?) };
        return named(ns, name, container, get("io.kubernetes.cri.sandbox-uid"), source);
    }
    let source =
        if source == "podman" && get("io.kubernetes.cri-o.ContainerType").is_some() { "cri-o" } else { source };
    kubernetes_keys(&get, source)
}

/// `io.kubernetes.pod.namespace`, `.name`, `.uid` and
/// `io.kubernetes.container.name` (`POD` for a sandbox), as CRI-O's
/// annotations and cri-dockerd's labels spell them.
fn kubernetes_keys<'a>(get: &impl Fn(&str) -> Option<&'a str>, source: &'static str) -> Option<Found> {
    let container = match get("io.kubernetes.container.name") {
        Some("POD") | None => None,
        Some(c) => Some(c),
    };
    let sandbox = matches!(get("io.kubernetes.cri-o.ContainerType"), Some("sandbox"))
        || matches!(get("io.kubernetes.docker.type"), Some("podsandbox"))
        || get("io.kubernetes.container.name") == Some("POD");
    if container.is_none() && !sandbox {
        return None;
    }
    named(
        get("io.kubernetes.pod.namespace")?,
        get("io.kubernetes.pod.name")?,
        container,
        get("io.kubernetes.pod.uid"),
        source,
    )
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(rename = "Config")]
    config: DockerInner,
}

#[derive(Deserialize)]
struct DockerInner {
    #[serde(rename = "Labels", default)]
    labels: Option<HashMap<String, String>>,
}

/// Names from a Docker container's labels, as cri-dockerd sets them.
pub fn from_docker(json: &[u8]) -> Option<Found> {
    let labels = serde_json::from_slice::<DockerConfig>(json).ok()?.config.labels?;
    kubernetes_keys(&|k: &str| labels.get(k).map(String::as_str), "docker")
}

fn named(ns: &str, name: &str, container: Option<&str>, uid: Option<&str>, source: &'static str) -> Option<Found> {
    let ok = is_dns_label(ns) && is_dns_subdomain(name) && container.is_none_or(is_dns_label);
    ok.then(|| {
        let pod = PodName { namespace: ns.to_owned(), name: name.to_owned() };
        (ContainerName { pod, container: container.map(str::to_owned), source }, uid.map(str::to_owned))
    })
}

/// `<pod>_<ns>_<container>-<id>.log` in `/var/log/containers`, a link to
/// `/var/log/pods/<ns>_<pod>_<uid>/<container>/N.log`.
///
/// A container has one such link: where several name it differently,
/// someone who can write /var/log made the others, and none is believed.
fn from_log_link(root: BorrowedFd<'_>, links: &[String], id: &str) -> Option<Found> {
    let suffix = format!("-{id}.log");
    let mut found: Option<Option<Found>> = None;
    for entry in links.iter().filter(|l| l.ends_with(&suffix)) {
        if let Some(this) = log_link(root, entry, &suffix) {
            match &mut found {
                None => found = Some(Some(this)),
                Some(seen) => agree(seen, &this),
            }
        }
    }
    found.flatten()
}

/// `seen` stays what it is if `this` says the same, and becomes `None`
/// (nothing believed) if not.
fn agree<T: PartialEq>(seen: &mut Option<T>, this: &T) {
    if seen.as_ref() != Some(this) {
        *seen = None;
    }
}

/// One log link `entry` (ending in `suffix`): the names it gives, if its
/// target agrees with its own name.
fn log_link(root: BorrowedFd<'_>, entry: &str, suffix: &str) -> Option<Found> {
    let mut parts = entry.strip_suffix(&suffix)?.split('_');
    let (pod, ns, container) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let dir = open_in(root, "var/log/containers", OFlags::PATH | OFlags::DIRECTORY)?;
    let target = rustix::fs::readlinkat(&dir, entry, Vec::new()).ok()?;
    let target = target.to_str().ok()?;
    let dir = target.strip_prefix("/var/log/pods/")?.split('/').next()?;
    let (uid, in_dir) = pod_log_dir(dir)?;
    if in_dir.namespace != ns || in_dir.name != pod {
        return None;
    }
    let (mut found, _) = named(ns, pod, Some(container), None, "kubelet logs")?;
    found.pod = in_dir;
    Some((found, Some(uid.to_owned())))
}

/// `<ns>_<name>_<uid>`, a pod's log directory under `/var/log/pods`.
pub fn pod_log_dir(dir: &str) -> Option<(&str, PodName)> {
    let mut parts = dir.split('_');
    let (ns, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !is_pod_uid(uid) || !is_dns_label(ns) || !is_dns_subdomain(name) {
        return None;
    }
    Some((uid, PodName { namespace: ns.to_owned(), name: name.to_owned() }))
}

/// A namespace or container name: an RFC 1123 label.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A pod name: an RFC 1123 subdomain.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_pod_uid(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn is_container_id(s: &str) -> bool {
    (12..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;
