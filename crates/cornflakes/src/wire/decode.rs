//! Zero-copy, validating decoding (see `docs/wire-format.md`, "Decoding validates everything").
//!
//! A [`Decoder`] reads an object from a received packet ([`RcBuf`]) or any `&[u8]`. Decoded
//! string/bytes values reference the input: as [`CFPtr::ZeroCopy`] (a view of the packet,
//! borrowed like it: no reference count is taken) when at least the arena's threshold long
//! and the input is a packet, otherwise as
//! [`CFPtr::Copy`] borrowing the input. Nothing is copied while decoding.
//!
//! Every read is bounds-checked; counts are checked against the bytes before anything is sized
//! by them; the work one object can cause is bounded by its length (shared or cyclic offsets
//! cannot amplify it).

use std::cell::Cell;

use super::error::{DecodeError, DecodeErrorKind};
use super::scalar::Scalar;
use crate::arena::Arena;
use crate::cfptr::CFPtr;
use crate::mem::RcBuf;

/// Deepest nesting of objects a decoder follows.
pub const MAX_DEPTH: u32 = 64;
/// Largest bitmap (field numbers up to protobuf's 2^29 − 1).
pub const MAX_BITMAP_WORDS: u32 = 1 << 24;

/// The input of one decode and the budget it may spend.
pub struct Decoder<'a> {
    buf: &'a [u8],
    pkt: Option<&'a RcBuf>,
    threshold: usize,
    budget: Cell<usize>,
    /// The furthest byte any header, slot, pair array or value read so far ends at.
    end: Cell<usize>,
    /// Whether some object had a present field above the reader's highest known number (its
    /// slot and data were not read, so `end` says nothing about them).
    unknown: Cell<bool>,
}

