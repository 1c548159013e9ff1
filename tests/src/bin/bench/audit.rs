//! `agent audit` against `bpftool cgroup tree` on the same synthetic
//! kubepods hierarchies: wall time, bpf() calls per cgroup, peak RSS.

use super::*;

/// A synthetic node: `n` cgroups in kubepods layouts (systemd slices, pods
/// of 1-4 containers), with Cilium's socket-LB programs at the top, an
/// unnamed device program per container (as runc/crun attach), systemd-like
/// programs on a system slice, and some bpf_links. Everything it attached is
/// detached on drop, then the tree is removed.
pub(super) struct Hierarchy {
    pub(super) attached: Vec<(std::path::PathBuf, u32)>,
    pub(super) _links: Vec<Link>,
    pub(super) progs: Vec<Prog>,
    pub(super) dev: Prog,
    pub(super) t: TestCgroup,
    pub(super) cgroups: usize,
}

impl Hierarchy {
    /// `device_every`: a device program on every Nth container (1: all, as
    /// on a real node; larger: a sparse tree that measures the walk itself).
    pub(super) fn build(n: usize, device_every: usize) -> Hierarchy {
        let t = TestCgroup::new("bench-audit");
        let dev = Prog::load("", "device");
        let progs = load_cilium_socket_lb();
        let mut attached = Vec::new();
        let mut links = Vec::new();
        let mut cgroups = 1;
        let svc = t.mkdir("/system.slice/containerd.service");
        cgroups += 2;
        let fw = Prog::load("sd_fw_ingress", "ingress");
        let bind = Prog::load("sd_bind4", "bind4");
        links.push(Link::new(&svc, &fw));
        links.push(Link::new(&svc, &bind));
        for p in &progs {
            let cg = open_dir(&t.path);
            agent::bpf::sys::prog_attach(
                std::os::fd::AsFd::as_fd(&cg),
                std::os::fd::AsFd::as_fd(&p.fd),
                p.hook.kernel_value(),
                ALLOW_MULTI,
            )
            .unwrap();
            attached.push((t.path.clone(), p.id));
        }
        t.mkdir("/kubepods.slice/kubepods-burstable.slice");
        t.mkdir("/kubepods.slice/kubepods-besteffort.slice");
        cgroups += 3;
        let mut pod = 0usize;
        while cgroups < n {
            let qos = if pod.is_multiple_of(3) { "besteffort" } else { "burstable" };
            let base = format!(
                "/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{pod:08x}_0000_4000_8000_000000000000.slice"
            );
            t.mkdir(&base);
            cgroups += 1;
            for c in 0..(1 + pod % 4).min(n - cgroups) {
                let id = pod * 4 + c;
                let ctr = t.mkdir(&format!("{base}/cri-containerd-{id:064x}.scope"));
                if id.is_multiple_of(device_every) {
                    let fd = open_dir(&ctr);
                    let (cg, prog) = (std::os::fd::AsFd::as_fd(&fd), std::os::fd::AsFd::as_fd(&dev.fd));
                    agent::bpf::sys::prog_attach(cg, prog, dev.hook.kernel_value(), ALLOW_MULTI).unwrap();
                    attached.push((ctr, dev.id));
                }
                cgroups += 1;
            }
            pod += 1;
        }
        let mut progs = progs;
        progs.push(fw);
        progs.push(bind);
        Hierarchy { attached, _links: links, progs, dev, t, cgroups }
    }
}

impl Drop for Hierarchy {
    fn drop(&mut self) {
        for (path, id) in &self.attached {
            let prog = if *id == self.dev.id { &self.dev } else { self.progs.iter().find(|p| p.id == *id).unwrap() };
            if let Ok(f) = std::fs::File::open(path) {
                let _ = agent::bpf::sys::prog_detach(
                    std::os::fd::AsFd::as_fd(&f),
                    std::os::fd::AsFd::as_fd(&prog.fd),
                    prog.hook.kernel_value(),
                );
            }
        }
    }
}

