//! Typed views over packet bytes, in the style of smoltcp's `wire` module.
//!
//! Each protocol has a `Packet<T: AsRef<[u8]>>` view whose field offsets live in one `mod
//! field`, and a plain `Repr` holding the parsed, validated meaning.
//!
//! # Panic freedom
//! `Packet::new_checked` succeeds only when the buffer holds the whole header (and, where the
//! header has a length field, as many bytes as it claims); after that no getter panics.
//! Untrusted input must go through `new_checked` / `Repr::parse`. Emission goes through
//! `new_unchecked` on a buffer the caller sized with `Repr::buffer_len` (a recycled pinned
//! buffer holds stale bytes, so length checks on it would be meaningless); setters panic when
//! the buffer is shorter than the header.

pub mod arp;
pub mod ethernet;
pub mod framing;
pub mod ipv4;
pub mod udp;

use std::fmt;

/// A malformed or unsupported packet. Carries nothing: the stack drops such packets and
/// counts them by the layer that rejected them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the header or than a length field claims.
    Truncated,
    /// A field holds a value the protocol forbids or this stack does not support.
    Malformed,
    /// A checksum did not verify.
    Checksum,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated packet"),
            Error::Malformed => write!(f, "malformed packet"),
            Error::Checksum => write!(f, "checksum mismatch"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of parsing.
pub type Result<T> = std::result::Result<T, Error>;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit is set (broadcast or multicast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// Which checksums software computes and verifies; the rest are left to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChecksumCaps {
    /// Compute the IPv4 header checksum on transmit (else the device fills it).
    pub ipv4_tx: bool,
    /// Verify the IPv4 header checksum on receive (else the device verified it).
    pub ipv4_rx: bool,
    /// Compute the UDP checksum on transmit (else left to the device, or 0 = none when the
    /// device does not offload it either; see [`ChecksumCaps::udp_tx_zero`]).
    pub udp_tx: bool,
    /// Verify non-zero UDP checksums on receive.
    pub udp_rx: bool,
    /// When `udp_tx` is false: write 0 ("no checksum", RFC 768) instead of leaving the
    /// pseudo-header sum for the device to complete.
    pub udp_tx_zero: bool,
}

impl ChecksumCaps {
    /// Everything in software (no device offload).
    pub const SOFTWARE: ChecksumCaps = ChecksumCaps {
        ipv4_tx: true,
        ipv4_rx: true,
        udp_tx: true,
        udp_rx: true,
        udp_tx_zero: false,
    };
    /// IPv4 in software, UDP checksum sent as 0 (none) and verified when present.
    pub const NO_UDP_TX: ChecksumCaps = ChecksumCaps {
        ipv4_tx: true,
        ipv4_rx: true,
        udp_tx: false,
        udp_rx: true,
        udp_tx_zero: true,
    };
    /// The device computes and verifies both (software writes the UDP pseudo-header sum, as
    /// NICs with partial checksum offload expect).
    pub const OFFLOAD: ChecksumCaps = ChecksumCaps {
        ipv4_tx: false,
        ipv4_rx: false,
        udp_tx: false,
        udp_rx: false,
        udp_tx_zero: false,
    };
}

impl Default for ChecksumCaps {
    fn default() -> Self {
        ChecksumCaps::SOFTWARE
    }
}

#[inline]
pub(crate) fn be16(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

#[inline]
pub(crate) fn set_be16(b: &mut [u8], r: std::ops::Range<usize>, v: u16) {
    b[r].copy_from_slice(&v.to_be_bytes());
}
