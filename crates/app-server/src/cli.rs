//! The main program of an app with subcommands (`echo bench | server | …`, `kv …`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loadgen::args::Args;

/// One subcommand: its name and what runs it on the arguments after it.
pub type Command = (&'static str, fn(Args) -> Result<(), String>);

/// Runs the subcommand named by the first of `argv` with the rest. With no arguments prints
/// `usage` on stderr and fails; with `-h`/`--help` prints it on stdout and succeeds; an unknown
/// subcommand or a subcommand's error is printed as `{prog}: {error}` and fails.
pub fn main(prog: &str, usage: &str, commands: &[Command], mut argv: Vec<String>) -> ExitCode {
    if argv.is_empty() {
        eprint!("{usage}");
        return ExitCode::FAILURE;
    }
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        print!("{usage}");
        return ExitCode::SUCCESS;
    }
    let cmd = argv.remove(0);
    let r = match commands.iter().find(|(name, _)| *name == cmd) {
        Some((_, run)) => run(Args::new(argv)),
        None => Err(format!("unknown command {cmd:?}\n{usage}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prog}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `body` until `--seconds` pass or, with `--until-stdin-closes`, standard input closes
/// (how a parent, e.g. the AF_XDP bench, stops a child server); `body` gets the stop flag.
pub fn serve_until<T>(
    seconds: Option<Duration>,
    until_stdin_closes: bool,
    body: impl FnOnce(&AtomicBool) -> Result<T, String>,
) -> Result<T, String> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        if let Some(d) = seconds {
            s.spawn(move || {
                std::thread::sleep(d);
                stop.store(true, Ordering::Relaxed);
            });
        }
        if until_stdin_closes {
            s.spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                stop.store(true, Ordering::Relaxed);
            });
        }
        let r = body(stop);
        // Let the helper threads end too.
        stop.store(true, Ordering::Relaxed);
        r
    })
}

/// The transport of a client against a running server (`echo client`, `kv client`):
/// `--datapath socket` (the default, UDP) gives `None`; `--datapath tcp` gives `Some(n)`, `n`
/// TCP connections per server core and client thread (`--conns N`, default 1). The server may
/// be any that speaks the stream framing: `echo server --datapath tcp`, `kv server --datapath
/// tcp`, or `demi-server` over Demikernel (demikernel/, docs/tcp.md).
pub fn client_transport(a: &mut Args) -> Result<Option<usize>, String> {
    let tcp = match a.take("--datapath")?.as_deref() {
        None | Some("socket") => false,
        Some("tcp") => true,
        Some(other) => {
            return Err(format!(
                "--datapath {other:?}: a client runs on socket (UDP) or tcp"
            ))
        }
    };
    match a.parse::<usize>("--conns")? {
        Some(n) if !tcp || n == 0 => {
            Err("--conns N (at least 1) goes with --datapath tcp".to_owned())
        }
        Some(n) => Ok(Some(n)),
        None => Ok(tcp.then_some(1)),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn transport(args: &[&str]) -> Result<Option<usize>, String> {
        let mut a = Args::new(args.iter().map(|s| s.to_string()).collect());
        let t = client_transport(&mut a)?;
        a.finish()?;
        Ok(t)
    }

    #[test]
    fn a_client_runs_on_udp_or_on_tcp_with_n_connections() {
        assert_eq!(transport(&[]), Ok(None));
        assert_eq!(transport(&["--datapath", "socket"]), Ok(None));
        assert_eq!(transport(&["--datapath", "tcp"]), Ok(Some(1)));
        assert_eq!(
            transport(&["--datapath", "tcp", "--conns", "4"]),
            Ok(Some(4))
        );
        assert!(transport(&["--conns", "4"]).is_err());
        assert!(transport(&["--datapath", "tcp", "--conns", "0"]).is_err());
        assert!(transport(&["--datapath", "xdp"])
            .unwrap_err()
            .contains("socket"));
    }
}
