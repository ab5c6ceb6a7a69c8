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
/// memory's. A server that sends a reply per request uses [`pinned_sga_into`] with a reused
/// list instead (this one allocates the list it returns).
pub fn pinned_sga(
    mem: &PinnedMemory,
    first_words: usize,
    fill: impl FnOnce(&mut Builder<&mut PinnedAllocator<'_>>) -> Result<(), CodecError>,
) -> Result<Result<Vec<RcBuf>, AllocError>, CodecError> {
    let mut sga = Vec::new();
    Ok(pinned_sga_into(mem, first_words, fill, &mut sga)?.map(|()| sga))
}

/// [`pinned_sga`] appending to `sga` (cleared first): the segment table in a pinned buffer,
/// then each segment. Per message this allocates only what capnp's `Builder` itself does
/// (its segment table); the first segment is held in place, not boxed, and the table is
/// written straight into pinned memory. On an error `sga` holds what was built so far.
pub fn pinned_sga_into(
    mem: &PinnedMemory,
    first_words: usize,
    fill: impl FnOnce(&mut Builder<&mut PinnedAllocator<'_>>) -> Result<(), CodecError>,
    sga: &mut Vec<RcBuf>,
) -> Result<Result<(), AllocError>, CodecError> {
    sga.clear();
    let (out, a) = build(Pinned(mem), first_words, fill)?;
    let table_len = 8 * (out.count() / 2 + 1);
    let mut table = match mem.alloc(table_len) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    write_table(&out, &mut table[..table_len]);
    table.set_len(table_len);
    sga.push(table.freeze());
    let mut failed = None;
    a.take(&out, |s| {
        if failed.is_some() {
            return;
        }
        match s {
            Segment::Given { mut buf, len } => {
                buf.set_len(len);
                sga.push(buf.freeze());
            }
            Segment::Heap(v) => match mem.alloc_copy(&v) {
                Ok(b) => sga.push(b),
                Err(e) => failed = Some(e),
            },
        }
    });
    Ok(failed.map_or(Ok(()), Err))
}

/// Where a segment's memory comes from: a buffer of at least the byte count asked for, or
/// `None` (the segment then comes from the heap).
pub trait SegmentSource<B> {
    /// A buffer of at least `bytes` bytes, or `None`.
    fn segment(&mut self, bytes: usize) -> Option<B>;
}

impl<B, F: FnMut(usize) -> Option<B>> SegmentSource<B> for F {
    fn segment(&mut self, bytes: usize) -> Option<B> {
        self(bytes)
    }
}

/// The segment source of [`pinned_sga`]: buffers of a pinned memory.
#[derive(Clone, Copy, Debug)]
pub struct Pinned<'a>(pub &'a PinnedMemory);

impl SegmentSource<RcBufMut> for Pinned<'_> {
    fn segment(&mut self, bytes: usize) -> Option<RcBufMut> {
        self.0.alloc(bytes).ok()
    }
}

/// The allocator of [`pinned_sga`].
pub type PinnedAllocator<'a> = SegmentAllocator<RcBufMut, Pinned<'a>>;

enum Held<B> {
    // Boxed so the buffer (and any bytes it holds inline) stays put while the builder
    // writes through the pointer handed out for it, however `more` grows.
    Given(Box<B>),
    /// The first segment's buffer, held in the allocator itself (see [`SegmentAllocator`]).
    Here(B),
    Heap(Box<[u8]>),
}

/// The [`Allocator`] of [`build_segments`]: segments from `alloc`, else the heap.
pub struct SegmentAllocator<B, F> {
    alloc: F,
    next_words: u32,
    /// The first segment, in place (the builder borrows the allocator, so it does not move
    /// while the builder writes into it); usually the only one.
    first: Option<Held<B>>,
    more: Vec<Held<B>>,
}

fn region<B: DerefMut<Target = [u8]>>(h: &mut Held<B>, bytes: usize) -> &mut [u8] {
    match h {
        Held::Given(b) => {
            let r = &mut b[..bytes];
            r.fill(0);
            r
        }
        Held::Here(b) => {
            let r = &mut b[..bytes];
            r.fill(0);
            r
        }
        Held::Heap(h) => &mut h[..],
    }
}

fn start<B: DerefMut<Target = [u8]>>(h: &Held<B>) -> usize {
    match h {
        Held::Given(b) => {
            let s: &[u8] = &b[..];
            s.as_ptr() as usize
        }
        Held::Here(b) => {
            let s: &[u8] = b;
            s.as_ptr() as usize
        }
        Held::Heap(v) => v.as_ptr() as usize,
    }
}