/// (cgroup path, attach type, program id) from either tool.
pub(super) type AttachmentSet = std::collections::BTreeSet<(String, String, u64)>;

pub(super) fn agent_set(json: &str, root: &std::path::Path) -> AttachmentSet {
    let v: serde_json::Value = serde_json::from_str(json).expect("agent JSON");
    v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let rel = a["cgroup"].as_str().unwrap();
            let full = if rel == "/" { root.display().to_string() } else { format!("{}{rel}", root.display()) };
            (full, a["attach_type"].as_str().unwrap().to_owned(), a["prog_id"].as_u64().unwrap())
        })
        .collect()
}

/// Parses `bpftool cgroup tree` text: a path line, then indented
/// `ID AttachType [AttachFlags] [Name]` lines. (Its JSON mode is not used:
/// at 1,000 cgroups it takes seconds and gigabytes, at 10,000 it breaks.)
pub(super) fn bpftool_set(text: &str) -> AttachmentSet {
    let mut set = AttachmentSet::new();
    let mut path = String::new();
    for line in text.lines().skip(2) {
        if line.starts_with('/') {
            path = line.trim_end().to_owned();
        } else if let [id, t, ..] = line.split_whitespace().collect::<Vec<_>>()[..] {
            let t = agent::bpf::AttachType::from_any_name(t).unwrap_or_else(|| panic!("attach type {t}"));
            set.insert((path.clone(), t.name().to_owned(), id.parse().unwrap()));
        }
    }
    set
}

/// bpf() syscalls a command makes, from `strace -c`.
pub(super) fn bpf_calls(cmd: &[&str]) -> u64 {
    let out = std::process::Command::new("strace")
        .args(["-f", "-c", "-e", "trace=bpf", "-o", "/dev/stderr", "--"])
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("strace");
    let text = String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| l.trim_end().ends_with(" bpf"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0)
}

/// The one-shot commands compared on a tree rooted at `root`: the agent
/// with each walk, and the reference tool.
pub(super) fn one_shots<'a>(agent: &'a str, root: &'a str) -> [(&'static str, Vec<&'a str>); 3] {
    [
        ("agent audit", vec![agent, "audit", "--output", "json", "--cgroup-root", root]),
        (
            "agent audit --walk syscalls",
            vec![agent, "audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", root],
        ),
        ("bpftool cgroup tree", vec!["bpftool", "cgroup", "tree", root]),
    ]
}

/// The one-shot's fixed cost: a tree of one cgroup, where the walk costs
/// nothing and what remains is loading, BTF and the process itself.
pub(super) fn fixed_cost_bench(runs: usize) {
    println!("== agent audit on a 1-cgroup tree (the fixed cost), {runs} runs each after a warm-up ==");
    let t = TestCgroup::new("bench-fixed");
    let root = t.path.to_str().unwrap().to_owned();
    let agent = agent_bin();
    let cmds = one_shots(agent.to_str().unwrap(), &root);
    println!("{:<30} {:>22} {:>8}", "", "wall p50 (min-max)", "RSS MiB");
    for (label, cmd) in &cmds {
        let _ = timed(cmd);
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let (wall, r, _) = timed(cmd);
            walls.push(wall * 1000.0);
            rss = rss.max(r);
        }
        let (p50, lo, hi) = spread(&mut walls);
        println!("{label:<30} {:>22} {:>8.1}", format!("{p50:.1} ms ({lo:.1}-{hi:.1})"), rss as f64 / 1024.0);
    }
}

