//! Single-producer / single-consumer rings shared with the kernel: AF_XDP's fill and TX rings
//! (we produce) and RX and completion rings (we consume).
//!
//! A ring is a power-of-two array of entries plus two free-running `u32` indices, `producer` and
//! `consumer`, that only ever grow (wrapping). Entry `i` lives at slot `i & (size - 1)`. The
//! producer writes entries, then publishes them with a release store of `producer`; the consumer
//! reads `producer` with acquire, reads the entries, then hands the slots back with a release
//! store of `consumer`. Each side caches the other's index and only reloads it when the cached
//! value says the ring is full (producer) or empty (consumer), as libxdp does.
//!
//! [`RingIdx`] is the index arithmetic alone; it is pure and tested without any kernel. The ring
//! types work on raw memory (the kernel's mmap, or test memory in this module's tests).

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Index arithmetic of a ring with a power-of-two number of slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingIdx {
    size: u32,
}

impl RingIdx {
    /// A ring of `size` slots; `None` unless `size` is a non-zero power of two.
    pub const fn new(size: u32) -> Option<RingIdx> {
        if size.is_power_of_two() {
            Some(RingIdx { size })
        } else {
            None
        }
    }

    /// Number of slots.
    #[inline]
    pub const fn size(&self) -> u32 {
        self.size
    }

    /// Slot holding free-running index `i`.
    #[inline]
    pub const fn slot(&self, i: u32) -> usize {
        (i & (self.size - 1)) as usize
    }

    /// Entries published and not yet consumed. A corrupted pair of indices (more than `size`
    /// apart) yields `size`, never more, so a consumer cannot read past the array.
    #[inline]
    pub const fn used(&self, prod: u32, cons: u32) -> u32 {
        let d = prod.wrapping_sub(cons);
        if d > self.size {
            self.size
        } else {
            d
        }
    }

    /// Slots a producer may still fill.
    #[inline]
    pub const fn free(&self, prod: u32, cons: u32) -> u32 {
        self.size - self.used(prod, cons)
    }
}

/// Where a ring lives: its two indices, its flags word and its entry array.
pub struct RingMem<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: Option<NonNull<AtomicU32>>,
    entries: NonNull<T>,
    idx: RingIdx,
}

impl<T> RingMem<T> {
    /// Describes a ring.
    ///
    /// # Safety
    /// `producer`, `consumer` and `flags` (if given) must point at aligned `u32`s, and `entries`
    /// at `idx.size()` properly aligned `T`s, all valid for reads and writes for as long as the
    /// returned value and any ring built from it live (the caller keeps the mapping alive). The
    /// memory may be shared with one other party playing the opposite role.
    pub unsafe fn new(
        producer: NonNull<u32>,
        consumer: NonNull<u32>,
        flags: Option<NonNull<u32>>,
        entries: NonNull<T>,
        idx: RingIdx,
    ) -> RingMem<T> {
        RingMem {
            producer: producer.cast(),
            consumer: consumer.cast(),
            flags: flags.map(NonNull::cast),
            entries,
            idx,
        }
    }

    #[inline]
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: `new`'s contract: a valid, aligned u32 for our lifetime; AtomicU32 has the
        // layout of u32 and the other side also accesses it atomically.
        unsafe { self.producer.as_ref() }
    }

    #[inline]
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as in `prod`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline]
    fn flags(&self) -> u32 {
        match self.flags {
            // SAFETY: as in `prod`.
            Some(f) => unsafe { f.as_ref() }.load(Ordering::Relaxed),
            None => 0,
        }
    }
}

/// The producing side of a ring (fill and TX rings).
pub struct Producer<T: Copy> {
    mem: RingMem<T>,
    /// Next index to write (published up to `published`).
    next: u32,
    published: u32,
    /// Cached `consumer`.
    cons: u32,
    _not_send: PhantomData<*const ()>,
}

impl<T: Copy> Producer<T> {
    /// Takes the producing role on `mem`, starting from its current indices.
    pub fn new(mem: RingMem<T>) -> Producer<T> {
        let next = mem.prod().load(Ordering::Relaxed);
        let cons = mem.cons().load(Ordering::Acquire);
        Producer {
            mem,
            next,
            published: next,
            cons,
            _not_send: PhantomData,
        }
    }

    /// Number of slots.
    pub fn size(&self) -> u32 {
        self.mem.idx.size()
    }

