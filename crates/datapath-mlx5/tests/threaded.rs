//! The driver's hot path against the emulated ConnectX running on its own thread
//! (`emu::threaded`), concurrently: byte-exact transmit and receive under load with the rings
//! wrapping many times, every pinned buffer back in its pool afterwards, a refused lkey with
//! the queue pair reset through the device thread, and the detach on drop. These tests also
//! run under AddressSanitizer (scripts/test.sh).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::handwritten::GetM;
use cornflakes::mem::MemoryConfig;
use cornflakes::{Arena, CFBytes, CFPtr, CFString, ConnId, CornflakesObj, Msg, PinnedMemory};
use cornflakes::{RxMsg, SendError};
use cornflakes_stack::iface::{StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::wire::{ipv4, udp, MacAddr};
use datapath_mlx5::emu::threaded::{
    DeviceClock, DeviceOptions, EmuDevice, RxPort, ThreadedQueues, Wire,
};
use datapath_mlx5::emu::{EmuConfig, TxFrame};
use datapath_mlx5::prm::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 4791;

type Dp = Mlx5Datapath<ThreadedQueues>;

/// The far end of the wire, on the device thread: every transmitted frame is gathered whole
/// and sent to the test; frames from the test are delivered to the receive queue.
struct TestWire {
    inject: Receiver<Vec<u8>>,
    sent: Sender<Vec<u8>>,
}

impl Wire for TestWire {
    fn transmit(&mut self, frame: &TxFrame<'_>, _now_ns: u64) {
        let mut v = Vec::new();
        frame.gather(&mut v);
        let _ = self.sent.send(v);
    }

    fn poll(&mut self, _clock: &DeviceClock, rx: &mut RxPort<'_>) -> bool {
        let mut did = false;
        while let Ok(f) = self.inject.try_recv() {
            rx.deliver(&f);
            did = true;
        }
        did
    }

    fn finished(&self) -> bool {
        false
    }
}

struct Node {
    dev: EmuDevice<TestWire>,
    dp: Dp,
    mem: PinnedMemory,
    inject: Sender<Vec<u8>>,
    sent: Receiver<Vec<u8>>,
}

fn memory() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        max_item_size: 64 * 1024,
        ..MemoryConfig::default()
    })
    .expect("pinned memory")
}

fn node(emu: EmuConfig) -> Node {
    let (inject, inject_rx) = channel();
    let (sent_tx, sent) = channel();
    let dev = EmuDevice::spawn(
        emu,
        flow_rules(MAC_A, PORT),
        DeviceOptions {
            yield_when_idle: true,
            ..DeviceOptions::default()
        },
        TestWire {
            inject: inject_rx,
            sent: sent_tx,
        },
    )
    .expect("device thread");
    let port = dev.port();
    let mem = memory();
    port.register(&mem).expect("register");
    let mut scfg = StackConfig::new(MAC_A, SocketAddrV4::new(IP_A, PORT));
    scfg.static_arp = vec![(IP_B, MAC_B)];
    let caps = DeviceCaps {
        max_send_sge: 16,
        inline_len: 18,
        mtu: port.mtu(),
        csum_offload: true,
    };
    let dp = Mlx5Datapath::new(port.queues(), mem.clone(), caps, Mlx5Config::new(scfg))
        .expect("datapath");
    Node {
        dev,
        dp,
        mem,
        inject,
        sent,
    }
}

fn small_rings() -> EmuConfig {
    EmuConfig {
        sq_wqebbs: 64,
        rq_entries: 64,
        cq_entries: 128,
        ..EmuConfig::default()
    }
}

/// Polls completions until nothing is in flight (the device runs on its own).
fn settle(n: &mut Node) {
    let deadline = Instant::now() + Duration::from_secs(60);
    n.dp.flush().expect("flush");
    while n.dp.in_flight() > 0 {
        n.dp.poll_completions();
        assert!(
            Instant::now() < deadline,
            "the device never completed the WQEs"
        );
        std::thread::yield_now();
    }
}

