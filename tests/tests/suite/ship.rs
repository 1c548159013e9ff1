//! What ships, tested as users run it: the static binary over a real ssh
//! session, and the image run under podman the way the DaemonSet runs it.
//! The chart, the alert rules and the integrations are `deploy.rs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use integration_tests::*;
use serde_json::Value;

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
    assert_full_version(&String::from_utf8_lossy(&out.stdout));
}

/// `agent 0.1.0 (revision 95c9c1273dfd, x86_64-unknown-linux-musl, built
/// 2026-11-27)`: what a bug report needs, from the binary alone, the
/// revision this checkout's.
fn assert_full_version(printed: &str) {
    let version = printed.trim();
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().unwrap();
    let mut head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    // Built from sources that differ from that commit: said (agent/build.rs).
    let sources = ["agent", "agent-common", "agent-ebpf", "Cargo.toml", "Cargo.lock"];
    let status =
        Command::new("git").args(["status", "--porcelain", "--untracked-files=no", "--"]).args(sources).output();
    if status.is_ok_and(|s| !s.stdout.is_empty()) {
        head.push_str("-dirty");
    }
    let target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
    let prefix = format!("agent {} (revision {head}, {target}, built ", env!("CARGO_PKG_VERSION"));
    let date = version.strip_prefix(&prefix).and_then(|d| d.strip_suffix(')'));
    assert!(
        date.is_some_and(|d| d.len() == 10 && d.chars().all(|c| c.is_ascii_digit() || c == '-')),
        "{version:?} is not {prefix}YYYY-MM-DD)"
    );
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
            assert!(remote.stderr.contains("no such directory"), "{remote:?}");
            assert_eq!(remote.json()["status"], "error", "JSON on exit 2 too: {remote:?}");
        }
        let (mut r, mut l): (Value, Value) = (remote.json(), local.json());
        // Ids of programs loaded between the runs would differ: none are.
        // The time differs by the runs' seconds.
        for key in ["kernel", "generated_at"] {
            r[key] = Value::Null;
            l[key] = Value::Null;
        }
        assert_eq!(r, l, "JSON over ssh must be the JSON locally");
    };
    compare(&format!("--cgroup-root {root}"), 0);
    let p = Prog::load("cil_sock4_connect", "connect4");
    let _a = Attached::new(&ctr, &p, ALLOW_MULTI);
    compare(&format!("--cgroup-root {root}"), 1);
    compare(&format!("--cgroup-root {root}/nonexistent"), 2);
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
    // sandbox node here, since this machine's PID 1 is closed to everyone;
    // CGAUDIT_NESTED_NODE says so, as --nested-node, since nothing of a node
    // runs in it), private cgroup namespace, only the chart's capabilities,
    // read-only.
    let sb = Sandbox::new("");
    // runc: crun (podman's default) raises RLIMIT_MEMLOCK for its device
    // filter, which needs CAP_SYS_RESOURCE, absent on these machines.
    let script = podman_script(&format!(
        "--runtime runc run --rm --pid=host --cgroupns=private {PODMAN_LIMITS} \
         --cap-drop=ALL --cap-add=SYS_ADMIN,NET_ADMIN,BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH --read-only --security-opt=no-new-privileges \
         --network=none --env CGAUDIT_NESTED_NODE=true {} audit --output json",
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
    // One finding for its cgroup, its ten programs in it. The agent in the
    // image sees the other container's programs but not its process (it
    // is outside the sandbox node's PID namespace): nothing proves them
    // Cilium's, so they are unknown, named like Cilium's, a warning.
    assert_eq!(below.len(), 1, "names the other container: {report:#}");
    assert_eq!((&below[0]["count"], &below[0]["runtime"]), (&10.into(), &"podman".into()));
    assert_eq!((&below[0]["owner"], &below[0]["named_like"]), (&"unknown".into(), &"cilium".into()));
}

/// `cargo xtask dist`'s release directory (`$CGAUDIT_RELEASE`, set by
/// `cargo xtask test`).
fn release_dir() -> PathBuf {
    let dir = std::env::var_os("CGAUDIT_RELEASE").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join(format!("target/cgaudit-{}", env!("CARGO_PKG_VERSION")))
    });
    assert!(dir.join("SHA256SUMS").is_file(), "no release at {}: run `cargo xtask dist`", dir.display());
    dir
}

/// The ELF machine a file is built for (62 x86_64, 183 aarch64).
fn elf_machine(path: &Path) -> u16 {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not ELF", path.display());
    u16::from_le_bytes([b[18], b[19]])
}

