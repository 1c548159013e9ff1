//! devices (issue 48): the audit on a node with 64 devices and 4 programs
//! each (Cilium's `cil_from_netdev` and `cil_to_netdev` by tcx, and again
//! by legacy tc filters), against `bpftool net show` on the same node in
//! the same run: wall time and peak RSS.

use super::{spread, timed};
use integration_tests::datapath::EndpointAgent;
use integration_tests::*;

pub(super) fn devices_bench(devices: usize, runs: usize) {
    let t = TestCgroup::new("bench-devices");
    let links: String = (0..devices / 2).map(|i| format!("ip link add d{i}a type veth peer name d{i}b\n")).collect();
    let node = Sandbox::with_network(&format!("mount -t tmpfs tmpfs /run\nmount -t bpf bpf /sys/fs/bpf\n{links}"));
    let mut cilium = EndpointAgent::start_in(&node);
    for i in 0..devices / 2 {
        for dev in [format!("d{i}a"), format!("d{i}b")] {
            cilium.netdev(&dev, None);
            cilium.netdev(&dev, Some(1));
        }
    }
    let pid1 = node.pid1.to_string();
    let agent = agent_bin();
    let root = t.path.display().to_string();
    let inside = |cmd: &[&str]| -> Vec<String> {
        ["nsenter", "--target", &pid1, "--pid", "--mount", "--net", "--"]
            .iter()
            .chain(cmd)
            .map(|s| s.to_string())
            .collect()
    };
    let audit = inside(&[agent.to_str().unwrap(), "audit", "--output", "json", "--cgroup-root", &root]);
    let bpftool = inside(&["bpftool", "net", "show"]);
    // The same node for both: every device and program the audit lists.
    let (_, _, out) = timed(&audit.iter().map(String::as_str).collect::<Vec<_>>());
    let report: serde_json::Value = serde_json::from_str(&out).expect("the audit's JSON");
    let listed = report["datapath"]["devices"]["devices"]
        .as_array()
        .map_or(0, |d| d.iter().filter(|d| d["programs"].as_array().is_some_and(|p| p.len() == 4)).count());
    assert_eq!(listed, devices, "the audit lists every device with its 4 programs");
    println!("node devices: {devices} devices, 4 programs each (tcx and tc, both directions), {runs} runs");
    println!("{:<26} {:>10} {:>10} {:>10} {:>10}", "tool", "median s", "min s", "max s", "peak MiB");
    for (label, cmd) in [("agent audit", &audit), ("bpftool net show", &bpftool)] {
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let (mut walls, mut rss) = (Vec::new(), 0);
        for _ in 0..runs {
            let (wall, kib, _) = timed(&cmd);
            walls.push(wall);
            rss = rss.max(kib);
        }
        let (med, lo, hi) = spread(&mut walls);
        println!("{label:<26} {med:>10.3} {lo:>10.3} {hi:>10.3} {:>10.1}", rss as f64 / 1024.0);
    }
}
