//! Nothing lost on a stream: a pipelined burst far beyond every queue gets every reply, in
//! order, when its client reads late; a client that never reads is closed after the stall
//! timeout, and none of its requests beyond those answered ran; a valid frame followed by
//! garbage (or by the end of the stream) is answered before the close. The server is a
//! handler that counts executions, driven by hand on this thread over loopback.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cornflakes::datapath::{Connect, Receive, Transmit};
use cornflakes::Msg;
use datapath_tcp::frame::{write_header, HEADER_LEN};
use datapath_tcp::{TcpConfig, TcpDatapath};

const REPLY: usize = 8000;

/// A server whose queues and socket buffers are small, so a burst overruns them all.
fn server(cfg: impl FnOnce(&mut TcpConfig)) -> TcpDatapath {
    let mut c = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    c.stream.tx_limit = 64 << 10;
    c.stream.max_message_len = 16 << 10;
    c.socket_buffer = Some(32 << 10);
    cfg(&mut c);
    TcpDatapath::new(c).unwrap()
}

fn frame(msg: Msg, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; HEADER_LEN];
    write_header(&mut f, msg, body.len() as u32);
    f.extend_from_slice(body);
    f
}

/// Request `i`: 100 bytes; its reply: [`REPLY`] bytes, both derived from `i`.
fn request(i: u32) -> Vec<u8> {
    frame(Msg::new(i, 1), &[i as u8; 100])
}

fn reply_body(i: u32) -> Vec<u8> {
    (0..REPLY).map(|k| (i as usize * 31 + k) as u8).collect()
}

/// The handler: runs each request (counted; they must come in order, each once) and queues
/// its reply, which must never be refused. Returns the requests handled.
fn serve(srv: &mut TcpDatapath, executed: &mut u32) -> usize {
    let mut got = Vec::new();
    srv.recv_burst(&mut got).unwrap();
    for m in &got {
        assert_eq!(m.msg.id, *executed, "executed once each, in order");
        assert_eq!(&m.data[..], &[m.msg.id as u8; 100][..]);
        *executed += 1;
        srv.send_copy(m.conn, m.msg, &reply_body(m.msg.id))
            .expect("a reply is never refused");
    }
    srv.flush().unwrap();
    if got.is_empty() {
        srv.wait(Duration::from_millis(1)).unwrap();
    }
    got.len()
}

/// Parses the replies in `buf` (removing them), checking they are `next`, `next + 1`, ….
fn take_replies(buf: &mut Vec<u8>, next: &mut u32) {
    while buf.len() >= HEADER_LEN + REPLY {
        let want = frame(Msg::new(*next, 1), &reply_body(*next));
        assert_eq!(&buf[..want.len()], &want[..], "reply {next}");
        buf.drain(..want.len());
        *next += 1;
    }
}

fn accept(srv: &mut TcpDatapath) {
    let end = Instant::now() + Duration::from_secs(10);
    let n = srv.connections();
    while srv.connections() == n {
        assert!(Instant::now() < end, "not accepted");
        srv.recv_burst(&mut Vec::new()).unwrap();
    }
}

