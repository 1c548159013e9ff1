//! The failure cgaudit exists for (cilium/cilium#48420): a CNI agent in a private
//! cgroup namespace mounts cgroup2 at /run/cilium/cgroupv2, gets a mount rooted
//! at its own container, and attaches its socket-LB programs "at the root",
//! which is really its container's cgroup.

use std::fs;
use std::path::Path;

use integration_tests::*;
use serde_json::Value;

fn findings<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["findings"].as_array().expect("findings").iter().filter(|f| f["kind"] == kind).collect()
}

#[test]
fn seed_misattachment_is_found_attributed_and_explained() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::new("seed");
    let root = s.t.path.to_str().unwrap();
    let run = s.sandbox.agent(&["audit", "--cgroup-root", root, "--output", "json"]);
    assert_eq!(run.code, 1, "a misattachment is a problem (exit 1): {}\n{}", run.stderr, run.stdout);
    let report = run.json();

    // One finding for the agent's container, naming its ten programs by
    // their full names and hooks, and the pod/container it belongs to.
    let below = findings(&report, "socket_lb_below_root");
    assert_eq!(below.len(), 1, "{report:#}");
    assert_eq!(below[0]["count"], 10, "{report:#}");
    let programs = below[0]["programs"].as_array().unwrap();
    let mut types: Vec<&str> = programs.iter().map(|p| p["attach_type"].as_str().unwrap()).collect();
    types.sort();
    let mut expected: Vec<&str> = CILIUM_SOCKET_LB.iter().map(|(_, h)| *h).collect();
    expected.sort();
    assert_eq!(types, expected);
    let mut hooks: Vec<&str> = below[0]["hooks"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    hooks.sort();
    assert_eq!(hooks, expected);
    for p in programs {
        let (name, _) = CILIUM_SOCKET_LB.iter().find(|(_, h)| *h == p["attach_type"]).unwrap();
        assert_eq!(p["prog_name"], *name, "full BTF name, not the kernel's 15 bytes");
    }
    for f in &below {
        assert_eq!(f["severity"], "critical");
        assert_eq!(f["cgroup"], cilium_container());
        assert_eq!(f["pod_uid"], SEED_POD_UID);
        assert_eq!(f["container_id"], SEED_CONTAINER);
        assert_eq!(f["runtime"], "containerd");
        assert_eq!(f["owner"], "cilium");
        let procs = f["processes"].as_array().unwrap();
        assert!(procs.iter().any(|p| p["comm"] == "cilium-agent"), "names the agent process: {f:#}");
        assert!(!f["remediation"].as_str().unwrap().is_empty());
    }
    let ids: Vec<u64> = s.attached.iter().map(|a| u64::from(a.prog_id)).collect();
    assert!(programs.iter().all(|p| ids.contains(&p["prog_id"].as_u64().unwrap())));

    // The cause: the mount in PID 1's namespace, rooted at the container.
    let mounts = findings(&report, "cgroup_mount_not_root");
    assert_eq!(mounts.len(), 1, "{report:#}");
    assert_eq!(mounts[0]["cgroup"], cilium_container());
    assert_eq!(mounts[0]["severity"], "critical");
    assert!(mounts[0]["message"].as_str().unwrap().contains("/run/cilium/cgroupv2"));

    // The root lacks every hook; the other pod has no socket LB in effect
    // (the agent's own container has: its process is in the cgroup that
    // holds the programs, as the seed's write-up saw ClusterIPs work from
    // there only).
    let missing = findings(&report, "socket_lb_missing_at_root");
    assert_eq!((missing.len(), missing[0]["hooks"].as_array().map(Vec::len)), (1, Some(10)), "{report:#}");
    let pods = findings(&report, "pods_without_socket_lb");
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0]["count"], 1, "{:#}", pods[0]);
    assert_eq!(pods[0]["pods"][0]["uid"], OTHER_POD_UID);

    // The likely cause: the agent's private cgroup namespace.
    let agent = findings(&report, "cni_agent_private_cgroupns");
    assert_eq!(agent.len(), 1, "{report:#}");
    assert_eq!(agent[0]["processes"][0]["comm"], "cilium-agent");
    assert_eq!(agent[0]["pod_uid"], SEED_POD_UID);

    // Every attachment is listed, with cgroup paths relative to the root.
    let atts = report["attachments"].as_array().unwrap();
    assert_eq!(atts.len(), 10);
    assert!(atts.iter().all(|a| a["cgroup"] == cilium_container() && a["link_id"].is_null()));
}

