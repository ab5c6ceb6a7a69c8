//! A client's identity on the wire: its **incarnation** and the message ids it issues under it
//! (the framing header's `incarnation` and `message id`, `docs/wire-format.md`).
//!
//! A server remembers recent requests by (incarnation, id) to answer a retry with its first
//! outcome instead of running it again ([`crate::once`]). That works only if a client never
//! sends two different requests under one (incarnation, id), and sends a retry under the same
//! pair as the first try. So a client:
//!
//! - picks a random non-zero 64-bit incarnation once per process and keeps it across
//!   reconnects: a write retried on a new connection is then still recognised (with a new
//!   incarnation per connection it would be applied twice);
//! - never reuses an id within an incarnation: ids count up, and when the 32-bit id space is
//!   used up the client takes a new incarnation and counts on.
//!
//! [`ClientIds::process`] is that identity, one per process and shared by every client of it
//! (clones and separate calls share one counter, so two clients of a process never issue the
//! same id). [`ClientIds::fresh`] is a new identity for a client whose requests never
//! outlive it (a load generator's thread: no retries). [`ClientIds::with_incarnation`] fixes
//! the first incarnation, to act out a restarted process or a reconnect in a test.
//!
//! ```
//! use cornflakes_rpc::ids::ClientIds;
//!
//! let ids = ClientIds::process();
//! let a = ids.next(7); // the header of a new request of message type 7
//! let b = ids.next(7);
//! assert_ne!(a.incarnation, 0);
//! assert_eq!(a.incarnation, b.incarnation);
//! assert_ne!(a.id, b.id);
//! // A retry of `a` is sent with `a` itself: same incarnation, same id.
//! ```
//!
//! # Incarnations after a wrap
//! The identity numbers its messages with a 64-bit sequence `s`: the id is `s mod 2^32` and
//! the incarnation is derived from the first one and the *epoch* `e = s / 2^32` as
//! `first XOR fmix64(e)` (MurmurHash3's finaliser, a bijection with `fmix64(0) = 0`), so epoch
//! 0 is the first incarnation itself and every epoch of one identity has its own incarnation.
//! The one epoch where that value would be 0 takes `NOT first` instead, which no other epoch
//! below 2^32 can have (it would need `fmix64(e) = 2^64 − 1`, whose only `e` is above 2^32).

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use cornflakes::Msg;

/// A client's incarnation and message ids; cheap to clone (clones share the counter).
#[derive(Clone, Debug)]
pub struct ClientIds {
    first: u64,
    /// The next sequence number (`epoch × 2^32 + id`).
    next: Arc<AtomicU64>,
}

impl ClientIds {
    /// The process's identity: a random incarnation drawn on first use, kept for the life of
    /// the process, and one id counter shared by every caller.
    pub fn process() -> ClientIds {
        static PROCESS: OnceLock<ClientIds> = OnceLock::new();
        PROCESS.get_or_init(ClientIds::fresh).clone()
    }

    /// A new identity with a random incarnation and its own counter, unrelated to the
    /// process's: for a client whose requests are never retried after it is gone.
    ///
    /// # Panics
    /// When the operating system gives no random bytes (neither `getrandom(2)` nor
    /// `/dev/urandom`); so does [`ClientIds::process`] on first use.
    pub fn fresh() -> ClientIds {
        ClientIds::with_incarnation(random_incarnation())
    }

    /// An identity whose first incarnation is `first` (ids from 1): two of them with the same
    /// `first` act as one process that reconnected; with different ones, as two processes.
    pub fn with_incarnation(first: NonZeroU64) -> ClientIds {
        ClientIds {
            first: first.get(),
            next: Arc::new(AtomicU64::new(1)),
        }
    }

    /// The incarnation of the next id this identity issues.
    pub fn incarnation(&self) -> u64 {
        self.incarnation_of(self.next.load(Ordering::Relaxed) >> 32)
    }

    /// The header of a new message of type `ty`: the current incarnation and the next id.
    /// Retry a message by sending the header returned here again, never by calling `next`.
    #[inline]
    pub fn next(&self, ty: u16) -> Msg {
        self.nth(self.next.fetch_add(1, Ordering::Relaxed), ty)
    }

    /// The header of the identity's message number `seq`, for a client that numbers its
    /// requests itself (a load generator, whose reply matching uses its own numbers): id
    /// `seq mod 2^32`, under the incarnation of epoch `seq / 2^32`. Use either this or
    /// [`ClientIds::next`] on one identity, not both.
    #[inline]
    pub fn nth(&self, seq: u64, ty: u16) -> Msg {
        Msg::new(seq as u32, ty).with_incarnation(self.incarnation_of(seq >> 32))
    }

    fn incarnation_of(&self, epoch: u64) -> u64 {
        if epoch == 0 {
            return self.first;
        }
        match self.first ^ fmix64(epoch) {
            0 => !self.first,
            v => v,
        }
    }
}

