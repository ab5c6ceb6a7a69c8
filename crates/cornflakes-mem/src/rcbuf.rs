//! [`RcBuf`]: a shared, reference-counted view of pinned memory, and [`RcBufMut`], the unique
//! form used to fill a fresh buffer.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, RangeBounds};
use std::ptr::NonNull;

use super::pool::{Chunk, Inner};
use super::region::Region;

/// Count value marking an item held by one [`RcBufMut`]: pointer recovery refuses it.
pub(crate) const MUT_FLAG: u32 = 1 << 31;
/// Largest reference count an item may reach; one more reference is a [`RefCountOverflow`].
pub const MAX_REFS: u32 = MUT_FLAG - 1;

/// A reference count would pass [`MAX_REFS`]. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefCountOverflow;

impl fmt::Display for RefCountOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pinned buffer reference count would exceed {MAX_REFS}")
    }
}

impl std::error::Error for RefCountOverflow {}

/// A reference-counted view `(item, offset, len)` of pinned memory.
///
/// Cloning adds one reference and dropping removes one; the last drop returns the item to its
/// pool. Cloning and slicing never copy bytes. An `RcBuf` keeps its [`PinnedMemory`]'s regions
/// mapped, so it cannot dangle.
///
/// `RcBuf` is neither `Send` nor `Sync`: counts are per-core plain integers, so moving a buffer
/// to another thread is a compile error:
///
/// ```compile_fail
/// let mem = cornflakes_mem::PinnedMemory::with_defaults().unwrap();
/// let buf = mem.alloc_copy(b"x").unwrap();
/// std::thread::spawn(move || drop(buf)); // error: `*const ()` cannot be sent between threads
/// ```
///
/// [`PinnedMemory`]: crate::PinnedMemory
pub struct RcBuf {
    ptr: NonNull<u8>,
    len: u32,
    /// Offset of `ptr` from the start of its item.
    off: u32,
    refcnt: NonNull<Cell<u32>>,
    chunk: NonNull<Chunk>,
    _not_send: PhantomData<*const ()>,
}

impl RcBuf {
    /// Builds a view of a live item after incrementing its count.
    ///
    /// # Safety
    /// `ptr..ptr+len` lies inside the item whose count is `refcnt`, `off` is `ptr`'s offset in
    /// it, the count is in `1..=MAX_REFS` and `chunk` is the item's chunk.
    #[inline]
    pub(crate) unsafe fn recovered(
        ptr: NonNull<u8>,
        len: usize,
        off: usize,
        refcnt: NonNull<Cell<u32>>,
        chunk: NonNull<Chunk>,
    ) -> Result<RcBuf, RefCountOverflow> {
        // SAFETY: the caller guarantees `refcnt` points at a live count.
        let rc = unsafe { refcnt.as_ref() };
        let n = rc.get();
        if n >= MAX_REFS {
            return Err(RefCountOverflow);
        }
        rc.set(n + 1);
        Ok(RcBuf {
            ptr,
            len: len as u32,
            off: off as u32,
            refcnt,
            chunk,
            _not_send: PhantomData,
        })
    }

    #[inline]
    fn count(&self) -> &Cell<u32> {
        // SAFETY: our reference keeps the item, and so its chunk and count array, alive.
        unsafe { self.refcnt.as_ref() }
    }

    #[inline]
    fn chunk(&self) -> &Chunk {
        // SAFETY: as in `count`.
        unsafe { self.chunk.as_ref() }
    }

    /// Length of the view.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the view is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The viewed bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` is inside a live item; items are only written through an
        // `RcBufMut`, which cannot coexist with an `RcBuf` of the same item.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }

    /// Address of the first viewed byte (for a device descriptor).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Number of live references to the underlying item.
    pub fn ref_count(&self) -> u32 {
        self.count().get()
    }

    /// Overwrites the item's reference count. For tests of overflow handling only.
    ///
    /// # Safety
    /// The count must be restored to the true number of live references before any of them is
    /// dropped, or the item is freed early or never.
    #[doc(hidden)]
    pub unsafe fn set_ref_count_for_test(&self, n: u32) {
        self.count().set(n)
    }

    /// Another reference, or an error when the count is saturated.
    #[inline]
    pub fn try_clone(&self) -> Result<RcBuf, RefCountOverflow> {
        let rc = self.count();
        let n = rc.get();
        if n >= MAX_REFS {
            return Err(RefCountOverflow);
        }
        rc.set(n + 1);
        Ok(RcBuf { ..*self })
    }

