//! The agent as users deploy it, tested through the integrations
//! themselves: the Helm chart rendered by a real `helm` and validated against
//! Kubernetes' schemas; the alert rules under `promtool` and the inhibit
//! rules under `amtool`; a real Prometheus scraping the agent with the
//! target labels the Prometheus Operator sets, sending to a real
//! Alertmanager with the shipped inhibit rules; node-problem-detector's
//! plugin command exactly as shipped; the agent in a pod without hostPID;
//! the exporter's conventions.
//! (Over 500 lines: one behaviour area, the integrations users deploy
//! with, whose tests share one chart render and one Prometheus.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration_tests::*;
use serde_json::{Value, json};

const IMAGE_REPO: &str = "registry.test/cgaudit";

fn image() -> String {
    std::env::var("CGAUDIT_IMAGE").unwrap_or_else(|_| "localhost/cgaudit:0.1.0".into())
}

fn render(args: &[&str]) -> Vec<Value> {
    let mut all = vec![
        "--namespace",
        "cgaudit",
        "--set",
        "image.repository=registry.test/cgaudit",
        "--set",
        "networkPolicy.prometheus.namespace=monitoring",
    ];
    all.extend_from_slice(args);
    helm_template("cgaudit", &all).unwrap_or_else(|e| panic!("helm template {args:?}: {e}"))
}

fn pod_spec(docs: &[Value]) -> &Value {
    &doc(docs, "DaemonSet")["spec"]["template"]["spec"]
}

