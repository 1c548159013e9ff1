//! Fixtures for the real-kernel integration tests: cgroups, programs,
//! attachments, links, bpffs mounts and sandbox "nodes", each a guard whose
//! `Drop` undoes it, even when the test panics.
//!
//! Tests need root. Outside CI a test that cannot run says so loudly and
//! returns; under `CI=true` the same situation fails the test, because CI can
//! run everything.

use std::ffi::CString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use agent::bpf::AttachType;
use agent::bpf::sys;
use aya_obj::btf::{Btf, BtfType, Func, FuncLinkage, FuncProto, Int, IntEncoding};
use aya_obj::generated::bpf_prog_type;

/// Returns false (after saying why) when the test cannot run here; panics
/// instead under CI, where a skip would hide a missing install step.
pub fn can_run(requirements: &[&str]) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root".to_owned());
    }
    for tool in requirements {
        if which(tool).is_none() {
            missing.push(format!("the `{tool}` command"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("this test needs {}", missing.join(", "));
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        panic!("{msg}; under CI a skipped test is a failure (install it with `cargo xtask test`)");
    }
    eprintln!("SKIPPED: {msg}");
    false
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// The mount point of the real cgroup-v2 root (top inode 1) in our view.
pub fn cgroup2_root() -> PathBuf {
    let text = fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    let mounts = agent::mounts::parse_mountinfo(&text).expect("parse mountinfo");
    mounts
        .into_iter()
        .filter(|m| m.is_cgroup2())
        .map(|m| m.mount_point)
        .find(|p| fs::metadata(p).map(|m| m.ino() == 1).unwrap_or(false))
        .expect("no cgroup2 mount whose top is the hierarchy root")
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique name for this process and call.
pub fn unique(tag: &str) -> String {
    format!("cgaudit-test-{tag}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A cgroup subtree created for one test and removed, deepest first, on drop.
/// Processes still inside are killed so the removal cannot fail on them.
pub struct TestCgroup {
    pub path: PathBuf,
}

impl TestCgroup {
    /// `<cgroup2 root>/cgaudit-test-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> TestCgroup {
        let path = cgroup2_root().join(unique(tag));
        fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        TestCgroup { path }
    }

    /// Creates `rel` (and its parents) below this cgroup.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path.join(rel.trim_start_matches('/'));
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
        p
    }

    pub fn id(&self) -> u64 {
        cgroup_id(&self.path)
    }
}

pub fn cgroup_id(path: &Path) -> u64 {
    fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display())).ino()
}

pub fn open_dir(path: &Path) -> OwnedFd {
    fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())).into()
}