impl<'a> Decoder<'a> {
    /// Decodes from plain bytes; values borrow `buf`.
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder {
            buf,
            pkt: None,
            threshold: usize::MAX,
            budget: Cell::new(buf.len()),
            end: Cell::new(0),
            unknown: Cell::new(false),
        }
    }

    /// Decodes from a received packet; values at least `arena.threshold()` long become
    /// references to `pkt`, shorter ones borrow it.
    #[inline]
    pub fn from_rcbuf(pkt: &'a RcBuf, arena: &Arena) -> Decoder<'a> {
        Decoder {
            buf: pkt.as_slice(),
            pkt: Some(pkt),
            threshold: arena.threshold().max(1),
            budget: Cell::new(pkt.len()),
            end: Cell::new(0),
            unknown: Cell::new(false),
        }
    }

    /// The object bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// How many bytes of the input the objects decoded so far use: the furthest byte any of
    /// their headers, slots, pair arrays or values ends at. `None` when some object had a
    /// present field this reader does not know (its data may lie anywhere in the input, so
    /// trailing bytes cannot be told from it).
    pub fn consumed(&self) -> Option<usize> {
        if self.unknown.get() {
            None
        } else {
            Some(self.end.get())
        }
    }

    /// Refuses bytes after the object (call after decoding it): `Ok` when the objects decoded
    /// use the whole input, or when fields this reader does not know were present (see
    /// [`consumed`](Self::consumed)); else [`DecodeErrorKind::TrailingBytes`].
    #[inline(always)]
    pub fn check_no_trailing_bytes(&self) -> Result<(), DecodeError> {
        if self.end.get() == self.buf.len() {
            return Ok(());
        }
        // Unknown fields are looked at out of line: the accepted path is one compare.
        trailing_bytes(self.end.get(), self.buf.len(), self.unknown.get())
    }

    #[inline(always)]
    fn note_end(&self, end: usize) {
        if end > self.end.get() {
            self.end.set(end);
        }
    }

    /// Charges `n` bytes of header structure to the budget.
    #[inline]
    fn charge(&self, n: usize, at: usize) -> Result<(), DecodeError> {
        let b = self.budget.get();
        if n > b {
            return Err(budget_exceeded(self.buf.len(), at));
        }
        self.budget.set(b - n);
        Ok(())
    }

    #[inline]
    fn need(&self, what: &'static str, at: usize, n: usize) -> Result<&'a [u8], DecodeError> {
        // `at + n` cannot overflow: both are below the buffer length plus a slot size.
        match self.buf.get(at..at.wrapping_add(n)) {
            Some(s) => Ok(s),
            None => Err(truncated(self.buf.len(), what, at, n)),
        }
    }

    #[inline]
    fn range(
        &self,
        what: &'static str,
        off: u32,
        len: u64,
        at: usize,
    ) -> Result<usize, DecodeError> {
        let end = off as u64 + len;
        if end > self.buf.len() as u64 {
            return Err(out_of_bounds(self.buf.len(), what, off, len, at));
        }
        self.note_end(end as usize);
        Ok(off as usize)
    }

    /// Opens the top-level object's header.
    #[inline]
    pub fn root(&self) -> Result<HeaderReader<'_, 'a>, DecodeError> {
        self.header(0, 0)
    }

    /// Opens the object header at `offset`, `depth` levels below the top.
    #[inline(always)]
    pub fn header(&self, offset: usize, depth: u32) -> Result<HeaderReader<'_, 'a>, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(too_deep(offset));
        }
        // One bitmap word (fields 1-32), the usual case: `W` and the word read with one bounds
        // check. What the general path below checks and charges for it, in the same order, so
        // a header it refuses goes there and is refused with the same error.
        if let Some(b) = self.buf.get(offset..offset.wrapping_add(8)) {
            if u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == 1 {
                self.charge(8, offset)?;
                return Ok(HeaderReader {
                    dec: self,
                    start: offset,
                    words: 1,
                    word0: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                    cursor: offset + 8,
                    depth,
                });
            }
        }
        let w = u32::from_le_bytes(
            self.need("object header", offset, 4)?
                .try_into()
                .unwrap_or_default(),
        );
        if w > MAX_BITMAP_WORDS {
            return Err(too_many_bitmap_words(w, offset));
        }
        let bitmap_len = w as usize * 4;
        let bitmap = self.need("bitmap", offset + 4, bitmap_len)?;
        self.charge(4 + bitmap_len, offset)?;
        // Fields 1-32, the usual case, are tested against this copy of the first word.
        let word0 = match bitmap.get(..4) {
            Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            None => 0,
        };
        Ok(HeaderReader {
            dec: self,
            start: offset,
            words: w,
            word0,
            cursor: offset + 4 + bitmap_len,
            depth,
        })
    }

    /// A string/bytes value at `(len, off)`.
    #[inline]
    fn value(&self, len: u32, off: u32, at: usize) -> Result<CFPtr<'a>, DecodeError> {
        let off = self.range("string/bytes value", off, len as u64, at)?;
        let len = len as usize;
        if len >= self.threshold {
            if let Some(pkt) = self.pkt {
                if let Some(b) = pkt.pinned_slice(off, len) {
                    return Ok(CFPtr::ZeroCopy(b));
                }
            }
        }
        Ok(CFPtr::Copy(&self.buf[off..off + len]))
    }
}

// The errors of the decoder's checks are built out of line: on the accepted path each check
// is a compare and a branch, with no error operands computed ahead of it. They take values,
// not the decoder: its address does not escape, so its state (budget, furthest byte) can
// stay in registers.
//
// They are `extern "C"`, which Rust calls as functions that cannot unwind (a panic inside
// one aborts; the only one possible is an allocation failure, which the default handler
// aborts on anyway). A call that may unwind while an object being decoded is alive needs a
// landing pad that drops the object through its address, so the object could not live in
// registers and every nested object's fields were written to memory. The
// `improper_ctypes_definitions` lint is allowed: they are called from Rust only, never
// through a C declaration.

/// The rest of [`Decoder::check_no_trailing_bytes`] when the objects end at `end`, not at
/// `len`: `Ok` when some object had an unknown field (`unknown`), else the error.
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn trailing_bytes(end: usize, len: usize, unknown: bool) -> Result<(), DecodeError> {
    if !unknown && end < len {
        Err(DecodeError::new(
            DecodeErrorKind::TrailingBytes { consumed: end, len },
            end,
        ))
    } else {
        Ok(())
    }
}

