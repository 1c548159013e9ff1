//! What ships, tested as users run it: the static binary over a real ssh
//! session, the manifests and alert rules with the ecosystem's own tools, a
//! real Prometheus firing and resolving the alert, and the image run under
//! podman the way the DaemonSet runs it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

fn static_agent() -> PathBuf {
    shipped_agent_bin()
}

fn image() -> String {
    std::env::var("CGAUDIT_IMAGE").unwrap_or_else(|_| "localhost/cgaudit:0.1.0".into())
}

/// A child process killed on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// True when the ELF file has no PT_INTERP program header (no dynamic loader).
fn is_static_elf(path: &Path) -> bool {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF");
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (entsize, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).all(|i| u32::from_le_bytes(b[phoff + i * entsize..phoff + i * entsize + 4].try_into().unwrap()) != 3)
}

#[test]
fn static_binary_needs_nothing_installed() {
    if !can_run(&[]) {
        return;
    }
    let bin = static_agent();
    assert!(is_static_elf(&bin), "{} has a dynamic loader", bin.display());
    let out = Command::new(&bin).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("agent {}", env!("CARGO_PKG_VERSION")));
}

/// A throwaway sshd on a loopback port, in its own mount namespace (its
/// privilege-separation directory lives on a private tmpfs /run).
struct Sshd {
    _guard: Guard,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sshd {
    fn start() -> Sshd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (key, kind) in [("host_key", "ed25519"), ("client_key", "ed25519")] {
            let ok =
                Command::new("ssh-keygen").args(["-q", "-t", kind, "-N", "", "-f"]).arg(d.join(key)).status().unwrap();
            assert!(ok.success());
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let port = free_addr().port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPermitRootLogin prohibit-password\n\
             AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             UsePAM no\nStrictModes no\nPidFile none\nLogLevel ERROR\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && exec \"$(command -v sshd)\" -D -e -f {}/sshd_config",
                d.display()
            ))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let up = wait_until(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        assert!(up, "sshd never listened on {port}");
        Sshd { _guard: Guard(child), port, dir }
    }

    fn run(&self, remote: &str) -> Run {
        let mut c = Command::new("ssh");
        c.args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"])
            .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-p", &self.port.to_string(), "-i"])
            .arg(self.dir.path().join("client_key"))
            .arg("root@127.0.0.1")
            .arg(remote);
        run(c)
    }
}

#[test]
fn audit_over_ssh_returns_the_same_json_and_exit_codes() {
    if !can_run(&["sshd", "ssh", "ssh-keygen", "unshare"]) {
        return;
    }
    let sshd = Sshd::start();
    let bin = static_agent();
    let t = TestCgroup::new("ssh");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let root = t.path.to_str().unwrap();
    let compare = |args: &str, want: i32| {
        let remote = sshd.run(&format!("{} audit --output json {args}", bin.display()));
        let mut c = Command::new(&bin);
        c.args(["audit", "--output", "json"]).args(args.split_whitespace());
        let local = run(c);
        assert_eq!((remote.code, local.code), (want, want), "remote {remote:?}\nlocal {local:?}");
        if want == 2 {
            assert!(remote.stdout.is_empty() && remote.stderr.contains("no such directory"), "{remote:?}");
        } else {
            let (mut r, mut l): (Value, Value) = (remote.json(), local.json());
            // Ids of programs loaded between the runs would differ: none are.
            r["kernel"] = Value::Null;
            l["kernel"] = Value::Null;
            assert_eq!(r, l, "JSON over ssh must be the JSON locally");
        }
    };
    compare(&format!("--cgroup-root {root}"), 0);
    let p = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new(&ctr, &p, ALLOW_MULTI);
    compare(&format!("--cgroup-root {root}"), 1);
    compare(&format!("--cgroup-root {root}/nonexistent"), 2);
}

/// The pod labels the Service selects.
fn svc_labels(docs: &[Value]) -> Value {
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let name = &ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"];
    serde_json::json!({ "app.kubernetes.io/name": name })
}

