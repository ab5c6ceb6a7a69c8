//! The loopback NIC: end-to-end sends, buffer ownership across deferred DMA and completions,
//! ARP, and bad input dropped and counted.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{
    object_to_sga, Completions, Connect, DatapathMemory, Receive, Transmit,
};
use cornflakes::handwritten::GetM;
use cornflakes::mem::MemoryConfig;
use cornflakes::{
    Arena, CFBytes, CFPtr, CFString, ConnId, CornflakesObj, DecodeObj, Msg, PinnedMemory, RcBuf,
    RxMsg, SendError,
};
use cornflakes_stack::wire::{framing, ipv4, udp};
use cornflakes_stack::{ChecksumCaps, MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

const MAC_A: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
const MAC_B: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);

fn addr_a() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 5000)
}
fn addr_b() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 6000)
}

fn configs(static_arp: bool) -> (LoopbackConfig, LoopbackConfig) {
    let mut a = StackConfig::new(MAC_A, addr_a());
    let mut b = StackConfig::new(MAC_B, addr_b());
    if static_arp {
        a.static_arp.push((*addr_b().ip(), MAC_B));
        b.static_arp.push((*addr_a().ip(), MAC_A));
    }
    (LoopbackConfig::new(a), LoopbackConfig::new(b))
}

fn pair() -> (Loopback, Loopback, ConnId) {
    let (a, b) = configs(true);
    let (mut a, b) = Loopback::pair(a, b).unwrap();
    let conn = a.connect(addr_b()).unwrap();
    (a, b, conn)
}

/// A GetM with small keys (copied) and the given values (zero-copy when pinned and large).
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

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn recv_all(dp: &mut Loopback) -> Vec<RxMsg> {
    let mut out = Vec::new();
    while dp.recv_burst(&mut out).unwrap() > 0 {}
    out
}

fn check_getm(data: &RcBuf, id: u32, keys: &[&str], vals: &[Vec<u8>]) {
    let arena = Arena::new();
    let m = GetM::deserialize_rcbuf(data, &arena).expect("decodes");
    assert_eq!(m.get_id(), id);
    let got_keys: Vec<&[u8]> = m.get_keys().iter().map(|k| k.as_bytes()).collect();
    let want_keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    assert_eq!(got_keys, want_keys);
    let got: Vec<&[u8]> = m.get_vals().iter().map(|v| v.as_bytes()).collect();
    let want: Vec<&[u8]> = vals.iter().map(|v| &v[..]).collect();
    assert_eq!(got, want);
}

#[test]
fn object_with_copy_and_zero_copy_fields_goes_end_to_end() {
    let (mut a, mut b, conn) = pair();
    let mem = a.memory().clone();
    let vals = [pattern(20, 1), pattern(600, 2), pattern(700, 3)];
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 42, &["k1", "key-two"], &bufs);
    assert_eq!(m.sizes().zero_copy_count, 2);
    let msg = Msg::new(7, 3).with_incarnation(u64::MAX - 1);
    a.send_object(conn, msg, &m).unwrap();
    // One header descriptor (headers + object header + copy area) and one per zero-copy value.
    assert_eq!(a.ring_state(), (3, 0, 0));
    // Nothing is visible to the peer before the flush.
    assert!(recv_all(&mut b).is_empty());
    a.flush().unwrap();
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].msg, msg);
    assert_eq!(got[0].peer, addr_a());
    check_getm(&got[0].data, 42, &["k1", "key-two"], &vals);
    assert_eq!(b.counters().delivered, 1);
    assert_eq!(b.counters().total_drops(), 0);
    // The reply goes back on the connection the message arrived on (learned, no ARP).
    // The reply goes back on the connection the message arrived on (learned, no ARP), with
    // the request's incarnation and id.
    b.send_copy(
        got[0].conn,
        Msg {
            ty: 4,
            ..got[0].msg
        },
        b"ok",
    )
    .unwrap();
    b.flush().unwrap();
    let back = recv_all(&mut a);
    assert_eq!(&back[0].data[..], b"ok");
    assert_eq!(back[0].msg, Msg::new(7, 4).with_incarnation(u64::MAX - 1));
}