/// MurmurHash3's 64-bit finaliser: a bijection of `u64` with `fmix64(0) = 0`.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// 64 random bits from the operating system, non-zero.
fn random_incarnation() -> NonZeroU64 {
    loop {
        let mut b = [0u8; 8];
        if let Err(e) = getrandom::getrandom(&mut b) {
            // No randomness from the kernel (getrandom(2) and /dev/urandom both failed): a
            // client without an identity could not be told apart from its own restart.
            panic!("cornflakes-rpc: no random incarnation from the operating system: {e}");
        }
        if let Some(v) = NonZeroU64::new(u64::from_le_bytes(b)) {
            return v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn nz(v: u64) -> NonZeroU64 {
        NonZeroU64::new(v).unwrap()
    }

    #[test]
    fn ids_count_up_under_one_incarnation_and_clones_share_them() {
        let ids = ClientIds::with_incarnation(nz(42));
        let a = ids.next(3);
        let b = ids.clone().next(4);
        assert_eq!(a, Msg::new(1, 3).with_incarnation(42));
        assert_eq!(b, Msg::new(2, 4).with_incarnation(42));
        assert_eq!(ids.incarnation(), 42);
        // Another identity with the same incarnation (a reconnect of the same process in a
        // test) starts again at 1; one with another incarnation is another process.
        assert_eq!(ClientIds::with_incarnation(nz(42)).next(3), a);
        assert_ne!(ClientIds::with_incarnation(nz(43)).next(3), a);
    }

    #[test]
    fn the_process_identity_is_one_random_non_zero_incarnation_shared_by_all() {
        let (p, q) = (ClientIds::process(), ClientIds::process());
        assert_ne!(p.incarnation(), 0);
        let a = p.next(1);
        let b = q.next(1);
        assert_eq!(a.incarnation, b.incarnation);
        assert_ne!(
            a.id, b.id,
            "two clients of one process never issue the same id"
        );
        // Fresh identities are random and unrelated to it.
        let f: HashSet<u64> = (0..64).map(|_| ClientIds::fresh().incarnation()).collect();
        assert_eq!(f.len(), 64);
        assert!(!f.contains(&0) && !f.contains(&a.incarnation));
    }

    #[test]
    fn the_id_space_wrap_takes_a_new_incarnation() {
        let ids = ClientIds::with_incarnation(nz(0x1234_5678_9abc_def0));
        ids.next.store(u64::from(u32::MAX) - 1, Ordering::Relaxed);
        let last = [ids.next(1), ids.next(1)];
        assert_eq!(
            last.map(|m| (m.incarnation, m.id)),
            [
                (0x1234_5678_9abc_def0, u32::MAX - 1),
                (0x1234_5678_9abc_def0, u32::MAX)
            ]
        );
        let wrapped = ids.next(1);
        assert_eq!(wrapped.id, 0, "the id space wrapped");
        assert_ne!(wrapped.incarnation, 0);
        assert_ne!(
            wrapped.incarnation, last[0].incarnation,
            "so the incarnation changed: no (incarnation, id) is issued twice"
        );
        assert_eq!(ids.incarnation(), wrapped.incarnation);
        assert_eq!(ids.next(1).incarnation, wrapped.incarnation);
        // `nth` is the same numbering, for clients that count themselves.
        assert_eq!(ids.nth(u64::from(u32::MAX) + 1, 1), wrapped);
        assert_eq!(
            ids.nth(1, 9),
            Msg::new(1, 9).with_incarnation(0x1234_5678_9abc_def0)
        );
    }

    #[test]
    fn every_epoch_has_its_own_non_zero_incarnation() {
        for first in [1, 2, u64::MAX, 0x8000_0000_0000_0000, 0x0123_4567_89ab_cdef] {
            let ids = ClientIds::with_incarnation(nz(first));
            let mut seen = HashSet::new();
            for e in (0..4096).chain([u64::from(u32::MAX) - 1, u64::from(u32::MAX)]) {
                let inc = ids.incarnation_of(e);
                assert_ne!(inc, 0, "first {first:#x} epoch {e}");
                assert!(seen.insert(inc), "first {first:#x} epoch {e}: repeated");
            }
        }
        // The epoch whose XOR would be 0 takes NOT first, which no epoch below 2^32 has.
        assert_eq!(fmix64(0), 0);
        let e = 0x89a5_850e_63c5_f8aa_u64; // fmix64(e) = 2^64 - 1: the only such e
        assert_eq!(fmix64(e), u64::MAX);
        assert!(e > u64::from(u32::MAX));
        let first = fmix64(5); // the identity whose epoch 5 would be 0
        let ids = ClientIds::with_incarnation(nz(first));
        assert_eq!(ids.incarnation_of(5), !first);
        assert!((0..4096)
            .filter(|&e| e != 5)
            .all(|e| ids.incarnation_of(e) != !first));
    }
}