/// What a release holds, checked with the tools a user checks it with:
/// a static binary per architecture, each checked by `sha256sum -c`, each
/// with a CycloneDX SBOM of what it links for its own target.
#[test]
fn the_release_holds_a_static_agent_for_each_architecture_with_checksums_and_sboms() {
    if !can_run(&["sha256sum"]) {
        return;
    }
    let dir = release_dir();
    let check = Command::new("sha256sum").arg("-c").arg("SHA256SUMS").current_dir(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "sha256sum -c: {said}{}", String::from_utf8_lossy(&check.stderr));
    for (arch, machine) in [("amd64", 62), ("arm64", 183)] {
        let bin = format!("agent-linux-{arch}");
        let sbom = format!("agent-linux-{arch}.cdx.json");
        for f in [&bin, &sbom] {
            assert!(said.contains(&format!("{f}: OK")), "SHA256SUMS covers {f}: {said}");
        }
        let path = dir.join(&bin);
        assert_eq!(elf_machine(&path), machine, "{bin}");
        assert!(is_static_elf(&path), "{bin} has a dynamic loader");
        let bom: Value = serde_json::from_slice(&std::fs::read(dir.join(&sbom)).unwrap()).unwrap();
        assert_eq!(bom["bomFormat"], "CycloneDX", "{sbom}");
        assert_eq!(bom["metadata"]["component"]["name"], "agent", "{sbom}");
        let names: Vec<&str> =
            bom["components"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
        for dep in ["aya", "tokio", "prometheus", "clap"] {
            assert!(names.contains(&dep), "{sbom} lists {dep}: {names:?}");
        }
        // Each SBOM is its target's: the musl libc crate is in both, a
        // Windows-only crate in neither.
        assert!(!names.iter().any(|n| n.starts_with("windows-sys")), "{sbom} lists Windows crates: {names:?}");
    }
    // The build machine's own binary runs.
    let out = Command::new(dir.join("agent-linux-amd64")).arg("--version").output().unwrap();
    assert_full_version(&String::from_utf8_lossy(&out.stdout));
}

/// The image archive `cargo xtask image` leaves, read by skopeo (the tool
/// the README's push command uses): one index with linux/amd64 and
/// linux/arm64, each image holding the agent built for its platform.
#[test]
fn the_image_archive_holds_both_platforms_each_with_its_own_agent() {
    if !can_run(&["skopeo", "tar"]) {
        return;
    }
    let archive = std::env::var_os("CGAUDIT_IMAGE_ARCHIVE").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join(format!("target/image/cgaudit-{}.oci.tar", env!("CARGO_PKG_VERSION")))
    });
    assert!(archive.is_file(), "no image archive at {}: run `cargo xtask image`", archive.display());
    let source = format!("oci-archive:{}", archive.display());
    let raw = Command::new("skopeo").args(["inspect", "--raw", &source]).output().unwrap();
    assert!(raw.status.success(), "skopeo inspect: {}", String::from_utf8_lossy(&raw.stderr));
    let index: Value = serde_json::from_slice(&raw.stdout).unwrap();
    let platforms: Vec<String> = index["manifests"]
        .as_array()
        .unwrap_or_else(|| panic!("not an index: {index:#}"))
        .iter()
        .map(|m| {
            format!("{}/{}", m["platform"]["os"].as_str().unwrap(), m["platform"]["architecture"].as_str().unwrap())
        })
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{index:#}");
    // Every platform's image, copied out as skopeo copies it to a registry,
    // holds the agent for that platform and nothing else.
    for (arch, machine) in [("amd64", 62), ("arm64", 183)] {
        let out = tempfile::tempdir().unwrap();
        let copy = Command::new("skopeo")
            .args(["--override-os", "linux", "--override-arch", arch, "copy", &source])
            .arg(format!("dir:{}", out.path().display()))
            .output()
            .unwrap();
        assert!(copy.status.success(), "skopeo copy {arch}: {}", String::from_utf8_lossy(&copy.stderr));
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(out.path().join("manifest.json")).unwrap()).unwrap();
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "FROM scratch and one COPY: {manifest:#}");
        let blob = layers[0]["digest"].as_str().unwrap().trim_start_matches("sha256:");
        let root = tempfile::tempdir().unwrap();
        let untar =
            Command::new("tar").arg("-xf").arg(out.path().join(blob)).arg("-C").arg(root.path()).output().unwrap();
        assert!(untar.status.success(), "{}", String::from_utf8_lossy(&untar.stderr));
        let agent = root.path().join("usr/local/bin/agent");
        assert_eq!(elf_machine(&agent), machine, "linux/{arch}'s agent");
        assert!(is_static_elf(&agent), "linux/{arch}'s agent is static");
        // Where it came from and under what licence, for a registry's UI
        // and a scanner (issue 39, 6).
        let config = manifest["config"]["digest"].as_str().unwrap().trim_start_matches("sha256:");
        let config: Value = serde_json::from_slice(&std::fs::read(out.path().join(config)).unwrap()).unwrap();
        let labels = &config["config"]["Labels"];
        let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().unwrap();
        let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
        assert_eq!(labels["org.opencontainers.image.revision"], head.as_str(), "{config:#}");
        assert_eq!(labels["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"), "{config:#}");
        assert!(labels["org.opencontainers.image.licenses"].as_str().unwrap().starts_with("Apache-2.0"), "{config:#}");
        assert!(labels["org.opencontainers.image.source"].as_str().unwrap().starts_with("https://"), "{config:#}");
        assert_eq!(config["config"]["Env"], serde_json::json!(["PATH=/usr/local/bin"]), "`-- agent ...` runs by name");
    }
}