#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn budget_exceeded(object_len: usize, at: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::BudgetExceeded { object_len }, at)
}

#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
pub(super) extern "C" fn truncated(
    object_len: usize,
    what: &'static str,
    at: usize,
    n: usize,
) -> DecodeError {
    DecodeError::new(
        DecodeErrorKind::Truncated {
            what,
            need: n,
            available: object_len.saturating_sub(at),
        },
        at,
    )
}

#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
pub(super) extern "C" fn out_of_bounds(
    object_len: usize,
    what: &'static str,
    off: u32,
    len: u64,
    at: usize,
) -> DecodeError {
    DecodeError::new(
        DecodeErrorKind::OutOfBounds {
            what,
            offset: off as u64,
            len,
            object_len,
        },
        at,
    )
}

#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
pub(super) extern "C" fn too_deep(offset: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::TooDeep { max: MAX_DEPTH }, offset)
}

#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
pub(super) extern "C" fn too_many_bitmap_words(words: u32, offset: usize) -> DecodeError {
    DecodeError::new(
        DecodeErrorKind::TooManyBitmapWords {
            words,
            max: MAX_BITMAP_WORDS,
        },
        offset,
    )
}

/// Reads one object's header: presence bits, then slots in increasing field number.
/// Generated code calls [`has`](Self::has) for each known field in order and reads its slot.
pub struct HeaderReader<'d, 'a> {
    dec: &'d Decoder<'a>,
    start: usize,
    words: u32,
    /// Bitmap word 0 (0 when `words` is 0).
    word0: u32,
    cursor: usize,
    depth: u32,
}

impl Drop for HeaderReader<'_, '_> {
    /// The slots read end the header as far as the decoder knows (for
    /// [`Decoder::consumed`]).
    #[inline(always)]
    fn drop(&mut self) {
        self.dec.note_end(self.cursor);
    }
}

impl<'d, 'a> HeaderReader<'d, 'a> {
    /// Whether field number `n` is present.
    #[inline]
    pub fn has(&self, n: u32) -> bool {
        let i = (n - 1) / 32;
        if i == 0 {
            return self.word0 & (1 << ((n - 1) % 32)) != 0;
        }
        if i >= self.words {
            return false;
        }
        let at = self.start + 4 + i as usize * 4;
        // One bounds check for the word (opening the header checked the bitmap is there).
        let mut word = [0u8; 4];
        word.copy_from_slice(&self.dec.buf[at..at + 4]);
        u32::from_le_bytes(word) & (1 << ((n - 1) % 32)) != 0
    }

    /// Offset of this object's header from the object base.
    pub fn offset(&self) -> usize {
        self.start
    }

