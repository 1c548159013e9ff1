//! Issue 39: every command block of the user documentation (README.md,
//! docs/, deploy/README.md, CONTRIBUTING.md) runs here the way the text
//! says, or is checked as far as this machine allows. Each shell block is
//! marked on the line before it:
//!
//! - `<!-- commands: seed -->`: each `agent ...` line (`sudo ./agent` too)
//!   runs as root on a seed node (a sandbox whose cilium-agent misattached
//!   its programs: the failure the tool is for), and must not fail (exit 0
//!   or 1); a line piped into `jq` must print something, and no `null`;
//! - `<!-- commands: golden -->`: each `agent audit -o json | jq ...` line
//!   runs its `jq` on `tests/golden/seed.json` and on a live seed's report,
//!   and must print something, and no `null`;
//! - `<!-- commands: check -->`: lines that need a cluster or a build
//!   (`helm`, `kubectl`, `cargo xtask`): `helm` lines render with `helm
//!   template --kube-version` (`install` as `template`), `kubectl` lines run
//!   with `--dry-run=client` where that needs no server, else their verb
//!   and every flag they use must be the real kubectl's, and `cargo xtask`
//!   lines must name a real subcommand.
//!
//! A shell block without a mark fails the test, as does a line no mark
//! knows what to do with.

use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::*;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The files whose commands are the user's.
fn doc_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md"), root.join("deploy/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A fenced shell block, its mark and its command lines (continuations
/// joined, comments dropped).
#[derive(Debug)]
struct Block {
    at: String,
    mark: Option<String>,
    lines: Vec<String>,
}

fn shell_blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if let Some(lang) = l.strip_prefix("```")
            && !lang.is_empty()
        {
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i].trim_start());
                i += 1;
            }
            if matches!(lang.trim(), "sh" | "bash" | "shell" | "console") {
                let mark = lines[..start]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .and_then(|l| l.trim().strip_prefix("<!-- commands: "))
                    .and_then(|l| l.strip_suffix(" -->"))
                    .map(str::to_owned);
                out.push(Block { at: format!("{}:{}", file.display(), start + 1), mark, lines: commands(&body) });
            }
        }
        i += 1;
    }
    out
}

/// The commands of a block: `\` continuations joined, a trailing `#`
/// comment dropped (outside quotes), blank lines skipped.
fn commands(body: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in body {
        let l = l.trim_end();
        if let Some(head) = l.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(l);
        let line = strip_comment(&cur).trim().to_owned();
        if !line.is_empty() {
            out.push(line);
        }
        cur.clear();
    }
    out
}

fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && (i == 0 || line[..i].ends_with(' ')) => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The commands written inline in the runbook's prose (`**Confirm.**
/// \`agent audit ... | jq ...\``): its on-call routes. Issue 47 found two
/// that failed as written, which the fenced blocks alone did not show.
fn inline_commands(file: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('`') else { break };
            let code = &after[..end];
            if code.starts_with("agent audit") && code.contains("| jq") {
                out.push((format!("{}:{}", file.display(), n + 1), code.to_owned()));
            }
            rest = &after[end + 1..];
        }
    }
    out
}

/// Whether a jq answer names every pod it speaks of: an object with a pod's
/// namespace or name null must carry its UID (or a `pod` of its own; a
/// finding whose `pod_uid` is null is about no pod).
fn names_its_pods(printed: &str) -> Result<(), String> {
    for v in serde_json::Deserializer::from_str(printed).into_iter::<serde_json::Value>() {
        let Ok(serde_json::Value::Object(o)) = v else { continue };
        let null = |k: &str| o.get(k).is_some_and(serde_json::Value::is_null);
        let unnamed = null("namespace") || null("name") || null("pod_namespace") || null("pod_name");
        let identified = ["uid", "pod_uid", "pod"].iter().any(|k| o.contains_key(*k));
        if unnamed && !identified {
            return Err(format!("prints a pod without its name or UID: {}", serde_json::Value::Object(o)));
        }
    }
    Ok(())
}

