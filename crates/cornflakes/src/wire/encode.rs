//! Writing the header and copy areas (see `docs/wire-format.md`).

use super::scalar::Scalar;
use crate::cfptr::CFPtr;
use crate::list::PackedList;
use crate::mem::PinnedRef;
use crate::obj::Sizes;
use crate::wire::PAIR;
/// Which zero-copy leaves a send copies instead (defined with the datapath interface, which
/// plans it).
pub use cornflakes_datapath::Demote;

/// Writes an object's HEADER AREA and COPY AREA into one buffer, keeping the three cursors of
/// the wire format: headers (given by the caller per object), the copy area and the zero-copy
/// area (only offsets are assigned there; the bytes are sent by scatter-gather).
pub struct Encoder<'b> {
    buf: &'b mut [u8],
    copy: usize,
    zc: usize,
    demote: Demote,
    /// The plan as given (`demote` advances as leaves are written).
    plan: Demote,
    /// End of the HEADER AREA (where the copy area starts).
    header_end: usize,
}

impl<'b> Encoder<'b> {
    /// An encoder for an object of `sizes` (plus `demoted_bytes` moved by `demote`) writing into
    /// `buf`, which must hold at least `sizes.header + sizes.copy + demoted_bytes` bytes.
    #[inline]
    pub fn new(buf: &'b mut [u8], sizes: &Sizes, demote: Demote, demoted_bytes: usize) -> Self {
        let copy = sizes.header;
        let zc = sizes.header + sizes.copy + demoted_bytes;
        Encoder {
            buf,
            copy,
            zc,
            demote,
            plan: demote,
            header_end: sizes.header,
        }
    }

    /// The demotion plan the encoder was given (for a second walk over the same leaves).
    #[inline]
    pub fn plan(&self) -> Demote {
        self.plan
    }

    /// Writes a scalar at `pos`.
    #[inline]
    pub fn put<T: Scalar>(&mut self, pos: usize, v: T) {
        v.write_le(&mut self.buf[pos..pos + T::SIZE]);
    }

