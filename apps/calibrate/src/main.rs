//! `calibrate run | server`: the copy-threshold calibration of the Cornflakes paper (§5;
//! docs/calibration.md) and its server on any datapath.

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use app_server::cli::serve_until;
use app_server::{CargoRun, Launch, Transport};
use calibrate::run::{self, CalibConfig, DatapathKind, DEFAULT_MTU};
use calibrate::server::Calib;
use datapath_socket::SocketConfig;
use loadgen::args::Args;

const USAGE: &str = "\
usage:
  calibrate run [--sizes S,S,..] [--counts K,K,..] [--array-mib MIB] [--rates R,R,..]
              [--trials K] [--resolution F] [--all-points]
              [--duration SECS] [--warmup SECS] [--timeout-ms MS] [--threads N] [--mtu N]
              [--out DIR] [--spin] [--datapath socket|xdp|emu]
              [--server IP:PORT [--bind IP] [--max-segments N] [--max-reply BYTES]]
      The copy-threshold calibration (paper §5, docs/calibration.md): per segment size S
      and count K, copy vs scatter-gather of K random S-byte segments of a pinned array
      (default 10 x the last-level cache). Each policy's saturation load is searched as
      `bench` does, copy and sg interleaved trial by trial: a doubling grid of --rates
      (default from 10 k req/s; emu 200 k) until the median of up to --trials K trials
      (default 3) misses 95 % of offered, then bisection to --resolution F (default 0.1).
      A cell has a winner only when the two policies' trial spreads do not overlap, and
      the recommended threshold rests only on such cells. Writes
      DIR/calibration.json, DIR/heatmap.svg, DIR/heatmap.png (DIR defaults to
      results/calibrate) and prints the recommended threshold; run a program with
      CORNFLAKES_CALIBRATION=DIR/calibration.json to use it. With --server, only the
      clients run here, against a `calibrate server` elsewhere (e.g. on a NIC) started with
      the same --array-mib (its --array-bytes); --cores N there: the server runs N cores
      on PORT..PORT+N-1, each with 1/N of the array, requests spread round-robin.
  calibrate server --array-bytes N [--bind IP:PORT] [--mtu N] [--seconds SECS]
              [--until-stdin-closes] [--datapath socket|xdp --ifname IF [--peer IP=MAC]]
              [--datapath mlx5 --mlx5-dev DEV] [--datapath ice --dpdk-args ARGS] [--cores N]
      The calibration's server alone (what `run --datapath xdp` runs in its namespace;
      on a NIC machine, what `run --server` on a client machine measures). --cores N
      (socket datapath): N pinned cores on PORT+i, the array sharded across them (the
      paper's Figure 13 setup; docs/cores.md).
";

/// How to build `calibrate` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "calibrate",
    bin: None,
    args: "server ...",
};