/// An inline command's jq over `input`: it must run (exit 0), and what it
/// prints must name each pod.
fn inline_jq_on(line: &str, input: &str) -> Result<(), String> {
    let (_, filter) = line.split_once("| jq").ok_or("no jq")?;
    let mut child = Command::new("sh")
        .args(["-c", &format!("jq{filter}")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("jq failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    names_its_pods(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn every_shell_block_of_the_documentation_is_marked() {
    let mut unmarked = Vec::new();
    let mut n = 0;
    for f in doc_files() {
        for b in shell_blocks(&f) {
            n += 1;
            if !matches!(b.mark.as_deref(), Some("seed" | "golden" | "check")) {
                unmarked.push(b.at);
            }
        }
    }
    assert!(n >= 8, "only {n} shell blocks found");
    assert!(unmarked.is_empty(), "shell blocks without a <!-- commands: seed|golden|check --> mark: {unmarked:#?}");
}

/// `line` with the documentation's placeholders filled: the node and the
/// image the suite has.
fn filled(line: &str, node: &str) -> String {
    line.replace("<node>", node)
        .replace("NODE", node)
        .replace("<image>", "registry.test/cgaudit:0.1.0")
        .replace("REGISTRY/cgaudit", "registry.test/cgaudit")
}

/// Checks one line that needs a cluster or a build. `Err` says why not.
fn check(line: &str) -> Result<(), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["cargo", "xtask", sub, ..] => {
            let out = Command::new("cargo")
                .args(["xtask", sub, "--help"])
                .current_dir(workspace())
                .output()
                .map_err(|e| e.to_string())?;
            if out.status.success() { Ok(()) } else { Err(format!("`cargo xtask {sub}` is no subcommand")) }
        }
        ["helm", ..] => {
            // The cluster's version as the line asks it of kubectl: each
            // minor the chart admits, in turn.
            let line = match (line.find("\"$("), line.find(")\"")) {
                (Some(a), Some(b)) if a < b => format!("{}KUBE_VERSION{}", &line[..a], &line[b + 2..]),
                _ => line.to_owned(),
            };
            // A pipe into kubectl: the helm part renders, the kubectl part is parsed.
            let (helm, rest) = line.split_once('|').map_or((line.as_str(), None), |(h, r)| (h.trim(), Some(r.trim())));
            let mut args: Vec<String> = helm.split_whitespace().skip(1).map(str::to_owned).collect();
            let install = args.first().is_some_and(|a| a == "install" || a == "upgrade");
            if install {
                args[0] = "template".into();
                // helm install renders for the cluster's own version.
                args.extend(["--kube-version".into(), "KUBE_VERSION".into()]);
            }
            let applied = rest.is_some_and(|r| r.starts_with("kubectl apply"));
            let minors = if args.first().is_some_and(|a| a == "template") && (applied || install) {
                validated_minors()
            } else {
                vec!["1.32.0".to_owned()]
            };
            for kube in &minors {
                let args: Vec<String> = args.iter().map(|a| a.replace("KUBE_VERSION", kube)).collect();
                let out =
                    Command::new("helm").args(&args).current_dir(workspace()).output().map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(format!("helm {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)));
                }
                // What the cluster is given must be what its API server
                // takes, under strict field validation.
                if applied {
                    strictly_valid(&String::from_utf8_lossy(&out.stdout), kube)?;
                }
            }
            rest.map_or(Ok(()), check)
        }
        ["kubectl", ..] => kubectl(&words[1..]),
        _ => Err("not a helm, kubectl or cargo xtask line".into()),
    }
}

/// Every minor the chart admits (`kubeVersion: >=1.25`) that
/// kubernetes-validate ships strict schemas for, as `1.M.0`.
fn validated_minors() -> Vec<String> {
    let shipped = Command::new("python3")
        .args([
            "-c",
            "import kubernetes_validate, os; d = os.path.join(os.path.dirname(kubernetes_validate.__file__), \
             'kubernetes-json-schema'); print('\\n'.join(sorted(x for x in os.listdir(d))))",
        ])
        .output()
        .expect("python3");
    let shipped = String::from_utf8_lossy(&shipped.stdout).to_string();
    (25..=60)
        .map(|m| format!("1.{m}.0"))
        .filter(|k| shipped.lines().any(|l| l == format!("v{k}-local-strict")))
        .collect()
}

/// Whether the core objects of `yaml` pass `kubernetes-validate --strict`
/// for Kubernetes `kube` (the Operator's CRDs are not its to judge).
fn strictly_valid(yaml: &str, kube: &str) -> Result<(), String> {
    let core: Vec<serde_json::Value> =
        yaml_docs(yaml).into_iter().filter(|d| !d["apiVersion"].as_str().unwrap_or("").contains("coreos")).collect();
    let file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let text: String = core.iter().map(|d| serde_json::to_string(d).unwrap() + "\n---\n").collect();
    std::fs::write(file.path(), text).map_err(|e| e.to_string())?;
    let v = Command::new("kubernetes-validate").args(["--strict", "-k", kube]).arg(file.path()).output();
    let v = v.map_err(|e| e.to_string())?;
    if v.status.success() {
        Ok(())
    } else {
        Err(format!("Kubernetes {kube} refuses it: {}", String::from_utf8_lossy(&v.stdout)))
    }
}

/// A kubectl line: run with `--dry-run=client` where that works without a
/// server (`create`), else its verb and every flag it uses must be the
/// real kubectl's (`kubectl VERB --help`).
fn kubectl(args: &[&str]) -> Result<(), String> {
    // Global flags before the verb (`-n NS`).
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        i += if args[i].contains('=') { 1 } else { 2 };
    }
    let verb = *args.get(i).ok_or("no kubectl verb")?;
    if verb == "create" {
        let out = Command::new("kubectl")
            .args(args)
            .args(["--dry-run=client", "-o", "yaml"])
            .output()
            .map_err(|e| e.to_string())?;
        return if out.status.success() {
            Ok(())
        } else {
            Err(format!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
        };
    }
    let help = Command::new("kubectl").args([verb, "--help"]).output().map_err(|e| e.to_string())?;
    if !help.status.success() {
        return Err(format!("kubectl has no verb {verb}"));
    }
    let text = String::from_utf8_lossy(&help.stdout).to_string();
    let globals = String::from_utf8_lossy(&Command::new("kubectl").arg("options").output().unwrap().stdout).to_string();
    for a in args.iter().take_while(|a| **a != "--") {
        if let Some(flag) = a.strip_prefix("--").map(|f| f.split('=').next().unwrap_or(f)) {
            let known = format!("--{flag}");
            if !text.contains(&known) && !globals.contains(&known) {
                return Err(format!("kubectl {verb} has no flag {known}"));
            }
        }
    }
    Ok(())
}

/// `jq` over `input`, as `sh -c` runs the line's jq part.
fn jq_on(line: &str, input: &str) -> Result<String, String> {
    let (_, filter) = line.split_once("| jq").ok_or("no jq")?;
    let mut child = Command::new("sh")
        .args(["-c", &format!("jq{filter}")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() || printed.trim().is_empty() || printed.contains("null") {
        return Err(format!("jq printed {printed:?}, {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(printed)
}

#[test]
fn every_documented_command_runs_or_is_checked() {
    if !can_run(&["unshare", "nsenter", "jq", "helm", "kubectl"]) {
        return;
    }
    let seed = SeedNode::named("docs");
    let node = "docs-node";
    let root = seed.t.path.to_str().unwrap().to_owned();
    let bin_dir = agent_bin().parent().unwrap().to_owned();
    // `agent ...` on the seed node, as the text says (its cgroup root the
    // seed's: this machine's own tree is not the documentation's).
    let on_seed = |cmd: &str| {
        let cmd = cmd.replace("sudo ./agent", "agent").replace("./agent", "agent");
        let cmd = cmd.replacen("agent audit", &format!("agent audit --cgroup-root {root}"), 1);
        let mut c = seed.sandbox.command(Path::new("/bin/sh"), &["-c", &cmd]);
        c.env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display())).env("NODE_NAME", node);
        run(c)
    };
    let live = on_seed("agent audit --output json").stdout;
    let golden = std::fs::read_to_string(workspace().join("tests/golden/seed.json")).unwrap();
    let mut failed = Vec::new();
    let mut ran = 0;
    for f in doc_files() {
        for b in shell_blocks(&f) {
            for line in &b.lines {
                let line = filled(line, node);
                let result = match b.mark.as_deref() {
                    Some("check") => check(&line),
                    Some("golden") => jq_on(&line, &golden).and_then(|_| jq_on(&line, &live)).map(|_| ()),
                    Some("seed") if line.starts_with("agent ") || line.contains("./agent ") => {
                        let r = on_seed(&line);
                        if r.code != 0 && r.code != 1 {
                            Err(format!("exit {}: {}", r.code, r.stderr))
                        } else if line.contains("| jq") && (r.stdout.trim().is_empty() || r.stdout.contains("null")) {
                            Err(format!("printed {:?}", r.stdout))
                        } else {
                            Ok(())
                        }
                    }
                    Some("seed") if line.starts_with("kubectl debug ") => {
                        // The debug-node route: kubectl parses it, and its
                        // command runs on the seed node (podman runs the image
                        // so in ship.rs).
                        check(&line).and_then(|()| {
                            let (_, cmd) = line.split_once(" -- ").ok_or("no command after --")?;
                            let r = on_seed(cmd);
                            if r.code == 0 || r.code == 1 {
                                Ok(())
                            } else {
                                Err(format!("exit {}: {}", r.code, r.stderr))
                            }
                        })
                    }
                    Some("seed") => check(&line),
                    _ => Err("unmarked".into()),
                };
                ran += 1;
                if let Err(why) = result {
                    failed.push(format!("{} `{line}`: {why}", b.at));
                }
            }
        }
    }
    // The runbook's inline routes, on the golden report and a live one.
    for f in doc_files() {
        for (at, line) in inline_commands(&f) {
            ran += 1;
            if let Err(why) = inline_jq_on(&line, &golden).and_then(|()| inline_jq_on(&line, &live)) {
                failed.push(format!("{at} `{line}`: {why}"));
            }
        }
    }
    // The chart's NOTES (printed at install): their kubectl lines, as
    // rendered for a release `cgaudit` in `cgaudit`.
    let notes = std::fs::read_to_string(workspace().join("deploy/helm/cgaudit/templates/NOTES.txt")).unwrap();
    for line in notes.lines().map(str::trim).filter(|l| l.starts_with("kubectl ")) {
        let line = line
            .replace("{{ .Release.Namespace }}", "cgaudit")
            .replace("{{ include \"cgaudit.fullname\" . }}", "cgaudit")
            .replace("{{ include \"cgaudit.image\" . }}", "registry.test/cgaudit:0.1.0");
        let line = filled(&line, node);
        assert!(!line.contains("{{"), "a template NOTES line this test cannot fill: {line}");
        ran += 1;
        if let Err(why) = check(&line) {
            failed.push(format!("NOTES.txt `{line}`: {why}"));
        }
    }
    eprintln!("{ran} documented commands run or checked");
    assert!(ran >= 15, "only {ran} commands");
    assert!(failed.is_empty(), "documented commands that do not work as written:\n{}", failed.join("\n"));
}
