//! Validated views: an object read in place, building nothing.
//!
//! A generated `MView<'a>` (`M::view(buf)`) wraps an [`ObjectView`]: one object header inside
//! the received bytes. Opening it checks what the wire format requires of a header (`W`
//! bounded, the bitmap and the slots of the present known fields inside the bytes, the
//! unknown-field rule, bool slots 0 or 1); each getter then reads its slot in O(1), the slot's
//! offset being popcounts of the bitmap under per-slot-size masks ([`ViewLayout`]). A getter
//! that follows an offset (string/bytes, nested message, list) checks it when it is called and
//! returns a [`DecodeError`] value when it is malformed; scalar getters return the value.
//!
//! The policy (what is checked when, against `deserialize_*`) is on [`ObjectView`].

use std::marker::PhantomData;

use super::decode::{
    out_of_bounds, too_deep, too_many_bitmap_words, truncated, MAX_BITMAP_WORDS, MAX_DEPTH,
};
use super::error::{DecodeError, DecodeErrorKind};
use super::scalar::Scalar;

/// What a generated view knows about its message: per stored bitmap word, the known fields
/// and their slot sizes (masks of the word's bits).
#[derive(Debug)]
pub struct ViewLayout {
    /// Wire bitmap word of each entry, ascending (`[0, 1, …]` unless field numbers are sparse).
    pub words: &'static [u32],
    /// Known fields of each entry's word.
    pub known: &'static [u32],
    /// Known fields with 1-byte slots (bool).
    pub one: &'static [u32],
    /// Known fields with 4-byte slots.
    pub four: &'static [u32],
    /// Known fields with 8-byte slots (8-byte scalars, strings, bytes, messages, lists).
    pub eight: &'static [u32],
    /// Highest known field number (0 when none).
    pub max_known: u32,
}

impl ViewLayout {
    /// Bytes of the slots of the known fields set in `w`, the bitmap word of entry `k`.
    #[inline(always)]
    fn slot_bytes(&self, k: usize, w: u32) -> usize {
        let m = |v: &[u32]| w & v.get(k).copied().unwrap_or(0);
        m(self.one).count_ones() as usize
            + 4 * m(self.four).count_ones() as usize
            + 8 * m(self.eight).count_ones() as usize
    }
}

/// One object header inside a buffer, checked: what a generated `MView<'a>` wraps. Opening
/// it checks what the wire format requires of a header (`W` bounded, the bitmap and the slots
/// of the present known fields inside the bytes, the unknown-field rule, bool slots 0 or 1,
/// the depth); each slot is then read in O(1), its offset a few popcounts of the bitmap under
/// the per-slot-size masks of a [`ViewLayout`]. Readers that follow an offset check it when
/// called and return a [`DecodeError`].
///
/// # Policy, against `deserialize_*`
///
/// A view checks **what is read, when it is read**:
/// - a field that is never read is never checked beyond its slot (a string's UTF-8 is checked
///   by each `&str` getter call, a nested object's header when it is opened);
/// - there is no trailing-bytes check (bytes after the object are not looked at);
/// - there is no budget: the work is what the reader asks for, and two fields (or a field read
///   twice) may point at the same bytes;
/// - nesting is bounded as decode bounds it: each nested view carries its depth and opening one
///   deeper than [`MAX_DEPTH`] is [`DecodeErrorKind::TooDeep`], so a recursive reader cannot be
///   driven deeper than decode allows;
/// - the slots of the present known fields are checked once, at open, as one range (a
///   truncated slot area is [`DecodeErrorKind::Truncated`] `"slots"` at the first slot's
///   offset, where decode reports the first slot that does not fit).
///
/// Whenever `deserialize_bytes` accepts an object, a view of it reads the same values; a view
/// also reads objects decode refuses for a policy reason (trailing bytes, budget, a malformed
/// field that is not read).
#[derive(Clone, Copy, Debug)]
pub struct ObjectView<'a> {
    buf: &'a [u8],
    /// Offset of the first slot (the header's offset is `slots - 4 - 4 * words`); the slots of
    /// the present known fields were checked to be in `buf` at open.
    slots: usize,
    words: u32,
    word0: u32,
    depth: u32,
}

