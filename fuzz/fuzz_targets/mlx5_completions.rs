//! Target 5: the ConnectX driver's completion and receive handling against device-written
//! garbage. The emulated device (datapath-mlx5's `emu`) runs the queues; the fuzzer plays a
//! faulty device on top of it: it writes arbitrary 64-byte CQEs into either completion queue
//! (with an owner bit of its choosing, so the driver takes many of them), injects arbitrary
//! frames that the device DMAs into receive buffers, and interleaves sends (looped back),
//! receive bursts and completion polls. The driver must count what it cannot use, never panic,
//! keep its receive queue posted, and give every pinned buffer back.
#![no_main]

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::handwritten::GetM;
use cornflakes::mem::MemoryConfig;
use cornflakes::{Arena, CFBytes, CFPtr, Msg, PinnedMemory};
use cornflakes_fuzz::frames::{local, udp_frame, LOCAL_IP, LOCAL_MAC, LOCAL_PORT};
use cornflakes_fuzz::Cursor;
use cornflakes_stack::StackConfig;
use datapath_mlx5::emu::{EmuConfig, EmuNic};
use datapath_mlx5::queue::{QueueMemory, Ring};
use datapath_mlx5::{flow_rules, DeviceCaps, Mlx5Config, Mlx5Datapath};
use libfuzzer_sys::fuzz_target;

const RQ_ENTRIES: u32 = 8;

/// Writes `cqe` into entry `idx` of `ring`, as the device would (DMA into the CQ).
fn write_cqe(ring: Ring, idx: u32, cqe: &[u8; 64]) {
    let idx = (idx & (ring.entries - 1)) as usize;
    // SAFETY: `QueueMemory` guarantees `ring` points at `entries * 64` bytes valid for writes
    // for as long as the device lives; `idx < entries`. The driver only reads the CQ through
    // volatile loads, and this thread is the device here, so nothing else writes it now.
    unsafe {
        std::ptr::copy_nonoverlapping(cqe.as_ptr(), ring.base.as_ptr().add(idx * 64), 64);
    }
}

fn run(data: &[u8]) {
    let mut c = Cursor::new(data);
    let mem = PinnedMemory::new(MemoryConfig {
        max_item_size: 16 * 1024,
        ..MemoryConfig::default()
    })
    .expect("pinned memory");
    let nic = EmuNic::new(EmuConfig {
        sq_wqebbs: 16,
        rq_entries: RQ_ENTRIES,
        cq_entries: 16,
        loopback: true,
        ..EmuConfig::default()
    })
    .expect("emulated device");
    nic.register(&mem).expect("register");
    nic.set_flows(&flow_rules(LOCAL_MAC, LOCAL_PORT));
    let mut scfg = StackConfig::new(LOCAL_MAC, local());
    scfg.static_arp = vec![(LOCAL_IP, LOCAL_MAC)];
    let caps = DeviceCaps {
        max_send_sge: 4,
        inline_len: 18,
        mtu: nic.mtu(),
        csum_offload: c.u8() & 1 == 1,
    };
    let mut dp = Mlx5Datapath::new(nic.queues(), mem.clone(), caps, Mlx5Config::new(scfg))
        .expect("datapath");
    let conn = dp.connect(local()).expect("connect to ourselves");
    let q = nic.queues();
    let mut out = Vec::new();
    let mut steps = 0;
    while !c.is_empty() && steps < 128 {
        steps += 1;
        match c.u8() % 8 {
            // A garbage receive / send completion at an entry and owner bit the fuzzer picks.
            op @ (0 | 1) => {
                let idx = u32::from(c.u8());
                let mut cqe = [0u8; 64];
                let b = c.bytes(64);
                cqe[..b.len()].copy_from_slice(b);
                write_cqe(if op == 0 { q.recv_cq() } else { q.send_cq() }, idx, &cqe);
            }
            // A frame off the wire: arbitrary, or valid UDP to us around arbitrary bytes.
            2 => {
                let len = usize::from(c.u16()) % 2048;
                nic.inject(c.bytes(len));
            }
            3 => {
                let len = usize::from(c.u16()) % 1400;
                let (mac, from) = cornflakes_fuzz::frames::peer(c.u8());
                nic.inject(&udp_frame(mac, from, c.bytes(len)));
            }
            // A send (looped back to our receive queue), flushed; the device runs.
            4 => {
                let arena = Arena::with_memory(&mem);
                let mut m = GetM::new_in(&arena);
                m.set_id(u32::from(c.u8()));
                let n = usize::from(c.u8() % 4);
                m.init_vals(n);
                for _ in 0..n {
                    let len = usize::from(c.u16()) % 3000;
                    let v = mem.alloc_copy(&vec![0x5a; len]).expect("value");
                    m.get_mut_vals()
                        .append(CFBytes(CFPtr::from_rcbuf(v, &arena)));
                }
                let _ = dp.send_object(conn, Msg::new(1, 1), &m);
                let _ = dp.flush();
                nic.process();
            }
            5 => {
                nic.process();
            }
            6 => {
                dp.poll_completions();
            }
            _ => {
                let _ = dp.recv_burst(&mut out);
                for m in out.drain(..) {
                    assert!(m.data.len() <= 64 * 1024);
                }
            }
        }
        assert!(dp.rx_posted() <= RQ_ENTRIES as usize);
    }
    let _ = dp.recv_burst(&mut out);
    out.clear();
    dp.poll_completions();
    drop(dp);
    drop(q);
    drop(nic);
    assert_eq!(mem.stats().live_items, 0, "pinned buffers leaked");
}

fuzz_target!(|data: &[u8]| run(data));