#[test]
fn a_pipelined_burst_beyond_every_queue_gets_every_reply_in_order_when_read_late() {
    const N: u32 = 1500; // 12 MB of replies against a 64 KiB queue and 32 KiB socket buffers
    let mut srv = server(|_| {});
    let addr = srv.local_addr();
    let client = TcpStream::connect(addr).unwrap();
    accept(&mut srv);
    let mut writer = client.try_clone().unwrap();
    let w = std::thread::spawn(move || {
        let burst: Vec<u8> = (0..N).flat_map(request).collect();
        writer.write_all(&burst).unwrap();
    });
    let done = Arc::new(AtomicBool::new(false));
    let r = {
        let done = done.clone();
        let mut reader = client;
        std::thread::spawn(move || {
            // Reads late: the server has long run out of room by then.
            std::thread::sleep(Duration::from_millis(500));
            reader
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let (mut buf, mut next, mut chunk) = (Vec::new(), 0u32, vec![0u8; 1 << 16]);
            while next < N {
                let n = reader.read(&mut chunk).expect("replies keep coming");
                assert!(n > 0, "closed after {next} replies");
                buf.extend_from_slice(&chunk[..n]);
                take_replies(&mut buf, &mut next);
            }
            done.store(true, Ordering::Relaxed);
            next
        })
    };
    let mut executed = 0;
    let end = Instant::now() + Duration::from_secs(20);
    while !done.load(Ordering::Relaxed) {
        assert!(
            Instant::now() < end,
            "{executed} executed, {:?}",
            srv.stats()
        );
        serve(&mut srv, &mut executed);
        assert!(srv.queued_bytes(cornflakes::ConnId(0)).unwrap_or(0) <= 64 << 10);
    }
    w.join().unwrap();
    assert_eq!(r.join().unwrap(), N, "every reply, in order");
    assert_eq!(executed, N, "every request executed once");
    let st = srv.stats();
    assert!(st.held_for_room > 0 && st.device.would_block > 0, "{st:?}");
    assert_eq!((st.tx_full, st.unexecuted_dropped), (0, 0), "{st:?}");
}

#[test]
fn a_client_that_never_reads_is_closed_after_the_stall_timeout_and_nothing_beyond_the_answered_ran()
{
    let mut srv = server(|c| c.stream.stall_timeout = Duration::from_millis(300));
    let addr = srv.local_addr();
    let mut deaf = TcpStream::connect(addr).unwrap();
    accept(&mut srv);
    deaf.set_nonblocking(true).unwrap();
    // Writes requests as long as the socket takes them, never reading.
    let mut written = 0u32;
    let mut pending = request(0);
    let mut executed = 0u32;
    let end = Instant::now() + Duration::from_secs(10);
    while srv.stats().stall_timeouts == 0 {
        assert!(Instant::now() < end, "not closed: {:?}", srv.stats());
        match deaf.write(&pending) {
            Ok(n) => {
                pending.drain(..n);
                if pending.is_empty() {
                    written += 1;
                    pending = request(written);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => break, // closed by the server meanwhile
        }
        serve(&mut srv, &mut executed);
    }
    let st = srv.stats();
    assert_eq!((st.stall_timeouts, srv.connections()), (1, 0), "{st:?}");
    // Exactly the requests answered ran (each queued its reply: `serve` checks), a prefix of
    // those sent; any read but waiting for room were dropped unexecuted.
    assert!(
        executed > 0 && executed < written,
        "{executed} of {written}"
    );
    assert!(st.unexecuted_dropped <= st.held_for_room, "{st:?}");
    assert_eq!(st.tx_full, 0);
    // The client gets a prefix of those replies, in order, then the end of the stream.
    deaf.set_nonblocking(false).unwrap();
    deaf.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (mut buf, mut next, mut chunk) = (Vec::new(), 0u32, vec![0u8; 1 << 16]);
    while let Ok(n) = deaf.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        take_replies(&mut buf, &mut next);
    }
    assert!(next <= executed, "{next} replies for {executed} executed");
    // The server serves others as before.
    let mut good = TcpStream::connect(addr).unwrap();
    accept(&mut srv);
    good.write_all(&request(executed)).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while serve(&mut srv, &mut executed) == 0 {
        assert!(Instant::now() < end);
    }
    let mut reply = vec![0u8; HEADER_LEN + REPLY];
    good.read_exact(&mut reply).unwrap();
    assert_eq!(
        reply,
        frame(Msg::new(executed - 1, 1), &reply_body(executed - 1))
    );
}

/// Polls `srv`, answering every request with "pong", until `done`.
fn pong_until(srv: &mut TcpDatapath, mut done: impl FnMut(&TcpDatapath) -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !done(srv) {
        assert!(Instant::now() < end, "{:?}", srv.stats());
        let mut got = Vec::new();
        srv.recv_burst(&mut got).unwrap();
        for m in got {
            srv.send_copy(m.conn, m.msg, b"pong").unwrap();
        }
        srv.flush().unwrap();
    }
}

/// Reads `n` "pong" replies (ids from 0), then expects the end of the stream.
fn read_pongs_then_end(s: &mut TcpStream, n: u32) {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for i in 0..n {
        let mut r = vec![0u8; HEADER_LEN + 4];
        s.read_exact(&mut r).unwrap();
        assert_eq!(r, frame(Msg::new(i, 1), b"pong"), "reply {i}");
    }
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap(), 0, "the close follows the replies");
}

