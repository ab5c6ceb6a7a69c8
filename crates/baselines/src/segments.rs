//! Cap'n Proto messages as a scatter-gather list: the network path that suits Cap'n Proto's
//! output (paper §6.1.3).
//!
//! A Cap'n Proto message on the wire is a segment table followed by its segments, and the
//! builder writes the wire format of each segment in place. So a careful deployment gives the
//! builder segments in the NIC's memory and sends the table and each segment as one
//! scatter-gather entry, instead of writing the message out contiguously (a second copy of
//! every value). [`build_segments`] does that with segments from a caller's allocator (in the
//! KV and echo servers: the datapath's pinned memory); a segment the caller cannot supply is
//! taken from the heap and reported as such ([`Segment::Heap`]), for the caller to copy.
//!
//! This is the crate's one hand-written `unsafe`: Cap'n Proto takes memory only through its
//! `unsafe` [`Allocator`] trait, and the segments must be the caller's (pinned) memory for the
//! NIC to read them where they were built.

use std::ops::DerefMut;
use std::ptr::NonNull;

use capnp::message::{Allocator, Builder};
use cornflakes::mem::AllocError;
use cornflakes::{PinnedMemory, RcBuf, RcBufMut};

use crate::shape::CodecError;

/// One segment of a built message.
#[derive(Debug)]
pub enum Segment<B> {
    /// A buffer from the caller's allocator; the message's bytes are its first `len`.
    Given {
        /// The buffer.
        buf: B,
        /// Bytes of the segment in use.
        len: usize,
    },
    /// The caller's allocator had no buffer this large: the segment's bytes, from the heap.
    Heap(Vec<u8>),
}

impl<B: DerefMut<Target = [u8]>> Segment<B> {
    /// The segment's wire bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Segment::Given { buf, len } => &buf[..*len],
            Segment::Heap(v) => v,
        }
    }
}

/// A message as a scatter-gather list: `table`, then each segment, in order.
#[derive(Debug)]
pub struct SegmentList<B> {
    /// The segment table (segment count − 1, each segment's length in words, padded to a
    /// word), as `capnp::serialize::write_message` writes it.
    pub table: Vec<u8>,
    /// The segments.
    pub segments: Vec<Segment<B>>,
}

impl<B: DerefMut<Target = [u8]>> SegmentList<B> {
    /// Total wire length.
    pub fn len(&self) -> usize {
        self.table.len() + self.segments.iter().map(|s| s.bytes().len()).sum::<usize>()
    }

    /// Whether the list is empty (never, for a built message).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message written out contiguously (tests and diagnostics).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = self.table.clone();
        for s in &self.segments {
            v.extend_from_slice(s.bytes());
        }
        v
    }
}

impl SegmentList<RcBufMut> {
    /// The scatter-gather list to send: the table copied into a pinned buffer of `mem`, each
    /// given segment cut to its length, and a heap segment (only when `mem` had no buffer for
    /// it) copied into one.
    pub fn into_sga(self, mem: &PinnedMemory) -> Result<Vec<RcBuf>, AllocError> {
        let mut sga = Vec::with_capacity(1 + self.segments.len());
        sga.push(mem.alloc_copy(&self.table)?);
        for s in self.segments {
            sga.push(match s {
                Segment::Given { mut buf, len } => {
                    buf.set_len(len);
                    buf.freeze()
                }
                Segment::Heap(v) => mem.alloc_copy(&v)?,
            });
        }
        Ok(sga)
    }
}

