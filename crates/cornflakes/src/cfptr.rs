//! Hybrid pointers: a field's bytes, either to be copied at send time or sent by scatter-gather.

use std::cell::Cell;
use std::fmt;
use std::str::Utf8Error;

use crate::arena::Arena;
use crate::mem::{PinnedRef, RcBuf};

/// A bytes or string field's value (paper Listing 3).
///
/// The copy-or-zero-copy decision is made once, when the pointer is built ([`CFPtr::new`]):
/// shorter than the arena's threshold → copied into the arena; otherwise, if the bytes lie in a
/// live pinned buffer, that buffer is recovered and referenced; otherwise copied after all, and
/// counted in the arena's [`zero_copy_fallbacks`](Arena::zero_copy_fallbacks).
///
/// A pointer owns nothing: both kinds borrow bytes that live at least as long as the object
/// (`'a`), so a pointer is `Copy` and an object needs no drop. A zero-copy value is a
/// [`PinnedRef`], a view of pinned memory holding no reference count: its bytes are a stored
/// value or a received packet that outlives the object, or a pinned buffer given to the
/// arena, which keeps it until its reset ([`Arena::keep`]). A send takes a counted reference
/// ([`PinnedRef::to_rcbuf`]) only for what outlives the object: each descriptor, until the
/// device is done with it.
#[derive(Clone, Copy)]
pub enum CFPtr<'a> {
    /// Bytes copied into the transmit buffer at send time. They live in the arena, or in a
    /// received packet or caller data that outlives the object.
    Copy(&'a [u8]),
    /// A view of pinned memory, sent as its own scatter-gather entry.
    ZeroCopy(PinnedRef<'a>),
}

impl<'a> CFPtr<'a> {
    /// Builds a pointer from any bytes, applying the hybrid heuristic of `arena`.
    ///
    /// The threshold is compared first; only a value at least the threshold long goes on to
    /// pointer recovery (a table probe and the item's reference count).
    ///
    /// The bytes need not outlive the object: a zero-copy value takes a reference that the
    /// arena keeps until its reset ([`Arena::keep`]). For bytes that do outlive it,
    /// [`new_ref`](Self::new_ref) takes none.
    #[inline(always)]
    pub fn new(data: &[u8], arena: &'a Arena) -> CFPtr<'a> {
        if data.len() < arena.threshold() {
            return CFPtr::Copy(arena.copy_slice(data));
        }
        if let Some(mem) = arena.memory() {
            if let Some(buf) = mem.recover_ptr(data) {
                return CFPtr::ZeroCopy(arena.keep(buf));
            }
        }
        CFPtr::Copy(Self::fallback(data, arena))
    }

    /// [`new`](Self::new) for bytes that outlive the object (a value in a store, a received
    /// packet): the same choice, except that a value shorter than the threshold is borrowed
    /// instead of copied into the arena, so its bytes are copied once, into the transmit buffer
    /// at send time. A value at least the threshold long is referenced by pointer recovery (or
    /// copied and counted when that fails), as with `new`, but borrowed: no reference count is
    /// taken until a send posts it.
    ///
    /// ```
    /// use cornflakes::{Arena, CFPtr, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let arena = Arena::with_memory(&mem).with_threshold(512);
    /// let store = [mem.alloc_copy(b"tiny").unwrap(), mem.alloc_copy(&[1u8; 600]).unwrap()];
    /// let (s, b) = (CFPtr::new_ref(&store[0], &arena), CFPtr::new_ref(&store[1], &arena));
    /// assert!(!s.is_zero_copy() && b.is_zero_copy());
    /// assert_eq!(s.as_bytes().as_ptr(), store[0].as_ptr()); // borrowed, not copied
    /// assert_eq!(store[1].ref_count(), 1); // referenced, no count taken
    /// ```
    #[inline(always)]
    pub fn new_ref(data: &'a [u8], arena: &'a Arena) -> CFPtr<'a> {
        if data.len() < arena.threshold() {
            return CFPtr::Copy(data);
        }
        Self::reference_or_copy(data, arena)
    }

    /// [`new_ref`](Self::new_ref) for a value at least the threshold long: a view when its
    /// bytes lie in one live pinned item, else copied and counted.
    #[inline(always)]
    pub(crate) fn reference_or_copy(data: &'a [u8], arena: &'a Arena) -> CFPtr<'a> {
        if let Some(mem) = arena.memory() {
            if let Some(r) = mem.recover_ref(data) {
                return CFPtr::ZeroCopy(r);
            }
        }
        CFPtr::Copy(Self::fallback(data, arena))
    }

    /// A value at least the threshold long that could not be referenced: counted, then copied.
    /// Out of line, so the zero-copy path keeps its registers; it returns the copy (two
    /// registers), not a `CFPtr` (through memory, which the zero-copy path's `RcBuf` would then
    /// share: built on the stack and copied into its place).
    #[cold]
    #[inline(never)]
    fn fallback(data: &[u8], arena: &'a Arena) -> &'a [u8] {
        if !data.is_empty() {
            arena.count_fallback(data);
        }
        arena.copy_slice(data)
    }

    /// Uses an existing pinned buffer: referenced when at least the threshold long (the arena
    /// keeps the buffer until its reset, [`Arena::keep`]), else copied into the arena (the
    /// buffer is given up, so its bytes must be kept somewhere). When the buffer outlives the
    /// object, [`from_rcbuf_ref`](Self::from_rcbuf_ref) avoids both.
    #[inline]
    pub fn from_rcbuf(buf: RcBuf, arena: &'a Arena) -> CFPtr<'a> {
        if buf.len() >= arena.threshold() && !buf.is_empty() {
            CFPtr::ZeroCopy(arena.keep(buf))
        } else {
            CFPtr::Copy(arena.copy_slice(&buf))
        }
    }

    /// Uses a pinned buffer that outlives the object (a stored value, say): referenced when at
    /// least the threshold long, else borrowed, so its bytes are copied once, into the transmit
    /// buffer at send time. Either way the buffer's reference count is not touched (a send
    /// takes one per descriptor), and unlike [`from_rcbuf`](Self::from_rcbuf) a short value is
    /// not copied into the arena first.
    ///
    /// ```
    /// use cornflakes::{Arena, CFPtr, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let arena = Arena::with_memory(&mem).with_threshold(512);
    /// let (small, big) = (mem.alloc_copy(b"tiny").unwrap(), mem.alloc_copy(&[1u8; 600]).unwrap());
    /// let (s, b) = (CFPtr::from_rcbuf_ref(&small, &arena), CFPtr::from_rcbuf_ref(&big, &arena));
    /// assert!(!s.is_zero_copy() && b.is_zero_copy());
    /// assert_eq!((small.ref_count(), big.ref_count()), (1, 1));
    /// assert_eq!(s.as_bytes().as_ptr(), small.as_ptr()); // borrowed, not copied
    /// ```
    #[inline]
    pub fn from_rcbuf_ref(buf: &'a RcBuf, arena: &Arena) -> CFPtr<'a> {
        if buf.len() >= arena.zero_copy_from() {
            CFPtr::ZeroCopy(buf.pinned())
        } else {
            CFPtr::Copy(buf.as_slice())
        }
    }

    /// A value read in place from a received packet (`data` lies inside `pkt`, e.g. a view's
    /// getter read it): a slice of the packet, referenced when at least the threshold long,
    /// else borrowed — what [`deserialize_rcbuf`](crate::DecodeObj::deserialize_rcbuf) makes of
    /// a value, without decoding the object. No recovery and no count taken; bytes that are
    /// not inside `pkt` are borrowed.
    ///
    /// ```
    /// use cornflakes::{Arena, CFPtr, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let arena = Arena::with_memory(&mem).with_threshold(512);
    /// let pkt = mem.alloc_copy(&[7u8; 1000]).unwrap();
    /// let (big, small) = (&pkt[100..700], &pkt[0..10]);
    /// let (b, s) = (CFPtr::from_packet(&pkt, big, &arena), CFPtr::from_packet(&pkt, small, &arena));
    /// assert!(b.is_zero_copy() && !s.is_zero_copy());
    /// assert_eq!(b.as_bytes().as_ptr(), big.as_ptr());
    /// assert_eq!(pkt.ref_count(), 1);
    /// ```
    #[inline]
    pub fn from_packet(pkt: &'a RcBuf, data: &'a [u8], arena: &Arena) -> CFPtr<'a> {
        if data.len() >= arena.zero_copy_from() {
            let off = (data.as_ptr() as usize).wrapping_sub(pkt.as_ptr() as usize);
            if let Some(b) = pkt.pinned_slice(off, data.len()) {
                return CFPtr::ZeroCopy(b);
            }
        }
        CFPtr::Copy(data)
    }

    /// Borrows bytes that outlive the object; they are copied at send time, never before.
    #[inline]
    pub const fn borrowed(data: &'a [u8]) -> CFPtr<'a> {
        CFPtr::Copy(data)
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            CFPtr::Copy(b) => b,
            CFPtr::ZeroCopy(r) => r.as_slice(),
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            CFPtr::Copy(b) => b.len(),
            CFPtr::ZeroCopy(r) => r.len(),
        }
    }

    /// Whether the value is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the value goes out by scatter-gather.
    #[inline]
    pub fn is_zero_copy(&self) -> bool {
        matches!(self, CFPtr::ZeroCopy(_))
    }

    /// The view of pinned memory, for zero-copy values.
    #[inline]
    pub fn as_pinned(&self) -> Option<PinnedRef<'a>> {
        match *self {
            CFPtr::ZeroCopy(r) => Some(r),
            CFPtr::Copy(_) => None,
        }
    }

    /// A counted reference to a zero-copy value's bytes (one more reference, which outlives
    /// the object), `None` for a copied value.
    ///
    /// # Panics
    /// When the count is saturated, as [`RcBuf::clone`] does.
    #[inline]
    pub fn to_rcbuf(&self) -> Option<RcBuf> {
        self.as_pinned().map(|r| r.to_rcbuf())
    }
}

impl Default for CFPtr<'_> {
    fn default() -> Self {
        CFPtr::Copy(&[])
    }
}