#[test]
fn valid_frames_before_garbage_or_the_end_of_the_stream_are_answered_before_the_close() {
    let mut srv = server(|c| c.stream.linger = Duration::from_secs(5));
    let addr = srv.local_addr();
    // Three valid frames and garbage in one write.
    let mut bad = TcpStream::connect(addr).unwrap();
    let mut w: Vec<u8> = (0..3)
        .flat_map(|i| frame(Msg::new(i, 1), b"ping"))
        .collect();
    w.extend_from_slice(&[0xFF; 64]);
    bad.write_all(&w).unwrap();
    pong_until(&mut srv, |s| {
        s.counters().bad_framing == 1 && s.counters().delivered == 3
    });
    let mut reader = bad.try_clone().unwrap();
    let r = std::thread::spawn(move || read_pongs_then_end(&mut reader, 3));
    // Lingering: the server reads and drops what still comes, until the peer closes.
    pong_until(&mut srv, |_| r.is_finished());
    r.join().unwrap();
    bad.write_all(&[0xEE; 1000]).unwrap();
    drop(bad);
    pong_until(&mut srv, |s| s.stats().bad_streams == 1);
    assert!(srv.stats().discarded_bytes > 0);
    assert_eq!(srv.connections(), 0);

    // A frame then the end of the stream (a half-close): answered, then closed.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(&frame(Msg::new(0, 1), b"ping")).unwrap();
    half.write_all(&frame(Msg::new(1, 1), b"ping")).unwrap();
    half.shutdown(std::net::Shutdown::Write).unwrap();
    let r = std::thread::spawn(move || read_pongs_then_end(&mut half, 2));
    pong_until(&mut srv, |s| {
        s.stats().peer_closed == 1 && s.connections() == 0
    });
    r.join().unwrap();
    let st = srv.stats();
    assert_eq!((st.failed, st.unexecuted_dropped), (0, 0), "{st:?}");
}

#[test]
fn an_unfinished_frame_times_out_with_its_connection_and_its_memory_returns() {
    let mut srv = server(|c| c.stream.frame_timeout = Duration::from_millis(200));
    let addr = srv.local_addr();
    let half = &frame(Msg::new(7, 1), &[3u8; 10_000])[..5000];
    let mut slow: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(half).unwrap();
            s
        })
        .collect();
    pong_until(&mut srv, |s| s.partial_bytes().0 >= 20 * 5000);
    pong_until(&mut srv, |s| s.stats().frame_timeouts == 20);
    let st = srv.stats();
    assert_eq!((st.partial_frames_lost, srv.counters().truncated), (20, 20));
    assert_eq!(
        (
            srv.partial_bytes().0,
            srv.rx_bytes_held(),
            srv.connections()
        ),
        (0, 0, 0)
    );
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(s.read(&mut [0u8; 1]).unwrap_or(0), 0, "closed");
    }
    // A prompt client is served.
    let mut good = TcpStream::connect(addr).unwrap();
    good.write_all(&frame(Msg::new(0, 1), b"ping")).unwrap();
    let r = std::thread::spawn(move || {
        good.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut r = vec![0u8; HEADER_LEN + 4];
        good.read_exact(&mut r).map(|_| r)
    });
    pong_until(&mut srv, |_| r.is_finished());
    assert_eq!(r.join().unwrap().unwrap(), frame(Msg::new(0, 1), b"pong"));
}
