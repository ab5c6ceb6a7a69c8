//! Several server cores over one emulated ConnectX port (issue 12): one queue set (QP and CQs)
//! per core, each with a flow rule for its own destination UDP port, so a client picks the
//! core that owns a key by port. Both ways of running the device are covered: the threaded
//! device (the one benchmarks use), with each core's datapath on its own thread, and the
//! single-threaded `EmuNic` with the cores polled in turn from one thread. Every request must
//! arrive at, and be answered by, the queue set that owns its port, none lost or duplicated;
//! frames to a port no core owns are dropped and counted; broadcast ARP reaches core 0 only,
//! which answers it. These tests also run under
//! AddressSanitizer (scripts/test.sh).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::mem::MemoryConfig;
use cornflakes::{Msg, PinnedMemory, RxMsg, SendError};
use cornflakes_stack::iface::{StackConfig, FRAME_OVERHEAD};
use cornflakes_stack::wire::{ipv4, udp, MacAddr};
use datapath_mlx5::emu::threaded::{DeviceClock, DeviceOptions, EmuDevice, EmuPort, RxPort, Wire};
use datapath_mlx5::emu::{EmuConfig, EmuNic, TxFrame};
use datapath_mlx5::queue::QueueMemory;
use datapath_mlx5::{core_flow_rules, core_port, DeviceCaps, Mlx5Config, Mlx5Datapath};

const MAC_S: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x5e]);
const MAC_C: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xc1]);
const IP_S: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const IP_C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const BASE: u16 = 7000;
const CLIENT_PORT: u16 = 5555;
const CORES: usize = 2;
const REQUESTS: usize = 600;
/// Requests to a port no core owns (BASE + CORES).
const STRAYS: usize = 12;

/// The core that owns `key`, as a key-steering client computes it.
fn owner(key: &[u8]) -> usize {
    percore::core_of_key(key, CORES)
}

fn key(i: usize) -> String {
    format!("key-{i}")
}

fn memory() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        max_item_size: 16 * 1024,
        ..MemoryConfig::default()
    })
    .expect("pinned memory")
}

fn caps(mtu: usize) -> DeviceCaps {
    DeviceCaps {
        max_send_sge: 16,
        inline_len: 18,
        mtu,
        csum_offload: true,
    }
}

/// The request frames a client sends: request `i` carries `key(i)` to the owner's port; then
/// the strays, to a port nobody owns. Built by a real client datapath on its own emulated NIC
/// (nothing linked: the frames are only recorded).
fn request_frames() -> Vec<Vec<u8>> {
    let nic = EmuNic::new(EmuConfig::default()).expect("client NIC");
    let mem = memory();
    nic.register(&mem).expect("register");
    let mut scfg = StackConfig::new(MAC_C, SocketAddrV4::new(IP_C, CLIENT_PORT));
    scfg.static_arp = vec![(IP_S, MAC_S)];
    let mut dp = Mlx5Datapath::new(nic.queues(), mem, caps(nic.mtu()), Mlx5Config::new(scfg))
        .expect("client datapath");
    let conns: Vec<_> = (0..=CORES)
        .map(|c| {
            let port = core_port(BASE, c).unwrap();
            dp.connect(SocketAddrV4::new(IP_S, port)).expect("connect")
        })
        .collect();
    let send = |dp: &mut Mlx5Datapath<_>, core: usize, i: usize| {
        dp.send_copy(conns[core], Msg::new(i as u32, 1), key(i).as_bytes())
            .expect("send");
        dp.flush().expect("flush");
        nic.process();
        dp.poll_completions();
    };
    for i in 0..REQUESTS {
        send(&mut dp, owner(key(i).as_bytes()), i);
    }
    for i in REQUESTS..REQUESTS + STRAYS {
        send(&mut dp, CORES, i);
    }
    let frames = nic.wire();
    assert_eq!(frames.len(), REQUESTS + STRAYS, "one frame per request");
    frames
}

/// A broadcast ARP request from the client for the server's address.
fn arp_request() -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&MAC_C.0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&MAC_C.0);
    f.extend_from_slice(&IP_C.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&IP_S.octets());
    f.resize(60, 0);
    f
}

fn is_arp(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == [0x08, 0x06]
}

/// One reply as it left the device: which queue set sent it, from which UDP port, and what
/// it says (the answering core's tag, then the request's key).
#[derive(Debug)]
struct Reply {
    queue: usize,
    src_port: u16,
    tag: usize,
    id: usize,
}

