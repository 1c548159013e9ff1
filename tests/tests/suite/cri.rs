//! The node as the kubelet builds it: pods made through containerd's CRI
//! (runc, cgroupfs driver, a pure cgroup-v2 view), audited from the node,
//! findings named as an SRE acts on them.
#![cfg(feature = "cri")]

use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

const CILIUM_CAPS: &[&str] = &["SYS_ADMIN", "BPF", "PERFMON", "NET_ADMIN"];

fn findings<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).collect()
}

/// A Cilium agent pod whose container (private cgroupns, as CRI gives a
/// non-privileged container on cgroup v2) attached socket LB through its
/// own cgroup2 mount.
fn cilium_pod(ctd: &mut Containerd) -> (Pod, String) {
    let pod = ctd.run_pod("kube-system", "cilium-x7k2p");
    let id = ctd.run_container(
        &pod,
        &Spec {
            name: "cilium-agent",
            command: Some("/cilium-agent"),
            // Programs that really translate the test Service: the
            // verdict is checked against the traffic.
            args: &["socket-lb-agent", "/run/cilium/cgroupv2", "--real-lb"],
            caps: CILIUM_CAPS,
        },
    );
    let attached = wait_until(Duration::from_secs(20), || ctd.logs(&pod, "cilium-agent").contains("attached 10"));
    assert!(attached, "the cilium-agent container never attached: {:?}", ctd.logs(&pod, "cilium-agent"));
    (pod, id)
}

fn pause_pod(ctd: &mut Containerd, namespace: &str, name: &str) -> (Pod, String) {
    let pod = ctd.run_pod(namespace, name);
    let id = ctd.run_container(&pod, &Spec { name: "app", args: &["pause"], ..Spec::default() });
    (pod, id)
}

#[test]
fn a_cilium_agent_in_a_cri_pod_is_named_by_pod_and_container() {
    if !can_run(&["containerd", "ctr", "runc", "podman", "nsenter", "unshare"]) {
        return;
    }
    let mut ctd = Containerd::start();
    let (web, _) = pause_pod(&mut ctd, "shop", "web-0");
    let (cilium, cid) = cilium_pod(&mut ctd);

    // The format the names are read from, as this containerd wrote it.
    let bundle = ctd.in_node(&format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{cid}/config.json"));
    let spec: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let a = &spec["annotations"];
    assert_eq!(a["io.kubernetes.cri.container-type"], "container", "{a:#}");
    assert_eq!(a["io.kubernetes.cri.container-name"], "cilium-agent", "{a:#}");
    assert_eq!(a["io.kubernetes.cri.sandbox-namespace"], "kube-system", "{a:#}");
    assert_eq!(a["io.kubernetes.cri.sandbox-name"], "cilium-x7k2p", "{a:#}");
    assert_eq!(a["io.kubernetes.cri.sandbox-uid"], cilium.uid.as_str(), "{a:#}");

    let args = ctd.audit_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = ctd.agent(&args);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert!(report["errors"].as_array().unwrap().is_empty(), "{report:#}");

    let below = findings(&report, "socket_lb_below_root");
    assert_eq!(below.len(), 1, "one finding for the cgroup: {report:#}");
    assert_eq!(below[0]["count"], 10, "{report:#}");
    for f in &below {
        assert_eq!(f["cgroup"], format!("/kubepods/burstable/pod{}/{cid}", cilium.uid).as_str(), "{f:#}");
        assert_eq!(f["pod_uid"], cilium.uid.as_str());
        assert_eq!(f["pod_namespace"], "kube-system", "{f:#}");
        assert_eq!(f["pod_name"], "cilium-x7k2p", "{f:#}");
        assert_eq!(f["container_id"], cid.as_str());
        assert_eq!(f["container_name"], "cilium-agent", "{f:#}");
        assert_eq!(f["runtime"], "containerd", "the runtime that named it: {f:#}");
        assert!(
            f["message"].as_str().unwrap().contains("container cilium-agent (")
                && f["message"].as_str().unwrap().contains("of pod kube-system/cilium-x7k2p"),
            "{f:#}"
        );
    }
    let agents = findings(&report, "cni_agent_private_cgroupns");
    assert_eq!(agents.len(), 1, "CRI gave the container a private cgroup namespace: {report:#}");
    assert_eq!(agents[0]["pod_name"], "cilium-x7k2p");
    assert_eq!(agents[0]["container_name"], "cilium-agent");

    // No pod has Cilium's connect programs in effect (they sit on one
    // container's cgroup): the pods are listed by name, from the kubelet's
    // log directories.
    let without = findings(&report, "pods_without_socket_lb");
    assert_eq!(without.len(), 1, "{report:#}");
    let message = without[0]["message"].as_str().unwrap();
    assert!(message.contains("shop/web-0") && message.contains("kube-system/cilium-x7k2p"), "{message}");
    assert!(!message.contains(&web.uid), "named, not by UID: {message}");
    // And that is what the traffic does: connections to the Service are
    // translated in the agent's own container only, not in web-0's.
    let uncovered = lb::uncovered_hooks(&report);
    let web_ctr = uncovered.keys().find(|c| c.contains(&web.uid)).cloned().expect("web-0's container is listed");
    let cilium_ctr = below[0]["cgroup"].as_str().unwrap().to_owned();
    lb::assert_verdict_is_traffic(&ctd.cgroup.path, &report, &[cilium_ctr.as_str(), web_ctr.as_str()]);
    assert!(lb::probe(&ctd.cgroup.path.join(cilium_ctr.trim_start_matches('/'))).translated());

    // runc's device filters: on every container, the runtime's, never a finding.
    let devices: Vec<&Value> =
        report["attachments"].as_array().unwrap().iter().filter(|a| a["attach_type"] == "device").collect();
    assert!(devices.len() >= 4, "runc attaches a device program per container (2 pods x 2): {report:#}");
    assert!(devices.iter().all(|a| a["owner"] == "runtime"), "{devices:#?}");
    let flagged: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["attach_type"] == "device").collect();
    assert!(flagged.is_empty(), "{flagged:#?}");

    // The table says where in names, and the shared fix once.
    let mut table_args = args.clone();
    table_args.retain(|a| *a != "--output" && *a != "json");
    let table = ctd.agent(&table_args).stdout;
    assert!(table.contains(&format!("where: pod kube-system/cilium-x7k2p (uid {})", cilium.uid)), "{table}");
    assert!(table.contains(&format!("container cilium-agent (containerd {}…)", &cid[..12])), "{table}");
    assert_eq!(
        table.matches("--apply --detach-misattached --unpin-stale-links").count(),
        1,
        "one fix for one cause: {table}"
    );
    assert!(table.contains("fix:   the same as above."), "{table}");
}

