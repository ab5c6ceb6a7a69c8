//! `calibrate run | server`: the copy-threshold calibration of the Cornflakes paper (§5;
//! docs/calibration.md) and its server on any datapath.

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;

use app_server::cli::serve_until;
use app_server::{CargoRun, DatapathSpec, Launch};
use calibrate::run::{self, CalibConfig, DatapathKind, DEFAULT_MTU};
use calibrate::server::Calib;
use cli_args::Args;
use datapath_socket::SocketConfig;
use loadgen::args::{LoadFlags, SearchFlags};

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
              [--datapath tcp [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]]
      The calibration's server alone (what `run --datapath xdp` runs in its namespace;
      on a NIC machine, what `run --server` on a client machine measures). --cores N
      (socket datapath): N pinned cores on PORT+i, the array sharded across them (the
      paper's Figure 13 setup; docs/cores.md). --datapath tcp: kernel TCP (stream frames),
      --tcp-zc/--tcp-zc-threshold choosing which replies go zero-copy (docs/tcp.md).
";

/// How to build `calibrate` with a datapath's feature (the hint of a build without it).
const CARGO_RUN: CargoRun = CargoRun {
    package: "calibrate",
    bin: None,
    args: "server ...",
};

fn run_cmd(mut a: Args) -> Result<(), String> {
    let cfg = run_config(&mut a)?;
    a.finish()?;
    let out = run::run_calibration(&cfg)?;
    let bad: u64 = out.records.iter().map(|r| r.mismatched).sum();
    if bad > 0 {
        return Err(format!("{bad} responses did not verify"));
    }
    Ok(())
}

/// What `calibrate run`'s flags ask for (`a` keeps what it does not know).
fn run_config(a: &mut Args) -> Result<CalibConfig, String> {
    let refuse = |name: &str| match name {
        "mlx5" | "ice" => run::unsupported_datapath(name),
        other => DatapathKind::unknown(other, &run::RUN_DATAPATHS),
    };
    let spec = DatapathSpec::choose(a, &run::RUN_DATAPATHS, || DatapathKind::Socket, refuse)?;
    let mut cfg = CalibConfig::for_datapath(spec.kind);
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
    LoadFlags::from_args(a)?.apply(&mut cfg.load);
    SearchFlags::from_args(a)?.apply(&mut cfg.trials, &mut cfg.resolution);
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
    Ok(cfg)
}

fn server_cmd(mut a: Args) -> Result<(), String> {
    let array_bytes: usize = a
        .parse("--array-bytes")?
        .ok_or("--array-bytes is required")?;
    let bind = a
        .parse::<SocketAddrV4>("--bind")?
        .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7000));
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let spec = DatapathSpec::from_args(&mut a, DatapathKind::SERVERS)?;
    let seconds = a.secs("--seconds")?;
    let cores = a.parse::<usize>("--cores")?.unwrap_or(1);
    a.finish()?;
    // Each core holds its own 1/N shard of the array (the paper's Figure 13 setup).
    let shard = array_bytes / cores.max(1);
    let mut sock = SocketConfig::new(bind);
    // AF_XDP takes an explicit --mtu only: without it, the interface's.
    sock.mtu = spec.mtu_or(DEFAULT_MTU);
    sock.memory.max_item_size = run::SOCKET_MAX_ITEM;
    sock.memory.max_bytes = shard + (256 << 20);
    let mut l = Launch::new(spec, sock, "calibrate", CARGO_RUN);
    // The array lives in the UMEM, so zero-copy segments are in registered memory.
    l.umem_bytes = Some(shard + (64 << 20));
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

#[cfg(test)]
mod tests {
    //! `calibrate run`: every flag, and the config field it sets.
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn run_flags_set_the_config() {
        let mut a = Args::from_line(
            "--datapath emu --sizes 64,512 --counts 1,2 --array-mib 2 --rates 1000,2000 \
             --trials 5 --resolution 0.2 --all-points --duration 0.25 --warmup 0.5 \
             --timeout-ms 30 --threads 4 --mtu 9000 --out o --spin \
             --server 10.0.0.1:7000 --bind 10.0.0.2 --max-segments 8 --max-reply 4096 --cores 2",
        );
        let got = run_config(&mut a).unwrap();
        a.finish().unwrap();
        let mut want = CalibConfig::for_datapath(DatapathKind::Emu);
        want.sizes = vec![64, 512];
        want.counts = vec![1, 2];
        want.array_bytes = Some(2 << 20);
        want.load.rates = vec![1000.0, 2000.0];
        want.trials = 5;
        want.resolution = 0.2;
        want.whole_grid = true;
        want.load.duration = Duration::from_millis(250);
        want.load.warmup = Duration::from_millis(500);
        want.load.timeout = Duration::from_millis(30);
        want.load.threads = 4;
        want.load.mtu = 9000;
        want.load.out_dir = PathBuf::from("o");
        want.load.spin = true;
        want.remote = Some(run::Remote {
            server: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000),
            bind: Ipv4Addr::new(10, 0, 0, 2),
            max_segments: 8,
            max_reply: 4096,
            cores: 2,
        });
        assert_eq!(format!("{got:?}"), format!("{want:?}"));

        let got = run_config(&mut Args::from_line("")).unwrap();
        let want = CalibConfig::for_datapath(DatapathKind::Socket);
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert_eq!(
            run_config(&mut Args::from_line("--threads 0"))
                .unwrap()
                .load
                .threads,
            1
        );
        let e = run_config(&mut Args::from_line("--warmup x")).unwrap_err();
        assert!(e.starts_with("--warmup \"x\": "), "{e}");
        // --cores only with --server.
        let mut a = Args::from_line("--cores 2");
        run_config(&mut a).unwrap();
        assert_eq!(a.finish().unwrap_err(), "unexpected argument \"--cores\"");
    }
}
