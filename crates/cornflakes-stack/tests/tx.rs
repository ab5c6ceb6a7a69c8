//! The transmit paths end to end: what `tx::send_sga` posts is received intact by another
//! stack (headers, software UDP checksum, message bytes), one frame or several.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use cornflakes::{ConnId, Msg, PinnedMemory, RcBuf, RxMsg};
use cornflakes_stack::{tx, ChecksumCaps, EthStack, MacAddr, StackConfig, TxSink};

/// Keeps every posted descriptor.
#[derive(Default)]
struct VecSink {
    posted: Vec<(RcBuf, bool)>,
}

impl TxSink for VecSink {
    fn free_slots(&self) -> usize {
        1024
    }

    fn post(&mut self, buf: RcBuf, end_of_frame: bool) {
        self.posted.push((buf, end_of_frame));
    }
}

const A_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

fn addr(last: u8) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 4000 + last as u16)
}

fn stacks(caps: ChecksumCaps) -> (EthStack, EthStack, ConnId) {
    let mut a_cfg = StackConfig::new(A_MAC, addr(1));
    a_cfg.caps = caps;
    a_cfg.static_arp = vec![(*addr(2).ip(), B_MAC)];
    let mut b_cfg = StackConfig::new(B_MAC, addr(2));
    b_cfg.caps = ChecksumCaps::SOFTWARE;
    let mut a = EthStack::new(a_cfg);
    let conn = a
        .connect(addr(2), Instant::now(), &mut |_| {
            panic!("static ARP: no request")
        })
        .unwrap();
    (a, EthStack::new(b_cfg), conn)
}

/// Joins the posted descriptors into frames and feeds them to `rx`.
fn deliver(mem: &PinnedMemory, sink: VecSink, rx: &mut EthStack) -> (Vec<RxMsg>, usize) {
    let mut out = Vec::new();
    let mut frame = Vec::new();
    let mut frames = 0;
    for (buf, eof) in sink.posted {
        assert!(!buf.is_empty(), "an empty descriptor was posted");
        frame.extend_from_slice(&buf);
        if eof {
            frames += 1;
            let f = mem.alloc_copy(&frame).unwrap();
            rx.process_frame(mem, f, Instant::now(), &mut out, &mut |_| {});
            frame.clear();
        }
    }
    assert!(
        frame.is_empty(),
        "the last descriptor did not end its frame"
    );
    (out, frames)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn send_sga_frames_arrive_intact_with_their_checksums() {
    for caps in [ChecksumCaps::SOFTWARE, ChecksumCaps::NO_UDP_TX] {
        // One frame (MTU 1500) with an empty entry in the middle; then several frames.
        for lens in [vec![700, 0, 3, 513], vec![2000, 0, 1700, 900]] {
            let (mut a, mut b, conn) = stacks(caps);
            let mem = PinnedMemory::with_defaults().unwrap();
            let vals: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| pattern(n, i as u8))
                .collect();
            let entries: Vec<RcBuf> = vals.iter().map(|v| mem.alloc_copy(v).unwrap()).collect();
            let mut sink = VecSink::default();
            tx::send_sga(&mut a, &mem, &mut sink, 8, conn, Msg::new(7, 3), &entries).unwrap();
            let total: usize = lens.iter().sum();
            let (got, frames) = deliver(&mem, sink, &mut b);
            assert_eq!(frames, total.div_ceil(a.frame_room()), "{lens:?}");
            let c = b.counters();
            assert_eq!(
                (c.delivered, c.total_drops()),
                (1, 0),
                "{caps:?} {lens:?}: {c:?}"
            );
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].msg, Msg::new(7, 3));
            assert_eq!(got[0].peer, addr(1));
            assert_eq!(&got[0].data[..], &vals.concat()[..], "{lens:?}");
            drop((got, entries));
            assert_eq!(mem.stats().live_items, 0, "every posted buffer released");
        }
    }
}