    #[inline]
    fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        let s = self.dec.need(what, self.cursor, n)?;
        self.dec.charge(n, self.cursor)?;
        self.cursor += n;
        Ok(s)
    }

    #[inline]
    fn pair(&mut self, what: &'static str) -> Result<(u32, u32, usize), DecodeError> {
        let at = self.cursor;
        let s = self.take(what, 8)?;
        Ok((
            u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
            u32::from_le_bytes([s[4], s[5], s[6], s[7]]),
            at,
        ))
    }

    /// Reads the next slot as a scalar.
    #[inline]
    pub fn scalar<T: Scalar>(&mut self) -> Result<T, DecodeError> {
        let at = self.cursor;
        let s = self.take("scalar slot", T::SIZE)?;
        T::read_le(s)
            .ok_or_else(|| DecodeError::new(DecodeErrorKind::InvalidBool { value: s[0] }, at))
    }

    /// Reads the next slot as a string/bytes value.
    #[inline(always)]
    pub fn leaf(&mut self) -> Result<CFPtr<'a>, DecodeError> {
        let (len, off, at) = self.pair("string/bytes slot")?;
        self.dec.value(len, off, at)
    }

    /// Reads the next slot as a nested message and opens its header.
    #[inline(always)]
    pub fn nested(&mut self) -> Result<HeaderReader<'d, 'a>, DecodeError> {
        let (zero, off, at) = self.pair("nested message slot")?;
        if zero != 0 {
            return Err(DecodeError::new(
                DecodeErrorKind::NestedSlotLength { value: zero },
                at,
            ));
        }
        self.dec.header(off as usize, self.depth + 1)
    }

    /// Reads the next slot as a repeated string/bytes field: its elements, in order.
    #[inline]
    pub fn leaf_list(&mut self) -> Result<LeafIter<'d, 'a>, DecodeError> {
        let (count, off, at) = self.pair("repeated string/bytes slot")?;
        let pos = self
            .dec
            .range("string/bytes pair array", off, count as u64 * 8, at)?;
        self.dec.charge(count as usize * 8, at)?;
        // In bounds: `range` checked it.
        let pairs = self
            .dec
            .buf
            .get(pos..pos + count as usize * 8)
            .unwrap_or(&[]);
        Ok(LeafIter {
            dec: self.dec,
            pairs: pairs.chunks_exact(8),
            pos,
        })
    }

    /// Reads the next slot as a repeated message field: its elements' headers, in order.
    #[inline]
    pub fn message_list(&mut self) -> Result<MessageIter<'d, 'a>, DecodeError> {
        let (count, off, at) = self.pair("repeated message slot")?;
        let pos = self
            .dec
            .range("message pair array", off, count as u64 * 8, at)?;
        self.dec.charge(count as usize * 8, at)?;
        Ok(MessageIter {
            dec: self.dec,
            pos,
            left: count as usize,
            depth: self.depth + 1,
        })
    }

    /// Reads the next slot as a packed repeated scalar: its element bytes (validated) and count.
    pub fn packed<T: Scalar>(&mut self) -> Result<(&'a [u8], usize), DecodeError> {
        let (count, off, at) = self.pair("packed repeated slot")?;
        let off = self
            .dec
            .range("packed array", off, count as u64 * T::SIZE as u64, at)?;
        let bytes = &self.dec.buf[off..off + count as usize * T::SIZE];
        if T::SIZE == 1 {
            // Only bool has one-byte elements; validate them now so later reads cannot fail.
            if let Some(i) = bytes.iter().position(|&b| T::read_le(&[b]).is_none()) {
                return Err(DecodeError::new(
                    DecodeErrorKind::InvalidBool { value: bytes[i] },
                    off + i,
                ));
            }
        }
        Ok((bytes, count as usize))
    }

    /// Checks the presence bits against the fields this reader knows (`known`, a bitmap):
    /// an unknown field numbered at most `max_known` is an error (its slot would sit between
    /// known slots); higher ones are tolerated. Call it before reading slots.
    #[inline]
    pub fn check_fields(&self, known: &[u32], max_known: u32) -> Result<(), DecodeError> {
        self.check_fields_with(max_known, |i| known.get(i).copied().unwrap_or(0))
    }

    /// [`check_fields`](Self::check_fields) for a reader whose known fields are sparse:
    /// `known[k]` is the known-field mask of bitmap word `words[k]` (ascending).
    pub fn check_fields_sparse(
        &self,
        known: &[u32],
        words: &[u32],
        max_known: u32,
    ) -> Result<(), DecodeError> {
        self.check_fields_with(max_known, |i| match words.binary_search(&(i as u32)) {
            Ok(k) => known[k],
            Err(_) => 0,
        })
    }

    #[inline]
    fn check_fields_with(
        &self,
        max_known: u32,
        known: impl Fn(usize) -> u32,
    ) -> Result<(), DecodeError> {
        if self.words <= 1 && (1..=32).contains(&max_known) {
            // One bitmap word (or none) and every known field in it: with the reader's
            // constants this is a test of the word against one mask.
            let mask = if max_known == 32 {
                u32::MAX
            } else {
                (1u32 << max_known) - 1
            };
            if self.word0 & !mask != 0 {
                // Fields above every known one: tolerated, their data may lie anywhere.
                self.dec.unknown.set(true);
            }
            let unknown = self.word0 & mask & !known(0);
            if unknown != 0 {
                return Err(DecodeError::new(
                    DecodeErrorKind::UnknownField {
                        field: 1 + unknown.trailing_zeros(),
                    },
                    self.start + 4,
                ));
            }
            return Ok(());
        }
        let limit_words = (max_known as usize).div_ceil(32).min(self.words as usize);
        if self.words as usize > limit_words {
            // Words wholly above the known fields: any bit set is a tolerated unknown field.
            if any_word_set(self.dec.buf, self.start, self.words, limit_words) {
                self.dec.unknown.set(true);
            }
        }
        for i in 0..limit_words {
            let at = self.start + 4 + i * 4;
            let w = if i == 0 {
                self.word0
            } else {
                // One bounds check for the word (the header's words were checked to be in
                // the buffer when it was opened).
                let mut word = [0u8; 4];
                word.copy_from_slice(&self.dec.buf[at..at + 4]);
                u32::from_le_bytes(word)
            };
            let mut unknown = w & !known(i);
            // Bits above max_known in its word are tolerated.
            let first = i as u32 * 32 + 1;
            if first + 31 > max_known {
                let keep = max_known + 1 - first; // bits [0, keep) are at or below max_known
                let mask = if keep >= 32 {
                    u32::MAX
                } else {
                    (1u32 << keep) - 1
                };
                if w & !mask != 0 {
                    self.dec.unknown.set(true);
                }
                unknown &= mask;
            }
            if unknown != 0 {
                let field = first + unknown.trailing_zeros();
                return Err(DecodeError::new(
                    DecodeErrorKind::UnknownField { field },
                    at,
                ));
            }
        }
        Ok(())
    }
}