/// Reads a little-endian `u32` at `at`; `None` past the end.
#[inline(always)]
fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    // One compare when `at` is known to be small (a wire offset, a popcount sum).
    let b: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// Reads the `(u32, u32)` pair at `at`; `None` past the end.
#[inline(always)]
fn pair_at(buf: &[u8], at: usize) -> Option<(u32, u32)> {
    let b: [u8; 8] = buf.get(at..at.checked_add(8)?)?.try_into().ok()?;
    let b = u64::from_le_bytes(b);
    Some((b as u32, (b >> 32) as u32))
}

impl<'a> ObjectView<'a> {
    /// Opens the object header at `offset` of `buf`, `depth` levels below the top-level object
    /// (0 for it), for a reader knowing `layout`.
    #[inline(always)]
    pub fn open(
        buf: &'a [u8],
        offset: usize,
        depth: u32,
        layout: &ViewLayout,
    ) -> Result<ObjectView<'a>, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(too_deep(offset));
        }
        let one_word = layout.max_known <= 32 && layout.words.first().is_some_and(|&w| w == 0);
        // `W` and bitmap word 0. One bitmap word and every known field in it, the usual case:
        // both read with one bounds check, the fields checked against one mask. Any other
        // header out of line, returning the two words in registers (the view itself is built
        // here, so every view of one object shares `buf` as far as the compiler knows).
        let (words, word0, slots) = match pair_at(buf, offset) {
            Some((1, word0)) if one_word => {
                let mask = if layout.max_known == 32 {
                    u32::MAX
                } else {
                    (1u32 << layout.max_known) - 1
                };
                let unknown = word0 & mask & !layout.known.first().copied().unwrap_or(0);
                if unknown != 0 {
                    return Err(unknown_field(1 + unknown.trailing_zeros(), offset + 4));
                }
                (1, word0, offset + 8)
            }
            _ => match header_words(buf, offset, layout) {
                Ok(w) => (
                    w as u32,
                    (w >> 32) as u32,
                    offset + 4 + 4 * (w as u32) as usize,
                ),
                Err(e) => return Err(e),
            },
        };
        let need = if one_word {
            layout.slot_bytes(0, word0)
        } else {
            slot_bytes_all(buf, offset, words, layout)
        };
        // No overflow: `offset` is a wire offset (a `u32`), `W` at most `MAX_BITMAP_WORDS`,
        // `need` popcounts; one add and one compare.
        if slots.checked_add(need).is_none_or(|end| end > buf.len()) {
            return Err(slots_truncated(buf.len(), slots, need));
        }
        let v = ObjectView {
            buf,
            slots,
            words,
            word0,
            depth,
        };
        if layout.one.iter().any(|&m| m != 0) {
            v.check_bools(layout)?;
        }
        Ok(v)
    }

    /// Checks every present bool slot holds 0 or 1.
    #[inline(never)]
    fn check_bools(&self, layout: &ViewLayout) -> Result<(), DecodeError> {
        for (k, &wi) in layout.words.iter().enumerate() {
            let mut bools = self.word(wi) & layout.one.get(k).copied().unwrap_or(0);
            while bools != 0 {
                let bit = bools.trailing_zeros();
                bools &= bools - 1;
                let at = self.slot(layout, k, (1u32 << bit) - 1);
                let b = self.buf.get(self.slots + at).copied().unwrap_or(0);
                if b > 1 {
                    return Err(DecodeError::new(
                        DecodeErrorKind::InvalidBool { value: b },
                        self.slots + at,
                    ));
                }
            }
        }
        Ok(())
    }

    /// The object bytes (the whole received object, not only this header).
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// Offset of this header from the object base.
    pub fn offset(&self) -> usize {
        self.slots - 4 - 4 * self.words as usize
    }

    /// Levels below the top-level object (0 for it).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Bitmap word 0 (fields 1–32; 0 when the header has no words).
    #[inline(always)]
    pub fn word0(&self) -> u32 {
        self.word0
    }

    /// Bitmap word `i` (0 when the header has fewer words).
    #[inline(always)]
    pub fn word(&self, i: u32) -> u32 {
        if i == 0 {
            return self.word0;
        }
        if i >= self.words {
            return 0;
        }
        u32_at(self.buf, self.offset() + 4 + i as usize * 4).unwrap_or(0)
    }

    /// Whether field number `n` is present (`false` for 0, which no field has).
    #[inline(always)]
    pub fn has(&self, n: u32) -> bool {
        match n.checked_sub(1) {
            Some(n) => self.word(n / 32) & (1 << (n % 32)) != 0,
            None => false,
        }
    }

    /// Where the slot of a known field starts, from the first slot (the argument of the slot
    /// readers below): the field is in entry `k` of `layout`, and `below` masks the bits of its
    /// word below its own.
    #[inline(always)]
    pub fn slot(&self, layout: &ViewLayout, k: usize, below: u32) -> usize {
        let mut at = 0;
        for j in 0..k {
            at += layout.slot_bytes(j, self.word(layout.words.get(j).copied().unwrap_or(0)));
        }
        let wk = layout.words.get(k).copied().unwrap_or(0);
        at + layout.slot_bytes(k, self.word(wk) & below)
    }

    /// The scalar in the slot at `at` (from [`slot`](Self::slot); checked at open: in
    /// bounds, bools 0 or 1).
    #[inline(always)]
    pub fn scalar<T: Scalar>(&self, at: usize) -> T {
        let at = self.slots.wrapping_add(at);
        match at.checked_add(T::SIZE) {
            Some(end) => self
                .buf
                .get(at..end)
                .and_then(T::read_le)
                .unwrap_or_default(),
            None => T::default(),
        }
    }

    /// The `(u32, u32)` slot at `at` (from [`slot`](Self::slot), checked at open), and its
    /// offset in the object.
    #[inline(always)]
    fn pair(&self, at: usize) -> ((u32, u32), usize) {
        let at = self.slots.wrapping_add(at);
        (pair_at(self.buf, at).unwrap_or((0, 0)), at)
    }

    /// The bytes `(len, off)` of the string/bytes slot at `at` (from [`slot`](Self::slot)), checked to lie in the object.
    #[inline(always)]
    pub fn bytes_at(&self, at: usize) -> Result<&'a [u8], DecodeError> {
        let ((len, off), at) = self.pair(at);
        value(self.buf, len, off, at)
    }

    /// The string in the string slot at `at`: in the object and UTF-8 (checked at each call).
    #[inline(always)]
    pub fn str_at(&self, at: usize) -> Result<&'a str, DecodeError> {
        let ((len, off), at) = self.pair(at);
        utf8(value(self.buf, len, off, at)?, off as usize)
    }

    /// Opens the nested object of the message slot at `at` (`(0, offset)`) as a `V` view, one
    /// level deeper.
    #[inline(always)]
    pub fn nested_at<V: MessageView<'a>>(&self, at: usize) -> Result<V, DecodeError> {
        let ((zero, off), at) = self.pair(at);
        if zero != 0 {
            return Err(nested_slot_length(zero, at));
        }
        V::open_at(self.buf, off as usize, self.depth + 1)
    }

    /// The packed repeated scalar of the slot at `at` (`(count, offset)`), checked to lie in
    /// the object; packed bools are checked to be 0 or 1 here.
    #[inline]
    pub fn packed_at<T: Scalar>(&self, at: usize) -> Result<PackedView<'a, T>, DecodeError> {
        let ((count, off), at) = self.pair(at);
        let bytes = range(
            self.buf,
            "packed array",
            off,
            count as u64 * T::SIZE as u64,
            at,
        )?;
        if T::SIZE == 1 {
            if let Some(i) = bytes.iter().position(|&b| T::read_le(&[b]).is_none()) {
                return Err(DecodeError::new(
                    DecodeErrorKind::InvalidBool { value: bytes[i] },
                    off as usize + i,
                ));
            }
        }
        Ok(PackedView {
            bytes,
            _t: PhantomData,
        })
    }

    /// The repeated string/bytes field of the slot at `at` (`(count, offset)` of a pair
    /// array, checked to lie in the object). `field` (`"Message.field"`) is added to the
    /// errors of its elements.
    #[inline]
    pub fn leaf_list_at(
        &self,
        at: usize,
        field: &'static str,
    ) -> Result<BytesListView<'a>, DecodeError> {
        let ((count, off), at) = self.pair(at);
        let pairs = range(
            self.buf,
            "string/bytes pair array",
            off,
            count as u64 * 8,
            at,
        )?;
        Ok(BytesListView {
            buf: self.buf,
            pairs,
            pos: off as usize,
            field,
        })
    }

    /// The repeated message field of the slot at `at` (`(count, offset)` of a pair array,
    /// checked to lie in the object); its elements are `V` views one level deeper. `field`
    /// (`"Message.field"`) is added to the errors of its elements.
    #[inline]
    pub fn message_list_at<V: MessageView<'a>>(
        &self,
        at: usize,
        field: &'static str,
    ) -> Result<MessageListView<'a, V>, DecodeError> {
        let ((count, off), at) = self.pair(at);
        let pairs = range(self.buf, "message pair array", off, count as u64 * 8, at)?;
        Ok(MessageListView {
            buf: self.buf,
            pairs,
            pos: off as usize,
            depth: self.depth + 1,
            field,
            _v: PhantomData,
        })
    }
}

