//! The KV server's whole path per request, for callgrind (`scripts/path-instructions.sh`): a
//! workload's requests go through one server on the in-process loopback NIC in bursts of 32,
//! each burst received by exactly one `Server::poll` (receive, dispatch, execute, build and post
//! the reply, flush, reap completions), so that function's inclusive instructions over the
//! requests are the cost of one request from receive to reply posted, with no empty polls in
//! it.
//!
//! `cargo run --release -p kv-store --example kv_path -- WORKLOAD LIST_LENS SERIALIZATION
//! [REQUESTS]` (WORKLOAD `google` or `twitter`; LIST_LENS as `kv bench --list-lens`, ignored by
//! twitter). Prints the server's counters; exits non-zero when a burst was not received whole.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::{Arena, Msg};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use kv_store::client::send_op;
use kv_store::server::{memory_config, ServerConfig};
use kv_store::{OpKind, Serialization};
use kv_workloads::{GoogleConfig, TwitterConfig, WorkloadConfig};

const BURST: usize = 32;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, lens, ser, rest @ ..] = args.as_slice() else {
        return Err("usage: kv_path WORKLOAD LIST_LENS SERIALIZATION [REQUESTS]".into());
    };
    let ser: Serialization = ser.parse()?;
    let n: usize = rest
        .first()
        .map_or(Ok(4096), |s| s.parse().map_err(|e| format!("{e}")))?;
    let cfg = match workload.as_str() {
        "google" => {
            let mut c = GoogleConfig::with_list_lens(lens)?;
            c.keys = 10_000;
            WorkloadConfig::Google(c)
        }
        "twitter" => WorkloadConfig::Twitter(TwitterConfig {
            keys: 10_000,
            ..TwitterConfig::default()
        }),
        w => return Err(format!("workload {w:?}: google or twitter")),
    };
    let w = cfg.build().map_err(|e| e.to_string())?;

    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let nic = |last| {
        let mut c =
            LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
        c.memory = memory_config(256 * 1024, 1 << 30);
        // A burst of large values is many frames: each burst is received by one poll.
        c.rx_burst = 4096;
        c.tx_ring = 4096;
        c
    };
    let (a, mut b) = Loopback::pair(nic(1), nic(2)).map_err(|e| e.to_string())?;
    let mut server = kv_store::server::new(a, ServerConfig::new(ser));
    let loaded = kv_store::load::load_store(&cfg, server.handler_mut().store_mut())?;
    eprintln!("{loaded}");
    let conn = b.connect(addr(1)).map_err(|e| e.to_string())?;
    server.poll(); // address resolution
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).map_err(|e| e.to_string())?;

    let ops = w.requests(n, 7);
    let (mut arena, mut buf) = (Arena::new(), Vec::new());
    let mut id = 1u32;
    for burst in ops.chunks(BURST) {
        for op in burst {
            send_op(
                &mut b,
                conn,
                Msg::new(id, OpKind::of(op).msg_type()),
                ser,
                op,
                &mut arena,
                &mut buf,
            )
            .map_err(|e| e.to_string())?;
            id += 1;
        }
        b.flush().map_err(|e| e.to_string())?;
        let got = server.poll();
        if got != burst.len() {
            return Err(format!(
                "a poll received {got} of a burst of {}",
                burst.len()
            ));
        }
        rx.clear();
        b.recv_burst(&mut rx).map_err(|e| e.to_string())?;
        b.poll_completions();
    }
    println!("{}", server.stats());
    Ok(())
}
