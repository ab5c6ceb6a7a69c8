//! `echo server` says which hybrid threshold it uses and where it came from (the built-in
//! default, `CORNFLAKES_THRESHOLD`, a calibration file from `calibrate run`, or
//! `--threshold`).

use std::process::Command;

fn echo(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run echo");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_server_says_which_threshold_it_uses_and_where_it_came_from() {
    let dir = std::env::temp_dir().join(format!("echo-calib-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("calibration.json");
    std::fs::write(&file, "{\"recommended_threshold\": 1024}").unwrap();
    let file = file.to_str().unwrap();
    let serve = [
        "server",
        "--mode",
        "cornflakes",
        "--bind",
        "127.0.0.1:0",
        "--seconds",
        "0.1",
    ];
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "512 B (built-in default"),
        (
            &[("CORNFLAKES_THRESHOLD", "256")],
            "256 B (from CORNFLAKES_THRESHOLD)",
        ),
        (
            &[("CORNFLAKES_CALIBRATION", file)],
            "1024 B (from calibration file",
        ),
        (
            &[("CORNFLAKES_THRESHOLD", "lots")],
            "512 B (built-in default: CORNFLAKES_THRESHOLD ignored",
        ),
    ];
    for (env, want) in cases {
        let mut args = serve.to_vec();
        let (ok, err) = echo(&args, env);
        assert!(ok, "{err}");
        assert!(
            err.contains(&format!("hybrid threshold: {want}")),
            "{env:?}: {err}"
        );
        args.extend(["--threshold", "64"]);
        let (_, err) = echo(&args, env);
        assert!(
            err.contains("hybrid threshold: 64 B (from --threshold)"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
