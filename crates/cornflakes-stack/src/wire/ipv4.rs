//! IPv4 headers (no options, no fragments: the stack drops both and counts them).

use std::net::Ipv4Addr;

use super::{be16, set_be16, ChecksumCaps, Error, Result};
use crate::checksum;

mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::DST.end;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// Byte offset of the total-length field (for header templates).
pub const LENGTH_OFFSET: usize = field::LENGTH.start;
/// Byte offset of the identification field.
pub const IDENT_OFFSET: usize = field::IDENT.start;
/// Byte offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A view of an IPv4 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks (for emission into a sized buffer).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a buffer holding the whole header and the `total_len` bytes it claims.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Fails when the buffer is shorter than the header, the IHL is below 5, or the total
    /// length is below the header length or above the buffer.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len() as usize;
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        let total = self.total_len() as usize;
        if hl > len || total > len {
            return Err(Error::Truncated);
        }
        if total < hl {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// IP version (4 for IPv4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP and ECN byte.
    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    /// Total length (header + payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// Whether this is a fragment (more-fragments flag or non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x3fff != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol number.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Whether the header checksum verifies (requires a checked view).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        let hl = self.header_len() as usize;
        checksum::fold(checksum::data(&self.buffer.as_ref()[..hl])) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (after the header, up to the total length), living as long as the buffer.
    /// Requires a checked view.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let hl = self.header_len() as usize;
        let total = self.total_len() as usize;
        &self.buffer.as_ref()[hl..total]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length (bytes, a multiple of 4).
    #[inline]
    pub fn set_version_and_header_len(&mut self, header_len: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (header_len / 4);
    }

    /// Sets DSCP/ECN.
    #[inline]
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Sets flags and fragment offset to "don't fragment", offset 0.
    #[inline]
    pub fn set_dont_frag_only(&mut self) {
        set_be16(self.buffer.as_mut(), field::FLG_OFF, 0x4000);
    }

    /// Sets the raw flags/fragment-offset word.
    #[inline]
    pub fn set_flags_frag_offset(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol number.
    #[inline]
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Computes and stores the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len() as usize;
        let c = checksum::finish(checksum::data(&self.buffer.as_ref()[..hl]));
        self.set_checksum(c);
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len() as usize;
        &mut self.buffer.as_mut()[hl..]
    }
}

/// The meaning of an IPv4 header this stack accepts (no options, no fragment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// Payload length.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
}

impl Repr {
    /// Validates and reads a header: version 4, no options, not a fragment, checksum
    /// verified when `caps.ipv4_rx`.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>, caps: &ChecksumCaps) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 4 || p.header_len() as usize != HEADER_LEN || p.is_fragment() {
            return Err(Error::Malformed);
        }
        if caps.ipv4_rx && !p.verify_checksum() {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.total_len() as usize - HEADER_LEN,
            ttl: p.ttl(),
            ident: p.ident(),
        })
    }

    /// Header length.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload length.
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header (DF set, DSCP 0) and, when `caps.ipv4_tx`, its checksum.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>, caps: &ChecksumCaps) {
        p.set_version_and_header_len(HEADER_LEN as u8);
        p.set_dscp_ecn(0);
        p.set_total_len((HEADER_LEN + self.payload_len) as u16);
        p.set_ident(self.ident);
        p.set_dont_frag_only();
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        if caps.ipv4_tx {
            p.fill_checksum();
        } else {
            p.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, total length 0x73, checksum 0xb861 (a common example).
    static HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet() -> Vec<u8> {
        let mut v = HEADER.to_vec();
        v.resize(0x73, 0xab);
        v
    }

    #[test]
    fn parse_known_header() {
        let b = packet();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Repr::parse(&p, &ChecksumCaps::SOFTWARE).unwrap();
        assert_eq!(r.src, Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(r.dst, Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(r.protocol, PROTO_UDP);
        assert_eq!(r.payload_len, 0x73 - 20);
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn emit_matches_known_header() {
        let r = Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: PROTO_UDP,
            payload_len: 0x73 - 20,
            ttl: 64,
            ident: 0,
        };
        let mut out = [0u8; 20];
        r.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            &ChecksumCaps::SOFTWARE,
        );
        assert_eq!(out, HEADER);
    }

    #[test]
    fn rejects() {
        let b = packet();
        assert_eq!(Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Packet::new_checked(&b[..0x72]).unwrap_err(),
            Error::Truncated
        );
        let mut bad = b.clone();
        bad[11] ^= 1;
        let p = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(
            Repr::parse(&p, &ChecksumCaps::SOFTWARE),
            Err(Error::Checksum)
        );
        assert!(Repr::parse(&p, &ChecksumCaps::OFFLOAD).is_ok());
        let mut frag = b.clone();
        frag[6] = 0x20; // more fragments
        let mut p = Packet::new_unchecked(&mut frag[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&frag[..]).unwrap();
        assert!(p.is_fragment());
        assert_eq!(
            Repr::parse(&p, &ChecksumCaps::SOFTWARE),
            Err(Error::Malformed)
        );
        let mut ihl4 = b.clone();
        ihl4[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&ihl4[..]).unwrap_err(),
            Error::Malformed
        );
        let mut short_total = b;
        short_total[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(
            Packet::new_checked(&short_total[..]).unwrap_err(),
            Error::Malformed
        );
    }
}
