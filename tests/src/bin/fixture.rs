//! Stand-ins for other processes the tests need:
//!
//! - `fixture pause [ARGS]`: a pod's pause process (the CRI tests' image is
//!   this binary, statically linked): waits for SIGTERM and exits; ARGS are
//!   only for its command line.
//! - `fixture named <COMM>`: a pod's process that names itself COMM
//!   (`PR_SET_NAME`: any bytes but NUL, 15 at most), then waits as `pause`.
//! - `fixture runc ARGS`: runc ARGS, for the CRI tests' containerd, leaving
//!   out CPU weights where cgroup v2 has no cpu controller.
//! - `fixture socket-lb-agent <DIR> [--join CGROUP] [--private-cgroupns]
//!   [--attach links|multi|override|none] [--name COMM] [--real-lb]
//!   [--use-mount] [--private-mountns]`: a CNI agent. It
//!   joins CGROUP (a directory of the hierarchy), enters a cgroup namespace
//!   of its own if asked (as a container with `cgroupns=private` runs), names
//!   itself COMM, mounts cgroup2 at DIR (as Cilium mounts
//!   /run/cilium/cgroupv2, in the mount namespace it was started in),
//!   attaches the ten Cilium socket-LB programs to the top of that mount
//!   (through bpf_links by default, or `BPF_PROG_ATTACH` with those flags;
//!   allow-all programs, or with `--real-lb` ones that translate the test
//!   Service: src/lb.rs; with `--use-mount`, through the cgroup2 already
//!   mounted at DIR, as a restarted agent does; with `--private-mountns`,
//!   mounting in a mount namespace of its own, which goes with it),
//!   prints `attached N`, and sleeps. Links die with the process; programs
//!   attached with `BPF_PROG_ATTACH` stay until detached. In a private
//!   cgroup namespace the mount's top is the agent's own cgroup: the seed.
//! - `fixture bpf-flood <SECONDS> <PER_SECOND>`: a hostile pod's process:
//!   becomes uid/gid 65534 (no groups, no capabilities) if it is root, then
//!   calls `bpf(BPF_LINK_DETACH)` on a zeroed attr in a loop (each call
//!   fails), prints how many calls it made.
//! - `fixture probe <CGROUP>`: the traffic probe (src/lb.rs): joins the
//!   cgroup, enters a network namespace of its own, tries the Service VIP by
//!   TCP (v4, v6) and UDP, prints what was translated as one JSON line.
//! - `fixture link-churn <SECONDS> <THREADS> <CGROUP>`: a pod making links
//!   in a loop: THREADS threads create a connect4 bpf_link on CGROUP and
//!   close it again, while one more makes and removes a cgroup below it
//!   (contending `cgroup_mutex`, which a link being made waits for with its
//!   id already handed out). Prints how many links it made.
//! - `fixture crowd <N> <CGROUP>`: a pod with many processes: joins
//!   CGROUP, forks N children that wait (each dies with it), prints
//!   `ready`, and waits as `pause`.
//! - `fixture mkdir-churn <CGROUP> <DIR> <PAIRS>`: a pod's process that
//!   joins CGROUP, then makes and removes a cgroup below DIR, PAIRS times
//!   as fast as it can.
//! - `fixture attach-churn <SECONDS> <PER_SECOND> <CGROUP>`: a pod
//!   attaching and detaching a connect4 program on CGROUP, PER_SECOND calls
//!   a second (`BPF_PROG_ATTACH` then `BPF_PROG_DETACH`, paced), then
//!   prints how many calls it made.
//! - `fixture ia32-calls <CGROUP>`: a 64-bit process making 32-bit
//!   syscalls (`int $0x80`): first ia32 `signalfd`, whose number is
//!   x86_64's `bpf`, with the 64-bit argument registers set as
//!   `bpf(BPF_PROG_ATTACH, attr)` of a connect4 program on CGROUP would set
//!   them (a forgery); prints `forged`, waits for a line on stdin; then a
//!   real ia32 `bpf(BPF_PROG_ATTACH)` of that program on CGROUP; prints
//!   `attached <prog id>`, waits for a line, detaches it and exits.
//! - `fixture getppid <N>`: another process on the node: N `getppid()`
//!   syscalls in a loop, then prints nanoseconds per call (the benchmark's
//!   measure of what a syscall hook costs everyone else).
//! - `fixture memlock-64k`: another root process with Debian 11's default
//!   `RLIMIT_MEMLOCK` (64 KiB) loading a program, as a node's tools do:
//!   prints `loaded`, or the error and exits 1.
//! - `fixture fuse-trap <DIR>`: a hostile process that mounts FUSE at DIR
//!   and never answers it, so anything that stats a file there blocks; it
//!   names the mount's root as the target of a (failing) `BPF_PROG_ATTACH`
//!   on connect4, prints `trapped`, and sleeps. Killing it aborts the FUSE
//!   connection, which unblocks whoever waits; the mount is left for the
//!   caller to detach (`umount -l DIR`).
//! - `fixture remount-paused <PID> <PATH> <TIMEOUT_MS>`: `agent remount
//!   --apply` through the library, paused between plan and apply so a test
//!   can change the node in between: prints `planned <action>`, waits for a
//!   line on stdin, applies, prints `done: <state>`; or `error: <why>` at
//!   either step. Run it inside a sandbox's PID namespace to give PID in
//!   that numbering.

