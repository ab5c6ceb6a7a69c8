//! A minimal echo server on one DPDK port, for bringing up an E810 (or any DPDK port) before
//! running the full echo benchmark: every message received is sent back to its sender
//! zero-copy (the received buffer becomes the single scatter-gather entry of the reply).
//!
//! ```text
//! ice_echo --dpdk-args "-l 2 -a 0000:3b:00.0" --bind 10.0.0.2:54321 [--mtu 1500] [--seconds N]
//! ice_echo --dpdk-args "-l 2 -a 0000:3b:00.0" --bind 10.0.0.2:54321 --probe
//! ```
//!
//! `--probe` prints what the port reports (driver, MAC, segment limit, offloads) and exits.
//! Otherwise it prints its counters once per second on stderr.

#![forbid(unsafe_code)]

use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Receive, Transmit};
use datapath_ice::datapath;

struct Args {
    dpdk_args: String,
    bind: SocketAddrV4,
    mtu: usize,
    seconds: Option<u64>,
    probe: bool,
}

fn parse() -> Result<Args, String> {
    let mut dpdk_args = None;
    let mut bind = None;
    let mut mtu = 1500;
    let mut seconds = None;
    let mut probe = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--dpdk-args" => dpdk_args = Some(val()?),
            "--bind" => bind = Some(val()?.parse().map_err(|e| format!("--bind: {e}"))?),
            "--mtu" => mtu = val()?.parse().map_err(|e| format!("--mtu: {e}"))?,
            "--seconds" => seconds = Some(val()?.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--probe" => probe = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        dpdk_args: dpdk_args.ok_or("--dpdk-args is required")?,
        bind: bind.ok_or("--bind IP:PORT is required")?,
        mtu,
        seconds,
        probe,
    })
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ice_echo: {e}\nusage: ice_echo --dpdk-args \"...\" --bind IP:PORT [--mtu N] [--seconds N] [--probe]");
            return ExitCode::from(2);
        }
    };
    let mut dp = match datapath::open(&args.dpdk_args, args.bind, args.mtu) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ice_echo: opening the port failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let info = dp.port_info().clone();
    eprintln!(
        "port {} driver {} mac {} max_segments {} (nb_seg_max {}, nb_mtu_seg_max {}) \
         checksum offload {} tx_offload_capa {:#x} rx_offload_capa {:#x}",
        info.port,
        info.driver,
        dp.mac(),
        dp.max_segments(),
        info.nb_seg_max,
        info.nb_mtu_seg_max,
        dp.checksum_offload(),
        info.tx_offload_capa,
        info.rx_offload_capa,
    );
    if args.probe {
        return ExitCode::SUCCESS;
    }
    let start = Instant::now();
    let mut last = start;
    let mut msgs = Vec::with_capacity(64);
    let (mut echoed, mut failed) = (0u64, 0u64);
    loop {
        if let Err(e) = dp.recv_burst(&mut msgs) {
            eprintln!("ice_echo: receive failed: {e}");
            return ExitCode::FAILURE;
        }
        for m in msgs.drain(..) {
            match dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data)) {
                Ok(()) => echoed += 1,
                Err(_) => failed += 1,
            }
        }
        if dp.flush().is_err() {
            failed += 1;
        }
        dp.poll_completions();
        let now = Instant::now();
        if now - last >= Duration::from_secs(1) {
            last = now;
            let c = dp.counters();
            eprintln!(
                "[{:>4}s] echoed {echoed} failed {failed} delivered {} drops {} {:?}",
                (now - start).as_secs(),
                c.delivered,
                c.total_drops(),
                dp.stats()
            );
        }
        if args
            .seconds
            .is_some_and(|s| now - start >= Duration::from_secs(s))
        {
            return ExitCode::SUCCESS;
        }
    }
}
