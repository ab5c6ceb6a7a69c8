//! `echo server` hands `--datapath` to the shared launcher: its
//! errors reach the command line with echo's own build hint, as a failing exit, never a hang
//! or a panic. (The launcher's NIC errors on one core and N are tested in
//! crates/app-server/tests/launch.rs; with a NIC the datapath crates' hardware tests cover the
//! data path.)

use std::process::Command;

#[test]
fn the_launchers_errors_reach_the_server_command() {
    let mlx5 = [
        "--datapath",
        "mlx5",
        "--mlx5-dev",
        "mlx5_99",
        "--seconds",
        "1",
    ];
    for cmd in [&["server", "--mode", "cornflakes"][..]] {
        for (extra, want) in [
            (&["--datapath", "ice"][..], "--dpdk-args"),
            (&["--datapath", "nope"][..], "socket, tcp, xdp, mlx5 or ice"),
            (
                &mlx5[..],
                if cfg!(feature = "mlx5") {
                    "opening ConnectX device \"mlx5_99\""
                } else {
                    "cargo run --release -p echo --features mlx5 -- server"
                },
            ),
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_echo"))
                .args(cmd)
                .args(extra)
                .output()
                .expect("run echo");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{cmd:?} {extra:?}: {err}");
            assert!(err.contains(want), "{cmd:?} {extra:?}: {err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    }
}