fn send_obj<O: CornflakesObj>(n: &mut Node, conn: ConnId, msg: Msg, m: &O) {
    loop {
        match n.dp.send_object(conn, msg, m) {
            Ok(()) => return,
            Err(SendError::Full) => {
                n.dp.flush().expect("flush");
                n.dp.poll_completions();
                std::thread::yield_now();
            }
            Err(e) => panic!("send {msg:?}: {e}"),
        }
    }
}

/// The message bytes of a captured frame; checks both checksums.
fn message_of(frame: &[u8]) -> Vec<u8> {
    let ip = ipv4::Packet::new_checked(&frame[14..]).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 checksum");
    let u = udp::Packet::new_checked(ip.payload()).expect("udp");
    assert!(
        u.verify_checksum(ip.src_addr(), ip.dst_addr()),
        "UDP checksum"
    );
    frame[FRAME_OVERHEAD..14 + ip.total_len() as usize].to_vec()
}

/// A random GetM: copied keys, values of random lengths from pinned memory (zero-copy from
/// 512 bytes on), all within one 1500-byte frame.
fn random_object<'a>(
    rng: &mut SmallRng,
    arena: &'a Arena,
    mem: &PinnedMemory,
    id: u32,
) -> GetM<'a> {
    let mut m = GetM::new_in(arena);
    m.set_id(id);
    let keys = rng.gen_range(0..4);
    if keys > 0 {
        m.init_keys(keys);
        for k in 0..keys {
            m.get_mut_keys()
                .append(CFString::new(&format!("key-{id}-{k}"), arena));
        }
    }
    let mut budget: usize = 1200;
    let nvals = rng.gen_range(0..6);
    if nvals > 0 {
        m.init_vals(nvals);
        for i in 0..nvals {
            let len = rng.gen_range(1..1100).min(budget.max(1));
            budget = budget.saturating_sub(len);
            let fill: Vec<u8> = (0..len)
                .map(|j| (j * 7 + i * 13 + id as usize) as u8)
                .collect();
            let v = mem.alloc_copy(&fill).expect("value");
            m.get_mut_vals()
                .append(CFBytes(CFPtr::from_rcbuf(v, arena)));
        }
    }
    m
}

/// A captured frame from A to B turned into one from B to A (MACs and IPs swapped: the
/// checksums stay valid, both ports are `PORT`).
fn reversed(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    let (a, b) = (f[0..6].to_vec(), f[6..12].to_vec());
    f[0..6].copy_from_slice(&b);
    f[6..12].copy_from_slice(&a);
    let (s, d) = (f[26..30].to_vec(), f[30..34].to_vec());
    f[26..30].copy_from_slice(&d);
    f[30..34].copy_from_slice(&s);
    f
}