#[test]
fn received_payload_is_zero_copy_into_the_receive_buffer() {
    let (mut a, mut b, conn) = pair();
    let big = a.memory().alloc_copy(&pattern(1200, 9)).unwrap();
    let arena = Arena::with_memory(a.memory());
    let m = getm(&arena, 1, &[], std::slice::from_ref(&big));
    a.send_object(conn, Msg::new(1, 0), &m).unwrap();
    a.flush().unwrap();
    let got = recv_all(&mut b);
    let data = &got[0].data;
    // The message is a view into the receive buffer: it starts after the 62 header bytes.
    assert_eq!(data.item_offset(), cornflakes_stack::FRAME_OVERHEAD);
    let rarena = Arena::with_memory(b.memory());
    let d = GetM::deserialize_rcbuf(data, &rarena).unwrap();
    let v = d.get_vals().get(0).unwrap();
    assert!(
        v.ptr().is_zero_copy(),
        "large decoded field references the packet"
    );
    assert_eq!(v.as_bytes(), &big[..]);
}

#[test]
fn buffers_dropped_or_replaced_after_send_still_put_the_right_bytes_on_the_wire() {
    let (mut a, mut b, conn) = pair();
    let mem = a.memory().clone();
    let base = mem.stats().live_items;
    let original = pattern(1024, 5);
    let value = mem.alloc_copy(&original).unwrap();
    let keep = value.clone(); // to watch the count
    let arena = Arena::with_memory(&mem);
    let mut m = getm(&arena, 9, &["k"], &[value]);
    assert_eq!(keep.ref_count(), 2); // `keep` + the arena's, for the object's pointer
    a.send_object(conn, Msg::new(1, 0), &m).unwrap();
    assert_eq!(keep.ref_count(), 3); // + the descriptor
                                     // Overwrite by replacement: the application puts a new buffer in the field...
    let replacement = mem.alloc_copy(&[0xbb; 1024]).unwrap();
    assert_ne!(
        replacement.as_ptr(),
        keep.as_ptr(),
        "the sent buffer is not reused"
    );
    m.get_mut_vals()
        .set(0, CFBytes(CFPtr::from_rcbuf(replacement, &arena)));
    // The arena keeps what the object was given until its reset or drop.
    assert_eq!(keep.ref_count(), 3);
    // ...then drops the object and its arena, and allocates more buffers of the same size.
    drop(arena);
    let scribble: Vec<RcBuf> = (0..8)
        .map(|_| mem.alloc_copy(&[0xcc; 1024]).unwrap())
        .collect();
    assert!(scribble.iter().all(|s| s.as_ptr() != keep.as_ptr()));
    a.flush().unwrap();
    let got = recv_all(&mut b);
    check_getm(&got[0].data, 9, &["k"], &[original]);
    // Gathered but not completed: the descriptor still holds its reference.
    assert_eq!(keep.ref_count(), 2);
    assert_eq!(a.ring_state(), (0, 0, 2));
    let live_before = mem.stats().live_items;
    // Completion drops the header buffer and the value reference: one release each.
    assert_eq!(a.poll_completions(), 2);
    assert_eq!(keep.ref_count(), 1);
    assert_eq!(
        mem.stats().live_items,
        live_before - 1,
        "header buffer released once"
    );
    assert_eq!(a.poll_completions(), 0);
    assert_eq!(a.in_flight(), 0);
    drop(keep);
    drop(scribble);
    assert_eq!(
        mem.stats().live_items,
        base,
        "everything released exactly once"
    );
}

