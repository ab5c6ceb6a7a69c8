//! Arena-allocated lists for repeated fields, keeping their encoded sizes up to date.

use std::mem::ManuallyDrop;
use std::ops::{Index, IndexMut};

use bumpalo::collections::Vec as BVec;

use crate::arena::Arena;
use crate::cfptr::{CFBytes, CFPtr, CFString};
use crate::mem::{PinnedRef, RcBuf};
use crate::obj::{CornflakesObj, Sizes};
use crate::wire::{Demote, Encoder, Scalar, PAIR};

/// A string/bytes value type that can be a list element.
///
/// A [`LeafList`] never drops its elements: they are forgotten with the list's storage, which
/// the arena frees at its reset. A [`CFPtr`] owns nothing (both kinds borrow), so an
/// implementation must hold nothing that needs dropping.
pub trait Leaf<'a> {
    /// The hybrid pointer holding the value.
    fn cf_ptr(&self) -> &CFPtr<'a>;
    /// Wraps a decoded value.
    fn from_ptr(p: CFPtr<'a>) -> Self;
    /// The hybrid pointer, by value.
    fn into_ptr(self) -> CFPtr<'a>;
}

impl<'a> Leaf<'a> for CFPtr<'a> {
    #[inline]
    fn cf_ptr(&self) -> &CFPtr<'a> {
        self
    }
    #[inline]
    fn from_ptr(p: CFPtr<'a>) -> Self {
        p
    }
    #[inline]
    fn into_ptr(self) -> CFPtr<'a> {
        self
    }
}

impl<'a> Leaf<'a> for CFBytes<'a> {
    #[inline]
    fn cf_ptr(&self) -> &CFPtr<'a> {
        &self.0
    }
    #[inline]
    fn from_ptr(p: CFPtr<'a>) -> Self {
        CFBytes(p)
    }
    #[inline]
    fn into_ptr(self) -> CFPtr<'a> {
        self.0
    }
}

impl<'a> Leaf<'a> for CFString<'a> {
    #[inline]
    fn cf_ptr(&self) -> &CFPtr<'a> {
        self.ptr()
    }
    #[inline]
    fn from_ptr(p: CFPtr<'a>) -> Self {
        CFString::from_ptr_unchecked_utf8(p)
    }
    #[inline]
    fn into_ptr(self) -> CFPtr<'a> {
        CFString::into_ptr(self)
    }
}

/// A repeated string/bytes field.
///
/// Its storage is an arena vector that is never given back piecemeal: dropping the list does
/// nothing (its elements own nothing) and leaves the memory to the arena's reset.
pub struct LeafList<'a, T> {
    items: ManuallyDrop<BVec<'a, T>>,
    /// COPY AREA bytes of the copied elements.
    copy: usize,
    /// ZERO-COPY AREA bytes of the zero-copy elements.
    zero_copy_len: usize,
    /// Zero-copy elements. The pair array's bytes follow from the length, so the list keeps
    /// no header count.
    zero_copy_count: usize,
}

