//! The serialize-and-send interface every generated object implements.

use cornflakes_datapath::{SendObject, SizedLeaf};

use crate::arena::Arena;
use crate::cfptr::CFPtr;
use crate::mem::{PinnedRef, RcBuf};
use crate::wire::{BufferTooSmall, DecodeError, Decoder, Demote, Encoder, HeaderReader};

/// The sizes of an object's three areas (defined with the datapath interface, which sizes its
/// buffers and descriptors with them).
pub use cornflakes_datapath::Sizes;

impl SizedLeaf for CFPtr<'_> {
    #[inline]
    fn leaf_len(&self) -> usize {
        self.len()
    }

    #[inline]
    fn leaf_is_zero_copy(&self) -> bool {
        self.is_zero_copy()
    }
}

/// An object the Cornflakes stack can serialize and send (paper Listing 1).
///
/// A datapath sends an object in two walks: [`emit`](Self::emit) writes the HEADER AREA and
/// COPY AREA into the first transmit buffer (after the packet header), then
/// [`for_each_zero_copy`](Self::for_each_zero_copy) hands each zero-copy leaf, in wire order,
/// to a callback that posts it as its own descriptor (taking a counted reference for it: the
/// object's leaves are borrowed views, [`PinnedRef`]). [`sizes`](Self::sizes) says up front how
/// large the first buffer is and how many descriptors follow.
///
/// Datapaths send through the datapath interface's [`SendObject`], which every `CornflakesObj`
/// also implements: generated code does it with [`send_object_methods!`](crate::send_object_methods)
/// (`impl SendObject for T { cornflakes::send_object_methods!(); }` per message), and so must an
/// object written by hand.
pub trait CornflakesObj: SendObject {
    /// Sizes of the encoded areas.
    fn sizes(&self) -> Sizes;

    /// Writes this object's header at `pos` (its nested headers and pair arrays after it) and
    /// its copied leaves at the encoder's copy cursor; returns the end of its header subtree.
    fn emit(&self, enc: &mut Encoder<'_>, pos: usize) -> usize;

    /// [`emit`](Self::emit), also handing each zero-copy leaf the encoder's plan keeps to
    /// `sink`, in wire order: the leaves [`for_each_zero_copy`](Self::for_each_zero_copy)
    /// gives. Generated objects do both in one walk (each leaf as its slot is written); this
    /// default walks twice.
    #[inline]
    fn emit_with<S: FnMut(PinnedRef<'_>)>(
        &self,
        enc: &mut Encoder<'_>,
        pos: usize,
        sink: &mut S,
    ) -> usize {
        let end = self.emit(enc, pos);
        let mut plan = enc.plan();
        self.for_each_zero_copy(&mut plan, sink);
        end
    }

    /// Calls `f` on each zero-copy leaf kept by `demote`, in wire order.
    fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F);

    /// Writes HEADER AREA + COPY AREA into the start of `buf` and returns the bytes written,
    /// `sizes.head() + demoted`; a shorter `buf` is refused with [`BufferTooSmall`] before
    /// anything is written. `sizes` must be `self.sizes()` and `(demote, demoted)` a plan for
    /// this object ([`Demote::plan`]); [`SendPlan`](crate::SendPlan) keeps the three together.
    #[inline]
    fn write_header_and_copy(
        &self,
        sizes: &Sizes,
        buf: &mut [u8],
        demote: Demote,
        demoted: usize,
    ) -> Result<usize, BufferTooSmall> {
        let need = sizes.head() + demoted;
        if buf.len() < need {
            return Err(BufferTooSmall::new(need, buf.len()));
        }
        let mut enc = Encoder::new(buf, sizes, demote, demoted);
        self.emit(&mut enc, 0);
        Ok(need)
    }

    /// [`write_header_and_copy`](Self::write_header_and_copy) and the zero-copy leaves the plan
    /// keeps handed to `sink` in wire order, in one walk ([`emit_with`](Self::emit_with)): what
    /// a send does, posting each leaf as its descriptor while the header is written. `sink` is
    /// not called when `buf` is refused.
    #[inline]
    fn write_head_and_leaves<S: FnMut(PinnedRef<'_>)>(
        &self,
        sizes: &Sizes,
        buf: &mut [u8],
        demote: Demote,
        demoted: usize,
        sink: &mut S,
    ) -> Result<usize, BufferTooSmall> {
        let need = sizes.head() + demoted;
        if buf.len() < need {
            return Err(BufferTooSmall::new(need, buf.len()));
        }
        let mut enc = Encoder::new(buf, sizes, demote, demoted);
        self.emit_with(&mut enc, 0, sink);
        Ok(need)
    }

