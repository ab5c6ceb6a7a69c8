//! The socket datapath over 127.0.0.1: objects end to end (copy and zero-copy fields, larger
//! than a frame, with and without GSO), buffer release, and bad datagrams dropped and counted.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use cornflakes::datapath::{
    object_to_sga, Completions, Connect, DatapathMemory, Receive, Transmit,
};
use cornflakes::handwritten::GetM;
use cornflakes::mem::MemoryConfig;
use cornflakes::{
    Arena, CFBytes, CFPtr, CFString, ConnId, CornflakesObj, DecodeObj, Msg, RcBuf, RxMsg, SendError,
};
use cornflakes_stack::wire::framing;
use datapath_socket::{SocketConfig, SocketDatapath};

fn localhost() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
}

fn dp(cfg: impl FnOnce(&mut SocketConfig)) -> SocketDatapath {
    let mut c = SocketConfig::new(localhost());
    cfg(&mut c);
    SocketDatapath::new(c).expect("bind 127.0.0.1")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn getm<'a>(arena: &'a Arena, id: u32, keys: &[&str], vals: &[RcBuf]) -> GetM<'a> {
    let mut m = GetM::new_in(arena);
    m.set_id(id);
    m.init_keys(keys.len());
    for k in keys {
        m.get_mut_keys().append(CFString::new(k, arena));
    }
    m.init_vals(vals.len());
    for v in vals {
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v.clone(), arena)));
    }
    m
}

fn check_getm(data: &RcBuf, id: u32, keys: &[&str], vals: &[Vec<u8>]) {
    let arena = Arena::new();
    let m = GetM::deserialize_rcbuf(data, &arena).expect("decodes");
    assert_eq!(m.get_id(), id);
    let got: Vec<&[u8]> = m.get_keys().iter().map(|k| k.as_bytes()).collect();
    let want: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    assert_eq!(got, want);
    let got: Vec<&[u8]> = m.get_vals().iter().map(|v| v.as_bytes()).collect();
    let want: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
    assert_eq!(got, want);
}

/// Polls until `n` messages arrived. Loopback delivery completes within the send call or the
/// softirq right after it; the bound only keeps a broken build from spinning forever.
fn recv_n(d: &mut SocketDatapath, n: usize) -> Vec<RxMsg> {
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        d.recv_burst(&mut out).unwrap();
        if out.len() >= n {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(
        out.len(),
        n,
        "messages received; counters {:?}",
        d.counters()
    );
    out
}

/// Polls until the kernel queue is empty (a few empty polls in a row).
fn drain(d: &mut SocketDatapath) -> Vec<RxMsg> {
    let mut out = Vec::new();
    let mut empty = 0;
    while empty < 50 {
        if d.recv_burst(&mut out).unwrap() == 0 {
            empty += 1;
            std::thread::yield_now();
        } else {
            empty = 0;
        }
    }
    out
}

fn pair(cfg: impl Fn(&mut SocketConfig)) -> (SocketDatapath, SocketDatapath, ConnId) {
    let mut a = dp(&cfg);
    let b = dp(&cfg);
    let conn = a.connect(b.local_addr()).unwrap();
    (a, b, conn)
}

#[test]
fn object_with_copy_and_zero_copy_fields_end_to_end() {
    let (mut a, mut b, conn) = pair(|_| {});
    let mem = a.memory().clone();
    let vals = [pattern(10, 1), pattern(600, 2), pattern(700, 3)];
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 31, &["alpha", "beta"], &bufs);
    assert_eq!(m.sizes().zero_copy_count, 2);
    let inc = 0x5eed_0000_0000_0001;
    a.send_object(conn, Msg::new(100, 2).with_incarnation(inc), &m)
        .unwrap();
    // Header buffer + two zero-copy iovecs, held until the flush.
    assert_eq!(a.in_flight(), 3);
    assert_eq!(bufs[1].ref_count(), 3);
    a.flush().unwrap();
    assert_eq!(a.in_flight(), 0);
    assert_eq!(a.poll_completions(), 3);
    assert_eq!(
        bufs[1].ref_count(),
        2,
        "the kernel copied: reference released at flush"
    );
    let got = recv_n(&mut b, 1);
    assert_eq!(got[0].msg, Msg::new(100, 2).with_incarnation(inc));
    assert_eq!(got[0].peer, a.local_addr());
    check_getm(&got[0].data, 31, &["alpha", "beta"], &vals);
    // The payload is a view into the pinned receive buffer, after the framing header.
    assert_eq!(got[0].data.item_offset(), framing::HEADER_LEN);
    let rarena = Arena::with_memory(b.memory());
    let d = GetM::deserialize_rcbuf(&got[0].data, &rarena).unwrap();
    assert!(d.get_vals().get(2).unwrap().ptr().is_zero_copy());
    // Reply on the connection the request came from, with the request's identity.
    b.send_copy(got[0].conn, got[0].msg, b"pong").unwrap();
    b.flush().unwrap();
    let back = recv_n(&mut a, 1);
    assert_eq!(&back[0].data[..], b"pong");
    assert_eq!(back[0].msg, Msg::new(100, 2).with_incarnation(inc));
}

