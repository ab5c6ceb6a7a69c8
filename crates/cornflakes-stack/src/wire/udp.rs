//! UDP headers.

use std::net::Ipv4Addr;

use super::{be16, set_be16, ChecksumCaps, Error, Result};
use crate::checksum;

mod field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    #[inline]
    pub const fn payload(length: usize) -> Range<usize> {
        CHECKSUM.end..length
    }
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;
/// Byte offset of the length field (for header templates).
pub const LENGTH_OFFSET: usize = field::LENGTH.start;
/// Byte offset of the checksum field.
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

/// A view of a UDP datagram.
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

    /// A view of a buffer holding the header and the `len` bytes it claims.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Fails when the buffer is shorter than the header or the length field, or the length
    /// field is below the header length.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref().len();
        if b < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = self.len() as usize;
        if l < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if l > b {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header + payload).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the length field says there is no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() as usize == HEADER_LEN
    }

    /// Checksum field (0 = none).
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Whether the checksum verifies against the pseudo-header; a zero checksum means "none"
    /// (RFC 768) and verifies. Requires a checked view.
    #[inline]
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if cfg!(fuzzing) || self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let b = &self.buffer.as_ref()[..len as usize];
        let s = checksum::combine(
            checksum::pseudo_header(src.octets(), dst.octets(), len),
            checksum::data(b),
        );
        checksum::fold(s) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (up to the length field), living as long as the buffer. Requires a
    /// checked view.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::payload(self.len() as usize)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Computes the checksum over the header and the payload present in the buffer (up to the
    /// length field) and stores it; a computed 0 is sent as 0xffff (RFC 768).
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = be16(self.buffer.as_ref(), field::LENGTH);
        let s = checksum::combine(
            checksum::pseudo_header(src.octets(), dst.octets(), len),
            checksum::data(&self.buffer.as_ref()[..len as usize]),
        );
        self.set_checksum(udp_field(s));
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The checksum field for a full sum (pseudo-header + datagram with checksum 0): the
/// complement, with 0 sent as 0xffff.
#[inline]
pub fn udp_field(sum: u32) -> u16 {
    match checksum::finish(sum) {
        0 => 0xffff,
        c => c,
    }
}

/// The meaning of a UDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length.
    pub payload_len: usize,
}

impl Repr {
    /// Validates and reads a header; verifies the checksum when `caps.udp_rx`.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(
        p: &Packet<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        caps: &ChecksumCaps,
    ) -> Result<Repr> {
        p.check_len()?;
        if caps.udp_rx && !p.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(Repr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.len() as usize - HEADER_LEN,
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

    /// Writes the header, lets `emit_payload` fill the payload, then writes the checksum as
    /// `caps` says (software, 0, or the pseudo-header sum for the device).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        emit_payload: impl FnOnce(&mut [u8]),
        caps: &ChecksumCaps,
    ) {
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(self.buffer_len() as u16);
        emit_payload(&mut p.payload_mut()[..self.payload_len]);
        if caps.udp_tx {
            p.fill_checksum(src, dst);
        } else if caps.udp_tx_zero {
            p.set_checksum(0);
        } else {
            let ph = checksum::pseudo_header(src.octets(), dst.octets(), self.buffer_len() as u16);
            p.set_checksum(checksum::fold(ph));
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 2);

    // From smoltcp's udp.rs test vector.
    static PACKET_BYTES: [u8; 12] = [
        0xbf, 0x00, 0x00, 0x35, 0x00, 0x0c, 0x12, 0x4d, 0xaa, 0x00, 0x00, 0xff,
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.src_port(), 48896);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 12);
        assert_eq!(p.checksum(), 0x124d);
        assert_eq!(p.payload(), &[0xaa, 0x00, 0x00, 0xff]);
        assert!(p.verify_checksum(SRC, DST));
    }

    #[test]
    fn construct() {
        let r = Repr {
            src_port: 48896,
            dst_port: 53,
            payload_len: 4,
        };
        let mut out = [0u8; 12];
        r.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            SRC,
            DST,
            |p| p.copy_from_slice(&[0xaa, 0x00, 0x00, 0xff]),
            &ChecksumCaps::SOFTWARE,
        );
        assert_eq!(out, PACKET_BYTES);
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut b = PACKET_BYTES;
        b[6] = 0;
        b[7] = 0;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(Repr::parse(&p, SRC, DST, &ChecksumCaps::SOFTWARE).is_ok());
        b[6] = 0x12;
        b[7] = 0x4e;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Repr::parse(&p, SRC, DST, &ChecksumCaps::SOFTWARE),
            Err(Error::Checksum)
        );
    }

    #[test]
    fn impossible_len() {
        let mut b = PACKET_BYTES;
        b[4..6].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        b[4..6].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
    }
}
