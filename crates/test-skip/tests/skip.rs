//! A skip is listed and visible; under `CORNFLAKES_REQUIRE_ALL=1` (or the test's own variable)
//! it fails. Each case runs this test binary again as a child process with the environment
//! it needs, so the variables never leak into other tests.

use std::process::Command;

const CHILD: &str = "TEST_SKIP_CHILD";

/// The child's body: one skip, named by `TEST_SKIP_CHILD`.
#[test]
fn child() {
    let Ok(which) = std::env::var(CHILD) else {
        return;
    };
    match which.as_str() {
        "plain" => test_skip::skip("child_plain", "a test of the skip helper"),
        "narrow" => test_skip::skip_unless(
            "child_narrow",
            "a test of the skip helper",
            Some("TEST_SKIP_NARROW"),
        ),
        other => panic!("unknown child case {other}"),
    }
}

fn run_child(case: &str, env: &[(&str, &str)], log: &std::path::Path) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--test-threads=1"])
        .env(CHILD, case)
        .env(test_skip::SKIP_LOG, log)
        .env_remove(test_skip::REQUIRE_ALL)
        .env_remove("TEST_SKIP_NARROW");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn log(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("test-skip-{}-{name}.txt", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn a_skip_passes_and_is_printed_and_listed() {
    let path = log("plain");
    let out = run_child("plain", &[], &path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a plain skip must pass: {err}");
    assert!(
        err.contains("SKIPPED child_plain: a test of the skip helper"),
        "the skip must reach stderr past the capture: {err}"
    );
    let listed = std::fs::read_to_string(&path).unwrap();
    assert_eq!(listed, "SKIPPED child_plain: a test of the skip helper\n");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_skip_under_require_all_fails() {
    let path = log("required");
    let out = run_child("plain", &[(test_skip::REQUIRE_ALL, "1")], &path);
    let all =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a skip under CORNFLAKES_REQUIRE_ALL=1 must fail: {all}"
    );
    assert!(
        all.contains(
            "child_plain: cannot run (a test of the skip helper) but CORNFLAKES_REQUIRE_ALL=1"
        ),
        "{all}"
    );
    assert!(!path.exists(), "a failed test is not listed as skipped");
}

#[test]
fn a_tests_own_require_variable_fails_it_and_only_it() {
    let path = log("narrow");
    let out = run_child("narrow", &[("TEST_SKIP_NARROW", "1")], &path);
    assert!(!out.status.success());
    let out = run_child("plain", &[("TEST_SKIP_NARROW", "1")], &path);
    assert!(
        out.status.success(),
        "another test's variable does not fail this one"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_child_past_its_limit_is_killed_and_fails() {
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        test_skip::output_within(cmd, std::time::Duration::from_millis(200), "sleep 30")
    }));
    let e = r.expect_err("a hang must fail");
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("sleep 30 did not finish within"), "{msg}");
}

#[test]
fn a_panicking_thread_fails_a_successful_exit() {
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "echo \"thread 'x' panicked at src/a.rs:1:1\" >&2; exit 0",
    ]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        test_skip::success_within(cmd, std::time::Duration::from_secs(10), "sh")
    }));
    assert!(r.is_err(), "a panic message on stderr must fail the test");
    let mut ok = Command::new("sh");
    ok.args(["-c", "echo fine; exit 0"]);
    let out = test_skip::success_within(ok, std::time::Duration::from_secs(10), "sh");
    assert_eq!(out.stdout, b"fine\n");
    let mut bad = Command::new("sh");
    bad.args(["-c", "exit 3"]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        test_skip::success_within(bad, std::time::Duration::from_secs(10), "sh")
    }));
    assert!(r.is_err(), "a non-zero exit must fail");
}

/// The `test-skip` program shell scripts call follows the same rule: listed and exit 0, or
/// exit 1 and nothing listed under `CORNFLAKES_REQUIRE_ALL=1` or its `--require` variable.
#[test]
fn the_program_for_scripts_lists_a_skip_or_fails_by_the_same_rule() {
    let run = |args: &[&str], env: &[(&str, &str)], path: &std::path::Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_test-skip"));
        cmd.args(args)
            .env(test_skip::SKIP_LOG, path)
            .env_remove(test_skip::REQUIRE_ALL)
            .env_remove("TEST_SKIP_NARROW");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let path = log("program");
    let out = run(&["fuzz targets", "no", "nightly"], &[], &path);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "SKIPPED fuzz targets: no nightly\n"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "SKIPPED fuzz targets: no nightly\n"
    );
    std::fs::remove_file(&path).unwrap();

    let out = run(
        &["fuzz targets", "no nightly"],
        &[(test_skip::REQUIRE_ALL, "1")],
        &path,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "fuzz targets: cannot run (no nightly) but CORNFLAKES_REQUIRE_ALL=1\n"
    );
    assert!(!path.exists(), "a failed skip is not listed");

    let narrow = ["--require", "TEST_SKIP_NARROW", "xdp step", "not root"];
    assert_eq!(
        run(&narrow, &[("TEST_SKIP_NARROW", "1")], &path)
            .status
            .code(),
        Some(1)
    );
    assert!(run(&narrow, &[], &path).status.success());
    let _ = std::fs::remove_file(&path);

    for bad in [&[][..], &["only-a-name"][..], &["--require", "V", "t"][..]] {
        assert_eq!(run(bad, &[], &path).status.code(), Some(2), "{bad:?}");
    }
    assert!(!path.exists(), "a usage error lists nothing");
}
