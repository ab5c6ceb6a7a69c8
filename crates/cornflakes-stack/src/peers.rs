//! The connection table's index: peer address → connection, looked up for every received
//! frame.
//!
//! `std`'s default hasher (SipHash-1-3) costs about 200 instructions per lookup of a 6-byte
//! key, more than the rest of a frame's parsing. The peer is packed into one `u64` and hashed
//! with one folded multiply (the 128-bit product's halves XORed, as in foldhash), keyed by a
//! random per-table seed so that a sender cannot choose addresses that collide without
//! knowing it; the table is also bounded by `StackConfig::max_conns` and evicts idle entries
//! (`crate::conntable`).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddrV4;

use cornflakes_datapath::ConnId;

/// Peer address → connection.
#[derive(Debug)]
pub(crate) struct PeerMap {
    map: HashMap<u64, ConnId, PeerHash>,
}

impl PeerMap {
    pub fn new() -> PeerMap {
        PeerMap {
            map: HashMap::with_hasher(PeerHash {
                seed: RandomState::new().hash_one(0x5eed_u64),
            }),
        }
    }

    #[inline]
    pub fn get(&self, peer: SocketAddrV4) -> Option<ConnId> {
        self.map.get(&key(peer)).copied()
    }

    pub fn insert(&mut self, peer: SocketAddrV4, conn: ConnId) {
        self.map.insert(key(peer), conn);
    }

    pub fn remove(&mut self, peer: SocketAddrV4) {
        self.map.remove(&key(peer));
    }
}

/// The address and port in one integer (48 bits used).
#[inline]
fn key(peer: SocketAddrV4) -> u64 {
    (u64::from(u32::from(*peer.ip())) << 16) | u64::from(peer.port())
}

#[derive(Clone, Debug)]
struct PeerHash {
    seed: u64,
}

impl BuildHasher for PeerHash {
    type Hasher = PeerHasher;
    #[inline]
    fn build_hasher(&self) -> PeerHasher {
        PeerHasher(self.seed)
    }
}

struct PeerHasher(u64);

impl Hasher for PeerHasher {
    #[inline]
    fn write_u64(&mut self, k: u64) {
        // Both halves of the product depend on every bit of the input: the table uses the low
        // bits for the bucket and the top 7 for the tag.
        let p = u128::from(self.0 ^ k) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; any other input still hashes every byte.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::net::Ipv4Addr;

    fn peer(a: u8, b: u8, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, a, b, 1), port)
    }

    #[test]
    fn distinct_peers_map_to_their_own_connections() {
        let mut m = PeerMap::new();
        let mut n = 0;
        for a in 0..20u8 {
            for port in [1u16, 2, 5000, 65535] {
                m.insert(peer(a, 7, port), ConnId(n));
                n += 1;
            }
        }
        let mut n = 0;
        for a in 0..20u8 {
            for port in [1u16, 2, 5000, 65535] {
                assert_eq!(m.get(peer(a, 7, port)), Some(ConnId(n)));
                n += 1;
            }
        }
        // Same address, other port; same port, other address.
        assert_eq!(m.get(peer(0, 7, 3)), None);
        assert_eq!(m.get(peer(0, 8, 1)), None);
    }

    #[test]
    fn the_key_keeps_address_and_port_apart() {
        assert_ne!(key(peer(0, 0, 1)), key(peer(0, 1, 0)));
        assert_eq!(key(peer(1, 2, 3)) >> 48, 0);
    }

    #[test]
    fn the_hash_spreads_neighbouring_keys_over_buckets_and_tags() {
        let h = PeerHash { seed: 12345 };
        let mut buckets = std::collections::HashSet::new();
        let mut tags = std::collections::HashSet::new();
        for port in 0..1024u16 {
            let v = h.hash_one(key(peer(0, 0, port)));
            buckets.insert(v & 1023);
            tags.insert(v >> 57);
        }
        // A random function fills about 63 % of 1024 buckets and all 128 tags.
        assert!(buckets.len() > 550, "{} buckets", buckets.len());
        assert_eq!(tags.len(), 128);
    }
}
