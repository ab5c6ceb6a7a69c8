//! # test-skip: skips that are seen, and that can be made to fail
//!
//! A test that cannot run here (no root, no NIC, too few CPUs, a tool missing) calls
//! [`skip`] and returns. `skip`:
//!
//! - writes `SKIPPED <test>: <why>` to the process's stderr **directly** (the test harness
//!   captures `println!`/`eprintln!` of passing tests and shows them only when a test fails,
//!   so a skip printed that way is invisible);
//! - appends the same line to `skipped.txt` in the cargo target directory (or to the file
//!   `CORNFLAKES_SKIP_LOG` names), which `scripts/test.sh` prints at its end: the list of
//!   every test that did not run;
//! - **panics** instead (a failed test) when `CORNFLAKES_REQUIRE_ALL=1`, or when the test's
//!   own variable (e.g. `CORNFLAKES_REQUIRE_XDP`) is `1` ([`skip_unless`]): a machine that
//!   is meant to run everything proves it did.
//!
//! Shell scripts (`scripts/test.sh`, the C API's and Redis's test scripts) report a step that
//! cannot run through the `test-skip` program of this crate, by the same rule ([`report`]):
//! `test-skip [--require VAR] TEST WHY` prints and lists the skip and exits 0, or, when the skip
//! must fail, prints why and exits 1 (`scripts/skip.sh` wraps it).
//!
//! A smoke test that runs a program ([`success_within`]) fails when the program panics in any
//! thread, exits non-zero or outlives its time limit: never "skipped" because of what it
//! printed.
//!
//! ```
//! fn needs_two_cpus() {
//!     let n = std::thread::available_parallelism().map_or(1, |n| n.get());
//!     if n < 2 && !cfg!(miri) {
//!         test_skip::skip("needs_two_cpus", &format!("needs 2 CPUs, this process may use {n}"));
//!         return;
//!     }
//!     // ... the test ...
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Set to `1`, every skip fails its test.
pub const REQUIRE_ALL: &str = "CORNFLAKES_REQUIRE_ALL";

/// Names the file skips are appended to (default: `skipped.txt` in the target directory).
pub const SKIP_LOG: &str = "CORNFLAKES_SKIP_LOG";

/// The file name of the skip list in the target directory.
pub const SKIP_FILE: &str = "skipped.txt";

/// Reports that `test` was skipped because of `why`; panics (fails the test) when
/// `CORNFLAKES_REQUIRE_ALL=1`. The caller returns right after.
#[track_caller]
pub fn skip(test: &str, why: &str) {
    skip_unless(test, why, None);
}

/// [`skip`], also failing when the variable `require` (a narrower switch such as
/// `CORNFLAKES_REQUIRE_XDP`) is `1`.
#[track_caller]
pub fn skip_unless(test: &str, why: &str, require: Option<&str>) {
    if let Err(e) = report(test, why, require) {
        panic!("{e}");
    }
}

/// The rule behind [`skip`] and [`skip_unless`], for a caller that is not a test (the
/// `test-skip` program shell scripts call): when `CORNFLAKES_REQUIRE_ALL` or `require` is `1`,
/// returns the failure `{test}: cannot run ({why}) but {VAR}=1` and lists nothing; otherwise
/// writes `SKIPPED {test}: {why}` to stderr and appends it to the skip list ([`log_path`]).
pub fn report(test: &str, why: &str, require: Option<&str>) -> Result<(), String> {
    let set = |var: &str| std::env::var(var).as_deref() == Ok("1");
    let forced = if set(REQUIRE_ALL) {
        Some(REQUIRE_ALL)
    } else {
        require.filter(|v| set(v))
    };
    if let Some(var) = forced {
        return Err(format!("{test}: cannot run ({why}) but {var}=1"));
    }
    let line = format!("SKIPPED {test}: {why}");
    // Written to the process's stderr directly, past the harness's capture.
    let _ = writeln!(io::stderr(), "{line}");
    if let Some(path) = log_path() {
        let _ = append(&path, &line);
    }
    Ok(())
}

/// Whether skips fail (`CORNFLAKES_REQUIRE_ALL=1`).
pub fn required() -> bool {
    std::env::var(REQUIRE_ALL).as_deref() == Ok("1")
}

/// Where skips are listed: `CORNFLAKES_SKIP_LOG`, else `skipped.txt` in the cargo target
/// directory that holds this executable (the first ancestor with cargo's `CACHEDIR.TAG`), else
/// none.
pub fn log_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(SKIP_LOG).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    target_dir_of(&exe).map(|d| d.join(SKIP_FILE))
}

/// The cargo target directory `path` lies in: its nearest ancestor holding `CACHEDIR.TAG`.
fn target_dir_of(path: &Path) -> Option<&Path> {
    path.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
}

fn append(path: &Path, line: &str) -> io::Result<()> {
    // One write of the whole line: tests of several processes append concurrently, and
    // O_APPEND keeps each write whole.
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// Runs `cmd` to completion and returns its output (stdout and stderr captured), or kills it
/// and panics when it takes longer than `limit`: a hung server or device thread fails a test
/// instead of stalling it.
pub fn output_within(mut cmd: Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    // Drained on their own threads, so a chatty child never blocks on a full pipe.
    fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    }
    let out = drain(child.stdout.take().expect("piped"));
    let err = drain(child.stderr.take().expect("piped"));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the child") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let e = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
            panic!("{what} did not finish within {limit:?} (killed); its stderr:\n{e}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// [`output_within`], and panics unless the child exited successfully **and** no thread of
/// it panicked (a Rust panic message on its stderr: a server or device thread that died while
/// the process still exited 0 is a failure).
pub fn success_within(cmd: Command, limit: Duration, what: &str) -> Output {
    let out = output_within(cmd, limit, what);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("panicked at"),
        "a thread of {what} panicked:\n{stderr}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_is_the_ancestor_with_cachedir_tag() {
        let dir = std::env::temp_dir().join(format!("test-skip-{}", std::process::id()));
        let deps = dir.join("debug").join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(
            dir.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55",
        )
        .unwrap();
        let exe = deps.join("t-123");
        assert_eq!(target_dir_of(&exe), Some(dir.as_path()));
        assert_eq!(target_dir_of(Path::new("/nonexistent/x/y")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
