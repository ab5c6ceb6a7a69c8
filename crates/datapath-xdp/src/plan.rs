//! Descriptor-chain planning and receive reassembly: the pure logic of the datapath, testable
//! without root, a NIC or the `xdp` feature.
//!
//! # Transmit
//! A packet is sent as a chain of UMEM descriptors (`XDP_PKT_CONTD` on all but the last):
//!
//! 1. the *head*: Ethernet/IPv4/UDP headers, the object's HEADER AREA and COPY AREA (plus any
//!    demoted leaves) written into one fresh pinned buffer;
//! 2. one descriptor per zero-copy leaf, pointing at the leaf's own bytes in the UMEM.
//!
//! In aligned mode the kernel refuses a descriptor that crosses a UMEM frame ([`FRAME_SIZE`]),
//! so every piece is split at frame boundaries. Pinned items of at most one frame never cross
//! one (size classes are powers of two aligned to their size); larger items cost one descriptor
//! per frame they touch. A leaf that is not in our UMEM (another `PinnedMemory`) is copied into
//! a fresh buffer and still sent as its own piece, so the wire layout is unchanged.
//!
//! The device accepts at most `max_descriptors` per packet (18 for copy mode on Linux 6.18:
//! `MAX_SKB_FRAGS + 1`). [`plan_chain`] keeps as many zero-copy leaves as fit, demoting the
//! smallest ones into the copy area with [`Demote::plan`], exactly like a NIC with a short
//! scatter-gather list.

use cornflakes_datapath::Demote;

/// Size of one UMEM frame (aligned chunk mode).
pub const FRAME_SIZE: usize = 4096;

/// Number of frames `addr..addr+len` touches (0 for an empty range).
#[inline]
pub fn frames_spanned(addr: u64, len: usize, frame: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let f = frame as u64;
    let first = addr / f;
    let last = (addr + len as u64 - 1) / f;
    (last - first + 1) as usize
}

/// Frames a fresh pinned buffer of `len` bytes occupies: its item is a power of two aligned to
/// its size, so it starts a frame whenever it is larger than one.
#[inline]
pub fn fresh_buffer_frames(len: usize, frame: usize) -> usize {
    len.div_ceil(frame)
}

/// Splits `addr..addr+len` into `(addr, len)` pieces that each stay inside one frame.
#[inline]
pub fn split_at_frames(addr: u64, len: usize, frame: usize) -> FrameSplit {
    FrameSplit {
        addr,
        left: len as u64,
        frame: frame as u64,
    }
}

/// Iterator returned by [`split_at_frames`].
#[derive(Clone, Debug)]
pub struct FrameSplit {
    addr: u64,
    left: u64,
    frame: u64,
}

impl Iterator for FrameSplit {
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        if self.left == 0 {
            return None;
        }
        let room = self.frame - self.addr % self.frame;
        let n = room.min(self.left);
        let piece = (self.addr, n as u32);
        self.addr += n;
        self.left -= n;
        Some(piece)
    }
}

/// One zero-copy leaf as the planner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Length of the leaf.
    pub len: usize,
    /// Its offset in our UMEM, or `None` when it lives elsewhere and must be copied.
    pub umem_addr: Option<u64>,
}

impl Entry {
    /// Descriptors this leaf costs when it stays a separate piece.
    #[inline]
    pub fn descriptors(&self, frame: usize) -> usize {
        match self.umem_addr {
            Some(a) => frames_spanned(a, self.len, frame),
            None => fresh_buffer_frames(self.len, frame),
        }
    }
}

/// How one packet is laid out in descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainPlan {
    /// Which zero-copy leaves the encoder moves into the copy area.
    pub demote: Demote,
    /// Bytes those leaves add to the copy area.
    pub demoted_bytes: usize,
    /// Length of the head buffer: packet headers + header area + copy area + demoted bytes.
    pub head_len: usize,
    /// Descriptors in the whole chain.
    pub descriptors: usize,
    /// Leaves kept as separate pieces.
    pub kept: usize,
}

