//! The skeleton with test handlers: counts, the retry of a built reply, malformed requests.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::Msg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use datapath_socket::{SocketConfig, SocketDatapath};

use super::*;

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

/// A free TCP port on 127.0.0.1 for `cores` consecutive ports (the launcher binds base + i).
fn free_tcp_ports(cores: u16) -> u16 {
    for base in (20000 + (std::process::id() % 20000) as u16..60000).step_by(cores as usize) {
        let all_free = (0..cores).all(|i| {
            std::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, base + i)).is_ok()
        });
        if all_free {
            return base;
        }
    }
    panic!("no free TCP ports");
}

#[test]
fn the_launcher_serves_a_handler_over_kernel_tcp_on_each_core() {
    use datapath_tcp::frame::{write_header, HEADER_LEN};
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let mut a = cli_args::Args::new(vec!["--datapath".into(), "tcp".into()]);
    let transport = Transport::from_args(&mut a).unwrap();
    assert_eq!(
        (transport.name(), transport.clone()),
        ("tcp", Transport::Tcp)
    );
    let base = free_tcp_ports(2);
    let mut l = Launch::new(
        transport,
        SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, base)),
        "counting",
        crate::CargoRun {
            package: "app-server",
            bin: None,
            args: "",
        },
    );
    l.cores = 2;
    l.report = None;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let server = std::thread::spawn(move || {
        launch(
            &l,
            |_: &cornflakes::PinnedMemory, _| {
                Ok(Counting {
                    reply: b"pong".to_vec(),
                    runs: 0,
                })
            },
            &s2,
        )
    });
    // Each core answers on its own port; a bad request type is counted, not answered.
    for i in 0..2u16 {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, base + i);
        let end = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match std::net::TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("{addr}: {e}"),
            }
        };
        let frame = |ty: u16| {
            let mut f = vec![0u8; HEADER_LEN];
            write_header(&mut f, Msg::new(7, ty), 4);
            f.extend_from_slice(b"ping");
            f
        };
        s.write_all(&frame(2)).unwrap();
        s.write_all(&frame(1)).unwrap();
        let mut reply = vec![0u8; HEADER_LEN + 4];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.read_exact(&mut reply).unwrap();
        let mut want = vec![0u8; HEADER_LEN];
        write_header(&mut want, Msg::new(7, 1), 4);
        want.extend_from_slice(b"pong");
        assert_eq!(reply, want, "core {i}");
    }
    stop.store(true, Ordering::Relaxed);
    let st = server.join().unwrap().unwrap();
    assert_eq!((st.received, st.replied, st.malformed), (4, 2, 2), "{st}");
}
