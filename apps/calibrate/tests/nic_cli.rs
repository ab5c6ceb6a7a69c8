//! `calibrate server` hands `--datapath` to the shared launcher: its errors reach the command
//! line with calibrate's own build hint, as a failing exit, never a hang or a panic. (The
//! launcher's errors themselves are tested in crates/app-server/tests/launch.rs.)

use std::process::Command;

#[test]
fn the_launchers_errors_reach_the_calibration_server() {
    let mlx5_hint = if cfg!(feature = "mlx5") {
        "opening ConnectX device \"mlx5_99\""
    } else {
        "cargo run --release -p calibrate --features mlx5 -- server"
    };
    let cases: [(&str, &[&str], &str); 3] = [
        ("ice", &[], "--dpdk-args"),
        ("nope", &[], "socket, tcp, xdp, mlx5 or ice"),
        (
            "mlx5",
            &["--mlx5-dev", "mlx5_99", "--seconds", "1"],
            mlx5_hint,
        ),
    ];
    for (datapath, extra, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_calibrate"))
            .args(["server", "--array-bytes", "65536", "--datapath", datapath])
            .args(extra)
            .output()
            .expect("run calibrate");
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = !out.status.success() && err.contains(want) && !err.contains("panicked");
        assert!(
            ok,
            "--datapath {datapath} {extra:?}: wanted {want:?} and a failure: {err}"
        );
    }
}