#[test]
fn thousands_of_random_objects_go_out_and_come_back_byte_for_byte_while_the_device_runs() {
    let mut n = node(small_rings());
    let conn =
        n.dp.connect(SocketAddrV4::new(IP_B, PORT))
            .expect("connect");
    let mut rng = SmallRng::seed_from_u64(11);
    let mem = n.mem.clone();
    const N: usize = 3000;
    let mut expected = Vec::with_capacity(N);
    for id in 0..N as u32 {
        let arena = Arena::with_memory(&mem);
        let m = random_object(&mut rng, &arena, &mem, id);
        expected.push(m.serialize_to_vec());
        send_obj(&mut n, conn, Msg::new(id, 1), &m);
        if rng.gen_range(0..4) == 0 {
            n.dp.flush().expect("flush");
        }
        n.dp.poll_completions();
    }
    settle(&mut n);
    let frames: Vec<Vec<u8>> = n.sent.try_iter().collect();
    assert_eq!(frames.len(), N, "one frame per object");
    for (i, (f, want)) in frames.iter().zip(&expected).enumerate() {
        assert_eq!(&message_of(f), want, "object {i}");
    }

    // The same frames back to the driver (the receive ring wraps ~50 times), each echoed
    // zero-copy from its receive buffer and checked again.
    let mut got: Vec<RxMsg> = Vec::new();
    let mut echoed = Vec::with_capacity(N);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut next = 0;
    while echoed.len() < N {
        // At most a receive queue's worth in flight, so nothing is dropped for want of buffers.
        while next < N && next - echoed.len() < 32 {
            n.inject.send(reversed(&frames[next])).unwrap();
            next += 1;
        }
        got.clear();
        n.dp.recv_burst(&mut got).expect("recv");
        for m in got.drain(..) {
            assert_eq!(
                &m.data[..],
                &expected[echoed.len()][..],
                "received {}",
                echoed.len()
            );
            echoed.push(m.msg.id);
            loop {
                match n.dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data)) {
                    Ok(()) => break,
                    Err(SendError::Full) => {
                        n.dp.flush().expect("flush");
                        n.dp.poll_completions();
                    }
                    Err(e) => panic!("echo: {e}"),
                }
            }
        }
        n.dp.flush().expect("flush");
        n.dp.poll_completions();
        assert!(
            Instant::now() < deadline,
            "only {} of {N} came back",
            echoed.len()
        );
        std::thread::yield_now();
    }
    settle(&mut n);
    let back: Vec<Vec<u8>> = n.sent.try_iter().collect();
    assert_eq!(back.len(), N);
    for (i, f) in back.iter().enumerate() {
        assert_eq!(message_of(f), expected[i], "echo {i}");
    }
    assert_eq!(echoed, (0..N as u32).collect::<Vec<_>>());
    assert_eq!(n.dp.stats().tx.error_cqes, 0);
    assert_eq!(n.dp.counters().total_drops(), 0);
    drop(got);
    let Node { dev, dp, mem, .. } = n;
    drop(dp);
    assert_eq!(
        mem.stats().live_items,
        0,
        "every pinned buffer back in its pool"
    );
    let (_, report) = dev.stop().expect("device");
    let s = report.stats;
    assert_eq!(s.frames_sent, 2 * N as u64);
    assert_eq!(s.frames_received, N as u64);
    assert_eq!((s.tx_errors, s.rx_no_wqe, s.cq_overruns), (0, 0, 0));
}

#[test]
fn a_refused_lkey_resets_the_queue_pair_through_the_device_thread_and_it_recovers() {
    let mut n = node(EmuConfig::default());
    let conn =
        n.dp.connect(SocketAddrV4::new(IP_B, PORT))
            .expect("connect");
    let mem = n.dp.memory().clone();
    let unregistered = memory();
    let value = unregistered.alloc_copy(&[7u8; 900]).unwrap();
    {
        let arena = Arena::with_memory(&mem);
        let mut m = GetM::new_in(&arena);
        m.init_vals(1);
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(value.clone(), &arena)));
        n.dp.send_object(conn, Msg::new(1, 1), &m).unwrap();
        // A good message behind it in the same batch is flushed by the device.
        let good = random_object(&mut SmallRng::seed_from_u64(1), &arena, &mem, 2);
        n.dp.send_object(conn, Msg::new(2, 1), &good).unwrap();
    }
    settle(&mut n);
    assert_eq!(value.ref_count(), 1, "released by the error completion");
    let st = n.dp.stats();
    assert_eq!(st.tx.error_cqes, 1);
    assert_eq!(st.tx.flushed_cqes, 1);
    assert_eq!(st.tx.last_syndrome, MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
    assert_eq!(
        st.tx.recoveries, 1,
        "reset and ready answered by the device thread"
    );
    assert_eq!(st.reset_failures, 0);
    assert!(n.sent.try_recv().is_err(), "nothing of the batch went out");
    assert_eq!(
        n.dp.rx_posted(),
        128,
        "receive queue reposted after the reset"
    );
    // The queue works again.
    let arena = Arena::with_memory(&mem);
    let good = random_object(&mut SmallRng::seed_from_u64(3), &arena, &mem, 3);
    send_obj(&mut n, conn, Msg::new(3, 1), &good);
    settle(&mut n);
    let f = n.sent.recv_timeout(Duration::from_secs(30)).expect("sent");
    assert_eq!(message_of(&f), good.serialize_to_vec());
    drop(arena);
    let Node { dev, dp, mem, .. } = n;
    drop(dp);
    assert_eq!(mem.stats().live_items, 0);
    let (_, report) = dev.stop().expect("device");
    assert_eq!(report.stats.resets, 1);
    assert_eq!(
        report.stats.rx_flushed, 128,
        "the QP in error flushed every receive WQE"
    );
}