/// `W` (low half) and bitmap word 0 (high half) of the header at `offset`, checked: `W`
/// bounded, the bitmap inside `buf`, the unknown-field rule. [`ObjectView::open`] for any
/// header but a one-word one of a reader whose fields are all in word 0.
#[inline(never)]
fn header_words(buf: &[u8], offset: usize, layout: &ViewLayout) -> Result<u64, DecodeError> {
    let w = match u32_at(buf, offset) {
        Some(w) => w,
        None => return Err(truncated(buf.len(), "object header", offset, 4)),
    };
    if w > MAX_BITMAP_WORDS {
        return Err(too_many_bitmap_words(w, offset));
    }
    let bitmap_len = w as usize * 4;
    if buf.len() < offset + 4 || buf.len() - (offset + 4) < bitmap_len {
        return Err(truncated(buf.len(), "bitmap", offset + 4, bitmap_len));
    }
    let word = |i: usize| u32_at(buf, offset + 4 + i * 4).unwrap_or(0);
    // The unknown-field rule, word by word up to the highest known field; the words above it
    // hold only tolerated fields.
    let limit_words = (layout.max_known as usize).div_ceil(32).min(w as usize);
    for i in 0..limit_words {
        let known = match layout.words.binary_search(&(i as u32)) {
            Ok(k) => layout.known.get(k).copied().unwrap_or(0),
            Err(_) => 0,
        };
        let first = i as u32 * 32 + 1;
        let keep = layout.max_known + 1 - first; // bits [0, keep) are at or below max_known
        let mask = if keep >= 32 {
            u32::MAX
        } else {
            (1u32 << keep) - 1
        };
        let unknown = word(i) & mask & !known;
        if unknown != 0 {
            return Err(unknown_field(
                first + unknown.trailing_zeros(),
                offset + 4 + i * 4,
            ));
        }
    }
    let word0 = if w > 0 { word(0) } else { 0 };
    Ok(w as u64 | (word0 as u64) << 32)
}

