//! Pure: a cgroup path -> the Kubernetes pod and container it belongs to.
//!
//! Layouts (kubelet's two cgroup drivers, any runtime, with any prefix such as
//! a kind/dind node container's own cgroup):
//!
//! - systemd: `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid
//!   with _>.slice/cri-containerd-<id>.scope` (`crio-<id>.scope`,
//!   `docker-<id>.scope`; QoS slice absent for Guaranteed pods)
//! - cgroupfs: `kubepods/burstable/pod<uid>/<id>` (`crio-<id>` under CRI-O)

use serde::Serialize;

use crate::text::shown;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Attribution {
    pub pod_uid: Option<String>,
    pub container_id: Option<String>,
    /// `containerd`, `cri-o`, `docker` or `podman` when the path names it.
    pub runtime: Option<&'static str>,
    /// `guaranteed`, `burstable` or `besteffort` once a pod is named.
    pub qos: Option<&'static str>,
    /// The path ends at the pod's own cgroup (not a container's, nor a
    /// helper's such as podman's `conmon`).
    #[serde(skip)]
    pub pod_level: bool,
}

impl Attribution {
    /// The cgroup is a pod's own cgroup.
    #[cfg(test)]
    pub fn is_pod_level(&self) -> bool {
        self.pod_level
    }
}

fn qos_of(s: &str) -> Option<&'static str> {
    match s {
        "burstable" => Some("burstable"),
        "besteffort" => Some("besteffort"),
        _ => None,
    }
}