#[test]
fn dropping_the_datapath_detaches_the_device_from_its_buffers() {
    let n = node(EmuConfig::default());
    let frame = {
        // Any frame the flow rules accept: it would land in a posted receive buffer.
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&MAC_A.0);
        f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        f
    };
    let Node {
        dev,
        dp,
        mem,
        inject,
        ..
    } = n;
    drop(dp);
    drop(mem);
    // The receive buffers are gone; the device must not write into them (AddressSanitizer
    // would see it).
    for _ in 0..10 {
        inject.send(frame.clone()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::sleep(Duration::from_millis(20));
    let (_, report) = dev.stop().expect("device");
    assert!(Instant::now() < deadline);
    assert_eq!(report.stats.frames_received, 0);
    assert_eq!(report.stats.rx_qp_error, 10, "{:?}", report.stats);
}

#[test]
fn a_small_send_cq_bounds_the_wqes_in_flight_against_a_concurrent_device() {
    // 256 WQEBBs but 8 CQEs: at most 8 WQEs in flight, or the device (running concurrently)
    // would overrun the CQ; then an error flushes everything in flight, still without overrun.
    let mut n = node(EmuConfig {
        sq_wqebbs: 256,
        rq_entries: 8,
        cq_entries: 8,
        ..EmuConfig::default()
    });
    let conn =
        n.dp.connect(SocketAddrV4::new(IP_B, PORT))
            .expect("connect");
    let mem = n.mem.clone();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut expected = Vec::new();
    for id in 0..500u32 {
        let arena = Arena::with_memory(&mem);
        let m = random_object(&mut rng, &arena, &mem, id);
        expected.push(m.serialize_to_vec());
        send_obj(&mut n, conn, Msg::new(id, 1), &m);
        assert!(n.dp.in_flight() <= 8);
    }
    settle(&mut n);
    let frames: Vec<Vec<u8>> = n.sent.try_iter().collect();
    assert_eq!(frames.len(), expected.len());
    for (f, want) in frames.iter().zip(&expected) {
        assert_eq!(&message_of(f), want);
    }
    let unregistered = memory();
    let bad = unregistered.alloc_copy(&[9u8; 700]).unwrap();
    for id in 0..6u32 {
        let arena = Arena::with_memory(&mem);
        let mut m = GetM::new_in(&arena);
        m.init_vals(1);
        let v = if id == 0 {
            bad.clone()
        } else {
            mem.alloc_copy(&[3u8; 700]).unwrap()
        };
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v, &arena)));
        n.dp.send_object(conn, Msg::new(id, 1), &m).unwrap();
    }
    settle(&mut n);
    let st = n.dp.stats();
    assert_eq!(
        (st.tx.error_cqes, st.tx.flushed_cqes, st.tx.recoveries),
        (1, 5, 1)
    );
    let Node { dev, dp, mem, .. } = n;
    drop(dp);
    assert_eq!(mem.stats().live_items, 0);
    let (_, report) = dev.stop().expect("device");
    assert_eq!(report.stats.cq_overruns, 0);
}

#[test]
fn fewer_than_two_cpus_is_a_clear_error_not_a_silent_slowdown() {
    use datapath_mlx5::emu::threaded::{allowed_cores, pin_current_thread, two_cores};
    let first = allowed_cores().expect("affinity")[0];
    // A thread restricted to one CPU sees a one-CPU machine.
    let err = std::thread::spawn(move || {
        pin_current_thread(first).expect("pin");
        assert_eq!(allowed_cores().unwrap(), vec![first]);
        two_cores().expect_err("one CPU")
    })
    .join()
    .unwrap();
    let msg = err.to_string();
    assert!(msg.contains("needs 2 CPUs"), "{msg}");
    assert!(msg.contains(&format!("[{first}]")), "{msg}");
}