fn remove_tree(path: &Path) {
    let Ok(entries) = fs::read_dir(path) else { return };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&e.path());
        }
    }
    for _ in 0..100 {
        match fs::remove_dir(path) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => {
                if let Ok(procs) = fs::read_to_string(path.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    eprintln!("WARNING: could not remove test cgroup {}", path.display());
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        remove_tree(&self.path);
    }
}

/// Program types used by the fixtures.
pub mod prog_type {
    use super::bpf_prog_type::*;
    pub const SOCK_ADDR: u32 = BPF_PROG_TYPE_CGROUP_SOCK_ADDR as u32;
    pub const SOCK: u32 = BPF_PROG_TYPE_CGROUP_SOCK as u32;
    pub const DEVICE: u32 = BPF_PROG_TYPE_CGROUP_DEVICE as u32;
    pub const SKB: u32 = BPF_PROG_TYPE_CGROUP_SKB as u32;
}

/// The program type that runs at a cgroup hook.
pub fn prog_type_for(hook: &str) -> u32 {
    match hook {
        "post_bind4" | "post_bind6" | "sock_create" | "sock_release" => prog_type::SOCK,
        "device" => prog_type::DEVICE,
        "ingress" | "egress" => prog_type::SKB,
        _ => prog_type::SOCK_ADDR,
    }
}

/// Ids of every BPF program loaded on the node.
pub fn loaded_program_ids() -> Vec<u32> {
    sys::ids(sys::Objects::Programs).collect::<Result<_, _>>().expect("BPF_PROG_GET_NEXT_ID")
}

/// A loaded allow-all program (`r0 = 1; exit`): it never changes what a
/// socket does, so attaching it anywhere, even the real root, is harmless.
/// Unloaded when dropped (unless still attached somewhere).
pub struct Prog {
    pub fd: OwnedFd,
    pub id: u32,
    pub name: String,
    pub hook: AttachType,
}

impl Prog {
    /// Loads a program for `hook` named `name`; names longer than 15 bytes get
    /// BTF so the full name is recoverable, as Cilium's are.
    pub fn load(name: &str, hook: &str) -> Prog {
        let at = AttachType::from_name(hook).unwrap_or_else(|| panic!("unknown hook {hook}"));
        // mov64 r0, 1 ; exit
        let insns = [0xb7u64 | (1u64 << 32), 0x95];
        let btf_fd;
        let mut btf_arg = None;
        if !name.is_empty() {
            let mut btf = Btf::new();
            let int = btf.add_string("int");
            let int_id = btf.add_type(BtfType::Int(Int::new(int, 4, IntEncoding::Signed, 0)));
            let proto = btf.add_type(BtfType::FuncProto(FuncProto::new(Vec::new(), int_id)));
            let fname = btf.add_string(name);
            let func = btf.add_type(BtfType::Func(Func::new(fname, proto, FuncLinkage::Static)));
            btf_fd = sys::btf_load(&btf.to_bytes()).expect("BPF_BTF_LOAD");
            btf_arg = Some((btf_fd.as_fd(), func));
        }
        let fd = sys::prog_load(&sys::ProgLoad {
            prog_type: prog_type_for(hook),
            expected_attach_type: at.kernel_value(),
            name,
            insns: &insns,
            btf: btf_arg,
        })
        .unwrap_or_else(|e| panic!("load {name} for {hook}: {e}"));
        let id = sys::prog_info(fd.as_fd()).expect("prog info").id;
        Prog { fd, id, name: name.to_owned(), hook: at }
    }
}

/// A legacy `BPF_PROG_ATTACH` attachment, detached on drop (it would
/// otherwise outlive the test).
pub struct Attached {
    cgroup: OwnedFd,
    prog: OwnedFd,
    hook: AttachType,
    pub prog_id: u32,
}

pub const ALLOW_MULTI: u32 = aya_obj::generated::BPF_F_ALLOW_MULTI;
pub const ALLOW_OVERRIDE: u32 = aya_obj::generated::BPF_F_ALLOW_OVERRIDE;

impl Attached {
    pub fn new(cgroup: &Path, prog: &Prog, flags: u32) -> Attached {
        Self::new_fd(open_dir(cgroup), prog, flags)
    }

    pub fn new_fd(cgroup: OwnedFd, prog: &Prog, flags: u32) -> Attached {
        sys::prog_attach(cgroup.as_fd(), prog.fd.as_fd(), prog.hook.kernel_value(), flags)
            .unwrap_or_else(|e| panic!("attach {} to {:?}: {e}", prog.name, cgroup));
        Attached { cgroup, prog: prog.fd.try_clone().expect("dup prog fd"), hook: prog.hook, prog_id: prog.id }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // ENOENT: the cgroup is already gone, and its programs with it.
        if let Err(e) = sys::prog_detach(self.cgroup.as_fd(), self.prog.as_fd(), self.hook.kernel_value())
            && e.errno() != Some(libc::ENOENT)
        {
            eprintln!("WARNING: detach prog {}: {e}", self.prog_id);
        }
    }
}

/// A cgroup bpf_link; it ends when this fd (and any pin) is gone.
pub struct Link {
    pub fd: OwnedFd,
    pub id: u32,
}

impl Link {
    pub fn new(cgroup: &Path, prog: &Prog) -> Link {
        let cg = open_dir(cgroup);
        let fd = sys::cgroup_link_create(cg.as_fd(), prog.fd.as_fd(), prog.hook.kernel_value())
            .unwrap_or_else(|e| panic!("link {} to {}: {e}", prog.name, cgroup.display()));
        let id = sys::cgroup_link_info(fd.as_fd()).expect("link info").expect("a cgroup link").link_id;
        Link { fd, id }
    }
}

/// A private bpffs mount for pins, unmounted (and its pins with it) on drop.
pub struct BpfFs {
    pub dir: tempfile::TempDir,
}

impl BpfFs {
    pub fn new() -> BpfFs {
        let dir = tempfile::tempdir().expect("tempdir");
        nix::mount::mount(Some("bpf"), dir.path(), Some("bpf"), nix::mount::MsFlags::empty(), None::<&str>)
            .expect("mount bpffs");
        BpfFs { dir }
    }

    pub fn pin(&self, name: &str, fd: BorrowedFd<'_>) -> PathBuf {
        let p = self.dir.path().join(name);
        let c = CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        sys::obj_pin(fd, &c).expect("BPF_OBJ_PIN");
        p
    }
}

impl Default for BpfFs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for BpfFs {
    fn drop(&mut self) {
        if let Ok(entries) = fs::read_dir(self.dir.path()) {
            for e in entries.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The ten programs Cilium attaches for socket LB, with their full names.
pub const CILIUM_SOCKET_LB: [(&str, &str); 10] = [
    ("cil_sock4_connect", "connect4"),
    ("cil_sock6_connect", "connect6"),
    ("cil_sock4_sendmsg", "sendmsg4"),
    ("cil_sock6_sendmsg", "sendmsg6"),
    ("cil_sock4_recvmsg", "recvmsg4"),
    ("cil_sock6_recvmsg", "recvmsg6"),
    ("cil_sock4_getpeername", "getpeername4"),
    ("cil_sock6_getpeername", "getpeername6"),
    ("cil_sock4_post_bind", "post_bind4"),
    ("cil_sock6_post_bind", "post_bind6"),
];

pub fn load_cilium_socket_lb() -> Vec<Prog> {
    CILIUM_SOCKET_LB.iter().map(|(n, h)| Prog::load(n, h)).collect()
}

/// Where the agent binary is: `$CGAUDIT_AGENT` (set by `cargo xtask test`),
/// else next to this test binary's directory.
pub fn agent_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CGAUDIT_AGENT") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let p = exe.parent().and_then(Path::parent).map(|d| d.join("agent")).expect("target dir");
    assert!(
        p.is_file(),
        "agent binary not found at {}: build it first (`cargo build -p agent`) or run `cargo xtask test`",
        p.display()
    );
    p
}

/// A finished agent run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("agent output is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

/// Panics when an error line repeats one of its ": "-separated parts, as
/// "--cgroup-root /x: no such directory: /x: no such directory" did when
/// an error both quoted its cause and returned it as `source()`.
pub fn assert_says_each_thing_once(stderr: &str) {
    for line in stderr.lines() {
        let parts: Vec<&str> = line.split(": ").map(str::trim).filter(|p| p.len() > 3).collect();
        for (i, p) in parts.iter().enumerate() {
            assert!(!parts[i + 1..].contains(p), "{p:?} is said twice in: {line}");
        }
    }
}

pub fn run(mut cmd: Command) -> Run {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `agent <args>` from the test's own namespaces.
pub fn agent(args: &[&str]) -> Run {
    let mut c = Command::new(agent_bin());
    c.args(args);
    run(c)
}

/// A stand-in node: a PID namespace whose PID 1 is a shell of ours, with its
/// own mount namespace (private propagation) and `/proc`. Its PID 1 is what a
/// hostPID DaemonSet pod sees as the node's init, and `/proc/1/root`,
/// `/proc/1/ns/*` are open to us, unlike the real PID 1 on these machines.
pub struct Sandbox {
    child: Child,
    /// Host pid of the sandbox's PID 1.
    pub pid1: u32,
}

impl Sandbox {
    /// Starts the sandbox; `setup` runs in its PID 1 before it idles, and
    /// the sandbox is ready once `setup` has finished.
    pub fn new(setup: &str) -> Sandbox {
        Self::with_init(setup, "sleep infinity")
    }

    /// Like `new`, with PID 1 idling as `init` (e.g. under another uid).
    pub fn with_init(setup: &str, init: &str) -> Sandbox {
        let script = format!("set -e\n{setup}\necho ready\nexec {init}\n");
        let mut child = Command::new("unshare")
            .args(["--pid", "--fork", "--mount", "--propagation", "private", "--mount-proc", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read sandbox output");
        let pid1 = fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()));
        let mut sb = Sandbox { child, pid1: pid1.unwrap_or(0) };
        if line.trim() != "ready" || sb.pid1 == 0 {
            let status = sb.child.wait();
            panic!("sandbox setup failed ({status:?}): {setup}");
        }
        sb
    }

    /// A command run inside the sandbox's PID and mount namespaces.
    pub fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("--target").arg(self.pid1.to_string()).args(["--pid", "--mount", "--"]).arg(program).args(args);
        c
    }

    /// `agent <args>` as a hostPID pod on this "node" would run it.
    pub fn agent(&self, args: &[&str]) -> Run {
        run(self.command(&agent_bin(), args))
    }

    /// A path of the sandbox's mount namespace, reachable from ours.
    pub fn path(&self, p: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.pid1, p))
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Killing PID 1 of a PID namespace kills everything in it; the mount
        // namespace and its mounts go with the last process.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid1 as i32), nix::sys::signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A plain HTTP/1.0 GET against the daemon on loopback: (status, body).
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

/// A free loopback port (bound then released; the daemon binds it next).
pub fn free_addr() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr")
}

/// `agent run`, killed on drop if it is still running.
pub struct Daemon {
    pub child: Child,
    pub addr: std::net::SocketAddr,
    pub log: tempfile::NamedTempFile,
}

impl Daemon {
    /// Starts `agent run --listen <free port> <args>` and waits for /healthz.
    pub fn start(args: &[&str]) -> Daemon {
        let addr = free_addr();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let child = Command::new(agent_bin())
            .arg("run")
            .arg("--listen")
            .arg(addr.to_string())
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("log file"))
            .spawn()
            .expect("spawn agent run");
        let d = Daemon { child, addr, log };
        let up = wait_until(Duration::from_secs(10), || http_get(d.addr, "/healthz").is_some_and(|(s, _)| s == 200));
        assert!(up, "agent run never answered /healthz:\n{}", d.logs());
        d
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.addr, path).unwrap_or_else(|| panic!("GET {path} failed:\n{}", self.logs()))
    }

    /// The value of the first series whose line starts with `prefix`
    /// (name and, optionally, the beginning of its labels).
    pub fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.get("/metrics").1, series)
    }
}