impl<'a, T: Leaf<'a>> LeafList<'a, T> {
    /// An empty list with room for `cap` elements.
    #[inline]
    pub fn with_capacity_in(cap: usize, arena: &'a Arena) -> Self {
        LeafList {
            items: ManuallyDrop::new(BVec::with_capacity_in(cap, arena.bump())),
            copy: 0,
            zero_copy_len: 0,
            zero_copy_count: 0,
        }
    }

    /// Makes the list empty with room for `cap` elements, in place: what a generated
    /// `init_*` does. A fresh list (nothing appended) only gets its storage; one with elements
    /// forgets them first.
    #[inline]
    pub fn reset_with_capacity(&mut self, cap: usize) {
        if !self.items.is_empty() {
            self.clear();
        }
        if self.items.capacity() < cap {
            let bump = self.items.bump();
            // The old vector is empty; its storage stays with the arena.
            std::mem::forget(std::mem::replace(
                &mut *self.items,
                BVec::with_capacity_in(cap, bump),
            ));
        }
    }

    /// Forgets every element and zeroes the sizes.
    #[cold]
    #[inline(never)]
    fn clear(&mut self) {
        self.items.clear();
        self.copy = 0;
        self.zero_copy_len = 0;
        self.zero_copy_count = 0;
    }

    #[inline(always)]
    fn add_leaf(&mut self, p: &CFPtr<'_>) {
        match p {
            CFPtr::ZeroCopy(b) => {
                self.zero_copy_count += 1;
                self.zero_copy_len += b.len();
            }
            CFPtr::Copy(b) => self.copy += b.len(),
        }
    }

    #[inline(always)]
    fn remove_leaf(&mut self, p: &CFPtr<'_>) {
        match p {
            CFPtr::ZeroCopy(b) => {
                self.zero_copy_count -= 1;
                self.zero_copy_len -= b.len();
            }
            CFPtr::Copy(b) => self.copy -= b.len(),
        }
    }

    /// Appends a value.
    #[inline]
    pub fn append(&mut self, v: T) {
        self.add_leaf(v.cf_ptr());
        // `Vec::push` as is, not `push` below: the decode loop (its only hot caller) counts more
        // instructions with that (docs/performance.md, "Choices the instruction counts rest on").
        self.items.push(v);
    }

    /// Pushes `v`, growing the storage out of line. The vector is handed to the growing call by
    /// value, not by address: a call given the list's address would make the whole object
    /// being built live in memory (its counters, its presence bits and the vector's length
    /// stored and reloaded at every append, and the object copied when it is moved).
    #[inline(always)]
    fn push(&mut self, v: T) {
        if self.items.len() < self.items.capacity() {
            // Cannot grow: `Vec::push`'s own capacity check folds away.
            self.items.push(v);
        } else {
            let bump = self.items.bump();
            let items = std::mem::replace(&mut self.items, ManuallyDrop::new(BVec::new_in(bump)));
            // Through a temporary (`black_box`, on this cold path only): returned straight into
            // the field, the call would write it through the list's address, which would then
            // escape and keep the object in memory.
            let grown = std::hint::black_box(pushed_grown(ManuallyDrop::into_inner(items), v));
            self.items = ManuallyDrop::new(grown);
        }
    }

    /// Replaces element `i`, returning the old value (`None` if `i` is out of range).
    pub fn set(&mut self, i: usize, v: T) -> Option<T> {
        if i >= self.items.len() {
            return None;
        }
        self.add_leaf(v.cf_ptr());
        let old = std::mem::replace(&mut self.items[i], v);
        self.remove_leaf(old.cf_ptr());
        Some(old)
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Element `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)
    }

    /// The elements in order.
    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// The elements as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// Encoded sizes: the pair array and the leaves (the field's slot is the parent's).
    #[inline]
    pub fn sizes(&self) -> Sizes {
        Sizes {
            header: PAIR * self.items.len(),
            copy: self.copy,
            zero_copy_count: self.zero_copy_count,
            zero_copy_len: self.zero_copy_len,
        }
    }

    /// Writes the pair array at `at` (copying copied leaves); returns the end of the array.
    #[inline]
    pub fn emit(&self, enc: &mut Encoder<'_>, at: usize) -> usize {
        self.emit_with(enc, at, &mut |_| {})
    }

    /// [`emit`](Self::emit), handing each zero-copy element the plan keeps to `sink` as its
    /// pair is written ([`CornflakesObj::emit_with`]).
    #[inline]
    pub fn emit_with<S: FnMut(PinnedRef<'_>)>(
        &self,
        enc: &mut Encoder<'_>,
        at: usize,
        sink: &mut S,
    ) -> usize {
        enc.leaf_pairs_with(at, self.items.iter().map(|v| v.cf_ptr()), sink)
    }

    /// Calls `f` on each zero-copy element kept by `demote`.
    #[inline]
    pub fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        if self.zero_copy_count == 0 {
            return;
        }
        for v in self.items.iter() {
            if let CFPtr::ZeroCopy(b) = *v.cf_ptr() {
                if demote.keep_zero_copy(b.len()) {
                    f(b);
                }
            }
        }
    }
}

impl<'a> LeafList<'a, CFBytes<'a>> {
    /// Appends bytes that outlive the object, as `append(CFBytes::new_ref(data, arena))` does
    /// (shorter than the threshold: borrowed, copied once at send time; else referenced by
    /// pointer recovery, or copied and counted), but each kind is written into the list where
    /// it is decided, without a [`CFPtr`] built first and then moved in.
    ///
    /// ```
    /// use cornflakes::{Arena, CFBytes, LeafList, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let arena = Arena::with_memory(&mem).with_threshold(512);
    /// let store = [mem.alloc_copy(b"tiny").unwrap(), mem.alloc_copy(&[1u8; 600]).unwrap()];
    /// let mut l: LeafList<CFBytes> = LeafList::with_capacity_in(2, &arena);
    /// l.append_ref(&store[0], &arena);
    /// l.append_ref(&store[1], &arena);
    /// assert!(!l[0].ptr().is_zero_copy() && l[1].ptr().is_zero_copy());
    /// assert_eq!(l.sizes().copy, 4);
    /// assert_eq!((l.sizes().zero_copy_count, l.sizes().zero_copy_len), (1, 600));
    /// ```
    #[inline(always)]
    pub fn append_ref(&mut self, data: &'a [u8], arena: &'a Arena) {
        if data.len() < arena.threshold() {
            self.copy += data.len();
            self.push(CFBytes(CFPtr::Copy(data)));
        } else {
            let p = CFPtr::reference_or_copy(data, arena);
            self.add_leaf(&p);
            self.push(CFBytes(p));
        }
    }

    /// Appends a pinned buffer that outlives the object (a stored value), as
    /// `append(CFBytes::from_rcbuf_ref(buf, arena))` does: shorter than the threshold (or
    /// empty), borrowed and copied once, at send time; else referenced. No pointer recovery (the
    /// handle already knows its item) and no reference count taken (a send takes one per
    /// descriptor). Like [`append_ref`](Self::append_ref), each kind is written into the list
    /// where it is decided. This is how a server builds a reply from its store's values; use
    /// [`append_ref`](Self::append_ref) when all there is is a slice.
    ///
    /// ```
    /// use cornflakes::{Arena, CFBytes, LeafList, PinnedMemory};
    /// let mem = PinnedMemory::with_defaults().unwrap();
    /// let arena = Arena::with_memory(&mem).with_threshold(512);
    /// let store = [mem.alloc_copy(b"tiny").unwrap(), mem.alloc_copy(&[1u8; 600]).unwrap()];
    /// let mut l: LeafList<CFBytes> = LeafList::with_capacity_in(2, &arena);
    /// l.append_rcbuf_ref(&store[0], &arena);
    /// l.append_rcbuf_ref(&store[1], &arena);
    /// assert!(!l[0].ptr().is_zero_copy() && l[1].ptr().is_zero_copy());
    /// assert_eq!(l[0].as_bytes().as_ptr(), store[0].as_ptr()); // borrowed, not copied
    /// assert_eq!((store[0].ref_count(), store[1].ref_count()), (1, 1)); // no count taken
    /// assert_eq!(l.sizes().copy, 4);
    /// assert_eq!((l.sizes().zero_copy_count, l.sizes().zero_copy_len), (1, 600));
    /// ```
    #[inline(always)]
    pub fn append_rcbuf_ref(&mut self, buf: &'a RcBuf, arena: &Arena) {
        let len = buf.len();
        // The threshold, but an empty buffer is never a descriptor (as `from_rcbuf_ref`).
        if len < arena.zero_copy_from() {
            self.copy += len;
            self.push(CFBytes(CFPtr::Copy(buf.as_slice())));
        } else {
            self.zero_copy_count += 1;
            self.zero_copy_len += len;
            self.push(CFBytes(CFPtr::ZeroCopy(buf.pinned())));
        }
    }

    /// Appends every element of `list`, a repeated bytes field read in place from the
    /// received packet `pkt` (the view of a message at its start), as decode would have built
    /// it: each element a slice of the packet, referenced when at least the threshold long,
    /// else borrowed and copied once, at send time. How a server echoes a request's list. An
    /// element outside the message stops it with its error (the elements before it appended).
    ///
    /// ```ignore
    /// // In a method of a generated service: echo the request's `vals` (a `ListView`).
    /// let vals = req.get_vals()?;
    /// resp.init_vals(vals.len());
    /// resp.get_mut_vals().extend_from_packet(reply.packet(), &vals, reply.arena())?;
    /// ```
    #[inline(always)]
    pub fn extend_from_packet(
        &mut self,
        pkt: &'a RcBuf,
        list: &crate::wire::BytesListView<'a>,
        arena: &Arena,
    ) -> Result<(), crate::DecodeError> {
        // Offsets count from the object's start: slices of the packet when it starts there.
        let at_start = list.object_bytes().as_ptr() == pkt.as_ptr();
        let zero_copy_from = arena.zero_copy_from();
        list.for_each_element(|off, data| {
            let len = data.len();
            if len >= zero_copy_from && at_start {
                if let Some(b) = pkt.pinned_slice(off, len) {
                    self.zero_copy_count += 1;
                    self.zero_copy_len += len;
                    self.push(CFBytes(CFPtr::ZeroCopy(b)));
                    return;
                }
            }
            self.copy += len;
            self.push(CFBytes(CFPtr::Copy(data)));
        })
    }
}