// SAFETY: `allocate_segment` returns the start of a zeroed region of at least the returned
// number of words (at least `minimum_size`) that nothing else reads or writes while the
// builder lives: a caller's buffer we own (boxed, or for the first segment held in the
// allocator itself, which the builder's `&mut` borrow keeps in place; pointer taken from its
// one `deref_mut`), or a boxed heap slice. Every region stays alive in `self.first` /
// `self.more` until the allocator itself is dropped or consumed, which the borrow of the
// builder (`Builder<&mut Self>`) orders after the builder's end, so `deallocate_segment` has
// nothing to free.
#[allow(unsafe_code)]
unsafe impl<B, F> Allocator for SegmentAllocator<B, F>
where
    B: DerefMut<Target = [u8]>,
    F: SegmentSource<B>,
{
    fn allocate_segment(&mut self, minimum_size: u32) -> (NonNull<u8>, u32) {
        let want = minimum_size.max(self.next_words).max(1);
        // Later segments (rare: the first is sized for the message) grow like capnp's own.
        self.next_words = want.saturating_mul(2);
        let bytes = want as usize * 8;
        let first = self.first.is_none();
        let held = match self.alloc.segment(bytes) {
            Some(b) if b.len() >= bytes && first => Held::Here(b),
            Some(b) if b.len() >= bytes => Held::Given(Box::new(b)),
            _ => Held::Heap(vec![0u8; bytes].into_boxed_slice()),
        };
        let slot = if first {
            self.first.insert(held)
        } else {
            self.more.push(held);
            self.more.last_mut().expect("just pushed")
        };
        (NonNull::from(region(slot, bytes)).cast::<u8>(), want)
    }
    #[allow(unsafe_code)]
    unsafe fn deallocate_segment(&mut self, _ptr: NonNull<u8>, _words: u32, _used: u32) {
        // The regions live in `self.held` and are handed to the caller (or dropped) once
        // the builder is gone.
    }
}

/// The segments capnp output: (start address, length) of each, the first kept inline so a
/// one-segment message records them without allocating.
struct Output {
    first: (usize, usize),
    more: Vec<(usize, usize)>,
}

impl Output {
    fn count(&self) -> usize {
        1 + self.more.len()
    }

    fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        std::iter::once(self.first).chain(self.more.iter().copied())
    }
}

/// The segment table of `out` (segment count − 1, each length in words, padded to a word),
/// as `capnp::serialize::write_message` writes it, into `t` (`8 * (count / 2 + 1)` bytes).
fn write_table(out: &Output, t: &mut [u8]) {
    t.fill(0);
    t[..4].copy_from_slice(&(out.count() as u32 - 1).to_le_bytes());
    for (i, (_, len)) in out.iter().enumerate() {
        t[4 + 4 * i..8 + 4 * i].copy_from_slice(&((len / 8) as u32).to_le_bytes());
    }
}

/// Runs `fill` on a builder over a [`SegmentAllocator`] from `alloc`; returns the output
/// segments and the allocator holding their memory, checked to match in allocation order.
fn build<B, F>(
    alloc: F,
    first_words: usize,
    fill: impl FnOnce(&mut Builder<&mut SegmentAllocator<B, F>>) -> Result<(), CodecError>,
) -> Result<(Output, SegmentAllocator<B, F>), CodecError>
where
    B: DerefMut<Target = [u8]>,
    F: SegmentSource<B>,
{
    let mut a = SegmentAllocator {
        alloc,
        // At most 512 MiB: a larger request is a caller's bug, and capnp grows from there.
        next_words: first_words.clamp(1, 1 << 26) as u32,
        first: None,
        more: Vec::new(),
    };
    let out = {
        let mut message = Builder::new(&mut a);
        fill(&mut message)?;
        let segs = message.get_segments_for_output();
        let mut out = Output {
            first: (0, 0),
            more: Vec::new(),
        };
        for (i, s) in segs.iter().enumerate() {
            let seg = (s.as_ptr() as usize, s.len());
            if i == 0 {
                out.first = seg;
            } else {
                out.more.push(seg);
            }
        }
        out
    };
    // The builder is gone: the regions are ours again. Match each output segment to the
    // region it was built in (capnp outputs them in allocation order), before anything moves.
    let failed = |what: &str| CodecError::Capnp(capnp::Error::failed(what.to_owned()));
    let held = a.first.iter().chain(a.more.iter());
    if held.clone().count() < out.count() {
        return Err(failed("capnp output a segment it did not allocate"));
    }
    if held.zip(out.iter()).any(|(h, (ptr, _))| start(h) != ptr) {
        return Err(failed("capnp output segments out of allocation order"));
    }
    Ok((out, a))
}

impl<B: DerefMut<Target = [u8]>, F> SegmentAllocator<B, F> {
    /// Hands each output segment of `out` to `each`, in order (a heap one copied to its
    /// length; [`build`] checked that they match).
    fn take(self, out: &Output, mut each: impl FnMut(Segment<B>)) {
        let held = self.first.into_iter().chain(self.more);
        for (h, (_, len)) in held.zip(out.iter()) {
            each(match h {
                Held::Given(b) => Segment::Given { buf: *b, len },
                Held::Here(buf) => Segment::Given { buf, len },
                Held::Heap(v) => Segment::Heap(v[..len].to_vec()),
            });
        }
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
    F: SegmentSource<B>,
{
    let (out, a) = build(alloc, first_words, fill)?;
    let mut table = vec![0; 8 * (out.count() / 2 + 1)];
    write_table(&out, &mut table);
    let mut segments = Vec::with_capacity(out.count());
    a.take(&out, |s| segments.push(s));
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
