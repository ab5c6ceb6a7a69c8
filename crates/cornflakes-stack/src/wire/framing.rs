//! The Cornflakes framing header, after the UDP header of every packet (see
//! `docs/wire-format.md`, "Packet framing").
//!
//! ```text
//! 0  u8  version (2)
//! 1  u8  flags (0; reserved)
//! 2  u16 message type
//! 4  u32 message id
//! 8  u16 segment index      (0-based)
//! 10 u16 segment count      (>= 1)
//! 12 u32 total length       (bytes of the whole message, all segments)
//! 16 u32 segment offset     (where this segment's bytes go in the message)
//! 20 u64 incarnation        (the sender's; 0: anonymous)
//! 28 ...  segment bytes
//! ```
//! All integers are little-endian, like the object format. Version 2 appended the
//! incarnation to version 1's 20 bytes; a version-1 frame is refused like any other version.

use cornflakes_datapath::Msg;

use super::{Error, Result};

mod field {
    use std::ops::Range;
    pub const VERSION: usize = 0;
    pub const FLAGS: usize = 1;
    pub const MSG_TYPE: Range<usize> = 2..4;
    pub const MSG_ID: Range<usize> = 4..8;
    pub const SEG_INDEX: Range<usize> = 8..10;
    pub const SEG_COUNT: Range<usize> = 10..12;
    pub const TOTAL_LEN: Range<usize> = 12..16;
    pub const SEG_OFFSET: Range<usize> = 16..20;
    pub const INCARNATION: Range<usize> = 20..28;
    pub const PAYLOAD: usize = INCARNATION.end;
}

/// Length of the framing header.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// The only version this stack speaks (version 1 had no incarnation and a 20-byte header).
pub const VERSION: u8 = 2;

/// A view of a framed payload.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn le16(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    u16::from_le_bytes([b[r.start], b[r.start + 1]])
}

fn le32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    u32::from_le_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}

fn le64(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[r]);
    u64::from_le_bytes(w)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a buffer holding at least the header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Version byte.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u16 {
        le16(self.buffer.as_ref(), field::MSG_TYPE)
    }
    /// Message id.
    #[inline]
    pub fn msg_id(&self) -> u32 {
        le32(self.buffer.as_ref(), field::MSG_ID)
    }
    /// Segment index.
    #[inline]
    pub fn seg_index(&self) -> u16 {
        le16(self.buffer.as_ref(), field::SEG_INDEX)
    }
    /// Segment count.
    #[inline]
    pub fn seg_count(&self) -> u16 {
        le16(self.buffer.as_ref(), field::SEG_COUNT)
    }
    /// Total message length.
    #[inline]
    pub fn total_len(&self) -> u32 {
        le32(self.buffer.as_ref(), field::TOTAL_LEN)
    }
    /// Offset of this segment in the message.
    #[inline]
    pub fn seg_offset(&self) -> u32 {
        le32(self.buffer.as_ref(), field::SEG_OFFSET)
    }
    /// The sender's incarnation.
    #[inline]
    pub fn incarnation(&self) -> u64 {
        le64(self.buffer.as_ref(), field::INCARNATION)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The segment bytes.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

/// The meaning of a framing header, validated on its own (consistency across segments is the
/// reassembler's job).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// The sender's incarnation (0: anonymous; a reply carries its request's).
    pub incarnation: u64,
    /// Message type.
    pub msg_type: u16,
    /// Message id.
    pub msg_id: u32,
    /// Segment index.
    pub seg_index: u16,
    /// Segment count.
    pub seg_count: u16,
    /// Total message length.
    pub total_len: u32,
    /// Offset of this segment in the message.
    pub seg_offset: u32,
}

impl Repr {
    /// A header for message `msg` of `len` bytes when it fits one frame.
    #[inline]
    pub const fn single(msg: Msg, len: u32) -> Repr {
        Repr {
            incarnation: msg.incarnation,
            msg_type: msg.ty,
            msg_id: msg.id,
            seg_index: 0,
            seg_count: 1,
            total_len: len,
            seg_offset: 0,
        }
    }

    /// The message identity this header carries.
    #[inline]
    pub const fn msg(&self) -> Msg {
        Msg {
            incarnation: self.incarnation,
            id: self.msg_id,
            ty: self.msg_type,
        }
    }

