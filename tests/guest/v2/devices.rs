//! The node's own devices on each kernel of the matrix (issue 48): Cilium's
//! own `bpf_host.o` attached to a device of the guest's network namespace
//! (the real node's) as cilium-agent's loader attaches it: by tcx links
//! pinned under `cilium/devices/<dev>/links/` where the kernel takes tcx,
//! else by legacy tc filters (priority 1), maps pinned in `tc/globals`, no
//! fd kept. The healthy node the tests on this machine's kernel start from
//! (tests/tests/suite/devices.rs, where the duplicates, leftovers and the
//! rest are made), here with each kernel's tcx or its absence: read in the
//! kernel's order, proven Cilium's, nothing raised, and the traffic runs
//! it. (One load of bpf_host.o per kernel: its verification is most of
//! the test's time under emulation.)

use std::process::{Child, Command};

use integration_tests::datapath::{VethPod, run_count, send_from};
use integration_tests::guest;
use integration_tests::*;
use serde_json::Value;

/// A process named as Cilium's agent is, on the node's network (the loader
/// below does what its loader does); killed on drop.
struct Named(Child);

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the test pinned and mounted, removed on drop (even on a panic):
/// the guest's later tests use the same bpffs. Cilium's pins in each bpffs
/// the test mounted (their links go with them), that bpffs unmounted, then
/// those of the one below.
struct Pins {
    mounts: usize,
}

impl Drop for Pins {
    fn drop(&mut self) {
        for _ in 0..self.mounts {
            clean();
            let _ = nix::mount::umount("/sys/fs/bpf");
        }
        clean();
    }
}

fn is_bpffs() -> bool {
    nix::sys::statfs::statfs("/sys/fs/bpf").is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::BPF_FS_MAGIC)
}

fn clean() {
    let _ = std::fs::remove_dir_all("/sys/fs/bpf/cilium");
    for e in std::fs::read_dir("/sys/fs/bpf/tc/globals").into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("cilium_") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn mount_bpffs() {
    std::fs::create_dir_all("/sys/fs/bpf").expect("mkdir /sys/fs/bpf");
    nix::mount::mount(Some("bpffs"), "/sys/fs/bpf", Some("bpf"), nix::mount::MsFlags::empty(), None::<&str>)
        .expect("mount bpffs at /sys/fs/bpf");
}

/// `fixture cilium-loader` on `dev`: `tcx`, or `tc:<prio>`; the programs'
/// ids (ingress, egress), or its error.
fn load(dev: &str, how: &str) -> Result<(u32, u32), String> {
    let object = integration_tests::cilium::objects().join("bpf_host.o");
    let out = Command::new(fixture_bin())
        .args(["cilium-loader", object.to_str().unwrap(), dev, how, "netdev"])
        .args(["cil_from_netdev:in", "cil_to_netdev:out"])
        .output()
        .expect("run cilium-loader");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let ids: Vec<u32> = String::from_utf8_lossy(&out.stdout).split_whitespace().map(|w| w.parse().unwrap()).collect();
    Ok((ids[0], ids[1]))
}

const DEVICE_KINDS: [&str; 5] = [
    "device_duplicate_programs",
    "device_program_never_runs",
    "device_leftover_programs",
    "bpffs_shadowed",
    "device_not_meant",
];

#[test]
fn ciliums_host_programs_are_read_as_each_kernel_holds_them() {
    let _g = guest::require("v2");
    let t = TestCgroup::new("devices");
    // The device: a veth pair into a namespace that sends it traffic,
    // made by a process that is no pod's.
    let peer = VethPod::new(&t.mkdir("peer"), 9);
    let dev = peer.host.clone();
    let mut pins = Pins { mounts: 0 };
    if !is_bpffs() {
        mount_bpffs();
        pins.mounts += 1;
    }
    let _agent = Named(Command::new(fixture_bin()).args(["named", "cilium-agent"]).spawn().expect("spawn"));
    // tcx where the kernel takes it, else legacy tc: tried once with a
    // program of nothing (bpf_host.o's verification is what costs).
    let tcx = {
        let probe = Prog::load_sched_cls("tcx_probe");
        let ifindex = nix::net::if_::if_nametoindex(dev.as_str()).expect("the device");
        let attach = aya_obj::generated::bpf_attach_type::BPF_TCX_INGRESS as u32;
        match agent::bpf::sys::tcx_link_create(ifindex, std::os::fd::AsFd::as_fd(&probe.fd), attach) {
            Ok(_link) => true,
            Err(e) if e.errno() == Some(libc::EINVAL) => false,
            Err(e) => panic!("tcx on {dev}: {e}"),
        }
    };
    let (from, _) = load(&dev, if tcx { "tcx" } else { "tc:1" }).expect("cilium-loader");
    let audit = || {
        let run = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
        assert!(run.code == 0 || run.code == 1, "{run:?}");
        (run.json(), run.code)
    };
    let (report, _) = audit();
    assert_eq!(report["kernel_features"]["tcx"]["works"], tcx, "{:#}", report["kernel_features"]);
    let devices = report["datapath"]["devices"]["devices"].as_array().expect("datapath.devices.devices");
    let d = devices.iter().find(|d| d["name"] == dev.as_str()).unwrap_or_else(|| panic!("{dev} in {devices:#?}"));
    let seen: Vec<(&str, &str, &str, &str)> = d["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or("-");
            (s("hook"), s("prog_name"), s("owner"), s("proof"))
        })
        .collect();
    let want = if tcx {
        [
            ("tcx_ingress", "cil_from_netdev", "cilium", "link_pinned"),
            ("tcx_egress", "cil_to_netdev", "cilium", "link_pinned"),
        ]
    } else {
        [
            ("tc_ingress", "cil_from_netdev", "cilium", "maps_pinned"),
            ("tc_egress", "cil_to_netdev", "cilium", "maps_pinned"),
        ]
    };
    assert_eq!(seen, want, "{d:#}");
    let of_kind = |report: &Value, kind: &str| -> Vec<Value> {
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == kind).cloned().collect()
    };
    for kind in DEVICE_KINDS {
        assert!(of_kind(&report, kind).is_empty(), "{kind}: {:#}", report["findings"]);
    }
    let stats = agent::bpf::sys::enable_run_stats().expect("BPF_ENABLE_STATS");
    let before = run_count(from);
    send_from(peer.pid, &peer.gateway, 20);
    assert!(run_count(from) >= before + 20, "cil_from_netdev ran {} times", run_count(from) - before);

    drop(stats);
}