#[test]
fn application_drop_right_after_send_then_completion_releases_last_reference() {
    let (mut a, mut b, conn) = pair();
    let mem = a.memory().clone();
    let base = mem.stats().live_items;
    {
        let arena = Arena::with_memory(&mem);
        let v = mem.alloc_copy(&pattern(4000, 1)).unwrap();
        let m = getm(&arena, 1, &[], &[v]);
        a.send_object(conn, Msg::new(2, 0).with_incarnation(77), &m)
            .unwrap();
    }
    // The application holds nothing; the ring holds the value (sliced across frames), the
    // head buffer and one header buffer per frame.
    let held = mem.stats().live_items;
    assert_eq!(held, base + 2 + 3, "value + head buffer + 3 frame headers");
    a.flush().unwrap();
    let got = recv_all(&mut b);
    assert_eq!(
        got[0].msg,
        Msg::new(2, 0).with_incarnation(77),
        "every segment's"
    );
    check_getm(&got[0].data, 1, &[], &[pattern(4000, 1)]);
    assert_eq!(
        mem.stats().live_items,
        held,
        "not released before completion"
    );
    a.poll_completions();
    assert_eq!(mem.stats().live_items, base);
}

#[test]
fn objects_larger_than_one_frame_are_segmented_and_reassembled() {
    let (mut a, mut b, conn) = pair();
    let mem = a.memory().clone();
    let vals: Vec<Vec<u8>> = (0..7).map(|i| pattern(901 + 200 * i, i as u8)).collect();
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let keys = ["a", "bb", "ccc"];
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 77, &keys, &bufs);
    // 7 zero-copy values, at most 8 descriptors per frame: 6 stay zero-copy, 1 is copied.
    a.send_object(conn, Msg::new(3, 1), &m).unwrap();
    a.flush().unwrap();
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 1);
    check_getm(&got[0].data, 77, &keys, &vals);
    let frames = m
        .sizes()
        .total()
        .div_ceil(1500 - cornflakes_stack::IP_OVERHEAD);
    assert!(frames > 1);
    assert_eq!(b.counters().delivered, 1);
    assert_eq!(b.counters().total_drops(), 0);
    drop(got);
    // Completions release everything (frame headers, the head buffer, value slices).
    a.poll_completions();
    drop(arena);
    drop(bufs);
    assert_eq!(mem.stats().live_items, 0);
    assert_eq!(b.memory().stats().live_items, 0);
}

#[test]
fn more_zero_copy_entries_than_segments_demotes_the_smallest() {
    let (a, b) = configs(true);
    let mut a = LoopbackConfig {
        max_segments: 2,
        ..a
    };
    a.stack.caps = ChecksumCaps::NO_UDP_TX;
    let (mut a, mut b) = Loopback::pair(a, b).unwrap();
    let conn = a.connect(addr_b()).unwrap();
    let mem = a.memory().clone();
    let vals: Vec<Vec<u8>> = [600, 700, 520, 900]
        .iter()
        .map(|&n| pattern(n, n as u8))
        .collect();
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 5, &["x"], &bufs);
    assert_eq!(m.sizes().zero_copy_count, 4);
    // 2720 bytes: two frames; with 2 descriptors per frame there is no room for zero-copy
    // slices next to a frame header and the head, so the object is sent by copy.
    a.send_object(conn, Msg::new(4, 0), &m).unwrap();
    a.flush().unwrap();
    let got = recv_all(&mut b);
    check_getm(&got[0].data, 5, &["x"], &vals);
    // One frame, 2 descriptors: header + one zero-copy value; the smaller value is copied.
    let small = [pattern(600, 1), pattern(520, 2)];
    let sbufs: Vec<RcBuf> = small.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let m2 = getm(&arena, 6, &[], &sbufs);
    let before = a.ring_state().0;
    a.send_object(conn, Msg::new(5, 0), &m2).unwrap();
    assert_eq!(
        a.ring_state().0 - before,
        2,
        "header + the one zero-copy value kept"
    );
    a.flush().unwrap();
    let got = recv_all(&mut b);
    check_getm(&got[0].data, 6, &[], &small);
}