use std::io::Write;
use std::path::Path;

use integration_tests::{Link, load_cilium_socket_lb};

fn flood(seconds: &str, rate: &str) {
    if nix::unistd::geteuid().is_root() {
        let nobody = nix::unistd::Gid::from_raw(65534);
        nix::unistd::setgroups(&[]).expect("setgroups");
        nix::unistd::setresgid(nobody, nobody, nobody).expect("setresgid");
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::setresuid(nobody, nobody, nobody).expect("setresuid");
    }
    let seconds: u64 = seconds.parse().expect("seconds");
    let rate: u64 = rate.parse().expect("calls per second");
    let start = std::time::Instant::now();
    let mut calls = 0u64;
    while start.elapsed().as_secs() < seconds {
        let due = start + std::time::Duration::from_nanos(calls * 1_000_000_000 / rate.max(1));
        if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        agent::bpf::sys::link_detach_raw_zeroed();
        calls += 1;
    }
    println!("{calls}");
}

fn link_churn(seconds: &str, threads: &str, cgroup: &Path) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let seconds: u64 = seconds.parse().expect("seconds");
    let threads: usize = threads.parse().expect("threads");
    let stop = AtomicBool::new(false);
    let made = AtomicU64::new(0);
    let prog = integration_tests::Prog::load("churn_connect4", "connect4");
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    drop(Link::new(cgroup, &prog));
                    made.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        s.spawn(|| {
            let dir = cgroup.join("churn");
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::create_dir(&dir);
                let _ = std::fs::remove_dir(&dir);
            }
        });
        std::thread::sleep(std::time::Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    println!("{}", made.load(Ordering::Relaxed));
}

fn crowd(n: &str, cgroup: &Path) {
    let n: usize = n.parse().expect("N");
    std::fs::write(cgroup.join("cgroup.procs"), std::process::id().to_string()).expect("join the cgroup");
    for _ in 0..n {
        // SAFETY: the child only calls async-signal-safe functions (prctl,
        // sigwait through pause) before it exits.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
                pause();
                std::process::exit(0);
            }
            nix::unistd::ForkResult::Parent { .. } => {}
        }
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    pause();
}