/// Whether a bitmap word from `from` on (of the `words` of the header at `start`) is non-zero.
/// Out of line and given values, not the reader: the reader's address does not escape, so
/// its cursor stays in a register. `extern "C"` (cannot unwind) like the error builders
/// above, and it cannot panic: opening the header checked its words are in `buf` (a word
/// outside it would count as zero).
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn any_word_set(buf: &[u8], start: usize, words: u32, from: usize) -> bool {
    (from..words as usize).any(|i| {
        let at = start + 4 + i * 4;
        buf.get(at..at + 4).is_some_and(|w| w != [0, 0, 0, 0])
    })
}

/// Elements of a repeated string/bytes field.
pub struct LeafIter<'d, 'a> {
    dec: &'d Decoder<'a>,
    /// The pairs not yet read (validated when the slot was read).
    pairs: std::slice::ChunksExact<'a, u8>,
    /// Offset of the next pair (for errors).
    pos: usize,
}

impl<'a> LeafIter<'_, 'a> {
    /// Number of elements not yet read.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether all elements were read.
    pub fn is_empty(&self) -> bool {
        self.pairs.len() == 0
    }

    /// The next element, `None` after the last.
    #[inline]
    pub fn next_leaf(&mut self) -> Option<Result<CFPtr<'a>, DecodeError>> {
        let s = self.pairs.next()?;
        let at = self.pos;
        let len = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let off = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
        self.pos += 8;
        Some(self.dec.value(len, off, at))
    }
}

/// Elements of a repeated message field.
pub struct MessageIter<'d, 'a> {
    dec: &'d Decoder<'a>,
    pos: usize,
    left: usize,
    depth: u32,
}

impl<'d, 'a> MessageIter<'d, 'a> {
    /// Number of elements not yet read.
    pub fn len(&self) -> usize {
        self.left
    }

    /// Whether all elements were read.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The next element's header, `None` after the last.
    pub fn next_header(&mut self) -> Option<Result<HeaderReader<'d, 'a>, DecodeError>> {
        if self.left == 0 {
            return None;
        }
        let at = self.pos;
        let s = &self.dec.buf[at..at + 8];
        let zero = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let off = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
        self.pos += 8;
        self.left -= 1;
        if zero != 0 {
            return Some(Err(DecodeError::new(
                DecodeErrorKind::NestedSlotLength { value: zero },
                at,
            )));
        }
        Some(self.dec.header(off as usize, self.depth))
    }
}