fn parse_reply(queue: usize, frame: &[u8]) -> Reply {
    let ip = ipv4::Packet::new_checked(&frame[14..]).expect("ipv4");
    assert!(ip.verify_checksum(), "IPv4 checksum");
    let u = udp::Packet::new_checked(ip.payload()).expect("udp");
    assert!(
        u.verify_checksum(ip.src_addr(), ip.dst_addr()),
        "UDP checksum"
    );
    assert_eq!(u.dst_port(), CLIENT_PORT);
    let msg = &frame[FRAME_OVERHEAD..14 + ip.total_len() as usize];
    let text = std::str::from_utf8(&msg[1..]).expect("utf-8 key");
    let id = text
        .strip_prefix("key-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("reply carries {text:?}, not a key"));
    Reply {
        queue,
        src_port: u.src_port(),
        tag: usize::from(msg[0]),
        id,
    }
}

/// Answers every request received with the core's number followed by the request, and
/// records which requests it saw.
fn serve_burst<Q: QueueMemory>(
    dp: &mut Mlx5Datapath<Q>,
    core: usize,
    got: &mut Vec<RxMsg>,
    seen: &mut Vec<usize>,
) {
    got.clear();
    dp.recv_burst(got).expect("recv");
    for m in got.drain(..) {
        seen.push(m.msg.id as usize);
        let mut reply = vec![core as u8];
        reply.extend_from_slice(&m.data);
        loop {
            match dp.send_copy(m.conn, m.msg, &reply) {
                Ok(()) => break,
                Err(SendError::Full) => {
                    dp.flush().expect("flush");
                    dp.poll_completions();
                    std::thread::yield_now();
                }
                Err(e) => panic!("core {core}: reply: {e}"),
            }
        }
    }
    dp.flush().expect("flush");
    dp.poll_completions();
}

/// Checks the replies and what each core saw: every request answered once, by the core that
/// owns its key, through that core's queue set and port.
fn check(replies: &[Reply], seen: &[Vec<usize>]) {
    let mut count: BTreeMap<usize, usize> = BTreeMap::new();
    for r in replies {
        let own = owner(key(r.id).as_bytes());
        assert!(r.id < REQUESTS, "a stray request was answered: {r:?}");
        assert_eq!(r.queue, own, "reply sent on another core's queue: {r:?}");
        assert_eq!(r.tag, own, "answered by another core: {r:?}");
        assert_eq!(r.src_port, core_port(BASE, own).unwrap(), "{r:?}");
        *count.entry(r.id).or_default() += 1;
    }
    assert_eq!(count.len(), REQUESTS, "every request answered");
    assert!(count.values().all(|&n| n == 1), "no request answered twice");
    let mut all: Vec<usize> = Vec::new();
    for (core, ids) in seen.iter().enumerate() {
        assert!(
            ids.iter().all(|&i| owner(key(i).as_bytes()) == core),
            "core {core} received a request of another core"
        );
        assert!(!ids.is_empty(), "core {core} got no requests");
        all.extend(ids);
    }
    all.sort_unstable();
    assert_eq!(all, (0..REQUESTS).collect::<Vec<_>>(), "received once each");
}

/// The client side on the device thread: injects what the test sends, hands every
/// transmitted frame back with the queue set it came from.
struct ClientWire {
    inject: Receiver<Vec<u8>>,
    sent: Sender<(usize, Vec<u8>)>,
}

impl Wire for ClientWire {
    fn transmit(&mut self, frame: &TxFrame<'_>, _now_ns: u64) {
        let mut v = Vec::new();
        frame.gather(&mut v);
        let _ = self.sent.send((frame.queue(), v));
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

/// Core `port.queue_index()`'s server on its own thread, until `stop`: its own pinned
/// memory, datapath and counters; waits at `ready` once its receive queue is posted.
/// Returns the requests it saw.
fn run_core(port: EmuPort, ready: &Barrier, stop: &AtomicBool) -> Vec<usize> {
    let core = port.queue_index();
    let mem = memory();
    port.register(&mem).expect("register");
    let bind = SocketAddrV4::new(IP_S, core_port(BASE, core).unwrap());
    let mut dp = Mlx5Datapath::new(
        port.queues(),
        mem.clone(),
        caps(port.mtu()),
        Mlx5Config::new(StackConfig::new(MAC_S, bind)),
    )
    .expect("core datapath");
    ready.wait();
    let (mut got, mut seen) = (Vec::new(), Vec::new());
    while !stop.load(Ordering::Acquire) {
        serve_burst(&mut dp, core, &mut got, &mut seen);
        std::thread::yield_now();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while dp.in_flight() > 0 {
        dp.poll_completions();
        assert!(
            Instant::now() < deadline,
            "core {core}: WQEs never completed"
        );
        std::thread::yield_now();
    }
    assert_eq!(dp.counters().total_drops(), 0, "core {core} dropped");
    drop(dp);
    assert_eq!(mem.stats().live_items, 0, "core {core}: buffers back");
    seen
}

#[test]
fn two_cores_on_the_threaded_device_answer_exactly_the_requests_steered_to_their_port() {
    let frames = request_frames();
    let (inject, inject_rx) = channel();
    let (sent_tx, sent) = channel();
    let flows = (0..CORES)
        .map(|c| core_flow_rules(MAC_S, BASE, c).unwrap())
        .collect();
    let dev = EmuDevice::spawn_queues(
        EmuConfig::default(),
        flows,
        DeviceOptions {
            yield_when_idle: true,
            ..DeviceOptions::default()
        },
        ClientWire {
            inject: inject_rx,
            sent: sent_tx,
        },
    )
    .expect("device");
    assert_eq!(dev.queue_count(), CORES);
    assert!(dev.port_of(CORES).is_none());
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(CORES + 1);
    let (replies, seen, arp_replies) = std::thread::scope(|s| {
        let cores: Vec<_> = dev
            .ports()
            .into_iter()
            .map(|port| {
                let (ready, stop) = (&ready, &stop);
                s.spawn(move || run_core(port, ready, stop))
            })
            .collect();
        // Every core's receive queue is posted before the first frame arrives.
        ready.wait();
        let mut replies = Vec::new();
        let mut arp_replies = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut next = 0;
        // Broadcast ARP goes to core 0 only (the other cores have no ARP rule).
        inject.send(arp_request()).unwrap();
        // The strays go first (they must be dropped, not answered), then the requests, at
        // most 64 unanswered at a time: fewer than one core's receive queue, so nothing is
        // dropped for want of buffers.
        while replies.len() < REQUESTS {
            while next < frames.len() && next < replies.len() + 64 {
                let f = (next + REQUESTS) % frames.len();
                inject.send(frames[f].clone()).unwrap();
                next += 1;
            }
            while let Ok((q, f)) = sent.try_recv() {
                if is_arp(&f) {
                    arp_replies.push(q);
                } else {
                    replies.push(parse_reply(q, &f));
                }
            }
            if Instant::now() > deadline {
                stop.store(true, Ordering::Release);
                panic!("only {} of {REQUESTS} replies", replies.len());
            }
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Release);
        let seen: Vec<Vec<usize>> = cores
            .into_iter()
            .map(|c| c.join().expect("core thread"))
            .collect();
        for (q, f) in sent.try_iter() {
            if is_arp(&f) {
                arp_replies.push(q);
            } else {
                replies.push(parse_reply(q, &f));
            }
        }
        (replies, seen, arp_replies)
    });
    check(&replies, &seen);
    assert_eq!(arp_replies, vec![0], "one ARP reply, from core 0");
    let (_, report) = dev.stop().expect("device");
    assert_eq!(report.per_queue.len(), CORES);
    for (c, q) in report.per_queue.iter().enumerate() {
        let arp = u64::from(c == 0);
        assert_eq!(
            q.frames_received,
            seen[c].len() as u64 + arp,
            "queue set {c}"
        );
        assert_eq!(q.frames_sent, seen[c].len() as u64 + arp, "queue set {c}");
        assert_eq!((q.rx_no_wqe, q.tx_errors, q.cq_overruns), (0, 0, 0));
    }
    assert_eq!(report.stats.rx_steered_away, STRAYS as u64);
    assert_eq!(report.stats.frames_received, REQUESTS as u64 + 1);
}

#[test]
fn two_cores_on_the_single_threaded_device_polled_in_turn_from_one_thread() {
    let frames = request_frames();
    let nic = EmuNic::with_queues(EmuConfig::default(), CORES).expect("NIC");
    assert_eq!(nic.queue_count(), CORES);
    let mut cores = Vec::new();
    for c in 0..CORES {
        let mem = memory();
        nic.register_queue(c, &mem).expect("register");
        nic.set_queue_flows(c, &core_flow_rules(MAC_S, BASE, c).unwrap())
            .expect("flows");
        let bind = SocketAddrV4::new(IP_S, core_port(BASE, c).unwrap());
        let dp = Mlx5Datapath::new(
            nic.queues_of(c).expect("queue set"),
            mem,
            caps(nic.mtu()),
            Mlx5Config::new(StackConfig::new(MAC_S, bind)),
        )
        .expect("core datapath");
        cores.push(dp);
    }
    assert!(nic.queues_of(CORES).is_none());
    let mut seen = vec![Vec::new(); CORES];
    let mut got = Vec::new();
    for chunk in frames.chunks(48) {
        for f in chunk {
            nic.inject(f);
        }
        for (c, dp) in cores.iter_mut().enumerate() {
            serve_burst(dp, c, &mut got, &mut seen[c]);
        }
        nic.process();
    }
    for dp in &mut cores {
        dp.poll_completions();
        assert_eq!(dp.in_flight(), 0);
        assert_eq!(dp.counters().total_drops(), 0);
    }
    let replies: Vec<Reply> = nic
        .wire_by_queue()
        .into_iter()
        .map(|(q, f)| parse_reply(q, &f))
        .collect();
    check(&replies, &seen);
    for (c, ids) in seen.iter().enumerate() {
        let s = nic.queue_stats(c).expect("queue set");
        assert_eq!(s.frames_received, ids.len() as u64);
        assert_eq!(s.frames_sent, ids.len() as u64);
        assert_eq!(s.rx_no_wqe, 0);
    }
    assert_eq!(nic.stats().rx_steered_away, STRAYS as u64);
}