/// An ia32 syscall from 64-bit code: `nr` and its first three arguments
/// (ebx, ecx, edx), with rdi and rsi set as given (a 64-bit call's first
/// two). The kernel zeroes r8-r11 on this path.
#[cfg(target_arch = "x86_64")]
fn int80(nr: u32, args: [u32; 3], rdi: u64, rsi: u64) -> i32 {
    let ret: u32;
    // SAFETY: `int $0x80` enters the kernel's ia32 syscall path; rbx (the
    // first argument, reserved by LLVM) is swapped in and back out; every
    // register the kernel writes is declared.
    unsafe {
        std::arch::asm!(
            "xchg {b:r}, rbx",
            "int 0x80",
            "xchg {b:r}, rbx",
            b = inout(reg) u64::from(args[0]) => _,
            inout("eax") nr => ret,
            in("ecx") args[1],
            in("edx") args[2],
            in("rdi") rdi,
            in("rsi") rsi,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    ret as i32
}

#[cfg(target_arch = "x86_64")]
fn ia32_calls(cgroup: &Path) {
    use std::os::fd::{AsFd, AsRawFd};
    const BPF_PROG_ATTACH: u32 = 8;
    const IA32_SIGNALFD: u32 = 321; // x86_64's bpf
    const IA32_BPF: u32 = 357;
    let prog = integration_tests::Prog::load("cil_sock4_connect", "connect4");
    let dir = integration_tests::open_dir(cgroup);
    // Memory below 4 GiB, which 32-bit pointers reach.
    // SAFETY: a fresh anonymous private mapping, used only through `low`.
    let low = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    assert_ne!(low, libc::MAP_FAILED, "mmap MAP_32BIT");
    let words = low.cast::<u32>();
    // bpf_attr for BPF_PROG_ATTACH: target_fd, attach_bpf_fd, attach_type,
    // attach_flags (the rest zero); a signal mask 256 bytes on.
    let fields = [
        dir.as_raw_fd() as u32,
        prog.fd.as_fd().as_raw_fd() as u32,
        prog.hook.kernel_value(),
        integration_tests::ALLOW_MULTI,
    ];
    for (i, v) in fields.iter().enumerate() {
        // SAFETY: within the mapping's 4096 bytes.
        unsafe { words.add(i).write(*v) };
    }
    let attr = low as u64;
    let mask = attr + 256;
    let mut line = String::new();
    let forged = int80(IA32_SIGNALFD, [u32::MAX, mask as u32, 8], u64::from(BPF_PROG_ATTACH), attr);
    assert!(forged >= 0, "ia32 signalfd: {forged}");
    println!("forged");
    let _ = std::io::stdout().flush();
    std::io::stdin().read_line(&mut line).expect("stdin");
    let attached = int80(IA32_BPF, [BPF_PROG_ATTACH, attr as u32, 16], 0, 0);
    assert_eq!(attached, 0, "ia32 bpf(BPF_PROG_ATTACH)");
    println!("attached {}", prog.id);
    let _ = std::io::stdout().flush();
    std::io::stdin().read_line(&mut line).expect("stdin");
    agent::bpf::sys::prog_detach(dir.as_fd(), prog.fd.as_fd(), prog.hook.kernel_value()).expect("detach");
}

fn getppid_loop(n: &str) {
    let n: u64 = n.parse().expect("N");
    let start = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: getppid takes no arguments and cannot fail; the raw
        // syscall keeps libc from answering without entering the kernel.
        unsafe {
            libc::syscall(libc::SYS_getppid);
        }
    }
    println!("{:.1}", start.elapsed().as_nanos() as f64 / n as f64);
}

fn mkdir_churn(cgroup: &Path, dir: &Path, pairs: &str) {
    let pairs: usize = pairs.parse().expect("PAIRS");
    std::fs::write(cgroup.join("cgroup.procs"), std::process::id().to_string()).expect("join the cgroup");
    for i in 0..pairs {
        let d = dir.join(format!("f{i}"));
        std::fs::create_dir(&d).expect("mkdir");
        std::fs::remove_dir(&d).expect("rmdir");
    }
}

fn attach_churn(seconds: &str, rate: &str, cgroup: &Path) {
    use std::os::fd::AsFd;
    use std::time::{Duration, Instant};
    let seconds: u64 = seconds.parse().expect("seconds");
    let rate: u64 = rate.parse().expect("per second");
    let prog = integration_tests::Prog::load("churn_connect4", "connect4");
    let dir = integration_tests::open_dir(cgroup);
    let hook = prog.hook.kernel_value();
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        let _ = agent::bpf::sys::prog_attach(dir.as_fd(), prog.fd.as_fd(), hook, integration_tests::ALLOW_MULTI);
        let _ = agent::bpf::sys::prog_detach(dir.as_fd(), prog.fd.as_fd(), hook);
        calls += 2;
        let due = Duration::from_micros(calls * 1_000_000 / rate);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    println!("{calls}");
}

fn fuse_trap(dir: &str) {
    use std::os::fd::{AsFd, AsRawFd};
    let dev = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").expect("open /dev/fuse");
    std::fs::create_dir_all(dir).expect("mkdir");
    let opts = format!("fd={},rootmode=40000,user_id=0,group_id=0", dev.as_raw_fd());
    nix::mount::mount(Some("cgaudit-trap"), dir, Some("fuse"), nix::mount::MsFlags::empty(), Some(opts.as_str()))
        .expect("mount fuse");
    // O_PATH: the open itself asks the FUSE server nothing.
    let root = nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .expect("open the FUSE root");
    let connect4 = agent::bpf::AttachType::from_name("connect4").unwrap().kernel_value();
    let prog = agent::bpf::sys::prog_fd_by_id(u32::MAX).ok();
    let _ = match &prog {
        Some(p) => agent::bpf::sys::prog_attach(root.as_fd(), p.as_fd(), connect4, 0),
        // No program needed: the call fails either way; its target is what counts.
        None => agent::bpf::sys::prog_attach(root.as_fd(), root.as_fd(), connect4, 0),
    };
    println!("trapped");
    std::io::stdout().flush().expect("flush");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        let _ = (&dev, &root);
    }
}