fn large_object_roundtrip(gso: bool) {
    let (mut a, mut b, conn) = pair(|c| c.gso = gso);
    if gso && !a.gso_enabled() {
        test_skip::skip(
            "large_object_roundtrip (GSO variant)",
            "the kernel refused UDP_SEGMENT on this socket",
        );
        return;
    }
    let mem = a.memory().clone();
    let base = mem.stats().live_items;
    {
        let vals: Vec<Vec<u8>> = (0..6).map(|i| pattern(500 + 700 * i, i as u8)).collect();
        let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
        let keys = ["k0", "k1"];
        let arena = Arena::with_memory(&mem);
        let m = getm(&arena, 8, &keys, &bufs);
        assert!(m.sizes().total() > 3 * 1500);
        a.send_object(conn, Msg::new(1, 1), &m).unwrap();
        // A copy-only object larger than a frame, and a multi-frame copy.
        let small: Vec<Vec<u8>> = (0..40).map(|i| pattern(100, i as u8)).collect();
        let sbufs: Vec<RcBuf> = small.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
        let m2 = getm(&arena, 9, &[], &sbufs);
        a.send_object(conn, Msg::new(2, 1), &m2).unwrap();
        a.send_copy(conn, Msg::new(3, 1), &pattern(9000, 7))
            .unwrap();
        a.flush().unwrap();
        let got = recv_n(&mut b, 3);
        let mut got: Vec<_> = got.into_iter().collect();
        got.sort_by_key(|r| r.msg.id);
        check_getm(&got[0].data, 8, &keys, &vals);
        check_getm(&got[1].data, 9, &[], &small);
        assert_eq!(&got[2].data[..], &pattern(9000, 7)[..]);
        assert_eq!(b.counters().total_drops(), 0, "{:?}", b.counters());
    }
    assert!(a.poll_completions() > 0);
    assert_eq!(
        mem.stats().live_items,
        base,
        "all transmit buffers released"
    );
}

#[test]
fn objects_larger_than_one_frame_with_gso() {
    large_object_roundtrip(true);
}

#[test]
fn objects_larger_than_one_frame_without_gso() {
    large_object_roundtrip(false);
}

#[test]
fn send_sga_copy_and_empty_messages() {
    let (mut a, mut b, conn) = pair(|_| {});
    let mem = a.memory().clone();
    let vals = [pattern(800, 1), pattern(2000, 2)];
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 4, &["q"], &bufs);
    let sga = object_to_sga(&m, &mem, a.max_segments()).unwrap();
    a.send_sga(conn, Msg::new(1, 0), &sga).unwrap();
    a.send_copy(conn, Msg::new(2, 0), &[]).unwrap();
    a.send_copy(conn, Msg::new(3, 0), b"abc").unwrap();
    a.flush().unwrap();
    let mut got = recv_n(&mut b, 3);
    got.sort_by_key(|r| r.msg.id);
    check_getm(&got[0].data, 4, &["q"], &vals);
    assert!(got[1].data.is_empty());
    assert_eq!(&got[2].data[..], b"abc");
    assert!(matches!(
        a.send_copy(ConnId(77), Msg::new(1, 0), b"x"),
        Err(SendError::UnknownConn(_))
    ));
    let huge = vec![0u8; a.max_message_len() + 1];
    assert!(matches!(
        a.send_copy(conn, Msg::new(1, 0), &huge),
        Err(SendError::TooLarge { .. })
    ));
}

