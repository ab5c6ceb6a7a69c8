//! What runs without a NIC: the choice, the errors of a build without a NIC's feature, the
//! argument checks, and the per-core ready/sum path on plain threads.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use datapath_open::DatapathKind;

const ECHO: CargoRun = CargoRun {
    package: "echo",
    bin: None,
    args: "server ...",
};

const KV: CargoRun = CargoRun {
    package: "kv-store",
    bin: Some("kv"),
    args: "server ...",
};

fn nic(kind: DatapathKind, device: &str) -> DatapathSpec {
    DatapathSpec {
        device: device.to_owned(),
        ..DatapathSpec::new(kind)
    }
}

fn mlx5() -> DatapathSpec {
    nic(DatapathKind::Mlx5, "mlx5_0")
}

fn ice() -> DatapathSpec {
    nic(DatapathKind::Ice, "-l 2 -a 0000:3b:00.0")
}

fn bind() -> SocketAddrV4 {
    "10.0.0.1:54321".parse().unwrap()
}

/// Where the one-core tests open, at IP MTU 1500 (the app's hint is the app's own).
fn open() -> Open {
    let mut at = Open::server(bind(), KV);
    at.socket.mtu = 1500;
    at
}

/// Counters of a test server: how many times it was built.
#[derive(Debug, Default, PartialEq)]
struct Count(u64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "count={}", self.0)
    }
}

impl CoreStats for Count {
    fn sum(per_core: &[Count]) -> Count {
        Count(per_core.iter().map(|c| c.0).sum())
    }
}

/// An app that must never be reached in these tests (no NIC is opened).
struct Unreached;

impl NicApp for Unreached {
    type Stats = Count;
    fn cargo_run(&self) -> CargoRun {
        ECHO
    }

    fn serve<D: Datapath>(
        self,
        _dp: D,
        _nic: &DatapathSpec,
        _bind: SocketAddrV4,
        _stop: &AtomicBool,
        _report: Option<Duration>,
    ) -> Result<Count, String> {
        Err("a NIC was opened in a test without one".to_owned())
    }
}

impl NicCoreApp for Unreached {
    type Stats = Count;
    fn cargo_run(&self) -> CargoRun {
        KV
    }

    fn label(&self) -> String {
        "unreached".to_owned()
    }

    fn serve_core<D: Datapath>(
        &self,
        _dp: D,
        _core: &percore::Core,
        _ready: percore::Ready<QueueInfo>,
        _info: QueueInfo,
        _report: Option<Duration>,
    ) -> Result<Count, String> {
        Err("a NIC queue was opened in a test without one".to_owned())
    }
}

#[test]
fn the_spec_names_its_feature_and_device() {
    assert_eq!(mlx5().name(), "mlx5");
    assert_eq!(ice().name(), "ice");
    assert_eq!(mlx5().label(), "ConnectX mlx5_0");
    assert_eq!(ice().label(), "DPDK -l 2 -a 0000:3b:00.0");
}

#[test]
fn the_cargo_hint_is_each_apps_own() {
    assert_eq!(
        ECHO.command("mlx5"),
        "cargo run --release -p echo --features mlx5 -- server ..."
    );
    assert_eq!(
        KV.command("ice"),
        "cargo run --release -p kv-store --features ice --bin kv -- server ..."
    );
}

#[test]
fn the_missing_feature_errors_read_as_the_apps_always_did() {
    assert_eq!(
        needs_feature(mlx5().kind, &ECHO),
        "--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y \
         $(cat crates/datapath-mlx5/APT_PACKAGES)): cargo run --release -p echo --features mlx5 -- \
         server ..."
    );
    assert_eq!(
        needs_feature(ice().kind, &ECHO),
        "--datapath ice needs the `ice` feature (DPDK: apt-get install -y \
         $(cat crates/datapath-ice/APT_PACKAGES)): cargo run --release -p echo --features ice -- \
         server ..."
    );
    assert_eq!(
        needs_feature(mlx5().kind, &KV),
        "--datapath mlx5 needs the `mlx5` feature (rdma-core: apt-get install -y \
         $(cat crates/datapath-mlx5/APT_PACKAGES)): cargo run --release -p kv-store --features mlx5 \
         --bin kv -- server ..."
    );
    assert_eq!(
        needs_feature(ice().kind, &KV),
        "--datapath ice needs the `ice` feature (DPDK: apt-get install -y \
         $(cat crates/datapath-ice/APT_PACKAGES)): cargo run --release -p kv-store --features ice \
         --bin kv -- server ..."
    );
}