fn remount_paused(pid: &str, path: &str, timeout_ms: &str) {
    use agent::remount::Target;
    let say = |line: String| {
        println!("{line}");
        std::io::stdout().flush().expect("flush");
    };
    let timeout = std::time::Duration::from_millis(timeout_ms.parse().expect("timeout in ms"));
    let target = match Target::open(Path::new("/proc"), pid.parse().expect("pid")) {
        Ok(t) => t.with_helper(integration_tests::agent_bin()).with_timeout(timeout),
        Err(e) => return say(format!("error: {e}")),
    };
    let plan = match target.plan(Path::new(path)) {
        Ok(p) => p,
        Err(e) => return say(format!("error: {e}")),
    };
    say(format!("planned {}", plan.action.as_str()));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("stdin");
    match target.apply(&plan) {
        Ok((after, _)) => say(format!("done: {after}")),
        Err(e) => say(format!("error: {e}")),
    }
}

/// A pod's pause process: waits for SIGTERM or SIGINT (as a container's
/// PID 1 it has no default action for them) and exits.
fn pause() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.thread_block().expect("block SIGTERM");
    let _ = set.wait();
}

/// runc, minus CPU weights when cgroup v2 has no cpu controller: on hybrid
/// hosts (these machines) `cpu` is bound to a v1 hierarchy, and runc fails
/// to write the `cpu.weight` containerd's CRI always gives a pod sandbox.
/// Everything else (cgroup path, device filter, namespaces) is runc's own.
fn runc_without_cpu(args: &[String]) -> ! {
    use std::os::unix::process::CommandExt;
    let has_cpu = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpu"));
    let bundle = args.iter().position(|a| a == "--bundle" || a == "-b").and_then(|i| args.get(i + 1));
    if let (false, Some(bundle)) = (has_cpu, bundle) {
        let path = Path::new(bundle).join("config.json");
        let mut spec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read config.json")).expect("parse config.json");
        if let Some(resources) = spec.pointer_mut("/linux/resources").and_then(|r| r.as_object_mut()) {
            resources.remove("cpu");
        }
        std::fs::write(&path, serde_json::to_vec(&spec).expect("json")).expect("write config.json");
    }
    let err = std::process::Command::new("runc").args(args).exec();
    eprintln!("exec runc: {err}");
    std::process::exit(127);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "runc") {
        runc_without_cpu(&args[2..]);
    }
    if let [_, cmd, pid, path, timeout_ms] = args.as_slice()
        && cmd == "remount-paused"
    {
        return remount_paused(pid, path, timeout_ms);
    }
    if let [_, cmd, dir] = args.as_slice()
        && cmd == "fuse-trap"
    {
        return fuse_trap(dir);
    }
    // A pause process; what follows `pause` is for whoever reads its
    // command line (a CNI agent's flags).
    if args.get(1).is_some_and(|a| a == "pause") {
        return pause();
    }
    if let [_, cmd, comm] = args.as_slice()
        && cmd == "named"
    {
        let comm = std::ffi::CString::new(comm.as_bytes()).expect("COMM without NUL");
        nix::sys::prctl::set_name(&comm).expect("PR_SET_NAME");
        return pause();
    }
    // A node agent's process (`comm`) holding a bpf_link of a program
    // named `name` on `hook` of `cgroup`, as Inspektor Gadget holds a
    // gadget's sock_ops program at the root.
    if let [_, cmd, cgroup, hook, name, comm] = args.as_slice()
        && cmd == "hold-link"
    {
        let comm = std::ffi::CString::new(comm.as_bytes()).expect("COMM without NUL");
        nix::sys::prctl::set_name(&comm).expect("PR_SET_NAME");
        let prog = integration_tests::Prog::load(name, hook);
        let _link = Link::new(Path::new(cgroup), &prog);
        println!("held {}", prog.id);
        std::io::stdout().flush().expect("flush");
        return pause();
    }
    if let [_, cmd, cgroup] = args.as_slice()
        && cmd == "probe"
    {
        let traffic = integration_tests::lb::run_probe(Path::new(cgroup));
        println!("{}", serde_json::to_string(&traffic).expect("json"));
        return;
    }
    if let [_, cmd, seconds, threads, cgroup] = args.as_slice()
        && cmd == "link-churn"
    {
        return link_churn(seconds, threads, Path::new(cgroup));
    }
    if let [_, cmd, n, cgroup] = args.as_slice()
        && cmd == "crowd"
    {
        return crowd(n, Path::new(cgroup));
    }
    #[cfg(target_arch = "x86_64")]
    if let [_, cmd, cgroup] = args.as_slice()
        && cmd == "ia32-calls"
    {
        return ia32_calls(Path::new(cgroup));
    }
    if let [_, cmd, n] = args.as_slice()
        && cmd == "getppid"
    {
        return getppid_loop(n);
    }
    if let [_, cmd, cgroup, dir, pairs] = args.as_slice()
        && cmd == "mkdir-churn"
    {
        return mkdir_churn(Path::new(cgroup), Path::new(dir), pairs);
    }
    if let [_, cmd, seconds, rate, cgroup] = args.as_slice()
        && cmd == "attach-churn"
    {
        return attach_churn(seconds, rate, Path::new(cgroup));
    }
    if let [_, cmd] = args.as_slice()
        && cmd == "memlock-64k"
    {
        use nix::sys::resource::{Resource, setrlimit};
        setrlimit(Resource::RLIMIT_MEMLOCK, 64 << 10, 64 << 10).expect("lower RLIMIT_MEMLOCK");
        match std::panic::catch_unwind(|| integration_tests::Prog::load("memlock_probe", "connect4")) {
            Ok(_) => println!("loaded"),
            Err(_) => std::process::exit(1),
        }
        return;
    }
    if let [_, cmd, seconds, rate] = args.as_slice()
        && cmd == "bpf-flood"
    {
        return flood(seconds, rate);
    }
    if let [_, cmd, dir, rest @ ..] = args.as_slice()
        && cmd == "socket-lb-agent"
    {
        return socket_lb_agent(Path::new(dir), rest);
    }
    eprintln!(
        "usage: fixture pause | socket-lb-agent <DIR> [--join CGROUP] [--private-cgroupns] [--attach HOW] [--name COMM] \
         | bpf-flood <SECONDS> <PER_SECOND> | fuse-trap <DIR> | remount-paused <PID> <PATH> <TIMEOUT_MS>"
    );
    std::process::exit(2);
}