#[test]
fn the_chart_lints_renders_validates_and_grants_least_privilege() {
    if !can_run(&["helm", "kubernetes-validate"]) {
        return;
    }
    let lint = Command::new("helm")
        .arg("lint")
        .arg(chart())
        .args(["--strict", "--set", "image.repository=registry.test/cgaudit"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&lint.stdout).to_string() + &String::from_utf8_lossy(&lint.stderr);
    assert!(lint.status.success() && said.contains("0 chart(s) failed"), "helm lint:\n{said}");

    // No default points at a registry the project does not own.
    let err = helm_template("cgaudit", &["--set", "networkPolicy.enabled=false"])
        .expect_err("an image repository is required");
    assert!(err.contains("image.repository is required") && err.contains("cargo xtask image --push"), "{err}");

    let all = ["--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"];
    let all = [&all[..], &["--set", "prometheusRule.runbookUrl=https://wiki.test/runbook"]].concat();
    let all = [&all[..], &["--set", "alertmanagerConfig.enabled=true", "--set", "namespace.create=true"]].concat();
    let netpol = [
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.prometheus.namespaceSelector.matchLabels.team=obs",
    ];
    let all = [&all[..], &netpol[..]].concat();
    let render_for = |kube: &str| {
        let out = Command::new("helm")
            .args(["template", "cgaudit"])
            .arg(chart())
            .args(["--kube-version", kube, "--namespace", "cgaudit", "--set", "image.repository=registry.test/cgaudit"])
            .args(&all)
            .output()
            .unwrap();
        assert!(out.status.success(), "{kube}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // Every minor the chart admits (kubeVersion >=1.25) that
    // kubernetes-validate ships schemas for, rendered for that version and
    // checked against that version's own schemas (not the Operator's CRDs).
    let shipped = Command::new("python3")
        .args([
            "-c",
            "import kubernetes_validate, os; d = os.path.join(os.path.dirname(kubernetes_validate.__file__), \
             'kubernetes-json-schema'); print('\\n'.join(sorted(x for x in os.listdir(d))))",
        ])
        .output()
        .unwrap();
    let shipped = String::from_utf8_lossy(&shipped.stdout).to_string();
    let mut minors = 0;
    for minor in 25..=60 {
        let kube = format!("1.{minor}.0");
        if !shipped.lines().any(|l| l == format!("v{kube}-local-strict")) {
            continue;
        }
        let yaml = render_for(&kube);
        let core: Vec<Value> =
            yaml_docs(&yaml).into_iter().filter(|d| !d["apiVersion"].as_str().unwrap().contains("coreos")).collect();
        let file = tempfile::NamedTempFile::new().unwrap();
        let text: String = core.iter().map(|d| serde_json::to_string(d).unwrap() + "\n---\n").collect();
        std::fs::write(file.path(), text).unwrap();
        let v = Command::new("kubernetes-validate").args(["--strict", "-k", &kube]).arg(file.path()).output().unwrap();
        let report = String::from_utf8_lossy(&v.stdout).to_string() + &String::from_utf8_lossy(&v.stderr);
        assert!(v.status.success(), "{kube}: {report}");
        for kind in ["namespace", "serviceaccount", "service", "daemonset", "networkpolicy", "resourcequota"] {
            assert!(
                report.contains(&format!("passed for resource {kind}/cgaudit")),
                "{kube}: {kind} not validated:\n{report}"
            );
        }
        minors += 1;
    }
    assert!(minors >= 10, "validated for {minors} minors only");
    let yaml = render_for("1.32.0");

    let docs = yaml_docs(&yaml);
    let ds = doc(&docs, "DaemonSet");
    assert_eq!(ds["metadata"]["namespace"], "cgaudit");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true, "the node's PID 1 is the pod's /proc/1");
    assert_eq!(pod["hostUsers"], true, "no user namespace: it would break hostPID and bpf()");
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert!(pod["affinity"].is_null(), "no architecture selector: {:#}", pod["affinity"]);
    // No host mounts: everything is reached through /proc/1/root. The one
    // volume is the probe socket's directory, in memory.
    assert_eq!(
        pod["volumes"],
        json!([{"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]),
        "no host mounts: everything is reached through /proc/1/root"
    );
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.test/cgaudit:0.1.0", "the chart's appVersion by default");
    let sc = &c["securityContext"];
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        sc["capabilities"]["add"],
        json!(["SYS_ADMIN", "NET_ADMIN", "BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"])
    );
    assert_eq!(
        (&sc["readOnlyRootFilesystem"], &sc["privileged"], &sc["allowPrivilegeEscalation"]),
        (&json!(true), &json!(false), &json!(false))
    );
    assert_eq!(sc["seLinuxOptions"], json!({"type": "spc_t", "level": "s0"}));
    // The probes are off the network (issue 36, M3): the agent's own socket.
    let probe =
        |p: &str| c[p]["exec"]["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>();
    assert_eq!(
        probe("readinessProbe"),
        ["/usr/local/bin/agent", "probe", "--socket", "/run/cgaudit/probe.sock", "ready"]
    );
    assert_eq!(
        probe("livenessProbe"),
        ["/usr/local/bin/agent", "probe", "--socket", "/run/cgaudit/probe.sock", "live"]
    );
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/run/cgaudit");
    for r in ["requests", "limits"] {
        assert!(c["resources"][r]["cpu"].is_string() && c["resources"][r]["memory"].is_string(), "{r}");
    }
    assert_eq!(c["resources"]["limits"]["memory"], "128Mi");
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for want in [
        "run",
        "--listen=[::]:9974",
        "--remediate=off",
        "--audit-endpoint=loopback",
        "--probe-socket=/run/cgaudit/probe.sock",
    ] {
        assert!(args.contains(&want), "{want} not in {args:?}");
    }
    // Outside kube-system, critical pods need a quota that admits them.
    let quota = doc(&docs, "ResourceQuota");
    assert_eq!(quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"], json!(["system-node-critical"]));
    assert_eq!(doc(&docs, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged");
    assert!(
        !render(&["--namespace", "kube-system"]).iter().any(|d| d["kind"] == "ResourceQuota"),
        "kube-system admits critical pods without a quota"
    );
    // The Service selects the pods; the ServiceMonitor scrapes its port.
    let svc = doc(&docs, "Service");
    assert_eq!(svc["spec"]["selector"], ds["spec"]["selector"]["matchLabels"]);
    let sm = doc(&docs, "ServiceMonitor");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(sm["spec"]["endpoints"][0]["honorLabels"], false);
    assert_eq!(sm["spec"]["selector"]["matchLabels"], svc["spec"]["selector"]);
    // Enabled with a selector, only Prometheus's namespace reaches the
    // agents, and they call nothing.
    let np = doc(&docs, "NetworkPolicy");
    assert_eq!(np["spec"]["podSelector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"]);
    assert_eq!(np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["team"], "obs");
    assert_eq!(np["spec"]["egress"], json!([]));
    // On by default (issue 47, M4: without it every pod of the node
    // competes with Prometheus for the agent's connections), refused with
    // nothing to admit (a guessed namespace would leave every agent
    // `up == 0` and page at install), named by Prometheus's namespace, and
    // off only when asked.
    let err = helm_template("cgaudit", &["--set", "image.repository=registry.test/cgaudit"])
        .expect_err("a NetworkPolicy that admits nobody");
    assert!(err.contains("--set networkPolicy.prometheus.namespace=monitoring"), "{err}");
    let np = doc(&render(&[]), "NetworkPolicy").clone();
    assert_eq!(
        np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring",
        "{np:#}"
    );
    assert!(!render(&["--set", "networkPolicy.enabled=false"]).iter().any(|d| d["kind"] == "NetworkPolicy"));
    // The PrometheusRule holds the rules file's groups, every runbook link
    // pointing at an existing section.
    // The file's placeholders (image, the DaemonSet the deployment alert
    // watches) become this release's.
    let file = std::fs::read_to_string(chart().join("files/prometheus-rules.yaml")).unwrap();
    assert!(file.contains("REGISTRY/cgaudit:VERSION") && file.contains("daemonset=~\"(.+-)?cgaudit\""));
    let links = file.lines().filter(|l| l.trim_start().starts_with("runbook_url:"));
    assert!(
        links.clone().count() >= 10 && links.clone().all(|l| l.contains("runbook_url: RUNBOOK_URL#")),
        "the raw rules link nowhere of their own: {:?}",
        links.collect::<Vec<_>>()
    );
    let file = file
        .replace("REGISTRY/cgaudit:VERSION", &format!("registry.test/cgaudit:{}", env!("CARGO_PKG_VERSION")))
        .replace("daemonset=~\"(.+-)?cgaudit\"", "namespace=\"cgaudit\", daemonset=\"cgaudit\"")
        .replace("RUNBOOK_URL", "https://wiki.test/runbook");
    let rules = &yaml_docs(&file)[0];
    assert_eq!(doc(&docs, "PrometheusRule")["spec"]["groups"], rules["groups"]);
    let runbook = std::fs::read_to_string(workspace().join("docs/runbook.md")).unwrap().to_lowercase();
    for rule in rules["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()) {
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.rsplit_once('#').unwrap().1;
        assert!(runbook.contains(&format!("## {anchor}\n")), "runbook has no section for {url}");
    }
    // The AlertmanagerConfig carries the shipped inhibit rules.
    let inhibit =
        &yaml_docs(&std::fs::read_to_string(chart().join("files/alertmanager-inhibit-rules.yaml")).unwrap())[0];
    let amc = doc(&docs, "AlertmanagerConfig");
    let rendered = amc["spec"]["inhibitRules"].as_array().unwrap();
    assert_eq!(rendered.len(), inhibit["inhibit_rules"].as_array().unwrap().len());
    assert_eq!(
        rendered[0]["sourceMatch"],
        json!([{"name": "alertname", "matchType": "=", "value": "CgauditSocketLBMisattached"}])
    );
    assert_eq!(rendered[0]["equal"], json!(["namespace", "instance"]));
}

#[test]
fn chart_values_choose_image_apparmor_selectors_and_labels() {
    if !can_run(&["helm"]) {
        return;
    }
    // A digest pins the image.
    let digest = format!("sha256:{}", "a".repeat(64));
    let docs = render(&["--set", &format!("image.digest={digest}")]);
    assert_eq!(pod_spec(&docs)["containers"][0]["image"], format!("{IMAGE_REPO}@{digest}"));
    // AppArmor: an annotation before Kubernetes 1.30, the field from 1.30;
    // RuntimeDefault, or Unconfined for remediation (it mounts).
    for (kube, remediate, field, annotation) in [
        ("1.29.0", "off", Value::Null, json!("runtime/default")),
        ("1.29.0", "on", Value::Null, json!("unconfined")),
        ("1.30.0", "off", json!({"type": "RuntimeDefault"}), Value::Null),
        ("1.31.0", "on", json!({"type": "Unconfined"}), Value::Null),
    ] {
        let docs = render(&["--kube-version", kube, "--set", &format!("remediate={remediate}")]);
        let ds = doc(&docs, "DaemonSet");
        let c = &ds["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["securityContext"]["appArmorProfile"], field, "{kube} {remediate}");
        assert_eq!(
            ds["spec"]["template"]["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/agent"],
            annotation,
            "{kube} {remediate}"
        );
        assert!(c["args"].as_array().unwrap().contains(&json!(format!("--remediate={remediate}"))));
    }
    // kube-prometheus-stack selects by `release`; the runbook is wherever you keep it.
    let docs = render(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.labels.release=kps",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=kps",
        "--set",
        "prometheusRule.runbookUrl=https://wiki.test/cgaudit",
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "networkPolicy.prometheus.namespaceSelector.matchLabels.team=obs",
        "--set",
        "hostNetwork=true",
    ]);
    assert_eq!(doc(&docs, "ServiceMonitor")["metadata"]["labels"]["release"], "kps");
    let pr = doc(&docs, "PrometheusRule");
    assert_eq!(pr["metadata"]["labels"]["release"], "kps");
    let urls: Vec<&str> = pr["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["annotations"]["runbook_url"].as_str().unwrap())
        .collect();
    assert!(urls.iter().all(|u| u.starts_with("https://wiki.test/cgaudit#cgaudit")), "{urls:?}");
    assert_eq!(
        doc(&docs, "NetworkPolicy")["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["team"],
        "obs"
    );
    assert_eq!(pod_spec(&docs)["hostNetwork"], true);
    assert_eq!(pod_spec(&docs)["dnsPolicy"], "ClusterFirstWithHostNet");
    // The DaemonSet alert watches this release's DaemonSet.
    let docs = helm_template(
        "edge",
        &[
            "--namespace",
            "obs",
            "--set",
            "image.repository=r/c",
            "--set",
            "networkPolicy.prometheus.namespace=obs",
            "--set",
            "prometheusRule.enabled=true",
            "--set",
            "prometheusRule.runbookUrl=https://wiki.test/runbook",
        ],
    )
    .unwrap();
    let expr = doc(&docs, "PrometheusRule")["spec"]["groups"][1]["rules"][0]["expr"].as_str().unwrap().to_owned();
    assert!(expr.contains(r#"namespace="obs", daemonset="edge-cgaudit""#), "{expr}");
    // No runbook link to a copy that may not exist: yours is asked for.
    let err = helm_template(
        "edge",
        &[
            "--set",
            "image.repository=r/c",
            "--set",
            "networkPolicy.enabled=false",
            "--set",
            "prometheusRule.enabled=true",
        ],
    )
    .expect_err("alerts without a runbook URL");
    assert!(err.contains("prometheusRule.runbookUrl is required"), "{err}");

    // What the schema refuses is named.
    for (bad, key) in [
        ("remediate=maybe", "/remediate"),
        ("port=0", "/port"),
        ("image.digest=latest", "/image/digest"),
        ("events=syscalls", "/events"),
        ("imageTag=1", "imageTag"),
    ] {
        let off = "networkPolicy.enabled=false";
        let err =
            helm_template("cgaudit", &["--set", "image.repository=r/c", "--set", off, "--set", bad]).expect_err(bad);
        assert!(err.contains(key), "{bad}: {err}");
    }
}

#[test]
fn rules_pass_promtool_and_the_inhibit_rules_pass_amtool() {
    if !can_run(&["promtool", "amtool"]) {
        return;
    }
    let files = chart().join("files");
    let check =
        Command::new("promtool").args(["check", "rules"]).arg(files.join("prometheus-rules.yaml")).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let test = Command::new("promtool")
        .args(["test", "rules", "rules_test.yaml"])
        .current_dir(workspace().join("deploy/prometheus"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&test.stdout).to_string() + &String::from_utf8_lossy(&test.stderr);
    assert!(test.status.success() && out.contains("SUCCESS"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("am.yml"), alertmanager_config()).unwrap();
    let am = Command::new("amtool").args(["check-config"]).arg(dir.path().join("am.yml")).output().unwrap();
    let out = String::from_utf8_lossy(&am.stdout).to_string() + &String::from_utf8_lossy(&am.stderr);
    assert!(am.status.success() && out.contains("SUCCESS") && out.contains("3 inhibit rules"), "{out}");
}

/// A whole Alertmanager configuration: the shipped inhibit rules, and a
/// receiver that sends nothing anywhere.
fn alertmanager_config() -> String {
    let inhibit = std::fs::read_to_string(chart().join("files/alertmanager-inhibit-rules.yaml")).unwrap();
    format!(
        "route:\n  receiver: blackhole\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: blackhole\n{inhibit}"
    )
}

/// The PrometheusRule the chart renders, as a rules file, with every `for:`
/// cut to 1s so the test takes seconds (promtool's unit tests pin the durations).
fn rendered_rules_fast() -> String {
    let docs =
        render(&["--set", "prometheusRule.enabled=true", "--set", "prometheusRule.runbookUrl=https://wiki.test/rb"]);
    let mut groups = doc(&docs, "PrometheusRule")["spec"]["groups"].clone();
    for g in groups.as_array_mut().unwrap() {
        for r in g["rules"].as_array_mut().unwrap() {
            if r.get("for").is_some() {
                r["for"] = json!("1s");
            }
        }
    }
    serde_json::to_string_pretty(&json!({ "groups": groups })).unwrap()
}

/// Issue 27, 1 and 5: scraped as the Prometheus Operator scrapes (its target
/// labels `namespace`, `service`, `pod`, `container`, `endpoint` name the
/// agent's own pod; `honor_labels: false`), the seed pages once, naming the
/// broken pod, and the symptoms it causes reach Alertmanager muted.
#[test]
fn a_real_prometheus_with_the_operators_target_labels_pages_once_naming_the_broken_pod() {
    if !can_run(&["prometheus", "prometheus-alertmanager", "helm", "unshare", "nsenter"]) {
        return;
    }
    let seed = SeedNode::named("deploy-page");
    let d = Daemon::start_via(
        seed.sandbox.command(&agent_bin(), &[]),
        &["--cgroup-root", seed.t.path.to_str().unwrap(), "--interval", "1h"],
    );
    let am = Alertmanager::start(&alertmanager_config());
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\n\
         alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am}']\n\
         scrape_configs:\n  - job_name: cgaudit\n    honor_labels: false\n    static_configs:\n      - targets: ['{agent}']\n\
         \x20       labels: {{namespace: cgaudit, service: cgaudit, pod: cgaudit-4x9zq, container: agent, endpoint: metrics, node: node-1}}\n",
        am = am.web,
        agent = d.addr,
    );
    let prom = Prometheus::start(&config, &rendered_rules_fast());

    // The symptoms fire in Prometheus, and reach Alertmanager muted.
    let symptoms = ["CgauditSocketLBMissingAtRoot", "CgauditPodsWithoutSocketLB", "CgauditCgroupMountNotRoot"];
    let settled = wait_until(Duration::from_secs(90), || {
        let firing = prom.alerts();
        let at_am = am.alerts();
        symptoms.iter().all(|s| firing.iter().any(|a| a.name == *s && a.state == "firing"))
            && at_am.iter().any(|a| a.name == "CgauditSocketLBMisattached" && a.state == "active")
            && symptoms.iter().all(|s| at_am.iter().any(|a| a.name == *s && a.state == "suppressed"))
    });
    assert!(settled, "prometheus: {:#?}\nalertmanager: {:#?}\n{}", prom.alerts(), am.alerts(), d.logs());

    let at_am = am.alerts();
    let active: Vec<&Alert> = at_am.iter().filter(|a| a.state == "active").collect();
    assert_eq!(active.len(), 1, "one incident, one page: {active:#?}");
    let page = &active[0].labels;
    assert_eq!(page["alertname"], "CgauditSocketLBMisattached");
    assert_eq!(page["severity"], "critical");
    // The broken pod, not the agent's own.
    assert_eq!(
        (&page["pod_namespace"], &page["pod_name"], &page["container_name"]),
        (&json!("kube-system"), &json!("cilium-x7k2p"), &json!("cilium-agent"))
    );
    assert_eq!(page["pod_uid"], SEED_POD_UID);
    assert_eq!(page["container_id"], SEED_CONTAINER);
    assert_eq!(page["cgroup"], cilium_container());
    assert_eq!(
        page["hooks"],
        "connect4,connect6,post_bind4,post_bind6,sendmsg4,sendmsg6,recvmsg4,recvmsg6,getpeername4,getpeername6"
    );
    assert_eq!(
        (&page["namespace"], &page["node"]),
        (&json!("cgaudit"), &json!("node-1")),
        "the agent's namespace, for AlertmanagerConfig routes"
    );
    assert!(page["pod"].is_null() && page["container"].is_null(), "the agent's own pod is not the incident: {page:#}");
    let description = active[0].annotations["description"].as_str().unwrap();
    assert!(description.contains("pod kube-system/cilium-x7k2p, container cilium-agent"), "{description}");
    // Nothing was renamed on the way: no label of ours collides with the Operator's.
    for series in prom.query(r#"{__name__=~"cgaudit_.+"}"#) {
        let labels = series["metric"].as_object().unwrap();
        assert!(labels.keys().all(|k| !k.starts_with("exported_")), "{labels:?}");
        assert_eq!(labels["pod"], "cgaudit-4x9zq");
    }
    dashboard_queries_return_what_their_panels_mean(&prom);
}

/// Issue 50: the chart's Grafana dashboard (`dashboards.enabled`), each
/// panel's queries run against this Prometheus scraping the seed node, as
/// Grafana runs them (its variables at "All", `$__rate_interval` a window
/// the scrapes fill): every query answers, with series of finite values,
/// and the panels that show the seed's verdict show it.
fn dashboard_queries_return_what_their_panels_mean(prom: &Prometheus) {
    let docs = render(&["--set", "dashboards.enabled=true"]);
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["labels"]["grafana_dashboard"] == "1")
        .unwrap_or_else(|| panic!("no dashboard ConfigMap labelled for Grafana's sidecar"));
    let dashboard: Value = serde_json::from_str(cm["data"]["cgaudit-fleet.json"].as_str().expect("the dashboard"))
        .expect("the dashboard is JSON");
    let grafana = |expr: &str| expr.replace("$node", ".*").replace("$job", ".+").replace("$__rate_interval", "30s");
    // The variables' series exist and carry the label they list.
    for v in dashboard["templating"]["list"].as_array().unwrap().iter().filter(|v| v["type"] == "query") {
        let q = v["query"].as_str().unwrap();
        let inner = q.strip_prefix("label_values(").and_then(|r| r.strip_suffix(')')).expect("label_values(...)");
        let (selector, label) = inner.rsplit_once(", ").expect("label_values(series, label)");
        let found = prom.query(&grafana(selector));
        assert!(found.iter().any(|s| s["metric"][label].is_string()), "variable {}: {q}: {found:?}", v["name"]);
    }
    let mut answered = std::collections::BTreeMap::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        for t in panel["targets"].as_array().unwrap() {
            let expr = grafana(t["expr"].as_str().unwrap());
            let result = prom.query(&expr);
            assert!(!result.is_empty(), "panel {title:?}: {expr} returned nothing");
            for s in &result {
                let value = s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
                assert!(value.is_some_and(f64::is_finite), "panel {title:?}: {expr}: {s}");
            }
            answered.insert(format!("{title} {}", t["refId"].as_str().unwrap()), result);
        }
    }
    let value = |key: &str| answered[key][0]["value"][1].as_str().unwrap().to_owned();
    assert_eq!(value("Nodes with a critical finding A"), "1", "the seed node is broken");
    assert_eq!(value("Nodes audited A"), "1");
    let labels = |key: &str, label: &str| -> Vec<String> {
        answered[key].iter().filter_map(|s| s["metric"][label].as_str().map(str::to_owned)).collect()
    };
    assert!(labels("Findings by node and kind A", "kind").contains(&"socket_lb_below_root".to_owned()));
    assert!(labels("Findings by owner A", "owner").contains(&"cilium".to_owned()));
    assert_eq!(labels("Misattached socket-LB programs A", "node"), ["node-1"]);
    assert_eq!(labels("Misattached socket-LB programs A", "owner"), ["cilium"]);
}

/// node-problem-detector's custom plugin monitor, as its plugin.go does it:
/// the command's stdout (at most 4 KiB), trimmed, cut at
/// `max_output_length` bytes, is the condition's message; exit 0 is OK
/// (the condition False, with the config's own message), 1 NonOK (True),
/// anything else Unknown.
struct Npd {
    config: Value,
}

#[derive(Debug)]
struct Condition {
    status: &'static str,
    message: String,
    code: i32,
}

impl Npd {
    fn load() -> Npd {
        let path = workspace().join("deploy/node-problem-detector/cgaudit-monitor.json");
        Npd { config: serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap() }
    }

    fn command(&self) -> (String, Vec<String>) {
        let rule = &self.config["rules"][0];
        let args = rule["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
        (rule["path"].as_str().unwrap().to_owned(), args)
    }

    fn judge(&self, run: &Run) -> Condition {
        let max = self.config["pluginConfig"]["max_output_length"].as_u64().unwrap() as usize;
        let out = &run.stdout.as_bytes()[..run.stdout.len().min(4096)];
        let trimmed = String::from_utf8_lossy(out).trim().to_owned();
        let cut = String::from_utf8_lossy(&trimmed.as_bytes()[..trimmed.len().min(max)]).into_owned();
        let (status, message) = match run.code {
            0 => ("False", self.config["conditions"][0]["message"].as_str().unwrap().to_owned()),
            1 => ("True", cut),
            _ => ("Unknown", cut),
        };
        Condition { status, message, code: run.code }
    }

    /// The shipped command on this host, with the shipped binary at the
    /// shipped path (a private mount namespace puts it there).
    fn on_host(&self) -> Condition {
        self.judge(&run(self.shipped(Command::new("unshare"))))
    }

    /// The same on a sandbox node (`pid1`'s PID and mount namespaces: its
    /// PID 1, mounts and bpffs are what the command sees, as NPD's on a
    /// node).
    fn on_node(&self, pid1: u32) -> Condition {
        let mut c = Command::new("nsenter");
        c.arg("--target").arg(pid1.to_string()).args(["--pid", "--mount", "--", "unshare"]);
        c.env("CGAUDIT_NESTED_NODE", "true");
        self.judge(&run(self.shipped(c)))
    }

    /// `unshare` (as `base`) of a private mount namespace where the shipped
    /// binary is at the shipped path, running the shipped command.
    fn shipped(&self, mut base: Command) -> Command {
        let (path, args) = self.command();
        base.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs tmpfs {dir} && touch {path} && mount --bind \"$0\" {path} && exec \"$@\"",
                dir = Path::new(&path).parent().unwrap().display()
            ))
            .arg(shipped_agent_bin())
            .arg(&path)
            .args(&args);
        base
    }
}

#[test]
fn node_problem_detector_runs_the_shipped_command_on_clean_seed_warning_and_incomplete_nodes() {
    if !can_run(&["unshare", "podman", "runc"]) {
        return;
    }
    let npd = Npd::load();
    let (path, args) = npd.command();
    assert_eq!(path, "/usr/local/bin/agent", "where the image has it");
    assert_eq!(args, ["audit", "--output", "summary", "--fail-on", "critical"]);
    assert!(npd.config["pluginConfig"]["max_output_length"].as_u64().unwrap() >= 200);
    // The message a healthy node shows claims nothing it did not check.
    let healthy = npd.config["conditions"][0]["message"].as_str().unwrap();
    assert!(!healthy.contains("attached at the root"), "{healthy}");

    // A clean node: OK.
    let clean = npd.on_host();
    assert_eq!((clean.status, clean.code), ("False", 0), "{clean:?}");

    // The seed: True, naming the top finding within the message. On its
    // node, where the broken mount is in PID 1's mount namespace: what
    // proves the programs Cilium's (docs/security.md, "Proofs").
    let seed = SeedNode::new("npd-seed");
    let broken = npd.on_node(seed.sandbox.pid1);
    assert_eq!(broken.status, "True", "{broken:?}");
    for want in ["PROBLEM", "socket_lb_below_root", SEED_POD_UID, &SEED_CONTAINER[..12], "connect4"] {
        assert!(broken.message.contains(want), "{want} not in the message: {broken:?}");
    }
    assert!(!broken.message.contains('\n'));
    drop(seed);

    // Warnings only (a hook nearing the kernel's limit, a runtime's leak):
    // not a node condition under --fail-on critical, but still named.
    let t = TestCgroup::new("npd-warn");
    let ctr = t.mkdir(&cgroupfs_container("burstable", OTHER_POD_UID, OTHER_CONTAINER));
    let progs: Vec<Prog> = (0..48).map(|_| Prog::load("", "device")).collect();
    let _a: Vec<Attached> = progs.iter().map(|p| Attached::new(&ctr, p, ALLOW_MULTI)).collect();
    let warned = npd.on_host();
    assert_eq!(warned.status, "False", "{warned:?}");
    let mut plain = Command::new(shipped_agent_bin());
    plain.args(["audit", "--output", "summary"]);
    let plain = run(plain);
    assert_eq!(plain.code, 1, "without --fail-on critical a warning is a problem: {plain:?}");
    let mut line = Command::new(shipped_agent_bin());
    line.args(["audit", "--output", "summary", "--fail-on", "critical"]);
    let line = run(line);
    assert!(line.stdout.starts_with("OK: ") && line.stdout.contains("1 warning: hook_program_count_high"), "{line:?}");
    drop(_a);

    // A node where NPD's pod has no hostPID (its own DaemonSet has none):
    // Unknown, and the message says why.
    let script = podman_script(&format!(
        "--runtime runc run --rm --cgroupns=private {PODMAN_LIMITS} \
         --cap-drop=ALL --cap-add=SYS_ADMIN,NET_ADMIN,BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH --read-only \
         --security-opt=no-new-privileges --network=none --entrypoint {path} {} {}",
        image(),
        args.join(" ")
    ));
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    let unknown = npd.judge(&run(c));
    assert_eq!((unknown.status, unknown.code), ("Unknown", 2), "{unknown:?}");
    assert!(unknown.message.starts_with("UNKNOWN: ") && unknown.message.contains("hostPID"), "{unknown:?}");
}

/// A podman container of the agent's image with the chart's capabilities
/// and none of the host's namespaces unless `extra` says so.
fn pod_without_host_pid(extra: &str, args: &str) -> Run {
    let script = podman_script(&format!(
        "--runtime runc run --rm {PODMAN_LIMITS} --cap-drop=ALL --cap-add=SYS_ADMIN,NET_ADMIN,BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH \
         --read-only --security-opt=no-new-privileges --network=none {extra} {} {args}",
        image()
    ));
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    run(c)
}

/// Issue 27, 2: as PID 1 of its own PID, mount and cgroup namespaces (an
/// admission policy stripped hostPID, or the image copied into a
/// Deployment), the agent said `OK ... 1 cgroups scanned` and exited 0.
/// With the host's cgroup namespace but not its PIDs, a live cilium-agent
/// was "not running" (cni_leftover_programs). Both are an incomplete view.
#[test]
fn without_host_pid_the_agent_says_its_view_is_incomplete() {
    if !can_run(&["podman", "runc", "unshare"]) {
        return;
    }
    let own = pod_without_host_pid("--cgroupns=private", "audit --output json");
    assert_eq!(own.code, 2, "{own:?}");
    let report = own.json();
    assert_eq!(report["status"], "incomplete");
    assert_eq!(report["view"]["complete"], false);
    let why = report["view"]["reason"].as_str().unwrap();
    assert!(why.contains("PID 1 of its own PID namespace") && why.contains("hostPID"), "{why}");

    // The host's cgroups, a live privileged cilium-agent, its programs at the
    // audited root: the agent cannot see the process, so it says nothing of it.
    let t = TestCgroup::new("no-hostpid");
    let prog = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new(&t.path, &prog, ALLOW_MULTI);
    let _agent = CiliumAgent::new(&[("kube-proxy-replacement", "true")]);
    let in_container = Path::new("/sys/fs/cgroup").join(t.path.strip_prefix(cgroup2_root()).unwrap());
    let host_cgroups = pod_without_host_pid(
        "--cgroupns=host",
        &format!("audit --output json --cgroup-root {}", in_container.display()),
    );
    assert_eq!(host_cgroups.code, 2, "{host_cgroups:?}");
    let report = host_cgroups.json();
    assert_eq!(report["status"], "incomplete", "{report:#}");
    assert!(report["findings"].as_array().unwrap().iter().all(|f| f["kind"] != "cni_leftover_programs"), "{report:#}");
    assert!(report["view"]["reason"].as_str().unwrap().contains("hostPID"));
    // The same from the host, which sees the agent: clean.
    let from_host = agent(&["audit", "--output", "json", "--cgroup-root", t.path.to_str().unwrap()]);
    assert_eq!(from_host.code, 0, "{from_host:?}");

    // The daemon: not ready, saying why; the view metric 0.
    let port = free_addr().port();
    let _d = Container::run(
        "no-hostpid-daemon",
        &format!(
            "--runtime runc {PODMAN_LIMITS} --cap-drop=ALL --cap-add=SYS_ADMIN,NET_ADMIN,BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH --read-only \
             --cgroupns=private --network=host {} run --listen 127.0.0.1:{port} --interval 1h",
            image()
        ),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let said = wait_until(Duration::from_secs(20), || {
        http_get(addr, "/readyz").is_some_and(|(s, b)| s == 503 && b.contains("hostPID"))
    });
    assert!(said, "/readyz: {:?}\n{}", http_get(addr, "/readyz"), _d.logs());
    let scrape = http_get(addr, "/metrics").unwrap().1;
    assert_eq!(metric_value(&scrape, "cgaudit_audit_view_complete"), Some(0.0), "{scrape}");
}

/// Issue 27, 6: exporter conventions.
#[test]
fn the_agent_listens_and_answers_like_an_exporter() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("exporter");
    // `:PORT`: every address, IPv4 and IPv6, one socket.
    let port = free_addr().port();
    let v4: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let d = Daemon::start_listening(&format!(":{port}"), v4, &["--cgroup-root", t.path.to_str().unwrap()]);
    let v6: std::net::SocketAddr = format!("[::1]:{port}").parse().unwrap();
    assert_eq!(http_get(v6, "/healthz").map(|r| r.0), Some(200), "IPv6 clients are served too");
    // A landing page that links the endpoints; a 404 that says where to look.
    let (status, page) = http_get(v4, "/").unwrap();
    assert_eq!(status, 200);
    for link in ["metrics", "healthz", "readyz", "audit", "events"] {
        assert!(page.contains(&format!("href=\"{link}\"")), "{link} not linked:\n{page}");
    }
    let (status, body) = http_get(v4, "/nope").unwrap();
    assert_eq!((status, body.trim()), (404, "not found: see / for the endpoints"));
    // The standard process series, the build and the kernel.
    let scrape = d.get("/metrics").1;
    for name in
        ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"]
    {
        assert!(metric_value(&scrape, name).is_some(), "{name} missing:\n{scrape}");
    }
    let build = scrape.lines().find(|l| l.starts_with("cgaudit_build_info{")).unwrap();
    assert!(
        build.contains(&format!("arch=\"{}\"", std::env::consts::ARCH))
            && build.contains("revision=\"")
            && build.contains("version=\""),
        "{build}"
    );
    assert!(!build.contains("kernel"), "{build}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(
        metric_value(&scrape, &format!("cgaudit_kernel_info{{release=\"{}\"}}", release.trim())),
        Some(1.0),
        "{scrape}"
    );
    drop(d);

    // A host name: every address it resolves to.
    let port = free_addr().port();
    let v4: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let d = Daemon::start_listening(&format!("localhost:{port}"), v4, &["--cgroup-root", t.path.to_str().unwrap()]);
    assert!(d.logs().contains("localhost resolves to"), "{}", d.logs());
    drop(d);

    // Bad addresses: exit 2 at once, naming what is wrong.
    for (listen, says) in
        [("9974", "no port"), ("[::1:9974", "is not an address"), ("bad host:1", "neither an IP address")]
    {
        let r = agent(&["run", "--listen", listen, "--cgroup-root", t.path.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{listen}: {r:?}");
        assert!(r.stderr.contains(says), "{listen}: {}", r.stderr);
    }
}

/// Issue 27, 7: a fleet collector piping `agent audit -o json` to jq gets
/// JSON whatever the exit code, and every report says when, by which
/// agent, of which node.
#[test]
fn json_and_summary_are_printed_on_every_exit_code() {
    if !can_run(&[]) {
        return;
    }
    let missing = agent(&[
        "audit",
        "-o",
        "json",
        "--cgroup-root",
        "/sys/fs/cgroup/cgaudit-test-nonexistent",
        "--node-name",
        "node-9",
    ]);
    assert_eq!(missing.code, 2, "{missing:?}");
    let doc = missing.json();
    assert_eq!(doc["status"], "error");
    assert!(doc["error"].as_str().unwrap().contains("no such directory"), "{doc:#}");
    assert_eq!(doc["node"], "node-9");
    assert_eq!(doc["agent"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["generated_at"].as_str().unwrap().ends_with('Z'));
    // A command line clap refuses, from a collector that asked for JSON.
    let bad = agent(&["audit", "--output", "json", "--walk", "sideways"]);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["status"], "error", "{bad:?}");
    assert!(bad.stderr.contains("sideways"), "clap's own message stays on stderr: {}", bad.stderr);
    let summary = agent(&["audit", "-o", "summary", "--cgroup-root", "/sys/fs/cgroup/cgaudit-test-nonexistent"]);
    assert_eq!(summary.code, 2);
    assert!(summary.stdout.starts_with("UNKNOWN: ") && summary.stdout.contains("no such directory"), "{summary:?}");
    // A report that ran carries the same three.
    let t = TestCgroup::new("json-meta");
    let ok = agent(&["audit", "-o", "json", "--cgroup-root", t.path.to_str().unwrap(), "--node-name", "node-9"]);
    assert_eq!(ok.code, 0, "{ok:?}");
    let report = ok.json();
    assert_eq!((&report["node"], &report["agent"]["version"]), (&json!("node-9"), &json!(env!("CARGO_PKG_VERSION"))));
    assert!(report["generated_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(report["view"], json!({"complete": true, "reason": null}));
}
