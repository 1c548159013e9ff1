//! The failure cgaudit exists for, reproduced on a sandbox node.

use std::fs;

use crate::bpf::{Attached, CILIUM_SOCKET_LB, Prog};
use crate::cgroup::{TestCgroup, cgroup_id, open_dir};
use crate::kubepods::{OTHER_CONTAINER, OTHER_POD_UID, SEED_CONTAINER, SEED_POD_UID, systemd_container, systemd_pod};
use crate::sandbox::Sandbox;
use crate::which;

/// The Cilium agent's pod cgroup in the seed, relative to the test root.
pub fn cilium_pod() -> String {
    systemd_pod("burstable", SEED_POD_UID)
}

/// The Cilium agent's container cgroup in the seed, relative to the test root.
pub fn cilium_container() -> String {
    systemd_container("burstable", SEED_POD_UID, SEED_CONTAINER)
}

/// What a stand-in CNI is called, where it mounts cgroup2, and what it attaches.
pub struct SeedCni {
    pub agent: &'static str,
    pub mount_point: &'static str,
    pub programs: &'static [(&'static str, &'static str)],
}

pub const CILIUM: SeedCni =
    SeedCni { agent: "cilium-agent", mount_point: "/run/cilium/cgroupv2", programs: &CILIUM_SOCKET_LB };

/// Calico's connect-time load balancer (felix/bpf-gpl/connect_balancer.c
/// and connect_balancer_v46.c), as its default dual-stack build attaches it.
pub const CALICO: SeedCni = SeedCni {
    agent: "calico-node",
    mount_point: "/run/calico/cgroup",
    programs: &[
        ("calico_connect_v4", "connect4"),
        ("calico_sendmsg_v4", "sendmsg4"),
        ("calico_recvmsg_v4", "recvmsg4"),
        ("calico_connect_v46", "connect6"),
        ("calico_sendmsg_v46", "sendmsg6"),
        ("calico_recvmsg_v46", "recvmsg6"),
    ],
};

/// The failure cgaudit exists for, reproduced: a sandbox
/// node whose "cilium-agent" joined a kubepods container cgroup, unshared its
/// cgroup namespace and mounted cgroup2 at /run/cilium/cgroupv2 in the node's
/// mount namespace; the ten socket-LB programs attached at the top of that
/// mount, which is the container's cgroup. Everything is undone on drop.
pub struct SeedNode {
    pub attached: Vec<Attached>,
    pub progs: Vec<Prog>,
    pub sandbox: Sandbox,
    _bin: tempfile::TempDir,
    pub t: TestCgroup,
}

impl SeedNode {
    pub fn new(tag: &str) -> SeedNode {
        Self::build(tag, &CILIUM, true, "")
    }

    /// The broken mount only, nothing attached yet.
    pub fn mount_only(tag: &str) -> SeedNode {
        Self::build(tag, &CILIUM, false, "")
    }

    /// The same failure with Calico's eBPF dataplane: "calico-node" mounted
    /// cgroup2 at /run/calico/cgroup from its container's cgroup namespace,
    /// and its connect-time load balancer (the program names of Calico's
    /// connect_balancer*.c) landed on the container's cgroup.
    pub fn calico(tag: &str) -> SeedNode {
        Self::build(tag, &CALICO, true, "")
    }

    /// The seed, on a node whose kubelet names its pods (log directories,
    /// as the kubelet lays them out): the Cilium pod is
    /// `kube-system/cilium-x7k2p`, its container `cilium-agent`.
    pub fn named(tag: &str) -> SeedNode {
        let logs = format!(
            "mount -t tmpfs tmpfs /var/log\nmkdir -p /var/log/containers /var/log/pods/kube-system_cilium-x7k2p_{SEED_POD_UID}/cilium-agent\n\
             ln -s /var/log/pods/kube-system_cilium-x7k2p_{SEED_POD_UID}/cilium-agent/0.log \
             /var/log/containers/cilium-x7k2p_kube-system_cilium-agent-{SEED_CONTAINER}.log"
        );
        Self::build(tag, &CILIUM, true, &logs)
    }

    fn build(tag: &str, cni: &SeedCni, attach: bool, more_setup: &str) -> SeedNode {
        let t = TestCgroup::new(tag);
        let ctr = t.mkdir(&cilium_container());
        t.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
        // A process named as the CNI's agent is.
        let bin = tempfile::tempdir().expect("tempdir");
        let fake = bin.path().join(cni.agent);
        fs::copy(which("sleep").expect("sleep"), &fake).expect("copy sleep");
        let sandbox = Sandbox::new(&format!(
            r#"mount -t tmpfs tmpfs /run
mkdir -p {mp}
sh -c 'echo $$ > "$0/cgroup.procs" && exec unshare --cgroup sh -c "mount -t cgroup2 none {mp} && exec $1 infinity"' '{ctr}' '{fake}' &
i=0; until grep -q ' {mp} ' /proc/self/mountinfo; do i=$((i+1)); [ $i -lt 200 ]; sleep 0.05; done
{more_setup}"#,
            mp = cni.mount_point,
            ctr = ctr.display(),
            fake = fake.display(),
        ));
        let mount_top = sandbox.path(cni.mount_point);
        assert_eq!(cgroup_id(&mount_top), cgroup_id(&ctr), "the namespaced mount must be rooted at the container");
        let mut progs = Vec::new();
        let mut attached = Vec::new();
        if attach {
            progs = cni.programs.iter().map(|(n, h)| Prog::load(n, h)).collect();
            // Attach "at the root" of the agent's mount, as Cilium does.
            attached = progs.iter().map(|p| Attached::new_fd(open_dir(&mount_top), p, 0)).collect();
        }
        SeedNode { attached, progs, sandbox, _bin: bin, t }
    }
}