#[test]
fn demotes_when_more_zero_copy_entries_than_iovecs() {
    let (mut a, mut b, conn) = pair(|c| {
        c.max_segments = 3;
        c.mtu = 9000;
    });
    let mem = a.memory().clone();
    let vals: Vec<Vec<u8>> = [520, 530, 540, 550]
        .iter()
        .map(|&n| pattern(n, n as u8))
        .collect();
    let bufs: Vec<RcBuf> = vals[..2]
        .iter()
        .map(|v| mem.alloc_copy(v).unwrap())
        .collect();
    let three: Vec<RcBuf> = vals[1..4]
        .iter()
        .map(|v| mem.alloc_copy(v).unwrap())
        .collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 1, &[], &bufs);
    a.send_object(conn, Msg::new(1, 0), &m).unwrap();
    assert_eq!(
        a.in_flight(),
        3,
        "header + 2 zero-copy entries fit 3 iovecs"
    );
    a.flush().unwrap();
    let m3 = getm(&arena, 2, &[], &three);
    a.send_object(conn, Msg::new(2, 0), &m3).unwrap();
    assert_eq!(
        a.in_flight(),
        3,
        "the smallest of 3 values demoted to a copy"
    );
    a.flush().unwrap();
    let mut got = recv_n(&mut b, 2);
    got.sort_by_key(|r| r.msg.id);
    check_getm(&got[0].data, 1, &[], &vals[..2]);
    check_getm(&got[1].data, 2, &[], &vals[1..4]);
}

/// A raw socket to send arbitrary datagrams at a datapath.
fn raw() -> UdpSocket {
    UdpSocket::bind(localhost()).unwrap()
}

fn framed(h: &framing::Repr, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; framing::HEADER_LEN + payload.len()];
    h.emit(&mut v);
    v[framing::HEADER_LEN..].copy_from_slice(payload);
    v
}

#[test]
fn garbage_and_forged_datagrams_are_dropped_and_counted() {
    let mut b = dp(|_| {});
    let s = raw();
    let to = b.local_addr();
    let good = framed(&framing::Repr::single(Msg::new(1, 0), 3), b"abc");
    let seg = |i: u16, n: u16, total: u32, off: u32| framing::Repr {
        incarnation: 0,
        msg_type: 0,
        msg_id: 9,
        seg_index: i,
        seg_count: n,
        total_len: total,
        seg_offset: off,
    };
    let bad: Vec<Vec<u8>> = vec![
        vec![],                                                    // empty
        good[..10].to_vec(),                                       // truncated header
        framed(&framing::Repr::single(Msg::new(1, 0), 4), b"abc"), // total ≠ payload
        {
            let mut v = good.clone();
            v[0] = 9; // version
            v
        },
        {
            let mut v = good.clone();
            v[1] = 1; // reserved flags
            v
        },
        {
            // A version-1 frame (20-byte header, no incarnation), as an old sender makes it.
            let mut v = vec![1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 11, 0, 0, 0, 0, 0, 0, 0];
            v.extend_from_slice(b"abcdefghijk");
            v
        },
        framed(&seg(3, 2, 6, 0), b"abc"),   // index ≥ count
        framed(&seg(0, 2, 100, 0), b"abc"), // L=3 cannot make 100 in 2
        framed(&seg(1, 3, 9, 4), b"abc"),   // offset ≠ index × L
    ];
    for d in &bad {
        s.send_to(d, to).unwrap();
    }
    // A forged follow-up: consistent first segment, then one that disagrees on the total.
    s.send_to(&framed(&seg(0, 3, 9, 0), b"abc"), to).unwrap();
    s.send_to(&framed(&seg(1, 3, 10, 3), b"abc"), to).unwrap();
    s.send_to(&framed(&seg(0, 3, 9, 0), b"abc"), to).unwrap(); // duplicate
                                                               // An oversized datagram is truncated by the receive buffer.
    s.send_to(&vec![1u8; 4000], to).unwrap();
    s.send_to(&good, to).unwrap();
    let got = recv_n(&mut b, 1);
    assert_eq!(&got[0].data[..], b"abc");
    let c = b.counters();
    assert_eq!(c.bad_framing, bad.len() as u64 + 1, "{c:?}");
    assert_eq!(c.duplicate_segment, 1, "{c:?}");
    assert_eq!(c.truncated, 1, "{c:?}");
    // The partial message times out.
    let mut out = Vec::new();
    b.recv_burst_at(&mut out, Instant::now() + Duration::from_secs(60))
        .unwrap();
    assert_eq!(b.counters().reassembly_timeout, 1);
    drop(got);
    assert_eq!(b.memory().stats().live_items, b.rx_buffers_held());
}