    /// Validates a header given the bytes that follow it (`payload_len`): version 2, flags 0,
    /// `seg_index < seg_count`, the segment inside the message, a single segment exactly the
    /// message, and an empty segment only for an empty message.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        let len = p.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let payload_len = (len - HEADER_LEN) as u64;
        let r = Repr {
            incarnation: p.incarnation(),
            msg_type: p.msg_type(),
            msg_id: p.msg_id(),
            seg_index: p.seg_index(),
            seg_count: p.seg_count(),
            total_len: p.total_len(),
            seg_offset: p.seg_offset(),
        };
        let end = r.seg_offset as u64 + payload_len;
        let ok = p.version() == VERSION
            && p.flags() == 0
            && r.seg_count >= 1
            && r.seg_index < r.seg_count
            && end <= r.total_len as u64
            && (r.seg_count > 1 || (r.seg_offset == 0 && end == r.total_len as u64))
            && (payload_len > 0 || r.total_len == 0);
        if ok {
            Ok(r)
        } else {
            Err(Error::Malformed)
        }
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    #[inline(always)]
    pub fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b[field::VERSION] = VERSION;
        b[field::FLAGS] = 0;
        b[field::MSG_TYPE].copy_from_slice(&self.msg_type.to_le_bytes());
        b[field::MSG_ID].copy_from_slice(&self.msg_id.to_le_bytes());
        b[field::SEG_INDEX].copy_from_slice(&self.seg_index.to_le_bytes());
        b[field::SEG_COUNT].copy_from_slice(&self.seg_count.to_le_bytes());
        b[field::TOTAL_LEN].copy_from_slice(&self.total_len.to_le_bytes());
        b[field::SEG_OFFSET].copy_from_slice(&self.seg_offset.to_le_bytes());
        b[field::INCARNATION].copy_from_slice(&self.incarnation.to_le_bytes());
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn framed(r: &Repr, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; HEADER_LEN + payload.len()];
        r.emit(&mut v);
        v[HEADER_LEN..].copy_from_slice(payload);
        v
    }

    #[test]
    fn roundtrip() {
        let r = Repr {
            incarnation: 0x0123_4567_89ab_cdef,
            msg_type: 7,
            msg_id: 0xdead_beef,
            seg_index: 1,
            seg_count: 3,
            total_len: 30,
            seg_offset: 10,
        };
        let v = framed(&r, &[5; 10]);
        assert_eq!(v.len(), 28 + 10);
        assert_eq!(
            &v[..28],
            &[
                2, 0, 7, 0, // version, flags, type
                0xef, 0xbe, 0xad, 0xde, // id
                1, 0, 3, 0, // index, count
                30, 0, 0, 0, // total
                10, 0, 0, 0, // offset
                0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // incarnation
            ]
        );
        let p = Packet::new_checked(&v[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(r));
        assert_eq!(
            Repr::parse(&p).unwrap().msg(),
            Msg::new(0xdead_beef, 7).with_incarnation(0x0123_4567_89ab_cdef)
        );
        assert_eq!(p.payload(), &[5; 10]);
        let s = Repr::single(Msg::new(1, 2), 0);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&framed(&s, &[])[..])),
            Ok(s)
        );
    }

    #[test]
    fn rejects_inconsistent() {
        let good = Repr::single(Msg::new(1, 0).with_incarnation(9), 4);
        let bad = [
            Repr {
                total_len: 5,
                ..good
            },
            Repr {
                seg_offset: 1,
                ..good
            },
            Repr {
                seg_count: 0,
                ..good
            },
            Repr {
                seg_index: 1,
                ..good
            },
            Repr {
                seg_count: 2,
                seg_index: 0,
                total_len: 3,
                ..good
            },
            Repr {
                seg_count: 2,
                seg_index: 1,
                total_len: 8,
                seg_offset: 5,
                ..good
            },
        ];
        for r in bad {
            let v = framed(&r, &[1, 2, 3, 4]);
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&v[..])),
                Err(Error::Malformed),
                "{r:?}"
            );
        }
        let mut v = framed(&good, &[1, 2, 3, 4]);
        for version in [0, 1, 3, 0xff] {
            v[0] = version;
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&v[..])),
                Err(Error::Malformed),
                "version {version}"
            );
        }
        v[0] = VERSION;
        v[1] = 1;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&v[..])),
            Err(Error::Malformed),
            "flags"
        );
        assert_eq!(Packet::new_checked(&v[..27]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&v[..27])),
            Err(Error::Truncated)
        );
    }

    /// A version-1 frame as a v1 sender wrote it (20-byte header, then the message) is
    /// refused, whatever its bytes after offset 20 happen to be: it never parses as a v2 frame
    /// whose "incarnation" is the message's first bytes.
    #[test]
    fn a_version_1_frame_is_refused() {
        let body = [0xaau8; 12];
        let mut v1 = vec![1, 0, 7, 0];
        v1.extend_from_slice(&5u32.to_le_bytes());
        v1.extend_from_slice(&[0, 0, 1, 0]);
        v1.extend_from_slice(&(body.len() as u32).to_le_bytes());
        v1.extend_from_slice(&0u32.to_le_bytes());
        v1.extend_from_slice(&body);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&v1[..])),
            Err(Error::Malformed)
        );
        // With a total length a v2 reading would accept, the version byte alone refuses it
        // (and with version 2 written in, the same bytes parse).
        let mut forged = v1.clone();
        forged[12..16].copy_from_slice(&((v1.len() - HEADER_LEN) as u32).to_le_bytes());
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&forged[..])),
            Err(Error::Malformed)
        );
        forged[0] = VERSION;
        assert!(Repr::parse(&Packet::new_unchecked(&forged[..])).is_ok());
    }
}