impl PartialEq for CFPtr<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for CFPtr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_zero_copy() {
            "ZeroCopy"
        } else {
            "Copy"
        };
        f.debug_struct(kind).field("len", &self.len()).finish()
    }
}

/// A `bytes` field value.
#[derive(Clone, Default, PartialEq)]
pub struct CFBytes<'a>(pub CFPtr<'a>);

impl<'a> CFBytes<'a> {
    /// See [`CFPtr::new`].
    #[inline]
    pub fn new(data: &[u8], arena: &'a Arena) -> Self {
        CFBytes(CFPtr::new(data, arena))
    }

    /// See [`CFPtr::new_ref`]: for bytes that outlive the object, so a short value is borrowed
    /// (copied once, at send time) instead of copied into the arena now.
    #[inline]
    pub fn new_ref(data: &'a [u8], arena: &'a Arena) -> Self {
        CFBytes(CFPtr::new_ref(data, arena))
    }

    /// See [`CFPtr::from_rcbuf_ref`]: a pinned buffer that outlives the object (a stored
    /// value), referenced when at least the threshold long, else borrowed; no recovery, no
    /// count taken.
    #[inline]
    pub fn from_rcbuf_ref(buf: &'a RcBuf, arena: &Arena) -> Self {
        CFBytes(CFPtr::from_rcbuf_ref(buf, arena))
    }

