//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are kept as a `u32` of 16-bit big-endian words with carries folded at the end, so
//! partial sums over several buffers compose with [`combine`]. [`Accumulator`] sums bytes
//! split across arbitrary buffers (odd lengths included), as a scatter-gather packet is.

/// Sums `data` as big-endian 16-bit words (an odd last byte is padded with zero), without
/// folding. Add more sums with [`combine`] and finish with [`fold`].
pub fn data(data: &[u8]) -> u32 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let mut rest = chunks.remainder().chunks_exact(2);
    for c in &mut rest {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [b] = rest.remainder() {
        sum += (*b as u64) << 8;
    }
    fold64(sum)
}

fn fold64(mut sum: u64) -> u32 {
    while sum > 0xffff_ffff {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum as u32
}

/// Adds two partial sums.
#[inline]
pub fn combine(a: u32, b: u32) -> u32 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u32
}

/// Folds a partial sum to 16 bits (not complemented).
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum field value for a partial sum: the one's complement of the folded sum.
#[inline]
pub fn finish(sum: u32) -> u16 {
    !fold(sum)
}

/// The IPv4 pseudo-header sum for UDP: source, destination, protocol 17 and UDP length.
pub fn pseudo_header(src: [u8; 4], dst: [u8; 4], udp_len: u16) -> u32 {
    let mut s = 0u32;
    s = combine(s, u16::from_be_bytes([src[0], src[1]]) as u32);
    s = combine(s, u16::from_be_bytes([src[2], src[3]]) as u32);
    s = combine(s, u16::from_be_bytes([dst[0], dst[1]]) as u32);
    s = combine(s, u16::from_be_bytes([dst[2], dst[3]]) as u32);
    s = combine(s, 17);
    combine(s, udp_len as u32)
}

/// RFC 1624 eqn. 3: the new checksum field after a 16-bit word covered by `old_csum` changed
/// from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update(old_csum: u16, old: u16, new: u16) -> u16 {
    let s = combine(combine((!old_csum) as u32, (!old) as u32), new as u32);
    !fold(s)
}

/// Sums bytes that arrive in pieces of any length, as if they were one buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Accumulator {
    sum: u32,
    /// The previous piece ended on an odd byte; this is it (high half of the next word).
    pending: Option<u8>,
}

impl Accumulator {
    /// An empty sum.
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Adds a partial sum computed elsewhere, which must start at an even offset of the
    /// stream (call only when no odd byte is pending, i.e. after even-length pieces).
    pub fn add_sum(&mut self, sum: u32) {
        debug_assert!(self.pending.is_none());
        self.sum = combine(self.sum, sum);
    }

    /// Adds the next piece of the stream.
    pub fn add(&mut self, mut bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(hi) = self.pending.take() {
            self.sum = combine(self.sum, u16::from_be_bytes([hi, bytes[0]]) as u32);
            bytes = &bytes[1..];
        }
        let even = bytes.len() & !1;
        self.sum = combine(self.sum, data(&bytes[..even]));
        if even < bytes.len() {
            self.pending = Some(bytes[even]);
        }
    }

    /// The partial sum of everything added (an odd last byte padded with zero).
    pub fn sum(&self) -> u32 {
        match self.pending {
            Some(hi) => combine(self.sum, (hi as u32) << 8),
            None => self.sum,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn naive(b: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in b.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], 0])
            };
            s += w as u32;
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(data(&b)), 0xddf2);
    }

    #[test]
    fn matches_naive_and_pieces() {
        let bytes: Vec<u8> = (0..1001u32).map(|i| (i * 7919 % 251) as u8).collect();
        for len in [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 1001] {
            assert_eq!(
                finish(data(&bytes[..len])),
                naive(&bytes[..len]),
                "len {len}"
            );
        }
        for cuts in [[1usize, 2, 3], [3, 10, 11], [0, 0, 999], [5, 600, 601]] {
            let mut a = Accumulator::new();
            a.add(&bytes[..cuts[0]]);
            a.add(&bytes[cuts[0]..cuts[1]]);
            a.add(&bytes[cuts[1]..cuts[2]]);
            a.add(&bytes[cuts[2]..]);
            assert_eq!(finish(a.sum()), naive(&bytes), "cuts {cuts:?}");
        }
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut hdr = [
            0x45u8, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0,
            0xc7,
        ];
        let c = finish(data(&hdr));
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(fold(data(&hdr)), 0xffff);
        let mut csum = c;
        for new_len in [20u16, 21, 1500, 9000, 0xffff, 0, 0x73] {
            let old = u16::from_be_bytes([hdr[2], hdr[3]]);
            csum = update(csum, old, new_len);
            hdr[2..4].copy_from_slice(&new_len.to_be_bytes());
            hdr[10..12].copy_from_slice(&[0, 0]);
            assert_eq!(csum, finish(data(&hdr)), "len {new_len}");
            hdr[10..12].copy_from_slice(&csum.to_be_bytes());
        }
    }
}
