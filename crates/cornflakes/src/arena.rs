//! The per-request arena: copied field data and object lists live here until the batch ends.

use std::cell::Cell;

use bumpalo::Bump;

use crate::mem::{Keeper, PinnedMemory, PinnedRef, RcBuf};

pub use crate::mem::{ZeroCopyFallback, ZeroCopyFallbacks};

/// A per-request bump arena, plus the two settings the hybrid pointer needs: the zero-copy
/// threshold and the pinned memory to recover pointers from.
///
/// The arena starts small and grows in chunks as needed; [`reset`](Self::reset) after each
/// batch keeps the largest chunk for reuse. Nothing is reserved up front.
///
/// Thresholds: the process default normally ([`crate::threshold::default_threshold`]:
/// [`DEFAULT_THRESHOLD`](crate::threshold::DEFAULT_THRESHOLD) unless `CORNFLAKES_THRESHOLD` or `CORNFLAKES_CALIBRATION` says
/// otherwise, resolved once per process); `0` makes every pinned field zero-copy;
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
/// # Growth: high-water mark and limit
/// An arena that is never reset keeps everything allocated in it (tens of bytes per small
/// decoded request whose objects are kept), so a long-lived one grows without bound.
/// [`high_water_bytes`](Self::high_water_bytes) is the most the arena has held (chunk bytes,
/// as [`allocated_bytes`](Self::allocated_bytes)); [`set_limit`](Self::set_limit) bounds it: once
/// the arena holds more than the limit, decoding into it fails with
/// [`DecodeErrorKind::ArenaLimit`](crate::DecodeErrorKind::ArenaLimit) and
/// [`check_limit`](Self::check_limit) (for code that builds objects) with [`ArenaFull`],
/// instead of growing further. The check is made when a request starts (a decode, or your
/// `check_limit()`), so one request may take the arena past the limit, the next one is
/// refused. Setting fields never fails: the limit is a guard for the loop, not an allocator
/// error in the middle of a request.
///
/// ```
/// use cornflakes::{Arena, CFString, CornflakesObj, DecodeErrorKind, handwritten::GetM};
/// let wire = {
///     let a = Arena::new();
///     let mut m = GetM::new_in(&a);
///     m.set_id(7);
///     m.get_mut_keys().append(CFString::new("user:1", &a)); // decoding it allocates a list
///     m.serialize_to_vec()
/// };
/// let mut arena = Arena::new().with_limit(64 * 1024);
/// for _ in 0..10_000 {
///     // The per-request pattern: everything allocated for the request is freed after it.
///     let id = arena.scope(|a| GetM::deserialize(&wire, a).map(|m| m.get_id())).unwrap();
///     assert_eq!(id, 7);
/// }
/// assert!(arena.high_water_bytes() <= 64 * 1024);
/// // Never resetting it (here the objects are kept): refused once past the limit, never
/// // an unbounded heap.
/// let mut kept = Vec::new();
/// let mut refused = None;
/// for _ in 0..100_000 {
///     match GetM::deserialize(&wire, &arena) {
///         Ok(m) => kept.push(m),
///         Err(e) => {
///             refused = Some(e);
///             break;
///         }
///     }
/// }
/// let err = refused.expect("the limit stops the growth");
/// assert!(matches!(err.kind(), DecodeErrorKind::ArenaLimit { .. }), "{err}");
/// assert!(arena.high_water_bytes() > 64 * 1024);
/// ```
///
/// # Zero-copy fallbacks
/// A value at least the threshold long that cannot be sent zero-copy (see
/// [`ZeroCopyFallback`]) is copied and counted; read the counters with
/// [`zero_copy_fallbacks`](Self::zero_copy_fallbacks).
pub struct Arena {
    bump: Bump,
    threshold: usize,
    /// The least length a pinned buffer in hand is referenced at: the threshold, but never 0
    /// (an empty value is no descriptor). Kept beside the threshold so that the test is one
    /// compare ([`LeafList::append_rcbuf_ref`](crate::LeafList::append_rcbuf_ref)).
    zero_copy_from: usize,
    mem: Option<PinnedMemory>,
    fallbacks: Cell<ZeroCopyFallbacks>,
    /// The most `allocated_bytes` seen at a reset or a query.
    high_water: Cell<usize>,
    limit: Option<usize>,
    /// Pinned buffers given to the arena's objects ([`keep`](Self::keep)), released at reset.
    kept: Keeper,
}

/// The arena holds more than its limit ([`Arena::check_limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaFull {
    /// Bytes the arena holds.
    pub allocated: usize,
    /// Its limit ([`Arena::set_limit`]).
    pub limit: usize,
}