    /// A new reference to `range` of this view (counted like a clone).
    ///
    /// # Panics
    /// If the range is out of bounds or the count is saturated; see [`try_slice`](Self::try_slice).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> RcBuf {
        let (s, e) = bounds(range, self.len());
        match self.try_slice(s, e - s) {
            Ok(Some(b)) => b,
            Ok(None) => panic!("RcBuf::slice {s}..{e} out of bounds of length {}", self.len),
            Err(e) => panic!("RcBuf::slice: {e}"),
        }
    }

    /// A new reference to `start..start+len`, `Ok(None)` when that is out of bounds.
    #[inline]
    pub fn try_slice(&self, start: usize, len: usize) -> Result<Option<RcBuf>, RefCountOverflow> {
        match start.checked_add(len) {
            Some(end) if end <= self.len() => {}
            _ => return Ok(None),
        }
        let mut b = self.try_clone()?;
        // SAFETY: start <= len, so the pointer stays inside the view.
        b.ptr = unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) };
        b.off += start as u32;
        b.len = len as u32;
        Ok(Some(b))
    }

    /// The region this buffer lives in (its registration handle is there).
    #[inline]
    pub fn region(&self) -> &Region {
        // SAFETY: regions outlive every item in them.
        unsafe { &*self.chunk().region }
    }

    /// Offset of the first viewed byte from the start of its region.
    #[inline]
    pub fn region_offset(&self) -> usize {
        self.ptr.as_ptr() as usize - self.region().base() as usize
    }

    /// Offset of the view inside its item.
    pub fn item_offset(&self) -> usize {
        self.off as usize
    }

    /// Size of the underlying item (its size class).
    pub fn item_capacity(&self) -> usize {
        1 << self.chunk().shift
    }
}

impl RcBuf {
    /// A borrowed view of all of this buffer, holding no reference of its own (the borrow keeps
    /// the item alive). See [`PinnedRef`].
    #[inline]
    pub fn pinned(&self) -> PinnedRef<'_> {
        PinnedRef {
            ptr: self.ptr,
            len: self.len,
            off: self.off,
            refcnt: self.refcnt,
            chunk: self.chunk,
            _borrow: PhantomData,
        }
    }

    /// A borrowed view of `start..start+len` of this buffer (no reference taken), `None` when
    /// that is out of bounds.
    #[inline]
    pub fn pinned_slice(&self, start: usize, len: usize) -> Option<PinnedRef<'_>> {
        self.pinned().sub(start, len)
    }
}

/// A view of pinned memory borrowed for `'a`, holding no reference count: what an object keeps
/// for a zero-copy value whose bytes outlive it (a stored value, a received packet).
///
/// The borrow keeps the item alive, so while the view lives its bytes cannot be freed or
/// rewritten; a reference is taken only where one must outlive the borrow — a descriptor that
/// the device completes later — with [`to_rcbuf`](Self::to_rcbuf). So building an object from
/// borrowed values and dropping it touches no count, and the object needs no drop.
///
/// ```
/// let mem = cornflakes_mem::PinnedMemory::with_defaults().unwrap();
/// let buf = mem.alloc_copy(&[7u8; 600]).unwrap();
/// let r = mem.recover_ref(&buf[100..300]).expect("inside one live item");
/// assert_eq!((r.len(), buf.ref_count()), (200, 1)); // no reference taken
/// let desc = r.to_rcbuf(); // a descriptor's reference
/// assert_eq!((desc.len(), buf.ref_count()), (200, 2));
/// ```
///
/// A view cannot outlive what lends it:
///
/// ```compile_fail
/// let mem = cornflakes_mem::PinnedMemory::with_defaults().unwrap();
/// let view = {
///     let buf = mem.alloc_copy(&[1u8; 600]).unwrap();
///     buf.pinned() // error: `buf` does not live long enough
/// };
/// ```
///
/// Like [`RcBuf`] it is neither `Send` nor `Sync`:
///
/// ```compile_fail
/// let mem = cornflakes_mem::PinnedMemory::with_defaults().unwrap();
/// let buf = mem.alloc_copy(&[1u8; 600]).unwrap();
/// let view = buf.pinned();
/// std::thread::scope(|s| {
///     s.spawn(move || view.len()); // error: `NonNull<u8>` cannot be sent between threads
/// });
/// ```
#[derive(Clone, Copy)]
pub struct PinnedRef<'a> {
    ptr: NonNull<u8>,
    len: u32,
    off: u32,
    refcnt: NonNull<Cell<u32>>,
    chunk: NonNull<Chunk>,
    _borrow: PhantomData<&'a RcBuf>,
}

