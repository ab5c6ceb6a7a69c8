//! The parsing of `--datapath` and its flags.

use super::*;
use DatapathKind::{Emu, Ice, Mlx5, Socket, Tcp, Xdp};

fn server(line: &str) -> Result<DatapathSpec, String> {
    let mut a = Args::from_line(line);
    let spec = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
    a.finish()?;
    Ok(spec)
}

#[test]
fn a_server_reads_the_datapath_its_device_and_the_mtu() {
    assert_eq!(server(""), Ok(DatapathSpec::new(Socket)));
    let xdp = server("--datapath xdp --ifname veth0 --peer 10.0.0.2=02:00:00:00:00:02 --mtu 1500")
        .unwrap();
    assert_eq!(
        (xdp.kind, xdp.device.as_str(), xdp.mtu),
        (Xdp, "veth0", Some(1500))
    );
    assert_eq!(xdp.peer, Some(([10, 0, 0, 2].into(), [2, 0, 0, 0, 0, 2])));
    assert_eq!(xdp.label(), "AF_XDP on veth0");
    let mlx5 = server("--datapath mlx5 --mlx5-dev mlx5_0").unwrap();
    assert_eq!(
        (mlx5.kind, mlx5.label()),
        (Mlx5, "ConnectX mlx5_0".to_owned())
    );
    let mut a = Args::new(vec![
        "--datapath".into(),
        "ice".into(),
        "--dpdk-args".into(),
        "-l 2 -a 0000:3b:00.0".into(),
    ]);
    let ice = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS).unwrap();
    assert_eq!(ice.label(), "DPDK -l 2 -a 0000:3b:00.0");
    assert_eq!(ice.name(), "ice");
}

#[test]
fn a_missing_device_or_a_bad_peer_is_an_error_naming_the_flag() {
    assert_eq!(
        server("--datapath xdp").unwrap_err(),
        "--datapath xdp needs --ifname IF"
    );
    assert_eq!(
        server("--datapath mlx5").unwrap_err(),
        "--datapath mlx5 needs --mlx5-dev <mlx5_N | PCI address>"
    );
    assert_eq!(
        server("--datapath ice").unwrap_err(),
        "--datapath ice needs --dpdk-args \"<EAL arguments>\""
    );
    assert!(server("--datapath xdp --ifname v --peer 10.0.0.2")
        .unwrap_err()
        .contains("IP=MAC"));
    assert!(server("--mtu big")
        .unwrap_err()
        .starts_with("--mtu \"big\""));
}

#[test]
fn each_command_takes_only_its_kinds_and_their_flags() {
    // The emulated device is a bench's, not a server's.
    assert_eq!(
        server("--datapath emu").unwrap_err(),
        "unknown datapath \"emu\" (socket, tcp, xdp, mlx5 or ice)"
    );
    let bench = [Emu, Socket, Tcp, Xdp];
    let choose = |line: &str| {
        let mut a = Args::from_line(line);
        let spec = DatapathSpec::choose(&mut a, &bench, || Emu, |n| format!("not {n}"))?;
        a.finish()?;
        Ok::<_, String>(spec)
    };
    assert_eq!(choose("").unwrap().kind, Emu);
    assert_eq!(choose("--datapath mlx5").unwrap_err(), "not mlx5");
    assert_eq!(choose("--datapath dpdk").unwrap_err(), "not dpdk");
    // A bench's AF_XDP is its own veth: no --ifname to take, so it is left over.
    assert_eq!(
        choose("--datapath xdp --ifname v").unwrap_err(),
        "unexpected argument \"--ifname\""
    );
    // --mtu is the command's (its load flags) when it chooses.
    assert_eq!(
        choose("--mtu 1500").unwrap_err(),
        "unexpected argument \"--mtu\""
    );
    // Kernel TCP's flags go with tcp only, and with a command that takes tcp.
    let tcp = choose("--datapath tcp --tcp-zc io-uring --tcp-zc-threshold 2048").unwrap();
    assert_eq!(
        tcp.tcp.zero_copy,
        datapath_tcp::ZeroCopy {
            mode: ZeroCopyMode::IoUring,
            threshold: 2048
        }
    );
    assert_eq!(
        choose("--datapath socket --tcp-zc off").unwrap_err(),
        "--tcp-zc and --tcp-zc-threshold go with --datapath tcp"
    );
    let mut a = Args::from_line("--tcp-zc off");
    DatapathSpec::choose(&mut a, &[Socket], || Socket, str::to_owned).unwrap();
    assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--tcp-zc\"");
}

#[test]
fn tcp_settings_refuse_a_threshold_without_zero_copy() {
    assert_eq!(
        server("--datapath tcp --tcp-zc off --tcp-zc-threshold 1").unwrap_err(),
        "--tcp-zc-threshold goes with a zero-copy mode, not --tcp-zc off"
    );
    let spec = server("--datapath tcp --tcp-zc-threshold 100").unwrap();
    assert_eq!(spec.tcp.zero_copy.threshold, 100);
    assert_eq!(spec.tcp.zero_copy.mode, ZeroCopyMode::MsgZerocopy);
    assert_eq!(
        TcpSpec {
            zero_copy: ZeroCopy::OFF
        }
        .to_string(),
        "zero-copy off"
    );
}

#[test]
fn a_build_without_a_feature_says_how_to_build_it() {
    let run = CargoRun {
        package: "kv-store",
        bin: Some("kv"),
        args: "server ...",
    };
    assert_eq!(
        needs_feature(Mlx5, &run),
        "--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y $(cat \
         crates/datapath-mlx5/APT_PACKAGES)): cargo run --release -p kv-store --features mlx5 \
         --bin kv -- server ..."
    );
    assert!(needs_feature(Xdp, &run).contains("clang and libbpf-dev"));
    assert!(needs_feature(Ice, &run).contains("crates/datapath-ice/APT_PACKAGES"));
    assert_eq!(build_needs(Socket), None);
}
