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
