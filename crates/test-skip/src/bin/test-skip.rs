//! `test-skip [--require VAR] TEST WHY...`: a shell script's step that cannot run here, reported
//! by the rule every Rust test follows ([`test_skip::report`]). Prints `SKIPPED TEST: WHY` on
//! stderr, appends it to the skip list (`CORNFLAKES_SKIP_LOG`) and exits 0; or, when
//! `CORNFLAKES_REQUIRE_ALL` (or `VAR`) is `1`, prints why the skip fails and exits 1. Usage
//! errors exit 2. `scripts/skip.sh` builds it and wraps it for the scripts.

use std::process::ExitCode;

const USAGE: &str = "usage: test-skip [--require VAR] TEST WHY...";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let require = match args.first().map(String::as_str) {
        Some("--require") if args.len() > 1 => {
            let var = args.remove(1);
            args.remove(0);
            Some(var)
        }
        _ => None,
    };
    if args.len() < 2 || args[0].is_empty() || args[0].starts_with("--") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let why = args[1..].join(" ");
    match test_skip::report(&args[0], &why, require.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