    /// See [`CFPtr::from_packet`]: a value read in place from a received packet.
    #[inline]
    pub fn from_packet(pkt: &'a RcBuf, data: &'a [u8], arena: &Arena) -> Self {
        CFBytes(CFPtr::from_packet(pkt, data, arena))
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The hybrid pointer.
    #[inline]
    pub fn ptr(&self) -> &CFPtr<'a> {
        &self.0
    }

    /// The hybrid pointer, by value (a zero-copy reference moves out without a clone).
    #[inline]
    pub fn into_ptr(self) -> CFPtr<'a> {
        self.0
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> From<CFPtr<'a>> for CFBytes<'a> {
    fn from(p: CFPtr<'a>) -> Self {
        CFBytes(p)
    }
}

impl fmt::Debug for CFBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CFBytes({:?})", self.0)
    }
}

/// UTF-8 state of a [`CFString`]: 0 unchecked, 1 valid, 2 invalid.
const UNCHECKED: u8 = 0;
const VALID: u8 = 1;
const INVALID: u8 = 2;

/// A `string` field value. Bytes are never trimmed or altered; UTF-8 validity is checked once,
/// on the first access as `str`, and remembered.
#[derive(Clone, Default)]
pub struct CFString<'a> {
    ptr: CFPtr<'a>,
    utf8: Cell<u8>,
}

