//! `redis-cf-bench`'s command line as a user meets it: an unknown flag is refused with the
//! usage before anything is started (no Redis needed), and `--help` prints the usage.

use std::process::Command;

#[test]
fn an_unknown_flag_is_refused_with_the_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_redis-cf-bench"))
        .args(["--rates", "100", "--bogus", "1"])
        .output()
        .expect("run redis-cf-bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.starts_with("redis-cf-bench: unexpected argument \"--bogus\"")
            && err.contains("usage: redis-cf-bench"),
        "{err}"
    );
}

#[test]
fn help_prints_the_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_redis-cf-bench"))
        .arg("--help")
        .output()
        .expect("run redis-cf-bench --help");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: redis-cf-bench"));
}
