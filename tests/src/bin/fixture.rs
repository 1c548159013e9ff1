//! A stand-in CNI agent for tests that need one in another process (a real
//! container): `fixture socket-lb-agent <DIR>` mounts cgroup2 at DIR (as
//! Cilium mounts /run/cilium/cgroupv2), attaches the ten Cilium socket-LB
//! programs to the top of that mount through bpf_links, prints `attached`,
//! and sleeps. The links die with the process, so killing it cleans up.
//! Copy it as `cilium-agent` to get that command name.

use std::io::Write;
use std::path::Path;

use integration_tests::{Link, load_cilium_socket_lb};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, cmd, dir] = args.as_slice() else {
        eprintln!("usage: fixture socket-lb-agent <DIR>");
        std::process::exit(2);
    };
    assert_eq!(cmd, "socket-lb-agent", "unknown command {cmd}");
    let dir = Path::new(dir);
    std::fs::create_dir_all(dir).expect("mkdir");
    nix::mount::mount(Some("none"), dir, Some("cgroup2"), nix::mount::MsFlags::empty(), None::<&str>)
        .expect("mount cgroup2");
    let progs = load_cilium_socket_lb();
    let links: Vec<Link> = progs.iter().map(|p| Link::new(dir, p)).collect();
    println!("attached {}", links.len());
    std::io::stdout().flush().expect("flush");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
