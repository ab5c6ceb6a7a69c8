//! What a datapath needs of an object to serialize-and-send it (paper §3.2.3, Listing 1),
//! without the object code: its [`Sizes`], a way to write its HEADER AREA and COPY AREA into a
//! buffer, and its zero-copy leaves in wire order, of which a [`Demote`] plan may turn the
//! smallest into copies when the device takes fewer scatter-gather entries.
//!
//! The runtime's objects (`cornflakes::CornflakesObj`, generated code) implement
//! [`SendObject`]; a datapath's [`Transmit::send_object`](crate::Transmit::send_object) takes
//! any `SendObject`, usually through a [`SendPlan`](crate::SendPlan).

use std::fmt;
use std::ops::{Add, AddAssign};

use cornflakes_mem::PinnedRef;

/// An object a datapath can serialize and send: a head (the HEADER AREA and COPY AREA, written
/// into the first transmit buffer) followed by its zero-copy leaves, each its own descriptor.
///
/// Every `cornflakes::CornflakesObj` implements it (with the runtime's `send_object_methods!`,
/// as generated code does, each method forwards to the `CornflakesObj` method named in its
/// documentation); the names differ from those methods so that both traits can be in scope.
pub trait SendObject {
    /// Sizes of the encoded areas (`CornflakesObj::sizes`).
    fn object_sizes(&self) -> Sizes;

    /// Writes HEADER AREA + COPY AREA into the start of `buf` and returns the bytes written,
    /// `sizes.head() + demoted`; a shorter `buf` is refused with [`BufferTooSmall`] before
    /// anything is written. `sizes` must be `self.object_sizes()` and `(demote, demoted)` a plan
    /// for this object ([`Demote::plan`]); [`SendPlan`](crate::SendPlan) keeps the three
    /// together (`CornflakesObj::write_header_and_copy`).
    fn write_object_head(
        &self,
        sizes: &Sizes,
        buf: &mut [u8],
        demote: Demote,
        demoted: usize,
    ) -> Result<usize, BufferTooSmall>;

    /// [`write_object_head`](Self::write_object_head), handing each zero-copy leaf the plan
    /// keeps to `f` in wire order during the same walk (`CornflakesObj::write_head_and_leaves`):
    /// a datapath posts each leaf as its descriptor while the head is written. `f` is not
    /// called when `buf` is refused. This default walks twice.
    fn write_object_head_and_leaves<F: FnMut(PinnedRef<'_>)>(
        &self,
        sizes: &Sizes,
        buf: &mut [u8],
        demote: Demote,
        demoted: usize,
        f: &mut F,
    ) -> Result<usize, BufferTooSmall> {
        let n = self.write_object_head(sizes, buf, demote, demoted)?;
        let mut walk = demote;
        self.for_each_object_leaf(&mut walk, f);
        Ok(n)
    }

    /// Calls `f` on each zero-copy leaf kept by `demote`, in wire order
    /// (`CornflakesObj::for_each_zero_copy`): a view that holds no reference count (the object
    /// borrows its leaves); a datapath takes a counted reference
    /// ([`PinnedRef::to_rcbuf`]) for each descriptor it posts.
    fn for_each_object_leaf<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F);

    /// Lengths of the zero-copy leaves in wire order, for planning a [`Demote`]
    /// (`CornflakesObj::zero_copy_lens`).
    fn object_leaf_lens(&self) -> Vec<usize>;

    /// The whole object serialized contiguously, for a datapath that must copy it
    /// (`CornflakesObj::serialize_to_vec`).
    fn object_to_vec(&self) -> Vec<u8>;
}

/// A string/bytes leaf as [`Sizes`] counts it (the runtime's hybrid pointer `CFPtr`).
pub trait SizedLeaf {
    /// The leaf's length in bytes.
    fn leaf_len(&self) -> usize;
    /// Whether the leaf is sent zero-copy (its own scatter-gather entry) rather than copied.
    fn leaf_is_zero_copy(&self) -> bool;
}

/// The sizes of an encoded object's three areas, kept up to date as fields are set so a send
/// needs no extra walk to size its buffers and descriptors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// HEADER AREA bytes (all object headers, slots and pair arrays).
    pub header: usize,
    /// COPY AREA bytes (copied leaves and packed arrays).
    pub copy: usize,
    /// Number of zero-copy leaves (scatter-gather entries beyond the first).
    pub zero_copy_count: usize,
    /// ZERO-COPY AREA bytes.
    pub zero_copy_len: usize,
}