impl std::fmt::Display for ArenaFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the arena holds {} bytes, above its limit of {}: reset it between requests (`Arena::scope`) or raise `Arena::set_limit`",
            self.allocated, self.limit
        )
    }
}

impl std::error::Error for ArenaFull {}

impl Arena {
    /// An arena with no pinned memory: every field is copied. Its threshold is the process
    /// default ([`crate::threshold::default_threshold`]).
    pub fn new() -> Arena {
        let threshold = crate::threshold::default_threshold();
        Arena {
            bump: Bump::with_capacity(16 * 1024),
            threshold,
            zero_copy_from: threshold.max(1),
            mem: None,
            fallbacks: Cell::new(ZeroCopyFallbacks::default()),
            high_water: Cell::new(0),
            limit: None,
            kept: Keeper::default(),
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
        self.set_threshold(threshold);
        self
    }

    /// Sets the zero-copy threshold.
    pub fn set_threshold(&mut self, threshold: usize) {
        self.threshold = threshold;
        self.zero_copy_from = threshold.max(1);
    }

    /// The zero-copy threshold.
    #[inline]
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// The least length of a pinned buffer in hand that is referenced rather than copied or
    /// borrowed: the threshold, or 1 when it is 0.
    #[inline]
    pub(crate) fn zero_copy_from(&self) -> usize {
        self.zero_copy_from
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
        self.note_high_water();
        self.kept.clear();
        self.bump.reset();
    }

    /// Keeps `buf` until the next [`reset`](Self::reset) (or the arena's drop) and returns a
    /// view of it for the arena's objects: how an object holds a pinned buffer it was given
    /// rather than borrowed ([`CFPtr::from_rcbuf`](crate::CFPtr::from_rcbuf)), so that objects
    /// themselves own nothing and need no drop.
    ///
    /// ```
    /// use cornflakes::{Arena, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let mut arena = Arena::with_memory(&mem);
    /// let buf = mem.alloc_copy(&[5u8; 900]).unwrap();
    /// let probe = buf.clone();
    /// let view = arena.keep(buf);
    /// assert_eq!((view.len(), probe.ref_count()), (900, 2));
    /// arena.reset(); // the arena's reference goes
    /// assert_eq!(probe.ref_count(), 1);
    /// ```
    #[inline]
    pub fn keep(&self, buf: RcBuf) -> PinnedRef<'_> {
        self.kept.keep(buf)
    }

    fn note_high_water(&self) -> usize {
        let now = self.bump.allocated_bytes();
        let hw = self.high_water.get().max(now);
        self.high_water.set(hw);
        hw
    }

    /// The most bytes the arena has held (its chunks, as
    /// [`allocated_bytes`](Self::allocated_bytes)) since it was created, measured at each
    /// [`reset`](Self::reset) and at this call.
    pub fn high_water_bytes(&self) -> usize {
        self.note_high_water()
    }

    /// Bounds the arena: once it holds more than `limit` bytes (its chunks, at least the first
    /// one of about 20 KB), decoding into it and [`check_limit`](Self::check_limit) fail
    /// instead of letting it grow. `None` (the default) removes the bound.
    pub fn set_limit(&mut self, limit: Option<usize>) {
        self.limit = limit;
    }

    /// Sets the limit (builder form of [`set_limit`](Self::set_limit)).
    pub fn with_limit(mut self, limit: usize) -> Arena {
        self.limit = Some(limit);
        self
    }

    /// The limit, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// `Err` when the arena holds more than its limit: call it before building a request's
    /// objects (decoding calls it for you).
    #[inline]
    pub fn check_limit(&self) -> Result<(), ArenaFull> {
        match self.limit {
            Some(limit) if self.bump.allocated_bytes() > limit => Err(ArenaFull {
                allocated: self.bump.allocated_bytes(),
                limit,
            }),
            _ => Ok(()),
        }
    }

    /// [`check_limit`](Self::check_limit) as a decode error.
    #[inline]
    pub(crate) fn check_limit_for_decode(&self) -> Result<(), crate::DecodeError> {
        self.check_limit().map_err(|e| {
            crate::DecodeError::new(
                crate::DecodeErrorKind::ArenaLimit {
                    allocated: e.allocated,
                    limit: e.limit,
                },
                0,
            )
        })
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
            .field("high_water_bytes", &self.high_water.get())
            .field("limit", &self.limit)
            .field("pinned", &self.mem.is_some())
            .field("zero_copy_fallbacks", &self.fallbacks.get())
            .finish()
    }
}