fn is_container_id(s: &str) -> bool {
    s.len() >= 12 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_pod_uid(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `cri-containerd-<id>.scope` -> (containerd, id); `crio-<id>`; `docker-<id>`.
fn container_segment(seg: &str) -> Option<(Option<&'static str>, String)> {
    let base = seg.strip_suffix(".scope").unwrap_or(seg);
    for (prefix, runtime) in
        [("cri-containerd-", "containerd"), ("crio-", "cri-o"), ("docker-", "docker"), ("libpod-", "podman")]
    {
        if let Some(id) = base.strip_prefix(prefix)
            && is_container_id(id)
        {
            return Some((Some(runtime), id.to_owned()));
        }
    }
    // cgroupfs driver with containerd or docker: the bare id, runtime unknown.
    (seg == base && is_container_id(base)).then(|| (None, base.to_owned()))
}

/// A container outside Kubernetes: its runtime-named scope
/// (`/system.slice/docker-<id>.scope`, `/libpod_parent/libpod-<id>`) or
/// Docker's cgroupfs layout (`/docker/<id>`).
fn plain_container(segs: &[&str]) -> Attribution {
    let Some((last, parents)) = segs.split_last() else { return Attribution::default() };
    let found = match container_segment(last) {
        Some((Some(runtime), id)) => Some((runtime, id)),
        Some((None, id)) if parents.last() == Some(&"docker") => Some(("docker", id)),
        _ => None,
    };
    found.map_or_else(Attribution::default, |(runtime, id)| Attribution {
        container_id: Some(id),
        runtime: Some(runtime),
        ..Attribution::default()
    })
}

/// One level below `kubepods`, above any pod, as kubelet names it.
enum KubeLevel {
    /// A pod's own cgroup (its UID, dashed), and the QoS its name says.
    Pod(String, Option<&'static str>),
    /// A QoS slice (or another slice, as systemd nests them): the first
    /// QoS named counts.
    Slice(Option<&'static str>),
    /// A cgroupfs QoS level: the last one counts.
    Qos(&'static str),
    /// Not a name kubelet gives a level there.
    Other,
}

fn kube_level(seg: &str) -> KubeLevel {
    // systemd: kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice
    if let Some(slice) = seg.strip_suffix(".slice") {
        let body = slice.strip_prefix("kubepods-").unwrap_or(slice);
        if let Some((q, uid)) = body.split_once("pod").filter(|(_, u)| is_pod_uid(&u.replace('_', "-"))) {
            return KubeLevel::Pod(uid.replace('_', "-"), qos_of(q.trim_end_matches('-')));
        }
        return KubeLevel::Slice(qos_of(body));
    }
    // cgroupfs: burstable/, pod<uid>/
    if let Some(uid) = seg.strip_prefix("pod").filter(|u| is_pod_uid(u)) {
        return KubeLevel::Pod(uid.to_owned(), None);
    }
    match qos_of(seg) {
        Some(q) => KubeLevel::Qos(q),
        None => KubeLevel::Other,
    }
}

/// Where a cgroup sits for Kubernetes (the rules of this module, one
/// level at a time: the same answer for any depth at the cost of one name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Place {
    /// No `kubepods` level at or above it (below the audit root).
    #[default]
    Outside,
    /// At or below `kubepods` (`kubepods.slice`) and its QoS levels, above
    /// any pod.
    Kubepods,
    /// Below `kubepods` on a path kubelet does not make.
    Elsewhere,
    /// A pod's own cgroup.
    Pod { uid: Box<str> },
    /// Below the pod whose cgroup this is.
    InPod { pod: u64 },
}

impl Place {
    /// The place of a child named `name` of a cgroup (id `parent`) at
    /// `self`. The name is matched as it is shown, as `attribution` reads a
    /// shown path.
    pub fn below(&self, parent: u64, name: &[u8]) -> Place {
        match self {
            Place::Outside => {
                if matches!(name, b"kubepods" | b"kubepods.slice") {
                    Place::Kubepods
                } else {
                    Place::Outside
                }
            }
            Place::Kubepods => kubepods_level(&shown(name)),
            Place::Elsewhere => Place::Elsewhere,
            Place::Pod { .. } => Place::InPod { pod: parent },
            Place::InPod { pod } => Place::InPod { pod: *pod },
        }
    }

    /// A pod's cgroup or one below it: what a pod's findings are about.
    pub fn in_kube(&self) -> bool {
        matches!(self, Place::Pod { .. } | Place::InPod { .. })
    }

    #[cfg(test)]
    pub fn is_pod(&self) -> bool {
        matches!(self, Place::Pod { .. })
    }
}

/// The place of a cgroup named `seg` whose parent is `kubepods` or one of
/// its QoS levels (`cgroup::tree`, one level at a time).
pub fn kubepods_level(seg: &str) -> Place {
    match kube_level(seg) {
        KubeLevel::Pod(uid, _) => Place::Pod { uid: uid.into() },
        KubeLevel::Slice(_) | KubeLevel::Qos(_) => Place::Kubepods,
        KubeLevel::Other => Place::Elsewhere,
    }
}

/// Attributes a cgroup path (absolute or relative to any root).
pub fn attribute(path: &str) -> Attribution {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(start) = segs.iter().position(|s| *s == "kubepods.slice" || *s == "kubepods") else {
        return plain_container(&segs);
    };
    let mut a = Attribution::default();
    let mut rest = segs[start + 1..].iter().copied();
    let mut qos = None;
    for seg in rest.by_ref() {
        match kube_level(seg) {
            KubeLevel::Pod(uid, q) => {
                qos = qos.or(q);
                a.pod_uid = Some(uid);
                break;
            }
            KubeLevel::Slice(q) => qos = qos.or(q),
            KubeLevel::Qos(q) => qos = Some(q),
            KubeLevel::Other => return Attribution::default(),
        }
    }
    if a.pod_uid.is_none() {
        return Attribution::default();
    }
    a.qos = Some(qos.unwrap_or("guaranteed"));
    match rest.next() {
        None => a.pod_level = true,
        Some(seg) => {
            if let Some((runtime, id)) = container_segment(seg) {
                a.runtime = runtime;
                a.container_id = Some(id);
            }
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "f8371831-8021-4722-af27-93c925d25a14";
    const CID: &str = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";

    #[test]
    fn systemd_burstable_containerd_path_yields_pod_uid_and_container() {
        let p = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope",
            UID.replace('-', "_")
        );
        let a = attribute(&p);
        assert_eq!(a.pod_uid.as_deref(), Some(UID));
        assert_eq!(a.container_id.as_deref(), Some(CID));
        assert_eq!(a.runtime, Some("containerd"));
        assert_eq!(a.qos, Some("burstable"));
        assert!(!a.is_pod_level());
    }

    #[test]
    fn seed_docker_scope_is_attributed_to_docker() {
        let p = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/docker-{CID}.scope",
            UID.replace('-', "_")
        );
        assert_eq!(attribute(&p).runtime, Some("docker"));
    }

    #[test]
    fn guaranteed_pod_has_no_qos_slice() {
        let p = format!("/kubepods.slice/kubepods-pod{}.slice/crio-{CID}.scope", UID.replace('-', "_"));
        let a = attribute(&p);
        assert_eq!(a.qos, Some("guaranteed"));
        assert_eq!(a.runtime, Some("cri-o"));
        assert_eq!(a.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn besteffort_pod_level_cgroup_has_no_container() {
        let p =
            format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice", UID.replace('-', "_"));
        let a = attribute(&p);
        assert_eq!(a.qos, Some("besteffort"));
        assert!(a.is_pod_level());
    }

    #[test]
    fn cgroupfs_driver_path_yields_pod_and_bare_container_id() {
        let a = attribute(&format!("/kubepods/burstable/pod{UID}/{CID}"));
        assert_eq!(a.pod_uid.as_deref(), Some(UID));
        assert_eq!(a.container_id.as_deref(), Some(CID));
        assert_eq!(a.runtime, None);
        assert_eq!(a.qos, Some("burstable"));
        assert_eq!(attribute(&format!("/kubepods/pod{UID}/crio-{CID}")).runtime, Some("cri-o"));
        assert_eq!(attribute(&format!("/kubepods/pod{UID}")).qos, Some("guaranteed"));
    }

    #[test]
    fn kind_node_prefix_is_ignored() {
        let kind = format!(
            "/system.slice/docker-{CID}.scope/kubelet.slice/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{CID}.scope",
            UID.replace('-', "_")
        );
        let a = attribute(&kind);
        assert_eq!(a.pod_uid.as_deref(), Some(UID));
        assert_eq!(a.runtime, Some("containerd"));
        let dind = attribute(&format!("/docker/{CID}/kubepods/besteffort/pod{UID}/{CID}"));
        assert_eq!(dind.qos, Some("besteffort"));
    }

    #[test]
    fn containers_outside_kubernetes_name_their_runtime() {
        let a = attribute(&format!("/libpod_parent/libpod-{CID}"));
        assert_eq!((a.runtime, a.container_id.as_deref(), a.pod_uid), (Some("podman"), Some(CID), None));
        assert_eq!(attribute(&format!("/system.slice/docker-{CID}.scope")).runtime, Some("docker"));
        assert_eq!(attribute(&format!("/docker/{CID}")).runtime, Some("docker"));
        assert_eq!(attribute(&format!("/{CID}")), Attribution::default(), "a bare id alone is not enough");
    }

    #[test]
    fn podman_container_in_a_cgroupfs_pod_is_attributed() {
        let a = attribute(&format!("/kubepods/burstable/pod{UID}/libpod-{CID}"));
        assert_eq!(
            (a.pod_uid.as_deref(), a.container_id.as_deref(), a.runtime),
            (Some(UID), Some(CID), Some("podman"))
        );
        // conmon sits beside the container in podman's layout: in the pod,
        // but not the pod's own cgroup.
        let conmon = attribute(&format!("/kubepods/burstable/pod{UID}/conmon"));
        assert_eq!(conmon.pod_uid.as_deref(), Some(UID));
        assert!(!conmon.is_pod_level());
        assert!(attribute(&format!("/kubepods/burstable/pod{UID}")).is_pod_level());
    }

    #[test]
    fn non_pod_paths_are_not_attributed() {
        for p in [
            "/",
            "/system.slice/containerd.service",
            "/kubepods.slice",
            "/kubepods.slice/kubepods-burstable.slice",
            "/kubepods/burstable/notapod",
            "/libpod_parent/libpod-abc",
            "/kubepods/pod1234",
        ] {
            assert_eq!(attribute(p), Attribution::default(), "{p}");
        }
    }

    #[test]
    fn conmon_and_non_hex_scopes_are_not_containers() {
        let base = format!("/kubepods.slice/kubepods-pod{}.slice", UID.replace('-', "_"));
        assert_eq!(attribute(&format!("{base}/crio-conmon-{CID}.scope")).container_id, None);
        assert_eq!(attribute(&format!("{base}/docker-xyz.scope")).container_id, None);
    }
}
