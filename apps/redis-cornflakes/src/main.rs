//! `redis-cf-bench`: the paper's Redis experiment (§6.2.2). YCSB GET, MGET-2 and LRANGE-2 of
//! 4096 B in total (Table 3) and the Twitter workload (Figure 8) against redis-cornflakes —
//! redis-server 7.0.15 patched to serve on the Cornflakes UDP stack (socket datapath), replying
//! in RESP or with Cornflakes objects — with the stock redis-server over TCP beside it. Every
//! reply is verified (kv-peers' checker). Usage: apps/redis-cornflakes/README.md.

#![forbid(unsafe_code)]

mod emu;
mod udp;

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use cli_args::Args;
use datapath_open::{DatapathKind, DatapathSpec};
use kv_peers::bench::BenchConfig as PeersConfig;
use kv_peers::load::load;
use kv_peers::plan::Plan;
use kv_peers::server::Peer;
use kv_workloads::{Request, WorkloadConfig, YcsbAccess, YcsbConfig};
use loadgen::args::LoadFlags;
use loadgen::{run, sweep, Bound, Record, RunConfig, Schedule, ScheduleConfig, SweepConfig};
use udp::{Format, UdpTransport};

const USAGE: &str = "\
usage: redis-cf-bench [--experiments get,mget2,lrange2,twitter] [--rates R,R,..]
                      [--duration SECS] [--warmup SECS] [--requests N] [--threads N]
                      [--threshold BYTES] [--redis-server PATH] [--no-stock] [--out DIR]
                      [--datapath emu|socket] [--trials K] [--repeat N] [--check-every N]
                      [--sample-every N] [--slowed-retries N] [--no-pin]
  --datapath emu (the default with 2+ CPUs): redis-cornflakes on the mlx5 driver against the
  emulated ConnectX on the second CPU, each format's saturation load searched (default rates
  100000,200000,400000,800000,1600000 req/s, 0.2 s trials after 0.05 s of warm-up, median of 3);
  prints Table 3 with the paper's ratios, Figure 8 (Twitter's gets and puts, every reply
  checked against what its key holds: each format's req/s at a p99 target, RESP's knee, and
  Cornflakes / RESP beside the paper's +8.8 %) and each experiment's compact table (the
  highest load kept up, its spread, Cornflakes / RESP, what bounded it, Redis's core's time),
  writes DIR/redis.svg and .png (the highest load kept up per experiment and format),
  DIR/redis-latency-EXP.svg and .png (p50 and p99 against offered load up to saturation, per
  experiment) and each search's full table to DIR/tables.md.
  --no-pin: the device and Redis share the CPUs, without the speed canary: for counting
  Redis's instructions under callgrind (docs/performance.md, Redis); its timings mean nothing.
  --datapath socket: the kernel-socket sweep below.
  Per experiment: the stock redis-server over TCP (RESP), then redis-cornflakes over the
  Cornflakes UDP stack (socket datapath) replying in RESP, then with Cornflakes objects whose
  values >= --threshold (default 512) are sent by reference from pinned memory. Each is loaded
  with the workload and swept over the offered loads (default 5000,10000,20000,40000,80000
  req/s, 2 s each); prints Table 3 (YCSB, Gbps of values at the highest load kept up) and
  Figure 8 (Twitter, req/s and p99) and writes DIR/tables.md (DIR: results/redis).
  --redis-server: the patched binary (default: target/redis-cornflakes/src/src/redis-server,
  built with scripts/redis-cornflakes.sh when missing).
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Experiment {
    Get,
    MGet2,
    LRange2,
    Twitter,
}

