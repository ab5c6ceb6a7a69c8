//! Reassembly of messages cut into several frames.
//!
//! A message is named by its sender (address and port), the sender's incarnation and the
//! message id: two incarnations behind one address (a restarted client on a recycled port)
//! never mix segments. Segments of one message all carry the same total length, segment count
//! and type; every
//! segment but the last carries the same number of bytes `L`, segment `i` starts at `i × L`,
//! and the last one ends the message. The first segment to arrive fixes `L` (a non-last one by
//! its length; the last one by `offset / (count − 1)`); any segment that disagrees is forged or
//! corrupt and is dropped ([`Drop::BadFraming`]). Segments are therefore disjoint and a message
//! with all `count` segments is complete with no holes.
//!
//! Memory is bounded: at most `max_messages` partial messages and `max_bytes` of buffers;
//! partial messages older than `timeout` are dropped by [`Reassembler::expire`].

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use cornflakes_datapath::Msg;
use cornflakes_mem::{PinnedMemory, RcBuf, RcBufMut};

use crate::wire::framing;

/// Reassembly limits.
#[derive(Clone, Copy, Debug)]
pub struct ReassemblyConfig {
    /// A partial message older than this is dropped.
    pub timeout: Duration,
    /// Most partial messages at once.
    pub max_messages: usize,
    /// Most bytes of partial-message buffers at once.
    pub max_bytes: usize,
    /// Largest message accepted (also bounded by the pinned memory's largest item).
    pub max_message_len: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            timeout: Duration::from_millis(500),
            max_messages: 256,
            max_bytes: 16 << 20,
            max_message_len: 1 << 20,
        }
    }
}

/// Why a segment was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drop {
    /// Inconsistent with the header alone or with earlier segments of its message.
    BadFraming,
    /// A segment already received.
    Duplicate,
    /// The message is too large, or the limits on partial messages are reached.
    Overflow,
    /// No pinned buffer for the message.
    NoBuffer,
}

impl Drop {
    /// Counts this drop in its counter of `c`.
    pub fn count(self, c: &mut cornflakes_datapath::DropCounters) {
        match self {
            Drop::BadFraming => c.bad_framing += 1,
            Drop::Duplicate => c.duplicate_segment += 1,
            Drop::Overflow => c.reassembly_overflow += 1,
            Drop::NoBuffer => c.no_rx_buffers += 1,
        }
    }
}

struct Partial {
    peer: SocketAddrV4,
    msg: Msg,
    total: u32,
    count: u16,
    seg_len: u32,
    received: u16,
    seen: Vec<u64>,
    buf: RcBufMut,
    started: Instant,
}

/// Partial messages being reassembled, keyed by sender, incarnation and message id.
pub struct Reassembler {
    cfg: ReassemblyConfig,
    partials: Vec<Partial>,
    bytes: usize,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new(cfg: ReassemblyConfig) -> Reassembler {
        Reassembler {
            cfg,
            partials: Vec::new(),
            bytes: 0,
        }
    }

    /// The limits in force.
    pub fn config(&self) -> &ReassemblyConfig {
        &self.cfg
    }

    /// Partial messages held.
    #[inline]
    pub fn pending(&self) -> usize {
        self.partials.len()
    }

    /// Bytes of partial-message buffers held.
    pub fn pending_bytes(&self) -> usize {
        self.bytes
    }

    /// Takes one segment (its header already validated by [`framing::Repr::parse`], with
    /// `seg_count > 1`). Returns the whole message once its last segment is in.
    pub fn push(
        &mut self,
        mem: &PinnedMemory,
        peer: SocketAddrV4,
        hdr: &framing::Repr,
        payload: &[u8],
        now: Instant,
    ) -> Result<Option<(Msg, RcBuf)>, Drop> {
        let msg = hdr.msg();
        let idx = match self.partials.iter().position(|p| {
            p.peer == peer && p.msg.id == hdr.msg_id && p.msg.incarnation == hdr.incarnation
        }) {
            Some(i) => i,
            None => self.start(mem, peer, msg, hdr, payload.len(), now)?,
        };
        let p = &mut self.partials[idx];
        let last = hdr.seg_index == p.count - 1;
        let off = hdr.seg_index as u64 * p.seg_len as u64;
        let len_ok = if last {
            off + payload.len() as u64 == p.total as u64
        } else {
            payload.len() as u64 == p.seg_len as u64
        };
        if hdr.total_len != p.total
            || hdr.seg_count != p.count
            || hdr.msg_type != p.msg.ty
            || hdr.seg_offset as u64 != off
            || !len_ok
        {
            return Err(Drop::BadFraming);
        }
        let (w, bit) = (hdr.seg_index as usize / 64, 1u64 << (hdr.seg_index % 64));
        if p.seen[w] & bit != 0 {
            return Err(Drop::Duplicate);
        }
        p.seen[w] |= bit;
        p.received += 1;
        let off = off as usize;
        p.buf.full_mut()[off..off + payload.len()].copy_from_slice(payload);
        if p.received < p.count {
            return Ok(None);
        }
        let p = self.partials.swap_remove(idx);
        self.bytes -= p.total as usize;
        let mut buf = p.buf;
        buf.set_len(p.total as usize);
        Ok(Some((p.msg, buf.freeze())))
    }