/// Bytes of the slots of the known fields present in the `words`-word header at `offset`
/// (its bitmap checked to be in `buf`).
#[inline(never)]
fn slot_bytes_all(buf: &[u8], offset: usize, words: u32, layout: &ViewLayout) -> usize {
    let mut n = 0;
    for (k, &wi) in layout.words.iter().enumerate() {
        if wi < words {
            let w = u32_at(buf, offset + 4 + wi as usize * 4).unwrap_or(0);
            n += layout.slot_bytes(k, w);
        }
    }
    n
}

/// A generated view type: opened on the header at an offset, at a depth.
pub trait MessageView<'a>: Sized + Copy {
    /// Opens the header at `offset` of `buf`, `depth` levels below the top-level object.
    fn open_at(buf: &'a [u8], offset: usize, depth: u32) -> Result<Self, DecodeError>;
}

/// `buf[off..off + len]`, or the out-of-bounds error of the slot at `at`.
#[inline(always)]
fn range<'a>(
    buf: &'a [u8],
    what: &'static str,
    off: u32,
    len: u64,
    at: usize,
) -> Result<&'a [u8], DecodeError> {
    let end = off as u64 + len;
    if end > buf.len() as u64 {
        return Err(out_of_bounds(buf.len(), what, off, len, at));
    }
    Ok(&buf[off as usize..end as usize])
}