/// Without `feature`, choosing `nic` fails with [`needs_feature`] on one core and on two, and
/// nothing is opened; with it, the check would open a NIC, so it says it was skipped.
fn without_feature(nic: DatapathSpec, built_with: bool) {
    if built_with {
        test_skip::skip(
            &format!("without_feature({})", nic.name()),
            &format!(
                "built with the `{}` feature, so choosing it would open a NIC",
                nic.name()
            ),
        );
        return;
    }
    let stop = AtomicBool::new(true);
    let one = serve(&nic, &open(), Unreached, &stop, None).unwrap_err();
    assert_eq!(one, needs_feature(nic.kind, &ECHO));
    let cc = percore::CoresConfig::new("t", 2);
    let two = serve_cores(&nic, bind(), 1500, &cc, Unreached, &stop, None).unwrap_err();
    assert_eq!(two, needs_feature(nic.kind, &KV));
}

#[test]
fn mlx5_without_its_feature_says_how_to_build_it() {
    without_feature(mlx5(), cfg!(feature = "mlx5"));
}

#[test]
fn ice_without_its_feature_says_how_to_build_it() {
    without_feature(ice(), cfg!(feature = "ice"));
}

/// With `mlx5` built in and no such device, one core and two fail cleanly, naming it, and the
/// app's server never runs (rdma-core finds no device of that name; no ConnectX needed).
#[cfg(feature = "mlx5")]
#[test]
fn a_missing_connectx_is_an_error_naming_it() {
    let nic = nic(DatapathKind::Mlx5, "no-such-mlx5-device");
    let stop = AtomicBool::new(true);
    let one = serve(&nic, &open(), Unreached, &stop, None).unwrap_err();
    assert!(one.contains("no-such-mlx5-device"), "{one}");
    let n = percore::allowed_cores().unwrap().len().min(2);
    let cc = percore::CoresConfig::new("app-server-mlx5-test", n);
    let many = serve_cores(&nic, bind(), 1500, &cc, Unreached, &stop, None).unwrap_err();
    assert!(many.contains("no-such-mlx5-device"), "{many}");
    assert!(!many.contains("opened in a test"), "{many}");
}

#[test]
fn zero_cores_is_refused_before_any_nic_is_opened() {
    let stop = AtomicBool::new(true);
    let cc = percore::CoresConfig::new("t", 0);
    for nic in [mlx5(), ice()] {
        let e = serve_cores(&nic, bind(), 1500, &cc, Unreached, &stop, None).unwrap_err();
        assert_eq!(e, "--cores 0: a server needs at least one core");
    }
}

#[test]
fn serve_until_sums_the_cores_counters() {
    let mut cc = percore::CoresConfig::new("app-server-nic-test", 2);
    cc.pin = false;
    let running = percore::Cores::spawn(&cc, |core, ready| {
        let i = core.index();
        let addr = percore::core_addr(bind(), i)?;
        ready.ready((addr, format!("test queue {i}")));
        while !core.stop().load(Ordering::Relaxed) {
            std::thread::yield_now();
        }
        Ok(Count(10 + i as u64))
    })
    .unwrap();
    let stop = AtomicBool::new(true);
    let sum = crate::ready::serve_until(running, &"test", &stop, Clone::clone).unwrap();
    assert_eq!(sum, Count(21));
}
