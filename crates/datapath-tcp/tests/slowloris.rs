//! A slowloris against the TCP datapath, with the server's resident memory measured in its own
//! process (this test binary holds only this test, so nothing else moves the figure):
//!
//! 1. thousands of connections each announce a largest frame (262 124 bytes) and send 100
//!    bytes: each holds a few hundred pinned bytes, not the announced length;
//! 2. hundreds more each send 100 KB of such a frame, together beyond the cap on partial
//!    frames (`TcpConfig::partial_limit`): the oldest frames give way, the pinned bytes stay
//!    under the cap, resident memory under the cap plus a fixed allowance;
//!
//! while clients of every size (100 B, 60 kB, the largest) are served, each with its echo.
//! Then every attacker closes: the pool's items all come back and its free chunks are trimmed
//! (`PinnedMemory::trim`), so resident memory drops by (at least half) what was trimmed and
//! returns within the allowance of where it started (the allowance covers AddressSanitizer's
//! shadow memory and quarantine too: `scripts/test.sh` runs this test under it).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Connect, DatapathMemory, Receive, Transmit};
use cornflakes::Msg;
use datapath_tcp::frame::{write_header, HEADER_LEN, SETTLE_MIN};
use datapath_tcp::{TcpConfig, TcpDatapath, DEFAULT_PARTIAL_LIMIT};

/// Slow connections of the first wave.
const SLOW: usize = 3000;
/// Connections of the second wave, each sending [`FILL`] bytes of a largest frame.
const FILLERS: usize = 700;
const FILL: usize = 100_000;
/// What the process may hold beyond the cap on partial frames: read buffers in flight, the
/// replies of the valid clients, a chunk per size class the pool keeps, the heap of the
/// connection tables and the test's own buffers.
const ALLOWANCE: usize = 24 << 20;

fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a live rlimit the call fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    r.rlim_cur = r.rlim_max;
    // SAFETY: `r` is a live rlimit the call reads.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    // SAFETY: as above.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_cur
}

fn header(msg: Msg, len: usize) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_LEN];
    write_header(&mut h, msg, len as u32);
    h
}

/// Polls the server once, echoing every request.
fn echo_once(srv: &mut TcpDatapath) {
    let mut got = Vec::new();
    srv.recv_burst(&mut got).unwrap();
    for m in got {
        let body = m.data.to_vec();
        srv.send_copy(m.conn, m.msg, &body).unwrap();
    }
    srv.flush().unwrap();
}

fn pump_until(srv: &mut TcpDatapath, what: &str, mut done: impl FnMut(&TcpDatapath) -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !done(srv) {
        assert!(Instant::now() < end, "{what}: {:?}", srv.stats());
        echo_once(srv);
    }
}

/// Opens `n` connections in steps the listen backlog takes, each sending `first` at once.
fn open_all(srv: &mut TcpDatapath, n: usize, first: &[u8]) -> Vec<TcpStream> {
    let addr = srv.local_addr();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let step = (n - out.len()).min(100);
        for _ in 0..step {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(first).unwrap();
            out.push(s);
        }
        let want = srv.stats().accepted + step as u64;
        pump_until(srv, "accepting", |s| s.stats().accepted >= want);
    }
    out
}

/// Valid clients of every size, each served its echo while the attack goes on.
fn serve_valid_clients(srv: &mut TcpDatapath, round: u32) {
    let addr = srv.local_addr();
    for (k, len) in [100usize, 60_000, srv.max_message_len()]
        .into_iter()
        .enumerate()
    {
        let id = round * 10 + k as u32;
        let body: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
        let mut req = header(Msg::new(id, 3), len);
        req.extend_from_slice(&body);
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let reader = {
            let mut c = c.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut r = vec![0u8; HEADER_LEN + len];
                c.read_exact(&mut r).map(|_| r)
            })
        };
        c.write_all(&req).unwrap();
        pump_until(srv, "a valid client", |_| reader.is_finished());
        let r = reader.join().unwrap().expect("the valid client's echo");
        assert_eq!(r, req, "echo of {len} bytes");
    }
}

