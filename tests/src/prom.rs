//! The monitoring stack users run the agent under, for real: a Prometheus
//! and an Alertmanager on loopback ports, each with its own data directory,
//! killed on drop; and the chart rendered by a real `helm`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::daemon::{free_addr, http_get, wait_until};

/// The workspace, where deploy/ is.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace").to_owned()
}

/// The chart's directory.
pub fn chart() -> PathBuf {
    workspace().join("deploy/helm/cgaudit")
}

/// `helm template <release> deploy/helm/cgaudit <args>`: its documents, or
/// helm's error.
pub fn helm_template(release: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let out = Command::new("helm").args(["template", release]).arg(chart()).args(args).output().expect("run helm");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(yaml_docs(&String::from_utf8(out.stdout).expect("utf-8")))
}

/// YAML documents as JSON values (PyYAML comes with kubernetes-validate).
pub fn yaml_docs(yaml: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .args(["-c", "import sys, yaml, json; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), yaml.as_bytes()).expect("write yaml");
    let out = child.wait_with_output().expect("python3");
    assert!(out.status.success(), "not YAML:\n{yaml}");
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The one document of `kind` in `docs`.
pub fn doc<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let mut of_kind = docs.iter().filter(|d| d["kind"] == kind);
    let one = of_kind.next().unwrap_or_else(|| panic!("no {kind} rendered"));
    assert!(of_kind.next().is_none(), "more than one {kind}");
    one
}

/// A child process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An alert as an HTTP API lists it.
#[derive(Debug, Clone)]
pub struct Alert {
    pub name: String,
    /// Prometheus: `pending`/`firing`; Alertmanager: `active`/`suppressed`.
    pub state: String,
    pub labels: Value,
    pub annotations: Value,
}

fn alert(labels: &Value, annotations: &Value, state: &str) -> Alert {
    Alert {
        name: labels["alertname"].as_str().unwrap_or_default().to_owned(),
        state: state.to_owned(),
        labels: labels.clone(),
        annotations: annotations.clone(),
    }
}

/// A Prometheus on a loopback port.
pub struct Prometheus {
    _child: Killed,
    pub web: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus with `config` (prometheus.yml) and `rules` (the
    /// file `rules.yaml` beside it), and waits until it is ready.
    pub fn start(config: &str, rules: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules");
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("write config");
        let web = free_addr();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { _child: Killed(child), web, _dir: dir };
        let ready = wait_until(Duration::from_secs(30), || http_get(web, "/-/ready").is_some_and(|(s, _)| s == 200));
        assert!(ready, "prometheus never became ready");
        p
    }

    /// `/api/v1/alerts`.
    pub fn alerts(&self) -> Vec<Alert> {
        let Some((200, body)) = http_get(self.web, "/api/v1/alerts") else { return Vec::new() };
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["alerts"]
            .as_array()
            .map(|a| {
                a.iter().map(|x| alert(&x["labels"], &x["annotations"], x["state"].as_str().unwrap_or(""))).collect()
            })
            .unwrap_or_default()
    }

    /// One instant query's result vector.
    pub fn query(&self, q: &str) -> Vec<Value> {
        let enc: String = q
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let Some((200, body)) = http_get(self.web, &format!("/api/v1/query?query={enc}")) else { return Vec::new() };
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// A real Alertmanager (Debian's prometheus-alertmanager) on a loopback port.
pub struct Alertmanager {
    _child: Killed,
    pub web: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    pub fn start(config: &str) -> Alertmanager {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("alertmanager.yml"), config).expect("write config");
        let web = free_addr();
        let cluster = free_addr();
        let child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", dir.path().join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            // A cluster of one, on loopback.
            .arg(format!("--cluster.listen-address={cluster}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start alertmanager");
        let am = Alertmanager { _child: Killed(child), web, _dir: dir };
        let ready = wait_until(Duration::from_secs(30), || http_get(web, "/-/ready").is_some_and(|(s, _)| s == 200));
        assert!(ready, "alertmanager never became ready");
        am
    }

    /// `/api/v2/alerts`: every alert with its state (`active`, `suppressed`).
    pub fn alerts(&self) -> Vec<Alert> {
        let Some((200, body)) = http_get(self.web, "/api/v2/alerts") else { return Vec::new() };
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|x| alert(&x["labels"], &x["annotations"], x["status"]["state"].as_str().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default()
    }
}
