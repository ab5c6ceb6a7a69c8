//! `tcp-echo`: the paper's Figure 9 over Linux TCP (see the crate README).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use app_server::cli::serve_until;
use app_server::{CargoRun, DatapathKind, DatapathSpec, Launch, TcpSpec};
use cli_args::Args;
use datapath_socket::SocketConfig;
use loadgen::{Bound, RunConfig, Schedule, ScheduleConfig};
use tcp_echo::{plot, verdict_ok, Client, EchoAll, Mode, Percentiles, TIMEOUT};

const USAGE: &str = "usage: tcp-echo fig9 [--rate REQ_PER_S] [--size BYTES] [--seconds S] \
[--warmup S] [--conns N] [--modes raw,cornflakes,...] [--out DIR] [--spin]
                     [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]
       tcp-echo server [--listen IP:PORT] [--cores N] [--seconds S] [--until-stdin-closes] [--spin]
                       [--tcp-zc msg-zerocopy|io-uring|off] [--tcp-zc-threshold BYTES]

fig9: an in-process server and an open-loop client on 127.0.0.1, one mode after the other at a
fixed Poisson load (default 50000 req/s of 1024-byte values, which a 2-CPU machine sustains;
the paper's is --rate 175000; 2 s each after 0.5 s of warm-up, 4 connections); prints
p5/p25/p50/p75/p99 per mode and writes DIR/fig9.json, fig9.svg, fig9.png (default DIR
results/tcp-echo). Before it starts it measures each mode's echo rate here (0.15 s each, 16
requests in flight) and warns on stderr when the offered load is near or beyond it, with a
--rate to use instead. --spin: server and client busy-poll (a quiet machine with a core each);
by default an idle server waits in epoll_wait and the client yields.
server: the echo server alone (every mode) on --cores N (default 1) kernel-TCP cores, core i
listening on PORT+i (default 127.0.0.1:7878), several pinned one per CPU, as `echo server
--datapath tcp`; ready lines and counters on stderr; until --seconds pass, standard input
closes (--until-stdin-closes) or it is killed.
--tcp-zc MODE (msg-zerocopy, the default; io-uring; off), --tcp-zc-threshold BYTES (default
16384): which sends of server and client are zero-copy, those with a zero-copy field at least
BYTES long; fig9's 1024-byte values never are unless BYTES is at most 1024 (docs/tcp.md).
";

/// `fig9`'s default load: one a 2-CPU machine sustains (every mode kept up at it with nothing
/// lost, client and server on 2 CPUs; docs/performance.md). The paper's is [`PAPER_RATE`].
const DEFAULT_RATE: f64 = 50_000.0;
/// The paper's Figure 9 load.
#[cfg(test)]
const PAPER_RATE: f64 = 175_000.0;
/// How long [`fig9`] measures each mode's echo rate before it starts.
const PROBE_TIME: Duration = Duration::from_millis(150);

/// What `tcp-echo fig9` runs.
#[derive(Debug, PartialEq)]
struct Fig9 {
    rate: f64,
    size: usize,
    seconds: Duration,
    warmup: Duration,
    conns: usize,
    modes: Vec<Mode>,
    out: PathBuf,
    spin: bool,
    tcp: TcpSpec,
}

/// What `tcp-echo server` runs.
#[derive(Debug, PartialEq)]
struct ServerArgs {
    listen: SocketAddrV4,
    cores: usize,
    seconds: Option<Duration>,
    until_stdin_closes: bool,
    spin: bool,
    tcp: TcpSpec,
}

/// Ok when every argument was read; else the first left over, with the usage.
fn finish(a: Args) -> Result<(), String> {
    a.finish().map_err(|e| format!("{e}\n{USAGE}"))
}

fn fig9_args(mut a: Args) -> Result<Fig9, String> {
    let f = Fig9 {
        rate: a.parse("--rate")?.unwrap_or(DEFAULT_RATE),
        size: a.parse("--size")?.unwrap_or(1024),
        seconds: a.secs("--seconds")?.unwrap_or(Duration::from_secs(2)),
        warmup: a.secs("--warmup")?.unwrap_or(Duration::from_millis(500)),
        conns: a.parse("--conns")?.unwrap_or(4),
        modes: a.list("--modes")?.unwrap_or_else(|| Mode::ALL.to_vec()),
        out: a
            .take("--out")?
            .map_or_else(|| PathBuf::from("results/tcp-echo"), PathBuf::from),
        spin: a.switch("--spin"),
        tcp: TcpSpec::for_datapath(&mut a, true)?,
    };
    finish(a)?;
    if !(f.rate > 0.0 && !f.seconds.is_zero() && f.size > 0) {
        return Err("--rate, --seconds and --size must be positive".into());
    }
    if f.conns == 0 || f.modes.is_empty() {
        return Err("--conns must be at least 1 and --modes name at least one mode".into());
    }
    Ok(f)
}

