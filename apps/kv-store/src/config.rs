//! What a KV benchmark is asked to do ([`BenchConfig`]), its prepared requests and what it
//! produced ([`BenchOutcome`]): shared by the socket sweep ([`crate::bench`]), the emulated
//! NIC ([`crate::emu`]), AF_XDP and the peers, so none of them imports another for its types.

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::Arc;

use datapath_socket::SocketConfig;
use kv_workloads::{Stats, Workload, WorkloadConfig};
use loadgen::args::LoadConfig;
use loadgen::Record;

use crate::client::{Expected, RunRequests};
use crate::ops::Op;
use crate::serialization::Serialization;
use crate::server::{memory_config, ServerStats, DEFAULT_MAX_ITEM};
use crate::store::DEFAULT_MEMORY_LIMIT;

/// How the AF_XDP runs are labelled in tables and JSON (driven by an AF_XDP client core, the
/// default).
pub const XDP_LABEL: &str = "AF_XDP in copy mode on a veth pair (datapath-xdp): each server a process in its own network namespace, driven by one AF_XDP client core at the other end";

/// How the AF_XDP runs driven by kernel-socket clients (`--client-datapath socket`) are
/// labelled in tables and JSON.
pub const XDP_SOCKET_CLIENTS_LABEL: &str = "AF_XDP in copy mode on a veth pair (datapath-xdp): each server a process in its own network namespace, the clients on kernel UDP sockets at the other end";

/// Default offered loads (requests per second), lowest first.
pub const DEFAULT_RATES: [f64; 8] = [
    5_000.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 60_000.0, 80_000.0, 100_000.0,
];

/// Default coarse grid on the emulated NIC (`--datapath emu`), where the server core saturates
/// between a few hundred thousand and a few million requests per second; the saturation search
/// bisects between its points.
pub const EMU_RATES: [f64; 6] = [
    100_000.0,
    200_000.0,
    400_000.0,
    800_000.0,
    1_600_000.0,
    3_200_000.0,
];

/// IP MTU of the datapaths unless `--mtu` says otherwise: a jumbo frame, as in the paper
/// (§6.1), so a 2 × 2048 B message is one datagram; the C API's socket default too.
pub use datapath_socket::JUMBO_MTU as DEFAULT_MTU;

/// Which datapath the benchmark's server runs on: `Socket`, kernel UDP sockets on 127.0.0.1,
/// server and client threads in this process (with [`BenchConfig::tcp_conns`], kernel TCP);
/// `Emu`, the ConnectX driver (datapath-mlx5) against the emulated ConnectX on its own core,
/// which plays the wire and the open-loop clients (crates/emu-bench); `Xdp`, AF_XDP on a veth
/// pair (feature `xdp`, root): each server a process in a network namespace, driven by an
/// AF_XDP client core or kernel-socket clients at the other end
/// ([`BenchConfig::client_datapath`]; module `xdp`, feature `xdp`).
pub use app_server::DatapathKind;

/// How tables and JSON name a datapath of the bench.
pub fn datapath_label(kind: DatapathKind) -> &'static str {
    match kind {
        DatapathKind::Emu => EMU_LABEL,
        DatapathKind::Xdp => XDP_LABEL,
        DatapathKind::Tcp => TCP_LABEL,
        _ => DATAPATH_LABEL,
    }
}

/// The emulated NIC, as reported with every table.
pub const EMU_LABEL: &str = "the ConnectX driver (datapath-mlx5) on one core against the emulated ConnectX on another, which plays the wire and the clients (emu-bench): the server core's work, not a network";