    /// Writes a `u32` at `pos`.
    #[inline]
    pub fn put_u32(&mut self, pos: usize, v: u32) {
        self.buf[pos..pos + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes a slot `(a, b)` of two `u32`s at `pos`.
    #[inline]
    pub fn put_pair(&mut self, pos: usize, a: usize, b: usize) {
        write_pair(&mut self.buf[pos..pos + PAIR], a, b);
    }

    /// The `N` bytes at `pos`, bounds-checked once: generated code writes a message's whole
    /// own header through it when its length is known at compile time (every field present),
    /// each word then at a constant offset, without a check of its own.
    #[inline(always)]
    pub fn header_bytes<const N: usize>(&mut self, pos: usize) -> &mut [u8; N] {
        let s = &mut self.buf[pos..pos + N];
        match s.try_into() {
            Ok(h) => h,
            // A slice of `N` bytes is an `[u8; N]`.
            Err(_) => unreachable!("a slice of {N} bytes"),
        }
    }

    /// Writes `W` and the smallest bitmap for `words` at `pos`; returns the first slot position.
    #[inline]
    pub fn bitmap(&mut self, pos: usize, words: &[u32]) -> usize {
        let w = used_words(words);
        self.put_u32(pos, w as u32);
        let mut p = pos + 4;
        for &word in &words[..w] {
            self.put_u32(p, word);
            p += 4;
        }
        p
    }

    /// Like [`bitmap`](Self::bitmap) for a message whose field numbers are sparse: `words[k]`
    /// is the bitmap word index held in `stored[k]` (ascending); words in between are zero.
    #[inline]
    pub fn sparse_bitmap(&mut self, pos: usize, stored: &[u32], words: &[u32]) -> usize {
        let w = sparse_used_words(stored, words);
        self.put_u32(pos, w as u32);
        let mut p = pos + 4;
        let mut k = 0;
        for i in 0..w as u32 {
            let v = if k < words.len() && words[k] == i {
                k += 1;
                stored[k - 1]
            } else {
                0
            };
            self.put_u32(p, v);
            p += 4;
        }
        p
    }

    /// Writes `W` and the smallest bitmap of `p` at `pos`; returns the first slot position.
    /// The number of words is known at compile time, so for the common one-word bitmap this is
    /// one bounds check and two stores.
    #[inline(always)]
    pub fn presence<const W: usize>(&mut self, pos: usize, p: &Presence<W>) -> usize {
        if W == 1 {
            // The common case, without the loops: `W` is 0 or 1, then the word when 1.
            let word = p.words[0];
            if word == 0 {
                self.put_u32(pos, 0);
                return pos + 4;
            }
            let out = &mut self.buf[pos..pos + 8];
            out[..4].copy_from_slice(&1u32.to_le_bytes());
            out[4..].copy_from_slice(&word.to_le_bytes());
            return pos + 8;
        }
        let w = used_words(&p.words);
        let end = pos + 4 + 4 * w;
        let out = &mut self.buf[pos..end];
        out[..4].copy_from_slice(&(w as u32).to_le_bytes());
        for (o, word) in out[4..].chunks_exact_mut(4).zip(&p.words[..w]) {
            o.copy_from_slice(&word.to_le_bytes());
        }
        end
    }

    /// Writes a string/bytes slot at `slot` and, for copied leaves, the bytes into the copy area.
    #[inline]
    pub fn leaf(&mut self, slot: usize, p: &CFPtr<'_>) {
        self.leaf_with(slot, p, &mut |_| {})
    }

    /// [`leaf`](Self::leaf), handing a zero-copy leaf the plan keeps to `sink` as its slot is
    /// written (a send's one walk: the slot and the descriptor together).
    #[inline]
    pub fn leaf_with<S: FnMut(PinnedRef<'_>)>(&mut self, slot: usize, p: &CFPtr<'_>, sink: &mut S) {
        let (len, off) = self.leaf_value(p, sink);
        self.put_pair(slot, len, off);
    }

    /// The slot of a string/bytes value, `(length, offset)`, without writing it: a copied
    /// value's bytes are written into the copy area, a zero-copy value the plan keeps is handed
    /// to `sink` ([`leaf_with`](Self::leaf_with) writes the slot too; generated code writing a
    /// whole header at once calls this and writes the pair with the header).
    #[inline]
    pub fn leaf_value<S: FnMut(PinnedRef<'_>)>(
        &mut self,
        p: &CFPtr<'_>,
        sink: &mut S,
    ) -> (usize, usize) {
        let len = p.len();
        let off = match *p {
            CFPtr::ZeroCopy(b) if self.demote.keep_zero_copy(len) => {
                let o = self.zc;
                self.zc += len;
                sink(b);
                o
            }
            _ => {
                let o = self.copy;
                copy_leaf(&mut self.buf[o..o + len], p.as_bytes());
                self.copy = o + len;
                o
            }
        };
        (len, off)
    }

    /// Writes the pair array of a repeated string/bytes field at `at` — one `(len, offset)` pair
    /// per value, each copied value's bytes into the copy area, each zero-copy value the plan
    /// keeps to `sink` as its pair is written — and returns the end of the array. The array is
    /// bounds-checked once, not per pair (what [`leaf_with`](Self::leaf_with) per value would
    /// do).
    #[inline]
    pub fn leaf_pairs_with<'p, 'v: 'p, I, S>(&mut self, at: usize, values: I, sink: &mut S) -> usize
    where
        I: ExactSizeIterator<Item = &'p CFPtr<'v>>,
        S: FnMut(PinnedRef<'_>),
    {
        let end = at + PAIR * values.len();
        let (head, rest) = self.buf.split_at_mut(self.header_end);
        let pairs = &mut head[at..end];
        for (out, p) in pairs.chunks_exact_mut(PAIR).zip(values) {
            let len = p.len();
            let off = match *p {
                CFPtr::ZeroCopy(b) if self.demote.keep_zero_copy(len) => {
                    let o = self.zc;
                    self.zc += len;
                    sink(b);
                    o
                }
                _ => {
                    let o = self.copy;
                    let c = o - self.header_end;
                    copy_leaf(&mut rest[c..c + len], p.as_bytes());
                    self.copy = o + len;
                    o
                }
            };
            write_pair(out, len, off);
        }
        end
    }

    /// Writes a packed repeated scalar's slot at `slot` and its elements into the copy area.
    #[inline]
    pub fn packed<T: Scalar>(&mut self, slot: usize, list: &PackedList<'_, T>) {
        let (n, o) = self.packed_value(list);
        self.put_pair(slot, n, o);
    }

    /// The slot of a packed repeated scalar, `(count, offset)`, without writing it; the
    /// elements are written into the copy area ([`packed`](Self::packed) writes the slot too).
    #[inline]
    pub fn packed_value<T: Scalar>(&mut self, list: &PackedList<'_, T>) -> (usize, usize) {
        let o = self.copy;
        let n = list.len();
        list.write_le(&mut self.buf[o..o + n * T::SIZE]);
        self.copy = o + n * T::SIZE;
        (n, o)
    }

    /// Next free offset in the copy area.
    pub fn copy_cursor(&self) -> usize {
        self.copy
    }

    /// Next offset in the zero-copy area.
    pub fn zero_copy_cursor(&self) -> usize {
        self.zc
    }
}

/// Writes a slot `(a, b)` of two little-endian `u32`s into `out[..8]`.
#[inline(always)]
pub fn write_pair(out: &mut [u8], a: usize, b: usize) {
    out[..4].copy_from_slice(&(a as u32).to_le_bytes());
    out[4..PAIR].copy_from_slice(&(b as u32).to_le_bytes());
}

/// Copies a copied leaf's bytes into the copy area (`dst` and `src` of one length). A value of
/// at most 64 bytes (≈ 81 % of the bytes fields of Google's distribution, `benches`) is moved
/// with two fixed-size copies that overlap in the middle, in line, instead of a call to
/// `memcpy`, whose call, and the registers saved around it in the encode loop, cost more than
/// the copy (docs/performance.md, "Choices the instruction counts rest on"). Longer values go
/// to `memcpy`.
#[inline(always)]
fn copy_leaf(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 64 || dst.len() != n {
        dst.copy_from_slice(src);
    } else if n >= 32 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..].copy_from_slice(&src[n - 4..]);
    } else if n > 0 {
        // 1 to 3 bytes: the first, the middle and the last (some the same byte).
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// Number of bitmap words up to the highest non-zero one (the `W` an encoder writes).
#[inline]
pub fn used_words(words: &[u32]) -> usize {
    let mut w = words.len();
    while w > 0 && words[w - 1] == 0 {
        w -= 1;
    }
    w
}

/// The `W` of a sparse bitmap (see [`Encoder::sparse_bitmap`]): one past the highest wire word
/// holding a set bit.
#[inline]
pub fn sparse_used_words(stored: &[u32], words: &[u32]) -> usize {
    match stored.iter().rposition(|&w| w != 0) {
        Some(k) => words[k] as usize + 1,
        None => 0,
    }
}

/// Whether field number `n` (1-based) is set in `words`.
#[inline]
pub fn bit_is_set(words: &[u32], n: u32) -> bool {
    let i = ((n - 1) / 32) as usize;
    i < words.len() && words[i] & (1 << ((n - 1) % 32)) != 0
}

/// Sets or clears field number `n` in `words` (which must be long enough).
#[inline]
pub fn set_bit(words: &mut [u32], n: u32, on: bool) {
    let i = ((n - 1) / 32) as usize;
    let m = 1 << ((n - 1) % 32);
    if on {
        words[i] |= m;
    } else {
        words[i] &= !m;
    }
}

/// An object's presence bitmap together with the bytes of its present fields' slots, kept up to
/// date as fields are set and cleared, so the header length costs no walk (generated code holds
/// one per message; `W` is the number of bitmap words for its highest field number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Presence<const W: usize> {
    /// The bitmap words: field `n` is bit `(n-1) % 32` of word `(n-1) / 32`.
    pub words: [u32; W],
    slot_bytes: u32,
}

impl<const W: usize> Default for Presence<W> {
    fn default() -> Self {
        Presence {
            words: [0; W],
            slot_bytes: 0,
        }
    }
}

impl<const W: usize> Presence<W> {
    /// Whether field `n` is present.
    #[inline(always)]
    pub fn has(&self, n: u32) -> bool {
        self.words[((n - 1) / 32) as usize] & (1 << ((n - 1) % 32)) != 0
    }

    /// Marks field `n`, whose slot is `slot` bytes, present.
    #[inline(always)]
    pub fn set(&mut self, n: u32, slot: u32) {
        let w = &mut self.words[((n - 1) / 32) as usize];
        let m = 1 << ((n - 1) % 32);
        if *w & m == 0 {
            *w |= m;
            self.slot_bytes += slot;
        }
    }

    /// Marks field `n`, whose slot is `slot` bytes, absent.
    #[inline(always)]
    pub fn clear(&mut self, n: u32, slot: u32) {
        let w = &mut self.words[((n - 1) / 32) as usize];
        let m = 1 << ((n - 1) % 32);
        if *w & m != 0 {
            *w &= !m;
            self.slot_bytes -= slot;
        }
    }

    /// Bytes of the present fields' slots.
    #[inline(always)]
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes as usize
    }

    /// Length of the object's own header: `W`, the smallest bitmap, and the present slots.
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        4 + 4 * used_words(&self.words) + self.slot_bytes as usize
    }
}

#[cfg(test)]
mod tests {
    use super::copy_leaf;

    #[test]
    fn copy_leaf_copies_every_length_exactly() {
        // Every length through the inline cases (0–3, 4–7, 8–15, 16–31, 32–64) and past them
        // (`memcpy`), at several offsets: the destination holds the source, and nothing
        // around it is touched.
        let src: Vec<u8> = (0..200u32).map(|i| (i * 7 + 1) as u8).collect();
        for n in 0..=130 {
            for at in [0, 1, 5] {
                let mut buf = vec![0xeeu8; n + 16];
                copy_leaf(&mut buf[at..at + n], &src[3..3 + n]);
                assert_eq!(&buf[at..at + n], &src[3..3 + n], "length {n} at {at}");
                assert!(buf[..at].iter().all(|&b| b == 0xee), "length {n} at {at}");
                assert!(
                    buf[at + n..].iter().all(|&b| b == 0xee),
                    "length {n} at {at}"
                );
            }
        }
    }
}