/// YAML documents as JSON values (PyYAML comes with kubernetes-validate).
fn yaml_docs(yaml: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args(["-c", "import sys, yaml, json; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

#[test]
fn manifests_render_validate_and_grant_least_privilege() {
    if !can_run(&["kubectl", "kubernetes-validate"]) {
        return;
    }
    let rendered = Command::new("kubectl").args(["kustomize"]).arg(workspace().join("deploy")).output().unwrap();
    assert!(rendered.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&rendered.stderr));
    let yaml = String::from_utf8(rendered.stdout).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &yaml).unwrap();
    let v = Command::new("kubernetes-validate").args(["--strict", "-k", "1.32.0"]).arg(file.path()).output().unwrap();
    let report = String::from_utf8_lossy(&v.stdout).to_string() + &String::from_utf8_lossy(&v.stderr);
    assert!(v.status.success(), "{report}");
    for kind in ["namespace", "serviceaccount", "service", "daemonset", "networkpolicy"] {
        assert!(report.contains(&format!("passed for resource {kind}/cgaudit")), "{kind} not validated:\n{report}");
    }

    let docs = yaml_docs(&yaml);
    let get = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"));
    let ds = get("DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], "cgaudit");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true);
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(pod["tolerations"], serde_json::json!([{"operator": "Exists"}]));
    assert!(pod["volumes"].is_null(), "no host mounts: everything is reached through /proc/1/root");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    let added: Vec<&str> = sc["capabilities"]["add"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(added, ["SYS_ADMIN", "NET_ADMIN", "BPF", "PERFMON", "SYS_PTRACE"]);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    // The runtime's default AppArmor profile: the agent mounts nothing.
    assert!(sc["appArmorProfile"].is_null() && pod["securityContext"]["appArmorProfile"].is_null(), "{sc:#}");
    let args = c["args"].as_array().unwrap();
    assert!(args.iter().any(|a| a == "--remediate=off") && args.iter().any(|a| a == "--audit-endpoint=loopback"));
    // Only the monitoring namespace reaches the agents, and they call nothing.
    let np = get("NetworkPolicy");
    assert_eq!(np["spec"]["podSelector"]["matchLabels"], svc_labels(&docs));
    assert_eq!(np["spec"]["ingress"][0]["ports"], serde_json::json!([{"port": "metrics", "protocol": "TCP"}]));
    assert_eq!(np["spec"]["egress"], serde_json::json!([]));
    // Remediation is the opt-in component: mount(2), so AppArmor unconfined.
    let dir = workspace().join("target/kustomize-remediation");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "resources: [../../deploy]\ncomponents: [../../deploy/components/remediation]\n",
    )
    .unwrap();
    let with = Command::new("kubectl").args(["kustomize"]).arg(&dir).output().unwrap();
    assert!(with.status.success(), "{}", String::from_utf8_lossy(&with.stderr));
    let with = yaml_docs(&String::from_utf8(with.stdout).unwrap());
    let c2 = &with.iter().find(|d| d["kind"] == "DaemonSet").unwrap()["spec"]["template"]["spec"]["containers"][0];
    assert!(c2["args"].as_array().unwrap().iter().any(|a| a == "--remediate=on"));
    assert_eq!(c2["securityContext"]["appArmorProfile"]["type"], "Unconfined");
    for r in ["requests", "limits"] {
        assert!(c["resources"][r]["cpu"].is_string() && c["resources"][r]["memory"].is_string(), "{r}");
    }
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert!(c["args"].as_array().unwrap().iter().any(|a| a == "--listen=0.0.0.0:9974"));

    // The ServiceMonitor scrapes the Service's port, the Service selects the pods.
    let svc = get("Service");
    let sm = get("ServiceMonitor");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]);
    assert_eq!(
        svc["spec"]["selector"],
        ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
            .as_str()
            .map(|n| serde_json::json!({"app.kubernetes.io/name": n}))
            .unwrap()
    );
    // The PrometheusRule carries exactly the promtool-tested rules.
    let rules = yaml_docs(&std::fs::read_to_string(workspace().join("deploy/prometheus/rules.yaml")).unwrap());
    assert_eq!(get("PrometheusRule")["spec"], rules[0]);
    // Every alert links an existing runbook section.
    let runbook = std::fs::read_to_string(workspace().join("docs/runbook.md")).unwrap().to_lowercase();
    for rule in rules[0]["groups"][0]["rules"].as_array().unwrap() {
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.rsplit_once('#').unwrap().1;
        assert!(runbook.contains(&format!("## {anchor}")), "runbook has no section for {url}");
    }
    // node-problem-detector's plugin config runs `agent audit`.
    let npd: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("deploy/node-problem-detector/cgaudit-monitor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(npd["plugin"], "custom");
    assert_eq!(npd["rules"][0]["args"][0], "audit");
    assert_eq!(npd["rules"][0]["condition"], npd["conditions"][0]["type"]);
}

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    if !can_run(&["promtool"]) {
        return;
    }
    let dir = workspace().join("deploy/prometheus");
    let check = Command::new("promtool").args(["check", "rules", "rules.yaml"]).current_dir(&dir).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let test = Command::new("promtool").args(["test", "rules", "rules_test.yaml"]).current_dir(&dir).output().unwrap();
    let out = String::from_utf8_lossy(&test.stdout).to_string() + &String::from_utf8_lossy(&test.stderr);
    assert!(test.status.success() && out.contains("SUCCESS"), "{out}");
}