/// `items` with `v` pushed, after growing its storage (the vector is full).
#[cold]
#[inline(never)]
fn pushed_grown<'a, T>(mut items: BVec<'a, T>, v: T) -> BVec<'a, T> {
    items.push(v);
    items
}

impl<'a, T> Index<usize> for LeafList<'a, T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.items[i]
    }
}

impl<'s, 'a, T> IntoIterator for &'s LeafList<'a, T> {
    type Item = &'s T;
    type IntoIter = std::slice::Iter<'s, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for LeafList<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

/// A repeated message field.
pub struct MessageList<'a, M> {
    items: BVec<'a, M>,
}

impl<'a, M: CornflakesObj> MessageList<'a, M> {
    /// An empty list with room for `cap` elements.
    #[inline]
    pub fn with_capacity_in(cap: usize, arena: &'a Arena) -> Self {
        MessageList {
            items: BVec::with_capacity_in(cap, arena.bump()),
        }
    }

    /// Appends an element.
    #[inline]
    pub fn append(&mut self, m: M) {
        self.items.push(m);
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<&M> {
        self.items.get(i)
    }

    /// Element `i`, mutably.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut M> {
        self.items.get_mut(i)
    }

    /// The elements in order.
    pub fn iter(&self) -> std::slice::Iter<'_, M> {
        self.items.iter()
    }

    /// The elements in order, mutably.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, M> {
        self.items.iter_mut()
    }

    /// Encoded sizes: the pair array and every element (the field's slot is the parent's).
    pub fn sizes(&self) -> Sizes {
        let mut s = Sizes {
            header: PAIR * self.items.len(),
            ..Sizes::default()
        };
        for m in self.items.iter() {
            s += m.sizes();
        }
        s
    }

    /// Writes the pair array at `at`, then each element's header after it; returns the end.
    pub fn emit(&self, enc: &mut Encoder<'_>, at: usize) -> usize {
        self.emit_with(enc, at, &mut |_| {})
    }

    /// [`emit`](Self::emit), handing each element's zero-copy leaves the plan keeps to `sink`
    /// in wire order ([`CornflakesObj::emit_with`]).
    pub fn emit_with<S: FnMut(PinnedRef<'_>)>(
        &self,
        enc: &mut Encoder<'_>,
        at: usize,
        sink: &mut S,
    ) -> usize {
        let mut sub = at + PAIR * self.items.len();
        for (i, m) in self.items.iter().enumerate() {
            enc.put_pair(at + PAIR * i, 0, sub);
            sub = m.emit_with(enc, sub, sink);
        }
        sub
    }

    /// Calls `f` on each zero-copy leaf of every element, in order.
    pub fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        for m in self.items.iter() {
            m.for_each_zero_copy(demote, f);
        }
    }
}

