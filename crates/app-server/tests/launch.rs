//! The launcher on a machine without the kernel-bypass NICs: `--datapath mlx5 | ice` (and
//! `xdp` in a build without it) fail with a clear error on one core and on N, never a hang or a
//! panic, and the handler is never built; a missing or unknown argument is named. (With a NIC,
//! the datapath crates' own hardware tests cover the data path; two ConnectX cores are checked
//! here when CORNFLAKES_MLX5_DEV / CORNFLAKES_MLX5_IP name one.) Moved here from the echo and
//! KV apps' `nic_cli` tests, which were the same checks twice.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use app_server::{launch, CargoRun, DatapathKind, DatapathSpec, Handler, Launch, Unanswered};
use cli_args::Args;
use cornflakes::{Datapath, RxMsg};
use datapath_socket::SocketConfig;

const RUN: CargoRun = CargoRun {
    package: "my-app",
    bin: None,
    args: "server ...",
};

/// Echoes every request back.
struct Echo;

impl Handler for Echo {
    type Counters = ();

    fn label(&self) -> String {
        "echo".to_owned()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        Ok(dp.send_copy(m.conn, m.msg, &m.data)?)
    }

    fn counters(&self) {}
}

fn transport(args: &[&str]) -> Result<DatapathSpec, String> {
    let mut a = Args::new(args.iter().map(|s| s.to_string()).collect());
    let t = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
    a.finish()?;
    Ok(t)
}

/// Launches an echo handler on `args`' datapath with `cores` cores, stopping at once.
fn run(args: &[&str], cores: usize, bind: SocketAddrV4) -> Result<(), String> {
    let mut l = Launch::new(transport(args)?, SocketConfig::new(bind), "echo", RUN);
    l.cores = cores;
    l.report = None;
    let stop = AtomicBool::new(false);
    // On threads of its own: DPDK's EAL pins the thread that starts it, which must not narrow
    // the next case's CPUs.
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        s.spawn(|| launch(&l, |_, _| Ok(Echo), &stop).map(|_| ()))
            .join()
            .expect("the launcher does not panic")
    })
}

fn bind() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
}

#[test]
fn missing_and_unknown_arguments_are_named() {
    assert!(transport(&["--datapath", "mlx5"])
        .unwrap_err()
        .contains("--mlx5-dev"));
    assert!(transport(&["--datapath", "ice"])
        .unwrap_err()
        .contains("--dpdk-args"));
    assert!(transport(&["--datapath", "xdp"])
        .unwrap_err()
        .contains("--ifname"));
    let e = transport(&["--datapath", "nope"]).unwrap_err();
    assert!(e.contains("socket, tcp, xdp, mlx5 or ice"), "{e}");
    assert_eq!(
        transport(&[]).unwrap(),
        DatapathSpec::new(DatapathKind::Socket)
    );
    // A server is never the bench's emulated device, and says so before opening anything.
    let e = run(&["--datapath", "emu"], 1, bind()).unwrap_err();
    assert!(e.contains("socket, tcp, xdp, mlx5 or ice"), "{e}");
    let e = launch(
        &Launch::new(
            DatapathSpec::new(DatapathKind::Emu),
            SocketConfig::new(bind()),
            "echo",
            RUN,
        ),
        |_, _| Ok(Echo),
        &AtomicBool::new(true),
    )
    .unwrap_err();
    assert!(e.contains("a bench's own device"), "{e}");
    assert_eq!(
        transport(&["--datapath", "ice", "--dpdk-args", "-l 0"])
            .unwrap()
            .name(),
        "ice"
    );
    let e = run(&[], 0, bind()).unwrap_err();
    assert!(e.contains("--cores 0"), "{e}");
}