#[test]
fn send_sga_and_send_copy() {
    let (mut a, mut b, conn) = pair();
    let mem = a.memory().clone();
    let vals = [pattern(800, 1), pattern(3000, 2)];
    let bufs: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
    let arena = Arena::with_memory(&mem);
    let m = getm(&arena, 11, &["z"], &bufs);
    let sga = object_to_sga(&m, &mem, a.max_segments()).unwrap();
    assert_eq!(sga.len(), 3);
    a.send_sga(conn, Msg::new(1, 0), &sga).unwrap();
    let big = pattern(5000, 4);
    a.send_copy(conn, Msg::new(2, 0), &big).unwrap();
    a.send_copy(conn, Msg::new(3, 0), &[]).unwrap();
    a.flush().unwrap();
    let got = recv_all(&mut b);
    assert_eq!(got.len(), 3);
    check_getm(&got[0].data, 11, &["z"], &vals);
    assert_eq!(&got[1].data[..], &big[..]);
    assert!(got[2].data.is_empty());
    let too_many: Vec<RcBuf> = (0..a.max_segments()).map(|_| bufs[0].clone()).collect();
    assert!(matches!(
        a.send_sga(conn, Msg::new(4, 0), &too_many),
        Err(SendError::TooManySegments { .. })
    ));
    let huge = vec![0u8; a.max_message_len() + 1];
    assert!(matches!(
        a.send_copy(conn, Msg::new(5, 0), &huge),
        Err(SendError::TooLarge { .. })
    ));
    assert!(matches!(
        a.send_copy(ConnId(99), Msg::new(5, 0), b"x"),
        Err(SendError::UnknownConn(_))
    ));
}

#[test]
fn full_ring_refuses_whole_messages() {
    let (a, b) = configs(true);
    let a = LoopbackConfig { tx_ring: 4, ..a };
    let (mut a, _b) = Loopback::pair(a, b).unwrap();
    let conn = a.connect(addr_b()).unwrap();
    for i in 0..4 {
        a.send_copy(conn, Msg::new(i, 0), b"hi").unwrap();
    }
    assert!(matches!(
        a.send_copy(conn, Msg::new(9, 0), b"hi"),
        Err(SendError::Full)
    ));
    assert_eq!(a.in_flight(), 4);
}

#[test]
fn arp_resolves_the_peer_before_sending() {
    let (a, b) = configs(false);
    let (mut a, mut b) = Loopback::pair(a, b).unwrap();
    let conn = a.connect(addr_b()).unwrap();
    assert!(matches!(
        a.send_copy(conn, Msg::new(1, 0), b"x"),
        Err(SendError::Resolving(_))
    ));
    // B answers the request on its poll; A learns the reply on its poll.
    let mut out = Vec::new();
    b.recv_burst(&mut out).unwrap();
    assert_eq!(b.counters().arp_replies_sent, 1);
    a.recv_burst(&mut out).unwrap();
    assert!(out.is_empty());
    a.send_copy(conn, Msg::new(1, 0), b"x").unwrap();
    a.flush().unwrap();
    let got = recv_all(&mut b);
    assert_eq!(&got[0].data[..], b"x");
}

#[test]
fn arp_gives_up_and_counts_failure() {
    let (a, b) = configs(false);
    let (mut a, _b) = Loopback::pair(a, b).unwrap();
    a.connect(addr_b()).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    for i in 1..=10 {
        a.recv_burst_at(&mut out, t0 + Duration::from_millis(100 * i));
    }
    assert_eq!(a.counters().arp_failures, 1);
}

/// A valid frame from A to B, captured off the wire.
fn valid_frame(len: usize) -> Vec<u8> {
    let (mut a, _b, conn) = pair();
    a.set_capture(true);
    a.send_copy(conn, Msg::new(1, 2), &pattern(len, 0)).unwrap();
    a.flush().unwrap();
    let mut b2 = _b;
    recv_all(&mut b2);
    a.take_captured().remove(0)
}

const IP: usize = 14;
const UDP: usize = 34;
const FR: usize = 42;