impl<'a, M> Index<usize> for MessageList<'a, M> {
    type Output = M;
    fn index(&self, i: usize) -> &M {
        &self.items[i]
    }
}

impl<'a, M> IndexMut<usize> for MessageList<'a, M> {
    fn index_mut(&mut self, i: usize) -> &mut M {
        &mut self.items[i]
    }
}

impl<'s, 'a, M> IntoIterator for &'s MessageList<'a, M> {
    type Item = &'s M;
    type IntoIter = std::slice::Iter<'s, M>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<M: std::fmt::Debug> std::fmt::Debug for MessageList<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

/// A packed repeated scalar field.
pub struct PackedList<'a, T> {
    items: BVec<'a, T>,
}

impl<'a, T: Scalar> PackedList<'a, T> {
    /// An empty list with room for `cap` elements.
    #[inline]
    pub fn with_capacity_in(cap: usize, arena: &'a Arena) -> Self {
        PackedList {
            items: BVec::with_capacity_in(cap, arena.bump()),
        }
    }

    /// Decodes `count` little-endian elements from `bytes` (already validated by the decoder).
    pub fn from_le_bytes(bytes: &[u8], count: usize, arena: &'a Arena) -> Self {
        let mut l = Self::with_capacity_in(count, arena);
        for c in bytes.chunks_exact(T::SIZE).take(count) {
            l.items.push(T::read_le(c).unwrap_or_default());
        }
        l
    }

