use super::*;

const UID: &str = "1234abcd-5678-4abc-9def-0123456789ab";

/// (namespace, pod, container, source, stated pod UID)
type Flat = (String, String, Option<String>, &'static str, Option<String>);

fn names(found: Option<Found>) -> Option<Flat> {
    found.map(|(c, uid)| (c.pod.namespace, c.pod.name, c.container, c.source, uid))
}

#[test]
fn containerd_annotations_name_containers_and_sandboxes() {
    let ctr = format!(
        r#"{{"ociVersion":"1.0.2","annotations":{{"io.kubernetes.cri.container-type":"container",
        "io.kubernetes.cri.container-name":"cilium-agent","io.kubernetes.cri.sandbox-name":"cilium-x7k2p",
        "io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-uid":"{UID}"}}}}"#
    );
    assert_eq!(
        names(from_annotations(ctr.as_bytes(), "containerd")),
        Some((
            "kube-system".into(),
            "cilium-x7k2p".into(),
            Some("cilium-agent".into()),
            "containerd",
            Some(UID.into())
        ))
    );
    let sandbox = r#"{"annotations":{"io.kubernetes.cri.container-type":"sandbox",
        "io.kubernetes.cri.sandbox-name":"web-0","io.kubernetes.cri.sandbox-namespace":"shop"}}"#;
    assert_eq!(
        names(from_annotations(sandbox.as_bytes(), "containerd")),
        Some(("shop".into(), "web-0".into(), None, "containerd", None))
    );
}

#[test]
fn crio_annotations_and_docker_labels_name_containers() {
    let crio = format!(
        r#"{{"annotations":{{"io.kubernetes.pod.namespace":"kube-system","io.kubernetes.pod.name":"calico-node-abcde",
        "io.kubernetes.pod.uid":"{UID}","io.kubernetes.container.name":"calico-node",
        "io.kubernetes.cri-o.ContainerType":"container"}}}}"#
    );
    assert_eq!(
        names(from_annotations(crio.as_bytes(), "cri-o")),
        Some(("kube-system".into(), "calico-node-abcde".into(), Some("calico-node".into()), "cri-o", Some(UID.into())))
    );
    let docker = r#"{"ID":"x","Config":{"Hostname":"h","Labels":{"io.kubernetes.pod.namespace":"default",
        "io.kubernetes.pod.name":"web-1","io.kubernetes.container.name":"POD","io.kubernetes.docker.type":"podsandbox"}}}"#;
    assert_eq!(names(from_docker(docker.as_bytes())), Some(("default".into(), "web-1".into(), None, "docker", None)));
}

#[test]
fn malformed_or_crafted_sources_name_nothing() {
    for json in [
        "",
        "[]",
        "{",
        r#"{"annotations":{"io.kubernetes.cri.sandbox-namespace":"kube-system"}}"#,
        // Not a Kubernetes name: a terminal escape, a label breaker.
        r#"{"annotations":{"io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-name":"x\u001b[2J","io.kubernetes.cri.container-name":"c"}}"#,
        r#"{"annotations":{"io.kubernetes.cri.sandbox-namespace":"a\"b","io.kubernetes.cri.sandbox-name":"x","io.kubernetes.cri.container-name":"c"}}"#,
        r#"{"annotations":{"io.kubernetes.pod.namespace":"ns","io.kubernetes.pod.name":"p"}}"#,
        r#"{"annotations":{"io.kubernetes.pod.namespace":"ns","io.kubernetes.pod.name":"p","io.kubernetes.container.name":"Upper"}}"#,
    ] {
        assert_eq!(names(from_annotations(json.as_bytes(), "containerd")), None, "{json}");
    }
    assert_eq!(names(from_docker(br#"{"Config":{"Labels":null}}"#)), None);
}

#[test]
fn pod_log_directories_give_namespace_name_and_uid() {
    let dir = format!("kube-system_cilium-x7k2p_{UID}");
    let (uid, pod) = pod_log_dir(&dir).unwrap();
    assert_eq!((uid, pod.namespace.as_str(), pod.name.as_str()), (UID, "kube-system", "cilium-x7k2p"));
    assert!(pod_log_dir("kube-system_cilium_x_y").is_none());
    assert!(pod_log_dir(&format!("Kube_cilium_{UID}")).is_none());
    assert!(pod_log_dir("kube-system_cilium_not-a-uid").is_none());
}

/// A node's root in a temp dir, reached as `<proc>/1/root`.
fn node_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let proc = tempfile::tempdir().unwrap();
    let root = proc.path().join("rootfs");
    std::fs::create_dir_all(proc.path().join("1")).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(&root, proc.path().join("1/root")).unwrap();
    (proc, root)
}

fn put(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn wanted(id: &str, uid: &str) -> Wanted {
    let mut w = Wanted::default();
    w.containers.insert(id.into(), (Some(uid.into()), None));
    w.pods.insert(uid.into());
    w
}

const CID: &str = "abababababababababababababababababababababababababababababababab";

fn bundle(ns: &str, uid: &str) -> String {
    format!(
        r#"{{"annotations":{{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.container-name":"cilium-agent",
        "io.kubernetes.cri.sandbox-name":"cilium-x7k2p","io.kubernetes.cri.sandbox-namespace":"{ns}","io.kubernetes.cri.sandbox-uid":"{uid}"}}}}"#
    )
}