fn server_args(mut a: Args) -> Result<ServerArgs, String> {
    let s = ServerArgs {
        listen: a
            .parse("--listen")?
            .unwrap_or(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878)),
        cores: a.parse("--cores")?.unwrap_or(1),
        seconds: a.secs("--seconds")?,
        until_stdin_closes: a.switch("--until-stdin-closes"),
        spin: a.switch("--spin"),
        tcp: TcpSpec::for_datapath(&mut a, true)?,
    };
    finish(a)?;
    Ok(s)
}

/// Each mode's echo rate on this machine ([`tcp_echo::capacity`], against a server of its
/// own, so that the run's counters are the run's); warns on stderr when the offered load is
/// near or beyond the least of them.
fn check_load(a: &Fig9) -> Result<(), String> {
    let server = tcp_echo::spawn(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), &a.tcp, a.spin)?;
    let addr = server.addr();
    let mut slowest: Option<(f64, Mode)> = None;
    for &mode in &a.modes {
        let mut c = Client::connect(addr, a.conns, mode, a.size, &a.tcp)
            .map_err(|e| format!("{mode}: {e}"))?;
        let rps = tcp_echo::capacity(&mut c, PROBE_TIME)
            .map_err(|e| format!("{mode}: measuring the echo rate: {e}"))?;
        eprintln!("[fig9] {mode}: about {rps:.0} req/s here");
        if slowest.is_none_or(|(r, _)| rps < r) {
            slowest = Some((rps, mode));
        }
    }
    server
        .stop()
        .map_err(|e| format!("the load check's server: {e}"))?;
    if let Some((capacity, mode)) = slowest {
        if let Some(w) = tcp_echo::load_warning(a.rate, capacity, mode) {
            eprintln!("[fig9] {w}");
        }
    }
    Ok(())
}

fn fig9(a: &Fig9) -> Result<(), String> {
    check_load(a)?;
    let server = tcp_echo::spawn(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), &a.tcp, a.spin)?;
    let addr = server.addr();
    let mut rows = Vec::new();
    let mut json = Vec::new();
    println!(
        "TCP echo over 127.0.0.1: {} req/s of {} B, {} connections, {} s per mode (+{} s warm-up)",
        a.rate,
        a.size,
        a.conns,
        a.seconds.as_secs_f64(),
        a.warmup.as_secs_f64()
    );
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>8} {:>8}",
        "mode", "p5 µs", "p25 µs", "p50 µs", "p75 µs", "p99 µs", "achieved/s", "lost", "wrong"
    );
    for &mode in &a.modes {
        let schedule = Schedule::poisson(&ScheduleConfig {
            rate_rps: a.rate,
            bound: Bound::Duration(a.seconds + a.warmup),
            threads: 1,
            seed: 9,
        })
        .map_err(|e| e.to_string())?;
        let cfg = RunConfig {
            warmup: a.warmup,
            timeout: TIMEOUT,
            busy_poll: a.spin,
            ..RunConfig::default()
        };
        let report = loadgen::run(
            &schedule,
            &cfg,
            |_| Client::connect(addr, a.conns, mode, a.size, &a.tcp),
            &verdict_ok,
        )
        .map_err(|e| format!("{mode}: {e}"))?;
        let c = report.counters;
        let Some(p) = Percentiles::of(&report.latency) else {
            println!(
                "{mode:<12} no verified responses (lost {}, wrong {})",
                c.lost, c.mismatched
            );
            continue;
        };
        println!(
            "{:<12} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>11.0} {:>8} {:>8}",
            mode.to_string(),
            p.p5,
            p.p25,
            p.p50,
            p.p75,
            p.p99,
            report.achieved_rps,
            c.lost,
            c.mismatched
        );
        json.push(serde_json::json!({
            "mode": mode.to_string(), "offered_rps": a.rate, "achieved_rps": report.achieved_rps,
            "size": a.size, "connections": a.conns,
            "p5_us": p.p5, "p25_us": p.p25, "p50_us": p.p50, "p75_us": p.p75, "p99_us": p.p99,
            "sent": c.sent, "verified": c.verified, "lost": c.lost, "wrong": c.mismatched,
        }));
        rows.push((mode.to_string(), p));
    }
    let stats = server.stop().map_err(|e| format!("server: {e}"))?;
    println!(
        "server: {} echoed, {} bad requests, {} replies refused",
        stats.replied, stats.malformed, stats.send_failed
    );
    let s = stats.sends.unwrap_or_default();
    println!(
        "server sends ({}): {} zero-copy ({} B; {} of them copied by the kernel), {} copied ({} B)",
        a.tcp,
        s.zero_copy_sends,
        s.zero_copy_bytes,
        s.zero_copy_copied_sends,
        s.copied_sends,
        s.copied_bytes
    );
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let j = a.out.join("fig9.json");
    std::fs::write(&j, serde_json::to_string_pretty(&json).expect("json"))
        .map_err(|e| format!("{}: {e}", j.display()))?;
    let title = format!("TCP echo, {} req/s of {} B (127.0.0.1)", a.rate, a.size);
    plot::box_plot(
        &title,
        &rows,
        &a.out.join("fig9.svg"),
        &a.out.join("fig9.png"),
    )?;
    println!("wrote {}/fig9.{{json,svg,png}}", a.out.display());
    Ok(())
}