    /// Appends a value.
    #[inline]
    pub fn append(&mut self, v: T) {
        self.items.push(v);
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<T> {
        self.items.get(i).copied()
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, v: T) -> bool {
        match self.items.get_mut(i) {
            Some(x) => {
                *x = v;
                true
            }
            None => false,
        }
    }

    /// The elements as a slice.
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The elements in order.
    pub fn iter(&self) -> std::iter::Copied<std::slice::Iter<'_, T>> {
        self.items.iter().copied()
    }

    /// Encoded sizes: the packed elements in the copy area.
    #[inline]
    pub fn sizes(&self) -> Sizes {
        Sizes {
            copy: T::SIZE * self.items.len(),
            ..Sizes::default()
        }
    }

    /// Writes the elements little-endian into `out` (exactly `len() * T::SIZE` bytes).
    #[inline]
    pub fn write_le(&self, out: &mut [u8]) {
        for (v, o) in self.items.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            v.write_le(o);
        }
    }
}

impl<'a, T> Index<usize> for PackedList<'a, T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.items[i]
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PackedList<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

/// Element by element (the values, not whether each is copied or zero-copy).
impl<T: PartialEq> PartialEq for LeafList<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.items[..] == other.items[..]
    }
}

/// Element by element.
impl<M: PartialEq> PartialEq for MessageList<'_, M> {
    fn eq(&self, other: &Self) -> bool {
        self.items[..] == other.items[..]
    }
}

