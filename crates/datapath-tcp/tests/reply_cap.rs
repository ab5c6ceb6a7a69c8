//! The cap on the replies all connections queue together (`StreamConfig::total_tx_limit`):
//! many clients that send requests and never read fill their queues up to the cap; the bytes
//! queued never pass it; the connections stalled longest are closed to make room, none of
//! their requests run without room for its reply; and clients that read keep being served,
//! every reply in order. The server is a handler that counts executions, driven by hand on
//! this thread over loopback with the clients' datapaths.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::{ConnId, Msg, RxMsg};
use datapath_tcp::{TcpConfig, TcpDatapath};

/// Bytes of each reply (requests are 100).
const REPLY: usize = 8000;
/// The cap: room for the queues of about six never-reading clients.
const CAP: usize = 384 << 10;
/// Clients that never read.
const DEAF: usize = 24;
/// Requests each of them sends: replies far beyond its queue and socket buffers.
const DEAF_REQUESTS: u32 = 40;
/// Clients that read, and what each asks for.
const READERS: usize = 3;
const READER_REQUESTS: u32 = 150;

fn reply_body(id: u32) -> Vec<u8> {
    (0..REPLY).map(|k| (id as usize * 31 + k) as u8).collect()
}

/// Runs every request handed over (each once, in order per connection) and queues its reply,
/// which must never be refused.
fn serve(srv: &mut TcpDatapath, executed: &mut HashMap<ConnId, u32>) {
    let mut got = Vec::new();
    srv.recv_burst(&mut got).unwrap();
    for m in &got {
        let n = executed.entry(m.conn).or_default();
        assert_eq!(m.msg.id, *n, "executed once each, in order");
        assert_eq!(&m.data[..], &[m.msg.id as u8; 100][..]);
        *n += 1;
        srv.send_copy(m.conn, m.msg, &reply_body(m.msg.id))
            .expect("a reply is never refused");
    }
    srv.flush().unwrap();
    if got.is_empty() {
        srv.wait(Duration::from_millis(1)).unwrap();
    }
}

#[test]
fn never_reading_clients_fill_the_cap_the_longest_stalled_go_and_readers_are_served() {
    let mut c = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    c.stream.tx_limit = 64 << 10;
    c.stream.max_message_len = 16 << 10;
    c.stream.total_tx_limit = CAP;
    // Stalled half a second (a tenth of it) before the cap may close a connection; no
    // connection of this test stalls for the whole of it.
    c.stream.stall_timeout = Duration::from_secs(5);
    c.socket_buffer = Some(32 << 10);
    let mut srv = TcpDatapath::new(c).unwrap();
    assert_eq!(srv.config().total_tx_limit, CAP);
    let addr = srv.local_addr();
    let mut executed = HashMap::new();

    // The deaf clients: small socket buffers, every request sent at once, never polled again
    // (their replies pile up in the server).
    let mut dc = TcpConfig::new(None);
    dc.socket_buffer = Some(4096);
    let mut deaf = TcpDatapath::new(dc).unwrap();
    for _ in 0..DEAF {
        let conn = deaf.open(addr).unwrap();
        for i in 0..DEAF_REQUESTS {
            deaf.send_copy(conn, Msg::new(i, 1), &[i as u8; 100])
                .unwrap();
        }
        deaf.flush().unwrap();
        serve(&mut srv, &mut executed);
    }
    // All accepted before the readers connect: the server's connections 0..DEAF are deaf.
    let end = Instant::now() + Duration::from_secs(10);
    while srv.connections() < DEAF {
        assert!(Instant::now() < end, "not accepted: {:?}", srv.stats());
        serve(&mut srv, &mut executed);
    }

    // The readers: a few requests in flight each, every reply checked.
    let mut readers = TcpDatapath::new(TcpConfig::new(None)).unwrap();
    let conns: Vec<ConnId> = (0..READERS).map(|_| readers.open(addr).unwrap()).collect();
    let mut sent = [0u32; READERS];
    let mut answered = [0u32; READERS];
    let mut rx: Vec<RxMsg> = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    while answered.iter().any(|&a| a < READER_REQUESTS) {
        assert!(
            Instant::now() < end,
            "readers stuck at {answered:?}: {:?}",
            srv.stats()
        );
        for (r, &conn) in conns.iter().enumerate() {
            while sent[r] < READER_REQUESTS && sent[r] - answered[r] < 4 {
                let i = sent[r];
                readers
                    .send_copy(conn, Msg::new(i, 1), &[i as u8; 100])
                    .unwrap();
                sent[r] += 1;
            }
        }
        readers.flush().unwrap();
        serve(&mut srv, &mut executed);
        // The bytes queued, reservations of the burst included, never pass the cap.
        let (now, peak) = srv.queued_total();
        assert!(now <= CAP && peak <= CAP, "{now} and {peak} against {CAP}");
        rx.clear();
        readers.recv_burst(&mut rx).unwrap();
        readers.poll_completions();
        for m in &rx {
            let r = conns.iter().position(|c| *c == m.conn).unwrap();
            assert_eq!(m.msg.id, answered[r], "reader {r}: replies in order");
            assert_eq!(&m.data[..], &reply_body(m.msg.id)[..], "reader {r}");
            answered[r] += 1;
        }
    }
    let st = srv.stats();
    assert!(conns.iter().all(|c| readers.is_open(*c)), "{st:?}");
    // The cap was reached and closed connections that had stalled; only deaf ones.
    assert!(st.reply_evictions > 0, "{st:?}");
    assert_eq!(
        srv.connections() as u64,
        (DEAF + READERS) as u64 - st.reply_evictions - st.stall_timeouts,
        "{st:?}"
    );
    assert!(
        srv.queued_total().1 > CAP / 2,
        "the cap was what bound: {st:?}"
    );
    // Nothing ran without room for its reply (every reply was queued: `serve` checks), a deaf
    // client's requests ran only as a prefix of those sent, and those still waiting when it
    // closed never ran.
    let is_deaf = |c: &ConnId| (c.0 as usize) < DEAF;
    for (conn, n) in &executed {
        let limit = if is_deaf(conn) {
            DEAF_REQUESTS
        } else {
            READER_REQUESTS
        };
        assert!(*n <= limit, "{conn:?}: {n}");
    }
    let deaf_executed: u32 = executed
        .iter()
        .filter(|(c, _)| is_deaf(c))
        .map(|(_, n)| n)
        .sum();
    assert!(
        deaf_executed < DEAF as u32 * DEAF_REQUESTS,
        "the deaf clients' requests did not all run: {deaf_executed}"
    );
    assert!(st.unexecuted_dropped <= st.held_for_room, "{st:?}");
    assert_eq!(st.tx_full, 0, "{st:?}");
    drop(deaf);
}
