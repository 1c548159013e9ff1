//! What the daemon costs everyone else, with each event source.

use super::*;

/// The daemon with `--events <events>` on `t`, if this machine runs that
/// source (one that cannot run stops the daemon at start).
pub(super) fn daemon_with(t: &TestCgroup, events: &str) -> Option<Daemon> {
    Daemon::try_start(&["--cgroup-root", t.path.to_str().unwrap(), "--interval", "30s", "--events", events]).ok()
}

/// One round of the two workloads: ns per getppid(), seconds of dd.
pub(super) fn workloads(fixture: &std::path::Path) -> (f64, f64) {
    let out = std::process::Command::new(fixture).args(["getppid", "5000000"]).output().expect("fixture getppid");
    let ns: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("ns per call");
    let start = Instant::now();
    let dd = std::process::Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "bs=64", "count=1000000"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("dd");
    assert!(dd.success());
    (ns, start.elapsed().as_secs_f64())
}

pub(super) fn tax_bench(rounds: usize) {
    println!("== what the daemon costs other processes: their syscalls with it off and on, 1-cgroup tree ==");
    let t = TestCgroup::new("bench-tax");
    let fixture = agent_bin().with_file_name("fixture");
    let mut modes: Vec<(&str, Option<&str>)> = vec![("daemon off", None)];
    for events in ["fexit", "kprobe", "reading", "syscalls"] {
        match daemon_with(&t, events) {
            Some(_) => modes.push((events, Some(events))),
            None => println!("(--events {events}: refused by this kernel, not measured)"),
        }
    }
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut dd: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, (_, events)) in modes.iter().enumerate() {
            let d = events.map(|e| daemon_with(&t, e).expect("the source ran a moment ago"));
            let (n, s) = workloads(&fixture);
            ns[i].push(n);
            dd[i].push(s);
            drop(d);
        }
    }
    let ns: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    let dd: Vec<f64> = dd.iter_mut().map(|v| median(v)).collect();
    print!("{:<36}", "workload of another process");
    for (label, events) in &modes {
        print!(" {:>18}", if events.is_some() { format!("--events {label}") } else { label.to_string() });
    }
    println!();
    let row = |name: &str, v: &[f64], unit: &str| {
        print!("{name:<36}");
        for (i, x) in v.iter().enumerate() {
            let cell = if i == 0 {
                format!("{x:.2}{unit}")
            } else {
                format!("{x:.2}{unit} {:+.0}%", (x / v[0] - 1.0) * 100.0)
            };
            print!(" {cell:>18}");
        }
        println!();
    };
    row("getppid() loop, ns/call", &ns, "");
    row("dd bs=64 count=1000000, s", &dd, "");
    println!("(median of {rounds} rounds, modes interleaved; each round starts the daemon afresh)");
}
