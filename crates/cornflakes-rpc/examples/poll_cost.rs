//! The server skeleton's instructions per request, for callgrind: a [`Server`] on the
//! in-process loopback NIC answers bursts of requests with 64-byte copies, every poll finding
//! a burst (no empty polls), so `(Ir(ROUNDS2) - Ir(ROUNDS1)) / (BURST × (ROUNDS2 - ROUNDS1))`
//! of `poll_cost::serve` is what one request costs the skeleton, its datapath and a trivial
//! handler.
//!
//! ```sh
//! cargo build --release -p cornflakes-rpc --example poll_cost
//! for n in 200 1200; do
//!   GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824 \
//!   valgrind --tool=callgrind --toggle-collect='poll_cost::serve*' \
//!     --callgrind-out-file=cg.$n target/release/examples/poll_cost $n 16
//! done   # instructions per request = (Ir(1200) - Ir(200)) / (16 × 1000)
//! ```

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::{Datapath, Msg, RxMsg};
use cornflakes_rpc::{Handler, Server, Unanswered};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

/// Answers every request with 64 bytes.
struct Echo([u8; 64]);

impl Handler for Echo {
    type Counters = ();

    fn label(&self) -> String {
        "poll-cost".to_owned()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        Ok(dp.send_copy(m.conn, m.msg, &self.0)?)
    }

    fn counters(&self) {}
}

/// One poll of the server: what callgrind counts (`--toggle-collect='poll_cost::serve*'`).
#[inline(never)]
fn serve(server: &mut Server<Loopback, Echo>) -> usize {
    server.poll()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let burst: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let cfg =
        |last| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
    let (a, mut client) = Loopback::pair(cfg(1), cfg(2)).expect("loopback pair");
    let conn = client.connect(addr(1)).expect("connect");
    let mut server = Server::new(a, Echo([7; 64]));
    let mut rx = Vec::new();
    // The ARP exchange, outside the rounds.
    serve(&mut server);
    client.recv_burst(&mut rx).expect("arp reply");
    let mut id = 0u32;
    for _ in 0..rounds {
        for _ in 0..burst {
            client
                .send_copy(conn, Msg::new(id, 1), b"request")
                .expect("send");
            id = id.wrapping_add(1);
        }
        client.flush().expect("flush");
        let mut got = 0;
        while got < burst as usize {
            got += serve(&mut server);
        }
        rx.clear();
        client.recv_burst(&mut rx).expect("replies");
        client.poll_completions();
    }
    let s = server.stats();
    assert_eq!(s.replied, rounds * u64::from(burst), "{s}");
    println!("{s}");
}