/// Finds a series in a Prometheus text scrape: `name` or `name{` + label
/// matchers given as `key="value"` fragments that must all be present.
pub fn metric_value(scrape: &str, series: &str) -> Option<f64> {
    let (name, labels) = series.split_once('{').map_or((series, ""), |(n, l)| (n, l.trim_end_matches('}')));
    let wanted: Vec<&str> = labels.split("\",").map(|l| l.trim_end_matches('"')).filter(|l| !l.is_empty()).collect();
    scrape.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (head, value) = line.rsplit_once(' ')?;
        let (n, l) = head.split_once('{').map_or((head, ""), |(n, l)| (n, l));
        (n == name && wanted.iter().all(|w| l.contains(&format!("{w}\"")))).then(|| value.parse().ok())?
    })
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub const SEED_POD_UID: &str = "f8371831-8021-4722-af27-93c925d25a14";
pub const SEED_CONTAINER: &str = "fbbef81081fd1fdf7653041c79cf8969be138b5bbd57db50de28cba35fd65910";
pub const OTHER_POD_UID: &str = "0d1f4a52-77c3-4a8e-9d2b-5f6e7a8b9c0d";
pub const OTHER_CONTAINER: &str = "5cecdc399e2fa339d62a5b276331d8a5875fff7898a09d1ba1f5d710ecb12f13";