/// Builds a message with `fill` in buffers of `mem` (see [`build_segments`]) and returns the
/// scatter-gather list to send; the outer error is the library's, the inner one the pinned
/// memory's.
pub fn pinned_sga(
    mem: &PinnedMemory,
    first_words: usize,
    fill: impl FnOnce(&mut Builder<&mut PinnedAllocator<'_>>) -> Result<(), CodecError>,
) -> Result<Result<Vec<RcBuf>, AllocError>, CodecError> {
    let alloc: Box<dyn FnMut(usize) -> Option<RcBufMut> + '_> = Box::new(|n| mem.alloc(n).ok());
    Ok(build_segments(alloc, first_words, fill)?.into_sga(mem))
}

/// The allocator of [`pinned_sga`].
pub type PinnedAllocator<'a> =
    SegmentAllocator<RcBufMut, Box<dyn FnMut(usize) -> Option<RcBufMut> + 'a>>;

enum Held<B> {
    // Boxed so the buffer (and any bytes it holds inline) stays put while the builder
    // writes through the pointer handed out for it.
    Given(Box<B>),
    Heap(Box<[u8]>),
}

/// The [`Allocator`] of [`build_segments`]: segments from `alloc`, else the heap.
pub struct SegmentAllocator<B, F> {
    alloc: F,
    next_words: u32,
    held: Vec<Held<B>>,
}

// SAFETY: `allocate_segment` returns the start of a zeroed region of at least the returned
// number of words (at least `minimum_size`) that nothing else reads or writes while the
// builder lives: a caller's buffer we own, boxed so it does not move (pointer taken from its
// one `deref_mut`), or a boxed heap slice. Every region stays alive in `self.held` until the
// allocator itself is dropped or consumed, which the borrow of the builder (`Builder<&mut
// Self>`) orders after the builder's end, so `deallocate_segment` has nothing to free.
#[allow(unsafe_code)]
unsafe impl<B, F> Allocator for SegmentAllocator<B, F>
where
    B: DerefMut<Target = [u8]>,
    F: FnMut(usize) -> Option<B>,
{
    fn allocate_segment(&mut self, minimum_size: u32) -> (NonNull<u8>, u32) {
        let want = minimum_size.max(self.next_words).max(1);
        // Later segments (rare: the first is sized for the message) grow like capnp's own.
        self.next_words = want.saturating_mul(2);
        let bytes = want as usize * 8;
        let held = match (self.alloc)(bytes) {
            Some(b) if b.len() >= bytes => Held::Given(Box::new(b)),
            _ => Held::Heap(vec![0u8; bytes].into_boxed_slice()),
        };
        self.held.push(held);
        let region: &mut [u8] = match self.held.last_mut().expect("just pushed") {
            Held::Given(b) => {
                let r = &mut b[..bytes];
                r.fill(0);
                r
            }
            Held::Heap(h) => &mut h[..],
        };
        (NonNull::from(region).cast::<u8>(), want)
    }

    #[allow(unsafe_code)]
    unsafe fn deallocate_segment(&mut self, _ptr: NonNull<u8>, _words: u32, _used: u32) {
        // The regions live in `self.held` and are handed to the caller (or dropped) once
        // the builder is gone.
    }
}

/// Builds a message with `fill` in segments from `alloc` (called with a byte count; a buffer
/// at least that long, or `None` for the heap), the first sized for `first_words` words (an
/// upper bound of the message makes it the only segment), and returns it as a
/// scatter-gather list.
pub fn build_segments<B, F>(
    alloc: F,
    first_words: usize,
    fill: impl FnOnce(&mut Builder<&mut SegmentAllocator<B, F>>) -> Result<(), CodecError>,
) -> Result<SegmentList<B>, CodecError>
where
    B: DerefMut<Target = [u8]>,
    F: FnMut(usize) -> Option<B>,
{
    let mut a = SegmentAllocator {
        alloc,
        // At most 512 MiB: a larger request is a caller's bug, and capnp grows from there.
        next_words: first_words.clamp(1, 1 << 26) as u32,
        held: Vec::new(),
    };
    let lens: Vec<(usize, usize)> = {
        let mut message = Builder::new(&mut a);
        fill(&mut message)?;
        let out = message.get_segments_for_output();
        out.iter().map(|s| (s.as_ptr() as usize, s.len())).collect()
    };
    // The builder is gone: the regions are ours again. Match each output segment to the
    // region it was built in (capnp outputs them in allocation order).
    let mut table = Vec::with_capacity(8 * (lens.len() / 2 + 1));
    table.extend_from_slice(&(lens.len() as u32 - 1).to_le_bytes());
    for (_, len) in &lens {
        table.extend_from_slice(&((len / 8) as u32).to_le_bytes());
    }
    if table.len() % 8 != 0 {
        table.extend_from_slice(&[0; 4]);
    }
    let mut segments = Vec::with_capacity(lens.len());
    let mut held = a.held.into_iter();
    for (ptr, len) in lens {
        let h = held.next().ok_or_else(|| {
            CodecError::Capnp(capnp::Error::failed(
                "capnp output a segment it did not allocate".to_owned(),
            ))
        })?;
        let start = match &h {
            Held::Given(b) => {
                let s: &[u8] = &b[..];
                s.as_ptr() as usize
            }
            Held::Heap(v) => v.as_ptr() as usize,
        };
        if start != ptr {
            return Err(CodecError::Capnp(capnp::Error::failed(
                "capnp output segments out of allocation order".to_owned(),
            )));
        }
        segments.push(match h {
            Held::Given(b) => Segment::Given { buf: *b, len },
            Held::Heap(v) => Segment::Heap(v[..len].to_vec()),
        });
    }
    Ok(SegmentList { table, segments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generated::capnp_gen::echo_capnp::list_msg as list;
    use capnp::message::HeapAllocator;
    use capnp::serialize;

    fn fill_list<A: Allocator>(m: &mut Builder<A>, vals: &[&[u8]]) -> Result<(), CodecError> {
        let mut root = m.init_root::<list::Builder<'_>>();
        root.set_id(7);
        let mut l = root.init_vals(vals.len() as u32);
        for (i, v) in vals.iter().enumerate() {
            l.set(i as u32, v);
        }
        Ok(())
    }

    type Alloc = Box<dyn FnMut(usize) -> Option<Vec<u8>>>;

    fn contiguous(vals: &[&[u8]]) -> Vec<u8> {
        let mut m = Builder::new(HeapAllocator::new());
        fill_list(&mut m, vals).unwrap();
        let mut out = Vec::new();
        serialize::write_message(&mut out, &m).unwrap();
        out
    }

    #[test]
    fn one_given_segment_matches_the_contiguous_encoding() {
        let (a, b) = (vec![1u8; 100], vec![2u8; 3000]);
        let vals: Vec<&[u8]> = vec![&a, &b];
        // Dirty buffers: the allocator must zero what it hands to capnp.
        let alloc: Alloc = Box::new(|n| Some(vec![0xee; n + 16]));
        let l = build_segments(alloc, 1024, |m| fill_list(m, &vals)).unwrap();
        assert_eq!(l.segments.len(), 1);
        assert!(matches!(l.segments[0], Segment::Given { .. }));
        assert_eq!(l.table.len(), 8);
        assert_eq!(l.to_vec(), contiguous(&vals));
    }

    #[test]
    fn a_small_first_segment_spills_into_more_segments_and_stays_decodable() {
        let (a, b) = (vec![3u8; 500], vec![4u8; 900]);
        let vals: Vec<&[u8]> = vec![&a, &b];
        let mut calls = 0;
        // The second request is refused: that segment comes from the heap.
        let alloc: Alloc = Box::new(move |n| {
            calls += 1;
            (calls != 2).then(|| vec![0xee; n])
        });
        let l = build_segments(alloc, 4, |m| fill_list(m, &vals)).unwrap();
        assert!(l.segments.len() >= 2, "{}", l.segments.len());
        assert!(matches!(l.segments[1], Segment::Heap(_)));
        let wire = l.to_vec();
        let mut slice = &wire[..];
        let r = serialize::read_message_from_flat_slice(&mut slice, Default::default()).unwrap();
        let root = r.get_root::<list::Reader<'_>>().unwrap();
        assert_eq!(root.get_id(), 7);
        let got: Vec<Vec<u8>> = root
            .get_vals()
            .unwrap()
            .iter()
            .map(|v| v.unwrap().to_vec())
            .collect();
        assert_eq!(got, vec![a, b]);
        assert_eq!(l.len(), wire.len());
    }

    #[test]
    fn echo_and_kv_replies_in_pinned_segments_equal_the_contiguous_ones() {
        use crate::{capnp_echo_sga, CapnpCodec, Codec, EchoMsg, Shape};
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut c = CapnpCodec::new();
        let vals: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 100 + 300 * i as usize]).collect();
        let vals: Vec<&[u8]> = vals.iter().map(Vec::as_slice).collect();
        for (shape, n) in [(Shape::Single, 1), (Shape::List, 5), (Shape::Tree(3), 8)] {
            let msg = EchoMsg {
                id: 5,
                shape,
                vals: &vals[..n],
            };
            let mut input = vec![0u8; 1 << 16];
            let len = c.encode(&msg, &mut input).unwrap();
            let input = &input[..len];
            let mut out = vec![0u8; 1 << 16];
            let m = c.echo(shape, input, &mut out).unwrap();
            let live = mem.stats().live_items;
            let sga = capnp_echo_sga(shape, input, &mem).unwrap().unwrap();
            assert_eq!(sga.len(), 2, "{shape:?}: the table and one segment");
            let wire: Vec<u8> = sga.iter().flat_map(|b| b.iter().copied()).collect();
            assert_eq!(wire, &out[..m], "{shape:?}");
            drop(sga);
            assert_eq!(mem.stats().live_items, live, "every buffer returned");
            assert!(capnp_echo_sga(shape, &input[..len / 2], &mem).is_err());
        }
    }
}