fn socket_lb_agent(dir: &Path, flags: &[String]) {
    let mut flags = flags.iter();
    let (mut join, mut private, mut attach, mut name) = (None, false, "links".to_owned(), None);
    let (mut real, mut use_mount, mut private_mounts) = (false, false, false);
    while let Some(f) = flags.next() {
        match f.as_str() {
            "--join" => join = flags.next().cloned(),
            "--private-cgroupns" => private = true,
            "--attach" => attach = flags.next().cloned().expect("--attach HOW"),
            "--name" => name = flags.next().cloned(),
            "--real-lb" => real = true,
            "--use-mount" => use_mount = true,
            "--private-mountns" => private_mounts = true,
            other => panic!("socket-lb-agent: unknown flag {other}"),
        }
    }
    if let Some(cgroup) = join {
        std::fs::write(Path::new(&cgroup).join("cgroup.procs"), std::process::id().to_string())
            .unwrap_or_else(|e| panic!("join {cgroup}: {e}"));
    }
    if private {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP).expect("unshare the cgroup namespace");
    }
    if let Some(name) = name {
        nix::sys::prctl::set_name(&std::ffi::CString::new(name).expect("name")).expect("prctl PR_SET_NAME");
    }
    if private_mounts {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).expect("unshare the mount namespace");
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .expect("make / private");
    }
    if !use_mount {
        std::fs::create_dir_all(dir).expect("mkdir");
        nix::mount::mount(Some("none"), dir, Some("cgroup2"), nix::mount::MsFlags::empty(), None::<&str>)
            .expect("mount cgroup2");
    }
    let progs = if real { integration_tests::lb::load_socket_lb() } else { load_cilium_socket_lb() };
    let flags = match attach.as_str() {
        "links" => None,
        "multi" => Some(integration_tests::ALLOW_MULTI),
        "override" => Some(integration_tests::ALLOW_OVERRIDE),
        "none" => Some(0),
        other => panic!("--attach {other}: links, multi, override or none"),
    };
    let mut links = Vec::new();
    for p in &progs {
        match flags {
            None => links.push(Link::new(dir, p)),
            Some(flags) => {
                let cgroup = integration_tests::open_dir(dir);
                agent::bpf::sys::prog_attach(
                    std::os::fd::AsFd::as_fd(&cgroup),
                    std::os::fd::AsFd::as_fd(&p.fd),
                    p.hook.kernel_value(),
                    flags,
                )
                .unwrap_or_else(|e| panic!("attach {}: {e}", p.name));
            }
        }
    }
    println!("attached {}", progs.len());
    std::io::stdout().flush().expect("flush");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        let _ = &links;
    }
}
