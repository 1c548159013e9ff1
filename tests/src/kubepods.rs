//! Pod and container cgroups as the kubelet lays them out (relative to a
//! test's root): the systemd driver's slices and scopes, and the cgroupfs
//! driver's plain directories. One pod's names, used across the suite.

/// The pod of the seed's Cilium agent, and its container.
pub const SEED_POD_UID: &str = "f8371831-8021-4722-af27-93c925d25a14";
pub const SEED_CONTAINER: &str = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";
/// An ordinary pod, and its container.
pub const OTHER_POD_UID: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";
pub const OTHER_CONTAINER: &str = "5cecdc399e2fa339d62a5b276331d8a5875fff7898a09d1ba1f5d710ecb12f13";

/// systemd driver: `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice`.
pub fn systemd_pod(qos: &str, uid: &str) -> String {
    format!("/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{}.slice", uid.replace('-', "_"))
}

/// systemd driver with containerd: `<pod>/cri-containerd-<id>.scope`.
pub fn systemd_container(qos: &str, uid: &str, id: &str) -> String {
    format!("{}/cri-containerd-{id}.scope", systemd_pod(qos, uid))
}

/// cgroupfs driver: `/kubepods/<qos>/pod<uid>`.
pub fn cgroupfs_pod(qos: &str, uid: &str) -> String {
    format!("/kubepods/{qos}/pod{uid}")
}

/// cgroupfs driver: `<pod>/<id>`.
pub fn cgroupfs_container(qos: &str, uid: &str, id: &str) -> String {
    format!("{}/{id}", cgroupfs_pod(qos, uid))
}
