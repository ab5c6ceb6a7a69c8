//! The main program of an app with subcommands (`echo bench | server | …`, `kv …`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
/// The timer and the stdin reader are detached: when `body` ends first (an error, say) they
/// do not hold the program up.
pub fn serve_until<T>(
    seconds: Option<Duration>,
    until_stdin_closes: bool,
    body: impl FnOnce(&AtomicBool) -> Result<T, String>,
) -> Result<T, String> {
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(d) = seconds {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    if until_stdin_closes {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, Ordering::Relaxed);
        });
    }
    body(&stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn serve_until_stops_after_the_seconds_and_returns_at_once_on_an_error() {
        let t = Instant::now();
        let spins = serve_until(Some(Duration::from_millis(50)), false, |stop| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n)
        })
        .unwrap();
        assert!(spins > 0 && t.elapsed() >= Duration::from_millis(50));
        // An error before the time is up is returned without waiting for the timer.
        let t = Instant::now();
        let e = serve_until(Some(Duration::from_secs(3600)), false, |_| {
            Err::<(), _>("no such device".to_owned())
        });
        assert_eq!(e.unwrap_err(), "no such device");
        assert!(t.elapsed() < Duration::from_secs(60));
    }
}