/// One row per size; `bpftool_max`: the largest tree bpftool is run on
/// (it keeps a copy of vmlinux BTF, ~5 MB, per attached program). The agent
/// runs with its default walk (one in-kernel pass) and with
/// `--walk syscalls`, so the table shows what each bought.
pub(super) fn audit_bench(title: &str, sizes: &[usize], device_every: usize, bpftool_max: usize, runs: usize) {
    println!("== {title}: agent audit vs bpftool cgroup tree, {runs} runs each after a warm-up, alternating ==");
    println!(
        "{:>7} {:>6} | {:>20} {:>6} {:>7} | {:>20} {:>6} {:>7} | {:>20} {:>6} {:>7} | {:>7} {:>7}",
        "cgroups",
        "attach",
        "agent p50 (min-max)",
        "bpf/cg",
        "RSS MiB",
        "--walk syscalls",
        "bpf/cg",
        "RSS MiB",
        "bpftool",
        "bpf/cg",
        "RSS MiB",
        "ratio",
        "ratio sc"
    );
    let agent = agent_bin();
    for &n in sizes {
        let h = Hierarchy::build(n, device_every);
        let root = h.t.path.to_str().unwrap().to_owned();
        let a_cmd = [agent.to_str().unwrap(), "audit", "--output", "json", "--cgroup-root", &root];
        let s_cmd =
            [agent.to_str().unwrap(), "audit", "--output", "json", "--walk", "syscalls", "--cgroup-root", &root];
        let b_cmd = ["bpftool", "cgroup", "tree", &root];
        let with_bpftool = n <= bpftool_max;
        // Warm-up, and the answers compared.
        let (_, _, a_out) = timed(&a_cmd);
        let (_, _, s_out) = timed(&s_cmd);
        let a_set = agent_set(&a_out, &h.t.path);
        assert!(a_set == agent_set(&s_out, &h.t.path), "the agent's two walks disagree at {n} cgroups");
        let method = serde_json::from_str::<serde_json::Value>(&a_out).ok().map(|r| r["walk"]["method"].clone());
        assert_eq!(method, Some("bpf_iter".into()), "the default walk fell back at {n}: {a_out:.400}");
        if with_bpftool {
            let (_, _, b_out) = timed(&b_cmd);
            let b_set = bpftool_set(&b_out);
            assert_eq!(a_set.len(), b_set.len(), "different number of attachments at {n}");
            assert!(a_set == b_set, "different attachment sets at {n} cgroups");
        }
        let (mut a_wall, mut s_wall, mut b_wall) = (Vec::new(), Vec::new(), Vec::new());
        let (mut a_rss, mut s_rss, mut b_rss) = (0, 0, 0);
        for _ in 0..runs {
            let (w, r, _) = timed(&a_cmd);
            a_wall.push(w);
            a_rss = a_rss.max(r);
            let (w, r, _) = timed(&s_cmd);
            s_wall.push(w);
            s_rss = s_rss.max(r);
            if with_bpftool {
                let (w, r, _) = timed(&b_cmd);
                b_wall.push(w);
                b_rss = b_rss.max(r);
            }
        }
        let per_cg = |cmd: &[&str]| bpf_calls(cmd) as f64 / h.cgroups as f64;
        let (a_med, a_min, a_max) = spread(&mut a_wall);
        let (s_med, s_min, s_max) = spread(&mut s_wall);
        let mib = |kb: u64| kb as f64 / 1024.0;
        let bpftool_cols = if with_bpftool {
            let (b_med, b_min, b_max) = spread(&mut b_wall);
            format!(
                "{:>20} {:>6.1} {:>7.1} | {:>6.1}x",
                format!("{b_med:.3}s ({b_min:.2}-{b_max:.2})"),
                per_cg(&b_cmd),
                mib(b_rss),
                b_med / a_med
            )
        } else {
            format!("{:>36} | {:>7}", format!("not run: would need ~{} GiB", a_set.len() * 5 / 1024 + 1), "")
        };
        println!(
            "{:>7} {:>6} | {:>20} {:>6.2} {:>7.1} | {:>20} {:>6.1} {:>7.1} | {} {:>6.1}x",
            h.cgroups,
            a_set.len(),
            format!("{a_med:.3}s ({a_min:.2}-{a_max:.2})"),
            per_cg(&a_cmd),
            mib(a_rss),
            format!("{s_med:.3}s ({s_min:.2}-{s_max:.2})"),
            per_cg(&s_cmd),
            mib(s_rss),
            bpftool_cols,
            s_med / a_med
        );
    }
    println!(
        "(wall time of the whole process; ratio = bpftool / agent, ratio sc = --walk syscalls / agent; \
         identical (cgroup, attach type, program) sets checked at each size)"
    );
}

