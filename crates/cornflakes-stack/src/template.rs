//! Per-connection packet header templates (the Sandstorm idea): the Ethernet, IPv4 and UDP
//! headers of a connection are built once; each packet copies the 42 bytes and patches only
//! the lengths, the IP identification and the checksums. The IPv4 checksum is updated
//! incrementally (RFC 1624) from the template's, never recomputed.

use std::net::SocketAddrV4;

use crate::checksum;
use crate::wire::{ethernet, ipv4, udp, ChecksumCaps, MacAddr};

/// Bytes of an Ethernet + IPv4 + UDP header.
pub const TEMPLATE_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

const IP: usize = ethernet::HEADER_LEN;
const UDP: usize = IP + ipv4::HEADER_LEN;

/// The prepared headers of one connection.
#[derive(Clone, Debug)]
pub struct HeaderTemplate {
    bytes: [u8; TEMPLATE_LEN],
    /// IPv4 checksum field for total length 0 and identification 0.
    ip_csum: u16,
    /// Pseudo-header sum without the length, plus both ports.
    udp_base: u32,
    /// Pseudo-header sum without the length (addresses and protocol): what a device that
    /// completes the UDP checksum is given, plus the length, per packet.
    ph_base: u32,
    caps: ChecksumCaps,
    src: SocketAddrV4,
    dst: SocketAddrV4,
}