#[test]
fn seed_table_output_leads_with_the_verdict() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::new("seed");
    let run = s.sandbox.agent(&["audit", "--cgroup-root", s.t.path.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    eprintln!("{}", run.stdout);
    let first = run.stdout.lines().next().unwrap();
    assert!(first.starts_with("PROBLEM: "), "{first}");
    assert_eq!(run.stdout.lines().last(), Some(first), "the verdict is the last line too, after the attachments");
    assert!(
        run.stdout.contains(&format!("[critical] socket_lb_below_root x10 at {}", cilium_container())),
        "one block for the ten programs"
    );
    assert!(run.stdout.contains("connect4 cil_sock4_connect (prog "));
    assert!(run.stdout.contains("processes cilium-agent ("));
    assert!(run.stdout.contains(&format!("pod {SEED_POD_UID}")));
    // The tree part lists the container's cgroup with its full path.
    assert!(run.stdout.contains(&format!("{}{}", s.t.path.display(), cilium_container())));
}

/// Replaces run-specific values (ids, pids, paths) and host-dependent parts
/// with placeholders so the document's shape and wording can be pinned.
fn normalise(v: &mut Value, t: &Path) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                match k.as_str() {
                    "prog_id" | "cgroup_id" | "root_cgroup_id" | "pid" | "cgroupns" | "prog_tag" | "node"
                    | "kernel" | "cgroup_root" | "revision" | "generated_at" | "started"
                        if !val.is_null() =>
                    {
                        *val = Value::String(format!("<{k}>"))
                    }
                    // Depends on the kernel's config (BPF LSM), not on us.
                    "unsupported_attach_types" => *val = Value::String("<kernel-dependent>".into()),
                    // Which features an audit tries is ours; what they find is the kernel's.
                    "kernel_features" => {
                        if let Value::Object(f) = val {
                            f.values_mut().for_each(|v| *v = Value::String("<kernel-dependent>".into()));
                        }
                    }
                    // The host's own devices differ between machines (and
                    // with what the suite runs: dockerd's docker0); none
                    // carries a program in the seed.
                    "devices" if val.get("devices").is_some() => {
                        if let Some(Value::Array(d)) = val.get_mut("devices") {
                            d.retain(|x| x["programs"].as_array().is_some_and(|p| !p.is_empty()));
                        }
                        normalise(val, t);
                    }
                    // The host's own cgroup2 mounts differ between machines;
                    // keep those inside the audited tree.
                    "mounts" => {
                        if let Value::Array(a) = val {
                            a.retain(|m| !m["top"]["cgroup"].is_null());
                        }
                        normalise(val, t);
                    }
                    _ => normalise(val, t),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, t)),
        Value::String(s) => {
            let name = t.file_name().unwrap().to_str().unwrap();
            // The node's name, in the restart commands of fix texts.
            let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let s2 = s.replace(&format!("spec.nodeName={}", node.trim()), "spec.nodeName=<node>");
            *s = scrub(&s2.replace(t.to_str().unwrap(), "<T>").replace(name, "<T>"));
        }
        _ => {}
    }
}

/// Replaces the number after each of these words in a message.
fn scrub(s: &str) -> String {
    let mut out = s.to_owned();
    for word in ["prog ", "pid ", "id ", "namespace ", "PID 1's (", "link "] {
        let mut result = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(word) {
            let after = &rest[i + word.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            result.push_str(&rest[..i + word.len()]);
            result.push_str(if digits > 0 { "<n>" } else { "" });
            rest = &after[digits..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

#[test]
fn seed_json_matches_the_golden_schema() {
    if !can_run(&["unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::new("seed");
    let run = s.sandbox.agent(&["audit", "--cgroup-root", s.t.path.to_str().unwrap(), "--output", "json"]);
    let mut report = run.json();
    normalise(&mut report, &s.t.path);
    let got = serde_json::to_string_pretty(&report).unwrap() + "\n";
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/seed.json");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::write(&golden, &got).unwrap();
    }
    let want = fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        got == want,
        "JSON report differs from {} (UPDATE_GOLDEN=1 to accept a deliberate change):\n{got}",
        golden.display()
    );
}

/// Issue 28, L2 [a mount in PID 1's namespace]: the mount check read the
/// inode of whatever was on top of the path: a tmpfs mounted over the
/// misrooted cgroup2 mount reads as inode 1, as the root does, and the
/// finding went away while the agent that had opened the mount kept
/// attaching through it. The mount is judged by its own mountinfo entry now,
/// and said to be hidden.
#[test]
fn a_misrooted_mount_hidden_under_another_is_still_found_and_said_to_be_hidden() {
    if !can_run(&["unshare", "nsenter", "mount"]) {
        return;
    }
    let s = SeedNode::new("shadowed");
    let mount = which("mount").unwrap();
    let status = s.sandbox.command(&mount, &["-t", "tmpfs", "tmpfs", CILIUM.mount_point]).status().expect("run mount");
    assert!(status.success(), "mount tmpfs over the seed's mount: {status}");
    let root = s.t.path.to_str().unwrap();
    let run = s.sandbox.agent(&["audit", "--cgroup-root", root, "--output", "json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let report = run.json();
    let mounts = findings(&report, "cgroup_mount_not_root");
    assert_eq!(mounts.len(), 1, "the hidden misrooted mount: {:#}", report["mounts"]);
    assert_eq!(mounts[0]["cgroup"], cilium_container());
    assert_eq!(mounts[0]["severity"], "critical");
    let message = mounts[0]["message"].as_str().unwrap();
    assert!(message.contains("hidden under tmpfs at /run/cilium/cgroupv2"), "{message}");
    let listed = report["mounts"].as_array().unwrap();
    let hidden: Vec<&Value> = listed.iter().filter(|m| m["shadowed_by"].is_string()).collect();
    assert_eq!(hidden.len(), 1, "{listed:#?}");
    assert_eq!(hidden[0]["mount_point"], CILIUM.mount_point);
    assert_eq!(hidden[0]["top"]["cgroup"], cilium_container());
}