/// cri-dockerd's labels, under the data root daemon.json names: a bare
/// id (the cgroupfs driver) is Docker's, with its pod and container.
#[test]
fn a_bare_id_is_found_under_dockers_configured_data_root() {
    let (proc, root) = node_root();
    let mut namer = Namer::new(proc.path());
    let labels = format!(
        r#"{{"ID":"{CID}","Config":{{"Labels":{{"io.kubernetes.pod.namespace":"kube-system","io.kubernetes.pod.name":"cilium-x7k2p",
        "io.kubernetes.pod.uid":"{UID}","io.kubernetes.container.name":"cilium-agent","io.kubernetes.docker.type":"container"}}}}}}"#
    );
    put(&root, &format!("srv/docker/containers/{CID}/config.v2.json"), &labels);
    let mut w = Wanted::default();
    w.containers.insert(CID.into(), (Some(UID.into()), None));
    assert_eq!(namer.lookup(&w).container(CID), None, "not under the default root");
    put(&root, "etc/docker/daemon.json", r#"{"data-root": "/srv/docker", "default-cgroupns-mode": "private"}"#);
    let names = namer.lookup(&w);
    let found = names.containers.get(CID).cloned().flatten().expect("named");
    assert_eq!((found.container.as_deref(), found.source), (Some("cilium-agent"), "docker"));
    assert_eq!((found.pod.namespace.as_str(), found.pod.name.as_str()), ("kube-system", "cilium-x7k2p"));
}

#[test]
fn the_namer_reads_the_runtime_then_the_kubelet_logs_and_remembers() {
    let (proc, root) = node_root();
    let mut namer = Namer::new(proc.path());
    assert_eq!(namer.lookup(&wanted(CID, UID)).containers.get(CID), Some(&None), "nothing on the node yet");

    put(
        &root,
        &format!("run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io/{CID}/config.json"),
        &bundle("kube-system", UID),
    );
    let names = namer.lookup(&wanted(CID, UID));
    assert_eq!(names.container(CID), Some("cilium-agent"));
    assert_eq!(
        names.pod(UID, None).map(|p| p.name.as_str()),
        Some("cilium-x7k2p"),
        "the container's source names its pod"
    );
    // Remembered: the file can go, the name stays while it is asked for.
    std::fs::remove_dir_all(root.join("run")).unwrap();
    assert_eq!(namer.lookup(&wanted(CID, UID)).container(CID), Some("cilium-agent"));
    assert!(namer.lookup(&Wanted::default()).containers.is_empty());
    assert_eq!(namer.lookup(&wanted(CID, UID)).container(CID), None, "forgotten once nothing asked");

    // Any runtime: the kubelet's log link and pod directory.
    let pod_dir = format!("/var/log/pods/kube-system_cilium-x7k2p_{UID}");
    std::fs::create_dir_all(root.join(&pod_dir[1..]).join("cilium-agent")).unwrap();
    std::fs::create_dir_all(root.join("var/log/containers")).unwrap();
    std::os::unix::fs::symlink(
        format!("{pod_dir}/cilium-agent/0.log"),
        root.join(format!("var/log/containers/cilium-x7k2p_kube-system_cilium-agent-{CID}.log")),
    )
    .unwrap();
    let names = namer.lookup(&wanted(CID, UID));
    let c = names.containers[CID].as_ref().unwrap();
    assert_eq!(
        (c.pod.namespace.as_str(), c.container.as_deref(), c.source),
        ("kube-system", Some("cilium-agent"), "kubelet logs")
    );
}

#[test]
fn a_source_that_claims_another_pod_or_leads_out_of_the_root_is_not_believed() {
    let (proc, root) = node_root();
    let dir = format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{CID}");
    // Another pod's UID than the cgroup path's.
    put(&root, &format!("{dir}/config.json"), &bundle("kube-system", "00000000-0000-4000-8000-000000000000"));
    assert_eq!(Namer::new(proc.path()).lookup(&wanted(CID, UID)).container(CID), None);

    // A link out of the node's root resolves inside it (to nothing).
    let outside = tempfile::tempdir().unwrap();
    put(outside.path(), "config.json", &bundle("kube-system", UID));
    std::fs::remove_file(root.join(&dir).join("config.json")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("config.json"), root.join(&dir).join("config.json")).unwrap();
    assert_eq!(Namer::new(proc.path()).lookup(&wanted(CID, UID)).container(CID), None);

    // A FIFO is not opened for reading (it would block), nor a directory.
    std::fs::remove_file(root.join(&dir).join("config.json")).unwrap();
    nix::unistd::mkfifo(&root.join(&dir).join("config.json"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    assert_eq!(Namer::new(proc.path()).lookup(&wanted(CID, UID)).container(CID), None);

    // A pod log directory named with another UID names nothing.
    std::fs::create_dir_all(root.join("var/log/pods/kube-system_x_00000000-0000-4000-8000-000000000000")).unwrap();
    assert!(Namer::new(proc.path()).lookup(&wanted(CID, UID)).pods.is_empty());
}

#[test]
fn names_are_validated_as_kubernetes_does() {
    assert!(is_dns_label("kube-system") && is_dns_label("a") && !is_dns_label("-a") && !is_dns_label(&"a".repeat(64)));
    assert!(is_dns_subdomain("coredns-5d78c9869d-abcde") && is_dns_subdomain("a.b") && !is_dns_subdomain("a..b"));
}