impl Sizes {
    /// Length of the whole encoded object.
    #[inline]
    pub fn total(&self) -> usize {
        self.header + self.copy + self.zero_copy_len
    }

    /// Length of the first scatter-gather entry (header + copy areas).
    #[inline]
    pub fn head(&self) -> usize {
        self.header + self.copy
    }

    /// Accounts for one string/bytes leaf (its slot or pair is counted by the caller).
    #[inline]
    pub fn add_leaf<L: SizedLeaf + ?Sized>(&mut self, p: &L) {
        if p.leaf_is_zero_copy() {
            self.zero_copy_count += 1;
            self.zero_copy_len += p.leaf_len();
        } else {
            self.copy += p.leaf_len();
        }
    }

    /// Removes one leaf previously added with [`add_leaf`](Self::add_leaf).
    #[inline]
    pub fn remove_leaf<L: SizedLeaf + ?Sized>(&mut self, p: &L) {
        if p.leaf_is_zero_copy() {
            self.zero_copy_count -= 1;
            self.zero_copy_len -= p.leaf_len();
        } else {
            self.copy -= p.leaf_len();
        }
    }
}

impl Add for Sizes {
    type Output = Sizes;
    #[inline]
    fn add(self, o: Sizes) -> Sizes {
        Sizes {
            header: self.header + o.header,
            copy: self.copy + o.copy,
            zero_copy_count: self.zero_copy_count + o.zero_copy_count,
            zero_copy_len: self.zero_copy_len + o.zero_copy_len,
        }
    }
}

impl AddAssign for Sizes {
    #[inline]
    fn add_assign(&mut self, o: Sizes) {
        *self = *self + o;
    }
}

/// Which zero-copy leaves to send as copies instead, because the device takes fewer
/// scatter-gather entries than the object has: every leaf shorter than `below`, and the first
/// `ties` leaves (in wire order) exactly `below` long. Built by [`Demote::plan`]; [`Demote::NONE`]
/// keeps every zero-copy leaf. Both walks of a send (header and zero-copy entries) start from the
/// same value, so they agree on every leaf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demote {
    below: usize,
    ties: usize,
}

impl Demote {
    /// Keep every zero-copy leaf.
    pub const NONE: Demote = Demote { below: 0, ties: 0 };

    /// Whether the next zero-copy leaf of length `len` stays zero-copy (advances the tie count).
    #[inline]
    pub fn keep_zero_copy(&mut self, len: usize) -> bool {
        if len > self.below {
            return true;
        }
        if len < self.below {
            return false;
        }
        if self.ties > 0 {
            self.ties -= 1;
            return false;
        }
        true
    }

    /// Demotes the smallest zero-copy leaves of an object with zero-copy leaf lengths `lens`
    /// (wire order) so that at most `max_zero_copy` remain. Returns the plan and the bytes it
    /// moves into the copy area.
    pub fn plan(lens: &[usize], max_zero_copy: usize) -> (Demote, usize) {
        if lens.len() <= max_zero_copy {
            return (Demote::NONE, 0);
        }
        let k = lens.len() - max_zero_copy;
        let mut sorted = lens.to_vec();
        sorted.sort_unstable();
        let cutoff = sorted[k - 1];
        let strictly_below = sorted[..k].iter().filter(|&&l| l < cutoff).count();
        let bytes = sorted[..k].iter().sum();
        (
            Demote {
                below: cutoff,
                ties: k - strictly_below,
            },
            bytes,
        )
    }
}

/// The buffer given to `serialize_into`, `write_header_and_copy`, [`SendObject::write_object_head`]
/// or [`SendPlan::write_head`](crate::SendPlan::write_head) is too small (nothing was written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Bytes the object needs.
    pub needed: usize,
    /// Bytes the buffer holds.
    pub available: usize,
}

impl BufferTooSmall {
    /// `needed` bytes were needed, `available` given (out of line: only on the error path).
    #[cold]
    #[inline(never)]
    pub fn new(needed: usize, available: usize) -> BufferTooSmall {
        BufferTooSmall { needed, available }
    }
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "object needs {} bytes but the buffer holds {}",
            self.needed, self.available
        )
    }
}

impl std::error::Error for BufferTooSmall {}
