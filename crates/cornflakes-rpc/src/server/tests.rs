//! The skeleton with a test handler: counts, the retry of a built reply, malformed requests.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::Msg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use datapath_socket::{SocketConfig, SocketDatapath};

use super::*;
use crate::Handler;

/// Answers type-1 requests with `reply_len` bytes; counts how often it ran.
struct Counting {
    reply: Vec<u8>,
    runs: u64,
}

impl Handler for Counting {
    type Counters = ();

    fn label(&self) -> String {
        "counting".to_owned()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        self.runs += 1;
        if m.msg.ty != 1 {
            return Err(Unanswered::Malformed(format!("type {}", m.msg.ty)));
        }
        Ok(dp.send_copy(m.conn, m.msg, &self.reply)?)
    }

    fn counters(&self) {}

    fn work_sample_every(&self) -> u64 {
        1
    }
}

fn socket(tx_queue: usize) -> SocketDatapath {
    let mut cfg = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cfg.gso = false;
    cfg.tx_queue = tx_queue;
    SocketDatapath::new(cfg).unwrap()
}

#[test]
fn a_reply_that_meets_a_full_queue_is_resent_and_the_request_runs_once() {
    // Each reply is 4 datagrams of a 4-datagram queue: the second of a burst finds it full.
    let handler = Counting {
        reply: vec![9; 5000],
        runs: 0,
    };
    let mut server = Server::new(socket(4), handler);
    let mut client = socket(64);
    let conn = client.connect(server.datapath().local_addr()).unwrap();
    for id in 0..3 {
        client.send_copy(conn, Msg::new(id, 1), b"req").unwrap();
    }
    client.send_copy(conn, Msg::new(9, 2), b"bad").unwrap();
    client.flush().unwrap();
    let (mut got, mut rx) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while (got.len() < 3 || server.stats().received < 4) && Instant::now() < deadline {
        server.poll();
        rx.clear();
        client.recv_burst(&mut rx).unwrap();
        client.poll_completions();
        got.append(&mut rx);
    }
    let s = server.stats();
    assert_eq!(server.handler().runs, 4, "each request handled once: {s}");
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|m| m.data.len() == 5000));
    assert_eq!(
        (s.received, s.replied, s.malformed, s.send_failed),
        (4, 3, 1, 0),
        "{s}"
    );
    assert_eq!(s.send_retries, 2, "{s}");
    assert_eq!(s.last_malformed.as_deref(), Some("type 2"));
    assert_eq!(s.work.len(), 4, "every request timed when asked");
    let line = s.to_string();
    assert!(
        line.starts_with("received=4 replied=3 malformed=1 send_failed=0 send_retries=2 "),
        "{line}"
    );
    let back = ServerStats::<()>::parse(&line);
    assert_eq!((back.received, back.replied, back.send_retries), (4, 3, 2));
}

#[test]
fn a_queue_still_full_after_the_retry_fails_the_send_once() {
    // The loopback ring frees descriptors only when the peer reads them, so with a 4-entry
    // ring and a peer that never reads, the third reply cannot be sent even after a flush.
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let cfg = |last, ring| {
        let mut c =
            LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
        c.tx_ring = ring;
        c
    };
    let (a, mut b) = Loopback::pair(cfg(1, 4), cfg(2, 64)).unwrap();
    let conn = b.connect(addr(1)).unwrap();
    let mut server = Server::new(
        a,
        Counting {
            reply: vec![1; 100],
            runs: 0,
        },
    );
    server.poll(); // the ARP request
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).unwrap();
    for id in 0..6 {
        b.send_copy(conn, Msg::new(id, 1), b"req").unwrap();
    }
    b.flush().unwrap();
    while server.stats().received < 6 {
        server.poll();
    }
    let s = server.stats();
    assert_eq!(server.handler().runs, 6, "{s}");
    assert!(s.send_failed > 0 && s.send_retries >= s.send_failed, "{s}");
    assert_eq!(s.replied + s.send_failed, 6, "{s}");
}

/// A handler whose sends take a known time: every reply waits `send_wait` inside its send
/// (the datapath's `send_copy` is wrapped), and `work` before it.
struct Slow {
    work: Duration,
    reply: Vec<u8>,
}

impl Handler for Slow {
    type Counters = ();

    fn label(&self) -> String {
        "slow".to_owned()
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        spin(self.work);
        Ok(dp.send_copy(m.conn, m.msg, &self.reply)?)
    }

    fn counters(&self) {}

    fn work_sample_every(&self) -> u64 {
        2
    }
}

fn spin(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// The time split adds up to the loop's time, puts the handler's work in the handler, counts
/// polls that found nothing as idle, and a wait between polls (`waited`) as idle too, not as
/// the next burst's receive time.
#[test]
fn the_time_split_puts_each_part_where_it_was_spent() {
    let handler = Slow {
        work: Duration::from_micros(200),
        reply: vec![3; 100],
    };
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let cfg =
        |last| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
    let (a, mut b) = Loopback::pair(cfg(1), cfg(2)).unwrap();
    let conn = b.connect(addr(1)).unwrap();
    let mut server = Server::new(a, handler);
    let begin = Instant::now();
    server.poll(); // the ARP request: one burst, no request answered
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).unwrap();
    for round in 0..5u32 {
        for i in 0..4 {
            b.send_copy(conn, Msg::new(round * 4 + i, 1), b"req")
                .unwrap();
        }
        b.flush().unwrap();
        // A wait the loop reports: idle, not receive.
        spin(Duration::from_millis(2));
        server.waited();
        while server.poll() == 0 {}
        // Polls that find nothing.
        for _ in 0..100 {
            assert_eq!(server.poll(), 0);
        }
        rx.clear();
        b.recv_burst(&mut rx).unwrap();
        b.poll_completions();
    }
    let elapsed = begin.elapsed().as_nanos() as u64;
    let s = server.stats();
    let t = s.time;
    assert_eq!((s.received, s.replied), (20, 20), "{s}");
    assert_eq!(t.requests, 20, "{t:?}");
    assert!(t.bursts >= 5, "{t:?}");
    // Every part is inside the loop's time, and together they are nearly all of it.
    assert!(t.total_ns() <= elapsed + 1_000_000, "{t:?} vs {elapsed}");
    // 20 requests x 200 us of work in the handler.
    assert!(t.handler_ns >= 20 * 200_000, "{t:?}");
    // Five 2 ms waits went to idle, not to receive. Had they gone to receive, receive would
    // hold at least those 10 ms and idle only the empty polls; compared with each other, not
    // with a fixed bound, so a loaded machine's preemptions (which land in any part) cannot
    // fail it.
    assert!(t.idle_ns >= 5 * 2_000_000, "{t:?}");
    assert!(t.receive_ns < t.idle_ns / 2, "{t:?}");
    // Every second request was sampled: its handler time, and the sends within it.
    assert!(t.sampled_ns >= 10 * 200_000, "{t:?}");
    assert!(
        t.sampled_send_ns > 0 && t.sampled_send_ns < t.sampled_ns,
        "{t:?}"
    );
    assert_eq!(
        t.dominant().map(|d| d.0),
        Some(percore::Part::Idle),
        "{t:?}"
    );
    // It crosses a process boundary with the rest of the counters.
    let back = ServerStats::<()>::parse(&s.to_string());
    assert_eq!(back.time, t);
}
