//! `agent probe`: the DaemonSet's exec probes. One line to the daemon's
//! probe socket, its answer printed; exit 0 when it says 200.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::cli::{ProbeArgs, ProbeWhat};

/// How long the daemon has to answer (the kubelet's own timeout is longer).
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// `agent probe`: 0 alive (ready), 1 not, or no answer.
pub fn main(args: &ProbeArgs) -> u8 {
    let ask = match args.what {
        ProbeWhat::Live => "live",
        ProbeWhat::Ready => "ready",
    };
    match ask_daemon(&args.socket, ask) {
        Ok(answer) => {
            let (code, body) = answer.split_once(' ').unwrap_or((answer.as_str(), ""));
            print!("{}", crate::text::escape(body));
            u8::from(code != "200")
        }
        Err(e) => {
            eprintln!("agent probe: {}: {e}", args.socket.display());
            1
        }
    }
}

fn ask_daemon(socket: &std::path::Path, ask: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(ANSWER_WITHIN))?;
    s.set_write_timeout(Some(ANSWER_WITHIN))?;
    s.write_all(format!("{ask}\n").as_bytes())?;
    let mut answer = String::new();
    s.take(4096).read_to_string(&mut answer)?;
    Ok(answer)
}