#[test]
fn ordinary_cri_pods_are_clean_and_pods_removed_during_audits_are_no_error() {
    if !can_run(&["containerd", "ctr", "runc", "podman", "nsenter", "unshare"]) {
        return;
    }
    let mut ctd = Containerd::start();
    let pods: Vec<(Pod, String)> = (0..4).map(|i| pause_pod(&mut ctd, "batch", &format!("job-{i}"))).collect();
    let args = ctd.audit_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let run = ctd.agent(&args);
    assert_eq!(run.code, 0, "ordinary pods: no finding: {run:?}");
    let report = run.json();
    let devices = report["attachments"].as_array().unwrap().iter().filter(|a| a["attach_type"] == "device").count();
    assert!(devices >= 8, "a device filter per container and sandbox: {report:#}");

    // Pods go away (StopPodSandbox, RemovePodSandbox) while audits run, one
    // after another, from before the first removal until after the last.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let auditor = {
        let (stop, pid1) = (stop.clone(), ctd.node.pid1);
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        std::thread::spawn(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut runs = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                runs.push(integration_tests::run(command_in(pid1, &agent_bin(), &args)));
            }
            runs
        })
    };
    for (pod, _) in &pods {
        ctd.remove_pod(pod);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let runs = auditor.join().unwrap();
    assert!(runs.len() >= 2, "audits ran during the removals: {}", runs.len());
    for run in runs {
        assert_eq!(run.code, 0, "an audit while pods were removed: {run:?}");
        let report = run.json();
        assert!(report["errors"].as_array().unwrap().is_empty(), "a vanished pod is not an error: {report:#}");
    }
    let after = ctd.agent(&args).json();
    assert!(
        after["attachments"].as_array().unwrap().iter().all(|a| a["attach_type"] != "device"),
        "the removed pods' device filters went with their cgroups: {after:#}"
    );
}

#[test]
fn the_daemon_labels_misattachment_with_the_pod_and_drops_it_with_the_pod() {
    if !can_run(&["containerd", "ctr", "runc", "podman", "nsenter", "unshare"]) {
        return;
    }
    let mut ctd = Containerd::start();
    let root = ctd.audit_args().last().unwrap().clone();
    let daemon = Daemon::start_via(
        ctd.node.command(&agent_bin(), &[]),
        &["--cgroup-root", &root, "--interval", "1h", "--node-name", "cri-node"],
    );
    let (cilium, cid) = cilium_pod(&mut ctd);
    let series = format!(
        "cgaudit_socket_lb_misattached{{pod_namespace=\"kube-system\",pod_name=\"cilium-x7k2p\",container_name=\"cilium-agent\",pod_uid=\"{}\",container_id=\"{cid}\"}}",
        cilium.uid
    );
    let labelled = wait_until(Duration::from_secs(20), || daemon.metric(&series) == Some(1.0));
    assert!(labelled, "no series {series}:\n{}\n{}", daemon.get("/metrics").1, daemon.logs());

    ctd.remove_pod(&cilium);
    let gone = wait_until(Duration::from_secs(20), || {
        !daemon.get("/metrics").1.lines().any(|l| l.starts_with("cgaudit_socket_lb_misattached{"))
    });
    assert!(gone, "a removed pod's series stays:\n{}", daemon.get("/metrics").1);
}