/// Everything the benchmark does.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The server's datapath.
    pub datapath: DatapathKind,
    /// The workload (generator and its knobs).
    pub workload: WorkloadConfig,
    /// Serializations to run, in order.
    pub serializations: Vec<Serialization>,
    /// Offered loads, timing, client threads, MTU, busy-polling and output directory (the
    /// load flags; default: [`DEFAULT_RATES`] into `results/kv`).
    pub load: LoadConfig,
    /// Hybrid threshold of `cornflakes` and `cornflakes-no-ssend`.
    pub threshold: usize,
    /// Largest pinned buffer (server and clients): bounds one value and one message.
    pub max_item: usize,
    /// The store's memory limit (per server).
    pub memory_limit: usize,
    /// Requests generated for the run (the clients cycle through them).
    pub requests: usize,
    /// Seed of the run's requests (the schedule's seeds derive from the load index).
    pub seed: u64,
    /// Stop a serialization's sweep after this many consecutive points below 95 % (0: never).
    pub stop_after_misses: usize,
    /// JSON path (default `out_dir/kv.json`).
    pub json: Option<PathBuf>,
    /// `emu` only: how replies are checked, what the device costs and how the saturation
    /// search runs (`--sample-every`, `--check-every`, `--desc-ns`, `--demote-lines`,
    /// `--slowed-retries`, `--trials`, `--resolution`, `--repeat`).
    pub device: emu_bench::EmuSettings,
    /// Server cores (socket and emu datapaths): share-nothing, one port each, the clients
    /// steering each key to its core (`docs/cores.md`). On `emu` it needs N + 1 CPUs.
    pub cores: usize,
    /// `socket` only: `Some(n)` runs server and clients over kernel TCP
    /// (`crates/datapath-tcp`, `--datapath tcp`) instead of UDP, each client thread with `n`
    /// connections to each server core.
    pub tcp_conns: Option<usize>,
    /// With `tcp_conns`: the server's and the clients' zero-copy sends (`--tcp-zc`,
    /// `--tcp-zc-threshold`).
    pub tcp: app_server::TcpSpec,
    /// The kernel-bypass datapath the client cores run on, one core per `--threads`: `kv
    /// client --datapath xdp | mlx5 | ice`, and `kv bench --datapath xdp`'s AF_XDP client core
    /// (its interface the veth's end; `--client-datapath socket` makes it `None`). `None`:
    /// kernel UDP sockets or TCP.
    pub client_datapath: Option<app_server::DatapathSpec>,
    /// With `client_datapath`: client core 0's address (`--bind IP:PORT`; core *i* at the port
    /// plus *i*).
    pub client_bind: Option<SocketAddrV4>,
}

impl BenchConfig {
    /// The label of the socket datapath this configuration runs: with the servers in this
    /// process ([`DATAPATH_LABEL`] or [`TCP_LABEL`]), or, for `kv client`, against the server
    /// at `remote` (its real address, wherever it is).
    pub fn socket_label(&self, remote: Option<SocketAddrV4>) -> String {
        match (remote, self.tcp_conns.is_some()) {
            (None, true) => TCP_LABEL.to_owned(),
            (None, false) => DATAPATH_LABEL.to_owned(),
            (Some(addr), true) => {
                format!("kernel TCP to the server at {addr} (datapath-tcp; this process the client)")
            }
            (Some(addr), false) => format!(
                "kernel UDP sockets to the server at {addr} (datapath-socket; this process the client)"
            ),
        }
    }
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            datapath: DatapathKind::Socket,
            workload: WorkloadConfig::default_for("ycsb").expect("ycsb is a workload"),
            serializations: Serialization::ALL.to_vec(),
            load: LoadConfig::new(DEFAULT_RATES.to_vec(), DEFAULT_MTU, "results/kv"),
            threshold: cornflakes::default_threshold(),
            max_item: DEFAULT_MAX_ITEM,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            requests: 20_000,
            seed: 1,
            stop_after_misses: 2,
            json: None,
            device: emu_bench::EmuSettings::default(),
            cores: 1,
            tcp_conns: None,
            tcp: app_server::TcpSpec::default(),
            client_datapath: None,
            client_bind: None,
        }
    }
}

impl BenchConfig {
    /// The loads to run, ascending, without duplicates or non-positive values.
    pub fn loads(&self) -> Vec<f64> {
        self.load.loads(&[])
    }

    /// The JSON output path.
    pub fn json_path(&self) -> PathBuf {
        self.json
            .clone()
            .unwrap_or_else(|| self.load.out_dir.join("kv.json"))
    }