/// Recomputes the IPv4 and UDP checksums of a (possibly mutated) frame where its length
/// fields allow it, so mutations reach the layers behind the checksums.
fn refix(f: &mut [u8]) {
    if f.len() < IP + 20 {
        return;
    }
    let hl = ((f[IP] & 0xf) * 4) as usize;
    if hl < 20 || IP + hl > f.len() {
        return;
    }
    let total = u16::from_be_bytes([f[IP + 2], f[IP + 3]]) as usize;
    let mut ip = ipv4::Packet::new_unchecked(&mut f[IP..]);
    ip.fill_checksum();
    let (s, d) = (ip.src_addr(), ip.dst_addr());
    if hl == 20 && total >= 28 && IP + total <= f.len() {
        let end = IP + total;
        if udp::Packet::new_checked(&f[UDP..end]).is_ok() {
            udp::Packet::new_unchecked(&mut f[UDP..end]).fill_checksum(s, d);
        }
    }
}

#[test]
fn bad_frames_are_dropped_and_counted() {
    let good = valid_frame(100);
    let (_a, mut b, _) = pair();
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    cases.push(("truncated", good[..10].to_vec()));
    cases.push(("truncated", good[..30].to_vec()));
    let mut f = good.clone();
    f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    cases.push(("non_ipv4", f));
    let mut f = good.clone();
    f[0] = 0x02;
    f[5] = 0x77;
    cases.push(("wrong_dst", f));
    let mut f = good.clone();
    f[IP + 8] ^= 0xff; // TTL changed, checksum stale
    cases.push(("bad_checksum", f));
    let mut f = good.clone();
    f[IP + 6] = 0x20; // more fragments
    refix(&mut f);
    cases.push(("ip_fragment", f));
    let mut f = good.clone();
    f[IP + 6] = 0x00;
    f[IP + 7] = 0x10; // fragment offset
    refix(&mut f);
    cases.push(("ip_fragment", f));
    let mut f = good.clone();
    f[IP] = 0x46; // options
    refix(&mut f);
    cases.push(("ip_options", f));
    let mut f = good.clone();
    f[IP + 9] = 6; // TCP
    refix(&mut f);
    cases.push(("non_udp", f));
    let mut f = good.clone();
    f[IP + 19] = 99; // another host
    refix(&mut f);
    cases.push(("wrong_dst", f));
    let mut f = good.clone();
    f[UDP + 3] ^= 1; // port
    refix(&mut f);
    cases.push(("unknown_port", f));
    let mut f = good.clone();
    f[FR + 30] ^= 0xff; // payload changed, UDP checksum stale
    cases.push(("bad_checksum", f));
    let mut f = good.clone();
    f[IP + 2..IP + 4].copy_from_slice(&2000u16.to_be_bytes()); // IP length beyond the frame
    refix(&mut f);
    cases.push(("truncated", f));
    let mut f = good.clone();
    f[UDP + 4..UDP + 6].copy_from_slice(&7u16.to_be_bytes()); // UDP length below its header
    refix(&mut f);
    cases.push(("truncated", f));
    let mut f = good.clone();
    f[FR] = 1; // framing version 1 (a 20-byte header without the incarnation)
    refix(&mut f);
    cases.push(("bad_framing", f));
    let mut f = good.clone();
    f[FR] = 3; // a version this stack does not know
    refix(&mut f);
    cases.push(("bad_framing", f));
    let mut f = good.clone();
    f[FR + 12..FR + 16].copy_from_slice(&101u32.to_le_bytes()); // total length ≠ payload
    refix(&mut f);
    cases.push(("bad_framing", f));
    let mut f = good.clone();
    // Forged segment: claims 3 segments, index 1, offset that is not a multiple of its length.
    f[FR + 8..FR + 10].copy_from_slice(&1u16.to_le_bytes());
    f[FR + 10..FR + 12].copy_from_slice(&3u16.to_le_bytes());
    f[FR + 12..FR + 16].copy_from_slice(&300u32.to_le_bytes());
    f[FR + 16..FR + 20].copy_from_slice(&150u32.to_le_bytes());
    refix(&mut f);
    cases.push(("bad_framing", f));
    let mut f = good.clone();
    f[IP] = 0x55; // IP version 5
    refix(&mut f);
    cases.push(("bad_ip_header", f));
    for (what, frame) in cases {
        let before = b.counters();
        b.inject_frame(&frame);
        let got = recv_all(&mut b);
        assert!(got.is_empty(), "{what}: delivered");
        let after = b.counters();
        let field = |c: &cornflakes::DropCounters| match what {
            "truncated" => c.truncated,
            "non_ipv4" => c.non_ipv4,
            "wrong_dst" => c.wrong_dst,
            "bad_checksum" => c.bad_checksum,
            "ip_fragment" => c.ip_fragment,
            "ip_options" => c.ip_options,
            "non_udp" => c.non_udp,
            "unknown_port" => c.unknown_port,
            "bad_framing" => c.bad_framing,
            "bad_ip_header" => c.bad_ip_header,
            _ => unreachable!(),
        };
        assert_eq!(field(&after), field(&before) + 1, "{what}: {after:?}");
        assert_eq!(
            after.total_drops(),
            before.total_drops() + 1,
            "{what}: counted once"
        );
    }
    // The untouched frame is delivered.
    b.inject_frame(&good);
    assert_eq!(recv_all(&mut b).len(), 1);
}

