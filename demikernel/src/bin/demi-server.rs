//! `demi-server echo | kv | calibrate`: the apps' own servers (echo's `Echo`, the KV store's
//! `Kv`, the calibration server's `Calib`) on the shared server skeleton (`app_server::Server`) over Demikernel's TCP (catpowder LibOS), the
//! Demikernel arm of the apps (docs/tcp.md, "The apps over Demikernel"). Clients are the apps'
//! own: `echo client --datapath tcp`, `kv client --datapath tcp`.

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::ExitCode;

use app_server::{Handler, Server};
use cli_args::Args;
use cornflakes::datapath::{Connect as _, DatapathMemory as _};
use cornflakes_demikernel::config::CatpowderConfig;
use cornflakes_demikernel::datapath::{DemiConfig, DemiDatapath};
use cornflakes_demikernel::io_error;
use demikernel::{LibOS, LibOSName};

const USAGE: &str = "\
usage:
  demi-server echo --mode M --bind IP:PORT (--ifname IF --peer IP=MAC [--mtu N] | --config PATH)
                   [--threshold N] [--seconds SECS] [--until-stdin-closes] [--spin]
  demi-server kv --serialization S --bind IP:PORT (--ifname IF --peer IP=MAC [--mtu N] | --config PATH)
                 [--workload W [workload options]] [--threshold N] [--max-item BYTES]
                 [--memory-limit BYTES] [--seconds SECS] [--until-stdin-closes] [--spin]
  demi-server calibrate --array-bytes N --bind IP:PORT (--ifname IF --peer IP=MAC [--mtu N] | --config PATH)
                        [--seconds SECS] [--until-stdin-closes] [--spin]
      The echo server, the KV store or the calibration server (the apps' own handlers, every mode / serialization of
      `echo server` / `kv server`) on one core over Demikernel's TCP: the catpowder LibOS runs
      its own ARP, IPv4 and TCP over a raw socket on IF and owns the --bind address, which
      the kernel must not have (it would answer with resets). Needs root (raw socket) and the
      interface's namespace's /sys (run it with `ip netns exec NS`, not from a thread that
      only entered the namespace). --peer IP=MAC: a static ARP entry for the client (--config
      PATH: a catpowder YAML file of your own instead). Messages are the stream frames of
      `--datapath tcp`; measure it with `echo client --datapath tcp` / `kv client --datapath
      tcp` (the same workload options for kv). Replies are copied into Demikernel's buffers
      (Demikernel 1.5.13 takes one LibOS-allocated segment per push: no zero-copy). Prints
      `[server] ready: LABEL on ADDR (Demikernel catpowder TCP on IF, core 0 of 1)`, its
      counters every second, and the totals at the end. An idle server sleeps 100 us between
      polls after 64 empty ones (Demikernel has no descriptor to block on); --spin only yields.
";

/// How long an idle server sleeps between polls (after `IDLE_SPINS` empty ones) without
/// `--spin`: Demikernel's retransmission timers and a new request wait at most this long.
const IDLE_SLEEP: std::time::Duration = std::time::Duration::from_micros(100);

/// The flags every server takes.
struct Common {
    bind: SocketAddrV4,
    seconds: Option<std::time::Duration>,
    until_stdin_closes: bool,
    spin: bool,
    threshold: Option<usize>,
    /// Where the catpowder configuration is (written here from --ifname/--peer, or --config).
    config: Result<PathBuf, CatpowderConfig>,
    ifname: String,
}

fn common(a: &mut Args) -> Result<Common, String> {
    let bind: SocketAddrV4 = a
        .parse("--bind")?
        .ok_or("--bind IP:PORT (the address Demikernel owns) is required")?;
    let seconds = a.secs("--seconds")?;
    let until_stdin_closes = a.switch("--until-stdin-closes");
    let spin = a.switch("--spin");
    let threshold = a.parse("--threshold")?;
    let config_path = a.take("--config")?;
    let ifname = a.take("--ifname")?;
    let peer = a.take("--peer")?;
    let mtu = a.parse::<usize>("--mtu")?;
    let (config, ifname) = match (config_path, ifname) {
        (Some(p), None) => (Ok(PathBuf::from(p)), "its configured interface".to_owned()),
        (None, Some(ifname)) => {
            let mut c = CatpowderConfig::for_interface(&ifname, *bind.ip())
                .map_err(|e| format!("--ifname {ifname}: {e}"))?;
            let peer = peer.ok_or("--ifname IF needs --peer IP=MAC (the client's address)")?;
            c.arp.push(netns_harness::host::parse_peer(&peer)?);
            if let Some(m) = mtu {
                c.mtu = m;
            }
            (Err(c), ifname)
        }
        _ => return Err("give either --ifname IF --peer IP=MAC or --config PATH".to_owned()),
    };
    Ok(Common {
        bind,
        seconds,
        until_stdin_closes,
        spin,
        threshold,
        config,
        ifname,
    })
}

