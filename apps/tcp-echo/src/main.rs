//! `tcp-echo`: the paper's Figure 9 over Linux TCP (see the crate README).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use loadgen::{Bound, RunConfig, Schedule, ScheduleConfig};
use tcp_echo::{plot, verdict_ok, Client, Mode, Percentiles, TIMEOUT};

const USAGE: &str = "usage: tcp-echo fig9 [--rate REQ_PER_S] [--size BYTES] [--seconds S] \
[--warmup S] [--conns N] [--modes raw,cornflakes,...] [--out DIR] [--spin]
       tcp-echo server [--listen IP:PORT] [--spin]

fig9: an in-process server and an open-loop client on 127.0.0.1, one mode after the other at a
fixed Poisson load (default 175000 req/s of 1024-byte values, 2 s each after 0.5 s of warm-up,
4 connections); prints p5/p25/p50/p75/p99 per mode and writes DIR/fig9.json, fig9.svg,
fig9.png (default DIR results/tcp-echo). --spin: server and client busy-poll (a quiet machine
with a core each); by default an idle server waits in epoll_wait and the client yields.
server: the echo server alone (every mode), until killed.";

#[derive(Debug, PartialEq)]
struct Args {
    rate: f64,
    size: usize,
    seconds: f64,
    warmup: f64,
    conns: usize,
    modes: Vec<Mode>,
    out: PathBuf,
    listen: SocketAddrV4,
    spin: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        rate: 175_000.0,
        size: 1024,
        seconds: 2.0,
        warmup: 0.5,
        conns: 4,
        modes: Mode::ALL.to_vec(),
        out: PathBuf::from("results/tcp-echo"),
        listen: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878),
        spin: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: &String| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--rate" => a.rate = num(val()?)?,
            "--size" => a.size = num(val()?)? as usize,
            "--seconds" => a.seconds = num(val()?)?,
            "--warmup" => a.warmup = num(val()?)?,
            "--conns" => a.conns = num(val()?)? as usize,
            "--modes" => {
                a.modes = val()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<Vec<Mode>, String>>()?
            }
            "--out" => a.out = PathBuf::from(val()?),
            "--spin" => a.spin = true,
            "--listen" => {
                a.listen = val()?
                    .parse()
                    .map_err(|_| format!("{flag}: not an IPv4 address and port"))?
            }
            _ => return Err(format!("unknown argument {flag}\n{USAGE}")),
        }
    }
    if !(a.rate > 0.0 && a.seconds > 0.0 && a.warmup >= 0.0 && a.size > 0) {
        return Err("--rate, --seconds and --size must be positive".into());
    }
    Ok(a)
}

fn fig9(a: &Args) -> Result<(), String> {
    let server = tcp_echo::spawn(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0), a.spin)?;
    let addr = server.addr();
    let mut rows = Vec::new();
    let mut json = Vec::new();
    println!(
        "TCP echo over 127.0.0.1: {} req/s of {} B, {} connections, {} s per mode (+{} s warm-up)",
        a.rate, a.size, a.conns, a.seconds, a.warmup
    );
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>8} {:>8}",
        "mode", "p5 µs", "p25 µs", "p50 µs", "p75 µs", "p99 µs", "achieved/s", "lost", "wrong"
    );
    for &mode in &a.modes {
        let schedule = Schedule::poisson(&ScheduleConfig {
            rate_rps: a.rate,
            bound: Bound::Duration(Duration::from_secs_f64(a.seconds + a.warmup)),
            threads: 1,
            seed: 9,
        })
        .map_err(|e| e.to_string())?;
        let cfg = RunConfig {
            warmup: Duration::from_secs_f64(a.warmup),
            timeout: TIMEOUT,
            busy_poll: a.spin,
            ..RunConfig::default()
        };
        let report = loadgen::run(
            &schedule,
            &cfg,
            |_| Client::connect(addr, a.conns, mode, a.size),
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

fn server(a: &Args) -> Result<(), String> {
    let s = tcp_echo::spawn(a.listen, a.spin)?;
    println!("tcp-echo server on {}", s.addr());
    s.serve_until(&AtomicBool::new(false)).map(|_| ())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("fig9") => parse(&args[1..]).and_then(|a| fig9(&a)),
        Some("server") => parse(&args[1..]).and_then(|a| server(&a)),
        _ => Err(USAGE.to_string()),
    };
    if let Err(e) = r {
        eprintln!("tcp-echo: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig9_line(line: &str) -> Result<Args, String> {
        parse(
            &line
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
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
            Args {
                rate: 1000.0,
                size: 512,
                seconds: 1.5,
                warmup: 0.25,
                conns: 2,
                modes: vec![Mode::Raw, Mode::CAPNP],
                out: PathBuf::from("o"),
                listen: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878),
                spin: true,
            }
        );
        assert_eq!(
            fig9_line("").unwrap(),
            Args {
                rate: 175_000.0,
                size: 1024,
                seconds: 2.0,
                warmup: 0.5,
                conns: 4,
                modes: Mode::ALL.to_vec(),
                out: PathBuf::from("results/tcp-echo"),
                listen: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878),
                spin: false,
            }
        );
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
    }
}
