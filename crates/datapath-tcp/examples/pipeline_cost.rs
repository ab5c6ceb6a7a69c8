//! What the reply reservation (`TcpConfig::reply_reserve`) costs a pipelining client: one
//! connection sends a burst of small requests as fast as its socket takes them; the server
//! answers each with a small reply (its echo). With the default reservation (the largest frame, 256 KiB, against a 1 MiB queue) at
//! most 4 requests of a connection are handed over per poll; with a reservation sized for the
//! replies, as many as were read. Prints the server's polls and `sendmsg` calls per request.
//!
//! ```text
//! cargo run --release -p datapath-tcp --example pipeline_cost -- [--requests N]
//! ```
//!
//! Both ends run in this one thread and nothing is timed, so the counts hardly depend on the
//! machine's load (only on how the kernel cuts the stream into reads). For the instructions the server spends per request, run it under callgrind
//! counting only the server's loop:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='pipeline_cost::serve*' \
//!     target/release/examples/pipeline_cost --requests 20000 --reserve default
//! ```
//!
//! (`serve` runs once per reservation, in the order printed: `callgrind_annotate --inclusive=yes`
//! gives their sum; run with one reservation at a time, `--reserve B`, to split them.)

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};

use cornflakes::datapath::{Connect, Receive, Transmit};
use cornflakes::Msg;
use datapath_tcp::frame::{write_header, HEADER_LEN};
use datapath_tcp::{TcpConfig, TcpDatapath};

const BODY: usize = 100;

fn frame(id: u32) -> Vec<u8> {
    let mut f = vec![0u8; HEADER_LEN];
    write_header(&mut f, Msg::new(id, 1), BODY as u32);
    f.resize(HEADER_LEN + BODY, id as u8);
    f
}

/// Writes `burst` (`n` requests) as fast as the socket takes it, serving and reading the
/// replies meanwhile. Returns the polls that handed over at least one request.
#[inline(never)]
fn serve(srv: &mut TcpDatapath, client: &mut TcpStream, burst: &[u8], n: usize) -> usize {
    let (mut at, mut answered, mut replies, mut polls) = (0usize, 0usize, 0usize, 0usize);
    let mut got = Vec::new();
    let mut sink = vec![0u8; 1 << 16];
    while replies < n * (HEADER_LEN + BODY) {
        while at < burst.len() {
            match client.write(&burst[at..]) {
                Ok(k) => at += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        got.clear();
        srv.recv_burst(&mut got).unwrap();
        if !got.is_empty() {
            polls += 1;
        }
        for m in &got {
            srv.send_copy(m.conn, m.msg, &m.data[..]).unwrap();
            answered += 1;
        }
        srv.flush().unwrap();
        loop {
            match client.read(&mut sink) {
                Ok(k) if k > 0 => replies += k,
                Err(e) if e.kind() != ErrorKind::WouldBlock => panic!("{e}"),
                _ => break,
            }
        }
    }
    assert_eq!(answered, n);
    polls
}

fn run(n: usize, reserve: Option<usize>) {
    let mut cfg = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    cfg.stream.reply_reserve = reserve;
    let mut srv = TcpDatapath::new(cfg).unwrap();
    let mut client = TcpStream::connect(srv.local_addr()).unwrap();
    while srv.connections() == 0 {
        srv.recv_burst(&mut Vec::new()).unwrap();
    }
    client.set_nonblocking(true).unwrap();
    let burst: Vec<u8> = (0..n as u32).flat_map(frame).collect();
    let polls = serve(&mut srv, &mut client, &burst, n);
    let st = srv.stats();
    println!(
        "{:>14} {:>9} {:>8} {:>14.1} {:>16.3} {:>10}",
        match srv.config().reply_reserve {
            Some(r) => format!("{r} B"),
            None => "-".into(),
        },
        n,
        polls,
        n as f64 / polls as f64,
        st.device.sendmsg_calls as f64 / n as f64,
        st.held_for_room
    );
}

fn main() {
    let mut n = 20_000;
    let mut only: Option<Option<usize>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--requests" => {
                n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--requests N")
            }
            "--reserve" => {
                let v = args.next().expect("--reserve B|default");
                only = Some(if v == "default" {
                    None
                } else {
                    Some(v.parse().expect("--reserve B|default"))
                });
            }
            other => panic!("unknown argument {other}"),
        }
    }
    println!(
        "{:>14} {:>9} {:>8} {:>14} {:>16} {:>10}",
        "reply_reserve", "requests", "polls", "requests/poll", "sendmsg/request", "held"
    );
    let all = [None, Some(4096), Some(HEADER_LEN + BODY)];
    for reserve in only.map_or(all.to_vec(), |r| vec![r]) {
        run(n, reserve);
    }
}