impl<'a> PinnedRef<'a> {
    /// Builds a view of a live item without touching its count.
    ///
    /// # Safety
    /// `ptr..ptr+len` lies inside the item whose count is `refcnt` (`off` is `ptr`'s offset in
    /// it, `chunk` its chunk), and something else keeps the item's count at least 1, and its
    /// bytes unchanged, for all of `'a`.
    #[inline]
    pub(crate) unsafe fn borrowed(
        ptr: NonNull<u8>,
        len: usize,
        off: usize,
        refcnt: NonNull<Cell<u32>>,
        chunk: NonNull<Chunk>,
    ) -> PinnedRef<'a> {
        PinnedRef {
            ptr,
            len: len as u32,
            off: off as u32,
            refcnt,
            chunk,
            _borrow: PhantomData,
        }
    }

    /// The same view with another lifetime.
    ///
    /// # Safety
    /// The item stays alive (count at least 1) and unchanged for all of `'b`.
    #[inline]
    pub(crate) unsafe fn extend_to<'b>(self) -> PinnedRef<'b> {
        PinnedRef {
            ptr: self.ptr,
            len: self.len,
            off: self.off,
            refcnt: self.refcnt,
            chunk: self.chunk,
            _borrow: PhantomData,
        }
    }

    /// Length of the view.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the view is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The viewed bytes, for as long as the borrow.
    #[inline]
    pub fn as_slice(&self) -> &'a [u8] {
        // SAFETY: `ptr..ptr+len` is inside an item kept alive, unchanged, for `'a` (the
        // constructors' contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }

    /// Address of the first viewed byte (for a device descriptor).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// A view of `start..start+len` of this view, `None` when that is out of bounds.
    #[inline]
    pub fn sub(&self, start: usize, len: usize) -> Option<PinnedRef<'a>> {
        match start.checked_add(len) {
            Some(end) if end <= self.len() => {}
            _ => return None,
        }
        Some(PinnedRef {
            // SAFETY: start <= len, so the pointer stays inside the view.
            ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) },
            len: len as u32,
            off: self.off + start as u32,
            ..*self
        })
    }

    /// A counted reference to the same bytes (the count + 1), or an error when the count is
    /// saturated: what a descriptor holds until its completion.
    #[inline]
    pub fn try_to_rcbuf(&self) -> Result<RcBuf, RefCountOverflow> {
        // SAFETY: the view's contract: the item is live for `'a`, `ptr..ptr+len` inside it.
        unsafe {
            RcBuf::recovered(
                self.ptr,
                self.len(),
                self.off as usize,
                self.refcnt,
                self.chunk,
            )
        }
    }

    /// A counted reference to the same bytes.
    ///
    /// # Panics
    /// When the count is already [`MAX_REFS`], as [`RcBuf::clone`] does; use
    /// [`try_to_rcbuf`](Self::try_to_rcbuf) to handle that case.
    #[inline]
    pub fn to_rcbuf(&self) -> RcBuf {
        match self.try_to_rcbuf() {
            Ok(b) => b,
            Err(e) => overflow_panic(e),
        }
    }

    /// The region the bytes live in (its registration handle is there).
    #[inline]
    pub fn region(&self) -> &'a Region {
        // SAFETY: the item is live for `'a`, and regions outlive every item in them.
        unsafe { &*self.chunk.as_ref().region }
    }

    /// Offset of the first viewed byte from the start of its region.
    #[inline]
    pub fn region_offset(&self) -> usize {
        self.ptr.as_ptr() as usize - self.region().base() as usize
    }

    /// Number of live references to the underlying item (the view holds none).
    pub fn ref_count(&self) -> u32 {
        // SAFETY: the item, and so its chunk's count array, is live for `'a`.
        unsafe { self.refcnt.as_ref() }.get()
    }
}

impl Deref for PinnedRef<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for PinnedRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for PinnedRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for PinnedRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedRef")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("refs", &self.ref_count())
            .finish()
    }
}

impl Clone for RcBuf {
    /// Adds one reference.
    ///
    /// # Panics
    /// When the count is already [`MAX_REFS`] (as `Arc` aborts on overflow); use
    /// [`try_clone`](Self::try_clone) to handle that case.
    #[inline]
    fn clone(&self) -> Self {
        match self.try_clone() {
            Ok(b) => b,
            Err(e) => overflow_panic(e),
        }
    }
}

