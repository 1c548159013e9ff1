//! Shared by every rule's tests: the fixtures and these imports.
pub(crate) use super::*;
pub(crate) use crate::bpf::ProgType;
pub(crate) use crate::bpf::sys::CgroupLinkInfo;
pub(crate) use crate::fixtures::*;
pub(crate) use crate::snapshot::{CgroupMount, OwnerPin, V1NetController};

pub(crate) fn kinds(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.kind.as_str()).collect()
}

#[test]
fn socket_lb_at_the_root_is_clean() {
    let mut s = node();
    cilium_agent(&mut s, SocketLb::On);
    cilium_connect(&mut s, "/", 1);
    s.pods.push(pod_cgroup(POD, 44, "f8371831-8021-4722-af27-93c925d25a14", &[10, 11]));
    assert!(evaluate(&s, &Policy::default()).is_empty());
}

#[test]
fn findings_name_pods_and_containers_the_node_named() {
    use crate::snapshot::{ContainerName, PodName};
    let uid = "f8371831-8021-4722-af27-93c925d25a14";
    let cid = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";
    let mut s = node();
    cilium_connect(&mut s, CTR, CTR_ID);
    s.pods.push(pod_cgroup(POD, 44, uid, &[]));
    let other = "0a0a0a0a-0000-4000-8000-000000000000";
    s.pods.push(pod_cgroup(&format!("/kubepods/pod{other}"), 45, other, &[]));

    // What to look up: the container and pod of the findings, and the
    // pods without socket LB.
    let wanted = names_wanted(&s, &evaluate(&s, &Policy::default()));
    assert_eq!(wanted.containers.get(cid), Some(&(Some(uid.to_owned()), Some("containerd"))));
    assert!(wanted.pods.contains(uid) && wanted.pods.contains(other), "{wanted:?}");

    let pod = PodName { namespace: "kube-system".into(), name: "cilium-x7k2p".into() };
    s.names.containers.insert(
        cid.into(),
        Some(ContainerName { pod: pod.clone(), container: Some("cilium-agent".into()), source: "containerd" }),
    );
    s.names.pods.insert(uid.into(), pod);
    s.names.pods.insert(other.into(), PodName { namespace: "shop".into(), name: "web-0".into() });
    let f = evaluate(&s, &Policy::default());
    let below = f.iter().find(|f| f.kind == Kind::SocketLbBelowRoot).unwrap();
    assert_eq!(below.pod_namespace.as_deref(), Some("kube-system"));
    assert_eq!(below.pod_name.as_deref(), Some("cilium-x7k2p"));
    assert_eq!(below.container_name.as_deref(), Some("cilium-agent"));
    assert!(
        below.message.contains("on container cilium-agent (fbbef81081fd) of pod kube-system/cilium-x7k2p"),
        "{}",
        below.message
    );
    let without = f.iter().find(|f| f.kind == Kind::PodsWithoutSocketLb).unwrap();
    assert!(without.message.ends_with("Pods: kube-system/cilium-x7k2p, shop/web-0"), "{}", without.message);
}
