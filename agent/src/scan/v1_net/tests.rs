use super::*;

#[test]
fn net_cls_or_net_prio_count_as_used_by_what_their_cgroups_hold() {
    let proc = tempfile::tempdir().unwrap();
    let hierarchy = proc.path().join("1/root/sys/fs/cgroup/net_cls,net_prio");
    fs::create_dir_all(hierarchy.join("unused")).unwrap();
    fs::write(hierarchy.join("net_cls.classid"), "0\n").unwrap();
    fs::write(hierarchy.join("unused/net_cls.classid"), "0\n").unwrap();
    let v1 =
        [V1NetController { controller: "net_cls".into(), mount_point: Some("/sys/fs/cgroup/net_cls,net_prio".into()) }];
    // (Unless this machine's own log says so: the test reads it too.)
    if kernel_log_says_disabled() {
        return;
    }
    assert_eq!(net_controllers_in_use(proc.path(), &v1), None);
    fs::create_dir_all(hierarchy.join("used")).unwrap();
    fs::write(hierarchy.join("used/net_cls.classid"), "1048577\n").unwrap();
    let why = net_controllers_in_use(proc.path(), &v1).unwrap();
    assert_eq!(why, "net_cls.classid 1048577 in /sys/fs/cgroup/net_cls,net_prio/used");
}

#[test]
fn v1_net_controllers_are_found_mounted_or_bound() {
    let proc = tempfile::tempdir().unwrap();
    fs::create_dir(proc.path().join("1")).unwrap();
    fs::write(
        proc.path().join("1/mountinfo"),
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
         41 31 0:38 / /sys/fs/cgroup/net_cls,net_prio rw,relatime - cgroup cgroup rw,net_cls,net_prio\n\
         42 31 0:39 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
    )
    .unwrap();
    fs::write(
        proc.path().join("cgroups"),
        "#subsys_name\thierarchy\tnum_cgroups\tenabled\nnet_cls\t9\t1\t1\nnet_prio\t9\t1\t1\n",
    )
    .unwrap();
    let found = v1_net_controllers(proc.path());
    let mp = Some(std::path::PathBuf::from("/sys/fs/cgroup/net_cls,net_prio"));
    assert_eq!(
        found,
        [
            V1NetController { controller: "net_cls".into(), mount_point: mp.clone() },
            V1NetController { controller: "net_prio".into(), mount_point: mp },
        ]
    );
    // Bound to a hierarchy mounted elsewhere (another namespace).
    fs::write(proc.path().join("1/mountinfo"), "").unwrap();
    assert_eq!(v1_net_controllers(proc.path()).len(), 2);
    // Neither: what this machine has (hierarchy 0).
    fs::write(proc.path().join("cgroups"), "net_cls\t0\t4\t1\nnet_prio\t0\t4\t1\n").unwrap();
    assert!(v1_net_controllers(proc.path()).is_empty());
}