impl Experiment {
    fn parse(s: &str) -> Result<Experiment, String> {
        Ok(match s {
            "get" => Experiment::Get,
            "mget2" => Experiment::MGet2,
            "lrange2" => Experiment::LRange2,
            "twitter" => Experiment::Twitter,
            o => {
                return Err(format!(
                    "unknown experiment {o:?}: get, mget2, lrange2, twitter"
                ))
            }
        })
    }
    fn name(self) -> &'static str {
        match self {
            Experiment::Get => "get",
            Experiment::MGet2 => "mget2",
            Experiment::LRange2 => "lrange2",
            Experiment::Twitter => "twitter",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Experiment::Get => "YCSB GET 1x4096",
            Experiment::MGet2 => "YCSB MGET 2x2048",
            Experiment::LRange2 => "YCSB LRANGE 2x2048",
            Experiment::Twitter => "Twitter",
        }
    }
    fn workload(self) -> WorkloadConfig {
        let ycsb = |shape: &str, access| {
            WorkloadConfig::Ycsb(YcsbConfig::with_shape(shape, access).expect("known shape"))
        };
        match self {
            Experiment::Get => ycsb("1x4096", YcsbAccess::GetM),
            Experiment::MGet2 => ycsb("2x2048", YcsbAccess::GetM),
            Experiment::LRange2 => ycsb("2x2048", YcsbAccess::GetList),
            Experiment::Twitter => WorkloadConfig::default_for("twitter").expect("known workload"),
        }
    }
}

/// Where redis-cornflakes' Cornflakes port runs: the mlx5 driver against the emulated ConnectX
/// (`cf_dp_emu_new`), or kernel UDP on 127.0.0.1.
const DATAPATHS: [DatapathKind; 2] = [DatapathKind::Emu, DatapathKind::Socket];

/// The emulated device where this process may use 2+ CPUs, else sockets.
fn default_datapath() -> DatapathKind {
    match emu_bench::two_cores() {
        Ok(_) => DatapathKind::Emu,
        Err(_) => DatapathKind::Socket,
    }
}

#[derive(Debug, PartialEq)]
struct Cli {
    datapath: DatapathKind,
    /// `--trials K` of the emulated search.
    trials: Option<usize>,
    /// The emulated device's flags (`--repeat`, `--check-every`, ...).
    emu: emu_bench::EmuFlags,
    experiments: Vec<Experiment>,
    loads: Vec<f64>,
    duration: Duration,
    warmup: Duration,
    requests: usize,
    threads: usize,
    threshold: u64,
    redis_server: Option<PathBuf>,
    stock: bool,
    /// `--no-pin`: the emulated run's threads share CPUs (for callgrind).
    pin: bool,
    out: PathBuf,
}

/// The load flags ([`loadgen::args::LoadFlags`]) redis-cf-bench honours: not `--timeout-ms`
/// (its loss timeout is fixed), `--mtu` or `--spin`.
const LOAD_FLAGS: &[&str] = &["--rates", "--duration", "--warmup", "--threads", "--out"];

