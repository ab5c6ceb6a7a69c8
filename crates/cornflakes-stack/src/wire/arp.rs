//! ARP for Ethernet and IPv4 (RFC 826).

use std::net::Ipv4Addr;

use super::{be16, set_be16, Error, MacAddr, Result};

mod field {
    use std::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::TPA.end;

/// ARP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// 1.
    Request,
    /// 2.
    Reply,
}

/// A view of an ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a buffer holding a whole Ethernet/IPv4 ARP packet.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        if p.buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }
    /// Protocol type (0x0800 = IPv4).
    pub fn protocol_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE)
    }
    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// Operation code.
    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }
    /// Sender hardware address.
    pub fn sender_mac(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SHA]);
        MacAddr(m)
    }
    /// Sender protocol address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    /// Target hardware address.
    pub fn target_mac(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::THA]);
        MacAddr(m)
    }
    /// Target protocol address.
    pub fn target_ip(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::TPA];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set(&mut self, r: std::ops::Range<usize>, v: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(v);
    }
}

/// The meaning of an Ethernet/IPv4 ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// Sender hardware address.
    pub sender_mac: MacAddr,
    /// Sender IPv4 address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (zero in requests).
    pub target_mac: MacAddr,
    /// Target IPv4 address.
    pub target_ip: Ipv4Addr,
}

impl Repr {
    /// Validates (Ethernet, IPv4, lengths 6/4, operation 1 or 2) and reads a packet.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if p.buffer.as_ref().len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        if p.hardware_type() != 1
            || p.protocol_type() != 0x0800
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return Err(Error::Malformed);
        }
        let operation = match p.operation() {
            1 => Operation::Request,
            2 => Operation::Reply,
            _ => return Err(Error::Malformed),
        };
        Ok(Repr {
            operation,
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        })
    }

    /// Packet length.
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        set_be16(p.buffer.as_mut(), field::HTYPE, 1);
        set_be16(p.buffer.as_mut(), field::PTYPE, 0x0800);
        p.buffer.as_mut()[field::HLEN] = 6;
        p.buffer.as_mut()[field::PLEN] = 4;
        let op = match self.operation {
            Operation::Request => 1,
            Operation::Reply => 2,
        };
        set_be16(p.buffer.as_mut(), field::OPER, op);
        p.set(field::SHA, &self.sender_mac.0);
        p.set(field::SPA, &self.sender_ip.octets());
        p.set(field::THA, &self.target_mac.0);
        p.set(field::TPA, &self.target_ip.octets());
    }
}

#[cfg(test)]
mod test {
    use super::*;

    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x21,
        0x22, 0x23, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x41, 0x42, 0x43, 0x44,
    ];

    #[test]
    fn parse_and_emit() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        assert_eq!(r.operation, Operation::Request);
        assert_eq!(r.sender_mac, MacAddr([0x11, 0x12, 0x13, 0x14, 0x15, 0x16]));
        assert_eq!(r.sender_ip, Ipv4Addr::new(0x21, 0x22, 0x23, 0x24));
        assert_eq!(r.target_ip, Ipv4Addr::new(0x41, 0x42, 0x43, 0x44));
        let mut out = [0xeeu8; 28];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, REQUEST);
    }

    #[test]
    fn rejects_other_protocols() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        let mut b = REQUEST;
        b[3] = 0xdd; // IPv6
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
        let mut b = REQUEST;
        b[7] = 3;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
    }
}