/// Issue 39, 3: the runbook's route to the fix is the image as `kubectl
/// debug node/NODE --profile=sysadmin --image=IMAGE -- agent ...` runs it:
/// the node's PID, network and IPC namespaces, privileged, the node's root
/// at /host, and `agent` as the command (the image has no shell). Here the
/// "node" is a seed sandbox (this machine's PID 1 is closed to everyone):
/// the audit finds the seed, the remount plans, applies, and the mount is
/// rooted at the root after it.
#[test]
fn the_image_runs_as_kubectl_debug_node_runs_it_and_repairs_the_seed() {
    if !can_run(&["podman", "runc", "unshare", "nsenter"]) {
        return;
    }
    let s = SeedNode::new("debug-node");
    let debug = |args: &str| {
        let script = podman_script(&format!(
            "--runtime runc run --rm --privileged --pid=host --network=host --ipc=host -v /:/host {PODMAN_LIMITS} \
             --env CGAUDIT_NESTED_NODE=true --entrypoint agent {} {args}",
            image()
        ));
        let mut c =
            s.sandbox.command(Path::new("/usr/bin/unshare"), &["-m", "--propagation", "private", "sh", "-c", &script]);
        c.stdin(Stdio::null());
        run(c)
    };
    let audit = debug("audit --output json");
    assert_eq!(audit.code, 1, "{audit:?}");
    let report = audit.json();
    let below: Vec<&Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "socket_lb_below_root").collect();
    assert!(below.iter().any(|f| f["owner"] == "cilium" && f["severity"] == "critical"), "{report:#}");

    let plan = debug("remount --output json");
    assert_eq!(plan.code, 1, "a change is needed: {plan:?}");
    assert_eq!(plan.json()["plan"]["path"], "/run/cilium/cgroupv2", "{plan:?}");
    let done = debug("remount --apply --output json");
    assert_eq!((done.code, done.json()["outcome"].clone()), (0, "done".into()), "{done:?}");
    let top = std::fs::metadata(s.sandbox.path("/run/cilium/cgroupv2")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::ino(&top), 1, "the mount is rooted at the root now");
}

/// Issue 39, 4: node-problem-detector runs `agent` from the host, and the
/// image has no `cp`: `agent install --to DIR` copies the binary out of the
/// image (the chart's init container does so), and what it wrote runs.
#[test]
fn the_image_installs_its_binary_for_node_problem_detector() {
    if !can_run(&["podman", "runc", "unshare"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = podman(&format!(
        "--runtime runc run --rm --read-only --cap-drop=ALL {PODMAN_LIMITS} -v {}:/install --entrypoint agent {} \
         install --to /install",
        dir.path().display(),
        image()
    ));
    assert_eq!(out.code, 0, "{out:?}");
    let installed = dir.path().join("agent");
    let version = run({
        let mut c = Command::new(&installed);
        c.arg("--version");
        c
    });
    assert_eq!(version.code, 0, "{version:?}");
    assert!(version.stdout.starts_with("agent 0.1.0 (revision "), "{}", version.stdout);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 1, "only the binary: {left:?}");
    // A directory that is not there is refused, exit 2, naming it.
    let refused = podman(&format!(
        "--runtime runc run --rm {PODMAN_LIMITS} --entrypoint agent {} install --to /nowhere",
        image()
    ));
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--to /nowhere"), "{}", refused.stderr);
}