/// Reads the command line (all but `--help`); refuses what is left.
fn parse_cli(mut a: Args) -> Result<Cli, String> {
    let experiments = match a.take("--experiments")? {
        Some(s) => s
            .split(',')
            .map(Experiment::parse)
            .collect::<Result<_, _>>()?,
        None => vec![
            Experiment::Get,
            Experiment::MGet2,
            Experiment::LRange2,
            Experiment::Twitter,
        ],
    };
    let refuse = |o: &str| format!("--datapath is emu or socket, not {o:?}");
    let datapath = DatapathSpec::choose(&mut a, &DATAPATHS, default_datapath, refuse)?.kind;
    let emu = emu_bench::EmuFlags::from_args(&mut a)?;
    let trials = a.parse::<usize>("--trials")?;
    let load = LoadFlags::from_args(&mut a)?.only("redis-cf-bench", LOAD_FLAGS)?;
    let (rates, duration, warmup) = match datapath {
        DatapathKind::Emu => (
            vec![100_000.0, 200_000.0, 400_000.0, 800_000.0, 1_600_000.0],
            Duration::from_millis(200),
            Duration::from_millis(50),
        ),
        _ => (
            vec![5_000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0],
            Duration::from_secs(2),
            Duration::from_millis(300),
        ),
    };
    let cli = Cli {
        datapath,
        trials,
        emu,
        experiments,
        loads: load.rates.unwrap_or(rates),
        duration: load.duration.unwrap_or(duration),
        warmup: load.warmup.unwrap_or(warmup),
        requests: a.parse("--requests")?.unwrap_or(200_000),
        threads: load.threads.unwrap_or(1),
        threshold: a.parse("--threshold")?.unwrap_or(512),
        redis_server: a.take("--redis-server")?.map(PathBuf::from),
        stock: !a.switch("--no-stock"),
        pin: !a.switch("--no-pin"),
        out: load.out.unwrap_or_else(|| PathBuf::from("results/redis")),
    };
    a.finish()?;
    Ok(cli)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_tcp_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

fn free_udp_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// A running redis-cornflakes: TCP for loading, the Cornflakes port for the measurement.
struct CfServer {
    child: Child,
    tcp: SocketAddr,
    udp: SocketAddrV4,
}

impl CfServer {
    /// Starts `bin`; `conf`, when given, is a configuration file read first (the emulated
    /// device's `cornflakes-datapath "emu DIR"`).
    fn start(
        bin: &Path,
        format: Format,
        threshold: u64,
        log: &Path,
        conf: Option<&Path>,
    ) -> Result<CfServer, String> {
        let (tcp, udp) = (
            free_tcp_port().map_err(|e| e.to_string())?,
            free_udp_port().map_err(|e| e.to_string())?,
        );
        let schema = root().join("schemas/kv.proto");
        let mut cmd = Command::new(bin);
        if let Some(c) = conf {
            cmd.arg(c);
        }
        let child = cmd
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args([
                "--port",
                &tcp.to_string(),
                "--cornflakes-port",
                &udp.to_string(),
            ])
            .args(["--cornflakes-threshold", &threshold.to_string()])
            .args([
                "--cornflakes-format",
                if format == Format::Resp {
                    "resp"
                } else {
                    "cornflakes"
                },
            ])
            .arg("--cornflakes-schema")
            .arg(&schema)
            .arg("--logfile")
            .arg(log)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let tcp = SocketAddr::from((Ipv4Addr::LOCALHOST, tcp));
        let mut s = CfServer {
            child,
            tcp,
            udp: SocketAddrV4::new(Ipv4Addr::LOCALHOST, udp),
        };
        let start = Instant::now();
        while TcpStream::connect(tcp).is_err() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = s.child.kill();
                return Err(format!(
                    "redis-cornflakes did not start; see {}",
                    log.display()
                ));
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!(
                    "redis-cornflakes exited ({st}); see {}",
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(s)
    }
}

impl CfServer {
    /// Whether the server is still running.
    fn running(&self) -> bool {
        // `try_wait` needs `&mut`; /proc tells without reaping (a zombie has exited).
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .is_ok_and(|s| !s.contains(") Z "))
    }
}

impl Drop for CfServer {
    /// Asks the server to exit (`SHUTDOWN NOSAVE`), so a wrapper such as valgrind's callgrind
    /// writes its output; kills it when it has not exited within 10 s.
    fn drop(&mut self) {
        if let Ok(mut s) = TcpStream::connect_timeout(&self.tcp, Duration::from_secs(1)) {
            let _ = s.write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n");
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One system's results on one experiment.
struct Outcome {
    system: String,
    records: Vec<Record>,
}

fn sweep_udp(
    cli: &Cli,
    exp: Experiment,
    bin: &Path,
    format: Format,
    requests: &[Request],
) -> Result<Outcome, String> {
    let workload = exp.workload().build().map_err(|e| e.to_string())?;
    let plan =
        Plan::new(Peer::Redis, workload.as_ref(), requests.to_vec()).map_err(|e| e.to_string())?;
    let system = match format {
        Format::Resp => "redis-cornflakes (Cornflakes UDP, RESP replies)",
        Format::Cornflakes => "redis-cornflakes (Cornflakes UDP, Cornflakes objects)",
    }
    .to_owned();
    std::fs::create_dir_all(&cli.out).map_err(|e| e.to_string())?;
    let log = std::fs::canonicalize(&cli.out)
        .map_err(|e| e.to_string())?
        .join(format!("redis-cornflakes-{format:?}.log"));
    let server = CfServer::start(bin, format, cli.threshold, &log, None)?;
    eprintln!("[redis-cf] {system}: loading {}", workload.name());
    let loaded = load(Peer::Redis, server.tcp, workload.as_ref(), plan.layout)
        .map_err(|e| format!("loading redis-cornflakes: {e}"))?;
    eprintln!(
        "[redis-cf] loaded {} keys, {} value bytes",
        loaded.keys, loaded.bytes
    );
    let sweep_cfg = SweepConfig {
        mode: system.clone(),
        shape: workload.name(),
        loads_rps: cli.loads.clone(),
        keep_up: loadgen::DEFAULT_KEEP_UP,
        stop_after_misses: 2,
        progress: true,
    };
    let run_cfg = RunConfig {
        warmup: cli.warmup,
        timeout: Duration::from_millis(500),
        busy_poll: false,
        progress: false,
    };
    let mut point = 0u64;
    let threads = cli.threads;
    let records = sweep(&sweep_cfg, |rate| {
        point += 1;
        let schedule = Schedule::poisson(&ScheduleConfig {
            rate_rps: rate,
            bound: Bound::Duration(cli.duration + cli.warmup),
            threads,
            seed: 1 ^ (point << 20),
        })
        .map_err(|e| e.to_string())?;
        let plan = &plan;
        run(
            &schedule,
            &run_cfg,
            |_| UdpTransport::connect(plan, server.udp, format, threads),
            &|id: u64, payload: &[u8]| plan.check(id, threads, payload),
        )
        .map_err(|e| e.to_string())
    })?;
    drop(server);
    Ok(Outcome { system, records })
}

fn stock(cli: &Cli, exp: Experiment) -> Result<Option<Outcome>, String> {
    let cfg = PeersConfig {
        peers: vec![Peer::Redis],
        workload: exp.workload(),
        requests: cli.requests,
        loads: cli.loads.clone(),
        duration: cli.duration,
        warmup: cli.warmup,
        threads: cli.threads,
        ..PeersConfig::default()
    };
    match kv_peers::bench::run_bench(&cfg) {
        Ok((_, mut results)) => Ok(results.pop().map(|r| Outcome {
            system: kv_peers::bench::mode_label(r.peer, &r.version),
            records: r.records,
        })),
        Err(e) if e.contains("none of the selected servers is installed") => {
            eprintln!(
                "[redis-cf] SKIPPED stock redis-server: not installed (crates/kv-peers/APT_PACKAGES)"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn best(records: &[Record]) -> Option<Record> {
    loadgen::summarize(records, loadgen::DEFAULT_KEEP_UP)
        .first()
        .and_then(|m| m.best.clone())
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"))
}

fn report(cli: &Cli, results: &[(Experiment, Vec<Outcome>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Redis with Cornflakes (§6.2.2): redis-cornflakes on the socket datapath, 127.0.0.1\n\n\
         Offered loads {:?} req/s, {:?} per point (+{:?} warm-up), {} client thread(s); \
         the highest load whose achieved rate is within 95 % of offered. Not a NIC measurement: \
         clients and server share this machine's cores over kernel UDP/TCP.\n",
        cli.loads, cli.duration, cli.warmup, cli.threads
    );
    let ycsb: Vec<_> = results
        .iter()
        .filter(|(e, _)| *e != Experiment::Twitter)
        .collect();
    if !ycsb.is_empty() {
        let _ = writeln!(s, "### Table 3 form: YCSB, 4096 B of values per request (Gbps of values at the highest load kept up; req/s)\n");
        let systems: Vec<String> = ycsb[0].1.iter().map(|o| o.system.clone()).collect();
        let _ = writeln!(s, "| workload | {} |", systems.join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(systems.len()));
        for (e, outs) in &ycsb {
            let cells: Vec<String> = outs
                .iter()
                .map(|o| match best(&o.records) {
                    Some(b) => format!(
                        "{:.3} Gbps ({:.0} req/s)",
                        b.achieved_rps * 4096.0 * 8.0 / 1e9,
                        b.achieved_rps
                    ),
                    None => "no load kept up".into(),
                })
                .collect();
            let _ = writeln!(s, "| {} | {} |", e.label(), cells.join(" | "));
        }
        let _ = writeln!(s);
    }
    if let Some((_, outs)) = results.iter().find(|(e, _)| *e == Experiment::Twitter) {
        let _ = writeln!(s, "### Figure 8 form: Twitter workload (highest load kept up, p99 there; every point below)\n");
        let resp = outs
            .iter()
            .find(|o| o.system.contains("RESP replies"))
            .and_then(|o| best(&o.records));
        let _ = writeln!(s, "| system | req/s | p99 (µs) | vs RESP over Cornflakes |");
        let _ = writeln!(s, "|---|---:|---:|---:|");
        for o in outs {
            match best(&o.records) {
                Some(b) => {
                    let vs = resp.as_ref().map_or("–".into(), |r| {
                        format!("{:+.1} %", (b.achieved_rps / r.achieved_rps - 1.0) * 100.0)
                    });
                    let _ = writeln!(
                        s,
                        "| {} | {:.0} | {} | {vs} |",
                        o.system,
                        b.achieved_rps,
                        us(b.p99_us)
                    );
                }
                None => {
                    let _ = writeln!(s, "| {} | no load kept up | – | – |", o.system);
                }
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "### Every point\n");
    let _ = writeln!(s, "| workload | system | offered req/s | achieved req/s | p50 (µs) | p99 (µs) | verified | mismatched | lost |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (e, outs) in results {
        for o in outs {
            for r in &o.records {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
                    e.label(),
                    o.system,
                    r.offered_rps,
                    r.achieved_rps,
                    us(r.p50_us),
                    us(r.p99_us),
                    r.verified,
                    r.mismatched,
                    r.lost
                );
            }
        }
    }
    s
}

fn server_binary(cli: &Cli) -> Result<PathBuf, String> {
    if let Some(b) = &cli.redis_server {
        return Ok(b.clone());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
    let bin = target.join("redis-cornflakes/src/src/redis-server");
    if !bin.is_file() {
        eprintln!("[redis-cf] building redis-cornflakes (scripts/redis-cornflakes.sh build)");
        let st = Command::new(root().join("scripts/redis-cornflakes.sh"))
            .arg("build")
            .status()
            .map_err(|e| format!("running scripts/redis-cornflakes.sh: {e}"))?;
        if !st.success() {
            return Err("scripts/redis-cornflakes.sh build failed".into());
        }
    }
    Ok(bin)
}

fn main_inner() -> Result<(), String> {
    let mut a = Args::new(std::env::args().skip(1).collect());
    if a.switch("--help") || a.switch("-h") {
        print!("{USAGE}");
        return Ok(());
    }
    let cli = parse_cli(a)?;
    let bin = server_binary(&cli)?;
    let mut results = Vec::new();
    let mut emu_results = Vec::new();
    for &exp in &cli.experiments {
        eprintln!("[redis-cf] === {} ===", exp.label());
        let workload = exp.workload().build().map_err(|e| e.to_string())?;
        let requests = workload.requests(cli.requests, 1);
        let mut outs = Vec::new();
        if cli.stock {
            outs.extend(stock(&cli, exp)?);
        }
        if cli.datapath == DatapathKind::Emu {
            emu_results.push((
                exp,
                vec![
                    emu::search(&cli, exp, &bin, Format::Resp, &requests)?,
                    emu::search(&cli, exp, &bin, Format::Cornflakes, &requests)?,
                ],
            ));
            results.push((exp, outs));
            continue;
        }
        outs.push(sweep_udp(&cli, exp, &bin, Format::Resp, &requests)?);
        outs.push(sweep_udp(&cli, exp, &bin, Format::Cornflakes, &requests)?);
        results.push((exp, outs));
    }
    // Printed: Table 3, the compact tables and the stock row; tables.md adds each search's
    // full table.
    let mut text = String::new();
    let mut full = String::new();
    std::fs::create_dir_all(&cli.out).map_err(|e| e.to_string())?;
    if !emu_results.is_empty() {
        text += &emu::table(&emu_results);
        for (exp, rs) in &emu_results {
            if *exp == Experiment::Twitter {
                text += &emu::figure8(rs);
            }
        }
        text += &emu::compact_tables(&emu_results);
        for (_, rs) in &emu_results {
            for r in rs {
                full += &format!("\n{}\n", r.table);
            }
        }
        emu::write_chart(&cli.out, &emu_results);
        emu::write_latency_charts(&cli.out, &emu_results);
    }
    // On the emulated device the sockets' report holds only the stock row (none: --no-stock).
    if emu_results.is_empty() {
        text += &report(&cli, &results);
    } else if results.iter().any(|(_, outs)| !outs.is_empty()) {
        text += "\nStock redis-server over kernel TCP (RESP), for reference:\n";
        text += &report(&cli, &results);
    }
    print!("{text}");
    let path = cli.out.join("tables.md");
    std::fs::write(&path, format!("{text}{full}"))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("[redis-cf] wrote {}", path.display());
    Ok(())
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redis-cf-bench: {e}\n\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(line: &str) -> Result<Cli, String> {
        parse_cli(Args::from_line(line))
    }

    #[test]
    fn a_full_command_line_sets_every_field() {
        let got = cli(
            "--experiments get,twitter --rates 100,200 --duration 1.5 --warmup 0.25 \
             --requests 5000 --threads 2 --threshold 1024 --redis-server /x/redis-server \
             --no-stock --out o --datapath socket --trials 5 --repeat 3 --no-pin",
        )
        .unwrap();
        assert_eq!(
            got,
            Cli {
                datapath: DatapathKind::Socket,
                trials: Some(5),
                emu: emu_bench::EmuFlags {
                    repeat: Some(3),
                    ..Default::default()
                },
                experiments: vec![Experiment::Get, Experiment::Twitter],
                loads: vec![100.0, 200.0],
                duration: Duration::from_millis(1500),
                warmup: Duration::from_millis(250),
                requests: 5000,
                threads: 2,
                threshold: 1024,
                redis_server: Some(PathBuf::from("/x/redis-server")),
                stock: false,
                pin: false,
                out: PathBuf::from("o"),
            }
        );
        assert_eq!(
            cli("--datapath socket").unwrap(),
            Cli {
                datapath: DatapathKind::Socket,
                trials: None,
                emu: emu_bench::EmuFlags::default(),
                experiments: vec![
                    Experiment::Get,
                    Experiment::MGet2,
                    Experiment::LRange2,
                    Experiment::Twitter
                ],
                loads: vec![5_000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0],
                duration: Duration::from_secs(2),
                warmup: Duration::from_millis(300),
                requests: 200_000,
                threads: 1,
                threshold: 512,
                redis_server: None,
                stock: true,
                pin: true,
                out: PathBuf::from("results/redis"),
            }
        );
    }

    #[test]
    fn an_unknown_flag_or_experiment_is_refused() {
        assert_eq!(
            cli("--rates 100 --bogus 1").unwrap_err(),
            "unexpected argument \"--bogus\""
        );
        assert!(cli("--experiments get,set")
            .unwrap_err()
            .starts_with("unknown experiment \"set\""));
        assert_eq!(
            cli("--spin").unwrap_err(),
            "redis-cf-bench does not take --spin (its load flags are --rates --duration \
             --warmup --threads --out)"
        );
        assert!(cli("--mtu 1500 --timeout-ms 5")
            .unwrap_err()
            .contains("does not take --timeout-ms"));
    }
}
