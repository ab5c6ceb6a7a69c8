//! The main program of an app with subcommands (`echo bench | server | …`, `kv …`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cli_args::Args;

use datapath_open::{DatapathKind, DatapathSpec, TcpSpec};

/// One subcommand: its name and what runs it on the arguments after it.
pub type Command = (&'static str, fn(Args) -> Result<(), String>);

/// Runs the subcommand named by the first of `argv` with the rest. With no arguments prints
/// `usage` on stderr and fails; with `-h`/`--help` prints it on stdout and succeeds; an unknown
/// subcommand or a subcommand's error is printed as `{prog}: {error}` and fails.
pub fn main(prog: &str, usage: &str, commands: &[Command], mut argv: Vec<String>) -> ExitCode {
    if argv.is_empty() {
        eprint!("{usage}");
        return ExitCode::FAILURE;
    }
    if argv.iter().any(|a| a == "-h" || a == "--help") {
        print!("{usage}");
        return ExitCode::SUCCESS;
    }
    let cmd = argv.remove(0);
    let r = match commands.iter().find(|(name, _)| *name == cmd) {
        Some((_, run)) => run(Args::new(argv)),
        None => Err(format!("unknown command {cmd:?}\n{usage}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prog}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--threshold N` of a bench or server command: the hybrid threshold given, or `None` for the
/// process default ([`cornflakes::threshold_setting`]); says which on stderr as
/// `{role} hybrid threshold: …`.
pub fn threshold(a: &mut Args, role: &str) -> Result<Option<usize>, String> {
    let t = a.parse::<usize>("--threshold")?;
    match t {
        Some(t) => eprintln!("{role} hybrid threshold: {t} B (from --threshold)"),
        None => eprintln!(
            "{role} hybrid threshold: {}",
            cornflakes::threshold_setting()
        ),
    }
    Ok(t)
}

/// What the benchmark commands that run their own server (`echo bench`, `kv bench`) run on:
/// the emulated ConnectX, kernel UDP or TCP on 127.0.0.1, AF_XDP on a veth of their own.
pub const BENCH_DATAPATHS: [DatapathKind; 4] = [
    DatapathKind::Emu,
    DatapathKind::Socket,
    DatapathKind::Tcp,
    DatapathKind::Xdp,
];

/// The datapath of a benchmark command (`echo bench`, `kv bench`): `--datapath` among
/// `accepts`, `--conns N` and kernel TCP's flags ([`TcpSpec`]), and for `tcp` the connections
/// per client thread and server core (`--conns N`, default 1). Without `--datapath`: the
/// emulated NIC when `emu_cpus` finds the CPUs for it, else the kernel sockets (saying why on
/// stderr). A kind not accepted is the error `unknown(name)`; `--conns` and the TCP flags go
/// with `tcp` only, which says its zero-copy settings on stderr. The bench runs its own devices
/// and reads `--mtu` with its load flags.
pub fn bench_datapath(
    a: &mut Args,
    accepts: &[DatapathKind],
    emu_cpus: impl FnOnce() -> Result<(), String>,
    unknown: impl FnOnce(&str) -> String,
) -> Result<(DatapathSpec, Option<usize>), String> {
    let default = || match emu_cpus() {
        Ok(()) => DatapathKind::Emu,
        Err(e) => {
            eprintln!("[bench] socket datapath: {e}");
            DatapathKind::Socket
        }
    };
    let spec = DatapathSpec::choose(a, accepts, default, unknown)?;
    let tcp = spec.kind == DatapathKind::Tcp;
    let conns = tcp_conns(a, tcp)?;
    if tcp {
        eprintln!("[bench] TCP {}", spec.tcp);
    }
    Ok((spec, conns))
}

/// What may drive a bench whose server runs on AF_XDP (`--client-datapath`).
pub const BENCH_CLIENTS: [DatapathKind; 2] = [DatapathKind::Xdp, DatapathKind::Socket];

/// The clients' datapath of a bench whose server runs on `server`: `--client-datapath socket
/// | xdp`, which only the AF_XDP bench takes. Its clients run on the host's end of the veth:
/// an AF_XDP client core there (`xdp`, the default) or kernel UDP sockets (`socket`). `None`
/// for any other server, whose clients run on its own datapath (the flag is then an error).
pub fn bench_clients(a: &mut Args, server: DatapathKind) -> Result<Option<DatapathKind>, String> {
    let given = a.take("--client-datapath")?;
    match (server, given) {
        (DatapathKind::Xdp, None) => Ok(Some(DatapathKind::Xdp)),
        (DatapathKind::Xdp, Some(name)) => match name.parse::<DatapathKind>() {
            Ok(k) if BENCH_CLIENTS.contains(&k) => Ok(Some(k)),
            _ => Err(format!(
                "--client-datapath: {}",
                DatapathKind::unknown(&name, &BENCH_CLIENTS)
            )),
        },
        (_, None) => Ok(None),
        (_, Some(_)) => Err(
            "--client-datapath goes with --datapath xdp (the other benches' clients run on their server's datapath)"
                .to_owned(),
        ),
    }
}

/// AF_XDP client cores on a veth: one. A veth delivers a frame on the receive queue of the
/// transmit queue it was sent on, which the kernel picks by the sending CPU (XPS), not by the
/// flow, so replies to a second client core's port would not reach its queue. `threads`
/// client cores asked: an error saying so when more than one.
pub fn one_veth_client_core(threads: usize) -> Result<(), String> {
    if threads > 1 {
        return Err(format!(
            "--threads {threads}: an AF_XDP client on a veth runs one client core (a veth steers a \
             frame to a queue by the CPU that sent it, XPS, not by its port); run one thread, or \
             --client-datapath socket for several kernel-socket client threads"
        ));
    }
    Ok(())
}

/// Runs `body` until `--seconds` pass or, with `--until-stdin-closes`, standard input closes
/// (how a parent, e.g. the AF_XDP bench, stops a child server); `body` gets the stop flag.
/// The timer and the stdin reader are detached: when `body` ends first (an error, say) they
/// do not hold the program up.
pub fn serve_until<T>(
    seconds: Option<Duration>,
    until_stdin_closes: bool,
    body: impl FnOnce(&AtomicBool) -> Result<T, String>,
) -> Result<T, String> {
    let stop = Arc::new(AtomicBool::new(false));
    if let Some(d) = seconds {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    if until_stdin_closes {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, Ordering::Relaxed);
        });
    }
    body(&stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn bench_datapaths_parse_once() {
        use DatapathKind::{Emu, Socket, Tcp, Xdp};
        let parse = |line: &str, emu: Result<(), String>| {
            let mut a = Args::from_line(line);
            let (spec, conns) =
                bench_datapath(&mut a, &BENCH_DATAPATHS, || emu, |o| format!("no {o}"))?;
            a.finish()?;
            Ok::<_, String>((spec.kind, conns, spec.tcp))
        };
        let no_cpus = || Err("1 CPU".to_owned());
        let d = TcpSpec::default();
        assert_eq!(parse("", Ok(())), Ok((Emu, None, d)));
        assert_eq!(parse("", no_cpus()), Ok((Socket, None, d)));
        assert_eq!(parse("--datapath emu", no_cpus()), Ok((Emu, None, d)));
        assert_eq!(parse("--datapath xdp", Ok(())), Ok((Xdp, None, d)));
        assert_eq!(parse("--datapath tcp", Ok(())), Ok((Tcp, Some(1), d)));
        assert_eq!(
            parse("--datapath tcp --conns 4", Ok(())),
            Ok((Tcp, Some(4), d))
        );
        let uring = TcpSpec {
            zero_copy: datapath_tcp::ZeroCopy {
                mode: datapath_tcp::ZeroCopyMode::IoUring,
                threshold: 2048,
            },
        };
        assert_eq!(
            parse(
                "--tcp-zc io-uring --datapath tcp --tcp-zc-threshold 2048",
                Ok(())
            ),
            Ok((Tcp, Some(1), uring))
        );
        assert_eq!(
            parse("--datapath emu --tcp-zc off", Ok(())).unwrap_err(),
            "--tcp-zc and --tcp-zc-threshold go with --datapath tcp"
        );
        let conns = "--conns N (at least 1) goes with --datapath tcp";
        assert_eq!(
            parse("--datapath tcp --conns 0", Ok(())).unwrap_err(),
            conns
        );
        assert_eq!(
            parse("--datapath socket --conns 2", Ok(())).unwrap_err(),
            conns
        );
        assert_eq!(parse("--datapath ice", Ok(())).unwrap_err(), "no ice");
        assert_eq!(parse("--datapath dpdk", Ok(())).unwrap_err(), "no dpdk");
    }

    #[test]
    fn threshold_is_read_once() {
        let mut a = Args::from_line("--threshold 300 --x");
        assert_eq!(threshold(&mut a, "[t]"), Ok(Some(300)));
        assert_eq!(threshold(&mut a, "[t]"), Ok(None));
        assert!(threshold(&mut Args::from_line("--threshold big"), "[t]").is_err());
    }

    #[test]
    fn serve_until_stops_after_the_seconds_and_returns_at_once_on_an_error() {
        let t = Instant::now();
        let spins = serve_until(Some(Duration::from_millis(50)), false, |stop| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n)
        })
        .unwrap();
        assert!(spins > 0 && t.elapsed() >= Duration::from_millis(50));
        // An error before the time is up is returned without waiting for the timer.
        let t = Instant::now();
        let e = serve_until(Some(Duration::from_secs(3600)), false, |_| {
            Err::<(), _>("no such device".to_owned())
        });
        assert_eq!(e.unwrap_err(), "no such device");
        assert!(t.elapsed() < Duration::from_secs(60));
    }
}

/// The transport of a client against a running server (`echo client`, `kv client`): its
/// `--datapath` and the flags of the one chosen, as a server reads them
/// ([`DatapathSpec::from_args`] among [`DatapathKind::SERVERS`]), with `--conns N`.
/// `--datapath socket` (the default, UDP) gives `(None, _, None)`; `--datapath tcp` gives
/// `(Some(n), tcp, None)`, `n` TCP connections per server core and client thread (`--conns N`,
/// default 1), with the client's zero-copy sends ([`TcpSpec`]'s flags, which go with `tcp`
/// only; said on stderr); `--datapath xdp | mlx5 | ice` with their device flags gives the
/// kernel-bypass spec the client cores open ([`crate::spawn_on_cores`]) as the third. The
/// clients read `--mtu` with their load flags first and set the spec's from it. The TCP server may be any that speaks the stream framing: `echo server --datapath
/// tcp`, `kv server --datapath tcp`, or `demi-server` over Demikernel (demikernel/,
/// docs/tcp.md).
pub fn client_transport(
    a: &mut Args,
) -> Result<(Option<usize>, TcpSpec, Option<DatapathSpec>), String> {
    let spec = DatapathSpec::from_args(a, DatapathKind::SERVERS)?;
    let conns = tcp_conns(a, spec.kind == DatapathKind::Tcp)?;
    Ok(match spec.kind {
        DatapathKind::Socket => (None, spec.tcp, None),
        DatapathKind::Tcp => {
            eprintln!("[client] TCP {}", spec.tcp);
            (conns, spec.tcp, None)
        }
        _ => (None, spec.tcp, Some(spec)),
    })
}

/// `--conns N`, the one rule for benches and clients: TCP connections (default 1) when the
/// datapath is `tcp`, an error with any other datapath or when N is 0.
fn tcp_conns(a: &mut Args, tcp: bool) -> Result<Option<usize>, String> {
    match a.parse::<usize>("--conns")? {
        Some(n) if !tcp || n == 0 => {
            Err("--conns N (at least 1) goes with --datapath tcp".to_owned())
        }
        Some(n) => Ok(Some(n)),
        None => Ok(tcp.then_some(1)),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn transport(args: &[&str]) -> Result<Option<usize>, String> {
        let mut a = Args::new(args.iter().map(|s| s.to_string()).collect());
        let (t, spec, bypass) = client_transport(&mut a)?;
        a.finish()?;
        assert_eq!(spec, TcpSpec::default());
        assert_eq!(bypass, None);
        Ok(t)
    }

    #[test]
    fn a_client_runs_on_udp_or_on_tcp_with_n_connections() {
        assert_eq!(transport(&[]), Ok(None));
        assert_eq!(transport(&["--datapath", "socket"]), Ok(None));
        assert_eq!(transport(&["--datapath", "tcp"]), Ok(Some(1)));
        assert_eq!(
            transport(&["--datapath", "tcp", "--conns", "4"]),
            Ok(Some(4))
        );
        assert!(transport(&["--conns", "4"]).is_err());
        assert!(transport(&["--datapath", "tcp", "--conns", "0"]).is_err());
        assert!(transport(&["--datapath", "dpdk"])
            .unwrap_err()
            .starts_with("unknown datapath \"dpdk\""));
        let mut a = Args::from_line("--datapath tcp --tcp-zc off");
        let (conns, spec, _) = client_transport(&mut a).unwrap();
        assert_eq!(
            (conns, spec.zero_copy),
            (Some(1), datapath_tcp::ZeroCopy::OFF)
        );
        assert!(transport(&["--tcp-zc-threshold", "1"]).is_err());
    }

    #[test]
    fn a_client_runs_on_kernel_bypass_with_the_servers_flags() {
        let bypass = |line: &str| {
            let mut a = Args::from_line(line);
            let r = client_transport(&mut a).map(|(conns, _, t)| (conns, t));
            a.finish().map(|()| r)
        };
        let (conns, t) = bypass("--datapath xdp --ifname veth1 --peer 10.0.0.1=02:00:00:00:00:01")
            .unwrap()
            .unwrap();
        assert_eq!(conns, None);
        let x = t.unwrap();
        assert_eq!(
            (x.kind, x.device.as_str(), x.peer.map(|p| p.1[5])),
            (DatapathKind::Xdp, "veth1", Some(1))
        );
        let mut a = Args::new(
            ["--datapath", "ice", "--dpdk-args", "-l 2 -a 0000:3b:00.0"]
                .map(str::to_owned)
                .to_vec(),
        );
        let (_, _, t) = client_transport(&mut a).unwrap();
        a.finish().unwrap();
        let ice = t.unwrap();
        assert_eq!(
            (ice.kind, ice.device.as_str()),
            (DatapathKind::Ice, "-l 2 -a 0000:3b:00.0")
        );
        let (_, t) = bypass("--datapath mlx5 --mlx5-dev mlx5_0")
            .unwrap()
            .unwrap();
        assert_eq!(t.map(|t| t.label()).as_deref(), Some("ConnectX mlx5_0"));
        assert_eq!(
            bypass("--datapath emu").unwrap().unwrap_err(),
            "unknown datapath \"emu\" (socket, tcp, xdp, mlx5 or ice)",
            "a bench's own device is no client's"
        );
        assert!(bypass("--datapath xdp").unwrap().is_err(), "no --ifname");
        assert!(bypass("--datapath xdp --ifname v --conns 2")
            .unwrap()
            .is_err());
    }

    fn clients(server: DatapathKind, args: &[&str]) -> Result<Option<DatapathKind>, String> {
        let mut a = Args::new(args.iter().map(|s| s.to_string()).collect());
        let k = bench_clients(&mut a, server)?;
        a.finish()?;
        Ok(k)
    }

    #[test]
    fn the_af_xdp_bench_chooses_its_clients_and_only_it() {
        let xdp = DatapathKind::Xdp;
        assert_eq!(clients(xdp, &[]), Ok(Some(xdp)));
        let socket = ["--client-datapath", "socket"];
        assert_eq!(clients(xdp, &socket), Ok(Some(DatapathKind::Socket)));
        assert_eq!(clients(xdp, &["--client-datapath", "xdp"]), Ok(Some(xdp)));
        let e = clients(xdp, &["--client-datapath", "mlx5"]).unwrap_err();
        assert!(e.contains("\"mlx5\" (xdp or socket)"), "{e}");
        assert_eq!(clients(DatapathKind::Socket, &[]), Ok(None));
        let e = clients(DatapathKind::Emu, &socket).unwrap_err();
        assert!(e.contains("goes with --datapath xdp"), "{e}");
    }

    #[test]
    fn a_veth_takes_one_af_xdp_client_core() {
        assert!(one_veth_client_core(1).is_ok());
        let e = one_veth_client_core(2).unwrap_err();
        assert!(e.contains("--threads 2") && e.contains("XPS"), "{e}");
    }
}
