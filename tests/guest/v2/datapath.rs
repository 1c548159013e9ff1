//! Pods outside the CNI's datapath on each kernel of the matrix: pods whose
//! veth pair is made as the `ptp` plugin makes it, a stand-in Cilium agent
//! attaching its per-endpoint program as Cilium's loader does (legacy tc on
//! every kernel, tcx where the kernel takes it; a netkit pair's peer where
//! the kernel makes netkit), and the pods' own traffic.
//! What the host suite proves with containerd and the real plugin
//! (tests/tests/suite/datapath.rs), here on 5.10, 6.1 and 6.12.

use integration_tests::datapath::{EndpointAgent, VethPod, run_count, send_from};
use integration_tests::guest;
use integration_tests::*;
use serde_json::Value;

const EARLY: &str = "1e0a1111-2222-4333-8444-000000000001";
const WEB: &str = "1e0a1111-2222-4333-8444-000000000002";
const API: &str = "1e0a1111-2222-4333-8444-000000000003";
const EDGE: &str = "1e0a1111-2222-4333-8444-000000000004";

#[test]
fn a_pod_started_before_the_cni_is_named_outside_its_datapath() {
    let _g = guest::require("v2");
    let t = TestCgroup::new("datapath");
    let cgroup = |uid: &str| t.mkdir(&cgroupfs_container("burstable", uid, "ctr"));
    let early_cgroup = cgroup(EARLY);
    let early = VethPod::new(&early_cgroup, 1);
    // A process of it in a network namespace of its own: the pod is judged
    // by every namespace of it (issue 38's red team hid a pod so).
    let _hider = VethPod::process_in_own_netns(&early_cgroup);
    // A hostNetwork pod: a process of the node's network in a pod cgroup.
    let host_net = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, "ctr"));
    let _aws_node = Resident::into(&integration_tests::cgroup::open_dir(&host_net));
    // Start times are whole seconds: the agent starts in a later one.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut cilium = EndpointAgent::start_here();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (web, api) = (VethPod::new(&cgroup(WEB), 2), VethPod::new(&cgroup(API), 3));
    let (web_how, web_prog) = cilium.attach("tc", &web.host);
    assert_eq!(web_how, "tc");
    let (how, api_prog) = cilium.attach("tcx", &api.host);
    // A pod on a netkit pair, as Cilium's netkit mode makes them, where the
    // kernel makes one (6.7+ with CONFIG_NETKIT): its program is on the
    // primary, for what the peer sends.
    let edge = match VethPod::netkit(&cgroup(EDGE), 4) {
        Ok(pod) => {
            let (nk_how, prog) = cilium.attach("netkit", &pod.host);
            assert_eq!(nk_how, "netkit");
            Some((pod, prog))
        }
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            eprintln!("this kernel makes no netkit pair: {e}");
            None
        }
        Err(e) => panic!("make a netkit pair: {e}"),
    };

    let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["datapath"]["owners"], serde_json::json!(["cilium"]), "{:#}", report["datapath"]);
    let outside: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "pod_outside_datapath").collect();
    assert_eq!(outside.len(), 1, "{outside:#?}");
    assert_eq!(outside[0]["pod_uid"], EARLY, "{:#}", outside[0]);
    assert_eq!(outside[0]["severity"], "critical");
    assert_eq!(outside[0]["interfaces"][0]["name"], early.host.as_str());
    let pod = |uid: &str| {
        let pods = report["datapath"]["pods"].as_array().unwrap();
        pods.iter().find(|p| p["pod_uid"] == uid).cloned().unwrap_or_else(|| panic!("{uid} in {pods:#?}"))
    };
    assert_eq!(pod(OTHER_POD_UID)["network"], "host_network");
    let web_json = &pod(WEB)["interfaces"][0]["programs"][0];
    assert_eq!(
        (&web_json["hook"], &web_json["via"], &web_json["prio"]),
        (&"tc_ingress".into(), &"filter".into(), &1.into())
    );
    assert_eq!(web_json["prog_name"], "cil_from_container", "{web_json:#}");
    assert_eq!(web_json["prog_id"], web_prog, "{web_json:#}");
    let api_json = &pod(API)["interfaces"][0]["programs"][0];
    let (hook, via) = if how == "tcx" { ("tcx_ingress", "link") } else { ("tc_ingress", "filter") };
    assert_eq!((&api_json["hook"], &api_json["via"]), (&hook.into(), &via.into()), "{api_json:#}");
    assert_eq!(api_json["prog_id"], api_prog, "{api_json:#}");
    // The agent's verdict on tcx is what the attach found.
    assert_eq!(report["kernel_features"]["tcx"]["works"], how == "tcx", "{:#}", report["kernel_features"]);
    if let Some((nk, prog)) = &edge {
        let edge_json = &pod(EDGE)["interfaces"][0];
        assert_eq!((&edge_json["name"], &edge_json["driver"]), (&nk.host.as_str().into(), &"netkit".into()));
        let p = &edge_json["programs"][0];
        assert_eq!((&p["hook"], &p["via"], &p["prog_id"]), (&"netkit_peer".into(), &"link".into(), &(*prog).into()));
        assert_eq!(report["kernel_features"]["netkit"]["works"], true, "{:#}", report["kernel_features"]);
    }
    let mut read = vec!["tc"];
    read.extend((how == "tcx").then_some("tcx"));
    read.extend(edge.is_some().then_some("netkit"));
    guest::platform("datapath", &read.join(", "));

    // The managed pods' packets run their endpoint's program; the other's
    // run none (the pods' own background packets, IPv6 neighbour discovery,
    // run theirs now and then, never 20).
    let _stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    let runs = || run_count(web_prog) + run_count(api_prog);
    let before = runs();
    send_from(early.pid, &early.gateway, 20);
    assert!(runs() < before + 20, "the unmanaged pod's 20 packets ran the CNI's programs");
    let before = run_count(web_prog);
    send_from(web.pid, &web.gateway, 20);
    assert!(run_count(web_prog) >= before + 20, "web's packets (tc) did not run its program");
    let before = run_count(api_prog);
    send_from(api.pid, &api.gateway, 20);
    assert!(run_count(api_prog) >= before + 20, "api's packets ({how}) did not run its program");
    if let Some((nk, prog)) = &edge {
        let before = run_count(*prog);
        send_from(nk.pid, &nk.gateway, 20);
        assert!(run_count(*prog) >= before + 20, "edge's packets (netkit) did not run its program");
        // Its endpoint unloaded: the peer's blackhole policy drops what the
        // pod sends (the primary receives none of it), and the audit says
        // the pod is cut off, not bypassing Cilium (issue 48).
        cilium.detach(&nk.host);
        let rx = || {
            let path = format!("/sys/class/net/{}/statistics/rx_packets", nk.host);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).trim().parse::<u64>().unwrap()
        };
        let before = rx();
        send_from(nk.pid, &nk.gateway, 20);
        assert!(rx() < before + 20, "a blackholed peer's packets reached the node");
        let args = ["audit", "--output", "json", "--endpoint-grace", "0s", "--cgroup-root", t.path.to_str().unwrap()];
        let report = agent(&args).json();
        let cut: Vec<&Value> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "pod_outside_datapath" && f["pod_uid"] == EDGE)
            .collect();
        let [f] = cut[..] else { panic!("{:#}", report["findings"]) };
        assert!(f["message"].as_str().unwrap().contains("the pod is cut off from the network"), "{f:#}");
        assert_eq!(pod_json(&report, EDGE)["interfaces"][0]["netkit_peer_policy"], "blackhole");
    }
}

fn pod_json<'a>(report: &'a Value, uid: &str) -> &'a Value {
    let pods = report["datapath"]["pods"].as_array().unwrap();
    pods.iter().find(|p| p["pod_uid"] == uid).unwrap_or_else(|| panic!("{uid} in {pods:#?}"))
}