/// Issue 28, H1: the audit of a chain 4,000 deep of 255-byte names in a
/// pod's container (a process and a connect4 program at the bottom), next
/// to the wide trees above: what a tracked cgroup costs at depth.
pub(super) fn deep_chain_bench(runs: usize) {
    println!(
        "== a 4,000-deep chain of 255-byte names in a pod (a process and a program at the bottom), {runs} runs =="
    );
    let node = DeepPodChain::make("bench-deep", 4000);
    let prog = &node.prog;
    let root = node.t.path.to_str().unwrap().to_owned();
    let agent = agent_bin();
    let cmds = one_shots(agent.to_str().unwrap(), &root);
    println!("{:<30} {:>22} {:>8}  found the program", "", "wall p50 (min-max)", "RSS MiB");
    for (label, cmd) in &cmds {
        let (_, _, out) = timed(cmd);
        let found = if cmd[0] == "bpftool" {
            out.contains("cil_sock4_connect") || out.contains(&prog.id.to_string())
        } else {
            serde_json::from_str::<serde_json::Value>(&out)
                .ok()
                .and_then(|r| Some(r["attachments"].as_array()?.iter().any(|x| x["prog_id"] == prog.id)))
                .unwrap_or(false)
        };
        let mut walls = Vec::new();
        let mut rss = 0;
        for _ in 0..runs {
            let (wall, r, _) = timed(cmd);
            walls.push(wall);
            rss = rss.max(r);
        }
        let (p50, lo, hi) = spread(&mut walls);
        println!(
            "{label:<30} {:>22} {:>8.1}  {}",
            format!("{p50:.3}s ({lo:.2}-{hi:.2})"),
            rss as f64 / 1024.0,
            if found { "yes" } else { "no" }
        );
    }
}

/// What a hook's revision (6.16+) could save a reader: `BPF_PROG_QUERY` of
/// one hook holding 64 programs, with its id array (what the audit and the
/// daemon read) and with none (count and revision only: the call a reader
/// would make first to skip an unchanged hook), per call.
pub fn revision_bench(calls: u32) {
    use std::os::fd::AsFd;
    let t = TestCgroup::new("bench-revision");
    let progs: Vec<Prog> = (0..64).map(|i| Prog::load(&format!("bench_{i}"), "connect4")).collect();
    let _a: Vec<Attached> = progs.iter().map(|p| Attached::new(&t.path, p, ALLOW_MULTI)).collect();
    let cg = open_dir(&t.path);
    let hook = progs[0].hook.kernel_value();
    let (_, revision) = agent::bpf::sys::prog_query_revision(cg.as_fd(), hook).expect("query");
    let time = |f: &dyn Fn()| {
        let start = std::time::Instant::now();
        for _ in 0..calls {
            f();
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(calls)
    };
    let full = time(&|| {
        agent::bpf::sys::prog_query(cg.as_fd(), hook, false).expect("query");
    });
    let rev = time(&|| {
        agent::bpf::sys::prog_query_revision(cg.as_fd(), hook).expect("query");
    });
    println!("BPF_PROG_QUERY of one hook holding 64 programs ({calls} calls each; revision {revision}):");
    println!("  {:<44} {:>8.0} ns", "with the id array (the hook read whole)", full);
    println!("  {:<44} {:>8.0} ns", "count and revision only", rev);
    println!(
        "  the daemon's re-read of a cgroup skips a hook whose revision has not moved: {:.0} ns saved a full hook; \
         a tenant's cgroup with all 13 socket hooks full: {:.1} us -> {:.1} us",
        full - rev,
        13.0 * full / 1000.0,
        13.0 * rev / 1000.0
    );
}