/// Plans a packet whose head (packet headers + object header and copy areas) is `head` bytes,
/// followed by the zero-copy leaves `entries` in wire order, so that it needs at most
/// `max_descriptors` descriptors of at most one `frame` each. Keeps as many leaves zero-copy as
/// fit; `None` when even copying everything into the head does not fit.
pub fn plan_chain(
    head: usize,
    entries: &[Entry],
    max_descriptors: usize,
    frame: usize,
) -> Option<ChainPlan> {
    let lens: Vec<usize> = entries.iter().map(|e| e.len).collect();
    let nonempty = entries.iter().filter(|e| e.len > 0).count();
    // Every kept non-empty leaf costs at least one descriptor and the head one more.
    let start = nonempty.min(max_descriptors.saturating_sub(1));
    let extra_empty = entries.len() - nonempty;
    for keep in (0..=start + extra_empty).rev() {
        let (demote, demoted_bytes) = Demote::plan(&lens, keep);
        let head_len = head + demoted_bytes;
        let mut descriptors = fresh_buffer_frames(head_len, frame).max(1);
        let mut walk = demote;
        let mut kept = 0;
        for e in entries {
            if walk.keep_zero_copy(e.len) {
                descriptors += e.descriptors(frame);
                kept += 1;
            }
        }
        if descriptors <= max_descriptors {
            return Some(ChainPlan {
                demote,
                demoted_bytes,
                head_len,
                descriptors,
                kept,
            });
        }
    }
    None
}

/// For a frame whose pieces cost `costs[i]` descriptors and hold `lens[i]` bytes, the longest
/// prefix of pieces that can stay as they are when the remaining pieces are copied into one
/// fresh bounce buffer, so that the frame needs at most `max_descriptors`. `None` when even
/// copying everything does not fit.
pub fn bounce_split(
    costs: &[usize],
    lens: &[usize],
    max_descriptors: usize,
    frame: usize,
) -> Option<usize> {
    let n = costs.len().min(lens.len());
    let mut used: usize = costs[..n].iter().sum();
    let mut rest = 0;
    for keep in (0..=n).rev() {
        if keep < n {
            used -= costs[keep];
            rest += lens[keep];
        }
        if used + fresh_buffer_frames(rest, frame) <= max_descriptors {
            return Some(keep);
        }
    }
    None
}

/// What [`Reassembly::push`] did with a received buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Reassembled<B> {
    /// More buffers of this packet are expected.
    Pending,
    /// The packet is complete: its buffers in order.
    Complete(Vec<B>),
    /// The packet exceeded a limit; its buffers are handed back to be recycled.
    Dropped(Vec<B>),
}

/// Collects the buffers of a multi-buffer receive (`XDP_PKT_CONTD` on all but the last).
///
/// A packet with more than `max_parts` buffers or `max_bytes` bytes is dropped as a whole: the
/// remaining buffers of it are dropped too, up to and including its last one.
#[derive(Debug)]
pub struct Reassembly<B> {
    parts: Vec<B>,
    bytes: usize,
    discarding: bool,
    max_parts: usize,
    max_bytes: usize,
}

impl<B> Reassembly<B> {
    /// Limits a packet to `max_parts` buffers and `max_bytes` bytes.
    pub fn new(max_parts: usize, max_bytes: usize) -> Self {
        Reassembly {
            parts: Vec::with_capacity(max_parts),
            bytes: 0,
            discarding: false,
            max_parts,
            max_bytes,
        }
    }

    /// Whether a packet is partly received.
    pub fn in_progress(&self) -> bool {
        !self.parts.is_empty() || self.discarding
    }

