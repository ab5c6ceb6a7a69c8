//! The per-request arena: copied field data and object lists live here until the batch ends.

use bumpalo::Bump;

use crate::mem::PinnedMemory;

/// The default zero-copy threshold in bytes (paper §5): fields at least this long are sent by
/// scatter-gather when their memory is pinned.
pub const DEFAULT_THRESHOLD: usize = 512;

/// A per-request bump arena, plus the two settings the hybrid pointer needs: the zero-copy
/// threshold and the pinned memory to recover pointers from.
///
/// The arena starts small and grows in chunks as needed; [`reset`](Self::reset) after each
/// batch keeps the largest chunk for reuse. Nothing is reserved up front.
///
/// Thresholds: the process default normally ([`crate::threshold::default_threshold`]:
/// [`DEFAULT_THRESHOLD`] unless `CORNFLAKES_THRESHOLD` or `CORNFLAKES_CALIBRATION` says
/// otherwise, resolved once per process); `0` makes every pinned field zero-copy;
/// `usize::MAX` copies every field (the ablations of the paper).
pub struct Arena {
    bump: Bump,
    threshold: usize,
    mem: Option<PinnedMemory>,
}

impl Arena {
    /// An arena with no pinned memory: every field is copied. Its threshold is the process
    /// default ([`crate::threshold::default_threshold`]).
    pub fn new() -> Arena {
        Arena {
            bump: Bump::with_capacity(16 * 1024),
            threshold: crate::threshold::default_threshold(),
            mem: None,
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
            .finish()
    }
}