#[cold]
#[inline(never)]
fn overflow_panic(e: RefCountOverflow) -> ! {
    panic!("{e}")
}

impl Drop for RcBuf {
    #[inline]
    fn drop(&mut self) {
        let rc = self.count();
        let n = rc.get() - 1;
        rc.set(n);
        if n == 0 {
            release(self.chunk, self.ptr.as_ptr() as usize - self.off as usize);
        }
    }
}

#[cold]
#[inline(never)]
fn release(chunk: NonNull<Chunk>, item_base: usize) {
    // SAFETY: the item's count just reached 0; its chunk and memory are still owned by `inner`.
    unsafe {
        let c = chunk.as_ref();
        let idx = ((item_base - c.base as usize) >> c.shift) as u32;
        Inner::release(c.inner, chunk.as_ptr(), idx);
    }
}

impl Deref for RcBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for RcBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for RcBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for RcBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RcBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("refs", &self.ref_count())
            .finish()
    }
}

/// A uniquely owned pinned buffer being filled (a fresh allocation or a receive slot).
///
/// Pointer recovery refuses its memory until [`freeze`](Self::freeze) turns it into an
/// [`RcBuf`]. Its bytes are always initialised (mapped zeroed, never de-initialised).
pub struct RcBufMut {
    ptr: NonNull<u8>,
    len: u32,
    cap: u32,
    refcnt: NonNull<Cell<u32>>,
    chunk: NonNull<Chunk>,
    _not_send: PhantomData<*const ()>,
}

impl RcBufMut {
    /// # Safety
    /// `idx` is a free item of `chunk`, a chunk of a live `Inner`, and `len` ≤ its size.
    pub(crate) unsafe fn from_free_item(chunk: NonNull<Chunk>, idx: u32, len: usize) -> RcBufMut {
        // SAFETY: caller's contract.
        let c = unsafe { chunk.as_ref() };
        let rc = &c.refcnts[idx as usize];
        debug_assert_eq!(rc.get(), 0);
        rc.set(MUT_FLAG);
        // SAFETY: item `idx` lies inside the chunk.
        let ptr = unsafe { NonNull::new_unchecked(c.base.add((idx as usize) << c.shift)) };
        RcBufMut {
            ptr,
            len: len as u32,
            cap: 1 << c.shift,
            refcnt: NonNull::from(rc),
            chunk,
            _not_send: PhantomData,
        }
    }

    /// Current length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size of the item (the most `set_len` accepts).
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// Sets the length; `len` is clamped to the capacity. The bytes are initialised already.
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.cap as usize) as u32;
    }

    /// The whole item, regardless of the current length (for a device or `recvmmsg` to fill).
    pub fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: we own the item exclusively; all its bytes are initialised.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap as usize) }
    }

    /// Address of the first byte.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The region this buffer lives in.
    pub fn region(&self) -> &Region {
        // SAFETY: regions outlive every item in them.
        unsafe { &*self.chunk.as_ref().region }
    }

    /// Offset of the first byte from the start of its region.
    pub fn region_offset(&self) -> usize {
        self.ptr.as_ptr() as usize - self.region().base() as usize
    }

    /// Ends exclusive access: the first `len` bytes become a shared [`RcBuf`] with count 1.
    pub fn freeze(self) -> RcBuf {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: we hold the item exclusively; its count is ours to set.
        unsafe { this.refcnt.as_ref() }.set(1);
        RcBuf {
            ptr: this.ptr,
            len: this.len,
            off: 0,
            refcnt: this.refcnt,
            chunk: this.chunk,
            _not_send: PhantomData,
        }
    }
}

impl Deref for RcBufMut {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: exclusive item, `len` ≤ capacity, bytes initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }
}

impl DerefMut for RcBufMut {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize) }
    }
}

impl Drop for RcBufMut {
    fn drop(&mut self) {
        // SAFETY: we hold the item exclusively; reset its count before returning it.
        unsafe { self.refcnt.as_ref() }.set(0);
        release(self.chunk, self.ptr.as_ptr() as usize);
    }
}

impl fmt::Debug for RcBufMut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RcBufMut")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

fn bounds(range: impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    use std::ops::Bound::*;
    let s = match range.start_bound() {
        Included(&s) => s,
        Excluded(&s) => s.saturating_add(1),
        Unbounded => 0,
    };
    let e = match range.end_bound() {
        Included(&e) => e.saturating_add(1),
        Excluded(&e) => e,
        Unbounded => len,
    };
    (s, e.max(s))
}