    /// Free slots, reloading the consumer index only when the cache shows fewer than `want`.
    #[inline]
    pub fn free(&mut self, want: u32) -> u32 {
        let f = self.mem.idx.free(self.next, self.cons);
        if f >= want {
            return f;
        }
        self.cons = self.mem.cons().load(Ordering::Acquire);
        self.mem.idx.free(self.next, self.cons)
    }

    /// Writes all of `items` or, when fewer slots are free, none; returns whether it did. The
    /// entries become visible to the other side at the next [`submit`](Self::submit).
    #[inline]
    pub fn push_all(&mut self, items: &[T]) -> bool {
        let n = items.len() as u32;
        if items.len() > u32::MAX as usize || self.free(n) < n {
            return false;
        }
        for (k, item) in items.iter().enumerate() {
            let slot = self.mem.idx.slot(self.next.wrapping_add(k as u32));
            // SAFETY: `slot` < size and the slot is free (between the consumer and producer
            // indices), so the other side does not read it until we publish.
            unsafe { self.mem.entries.as_ptr().add(slot).write(*item) };
        }
        self.next = self.next.wrapping_add(n);
        true
    }

    /// Writes one entry; false when the ring is full.
    #[inline]
    pub fn push(&mut self, item: T) -> bool {
        self.push_all(std::slice::from_ref(&item))
    }

    /// Publishes everything pushed so far. Returns how many entries that was.
    #[inline]
    pub fn submit(&mut self) -> u32 {
        let n = self.next.wrapping_sub(self.published);
        if n > 0 {
            self.mem.prod().store(self.next, Ordering::Release);
            self.published = self.next;
        }
        n
    }

    /// Entries published and not yet taken by the consumer.
    pub fn outstanding(&mut self) -> u32 {
        self.cons = self.mem.cons().load(Ordering::Acquire);
        self.mem.idx.used(self.published, self.cons)
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.mem.flags() & 1 != 0
    }
}

/// The consuming side of a ring (RX and completion rings).
pub struct Consumer<T: Copy> {
    mem: RingMem<T>,
    /// Next index to read (released up to `released`).
    next: u32,
    released: u32,
    /// Cached `producer`.
    prod: u32,
    _not_send: PhantomData<*const ()>,
}

impl<T: Copy> Consumer<T> {
    /// Takes the consuming role on `mem`, starting from its current indices.
    pub fn new(mem: RingMem<T>) -> Consumer<T> {
        let next = mem.cons().load(Ordering::Relaxed);
        let prod = mem.prod().load(Ordering::Acquire);
        Consumer {
            mem,
            next,
            released: next,
            prod,
            _not_send: PhantomData,
        }
    }

    /// Entries ready to read, reloading the producer index when the cache shows none.
    #[inline]
    pub fn available(&mut self) -> u32 {
        let a = self.mem.idx.used(self.prod, self.next);
        if a > 0 {
            return a;
        }
        self.prod = self.mem.prod().load(Ordering::Acquire);
        self.mem.idx.used(self.prod, self.next)
    }

