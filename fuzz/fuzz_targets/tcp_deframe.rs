//! Target 6: the TCP stream deframer (`datapath_tcp::frame::Deframer`) on an arbitrary byte
//! stream cut into arbitrary reads. The first byte picks the receive buffer size, the next 8
//! the read lengths (a seed for their sequence); the rest is the stream.
//!
//! Oracle: a reference parser over the whole stream (a loop over `parse_header`) and the
//! deframer agree on the messages delivered (identity and bytes, in order) and on whether and
//! where the stream is refused, whatever the cut; a stream that is not refused leaves exactly
//! its unconsumed tail held; nothing delivered exceeds the limit; at the end, once every
//! message is dropped, every pinned buffer is back in the pool.
#![no_main]

use cornflakes::{Msg, RcBuf};
use datapath_tcp::frame::{parse_header, DeframeError, Deframer, FrameError, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

const MAX_MESSAGE: usize = 3000;

/// The messages of `s` and the error that ends it, if any, parsed in one piece.
fn reference(s: &[u8]) -> (Vec<(Msg, &[u8])>, Option<FrameError>, usize) {
    let mut at = 0;
    let mut out = Vec::new();
    while s.len() - at >= HEADER_LEN {
        match parse_header(&s[at..], at as u64, MAX_MESSAGE) {
            Err(e) => return (out, Some(e), at),
            Ok((msg, len)) => {
                if s.len() - at - HEADER_LEN < len {
                    break;
                }
                out.push((msg, &s[at + HEADER_LEN..at + HEADER_LEN + len]));
                at += HEADER_LEN + len;
            }
        }
    }
    (out, None, at)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let mem = cornflakes_fuzz::memory();
    let live = mem.stats().live_items;
    let rx_buffer = 16 + (data[0] as usize) * 16;
    let mut seed = u64::from_le_bytes(data[1..9].try_into().unwrap()) | 1;
    let stream = &data[9..];
    let (want, want_err, consumed) = reference(stream);

    let mut d = Deframer::new(MAX_MESSAGE, rx_buffer);
    let mut got: Vec<(Msg, RcBuf)> = Vec::new();
    let mut err = None;
    let mut at = 0;
    while at < stream.len() {
        // xorshift: read lengths from 1 to 4096, small ones more often.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let cap = [8usize, 64, 700, 4096][(seed & 3) as usize];
        let space = d.space(mem).expect("pinned buffer");
        assert!(!space.is_empty());
        let k = (1 + (seed >> 8) as usize % cap)
            .min(space.len())
            .min(stream.len() - at);
        space[..k].copy_from_slice(&stream[at..at + k]);
        at += k;
        match d.filled(k, mem, &mut got) {
            Ok(()) => {}
            Err(DeframeError::Frame(e)) => {
                err = Some(e);
                break;
            }
            Err(e) => panic!("unexpected deframer error: {e}"),
        }
    }
    assert_eq!(err, want_err, "refusal differs");
    assert_eq!(got.len(), want.len(), "message count differs");
    for ((gm, gd), (wm, wd)) in got.iter().zip(&want) {
        assert_eq!(gm, wm);
        assert_eq!(&gd[..], *wd);
        assert!(gd.len() <= MAX_MESSAGE);
    }
    if err.is_none() {
        assert_eq!(d.partial_bytes(), stream.len() - consumed);
        assert_eq!(d.stream_offset(), stream.len() as u64);
        assert_eq!(d.stats().messages, want.len() as u64);
    }
    drop(got);
    drop(d);
    assert_eq!(mem.stats().live_items, live, "a pinned buffer leaked");
});