    /// Adds a buffer of `len` bytes; `more` is the descriptor's `XDP_PKT_CONTD`.
    pub fn push(&mut self, buf: B, len: usize, more: bool) -> Reassembled<B> {
        if self.discarding {
            if !more {
                self.discarding = false;
            }
            return Reassembled::Dropped(vec![buf]);
        }
        self.parts.push(buf);
        self.bytes += len;
        if self.parts.len() > self.max_parts || self.bytes > self.max_bytes {
            self.discarding = more;
            self.bytes = 0;
            return Reassembled::Dropped(std::mem::take(&mut self.parts));
        }
        if more {
            return Reassembled::Pending;
        }
        self.bytes = 0;
        Reassembled::Complete(std::mem::replace(
            &mut self.parts,
            Vec::with_capacity(self.max_parts),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: usize = FRAME_SIZE;

    #[test]
    fn frame_spans() {
        assert_eq!(frames_spanned(0, 0, F), 0);
        assert_eq!(frames_spanned(0, 1, F), 1);
        assert_eq!(frames_spanned(0, F, F), 1);
        assert_eq!(frames_spanned(0, F + 1, F), 2);
        assert_eq!(frames_spanned(F as u64 - 1, 2, F), 2);
        assert_eq!(frames_spanned(3 * F as u64, 16384, F), 4);
        assert_eq!(fresh_buffer_frames(0, F), 0);
        assert_eq!(fresh_buffer_frames(4096, F), 1);
        assert_eq!(fresh_buffer_frames(4097, F), 2);
    }

    #[test]
    fn split_respects_frames_and_covers_the_range() {
        let pieces: Vec<_> = split_at_frames(4000, 5000, F).collect();
        assert_eq!(pieces, vec![(4000, 96), (4096, 4096), (8192, 808)]);
        assert_eq!(split_at_frames(8192, 0, F).count(), 0);
        for (addr, len) in [(0u64, 1usize), (100, 4096), (4095, 9000), (12288, 8192)] {
            let v: Vec<_> = split_at_frames(addr, len, F).collect();
            assert_eq!(v.len(), frames_spanned(addr, len, F));
            assert_eq!(v.iter().map(|p| p.1 as usize).sum::<usize>(), len);
            let mut next = addr;
            for (a, l) in v {
                assert_eq!(a, next, "pieces are contiguous");
                assert_eq!(
                    a / F as u64,
                    (a + l as u64 - 1) / F as u64,
                    "inside one frame"
                );
                next = a + l as u64;
            }
        }
    }

    fn zc(addr: u64, len: usize) -> Entry {
        Entry {
            len,
            umem_addr: Some(addr),
        }
    }

    #[test]
    fn everything_fits_keeps_everything() {
        let e = [zc(4096, 600), zc(8192, 1000), zc(12288, 700)];
        let p = plan_chain(100, &e, 18, F).unwrap();
        assert_eq!(p.demote, Demote::NONE);
        assert_eq!(p.demoted_bytes, 0);
        assert_eq!(p.head_len, 100);
        assert_eq!(p.descriptors, 4);
        assert_eq!(p.kept, 3);
    }

    #[test]
    fn too_many_leaves_demotes_the_smallest() {
        // 20 leaves of 512..531 bytes, one frame each: 17 can stay beside the head.
        let e: Vec<Entry> = (0..20)
            .map(|i| zc((i as u64 + 1) * 4096, 512 + i))
            .collect();
        let p = plan_chain(64, &e, 18, F).unwrap();
        assert_eq!(p.kept, 17);
        assert_eq!(p.descriptors, 18);
        assert_eq!(p.demoted_bytes, 512 + 513 + 514);
        assert_eq!(p.head_len, 64 + 512 + 513 + 514);
        let mut walk = p.demote;
        let kept: Vec<bool> = e.iter().map(|x| walk.keep_zero_copy(x.len)).collect();
        assert_eq!(&kept[..3], &[false, false, false]);
        assert!(kept[3..].iter().all(|&k| k));
    }

    #[test]
    fn leaves_spanning_frames_cost_more_descriptors() {
        // Two 16 KiB leaves, frame aligned: 4 descriptors each.
        let e = [zc(16384, 16384), zc(32768, 16384)];
        assert_eq!(plan_chain(100, &e, 18, F).unwrap().descriptors, 9);
        // With 6 descriptors only one leaf fits (1 + 4), the other is demoted into the head,
        // which then spans 5 frames: 5 + 4 = 9 > 6, so both go into the head (9 frames) — also
        // too many; no plan.
        assert_eq!(plan_chain(100, &e, 6, F), None);
        let p = plan_chain(100, &e, 9, F).unwrap();
        assert_eq!(p.kept, 2);
    }

    #[test]
    fn head_larger_than_a_frame_counts_its_frames() {
        let e = [zc(0, 1000)];
        let p = plan_chain(5000, &e, 18, F).unwrap();
        assert_eq!(p.descriptors, 3);
        // With only two descriptors the leaf is demoted: 6000 bytes of head = 2 frames.
        let p = plan_chain(5000, &e, 2, F).unwrap();
        assert_eq!((p.kept, p.descriptors, p.head_len), (0, 2, 6000));
    }

    #[test]
    fn foreign_leaves_cost_a_fresh_buffer() {
        let e = [Entry {
            len: 5000,
            umem_addr: None,
        }];
        let p = plan_chain(100, &e, 18, F).unwrap();
        assert_eq!(p.descriptors, 3);
        assert_eq!(p.kept, 1);
    }

    #[test]
    fn nothing_fits_gives_none() {
        assert_eq!(plan_chain(18 * F + 1, &[], 18, F), None);
        assert!(plan_chain(18 * F, &[], 18, F).is_some());
        assert_eq!(plan_chain(10, &[zc(0, 10)], 0, F), None);
    }

    #[test]
    fn empty_leaves_cost_nothing() {
        let e = [zc(0, 0), zc(4096, 700), zc(0, 0)];
        let p = plan_chain(10, &e, 2, F).unwrap();
        assert_eq!(p.descriptors, 2);
        assert_eq!(p.demoted_bytes, 0);
    }

    #[test]
    fn bounce_keeps_the_longest_prefix_that_fits() {
        // Everything fits: keep all.
        assert_eq!(bounce_split(&[1, 1, 1], &[100, 100, 100], 3, F), Some(3));
        // Header (1) + 5 one-descriptor parts with room for 4: keep 3, bounce 2 (1 frame).
        assert_eq!(
            bounce_split(&[1, 1, 1, 1, 1, 1], &[62, 500, 500, 500, 500, 500], 4, F),
            Some(3)
        );
        // A 2-descriptor part is cheaper to bounce together with the rest.
        assert_eq!(bounce_split(&[1, 2, 1], &[62, 3000, 100], 2, F), Some(1));
        // Two pieces that straddle frames: copied together they take 2 frames, not 4.
        assert_eq!(bounce_split(&[2, 2], &[5000, 3000], 2, F), Some(0));
        assert_eq!(bounce_split(&[2, 2], &[5000, 3000], 1, F), None);
    }

    #[test]
    fn reassembly_completes_in_order() {
        let mut r = Reassembly::new(4, 10_000);
        assert_eq!(r.push(1, 3840, true), Reassembled::Pending);
        assert!(r.in_progress());
        assert_eq!(r.push(2, 3840, true), Reassembled::Pending);
        assert_eq!(r.push(3, 1320, false), Reassembled::Complete(vec![1, 2, 3]));
        assert!(!r.in_progress());
        assert_eq!(r.push(4, 60, false), Reassembled::Complete(vec![4]));
    }

    #[test]
    fn reassembly_drops_oversized_packets_whole() {
        let mut r = Reassembly::new(2, 10_000);
        assert_eq!(r.push(1, 100, true), Reassembled::Pending);
        assert_eq!(r.push(2, 100, true), Reassembled::Pending);
        assert_eq!(r.push(3, 100, true), Reassembled::Dropped(vec![1, 2, 3]));
        // The rest of that packet is discarded too, then reception resumes.
        assert_eq!(r.push(4, 100, true), Reassembled::Dropped(vec![4]));
        assert_eq!(r.push(5, 100, false), Reassembled::Dropped(vec![5]));
        assert_eq!(r.push(6, 100, false), Reassembled::Complete(vec![6]));

        let mut r = Reassembly::new(8, 1000);
        assert_eq!(r.push(1, 900, true), Reassembled::Pending);
        assert_eq!(r.push(2, 900, false), Reassembled::Dropped(vec![1, 2]));
        assert!(
            !r.in_progress(),
            "the over-long packet ended with that buffer"
        );
        assert_eq!(r.push(3, 10, false), Reassembled::Complete(vec![3]));
    }
}
