//! Target 3b: sequences of frames through `EthStack::process_frame`, structure-aware: valid
//! Ethernet/IPv4/UDP (correct checksums) from a few peers around fuzzed framing headers and
//! payloads, consistent segments of multi-frame messages, raw frames, ARP, and time passing
//! (reassembly timeouts). After every step the reassembler holds at most its configured number
//! of messages and bytes; at the end, after the timeout, it holds nothing and every pinned
//! buffer is back in the pool.
#![no_main]

use std::time::{Duration, Instant};

use cornflakes_fuzz::frames::{
    framed, peer, stack, udp_frame, LOCAL_MAC, REASM_MAX_BYTES, REASM_MAX_MESSAGE,
    REASM_MAX_MESSAGES,
};
use cornflakes_fuzz::Cursor;
use cornflakes_stack::wire::framing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mem = cornflakes_fuzz::memory();
    let live_before = mem.stats().live_items;
    let mut c = Cursor::new(data);
    let mut s = stack(c.u8() & 1 == 1);
    let start = Instant::now();
    let mut now = start;
    let mut out = Vec::new();
    let mut steps = 0;
    while !c.is_empty() && steps < 256 {
        steps += 1;
        let op = c.u8();
        let (mac, from) = peer(op >> 4);
        let frame = match op & 0x7 {
            // A segment with a fuzzed framing header and body.
            0 => {
                let hdr = framing::Repr {
                    // Two incarnations per peer, whose segments must never mix.
                    incarnation: u64::from((op >> 3) & 1),
                    msg_type: c.u16(),
                    msg_id: u32::from(c.u8() & 7),
                    seg_index: c.u16(),
                    seg_count: c.u16(),
                    total_len: c.u32(),
                    seg_offset: c.u32(),
                };
                let len = usize::from(c.u16()) % 1600;
                udp_frame(mac, from, &framed(&hdr, c.bytes(len)))
            }
            // A consistent segment of a multi-frame message (as a sender would cut it).
            1 | 2 => {
                let total = u32::from(c.u16()) % (2 * REASM_MAX_MESSAGE as u32) + 1;
                let seg_len = u32::from(c.u16()) % 1400 + 1;
                let count = total.div_ceil(seg_len).clamp(1, u32::from(u16::MAX)) as u16;
                let index = c.u16() % count.max(1);
                let off = u32::from(index) * seg_len;
                let len = seg_len.min(total.saturating_sub(off));
                let hdr = framing::Repr {
                    incarnation: u64::from((op >> 3) & 1),
                    msg_type: 7,
                    msg_id: u32::from(c.u8() & 7),
                    seg_index: index,
                    seg_count: count,
                    total_len: total,
                    seg_offset: off,
                };
                let fill = c.u8();
                udp_frame(mac, from, &framed(&hdr, &vec![fill; len as usize]))
            }
            // Valid Ethernet/IPv4/UDP, arbitrary UDP payload.
            3 => {
                let len = usize::from(c.u16()) % 1600;
                udp_frame(mac, from, c.bytes(len))
            }
            // A raw frame.
            4 => {
                let len = usize::from(c.u16()) % 1600;
                c.bytes(len).to_vec()
            }
            // An ARP frame with a fuzzed body.
            5 => {
                let mut f = Vec::new();
                f.extend_from_slice(&if op & 8 != 0 { [0xff; 6] } else { LOCAL_MAC.0 });
                f.extend_from_slice(&mac.0);
                f.extend_from_slice(&0x0806u16.to_be_bytes());
                f.extend_from_slice(c.bytes(28));
                f
            }
            // Time passes; reassembly timeouts and ARP retries run.
            _ => {
                now += Duration::from_millis(u64::from(c.u8()));
                s.poll(now, &mut |_| {});
                check(&s);
                continue;
            }
        };
        if frame.len() > mem.max_item_size() {
            continue;
        }
        let buf = mem.alloc_copy(&frame).expect("pinned buffer");
        s.process_frame(mem, buf, now, &mut out, &mut |_| {});
        check(&s);
        for m in out.drain(..) {
            assert!(
                m.data.len() <= REASM_MAX_MESSAGE,
                "delivered {} bytes, above the {REASM_MAX_MESSAGE}-byte limit",
                m.data.len()
            );
        }
    }
    // Everything partial expires; every pinned buffer is released.
    now += Duration::from_secs(3600);
    s.poll(now, &mut |_| {});
    assert_eq!(s.reassembly().pending(), 0);
    assert_eq!(s.reassembly().pending_bytes(), 0);
    drop(s);
    assert_eq!(mem.stats().live_items, live_before, "pinned buffers leaked");
});

fn check(s: &cornflakes_stack::EthStack) {
    let r = s.reassembly();
    assert!(
        r.pending() <= REASM_MAX_MESSAGES,
        "{} partial messages held, limit {REASM_MAX_MESSAGES}",
        r.pending()
    );
    assert!(
        r.pending_bytes() <= REASM_MAX_BYTES,
        "{} bytes of partial messages held, limit {REASM_MAX_BYTES}",
        r.pending_bytes()
    );
}