    fn start(
        &mut self,
        mem: &PinnedMemory,
        peer: SocketAddrV4,
        msg: Msg,
        hdr: &framing::Repr,
        payload_len: usize,
        now: Instant,
    ) -> Result<usize, Drop> {
        let count = hdr.seg_count as u64;
        let total = hdr.total_len as u64;
        if count < 2 || payload_len == 0 {
            return Err(Drop::BadFraming);
        }
        // Derive the common segment length L and check the header against it.
        let seg_len = if hdr.seg_index as u64 == count - 1 {
            let off = hdr.seg_offset as u64;
            if off == 0 || !off.is_multiple_of(count - 1) || off + payload_len as u64 != total {
                return Err(Drop::BadFraming);
            }
            let l = off / (count - 1);
            if (payload_len as u64) > l {
                return Err(Drop::BadFraming);
            }
            l
        } else {
            let l = payload_len as u64;
            if hdr.seg_offset as u64 != hdr.seg_index as u64 * l
                || total <= (count - 1) * l
                || total > count * l
            {
                return Err(Drop::BadFraming);
            }
            l
        };
        let total = total as usize;
        if total > self.cfg.max_message_len.min(mem.max_item_size())
            || self.partials.len() >= self.cfg.max_messages
            || self.bytes + total > self.cfg.max_bytes
        {
            return Err(Drop::Overflow);
        }
        let buf = mem.alloc(total).map_err(|_| Drop::NoBuffer)?;
        self.bytes += total;
        self.partials.push(Partial {
            peer,
            msg,
            total: total as u32,
            count: hdr.seg_count,
            seg_len: seg_len as u32,
            received: 0,
            seen: vec![0; (hdr.seg_count as usize).div_ceil(64)],
            buf,
            started: now,
        });
        Ok(self.partials.len() - 1)
    }

    /// Drops partial messages older than the timeout; returns how many.
    #[inline]
    pub fn expire(&mut self, now: Instant) -> usize {
        if self.partials.is_empty() {
            return 0;
        }
        self.expire_partials(now)
    }

    fn expire_partials(&mut self, now: Instant) -> usize {
        let timeout = self.cfg.timeout;
        let before = self.partials.len();
        let mut freed = 0;
        self.partials.retain(|p| {
            let keep = now.saturating_duration_since(p.started) < timeout;
            if !keep {
                freed += p.total as usize;
            }
            keep
        });
        self.bytes -= freed;
        before - self.partials.len()
    }
}