    /// Lengths of the zero-copy leaves in wire order (for planning a [`Demote`]).
    fn zero_copy_lens(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut keep_all = Demote::NONE;
        self.for_each_zero_copy(&mut keep_all, &mut |b: PinnedRef<'_>| v.push(b.len()));
        v
    }

    /// Serializes the whole object contiguously into `buf`, for users without a Cornflakes
    /// datapath; returns its length.
    fn serialize_into(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let s = self.sizes();
        let total = s.total();
        if buf.len() < total {
            return Err(BufferTooSmall {
                needed: total,
                available: buf.len(),
            });
        }
        let mut pos = self.write_header_and_copy(&s, &mut buf[..total], Demote::NONE, 0)?;
        let mut keep_all = Demote::NONE;
        self.for_each_zero_copy(&mut keep_all, &mut |b: PinnedRef<'_>| {
            buf[pos..pos + b.len()].copy_from_slice(&b);
            pos += b.len();
        });
        Ok(total)
    }

    /// Serializes the whole object into a new vector.
    fn serialize_to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.sizes().total()];
        let n = self.serialize_into(&mut v).unwrap_or(0);
        v.truncate(n);
        v
    }
}

/// An object that can be decoded from the wire (implemented by generated code).
pub trait DecodeObj<'a>: Sized {
    /// Decodes the object whose header `h` has opened; values reference the input.
    fn decode_from(h: HeaderReader<'_, 'a>, arena: &'a Arena) -> Result<Self, DecodeError>;

    /// [`decode_from`](Self::decode_from), then the object moved into a box in the arena: how
    /// generated code decodes a nested message field. (A function of its own, and not
    /// `decode_from` and the box written out at each field: measured fewer instructions per
    /// nested object when it was written.)
    #[inline]
    fn decode_boxed(
        h: HeaderReader<'_, 'a>,
        arena: &'a Arena,
    ) -> Result<bumpalo::boxed::Box<'a, Self>, DecodeError> {
        Self::decode_from(h, arena).map(|m| bumpalo::boxed::Box::new_in(m, arena.bump()))
    }

    /// [`decode_boxed`](Self::decode_boxed), never inlined: how generated code decodes the
    /// nested messages of a message too large to decode in one function (the nested decode is
    /// inlined here instead).
    #[inline(never)]
    fn decode_boxed_out_of_line(
        h: HeaderReader<'_, 'a>,
        arena: &'a Arena,
    ) -> Result<bumpalo::boxed::Box<'a, Self>, DecodeError> {
        Self::decode_boxed(h, arena)
    }

    /// Decodes from plain bytes (values borrow `buf`). The object must fill `buf`: bytes after
    /// it are refused with [`DecodeErrorKind::TrailingBytes`](crate::DecodeErrorKind) (use
    /// [`deserialize_prefix`](Self::deserialize_prefix) to accept them). An arena above its
    /// [limit](Arena::set_limit) refuses the request with
    /// [`DecodeErrorKind::ArenaLimit`](crate::DecodeErrorKind).
    #[inline]
    fn deserialize_bytes(buf: &'a [u8], arena: &'a Arena) -> Result<Self, DecodeError> {
        arena.check_limit_for_decode()?;
        let dec = Decoder::new(buf);
        // The result is returned as it is (not taken apart and rebuilt), so the object is not
        // moved again.
        let r = Self::decode_from(dec.root()?, arena);
        if r.is_ok() {
            dec.check_no_trailing_bytes()?;
        }
        r
    }

    /// Decodes from a received packet: values at least the arena's threshold long reference
    /// the packet, shorter ones borrow it. Trailing bytes and the arena limit as in
    /// [`deserialize_bytes`](Self::deserialize_bytes).
    #[inline]
    fn deserialize_rcbuf(pkt: &'a RcBuf, arena: &'a Arena) -> Result<Self, DecodeError> {
        arena.check_limit_for_decode()?;
        let dec = Decoder::from_rcbuf(pkt, arena);
        // The result is returned as it is (not taken apart and rebuilt), so the object is not
        // moved again.
        let r = Self::decode_from(dec.root()?, arena);
        if r.is_ok() {
            dec.check_no_trailing_bytes()?;
        }
        r
    }

    /// Decodes an object at the start of `buf` and accepts bytes after it (an explicit opt-in:
    /// the format has no length field, so the framing normally gives the object's length).
    /// Returns the object and the bytes it uses: the furthest byte any of its fields
    /// references, or all of `buf` when it has fields this reader does not know (their data
    /// may lie anywhere, see [`Decoder::consumed`]).
    fn deserialize_prefix(buf: &'a [u8], arena: &'a Arena) -> Result<(Self, usize), DecodeError> {
        arena.check_limit_for_decode()?;
        let dec = Decoder::new(buf);
        let obj = Self::decode_from(dec.root()?, arena)?;
        Ok((obj, dec.consumed().unwrap_or(buf.len())))
    }

    /// [`deserialize_prefix`](Self::deserialize_prefix) from a received packet, values as in
    /// [`deserialize_rcbuf`](Self::deserialize_rcbuf).
    fn deserialize_rcbuf_prefix(
        pkt: &'a RcBuf,
        arena: &'a Arena,
    ) -> Result<(Self, usize), DecodeError> {
        arena.check_limit_for_decode()?;
        let dec = Decoder::from_rcbuf(pkt, arena);
        let obj = Self::decode_from(dec.root()?, arena)?;
        Ok((obj, dec.consumed().unwrap_or(pkt.len())))
    }
}