/// The Cilium agent's pod cgroup in the seed, relative to the test root.
pub fn cilium_pod() -> String {
    format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice", SEED_POD_UID.replace('-', "_"))
}

/// The Cilium agent's container cgroup in the seed, relative to the test root.
pub fn cilium_container() -> String {
    format!("{}/cri-containerd-{SEED_CONTAINER}.scope", cilium_pod())
}

/// The failure cgaudit exists for (shared/seeds/002), reproduced: a sandbox
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
        t.mkdir(&format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{OTHER_CONTAINER}.scope",
            OTHER_POD_UID.replace('-', "_")
        ));
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

/// The shell line that runs `podman ARGS` here. crun refuses hybrid hosts
/// (cgroup v1 at /sys/fs/cgroup), so cgroup2 is mounted there first, inside
/// the private mount namespace `podman_command` creates. ARGS are shell words.
pub fn podman_script(args: &str) -> String {
    format!("mount -t cgroup2 none /sys/fs/cgroup && exec podman {args}")
}

/// `podman ARGS` in a private mount namespace (see `podman_script`).
pub fn podman_command(args: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &podman_script(args)]).stdin(Stdio::null());
    c
}

pub fn podman(args: &str) -> Run {
    run(podman_command(args))
}

/// A container started with `podman run -d --name NAME`, removed (with its
/// cgroup and whatever its processes held) on drop.
pub struct Container {
    pub name: String,
    pub id: String,
}

impl Container {
    /// `podman run -d --name <unique> ARGS`.
    pub fn run(tag: &str, args: &str) -> Container {
        let name = unique(tag);
        let started = podman(&format!("run -d --name {name} {args}"));
        assert_eq!(started.code, 0, "podman run: {started:?}");
        let id = started.stdout.trim().to_owned();
        assert_eq!(id.len(), 64, "{started:?}");
        Container { name, id }
    }

    pub fn logs(&self) -> String {
        podman(&format!("logs {}", self.name)).stdout
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let r = podman(&format!("rm --force --time 0 {}", self.name));
        if r.code != 0 {
            eprintln!("WARNING: podman rm {}: {}", self.name, r.stderr);
        }
    }
}

/// The flags every test container needs on these machines: no pids limit
/// and rlimits within the hard limits (podman's defaults exceed them).
pub const PODMAN_LIMITS: &str = "--pids-limit=0 --ulimit nofile=20000:20000 --ulimit nproc=4096:4096";