#[test]
fn udp_zero_checksum_is_accepted() {
    let mut f = valid_frame(50);
    f[UDP + 6] = 0;
    f[UDP + 7] = 0;
    let (_a, mut b, _) = pair();
    b.inject_frame(&f);
    assert_eq!(recv_all(&mut b).len(), 1);
}

#[test]
fn randomized_mutations_never_panic_and_free_everything() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    // Valid single- and multi-frame traffic to mutate.
    let (mut a, _b0, conn) = pair();
    a.set_capture(true);
    a.send_copy(conn, Msg::new(1, 0), &pattern(300, 1)).unwrap();
    a.send_copy(conn, Msg::new(2, 0), &pattern(4000, 2))
        .unwrap();
    a.flush().unwrap();
    let mut b0 = _b0;
    assert_eq!(recv_all(&mut b0).len(), 2);
    let seeds = a.take_captured();
    assert_eq!(seeds.len(), 4);
    let (_a, mut b, _) = pair();
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let mut out = Vec::new();
    let n = 20_000;
    for i in 0..n {
        let mut f = seeds[rng.gen_range(0..seeds.len())].clone();
        match rng.gen_range(0..6) {
            0 => {
                let k = rng.gen_range(0..f.len());
                f[k] ^= 1 << rng.gen_range(0..8);
            }
            1 => f.truncate(rng.gen_range(0..f.len())),
            2 => f.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>())),
            3 => {
                // Mutate headers and fix checksums so the deeper layers are reached.
                let k = rng.gen_range(IP..(FR + framing::HEADER_LEN).min(f.len()));
                f[k] = rng.gen();
                if f.len() >= FR && f[IP] & 0xf >= 5 {
                    refix(&mut f);
                }
            }
            4 => {
                // Forge framing fields only.
                let k = rng.gen_range(FR..FR + framing::HEADER_LEN);
                f[k] = rng.gen();
                refix(&mut f);
            }
            _ => {
                f = (0..rng.gen_range(0..200))
                    .map(|_| rng.gen::<u8>())
                    .collect()
            }
        }
        b.inject_frame(&f);
        if i % 32 == 0 {
            b.recv_burst(&mut out).unwrap();
            out.clear();
        }
    }
    while b.recv_burst(&mut out).unwrap() > 0 {}
    out.clear();
    let c = b.counters();
    assert!(c.total_drops() > (n / 2) as u64, "{c:?}");
    // Every layer was reached, and no frame was counted twice.
    assert!(
        c.delivered > 0 && c.truncated > 0 && c.bad_checksum > 0 && c.bad_framing > 0,
        "{c:?}"
    );
    assert!(c.delivered + c.total_drops() <= n as u64, "{c:?}");
    // Partial messages time out and free their buffers.
    b.recv_burst_at(&mut out, Instant::now() + Duration::from_secs(3600));
    assert_eq!(b.memory().stats().live_items, 0);
}