fn run_cmd(mut a: Args) -> Result<(), String> {
    let datapath = match a.take("--datapath")?.as_deref() {
        None | Some("socket") => DatapathKind::Socket,
        Some("xdp") => DatapathKind::Xdp,
        Some("emu") => DatapathKind::Emu,
        Some(nic @ ("mlx5" | "ice")) => return Err(run::unsupported_datapath(nic)),
        Some(other) => return Err(format!("unknown datapath {other:?} (socket, xdp or emu)")),
    };
    let mut cfg = CalibConfig::for_datapath(datapath);
    if let Some(s) = a.list::<usize>("--sizes")? {
        cfg.sizes = s;
    }
    if let Some(k) = a.list::<usize>("--counts")? {
        cfg.counts = k;
    }
    if let Some(m) = a.parse::<f64>("--array-mib")? {
        if !(m > 0.0 && m.is_finite()) {
            return Err(format!("--array-mib {m}: must be positive"));
        }
        cfg.array_bytes = Some((m * f64::from(1u32 << 20)) as usize);
    }
    if let Some(r) = a.list::<f64>("--rates")? {
        cfg.rates = r;
    }
    if let Some(k) = a.parse::<usize>("--trials")? {
        cfg.trials = k;
    }
    if let Some(r) = a.parse::<f64>("--resolution")? {
        cfg.resolution = r;
    }
    if let Some(d) = a.secs("--duration")? {
        cfg.duration = d;
    }
    if let Some(d) = a.secs("--warmup")? {
        cfg.warmup = d;
    }
    if let Some(ms) = a.parse::<u64>("--timeout-ms")? {
        cfg.timeout = Duration::from_millis(ms);
    }
    if let Some(t) = a.parse::<usize>("--threads")? {
        cfg.threads = t.max(1);
    }
    if let Some(m) = a.parse::<usize>("--mtu")? {
        cfg.mtu = m;
    }
    if let Some(o) = a.take("--out")? {
        cfg.out_dir = PathBuf::from(o);
    }
    if a.switch("--spin") {
        cfg.spin = true;
    }
    if a.switch("--all-points") {
        cfg.whole_grid = true;
    }
    if let Some(server) = a.parse::<SocketAddrV4>("--server")? {
        cfg.remote = Some(run::Remote {
            server,
            bind: a.parse("--bind")?.unwrap_or(Ipv4Addr::UNSPECIFIED),
            max_segments: a
                .parse("--max-segments")?
                .unwrap_or(run::REMOTE_MAX_SEGMENTS),
            max_reply: a.parse("--max-reply")?.unwrap_or(run::SOCKET_MAX_ITEM),
            cores: a.parse::<usize>("--cores")?.unwrap_or(1).max(1),
        });
    }
    a.finish()?;
    let out = run::run_calibration(&cfg)?;
    let bad: u64 = out.records.iter().map(|r| r.mismatched).sum();
    if bad > 0 {
        return Err(format!("{bad} responses did not verify"));
    }
    Ok(())
}

fn server_cmd(mut a: Args) -> Result<(), String> {
    let array_bytes: usize = a
        .parse("--array-bytes")?
        .ok_or("--array-bytes is required")?;
    let bind = a
        .parse::<SocketAddrV4>("--bind")?
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000));
    let mtu_arg: Option<usize> = a.parse("--mtu")?;
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let mut transport = Transport::from_args(&mut a)?;
    let seconds = a.secs("--seconds")?;
    let cores = a.parse::<usize>("--cores")?.unwrap_or(1);
    a.finish()?;
    // Each core holds its own 1/N shard of the array (the paper's Figure 13 setup).
    let shard = array_bytes / cores.max(1);
    if let Transport::Xdp(x) = &mut transport {
        x.mtu = mtu_arg;
        // The array lives in the UMEM, so zero-copy segments are in registered memory.
        x.umem_bytes = Some(shard + (64 << 20));
    }
    let mut sock = SocketConfig::new(bind);
    sock.mtu = mtu_arg.unwrap_or(DEFAULT_MTU);
    sock.memory.max_item_size = run::SOCKET_MAX_ITEM;
    sock.memory.max_bytes = shard + (256 << 20);
    let mut l = Launch::new(transport, sock, "calibrate", CARGO_RUN);
    l.cores = cores;
    l.name = "calibrate-server".to_owned();
    l.extra_bytes = shard;
    let stats = serve_until(seconds, until_stdin_closes, |stop| {
        app_server::launch(
            &l,
            move |mem, core| {
                let calib = Calib::new(mem, shard)?;
                eprintln!(
                    "[server] calibrate core {}: {} array items ({} MiB)",
                    core.index,
                    calib.items(),
                    shard >> 20
                );
                Ok(calib)
            },
            stop,
        )
    })?;
    eprintln!("[server] calibrate done: {stats}");
    Ok(())
}

fn main() -> ExitCode {
    app_server::cli::main(
        "calibrate",
        USAGE,
        &[("run", run_cmd), ("server", server_cmd)],
        std::env::args().skip(1).collect(),
    )
}