/// Starts the LibOS (`CONFIG_PATH`), listens on `c.bind`, builds the handler on the datapath's
/// memory and serves until `--seconds` / stdin closes.
fn serve<H: Handler>(
    c: Common,
    label: &str,
    mut cfg: DemiConfig,
    make: impl FnOnce(&cornflakes::PinnedMemory) -> Result<H, String>,
) -> Result<(), String> {
    let written = match &c.config {
        Ok(p) => {
            std::env::set_var("CONFIG_PATH", p);
            None
        }
        Err(cc) => {
            let p = cc
                .write_in(&std::env::temp_dir())
                .map_err(|e| e.to_string())?;
            std::env::set_var("CONFIG_PATH", &p);
            Some(p)
        }
    };
    let libos = LibOS::new(LibOSName::Catpowder, None).map_err(|e| {
        format!(
            "starting the catpowder LibOS on {}: {}",
            c.ifname,
            io_error(e)
        )
    });
    if let Some(p) = &written {
        let _ = std::fs::remove_file(p);
    }
    let libos = libos?;
    cfg.listen = Some(c.bind);
    let dp = DemiDatapath::new(libos, cfg).map_err(|e| format!("listening on {}: {e}", c.bind))?;
    let handler = make(dp.memory())?;
    let mut server = Server::new(dp, handler);
    eprintln!(
        "[server] ready: {label} on {} (Demikernel catpowder TCP on {}, core 0 of 1)",
        server.datapath().local_addr(),
        c.ifname
    );
    let stats = app_server::cli::serve_until(c.seconds, c.until_stdin_closes, |stop| {
        // Demikernel has no descriptor to block on: an idle server sleeps IDLE_SLEEP between
        // polls (or only yields with --spin), so idle servers leave the CPU to others.
        let spin = c.spin;
        server.run(
            stop,
            Some(std::time::Duration::from_secs(1)),
            app_server::idle::IDLE_SPINS,
            &mut |_: &DemiDatapath| {
                if spin {
                    std::thread::yield_now()
                } else {
                    std::thread::sleep(IDLE_SLEEP)
                }
            },
        );
        Ok(server.stats())
    })?;
    eprintln!("[server] {label} done: {stats}");
    eprintln!("[server] demikernel: {:?}", server.datapath().stats());
    Ok(())
}

fn threshold(t: Option<usize>) -> usize {
    match t {
        Some(t) => {
            eprintln!("[server] hybrid threshold: {t} B (from --threshold)");
            t
        }
        None => {
            eprintln!(
                "[server] hybrid threshold: {}",
                cornflakes::threshold_setting()
            );
            cornflakes::default_threshold()
        }
    }
}

fn echo_cmd(mut a: Args) -> Result<(), String> {
    let mode: echo::Mode = a.parse("--mode")?.ok_or("--mode is required")?;
    let c = common(&mut a)?;
    a.finish()?;
    let cfg = echo::server::ServerConfig {
        mode,
        threshold: threshold(c.threshold),
    };
    serve(c, mode.name(), DemiConfig::new(None), |mem| {
        echo::server::Echo::new(mem, cfg)
    })
}

fn kv_cmd(mut a: Args) -> Result<(), String> {
    use kv_store::bench::BenchConfig;
    let ser: kv_store::Serialization = a
        .parse("--serialization")?
        .ok_or("--serialization is required")?;
    let wl = match a.take("--workload")? {
        Some(n) => Some(kv_store::load::workload_from_args(&mut a, &n)?),
        None => None,
    };
    let mut bc = BenchConfig::default();
    if let Some(m) = a.parse::<usize>("--max-item")? {
        bc.max_item = m;
    }
    if let Some(m) = a.parse::<usize>("--memory-limit")? {
        bc.memory_limit = m;
    }
    let c = common(&mut a)?;
    a.finish()?;
    let cfg = kv_store::server::ServerConfig {
        serialization: ser,
        threshold: threshold(c.threshold),
        store: kv_store::store::StoreConfig {
            memory_limit: bc.memory_limit,
            ..kv_store::store::StoreConfig::default()
        },
    };
    // The store's memory on top of the buffers, as `kv server --datapath tcp` sizes it.
    let sock = bc.socket(c.bind);
    let mut dc = DemiConfig::new(None);
    dc.memory = sock.memory.clone();
    dc.memory.max_item_size = dc.memory.max_item_size.max(datapath_tcp::DEFAULT_MAX_ITEM);
    dc.max_message_len = dc.max_message_len.min(sock.max_message_len.max(1));
    serve(c, ser.name(), dc, move |mem| {
        let mut kv = kv_store::server::Kv::new(mem, cfg);
        if let Some(wl) = &wl {
            let done = kv_store::load::load_store(wl, kv.store_mut())
                .map_err(|e| format!("loading the store: {e}"))?;
            eprintln!("[server {ser}] {done}");
        }
        Ok(kv)
    })
}

fn calibrate_cmd(mut a: Args) -> Result<(), String> {
    let array_bytes: usize = a
        .parse("--array-bytes")?
        .ok_or("--array-bytes is required")?;
    let c = common(&mut a)?;
    a.finish()?;
    if c.threshold.is_some() {
        return Err(
            "calibrate sets its thresholds per request (copy or sg): no --threshold".into(),
        );
    }
    // As `calibrate server`: the array in pinned memory beside the buffers.
    let mut dc = DemiConfig::new(None);
    dc.memory.max_item_size = dc.memory.max_item_size.max(calibrate::run::SOCKET_MAX_ITEM);
    dc.memory.max_bytes = array_bytes + (256 << 20);
    serve(c, "calibrate", dc, move |mem| {
        let calib = calibrate::server::Calib::new(mem, array_bytes)?;
        eprintln!(
            "[server] calibrate: {} array items ({} MiB)",
            calib.items(),
            array_bytes >> 20
        );
        Ok(calib)
    })
}

fn main() -> ExitCode {
    app_server::cli::main(
        "demi-server",
        USAGE,
        &[
            ("echo", echo_cmd),
            ("kv", kv_cmd),
            ("calibrate", calibrate_cmd),
        ],
        std::env::args().skip(1).collect(),
    )
}