#[test]
fn randomized_datagrams_never_panic() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let mut b = dp(|_| {});
    let s = raw();
    let to = b.local_addr();
    let mut rng = SmallRng::seed_from_u64(7);
    let seeds = [
        framed(&framing::Repr::single(Msg::new(1, 0), 100), &[5; 100]),
        framed(
            &framing::Repr {
                incarnation: 0,
                msg_type: 1,
                msg_id: 2,
                seg_index: 0,
                seg_count: 3,
                total_len: 250,
                seg_offset: 0,
            },
            &[6; 100],
        ),
        framed(
            &framing::Repr {
                incarnation: 0,
                msg_type: 1,
                msg_id: 2,
                seg_index: 2,
                seg_count: 3,
                total_len: 250,
                seg_offset: 200,
            },
            &[6; 50],
        ),
    ];
    let n = 5000;
    let mut out = Vec::new();
    let mut sent = 0u64;
    for i in 0..n {
        let mut d = seeds[rng.gen_range(0..seeds.len())].clone();
        match rng.gen_range(0..4) {
            0 => {
                let k = rng.gen_range(0..d.len());
                d[k] ^= 1 << rng.gen_range(0..8);
            }
            1 => d.truncate(rng.gen_range(0..d.len())),
            2 => {
                let k = rng.gen_range(0..framing::HEADER_LEN);
                d[k] = rng.gen();
            }
            _ => {
                d = (0..rng.gen_range(0..300))
                    .map(|_| rng.gen::<u8>())
                    .collect()
            }
        }
        if s.send_to(&d, to).is_ok() {
            sent += 1;
        }
        if i % 64 == 0 {
            drain(&mut b);
            out.clear();
        }
    }
    drain(&mut b);
    let c = b.counters();
    assert!(c.bad_framing > 0 && c.delivered > 0, "{c:?}");
    assert!(c.delivered + c.total_drops() <= sent, "{c:?}");
    b.recv_burst_at(&mut out, Instant::now() + Duration::from_secs(60))
        .unwrap();
    out.clear();
    assert_eq!(b.memory().stats().live_items, b.rx_buffers_held());
}

#[test]
fn running_out_of_receive_buffers_drops_and_counts() {
    let mut b = dp(|c| {
        c.memory = MemoryConfig {
            grow: false,
            ..MemoryConfig::default()
        }
    });
    let mut a = dp(|_| {});
    let conn = a.connect(b.local_addr()).unwrap();
    let mut hog = Vec::new();
    while let Ok(x) = b.memory().alloc(2048) {
        hog.push(x);
    }
    for i in 0..5 {
        a.send_copy(conn, Msg::new(i, 0), &pattern(200, 1)).unwrap();
    }
    a.flush().unwrap();
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        b.recv_burst(&mut out).unwrap();
        if b.counters().no_rx_buffers == 5 {
            break;
        }
        std::thread::yield_now();
    }
    assert!(out.is_empty());
    assert_eq!(b.counters().no_rx_buffers, 5);
    drop(hog);
    a.send_copy(conn, Msg::new(9, 0), b"after").unwrap();
    a.flush().unwrap();
    let got = recv_n(&mut b, 1);
    assert_eq!(&got[0].data[..], b"after");
}

#[test]
fn batches_larger_than_one_sendmmsg_arrive_complete() {
    let (mut a, mut b, conn) = pair(|_| {});
    let n = 100u32;
    for i in 0..n {
        a.send_copy(conn, Msg::new(i, 0), &i.to_le_bytes()).unwrap();
    }
    assert_eq!(a.queued_datagrams(), n as usize);
    a.flush().unwrap();
    assert_eq!(a.queued_datagrams(), 0);
    let got = recv_n(&mut b, n as usize);
    let mut ids: Vec<u32> = got
        .iter()
        .map(|r| {
            assert_eq!(&r.data[..], &r.msg.id.to_le_bytes());
            r.msg.id
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
    assert_eq!(a.tx_errors(), 0);
}