impl std::fmt::Debug for Reassembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reassembler")
            .field("pending", &self.partials.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::Ipv4Addr;

    fn peer() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9)
    }

    fn seg(id: u32, i: u16, n: u16, total: u32, l: u32) -> framing::Repr {
        framing::Repr {
            incarnation: 0,
            msg_type: 3,
            msg_id: id,
            seg_index: i,
            seg_count: n,
            total_len: total,
            seg_offset: i as u32 * l,
        }
    }

    #[test]
    fn reassembles_in_any_order() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let msg: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
        for order in [[0u16, 1, 2], [2, 1, 0], [1, 2, 0]] {
            let mut r = Reassembler::new(ReassemblyConfig::default());
            let now = Instant::now();
            let mut done = None;
            for i in order {
                let s = seg(7, i, 3, 250, 100);
                let a = i as usize * 100;
                let b = (a + 100).min(250);
                if let Some(m) = r.push(&mem, peer(), &s, &msg[a..b], now).unwrap() {
                    done = Some(m);
                }
            }
            let (m, buf) = done.expect("complete");
            assert_eq!(m, Msg::new(7, 3));
            assert_eq!(&buf[..], &msg[..]);
            assert_eq!(r.pending(), 0);
            assert_eq!(r.pending_bytes(), 0);
        }
        assert_eq!(mem.stats().live_items, 0);
    }

    #[test]
    fn forged_segments_dropped() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let now = Instant::now();
        let d = [1u8; 100];
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 0, 3, 250, 100), &d, now),
            Ok(None)
        );
        let bad = [
            framing::Repr {
                total_len: 251,
                ..seg(1, 1, 3, 250, 100)
            },
            framing::Repr {
                seg_count: 4,
                ..seg(1, 1, 3, 250, 100)
            },
            framing::Repr {
                seg_offset: 99,
                ..seg(1, 1, 3, 250, 100)
            },
            framing::Repr {
                msg_type: 9,
                ..seg(1, 1, 3, 250, 100)
            },
        ];
        for b in bad {
            assert_eq!(
                r.push(&mem, peer(), &b, &d, now),
                Err(Drop::BadFraming),
                "{b:?}"
            );
        }
        // Wrong length for a middle segment, and for the last one.
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 1, 3, 250, 100), &d[..99], now),
            Err(Drop::BadFraming)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 2, 3, 250, 100), &d[..49], now),
            Err(Drop::BadFraming)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 0, 3, 250, 100), &d, now),
            Err(Drop::Duplicate)
        );
        // First segment inconsistent on its own: L does not fit the total.
        assert_eq!(
            r.push(&mem, peer(), &seg(2, 0, 3, 400, 100), &d, now),
            Err(Drop::BadFraming)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(3, 2, 3, 250, 100), &d[..60], now),
            Err(Drop::BadFraming)
        );
        // Still completes with the right segments.
        r.push(&mem, peer(), &seg(1, 1, 3, 250, 100), &d, now)
            .unwrap();
        let (_, b) = r
            .push(&mem, peer(), &seg(1, 2, 3, 250, 100), &d[..50], now)
            .unwrap()
            .unwrap();
        assert_eq!(b.len(), 250);
    }

    #[test]
    fn two_incarnations_behind_one_address_never_mix_segments() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut r = Reassembler::new(ReassemblyConfig::default());
        let now = Instant::now();
        let of = |inc: u64, i: u16| framing::Repr {
            incarnation: inc,
            ..seg(4, i, 2, 150, 100)
        };
        let (a, b) = ([1u8; 100], [2u8; 100]);
        // The same sender and id, two incarnations: two messages, not one of mixed halves.
        assert_eq!(r.push(&mem, peer(), &of(10, 0), &a, now), Ok(None));
        assert_eq!(r.push(&mem, peer(), &of(11, 0), &b, now), Ok(None));
        assert_eq!(r.pending(), 2);
        let (m, buf) = r
            .push(&mem, peer(), &of(11, 1), &b[..50], now)
            .unwrap()
            .unwrap();
        assert_eq!(m, Msg::new(4, 3).with_incarnation(11));
        assert!(buf.iter().all(|&x| x == 2));
        let (m, buf) = r
            .push(&mem, peer(), &of(10, 1), &a[..50], now)
            .unwrap()
            .unwrap();
        assert_eq!(m.incarnation, 10);
        assert!(buf.iter().all(|&x| x == 1));
    }

    #[test]
    fn limits_and_timeout() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut r = Reassembler::new(ReassemblyConfig {
            timeout: Duration::from_millis(10),
            max_messages: 2,
            max_bytes: 1000,
            max_message_len: 600,
        });
        let t0 = Instant::now();
        let d = [0u8; 300];
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 0, 3, 900, 300), &d, t0),
            Err(Drop::Overflow)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(1, 0, 2, 600, 300), &d, t0),
            Ok(None)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(2, 0, 2, 600, 300), &d, t0),
            Err(Drop::Overflow)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(3, 0, 2, 400, 300), &d, t0),
            Ok(None)
        );
        assert_eq!(
            r.push(&mem, peer(), &seg(4, 0, 2, 400, 300), &d, t0),
            Err(Drop::Overflow)
        );
        assert_eq!(mem.stats().live_items, 2);
        assert_eq!(r.expire(t0 + Duration::from_millis(9)), 0);
        assert_eq!(r.expire(t0 + Duration::from_millis(10)), 2);
        assert_eq!(r.pending_bytes(), 0);
        assert_eq!(mem.stats().live_items, 0);
    }
}