/// Prometheus's /api/v1/alerts: (alertname, state, labels) of each alert.
fn alerts(addr: std::net::SocketAddr) -> Vec<(String, String, Value)> {
    let Some((200, body)) = http_get(addr, "/api/v1/alerts") else { return Vec::new() };
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["labels"]["alertname"].as_str().unwrap_or("").to_owned(),
                        x["state"].as_str().unwrap_or("").to_owned(),
                        x["labels"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn prometheus_fires_and_resolves_the_misattachment_alert() {
    if !can_run(&["prometheus"]) {
        return;
    }
    let t = TestCgroup::new("prom");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let d = Daemon::start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "1h"]);
    // The shipped rules with `for:` shortened to 1s so the test takes seconds;
    // the durations themselves are pinned by promtool's unit tests.
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::read_to_string(workspace().join("deploy/prometheus/rules.yaml")).unwrap();
    let fast: String = rules
        .lines()
        .map(|l| if l.trim_start().starts_with("for: ") { "        for: 1s" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("rules.yaml"), fast).unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\nscrape_configs:\n  - job_name: cgaudit\n    static_configs:\n      - targets: ['{}']\n        labels: {{node: test-node}}\n",
        d.addr
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let web = free_addr();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _prom = Guard(prom);
    assert!(
        wait_until(Duration::from_secs(30), || http_get(web, "/-/ready").is_some_and(|(s, _)| s == 200)),
        "prometheus never became ready"
    );

    let p = Prog::load("cil_sock4_connect", "connect4");
    let attached = Attached::new(&ctr, &p, ALLOW_MULTI);
    let firing = wait_until(Duration::from_secs(60), || {
        alerts(web).iter().any(|(name, state, _)| name == "CgauditSocketLBMisattached" && state == "firing")
    });
    assert!(firing, "never fired: {:?}\n{}", alerts(web), d.logs());
    let (_, _, labels) = alerts(web).into_iter().find(|(n, _, _)| n == "CgauditSocketLBMisattached").unwrap();
    assert_eq!(labels["node"], "test-node");
    assert_eq!(labels["prog_name"], "cil_sock4_connect");
    assert_eq!(labels["pod_uid"], OTHER_POD_UID);
    assert_eq!(labels["severity"], "critical");

    drop(attached);
    let resolved =
        wait_until(Duration::from_secs(60), || !alerts(web).iter().any(|(n, _, _)| n == "CgauditSocketLBMisattached"));
    assert!(resolved, "never resolved: {:?}", alerts(web));
}

#[test]
fn image_runs_like_the_daemonset_and_sees_another_containers_misattachment() {
    if !can_run(&["podman", "runc", "unshare", "nsenter"]) {
        return;
    }
    // Another container misattaches (privileged, like a CNI agent pod).
    let bin = tempfile::tempdir().unwrap();
    let cni = bin.path().join("cilium-agent");
    std::fs::copy(env!("CARGO_BIN_EXE_fixture"), &cni).unwrap();
    let cni_container = Container::run(
        "img-cni",
        &format!(
            "--privileged --cgroupns=private --cgroup-manager=cgroupfs {PODMAN_LIMITS} --network=none --rootfs /:O \
             {} socket-lb-agent /run/cilium/cgroupv2",
            cni.display()
        ),
    );
    let cni_id = cni_container.id.clone();
    let attached = wait_until(Duration::from_secs(20), || cni_container.logs().contains("attached 10"));
    assert!(attached, "{}", cni_container.logs());

    // The agent's image, as the DaemonSet runs it: host PID namespace (a
    // sandbox node here, since this machine's PID 1 is closed to everyone),
    // private cgroup namespace, only the manifest's capabilities, read-only.
    let sb = Sandbox::new("");
    // runc: crun (podman's default) raises RLIMIT_MEMLOCK for its device
    // filter, which needs CAP_SYS_RESOURCE, absent on these machines.
    let script = podman_script(&format!(
        "--runtime runc run --rm --pid=host --cgroupns=private {PODMAN_LIMITS} \
         --cap-drop=ALL --cap-add=SYS_ADMIN,NET_ADMIN,BPF,PERFMON,SYS_PTRACE --read-only --security-opt=no-new-privileges \
         --network=none {} audit --output json",
        image()
    ));
    let mut c = sb.command(Path::new("/usr/bin/unshare"), &["-m", "--propagation", "private", "sh", "-c", &script]);
    c.stdin(Stdio::null());
    let audit = run(c);
    assert_eq!(audit.code, 1, "{audit:?}");
    let report = audit.json();
    assert_eq!(report["root_kind"], "hierarchy", "the real root, through /proc/1/root");
    assert_eq!(report["root_cgroup_id"], 1);
    assert_eq!(
        report["walk"]["method"], "bpf_iter",
        "the manifest's capabilities run the in-kernel walk: {:#}",
        report["walk"]
    );
    let below: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "socket_lb_below_root" && f["container_id"] == cni_id.as_str())
        .collect();
    assert_eq!(below.len(), 10, "names the other container: {report:#}");
    assert!(below.iter().all(|f| f["runtime"] == "podman"));
}
