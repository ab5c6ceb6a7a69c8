//! What an echo benchmark is asked to do ([`BenchConfig`]) and what it produced
//! ([`BenchOutcome`]): shared by the socket sweep ([`crate::bench`]), the emulated NIC
//! ([`crate::emu`]) and AF_XDP, so none of them imports another for its types.

use std::path::PathBuf;

use loadgen::args::LoadConfig;
use loadgen::Record;

use crate::mode::Mode;
use crate::server::ServerStats;
use crate::shape::ShapeSpec;

/// Default offered loads (requests per second), lowest first; the lowest is also the fixed
/// load the latency columns report.
pub const DEFAULT_RATES: [f64; 12] = [
    10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0, 60_000.0, 70_000.0, 80_000.0, 100_000.0,
    120_000.0, 150_000.0, 200_000.0,
];

/// IP MTU of the datapaths unless `--mtu` says otherwise: a jumbo frame, as in the paper
/// (§6.1), so a 2 × 2048 B message is one datagram; the C API's socket default too.
pub use datapath_socket::JUMBO_MTU as DEFAULT_MTU;

/// Which datapath the server uses: `Socket`, kernel UDP sockets on 127.0.0.1 (server and
/// clients in this process; with [`BenchConfig::tcp_conns`], kernel TCP); `Xdp`, AF_XDP on a
/// veth in a network namespace (server in a child process, an AF_XDP client core or kernel
/// socket clients at the other end of the veth, [`BenchConfig::client_datapath`]; feature
/// `xdp`, root); `Emu`, the ConnectX driver on one core against
/// the emulated ConnectX on a second core, which also plays the clients ([`crate::emu`]): the
/// server core's throughput, not a network measurement (2 CPUs, N + 1 with `--cores N`).
pub use app_server::DatapathKind;

/// How the datapath is described in tables, plots and JSON.
pub fn datapath_label(kind: DatapathKind) -> &'static str {
    match kind {
        DatapathKind::Xdp => "AF_XDP server on a veth",
        DatapathKind::Emu => "server core with an emulated ConnectX on a second core",
        DatapathKind::Tcp => "kernel TCP on 127.0.0.1",
        _ => "socket datapath on 127.0.0.1",
    }
}

/// Everything the benchmark does.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The server's datapath.
    pub datapath: DatapathKind,
    /// Modes to run, in order.
    pub modes: Vec<Mode>,
    /// Message shape.
    pub shape: ShapeSpec,
    /// Offered loads, timing, client threads, MTU, busy-polling and output directory (the
    /// load flags; default: [`DEFAULT_RATES`] into `results/echo`).
    pub load: LoadConfig,
    /// The load whose p50/p99 the table reports (added to `load.rates` if missing).
    pub fixed_rps: f64,
    /// Hybrid threshold of the `cornflakes` modes (default: the process default,
    /// [`cornflakes::threshold_setting`]).
    pub threshold: usize,
    /// Stop a mode's sweep after this many consecutive points below 95 % (0: run all).
    pub stop_after_misses: usize,
    /// JSON path (default `out_dir/echo.json`).
    pub json: Option<PathBuf>,
    /// `emu` only: how replies are checked, what the device costs and how the saturation
    /// search runs (`--sample-every`, `--check-every`, `--desc-ns`, `--demote-lines`,
    /// `--slowed-retries`, `--trials`, `--resolution`, `--repeat`).
    pub device: emu_bench::EmuSettings,
    /// `emu` only: receive-queue entries (a power of two; `None`: emu-bench's default, 1024),
    /// as `ethtool -G rx` sets them on a NIC. Fewer entries keep the buffers the device writes
    /// received frames into warm in its cache.
    pub rx_ring: Option<u32>,
    /// Server cores per mode (share-nothing: each its own echo server, pinned memory, datapath
    /// and arena; requests spread round-robin). `socket`: pinned one per CPU when more than
    /// one, one port each (`docs/cores.md`); `emu`: one queue set each, needs `cores + 1`
    /// CPUs; `xdp`: one core.
    pub cores: usize,
    /// `socket` only: `Some(n)` runs server and clients over kernel TCP
    /// (`crates/datapath-tcp`, `--datapath tcp`) instead of UDP, each client thread with `n`
    /// connections to each server core (requests round-robin over them).
    pub tcp_conns: Option<usize>,
    /// With `tcp_conns`: the server's and the clients' zero-copy sends (`--tcp-zc`,
    /// `--tcp-zc-threshold`).
    pub tcp: app_server::TcpSpec,
    /// `xdp` only: what drives the server from the veth's other end, an AF_XDP client core
    /// (`Some(Xdp)`, the default) or kernel UDP sockets (`Some(Socket)`; `--client-datapath`);
    /// `None` on the other datapaths, whose clients run on the server's datapath.
    pub client_datapath: Option<DatapathKind>,
}

impl BenchConfig {
    /// How the datapath is described in tables, plots and JSON.
    pub fn datapath_label(&self) -> &'static str {
        match (self.datapath, self.tcp_conns, self.client_datapath) {
            (DatapathKind::Socket, Some(_), _) => datapath_label(DatapathKind::Tcp),
            (DatapathKind::Xdp, _, Some(DatapathKind::Socket)) => {
                "AF_XDP server on a veth, kernel UDP socket clients"
            }
            (DatapathKind::Xdp, _, _) => "AF_XDP server on a veth, an AF_XDP client core",
            (d, _, _) => datapath_label(d),
        }
    }
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            datapath: DatapathKind::Socket,
            modes: Mode::ALL.to_vec(),
            shape: ShapeSpec::default(),
            load: LoadConfig::new(DEFAULT_RATES.to_vec(), DEFAULT_MTU, "results/echo"),
            fixed_rps: DEFAULT_RATES[0],
            // The process default: 512 B unless CORNFLAKES_THRESHOLD / CORNFLAKES_CALIBRATION.
            threshold: cornflakes::default_threshold(),
            // Three, not one: on a shared machine a single point can miss by bad luck.
            stop_after_misses: 3,
            json: None,
            device: emu_bench::EmuSettings::default(),
            rx_ring: None,
            cores: 1,
            tcp_conns: None,
            tcp: app_server::TcpSpec::default(),
            client_datapath: None,
        }
    }
}

impl BenchConfig {
    /// The loads to run: `load.rates` plus the fixed load, ascending, without duplicates.
    pub fn loads(&self) -> Vec<f64> {
        self.load.loads(&[self.fixed_rps])
    }

    /// The JSON output path.
    pub fn json_path(&self) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| self.load.out_dir.join("echo.json"))
    }
}

/// What a benchmark run produced.
#[derive(Debug, Default)]
pub struct BenchOutcome {
    /// Every measured point.
    pub records: Vec<Record>,
    /// Each mode's server counters at the end of its sweep (`emu`: at its best point).
    pub servers: Vec<(Mode, ServerStats)>,
    /// `emu` only: each mode's saturation search and every trial.
    pub emu: Option<EmuOutcome>,
}

/// What an emulated-NIC run found, per repeat and mode.
pub use emu_bench::EmuOutcome;
