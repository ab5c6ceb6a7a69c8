//! `echo server --datapath mlx5 | ice` on a machine without those NICs: a clear error and a
//! failing exit, never a hang or a panic. (With a NIC the datapath crates' own hardware tests,
//! gated on CORNFLAKES_MLX5_DEV / real DPDK ports, cover the data path.)

use std::process::Command;

fn server(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["server", "--mode", "cornflakes", "--seconds", "1"])
        .args(args)
        .output()
        .expect("run echo");
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
fn nic_datapaths_name_their_missing_arguments() {
    let (ok, err) = server(&["--datapath", "mlx5"]);
    assert!(!ok && err.contains("--mlx5-dev"), "{err}");
    let (ok, err) = server(&["--datapath", "ice"]);
    assert!(!ok && err.contains("--dpdk-args"), "{err}");
    let (ok, err) = server(&["--datapath", "nope"]);
    assert!(!ok && err.contains("socket, xdp, mlx5 or ice"), "{err}");
}

#[test]
fn ice_without_the_feature_or_a_port_fails_clearly() {
    // An EAL argument list naming a PCI device that does not exist: DPDK finds no port.
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
fn several_nic_cores_without_the_nic_fail_clearly() {
    // `--cores 2` goes through the per-core opening (mlx5: `open_server_core` on each core's
    // thread; ice: `open_cores` then `CorePort::open_core`): the same clear errors, naming the
    // core where one fails.
    let (ok, err) = server(&[
        "--datapath",
        "mlx5",
        "--mlx5-dev",
        "mlx5_99",
        "--cores",
        "2",
    ]);
    assert!(!ok, "no ConnectX here: {err}");
    if cfg!(feature = "mlx5") {
        assert!(err.contains("opening ConnectX device \"mlx5_99\""), "{err}");
        assert!(err.contains("server core "), "names the core: {err}");
    } else {
        assert!(err.contains("needs the `mlx5` feature"), "{err}");
    }
    let (ok, err) = server(&[
        "--datapath",
        "ice",
        "--dpdk-args",
        "-l 0 --no-huge -a 0000:ff:1f.7",
        "--cores",
        "2",
    ]);
    assert!(!ok, "no such port: {err}");
    if cfg!(feature = "ice") {
        assert!(
            err.contains("starting DPDK") && err.contains("2 cores"),
            "{err}"
        );
    } else {
        assert!(err.contains("needs the `ice` feature"), "{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn two_mlx5_cores_on_hardware() {
    // On a ConnectX (CORNFLAKES_MLX5_DEV, and CORNFLAKES_MLX5_IP for the address to answer
    // on): two cores open their own queue sets and flow rules on one port and serve.
    let (Ok(dev), Ok(ip)) = (
        std::env::var("CORNFLAKES_MLX5_DEV"),
        std::env::var("CORNFLAKES_MLX5_IP"),
    ) else {
        test_skip::skip(
            "two_mlx5_cores_on_hardware",
            "set CORNFLAKES_MLX5_DEV=<mlx5_0 | PCI address> and CORNFLAKES_MLX5_IP=<the port's \
             IPv4 address> (and build with --features mlx5)",
        );
        return;
    };
    if !cfg!(feature = "mlx5") {
        test_skip::skip(
            "two_mlx5_cores_on_hardware",
            "built without the `mlx5` feature",
        );
        return;
    }
    let bind = format!("{ip}:7300");
    let (ok, err) = server(&[
        "--datapath",
        "mlx5",
        "--mlx5-dev",
        &dev,
        "--bind",
        &bind,
        "--cores",
        "2",
    ]);
    assert!(ok, "{err}");
    for i in 0..2 {
        assert!(err.contains(&format!("core {i} of 2")), "{err}");
    }
}