/// Element by element.
impl<T: PartialEq> PartialEq for PackedList<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.items[..] == other.items[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::PinnedMemory;

    #[test]
    fn a_leaf_list_holds_no_reference_and_the_arena_keeps_what_new_took() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut arena = Arena::with_memory(&mem).with_threshold(512);
        let big = mem.alloc_copy(&[7u8; 1024]).unwrap();
        let small = mem.alloc_copy(&[1u8; 16]).unwrap();
        {
            let mut l: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(1, &arena);
            l.append(CFBytes::new_ref(&small, &arena));
            l.append(CFBytes::new_ref(&big, &arena));
            // `new` does not borrow its bytes: the zero-copy value's reference is the arena's.
            l.append(CFBytes::new(&big[..600], &arena));
            l.append(CFBytes::new(&[3u8; 8], &arena));
            assert_eq!((big.ref_count(), small.ref_count()), (2, 1));
            assert_eq!(l.sizes().zero_copy_count, 2);
            assert_eq!(
                l.iter().map(|v| v.len()).sum::<usize>(),
                16 + 1024 + 600 + 8
            );
            // A send's reference, held past the list, is its own.
            let desc = l[1].ptr().to_rcbuf().expect("zero-copy");
            assert_eq!((big.ref_count(), desc.len()), (3, 1024));
        }
        assert_eq!(big.ref_count(), 2);
        arena.reset();
        assert_eq!((big.ref_count(), small.ref_count()), (1, 1));
        // Replacing an element keeps the zero-copy count right.
        let mut l: LeafList<'_, CFPtr<'_>> = LeafList::with_capacity_in(1, &arena);
        l.append(CFPtr::new(b"abc", &arena));
        assert!(l.set(0, CFPtr::new_ref(&big, &arena)).is_some());
        assert_eq!((l.sizes().zero_copy_count, big.ref_count()), (1, 1));
    }

    #[test]
    fn append_ref_grows_past_the_capacity_keeping_every_value_and_reference() {
        // `push` grows the storage out of line with the vector by value: every kind of value
        // appended past the capacity (copied, referenced, and a long value outside pinned
        // memory, copied by the fallback) is kept in order and counted; none takes a reference.
        let mem = PinnedMemory::with_defaults().unwrap();
        let arena = Arena::with_memory(&mem).with_threshold(512);
        let big = mem.alloc_copy(&[7u8; 1024]).unwrap();
        let small = mem.alloc_copy(&[1u8; 16]).unwrap();
        let heap = vec![9u8; 700];
        {
            let mut l: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(0, &arena);
            for i in 0..40 {
                match i % 3 {
                    0 => l.append_ref(&small, &arena),
                    1 => l.append_ref(&big, &arena),
                    _ => l.append_ref(&heap, &arena),
                }
            }
            assert_eq!(l.len(), 40);
            assert_eq!(big.ref_count(), 1);
            assert_eq!(small.ref_count(), 1);
            for (i, v) in l.iter().enumerate() {
                let (want, zero_copy): (&[u8], bool) = match i % 3 {
                    0 => (&small[..], false),
                    1 => (&big[..], true),
                    _ => (&heap[..], false),
                };
                assert_eq!(v.as_bytes(), want, "element {i}");
                assert_eq!(v.ptr().is_zero_copy(), zero_copy, "element {i}");
            }
            let s = l.sizes();
            assert_eq!((s.zero_copy_count, s.zero_copy_len), (13, 13 * 1024));
            assert_eq!((s.header, s.copy), (40 * PAIR, 14 * 16 + 13 * 700));
            assert_eq!(arena.zero_copy_fallbacks().total(), 13);
        }
        assert_eq!(big.ref_count(), 1);
    }

    #[test]
    fn append_rcbuf_ref_decides_by_length_and_takes_no_count() {
        // Short values are borrowed in place (copied at send time), long ones referenced
        // without recovery, empty ones never referenced (even at threshold 0); no count is
        // taken, the sizes count each kind, and the result equals `append_ref`'s and
        // `append(CFBytes::from_rcbuf_ref(..))`'s element by element.
        let mem = PinnedMemory::with_defaults().unwrap();
        let short = mem.alloc_copy(&[1u8; 511]).unwrap();
        let long = mem.alloc_copy(&[7u8; 512]).unwrap();
        let empty = mem.alloc_copy(&[]).unwrap();
        let vals = [&short, &long, &empty, &long, &short];
        for threshold in [0, 1, 512, 513, usize::MAX] {
            let arena = Arena::with_memory(&mem).with_threshold(threshold);
            let mut l: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(2, &arena);
            let mut by_slice: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(2, &arena);
            let mut by_ptr: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(2, &arena);
            for v in vals {
                l.append_rcbuf_ref(v, &arena);
                by_slice.append_ref(&v[..], &arena);
                by_ptr.append(CFBytes::from_rcbuf_ref(v, &arena));
            }
            assert_eq!(l.len(), vals.len());
            let referenced = |v: &RcBuf| !v.is_empty() && v.len() >= threshold;
            for (i, v) in vals.iter().enumerate() {
                let got = l[i].ptr();
                assert_eq!(got.is_zero_copy(), referenced(v), "{threshold} {i}");
                assert_eq!(
                    got.as_bytes().as_ptr(),
                    v.as_ptr(),
                    "{threshold} {i}: in place"
                );
                assert_eq!(got.len(), v.len());
                assert_eq!(by_slice[i].ptr().is_zero_copy(), got.is_zero_copy());
                assert_eq!(by_ptr[i].ptr().is_zero_copy(), got.is_zero_copy());
            }
            let zero_copy: Vec<&&RcBuf> = vals.iter().filter(|v| referenced(v)).collect();
            let want = Sizes {
                header: PAIR * vals.len(),
                copy: vals.iter().map(|v| v.len()).sum::<usize>()
                    - zero_copy.iter().map(|v| v.len()).sum::<usize>(),
                zero_copy_count: zero_copy.len(),
                zero_copy_len: zero_copy.iter().map(|v| v.len()).sum(),
            };
            assert_eq!(l.sizes(), want, "{threshold}");
            assert_eq!(by_slice.sizes(), want, "{threshold}");
            assert_eq!(by_ptr.sizes(), want, "{threshold}");
            assert_eq!(arena.zero_copy_fallbacks().total(), 0);
            assert_eq!(
                (short.ref_count(), long.ref_count(), empty.ref_count()),
                (1, 1, 1)
            );
        }
    }

    #[test]
    fn reset_with_capacity_empties_the_list() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let arena = Arena::with_memory(&mem).with_threshold(512);
        let big = mem.alloc_copy(&[7u8; 1024]).unwrap();
        let mut l: LeafList<'_, CFBytes<'_>> = LeafList::with_capacity_in(0, &arena);
        l.reset_with_capacity(3);
        assert!(l.is_empty());
        l.append(CFBytes::new_ref(&big, &arena));
        l.append(CFBytes::new(b"abc", &arena));
        assert_eq!(l.sizes().zero_copy_count, 1);
        // Emptied in place: the sizes start again.
        l.reset_with_capacity(1);
        assert!(l.is_empty());
        assert_eq!(l.sizes(), Sizes::default());
        l.append(CFBytes::new(b"xy", &arena));
        assert_eq!(
            l.sizes(),
            Sizes {
                header: PAIR,
                copy: 2,
                ..Sizes::default()
            }
        );
        assert_eq!(big.ref_count(), 1);
    }
}
