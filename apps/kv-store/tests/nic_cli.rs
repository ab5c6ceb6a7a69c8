//! `kv server --datapath mlx5 | ice` on a machine without those NICs: a clear error and a
//! failing exit, never a hang or a panic.

use std::process::Command;

fn server(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(["server", "--serialization", "cornflakes", "--seconds", "1"])
        .args(args)
        .output()
        .expect("run kv");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mlx5_without_a_device_fails_clearly() {
    let (ok, err) = server(&["--datapath", "mlx5", "--mlx5-dev", "mlx5_99"]);
    assert!(!ok, "no ConnectX here, the server cannot start: {err}");
    if cfg!(feature = "mlx5") {
        assert!(err.contains("opening ConnectX device \"mlx5_99\""), "{err}");
    } else {
        assert!(err.contains("needs the `mlx5` feature"), "{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn ice_without_the_feature_or_a_port_fails_clearly() {
    let (ok, err) = server(&[
        "--datapath",
        "ice",
        "--dpdk-args",
        "-l 0 --no-huge -a 0000:ff:1f.7",
    ]);
    assert!(!ok, "no such port: {err}");
    if cfg!(feature = "ice") {
        assert!(err.contains("starting DPDK"), "{err}");
    } else {
        assert!(err.contains("needs the `ice` feature"), "{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn nic_datapaths_name_their_missing_arguments() {
    let (ok, err) = server(&["--datapath", "mlx5"]);
    assert!(!ok && err.contains("--mlx5-dev"), "{err}");
    let (ok, err) = server(&["--datapath", "ice"]);
    assert!(!ok && err.contains("--dpdk-args"), "{err}");
    let (ok, err) = server(&["--datapath", "nope"]);
    assert!(!ok && err.contains("socket, xdp, mlx5 or ice"), "{err}");
}