    /// Reads the next entry. Its slot stays ours until [`release`](Self::release).
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.available() == 0 {
            return None;
        }
        let slot = self.mem.idx.slot(self.next);
        // SAFETY: `slot` < size and lies between the consumer and the (acquired) producer
        // index, so the producer finished writing it and will not touch it until we release.
        let v = unsafe { self.mem.entries.as_ptr().add(slot).read() };
        self.next = self.next.wrapping_add(1);
        Some(v)
    }

    /// Hands every slot read so far back to the producer.
    #[inline]
    pub fn release(&mut self) -> u32 {
        let n = self.next.wrapping_sub(self.released);
        if n > 0 {
            self.mem.cons().store(self.next, Ordering::Release);
            self.released = self.next;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idx_arithmetic_wraps() {
        assert!(RingIdx::new(0).is_none());
        assert!(RingIdx::new(12).is_none());
        let r = RingIdx::new(8).unwrap();
        assert_eq!(r.slot(9), 1);
        assert_eq!(r.slot(u32::MAX), 7);
        assert_eq!(r.used(3, 1), 2);
        assert_eq!(r.free(3, 1), 6);
        // Across the u32 wrap.
        assert_eq!(r.used(2, u32::MAX - 1), 4);
        assert_eq!(r.free(2, u32::MAX - 1), 4);
        // Corrupt indices are clamped, not trusted.
        assert_eq!(r.used(100, 0), 8);
        assert_eq!(r.free(100, 0), 0);
        assert_eq!(r.used(0, 5), 8);
    }

    /// Ring memory owned by the test, standing in for the kernel's mapping. Interior mutability
    /// (atomics and cells) lets several rings and the test itself share it through `&self`.
    struct TestMem<T> {
        idx: Box<[AtomicU32; 3]>,
        entries: Box<[std::cell::Cell<T>]>,
    }

    impl<T: Copy + Default> TestMem<T> {
        fn new(size: u32, start: u32) -> Self {
            TestMem {
                idx: Box::new([
                    AtomicU32::new(start),
                    AtomicU32::new(start),
                    AtomicU32::new(0),
                ]),
                entries: (0..size)
                    .map(|_| std::cell::Cell::new(T::default()))
                    .collect(),
            }
        }

        fn ring(&self) -> RingMem<T> {
            let base = self.idx.as_ptr() as *mut u32;
            // SAFETY: the memory outlives every ring made in these tests (declared first,
            // dropped last), atomics and cells permit mutation through shared references and
            // have the layout of `u32` and `T`, and `entries` has `size` slots.
            unsafe {
                RingMem::new(
                    NonNull::new(base).unwrap(),
                    NonNull::new(base.add(1)).unwrap(),
                    Some(NonNull::new(base.add(2)).unwrap()),
                    NonNull::new(self.entries.as_ptr() as *mut T).unwrap(),
                    RingIdx::new(self.entries.len() as u32).unwrap(),
                )
            }
        }
    }

    #[test]
    fn producer_to_consumer_across_the_index_wrap() {
        // Start just before u32::MAX so the indices wrap during the test.
        let mem = TestMem::<u64>::new(8, u32::MAX - 20);
        let mut p = Producer::new(mem.ring());
        let mut c = Consumer::new(mem.ring());
        let mut sent = 0u64;
        let mut got = 0u64;
        let mut seed = 12345u32;
        for _ in 0..500 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let burst = (seed >> 16) % 6;
            let chain: Vec<u64> = (0..burst as u64).map(|k| sent + k).collect();
            if p.push_all(&chain) {
                sent += burst as u64;
            }
            p.submit();
            let take = (seed >> 8) % 7;
            for _ in 0..take {
                match c.pop() {
                    Some(v) => {
                        assert_eq!(v, got, "entries come out in order");
                        got += 1;
                    }
                    None => break,
                }
            }
            c.release();
            assert!(sent - got <= 8);
        }
        while let Some(v) = c.pop() {
            assert_eq!(v, got);
            got += 1;
        }
        assert_eq!(got, sent);
        assert!(sent > 100, "the test moved a meaningful number of entries");
    }

    #[test]
    fn push_all_is_all_or_nothing() {
        let mem = TestMem::<u32>::new(4, 0);
        let mut p = Producer::new(mem.ring());
        assert!(p.push_all(&[1, 2, 3]));
        assert!(!p.push_all(&[4, 5]), "only one slot is free");
        assert!(p.push(4));
        assert!(!p.push(5));
        assert_eq!(p.submit(), 4);
        assert_eq!(p.submit(), 0);
        let mut c = Consumer::new(mem.ring());
        assert_eq!(c.pop(), Some(1));
        // Not released yet: the producer still sees a full ring.
        assert_eq!(p.free(1), 0);
        assert_eq!(c.release(), 1);
        assert_eq!(p.free(1), 1);
        assert_eq!(p.outstanding(), 3);
    }

    #[test]
    fn consumer_sees_nothing_unpublished() {
        let mem = TestMem::<u32>::new(4, 7);
        let mut p = Producer::new(mem.ring());
        let mut c = Consumer::new(mem.ring());
        assert!(p.push(9));
        assert_eq!(c.pop(), None, "pushed but not submitted");
        p.submit();
        assert_eq!(c.pop(), Some(9));
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn need_wakeup_flag_is_read() {
        let mem = TestMem::<u32>::new(4, 0);
        let p = Producer::new(mem.ring());
        assert!(!p.needs_wakeup());
        mem.idx[2].store(1, Ordering::Relaxed);
        assert!(p.needs_wakeup());
    }
}