#[inline(always)]
fn value(buf: &[u8], len: u32, off: u32, at: usize) -> Result<&[u8], DecodeError> {
    range(buf, "string/bytes value", off, len as u64, at)
}

/// A string element: its bytes (as [`value`]) checked to be UTF-8, the pair read once.
#[inline(always)]
fn str_value(buf: &[u8], len: u32, off: u32, at: usize) -> Result<&str, DecodeError> {
    value(buf, len, off, at).and_then(|b| utf8(b, off as usize))
}

#[inline(always)]
fn utf8(b: &[u8], off: usize) -> Result<&str, DecodeError> {
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s),
        Err(e) => Err(invalid_utf8(off, e.valid_up_to())),
    }
}

// Errors are built out of line, as decode's are (and, where decode has one, by decode's own
// builder in wire/decode.rs): the accepted path is a compare and a branch per check.

#[cold]
#[inline(never)]
fn unknown_field(field: u32, at: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::UnknownField { field }, at)
}

#[cold]
#[inline(never)]
fn slots_truncated(object_len: usize, at: usize, need: usize) -> DecodeError {
    truncated(object_len, "slots", at, need)
}

#[cold]
#[inline(never)]
fn nested_slot_length(value: u32, at: usize) -> DecodeError {
    DecodeError::new(DecodeErrorKind::NestedSlotLength { value }, at)
}

#[cold]
#[inline(never)]
fn invalid_utf8(off: usize, valid_up_to: usize) -> DecodeError {
    DecodeError::new(
        DecodeErrorKind::InvalidUtf8 { valid_up_to },
        off + valid_up_to,
    )
}

/// A packed repeated scalar field, read in place (checked when the field was read).
#[derive(Clone, Copy)]
pub struct PackedView<'a, T> {
    bytes: &'a [u8],
    _t: PhantomData<T>,
}

impl<T: Scalar> Default for PackedView<'_, T> {
    /// No elements (an absent field).
    fn default() -> Self {
        PackedView {
            bytes: &[],
            _t: PhantomData,
        }
    }
}

