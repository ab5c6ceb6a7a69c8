//! The hash a checker compares payloads by ([`PayloadHasher`], [`payload_hash`]): cheap
//! enough for the emulated device's thread, which hashes a reply where its descriptors lie
//! instead of copying it first, and for a load generator's checker, which remembers each
//! value a key may hold by its hash.

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline(always)]
fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K).rotate_left(29)
}

#[inline(always)]
fn word(c: &[u8]) -> u64 {
    u64::from_le_bytes(c.try_into().expect("8 bytes"))
}

/// The hash of a whole payload ([`PayloadHasher`] over one piece).
pub fn payload_hash(bytes: &[u8]) -> u64 {
    let mut h = PayloadHasher::new(bytes.len());
    h.update(bytes);
    h.finish()
}

/// A 64-bit hash of a reply payload, four lanes of 8-byte words wide (cheap enough for the
/// device thread). Each step of a lane is a bijection of its state for a given word, and the
/// lanes are folded in by bijections too, so two payloads of the same length that differ in a
/// single word (any corrupted byte or run of up to 8 bytes) always hash differently; other
/// differences collide with probability about 2^-64.
///
/// The payload's 32-byte blocks go to the lanes word by word (word `i` of a block to lane
/// `i`); the words after the last whole block, then the last partial word zero-padded, go to
/// a fifth chain that starts at the length; the lanes are folded into it in order.
///
/// The payload may come in pieces (e.g. the data segments of a send WQE, read where they
/// lie): the hash is the same whatever the split, 8-byte words carried across piece
/// boundaries. The payload's length must be known first (it seeds the hash and says which
/// words are in whole blocks).
pub struct PayloadHasher {
    lanes: [u64; 4],
    /// The chain of the words after the last whole block.
    tail: u64,
    /// Words of the payload that are in whole 32-byte blocks.
    block_words: usize,
    /// Words hashed so far.
    words: usize,
    /// Bytes of the next word seen so far (`pending_len` of them).
    pending: [u8; 8],
    pending_len: usize,
    len: usize,
    seen: usize,
}

impl PayloadHasher {
    /// A hash of a payload of `len` bytes.
    pub fn new(len: usize) -> PayloadHasher {
        PayloadHasher {
            lanes: [1, 2, 3, 4],
            tail: len as u64,
            block_words: len / 32 * 4,
            words: 0,
            pending: [0; 8],
            pending_len: 0,
            len,
            seen: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, w: u64) {
        if self.words < self.block_words {
            let l = self.words & 3;
            self.lanes[l] = step(self.lanes[l], w);
        } else {
            self.tail = step(self.tail, w);
        }
        self.words += 1;
    }

    /// Hashes the next piece of the payload.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.seen += bytes.len();
        if self.pending_len > 0 {
            let take = (8 - self.pending_len).min(bytes.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&bytes[..take]);
            self.pending_len += take;
            bytes = &bytes[take..];
            if self.pending_len < 8 {
                return;
            }
            self.pending_len = 0;
            self.push(u64::from_le_bytes(self.pending));
        }
        // Up to a block boundary word by word, then whole blocks four lanes at a time.
        while self.words & 3 != 0 && bytes.len() >= 8 {
            self.push(word(&bytes[..8]));
            bytes = &bytes[8..];
        }
        if self.words & 3 == 0 {
            let blocks = (bytes.len() / 32).min(self.block_words.saturating_sub(self.words) / 4);
            let (whole, rest) = bytes.split_at(blocks * 32);
            // The lanes in locals, so they stay in registers through the loop.
            let [mut l0, mut l1, mut l2, mut l3] = self.lanes;
            for b in whole.chunks_exact(32) {
                l0 = step(l0, word(&b[..8]));
                l1 = step(l1, word(&b[8..16]));
                l2 = step(l2, word(&b[16..24]));
                l3 = step(l3, word(&b[24..32]));
            }
            self.lanes = [l0, l1, l2, l3];
            self.words += blocks * 4;
            bytes = rest;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.push(word(w));
        }
        let rest = words.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// The hash. The pieces must have added up to the length given to [`new`](Self::new).
    pub fn finish(self) -> u64 {
        debug_assert_eq!(
            self.seen, self.len,
            "pieces and the payload's length differ"
        );
        let mut last = [0u8; 8];
        last[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
        let mut h = step(self.tail, u64::from_le_bytes(last));
        for lane in self.lanes {
            h = step(h, lane);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::{payload_hash, PayloadHasher};

    /// The hash of before this module (one contiguous pass), kept to pin the definition.
    fn reference(bytes: &[u8]) -> u64 {
        use super::{step, word};
        let mut lanes = [1u64, 2, 3, 4];
        let mut blocks = bytes.chunks_exact(32);
        for b in &mut blocks {
            for (i, lane) in lanes.iter_mut().enumerate() {
                *lane = step(*lane, word(&b[i * 8..i * 8 + 8]));
            }
        }
        let mut words = blocks.remainder().chunks_exact(8);
        let mut h = bytes.len() as u64;
        for w in &mut words {
            h = step(h, word(w));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        h = step(h, u64::from_le_bytes(last));
        for lane in lanes {
            h = step(h, lane);
        }
        h
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n as u32).map(|i| (i * 31 + 7) as u8).collect()
    }

    #[test]
    fn any_changed_byte_changes_the_hash() {
        let base = payload(4157);
        let h = payload_hash(&base);
        for at in [0, 1, 7, 8, 31, 32, 33, 100, 4095, 4128, 4150, 4156] {
            for flip in [1u8, 0x80, 0xff] {
                let mut v = base.clone();
                v[at] ^= flip;
                assert_ne!(payload_hash(&v), h, "byte {at} ^ {flip:#x}");
            }
        }
        // A different length (even with zero bytes appended) is a different hash.
        let mut longer = base.clone();
        longer.push(0);
        assert_ne!(payload_hash(&longer), h);
        assert_eq!(payload_hash(&base), h, "deterministic");
        assert_ne!(payload_hash(&[]), payload_hash(&[0]));
    }

    #[test]
    fn the_hash_is_the_one_it_was() {
        for n in [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 4096, 4157] {
            let v = payload(n);
            assert_eq!(payload_hash(&v), reference(&v), "{n} bytes");
        }
    }

    /// Hashing the descriptors in place must see the same hash as hashing the gathered copy,
    /// whatever the segments' sizes and where they cut words and blocks.
    #[test]
    fn segment_splitting_never_changes_the_hash() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |bound: usize| {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            (rng.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) as usize % bound
        };
        for n in [0, 1, 5, 8, 13, 32, 40, 64, 95, 100, 257, 2048, 4157] {
            let v = payload(n);
            let whole = payload_hash(&v);
            // Every single cut, then random cuts into up to 30 pieces (empty ones included).
            let mut splits: Vec<Vec<usize>> = (0..=n).map(|c| vec![c]).collect();
            for _ in 0..200 {
                let mut cuts: Vec<usize> = (0..next(30)).map(|_| next(n + 1)).collect();
                cuts.sort_unstable();
                splits.push(cuts);
            }
            for cuts in splits {
                let mut h = PayloadHasher::new(n);
                let mut from = 0;
                for &c in cuts.iter().chain(std::iter::once(&n)) {
                    h.update(&v[from..c]);
                    from = c;
                }
                assert_eq!(h.finish(), whole, "{n} bytes cut at {cuts:?}");
            }
        }
    }
}
