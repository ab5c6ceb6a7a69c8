//! The per-request arena: copied field data and object lists live here until the batch ends.

use std::cell::Cell;

use bumpalo::Bump;

use crate::mem::PinnedMemory;

/// The default zero-copy threshold in bytes (paper §5): fields at least this long are sent by
/// scatter-gather when their memory is pinned.
pub const DEFAULT_THRESHOLD: usize = 512;

/// Why a value at least the threshold long was copied instead of sent zero-copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZeroCopyFallback {
    /// The arena has no pinned memory ([`Arena::new`] instead of [`Arena::with_memory`]).
    NoPinnedMemory,
    /// The bytes are not in the arena's pinned memory (heap, stack, another allocator).
    NotPinned,
    /// The bytes straddle two pinned items (a value must lie in one item).
    SpansItems,
    /// The item is free or still held by an [`RcBufMut`](crate::RcBufMut): freeze it first.
    NotFrozen,
    /// The item's reference count is at its maximum.
    RefCountSaturated,
}

/// How many values at least the threshold long were copied instead of sent zero-copy, by
/// reason ([`Arena::zero_copy_fallbacks`]). Counters only grow; [`Arena::reset`] keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZeroCopyFallbacks {
    /// See [`ZeroCopyFallback::NoPinnedMemory`].
    pub no_pinned_memory: u64,
    /// See [`ZeroCopyFallback::NotPinned`].
    pub not_pinned: u64,
    /// See [`ZeroCopyFallback::SpansItems`].
    pub spans_items: u64,
    /// See [`ZeroCopyFallback::NotFrozen`].
    pub not_frozen: u64,
    /// See [`ZeroCopyFallback::RefCountSaturated`].
    pub ref_count_saturated: u64,
}

impl ZeroCopyFallbacks {
    /// All fallbacks, whatever the reason.
    pub fn total(&self) -> u64 {
        self.no_pinned_memory
            + self.not_pinned
            + self.spans_items
            + self.not_frozen
            + self.ref_count_saturated
    }

    /// The counter for `reason`.
    pub fn get(&self, reason: ZeroCopyFallback) -> u64 {
        match reason {
            ZeroCopyFallback::NoPinnedMemory => self.no_pinned_memory,
            ZeroCopyFallback::NotPinned => self.not_pinned,
            ZeroCopyFallback::SpansItems => self.spans_items,
            ZeroCopyFallback::NotFrozen => self.not_frozen,
            ZeroCopyFallback::RefCountSaturated => self.ref_count_saturated,
        }
    }

    fn count(&mut self, reason: ZeroCopyFallback) {
        let c = match reason {
            ZeroCopyFallback::NoPinnedMemory => &mut self.no_pinned_memory,
            ZeroCopyFallback::NotPinned => &mut self.not_pinned,
            ZeroCopyFallback::SpansItems => &mut self.spans_items,
            ZeroCopyFallback::NotFrozen => &mut self.not_frozen,
            ZeroCopyFallback::RefCountSaturated => &mut self.ref_count_saturated,
        };
        *c += 1;
    }
}

/// A per-request bump arena, plus the two settings the hybrid pointer needs: the zero-copy
/// threshold and the pinned memory to recover pointers from.
///
/// The arena starts small and grows in chunks as needed; [`reset`](Self::reset) after each
/// batch keeps the largest chunk for reuse. Nothing is reserved up front.
///
/// Thresholds: [`DEFAULT_THRESHOLD`] normally; `0` makes every pinned field zero-copy;
/// `usize::MAX` copies every field (the ablations of the paper).
///
/// # Per request
/// Objects borrow the arena, so it is reset between requests once they are gone.
/// [`scope`](Self::scope) does both: it lends the arena to a closure that builds, sends and
/// drops the request's objects, then resets it.
///
/// ```
/// use cornflakes::{Arena, CornflakesObj, handwritten::GetM};
/// let mut arena = Arena::new();
/// for id in 0..3 {
///     let bytes = arena.scope(|a| {
///         let mut m = GetM::new_in(a);
///         m.set_id(id);
///         m.serialize_to_vec() // what leaves the closure cannot borrow the arena
///     });
///     assert!(!bytes.is_empty());
/// }
/// ```
///
/// # Zero-copy fallbacks
/// A value at least the threshold long that cannot be sent zero-copy (see
/// [`ZeroCopyFallback`]) is copied and counted; read the counters with
/// [`zero_copy_fallbacks`](Self::zero_copy_fallbacks).
pub struct Arena {
    bump: Bump,
    threshold: usize,
    mem: Option<PinnedMemory>,
    fallbacks: Cell<ZeroCopyFallbacks>,
}

