//! The failure cgaudit exists for, reproduced on a sandbox node.

use std::fs;

use crate::bpf::{Attached, Prog, load_cilium_socket_lb};
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
        Self::build(tag, true)
    }

    /// The broken mount only, nothing attached yet.
    pub fn mount_only(tag: &str) -> SeedNode {
        Self::build(tag, false)
    }

    fn build(tag: &str, attach: bool) -> SeedNode {
        let t = TestCgroup::new(tag);
        let ctr = t.mkdir(&cilium_container());
        t.mkdir(&systemd_container("besteffort", OTHER_POD_UID, OTHER_CONTAINER));
        // A process whose comm is "cilium-agent", as a CNI agent's would be.
        let bin = tempfile::tempdir().expect("tempdir");
        let fake = bin.path().join("cilium-agent");
        fs::copy(which("sleep").expect("sleep"), &fake).expect("copy sleep");
        let sandbox = Sandbox::new(&format!(
            r#"mount -t tmpfs tmpfs /run
mkdir -p /run/cilium/cgroupv2
sh -c 'echo $$ > "$0/cgroup.procs" && exec unshare --cgroup sh -c "mount -t cgroup2 none /run/cilium/cgroupv2 && exec $1 infinity"' '{ctr}' '{fake}' &
i=0; until grep -q ' /run/cilium/cgroupv2 ' /proc/self/mountinfo; do i=$((i+1)); [ $i -lt 200 ]; sleep 0.05; done"#,
            ctr = ctr.display(),
            fake = fake.display(),
        ));
        let mount_top = sandbox.path("/run/cilium/cgroupv2");
        assert_eq!(cgroup_id(&mount_top), cgroup_id(&ctr), "the namespaced mount must be rooted at the container");
        let mut progs = Vec::new();
        let mut attached = Vec::new();
        if attach {
            progs = load_cilium_socket_lb();
            // Attach "at the root" of the agent's mount, as Cilium does.
            attached = progs.iter().map(|p| Attached::new_fd(open_dir(&mount_top), p, 0)).collect();
        }
        SeedNode { attached, progs, sandbox, _bin: bin, t }
    }
}