impl HeaderTemplate {
    /// Builds the headers from `src` (us) to `dst` (the peer), DF set, TTL `ttl`.
    pub fn new(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        ttl: u8,
        caps: ChecksumCaps,
    ) -> HeaderTemplate {
        let mut bytes = [0u8; TEMPLATE_LEN];
        ethernet::Repr {
            src: src_mac,
            dst: dst_mac,
            ethertype: ethernet::EtherType::Ipv4,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut bytes[..]));
        let mut ip = ipv4::Packet::new_unchecked(&mut bytes[IP..UDP]);
        ipv4::Repr {
            src: *src.ip(),
            dst: *dst.ip(),
            protocol: ipv4::PROTO_UDP,
            payload_len: 0,
            ttl,
            ident: 0,
        }
        .emit(&mut ip, &ChecksumCaps::SOFTWARE);
        // The template's checksum covers total length 0 (patched per packet).
        ip.set_total_len(0);
        ip.fill_checksum();
        let ip_csum = ip.checksum();
        let mut u = udp::Packet::new_unchecked(&mut bytes[UDP..]);
        u.set_src_port(src.port());
        u.set_dst_port(dst.port());
        let ph_base = checksum::pseudo_header(src.ip().octets(), dst.ip().octets(), 0);
        let udp_base = [ph_base, src.port() as u32, dst.port() as u32]
            .into_iter()
            .fold(0, checksum::combine);
        HeaderTemplate {
            bytes,
            ip_csum,
            udp_base,
            ph_base,
            caps,
            src,
            dst,
        }
    }

    /// Our address.
    pub fn src(&self) -> SocketAddrV4 {
        self.src
    }

    /// The peer's address.
    pub fn dst(&self) -> SocketAddrV4 {
        self.dst
    }

    /// The checksum capabilities the template writes for.
    pub fn caps(&self) -> ChecksumCaps {
        self.caps
    }

    /// The destination MAC address.
    pub fn dst_mac(&self) -> MacAddr {
        ethernet::Frame::new_unchecked(&self.bytes[..]).dst_addr()
    }

    /// Changes the destination MAC address (after ARP resolution).
    pub fn set_dst_mac(&mut self, mac: MacAddr) {
        ethernet::Frame::new_unchecked(&mut self.bytes[..]).set_dst_addr(mac);
    }

    /// Writes the headers of a packet with `udp_payload_len` bytes after the UDP header into
    /// the first [`TEMPLATE_LEN`] bytes of `out`. The UDP checksum is left as the capabilities
    /// say: 0, or the pseudo-header sum for a device to complete, or — when software computes
    /// it — 0 until [`set_udp_checksum`](Self::set_udp_checksum) is called with the payload sum.
    ///
    /// # Panics
    /// When `out` is shorter than [`TEMPLATE_LEN`] or `udp_payload_len` does not fit an IPv4
    /// packet (callers size packets by the MTU).
    #[inline(always)]
    pub fn write(&self, out: &mut [u8], udp_payload_len: usize, ident: u16) {
        let out = &mut out[..TEMPLATE_LEN];
        out.copy_from_slice(&self.bytes);
        let udp_len = (udp::HEADER_LEN + udp_payload_len) as u16;
        let total = ipv4::HEADER_LEN as u16 + udp_len;
        let mut ip = ipv4::Packet::new_unchecked(&mut out[IP..UDP]);
        ip.set_total_len(total);
        ip.set_ident(ident);
        if self.caps.ipv4_tx {
            let c = checksum::update(self.ip_csum, 0, total);
            ip.set_checksum(checksum::update(c, 0, ident));
        } else {
            ip.set_checksum(0);
        }
        let mut u = udp::Packet::new_unchecked(&mut out[UDP..]);
        u.set_len(udp_len);
        let field = if self.caps.udp_tx || self.caps.udp_tx_zero {
            0
        } else {
            checksum::fold(checksum::combine(self.ph_base, udp_len as u32))
        };
        u.set_checksum(field);
    }

    /// The UDP checksum field for a packet whose UDP payload (framing header included) sums to
    /// `payload_sum` (see [`checksum::Accumulator`]).
    #[inline]
    pub fn udp_checksum(&self, udp_payload_len: usize, payload_sum: u32) -> u16 {
        let udp_len = (udp::HEADER_LEN + udp_payload_len) as u32;
        // The length appears twice: in the pseudo-header and in the UDP header.
        let s = [self.udp_base, udp_len, udp_len, payload_sum]
            .into_iter()
            .fold(0, checksum::combine);
        udp::udp_field(s)
    }

    /// Stores a UDP checksum into headers written by [`write`](Self::write).
    #[inline]
    pub fn set_udp_checksum(out: &mut [u8], csum: u16) {
        udp::Packet::new_unchecked(&mut out[UDP..TEMPLATE_LEN]).set_checksum(csum);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::Ipv4Addr;

    fn template(caps: ChecksumCaps) -> HeaderTemplate {
        HeaderTemplate::new(
            MacAddr([2, 0, 0, 0, 0, 1]),
            MacAddr([2, 0, 0, 0, 0, 2]),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5000),
            64,
            caps,
        )
    }

    /// Builds the same packet from the Reprs with full checksum computation.
    fn reference(payload: &[u8], ident: u16) -> Vec<u8> {
        let mut v = vec![0u8; TEMPLATE_LEN + payload.len()];
        ethernet::Repr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: ethernet::EtherType::Ipv4,
        }
        .emit(&mut ethernet::Frame::new_unchecked(&mut v[..]));
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        ipv4::Repr {
            src,
            dst,
            protocol: ipv4::PROTO_UDP,
            payload_len: udp::HEADER_LEN + payload.len(),
            ttl: 64,
            ident,
        }
        .emit(
            &mut ipv4::Packet::new_unchecked(&mut v[IP..UDP]),
            &ChecksumCaps::SOFTWARE,
        );
        udp::Repr {
            src_port: 4000,
            dst_port: 5000,
            payload_len: payload.len(),
        }
        .emit(
            &mut udp::Packet::new_unchecked(&mut v[UDP..]),
            src,
            dst,
            |p| p.copy_from_slice(payload),
            &ChecksumCaps::SOFTWARE,
        );
        v
    }

    #[test]
    fn patched_template_equals_full_recomputation() {
        let t = template(ChecksumCaps::SOFTWARE);
        let payload: Vec<u8> = (0..1473u32).map(|i| (i * 31 % 256) as u8).collect();
        for (len, ident) in [
            (0usize, 0u16),
            (1, 1),
            (2, 0xffff),
            (100, 77),
            (1472, 0x8000),
            (1473, 12345),
        ] {
            let mut out = vec![0u8; TEMPLATE_LEN + len];
            t.write(&mut out, len, ident);
            out[TEMPLATE_LEN..].copy_from_slice(&payload[..len]);
            // Payload sum over odd split pieces, as a scatter-gather send does.
            let mut acc = checksum::Accumulator::new();
            let cut = len / 3;
            acc.add(&payload[..cut]);
            acc.add(&payload[cut..len]);
            HeaderTemplate::set_udp_checksum(&mut out, t.udp_checksum(len, acc.sum()));
            assert_eq!(
                out,
                reference(&payload[..len], ident),
                "len {len} ident {ident}"
            );
        }
    }

    #[test]
    fn offload_and_zero_modes() {
        let t = template(ChecksumCaps::OFFLOAD);
        let mut out = [0u8; TEMPLATE_LEN];
        t.write(&mut out, 10, 5);
        let ip = ipv4::Packet::new_unchecked(&out[IP..UDP]);
        assert_eq!(ip.checksum(), 0);
        let u = udp::Packet::new_unchecked(&out[UDP..]);
        let ph = checksum::pseudo_header([10, 0, 0, 1], [10, 0, 0, 2], 18);
        assert_eq!(u.checksum(), checksum::fold(ph));
        let t = template(ChecksumCaps::NO_UDP_TX);
        t.write(&mut out, 10, 5);
        assert_eq!(udp::Packet::new_unchecked(&out[UDP..]).checksum(), 0);
        assert!(ipv4::Packet::new_unchecked(&out[IP..UDP]).verify_checksum());
    }

    #[test]
    fn set_dst_mac() {
        let mut t = template(ChecksumCaps::SOFTWARE);
        t.set_dst_mac(MacAddr([9; 6]));
        assert_eq!(t.dst_mac(), MacAddr([9; 6]));
        let mut out = [0u8; TEMPLATE_LEN];
        t.write(&mut out, 0, 0);
        assert_eq!(&out[..6], &[9; 6]);
    }
}
