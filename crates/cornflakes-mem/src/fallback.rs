//! Why a value could not be sent zero-copy (pointer recovery failed).

/// Why a value at least the threshold long was copied instead of sent zero-copy (the answer
/// of [`PinnedMemory::why_not_recoverable`](crate::PinnedMemory::why_not_recoverable)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZeroCopyFallback {
    /// The arena has no pinned memory (an arena created without memory: `Arena::new`
    /// instead of `Arena::with_memory` in the runtime).
    NoPinnedMemory,
    /// The bytes are not in any pinned memory (heap, stack, a static, another allocator).
    NotPinned,
    /// The bytes are pinned, but in a different [`PinnedMemory`](crate::PinnedMemory) from the arena's (another
    /// core's, or a second one created by mistake): give the arena the memory the value
    /// lives in (`Arena::with_memory`).
    OtherPinnedMemory,
    /// The bytes straddle two pinned items (a value must lie in one item).
    SpansItems,
    /// The item is free or still held by an [`RcBufMut`](crate::RcBufMut): freeze it first.
    NotFrozen,
    /// The item's reference count is at its maximum.
    RefCountSaturated,
}

/// How many values at least the threshold long were copied instead of sent zero-copy, by
/// reason (the runtime's `Arena::zero_copy_fallbacks`). Counters only grow; `Arena::reset` keeps
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZeroCopyFallbacks {
    /// See [`ZeroCopyFallback::NoPinnedMemory`].
    pub no_pinned_memory: u64,
    /// See [`ZeroCopyFallback::NotPinned`].
    pub not_pinned: u64,
    /// See [`ZeroCopyFallback::OtherPinnedMemory`].
    pub other_pinned_memory: u64,
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
            + self.other_pinned_memory
            + self.spans_items
            + self.not_frozen
            + self.ref_count_saturated
    }

    /// The counter for `reason`.
    pub fn get(&self, reason: ZeroCopyFallback) -> u64 {
        match reason {
            ZeroCopyFallback::NoPinnedMemory => self.no_pinned_memory,
            ZeroCopyFallback::NotPinned => self.not_pinned,
            ZeroCopyFallback::OtherPinnedMemory => self.other_pinned_memory,
            ZeroCopyFallback::SpansItems => self.spans_items,
            ZeroCopyFallback::NotFrozen => self.not_frozen,
            ZeroCopyFallback::RefCountSaturated => self.ref_count_saturated,
        }
    }

    /// Counts one fallback for `reason` (the arena, when a pointer falls back to a copy).
    pub fn count(&mut self, reason: ZeroCopyFallback) {
        let c = match reason {
            ZeroCopyFallback::NoPinnedMemory => &mut self.no_pinned_memory,
            ZeroCopyFallback::NotPinned => &mut self.not_pinned,
            ZeroCopyFallback::OtherPinnedMemory => &mut self.other_pinned_memory,
            ZeroCopyFallback::SpansItems => &mut self.spans_items,
            ZeroCopyFallback::NotFrozen => &mut self.not_frozen,
            ZeroCopyFallback::RefCountSaturated => &mut self.ref_count_saturated,
        };
        *c += 1;
    }
}