const CARGO_RUN: CargoRun = CargoRun {
    package: "tcp-echo",
    bin: None,
    args: "server ...",
};

/// The [`EchoAll`] handler on the launcher's kernel-TCP arm, as `echo server --datapath tcp`
/// runs its handler: `--cores` cores, until `--seconds` or `--until-stdin-closes`.
fn server(s: &ServerArgs) -> Result<(), String> {
    let mut l = Launch::new(
        DatapathSpec {
            tcp: s.tcp,
            ..DatapathSpec::new(DatapathKind::Tcp)
        },
        SocketConfig::new(s.listen),
        "tcp-echo (every mode)",
        CARGO_RUN,
    );
    l.cores = s.cores;
    l.spin = s.spin;
    l.name = "tcp-echo-server".to_owned();
    let stats = serve_until(s.seconds, s.until_stdin_closes, |stop| {
        app_server::launch(&l, |mem, _| Ok(EchoAll::new(mem)), stop)
    })?;
    eprintln!("[server] tcp-echo done: {stats}");
    Ok(())
}

fn main() -> ExitCode {
    app_server::cli::main(
        "tcp-echo",
        USAGE,
        &[
            ("fig9", |a| fig9(&fig9_args(a)?)),
            ("server", |a| server(&server_args(a)?)),
        ],
        std::env::args().skip(1).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig9_line(line: &str) -> Result<Fig9, String> {
        fig9_args(Args::from_line(line))
    }

    #[test]
    fn fig9_reads_every_flag_and_keeps_the_defaults() {
        let a = fig9_line(
            "--rate 1000 --size 512 --seconds 1.5 --warmup 0.25 --conns 2 \
             --modes raw,capnp --out o --spin",
        )
        .unwrap();
        assert_eq!(
            a,
            Fig9 {
                rate: 1000.0,
                size: 512,
                seconds: Duration::from_millis(1500),
                warmup: Duration::from_millis(250),
                conns: 2,
                modes: vec![Mode::Raw, Mode::CAPNP],
                out: PathBuf::from("o"),
                spin: true,
                tcp: TcpSpec::default(),
            }
        );
        assert_eq!(
            fig9_line("").unwrap(),
            Fig9 {
                rate: DEFAULT_RATE,
                size: 1024,
                seconds: Duration::from_secs(2),
                warmup: Duration::from_millis(500),
                conns: 4,
                modes: Mode::ALL.to_vec(),
                out: PathBuf::from("results/tcp-echo"),
                spin: false,
                tcp: TcpSpec::default(),
            }
        );
        let paper = fig9_line("--rate 175000 --tcp-zc io-uring --tcp-zc-threshold 1024").unwrap();
        assert_eq!(paper.rate, PAPER_RATE);
        assert_eq!(
            paper.tcp.zero_copy,
            datapath_tcp::ZeroCopy {
                mode: datapath_tcp::ZeroCopyMode::IoUring,
                threshold: 1024
            }
        );
    }

    #[test]
    fn server_reads_its_flags_and_keeps_the_defaults() {
        let s = server_args(Args::from_line(
            "--listen 127.0.0.1:9000 --cores 2 --seconds 1 --until-stdin-closes --spin",
        ))
        .unwrap();
        assert_eq!(
            s,
            ServerArgs {
                listen: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9000),
                cores: 2,
                seconds: Some(Duration::from_secs(1)),
                until_stdin_closes: true,
                spin: true,
                tcp: TcpSpec::default(),
            }
        );
        assert_eq!(
            server_args(Args::from_line("")).unwrap(),
            ServerArgs {
                listen: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878),
                cores: 1,
                seconds: None,
                until_stdin_closes: false,
                spin: false,
                tcp: TcpSpec::default(),
            }
        );
        let off = server_args(Args::from_line("--tcp-zc off")).unwrap();
        assert_eq!(off.tcp.zero_copy, datapath_tcp::ZeroCopy::OFF);
    }

    #[test]
    fn an_unknown_flag_or_a_bad_value_is_refused() {
        let e = fig9_line("--rate 10 --bogus 1").unwrap_err();
        assert!(e.contains("--bogus") && e.ends_with(USAGE), "{e}");
        assert!(fig9_line("--rate 0").is_err());
        assert!(fig9_line("--rate")
            .unwrap_err()
            .contains("--rate needs a value"));
        assert!(fig9_line("--modes raw,zip").is_err());
        assert!(fig9_line("--conns 0").is_err());
        // Each command takes only its own flags.
        assert!(fig9_line("--listen 127.0.0.1:1")
            .unwrap_err()
            .ends_with(USAGE));
        let e = server_args(Args::from_line("--rate 10")).unwrap_err();
        assert!(e.starts_with("unexpected argument \"--rate\"") && e.ends_with(USAGE));
    }
}