#[test]
fn kernel_tcp_zero_copy_is_chosen_by_flags_that_go_with_tcp_only() {
    use app_server::TcpSpec;
    use datapath_tcp::{ZeroCopy, ZeroCopyMode};
    let tcp = |args: &[&str]| match transport(args) {
        Ok(spec) if spec.kind == DatapathKind::Tcp => Ok(spec.tcp.zero_copy),
        Ok(other) => Err(format!("not tcp: {other:?}")),
        Err(e) => Err(e),
    };
    assert_eq!(tcp(&["--datapath", "tcp"]), Ok(ZeroCopy::default()));
    assert_eq!(
        tcp(&["--datapath", "tcp", "--tcp-zc-threshold", "2048"]),
        Ok(ZeroCopy {
            mode: ZeroCopyMode::MsgZerocopy,
            threshold: 2048
        })
    );
    assert_eq!(
        tcp(&["--tcp-zc", "io-uring", "--datapath", "tcp"]),
        Ok(ZeroCopy {
            mode: ZeroCopyMode::IoUring,
            threshold: 16384
        })
    );
    assert_eq!(
        tcp(&["--datapath", "tcp", "--tcp-zc", "off"]),
        Ok(ZeroCopy::OFF)
    );
    let e = tcp(&["--datapath", "tcp", "--tcp-zc", "sendfile"]).unwrap_err();
    assert!(e.contains("msg-zerocopy, io-uring or off"), "{e}");
    let e = tcp(&[
        "--datapath",
        "tcp",
        "--tcp-zc",
        "off",
        "--tcp-zc-threshold",
        "1",
    ]);
    assert!(e.unwrap_err().contains("--tcp-zc off"));
    let e = transport(&["--tcp-zc-threshold", "4096"]).unwrap_err();
    assert_eq!(e, "--tcp-zc and --tcp-zc-threshold go with --datapath tcp");
    assert!(transport(&["--datapath", "xdp", "--ifname", "x", "--tcp-zc", "off"]).is_err());
    // What the ready line says, and what the datapath is given.
    let spec = TcpSpec {
        zero_copy: ZeroCopy {
            mode: ZeroCopyMode::IoUring,
            threshold: 2048,
        },
    };
    assert_eq!(
        spec.to_string(),
        "zero-copy io-uring for fields of 2048 B and more"
    );
    assert_eq!(spec.config(None).zero_copy, spec.zero_copy);
    assert_eq!(
        TcpSpec::default().to_string(),
        "zero-copy msg-zerocopy for fields of 16384 B and more"
    );
}

#[test]
fn the_socket_datapath_serves_on_one_core_and_two() {
    for cores in [1, 2] {
        if cores > percore::allowed_cores().unwrap().len() {
            test_skip::skip(
                "the_socket_datapath_serves_on_one_core_and_two",
                &format!("{cores} cores: too few CPUs"),
            );
            continue;
        }
        run(&["--datapath", "socket"], cores, bind()).unwrap();
    }
}

#[test]
fn mlx5_without_a_device_fails_clearly_on_one_core_and_two() {
    for cores in [1, 2] {
        let err = run(
            &["--datapath", "mlx5", "--mlx5-dev", "mlx5_99"],
            cores,
            bind(),
        )
        .unwrap_err();
        if cfg!(feature = "mlx5") {
            assert!(err.contains("opening ConnectX device \"mlx5_99\""), "{err}");
            if cores > 1 {
                assert!(err.contains("server core "), "names the core: {err}");
            }
        } else {
            assert!(err.contains("needs the `mlx5` feature"), "{err}");
            assert!(
                err.contains("cargo run --release -p my-app --features mlx5"),
                "{err}"
            );
        }
    }
}

#[test]
fn ice_without_the_feature_or_a_port_fails_clearly_on_one_core_and_two() {
    // An EAL argument list naming a PCI device that does not exist: DPDK finds no port.
    let args = [
        "--datapath",
        "ice",
        "--dpdk-args",
        "-l 0 --no-huge -a 0000:ff:1f.7",
    ];
    for cores in [1, 2] {
        let err = run(&args, cores, bind()).unwrap_err();
        if cfg!(feature = "ice") {
            assert!(err.contains("starting DPDK"), "{err}");
            if cores > 1 {
                assert!(err.contains("2 cores"), "{err}");
            }
        } else {
            assert!(err.contains("needs the `ice` feature"), "{err}");
        }
    }
}

#[test]
fn xdp_without_the_feature_says_how_to_build_it() {
    if cfg!(feature = "xdp") {
        test_skip::skip(
            "xdp_without_the_feature_says_how_to_build_it",
            "built with `xdp` (the apps' xdp tests open it)",
        );
        return;
    }
    let err = run(&["--datapath", "xdp", "--ifname", "lo"], 1, bind()).unwrap_err();
    assert!(err.contains("needs the `xdp` feature"), "{err}");
    assert!(
        err.contains("cargo run --release -p my-app --features xdp"),
        "{err}"
    );
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
            "set CORNFLAKES_MLX5_DEV=<mlx5_0 | PCI address> \
             and CORNFLAKES_MLX5_IP=<the port's IPv4 address> (and build with --features mlx5)",
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
    let ip: Ipv4Addr = ip.parse().expect("CORNFLAKES_MLX5_IP is an IPv4 address");
    run(
        &["--datapath", "mlx5", "--mlx5-dev", &dev],
        2,
        SocketAddrV4::new(ip, 7300),
    )
    .unwrap();
}