impl<'a> CFString<'a> {
    /// From a `&str` (valid by construction).
    #[inline]
    pub fn new(s: &str, arena: &'a Arena) -> Self {
        CFString {
            ptr: CFPtr::new(s.as_bytes(), arena),
            utf8: Cell::new(VALID),
        }
    }

    /// From a `&str` that outlives the object; see [`CFPtr::new_ref`].
    #[inline]
    pub fn new_ref(s: &'a str, arena: &'a Arena) -> Self {
        CFString {
            ptr: CFPtr::new_ref(s.as_bytes(), arena),
            utf8: Cell::new(VALID),
        }
    }

    /// A string read in place from a received packet (a view's getter checked it); see
    /// [`CFPtr::from_packet`].
    #[inline]
    pub fn from_packet(pkt: &'a RcBuf, s: &'a str, arena: &Arena) -> Self {
        CFString {
            ptr: CFPtr::from_packet(pkt, s.as_bytes(), arena),
            utf8: Cell::new(VALID),
        }
    }

    /// From bytes not yet checked (e.g. decoded from the wire).
    #[inline]
    pub fn from_ptr_unchecked_utf8(ptr: CFPtr<'a>) -> Self {
        CFString {
            ptr,
            utf8: Cell::new(UNCHECKED),
        }
    }

    /// The value as `str`, checking UTF-8 on first use.
    pub fn as_str(&self) -> Result<&str, Utf8Error> {
        let b = self.ptr.as_bytes();
        match self.utf8.get() {
            VALID => {
                // SAFETY: checked valid earlier (or built from `&str`), and the bytes of a
                // `CFPtr` never change while it lives.
                Ok(unsafe { std::str::from_utf8_unchecked(b) })
            }
            _ => match std::str::from_utf8(b) {
                Ok(s) => {
                    self.utf8.set(VALID);
                    Ok(s)
                }
                Err(e) => {
                    self.utf8.set(INVALID);
                    Err(e)
                }
            },
        }
    }

    /// The raw bytes (no UTF-8 check).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.ptr.as_bytes()
    }

    /// The hybrid pointer.
    #[inline]
    pub fn ptr(&self) -> &CFPtr<'a> {
        &self.ptr
    }

    /// The hybrid pointer, by value (a zero-copy reference moves out without a clone).
    #[inline]
    pub fn into_ptr(self) -> CFPtr<'a> {
        self.ptr
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.ptr.len()
    }

    /// Whether empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ptr.is_empty()
    }
}

impl PartialEq for CFString<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CFString<'_> {}

/// Compares the bytes with a `&str`, with no UTF-8 check needed: `get_key() == "k"`.
impl PartialEq<str> for CFString<'_> {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for CFString<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<CFString<'_>> for str {
    fn eq(&self, other: &CFString<'_>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<CFString<'_>> for &str {
    fn eq(&self, other: &CFString<'_>) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CFBytes<'_> {}

/// Compares the bytes with a byte slice: `get_val() == b"v"[..]`.
impl PartialEq<[u8]> for CFBytes<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl PartialEq<&[u8]> for CFBytes<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_bytes() == *other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for CFBytes<'_> {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_bytes() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for CFBytes<'_> {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_bytes() == *other
    }
}

impl fmt::Debug for CFString<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.as_bytes()) {
            Ok(s) if s.len() <= 64 => write!(f, "CFString({s:?})"),
            _ => write!(f, "CFString({:?})", self.ptr),
        }
    }
}