#[test]
fn running_out_of_receive_buffers_drops_and_counts() {
    let (a, b) = configs(true);
    let b = LoopbackConfig {
        memory: MemoryConfig {
            grow: false,
            ..MemoryConfig::default()
        },
        ..b
    };
    let (mut a, mut b) = Loopback::pair(a, b).unwrap();
    let conn = a.connect(addr_b()).unwrap();
    // Take every 2 KiB item of B's only region.
    let mut hog = Vec::new();
    while let Ok(x) = b.memory().alloc(2048) {
        hog.push(x);
    }
    for i in 0..3 {
        a.send_copy(conn, Msg::new(i, 0), &pattern(1000, 1))
            .unwrap();
    }
    a.flush().unwrap();
    assert!(recv_all(&mut b).is_empty());
    assert_eq!(b.counters().no_rx_buffers, 3);
    drop(hog);
    a.send_copy(conn, Msg::new(9, 0), &pattern(1000, 1))
        .unwrap();
    a.flush().unwrap();
    assert_eq!(recv_all(&mut b).len(), 1);
}

#[test]
fn missing_segment_times_out() {
    let (mut a, _b0, conn) = pair();
    a.set_capture(true);
    a.send_copy(conn, Msg::new(1, 0), &pattern(3000, 1))
        .unwrap();
    a.flush().unwrap();
    let mut b0 = _b0;
    recv_all(&mut b0);
    let frames = a.take_captured();
    assert_eq!(frames.len(), 3);
    let (_a, mut b, _) = pair();
    b.inject_frame(&frames[0]);
    b.inject_frame(&frames[2]);
    b.inject_frame(&frames[2]);
    let t0 = Instant::now();
    let mut out = Vec::new();
    b.recv_burst_at(&mut out, t0);
    assert!(out.is_empty());
    assert_eq!(b.counters().duplicate_segment, 1);
    b.recv_burst_at(&mut out, t0 + Duration::from_secs(10));
    assert_eq!(b.counters().reassembly_timeout, 1);
    assert_eq!(b.memory().stats().live_items, 0);
    // The whole message, late segment first, still reassembles.
    for f in frames.iter().rev() {
        b.inject_frame(f);
    }
    b.recv_burst_at(&mut out, t0 + Duration::from_secs(10));
    assert_eq!(&out[0].data[..], &pattern(3000, 1)[..]);
}

#[test]
fn memory_is_pinned_memory_of_the_datapath() {
    let (a, _b, _) = pair();
    let mem: &PinnedMemory = a.memory();
    assert!(mem.stats().regions >= 1);
}

#[test]
fn a_lossy_wire_loses_and_duplicates_frames_reproducibly() {
    let run = || {
        let (a, mut b) = configs(true);
        b.faults = datapath_loopback::Faults {
            loss: 0.05,
            duplicate: 0.01,
            seed: 7,
        };
        let (mut a, mut b) = Loopback::pair(a, b).unwrap();
        let conn = a.connect(addr_b()).unwrap();
        let mut rx = Vec::new();
        b.recv_burst(&mut rx).unwrap(); // ARP: never touched
        a.recv_burst(&mut rx).unwrap();
        let mut got = Vec::new();
        for i in 0..4000u32 {
            a.send_copy(conn, Msg::new(i, 0), &i.to_le_bytes()).unwrap();
            a.flush().unwrap();
            got.extend(recv_all(&mut b).into_iter().map(|m| m.msg.id));
            a.poll_completions();
        }
        (got, b.faults_injected())
    };
    let (got, f) = run();
    assert_eq!(got.len() as u64, 4000 - f.lost + f.duplicated);
    assert!((120..=280).contains(&f.lost), "{f:?}");
    assert!((15..=70).contains(&f.duplicated), "{f:?}");
    assert_eq!(run(), (got, f), "the same seed, the same faults");
}