impl<'a, T: Scalar> PackedView<'a, T> {
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len() / T::SIZE
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Element `i`, `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        let at = i.checked_mul(T::SIZE)?;
        self.bytes
            .get(at..at.checked_add(T::SIZE)?)
            .and_then(T::read_le)
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + 'a {
        self.bytes
            .chunks_exact(T::SIZE)
            .map(|c| T::read_le(c).unwrap_or_default())
    }

    /// The elements' little-endian bytes.
    pub fn as_le_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<T: Scalar> std::fmt::Debug for PackedView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A repeated bytes field, read in place: its pair array was checked when the field was read;
/// each element's offset and length are checked when the element is read.
#[derive(Clone, Copy, Debug)]
pub struct BytesListView<'a> {
    buf: &'a [u8],
    pairs: &'a [u8],
    /// Offset of the pair array (for errors).
    pos: usize,
    field: &'static str,
}

impl<'a> BytesListView<'a> {
    /// No elements (an absent field).
    pub fn empty(field: &'static str) -> Self {
        BytesListView {
            buf: &[],
            pairs: &[],
            pos: 0,
            field,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.pairs.len() / 8
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Element `i`, `None` past the end; an error when its bytes lie outside the object.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Result<&'a [u8], DecodeError>> {
        let at = i.checked_mul(8)?;
        let (len, off) = pair_at(self.pairs, at)?;
        Some(value(self.buf, len, off, self.pos + at).map_err(|e| e.within(self.field)))
    }

    /// Calls `f` with each element's offset in the object and its bytes, in order; the first
    /// element that lies outside the object stops it with its error. One loop over the pair
    /// array, for code that takes every element (a reply that echoes the list).
    #[inline(always)]
    pub fn for_each_element(&self, mut f: impl FnMut(usize, &'a [u8])) -> Result<(), DecodeError> {
        for (i, p) in self.pairs.chunks_exact(8).enumerate() {
            let len = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
            let off = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
            match value(self.buf, len, off, self.pos + i * 8) {
                Ok(v) => f(off as usize, v),
                Err(e) => return Err(e.within(self.field)),
            }
        }
        Ok(())
    }

    /// The object's bytes the elements' offsets count from.
    #[inline]
    pub fn object_bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Result<&'a [u8], DecodeError>> + 'a {
        let (buf, pos, field) = (self.buf, self.pos, self.field);
        self.pairs.chunks_exact(8).enumerate().map(move |(i, p)| {
            let (len, off) = pair_at(p, 0).unwrap_or((0, 0));
            value(buf, len, off, pos + i * 8).map_err(|e| e.within(field))
        })
    }
}

/// A repeated string field, read in place: as [`BytesListView`], each element also checked
/// to be UTF-8 when it is read.
#[derive(Clone, Copy, Debug)]
pub struct StrListView<'a>(pub BytesListView<'a>);

impl<'a> StrListView<'a> {
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Element `i`, `None` past the end; an error when its bytes lie outside the object or
    /// are not UTF-8.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Result<&'a str, DecodeError>> {
        let at = i.checked_mul(8)?;
        let (len, off) = pair_at(self.0.pairs, at)?;
        Some(str_value(self.0.buf, len, off, self.0.pos + at).map_err(|e| e.within(self.0.field)))
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Result<&'a str, DecodeError>> + 'a {
        let (buf, pos, field) = (self.0.buf, self.0.pos, self.0.field);
        self.0.pairs.chunks_exact(8).enumerate().map(move |(i, p)| {
            let (len, off) = pair_at(p, 0).unwrap_or((0, 0));
            str_value(buf, len, off, pos + i * 8).map_err(|e| e.within(field))
        })
    }
}

/// A repeated message field, read in place: its pair array was checked when the field was
/// read; each element's header is opened (and checked) when the element is read.
#[derive(Clone, Copy, Debug)]
pub struct MessageListView<'a, V> {
    buf: &'a [u8],
    pairs: &'a [u8],
    /// Offset of the pair array (for errors).
    pos: usize,
    depth: u32,
    field: &'static str,
    _v: PhantomData<V>,
}

impl<'a, V: MessageView<'a>> MessageListView<'a, V> {
    /// No elements (an absent field).
    pub fn empty(field: &'static str) -> Self {
        MessageListView {
            buf: &[],
            pairs: &[],
            pos: 0,
            depth: 0,
            field,
            _v: PhantomData,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.pairs.len() / 8
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Element `i`, `None` past the end; an error when its slot's first word is not 0 or its
    /// header is malformed.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Result<V, DecodeError>> {
        let at = i.checked_mul(8)?;
        let (zero, off) = pair_at(self.pairs, at)?;
        Some(
            if zero != 0 {
                Err(nested_slot_length(zero, self.pos + at))
            } else {
                V::open_at(self.buf, off as usize, self.depth)
            }
            .map_err(|e| e.within(self.field)),
        )
    }

    /// The elements, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Result<V, DecodeError>> + 'a
    where
        V: 'a,
    {
        let (buf, pos, depth, field) = (self.buf, self.pos, self.depth, self.field);
        self.pairs.chunks_exact(8).enumerate().map(move |(i, p)| {
            let (zero, off) = pair_at(p, 0).unwrap_or((0, 0));
            if zero != 0 {
                Err(nested_slot_length(zero, pos + i * 8))
            } else {
                V::open_at(buf, off as usize, depth)
            }
            .map_err(|e| e.within(field))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader knowing field 1 (bool), 2 (u32), 40 (bytes) and 70 (u64): sparse words 0, 1, 2.
    const LAYOUT: ViewLayout = ViewLayout {
        words: &[0, 1, 2],
        known: &[0b11, 1 << 7, 1 << 5],
        one: &[0b1, 0, 0],
        four: &[0b10, 0, 0],
        eight: &[0, 1 << 7, 1 << 5],
        max_known: 70,
    };

    fn object(fields: &[u32], bool_byte: u8) -> Vec<u8> {
        let mut words = [0u32; 3];
        for &f in fields {
            words[((f - 1) / 32) as usize] |= 1 << ((f - 1) % 32);
        }
        let mut b = Vec::new();
        b.extend(3u32.to_le_bytes());
        for w in words {
            b.extend(w.to_le_bytes());
        }
        let slots = b.len();
        let mut data: Vec<u8> = Vec::new();
        for &f in fields {
            match f {
                1 => b.push(bool_byte),
                2 => b.extend(7u32.to_le_bytes()),
                40 => b.extend([3, 0, 0, 0, 0, 0, 0, 0]), // offset patched below
                70 => b.extend(u64::MAX.to_le_bytes()),
                _ => unreachable!("not in the layout"),
            }
        }
        if fields.contains(&40) {
            let at = slots
                + fields
                    .iter()
                    .take_while(|&&f| f < 40)
                    .map(|&f| if f == 1 { 1 } else { 4 })
                    .sum::<usize>();
            let off = (b.len() as u32).to_le_bytes();
            b[at + 4..at + 8].copy_from_slice(&off);
            data.extend(b"abc");
        }
        b.extend(data);
        b
    }

    #[test]
    fn slots_of_sparse_words_are_found_by_popcount() {
        let b = object(&[1, 2, 40, 70], 1);
        let v = ObjectView::open(&b, 0, 0, &LAYOUT).unwrap();
        assert!(v.has(1) && v.has(2) && v.has(40) && v.has(70) && !v.has(3) && !v.has(0));
        assert!(v.scalar::<bool>(v.slot(&LAYOUT, 0, 0)));
        assert_eq!(v.scalar::<u32>(v.slot(&LAYOUT, 0, 0b1)), 7);
        assert_eq!(
            v.bytes_at(v.slot(&LAYOUT, 1, (1 << 7) - 1)).unwrap(),
            b"abc"
        );
        assert_eq!(v.scalar::<u64>(v.slot(&LAYOUT, 2, (1 << 5) - 1)), u64::MAX);
        // Without field 1 and 40, the later slots move down.
        let b = object(&[2, 70], 0);
        let v = ObjectView::open(&b, 0, 0, &LAYOUT).unwrap();
        assert_eq!(v.slot(&LAYOUT, 0, 0b1), 0);
        assert_eq!(v.scalar::<u32>(v.slot(&LAYOUT, 0, 0b1)), 7);
        assert_eq!(v.slot(&LAYOUT, 2, (1 << 5) - 1), 4);
        assert_eq!(v.scalar::<u64>(v.slot(&LAYOUT, 2, (1 << 5) - 1)), u64::MAX);
        assert_eq!(v.offset(), 0);
    }

    #[test]
    fn opening_checks_bools_slots_and_unknown_fields() {
        let e = ObjectView::open(&object(&[1, 2], 2), 0, 0, &LAYOUT).unwrap_err();
        assert_eq!(e.kind(), &DecodeErrorKind::InvalidBool { value: 2 });
        assert_eq!(e.offset(), 16);
        let b = object(&[2, 70], 0);
        let e = ObjectView::open(&b[..b.len() - 1], 0, 0, &LAYOUT).unwrap_err();
        assert!(
            matches!(
                e.kind(),
                DecodeErrorKind::Truncated {
                    what: "slots",
                    need: 12,
                    ..
                }
            ),
            "{e}"
        );
        // Field 3 is unknown and below 70.
        let mut b = object(&[2], 0);
        b[4] |= 0b100;
        let e = ObjectView::open(&b, 0, 0, &LAYOUT).unwrap_err();
        assert_eq!(e.kind(), &DecodeErrorKind::UnknownField { field: 3 });
        assert!(matches!(
            ObjectView::open(&b, 0, MAX_DEPTH + 1, &LAYOUT)
                .unwrap_err()
                .kind(),
            DecodeErrorKind::TooDeep { .. }
        ));
    }
}