    /// The socket datapath settings of a server or client bound to `bind`.
    pub fn socket(&self, bind: SocketAddrV4) -> SocketConfig {
        let mut sc = SocketConfig::new(bind);
        sc.mtu = self.load.mtu;
        // Room for the store (per server) on top of transmit and receive buffers.
        sc.memory = memory_config(self.max_item, self.memory_limit.saturating_add(256 << 20));
        sc.max_message_len = sc.max_message_len.max(self.max_item);
        sc
    }
}

/// [`DatapathKind::Socket`] with [`BenchConfig::tcp_conns`]: kernel TCP.
pub const TCP_LABEL: &str =
    "kernel TCP on 127.0.0.1 (datapath-tcp; server and client threads in one process)";

/// The datapath the benchmark ran on, as reported with every table.
pub const DATAPATH_LABEL: &str =
    "kernel UDP sockets on 127.0.0.1 (datapath-socket; server and client threads in one process)";

/// What a benchmark run produced.
#[derive(Debug, Default)]
pub struct BenchOutcome {
    /// Every measured point (mode = serialization, shape = workload name).
    pub records: Vec<Record>,
    /// Each serialization's server counters at the end.
    pub servers: Vec<(Serialization, ServerStats)>,
    /// The workload's name.
    pub workload: String,
    /// Statistics of the generated requests.
    pub stats: Option<Stats>,
    /// Requests per unit (1, or the mean number of pieces per CDN object).
    pub requests_per_unit: f64,
    /// The datapath, described.
    pub datapath: String,
    /// Per serialization, what bounded its sweep when the datapath can tell (the emulated
    /// NIC reports whether the server or the device saturated).
    pub bounds: Vec<(String, String)>,
    /// `emu` only: each repeat's saturation searches and every trial.
    pub emu: Option<emu_bench::EmuOutcome>,
}

/// A run's requests and what their replies must be.
pub(crate) struct Prepared {
    pub(crate) workload: Arc<dyn Workload>,
    pub(crate) stats: Stats,
    pub(crate) per_unit: f64,
    pub(crate) expected: Arc<Expected>,
    pub(crate) reqs: Arc<RunRequests>,
}

pub(crate) fn prepare(cfg: &BenchConfig) -> Result<Prepared, String> {
    let workload: Arc<dyn Workload> = Arc::from(cfg.workload.build().map_err(|e| e.to_string())?);
    let requests = workload.requests(cfg.requests.max(1), cfg.seed);
    let units = workload.unit_boundaries(&requests).len().max(1);
    let stats = workload.describe(&requests);
    let per_unit = requests.len() as f64 / units as f64;
    let ops: Vec<Op> = requests;
    eprintln!("[bench] workload {}:\n{stats}", workload.name());
    let expected = Arc::new(Expected::for_workload(workload.clone(), &ops));
    let reqs = Arc::new(RunRequests {
        ops,
        threads: cfg.load.threads.max(1),
    });
    Ok(Prepared {
        workload,
        stats,
        per_unit,
        expected,
        reqs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_server_is_named_by_its_address() {
        let remote: SocketAddrV4 = "10.1.2.3:7000".parse().unwrap();
        let mut cfg = BenchConfig {
            tcp_conns: Some(2),
            ..BenchConfig::default()
        };
        assert_eq!(cfg.socket_label(None), TCP_LABEL);
        let tcp = cfg.socket_label(Some(remote));
        assert!(
            tcp.starts_with("kernel TCP to the server at 10.1.2.3:7000 "),
            "{tcp}"
        );
        assert!(!tcp.contains("127.0.0.1"), "{tcp}");
        cfg.tcp_conns = None;
        assert_eq!(cfg.socket_label(None), DATAPATH_LABEL);
        let udp = cfg.socket_label(Some(remote));
        assert!(
            udp.starts_with("kernel UDP sockets to the server at 10.1.2.3:7000 "),
            "{udp}"
        );
    }
}