#[test]
fn a_slowloris_of_thousands_holds_bounded_memory_while_every_size_is_served_and_it_all_comes_back()
{
    let need = (2 * (SLOW + FILLERS) + 300) as u64;
    let have = raise_fd_limit();
    if have < need {
        test_skip::skip(
            "a_slowloris_of_thousands_holds_bounded_memory",
            &format!("needs {need} descriptors (RLIMIT_NOFILE), the hard limit allows {have}"),
        );
        return;
    }
    let mut srv = TcpDatapath::new(TcpConfig::new(Some(SocketAddrV4::new(
        Ipv4Addr::LOCALHOST,
        0,
    ))))
    .unwrap();
    let largest = srv.max_message_len();
    let cap = srv.config().partial_limit;
    assert_eq!(cap, DEFAULT_PARTIAL_LIMIT);
    serve_valid_clients(&mut srv, 0);
    let live0 = srv.memory().stats().live_items;
    let rss0 = rss();

    // 1. Announce the largest frame, send 100 bytes, wait.
    let mut first = header(Msg::new(1, 1), largest);
    first.resize(100, 0xAB);
    let slow = open_all(&mut srv, SLOW, &first);
    pump_until(&mut srv, "slow frames read", |s| {
        s.partial_bytes().0 >= SLOW * 100 && s.rx_bytes_held() <= SLOW * SETTLE_MIN
    });
    let held = srv.rx_bytes_held();
    assert!(
        held <= SLOW * SETTLE_MIN,
        "{held} pinned for {SLOW} slow frames"
    );
    let grown = rss().saturating_sub(rss0);
    assert!(grown < ALLOWANCE, "resident memory grew {grown} bytes");
    serve_valid_clients(&mut srv, 1);

    // 2. Fill: 100 KB each of the same frame, 70 MB in all, beyond the 64 MiB cap.
    let mut fill = header(Msg::new(2, 1), largest);
    fill.resize(FILL, 0xCD);
    let fillers = open_all(&mut srv, FILLERS, &fill);
    pump_until(&mut srv, "fill read", |s| s.stats().partial_evictions > 0);
    for _ in 0..200 {
        echo_once(&mut srv);
    }
    let (held, peak) = srv.partial_bytes();
    assert!(
        held <= cap,
        "{held} bytes of partial frames held, cap {cap}"
    );
    assert!(
        peak <= cap + (HEADER_LEN + largest).next_power_of_two(),
        "peak {peak}"
    );
    let st = srv.stats();
    assert!(
        st.partial_evictions >= (SLOW + FILLERS - cap / FILL) as u64 / 2,
        "{st:?}"
    );
    let grown = rss().saturating_sub(rss0);
    assert!(
        grown < cap + ALLOWANCE,
        "resident memory grew {grown} bytes"
    );
    serve_valid_clients(&mut srv, 2);

    // 3. Everyone leaves: every item back in the pool, the pages back to the kernel.
    let before = rss();
    drop(slow);
    drop(fillers);
    pump_until(&mut srv, "closing", |s| s.connections() == 0);
    assert_eq!(srv.partial_bytes().0, 0);
    assert_eq!(srv.memory().stats().live_items, live0);
    pump_until(&mut srv, "trimming", |s| {
        s.memory().stats().trimmed_bytes >= cap / 2
    });
    let trimmed = srv.memory().stats().trimmed_bytes;
    let after = rss();
    assert!(
        after + trimmed / 2 <= before,
        "resident memory {before} -> {after} bytes after {trimmed} bytes trimmed"
    );
    assert!(
        after < rss0 + ALLOWANCE,
        "resident memory {after} bytes, {rss0} before the attack"
    );
    serve_valid_clients(&mut srv, 3);
}
