//! Ethernet II frames.

use super::{be16, set_be16, Error, MacAddr, Result};

/// EtherType values this stack knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x0806.
    Arp,
    /// Anything else.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            o => EtherType::Unknown(o),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Unknown(o) => o,
        }
    }
}

mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Length of an Ethernet II header (no VLAN tag).
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// A view without checks (for emission into a sized buffer).
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// A view of a buffer that holds at least the header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Fails when the buffer is shorter than the header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        MacAddr(m)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        MacAddr(m)
    }

    /// EtherType.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        be16(self.buffer.as_ref(), field::ETHERTYPE).into()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// The bytes after the header, living as long as the buffer.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }

    /// The bytes after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The meaning of an Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src: MacAddr,
    /// Destination address.
    pub dst: MacAddr,
    /// EtherType.
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads a checked frame's header.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Result<Repr> {
        f.check_len()?;
        Ok(Repr {
            src: f.src_addr(),
            dst: f.dst_addr(),
            ethertype: f.ethertype(),
        })
    }

    /// Header length.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, f: &mut Frame<T>) {
        f.set_src_addr(self.src);
        f.set_dst_addr(self.dst);
        f.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static FRAME: [u8; 18] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x08, 0x00, 0xaa,
        0xbb, 0xcc, 0xdd,
    ];

    #[test]
    fn deconstruct_and_construct() {
        let f = Frame::new_checked(&FRAME[..]).unwrap();
        let r = Repr::parse(&f).unwrap();
        assert_eq!(r.dst, MacAddr([1, 2, 3, 4, 5, 6]));
        assert_eq!(r.src, MacAddr([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]));
        assert_eq!(r.ethertype, EtherType::Ipv4);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
        let mut out = [0u8; 18];
        let mut g = Frame::new_unchecked(&mut out[..]);
        r.emit(&mut g);
        g.payload_mut().copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(out, FRAME);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
    }
}