impl Arena {
    /// An arena with no pinned memory: every field is copied.
    pub fn new() -> Arena {
        Arena {
            bump: Bump::with_capacity(16 * 1024),
            threshold: DEFAULT_THRESHOLD,
            mem: None,
            fallbacks: Cell::new(ZeroCopyFallbacks::default()),
        }
    }

    /// An arena that recovers zero-copy pointers from `mem`.
    pub fn with_memory(mem: &PinnedMemory) -> Arena {
        Arena {
            mem: Some(mem.clone()),
            ..Arena::new()
        }
    }

    /// Sets the zero-copy threshold (builder form).
    pub fn with_threshold(mut self, threshold: usize) -> Arena {
        self.threshold = threshold;
        self
    }

    /// Sets the zero-copy threshold.
    pub fn set_threshold(&mut self, threshold: usize) {
        self.threshold = threshold;
    }

    /// The zero-copy threshold.
    #[inline]
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// The pinned memory pointers are recovered from, if any.
    #[inline]
    pub fn memory(&self) -> Option<&PinnedMemory> {
        self.mem.as_ref()
    }

    /// The underlying bump allocator (generated code allocates lists here).
    #[inline]
    pub fn bump(&self) -> &Bump {
        &self.bump
    }

    /// Copies `data` into the arena.
    #[inline]
    pub fn copy_slice(&self, data: &[u8]) -> &[u8] {
        self.bump.alloc_slice_copy(data)
    }

    /// Frees everything allocated since the last reset. Objects built in the arena must be gone
    /// (the borrow checker enforces it).
    pub fn reset(&mut self) {
        self.bump.reset();
    }

    /// Lends the arena to `f` (which builds, sends and drops one request's objects), then
    /// [`reset`](Self::reset)s it. What `f` returns cannot borrow the arena.
    pub fn scope<R>(&mut self, f: impl FnOnce(&Arena) -> R) -> R {
        let r = f(self);
        self.reset();
        r
    }

    /// Values copied although at least the threshold long, by reason (since the arena was
    /// created; [`reset`](Self::reset) keeps them).
    pub fn zero_copy_fallbacks(&self) -> ZeroCopyFallbacks {
        self.fallbacks.get()
    }

    /// Counts one fallback for `data` (at least the threshold long, not recovered).
    #[cold]
    pub(crate) fn count_fallback(&self, data: &[u8]) {
        let reason = match &self.mem {
            None => ZeroCopyFallback::NoPinnedMemory,
            Some(m) => match m.why_not_recoverable(data) {
                Some(r) => r,
                None => return,
            },
        };
        let mut f = self.fallbacks.get();
        f.count(reason);
        self.fallbacks.set(f);
    }

    /// Bytes currently allocated in the arena's chunks.
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }
}

impl Default for Arena {
    fn default() -> Self {
        Arena::new()
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("threshold", &self.threshold)
            .field("allocated_bytes", &self.bump.allocated_bytes())
            .field("pinned", &self.mem.is_some())
            .field("zero_copy_fallbacks", &self.fallbacks.get())
            .finish()
    }
}
