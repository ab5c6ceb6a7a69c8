//! The echo server's whole path per request, for callgrind (`scripts/path-instructions.sh`):
//! requests of one shape go through one server on the in-process loopback NIC in bursts of 32,
//! each burst received by exactly one `Server::poll` (receive, dispatch, echo, post the reply,
//! flush, reap completions), so that function's inclusive instructions over the requests are
//! the cost of one request from receive to reply posted, with no empty polls in it.
//!
//! `cargo run --release -p echo --example echo_path -- MODE SHAPE [REQUESTS]` (MODE as
//! `echo bench --modes`, SHAPE as `--shapes`, e.g. `list-8x512`). Prints the server's counters;
//! exits non-zero when a burst was not received whole or a reply does not check.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use echo::client::{RequestBuilder, Verifier};
use echo::mode::Mode;
use echo::server::ServerConfig;
use echo::shape::ShapeSpec;

const BURST: usize = 32;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, shape, rest @ ..] = args.as_slice() else {
        return Err("usage: echo_path MODE SHAPE [REQUESTS]".into());
    };
    let mode: Mode = mode.parse()?;
    let spec: ShapeSpec = shape.parse().map_err(|e: String| e.to_string())?;
    let n: u64 = rest
        .first()
        .map_or(Ok(4096), |s| s.parse().map_err(|e| format!("{e}")))?;
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let nic = |last| {
        let mut c =
            LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
        // A burst of large messages is many frames: each burst is received by one poll.
        c.rx_burst = 4096;
        c.tx_ring = 4096;
        c
    };
    let (a, mut b) = Loopback::pair(nic(1), nic(2)).map_err(|e| e.to_string())?;
    let mut server = echo::server::new(
        a,
        ServerConfig {
            mode,
            threshold: cornflakes::default_threshold(),
        },
    )?;
    let conn = b.connect(addr(1)).map_err(|e| e.to_string())?;
    server.poll(); // address resolution
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).map_err(|e| e.to_string())?;
    let verifier = Verifier::new(mode, spec)?;
    let mut req = RequestBuilder::new(mode, spec)?;
    let mut id = 1u64;
    while id <= n {
        let burst = BURST.min((n + 1 - id) as usize);
        for i in 0..burst as u64 {
            req.send(&mut b, conn, id + i).map_err(|e| e.to_string())?;
        }
        b.flush().map_err(|e| e.to_string())?;
        let got = server.poll();
        if got != burst {
            return Err(format!("a poll received {got} of a burst of {burst}"));
        }
        rx.clear();
        b.recv_burst(&mut rx).map_err(|e| e.to_string())?;
        for m in &rx {
            if !verifier.check(u64::from(m.msg.id), &m.data) {
                return Err(format!("reply {} does not check", m.msg.id));
            }
        }
        b.poll_completions();
        id += burst as u64;
    }
    println!("{}", server.stats());
    Ok(())
}
