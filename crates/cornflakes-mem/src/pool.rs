//! Size-class pools over pinned regions, and the shared state every buffer points back to.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::rcbuf::{PinnedRef, RcBuf, RcBufMut, RefCountOverflow, MUT_FLAG};
use super::region::{Backing, HugePages, Region, CHUNK_SHIFT, CHUNK_SIZE};
use super::table::{ChunkTable, Slot};
use crate::fallback::ZeroCopyFallback;

/// How a [`PinnedMemory`] sizes its items and regions.
///
/// # Limits
/// Every buffer is one *item*: a contiguous piece of one 2 MiB chunk ([`CHUNK_SIZE`]) of a size
/// class, so no single buffer (a value sent zero-copy, a transmit or receive buffer) can be
/// larger than [`MemoryConfig::MAX_ITEM_SIZE`] = 2 MiB. Values larger than `max_item_size` must
/// be split by the application (e.g. into a repeated field). [`PinnedMemory::new`] checks the
/// configuration with [`validate`](Self::validate) and refuses an invalid one with
/// [`AllocError::InvalidConfig`], so `config()` always reports what is in force.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    /// Smallest item size (a power of two, at least 64). Default 64.
    pub min_item_size: usize,
    /// Largest item size (a power of two, at least `min_item_size`, at most
    /// [`MAX_ITEM_SIZE`](Self::MAX_ITEM_SIZE) = 2 MiB). Default 16 KiB.
    pub max_item_size: usize,
    /// Bytes mapped when the memory is created, as one region (rounded up to 2 MiB). A datapath
    /// that needs all buffers in one registered area (an AF_XDP UMEM) sets this and `grow = false`.
    /// Default 2 MiB.
    pub initial_bytes: usize,
    /// Bytes mapped per later region when the pools run dry. Default 2 MiB.
    pub region_bytes: usize,
    /// Whether new regions may be mapped after creation. Default true.
    pub grow: bool,
    /// Upper bound on all mapped bytes. Default 1 GiB.
    pub max_bytes: usize,
    /// Hugepage policy. Default [`HugePages::Auto`].
    pub hugepages: HugePages,
    /// Whether to `mlock` 4 KiB-page regions (failure falls back to populated, unlocked pages).
    pub lock: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            min_item_size: 64,
            max_item_size: 16 * 1024,
            initial_bytes: CHUNK_SIZE,
            region_bytes: CHUNK_SIZE,
            grow: true,
            max_bytes: 1 << 30,
            hugepages: HugePages::Auto,
            lock: true,
        }
    }
}

impl MemoryConfig {
    /// The largest item size any configuration may ask for: one 2 MiB chunk.
    pub const MAX_ITEM_SIZE: usize = CHUNK_SIZE;

    /// The smallest item size any configuration may ask for.
    pub const MIN_ITEM_SIZE: usize = 64;

    /// Checks every combination [`PinnedMemory::new`] or its first allocations would refuse:
    /// item sizes powers of two within
    /// [`MIN_ITEM_SIZE`](Self::MIN_ITEM_SIZE)..=[`MAX_ITEM_SIZE`](Self::MAX_ITEM_SIZE), the smallest
    /// not above the largest; `initial_bytes` and `region_bytes` *rounded up to whole 2 MiB chunks* (as they are mapped) not above
    /// `max_bytes`; a non-zero `region_bytes` when the memory may grow, and a non-zero
    /// `initial_bytes` when it may not (else nothing could ever be allocated). The error names
    /// the field, its value and, for sizes, the rounding.
    ///
    /// ```
    /// use cornflakes_mem::MemoryConfig;
    /// let too_big = MemoryConfig { max_item_size: 256 << 20, ..MemoryConfig::default() };
    /// let e = too_big.validate().unwrap_err();
    /// assert!(e.to_string().contains("max_item_size"), "{e}");
    /// // 1 MiB is mapped as one 2 MiB chunk, which a 1 MiB limit cannot hold:
    /// let rounded = MemoryConfig { initial_bytes: 1 << 20, max_bytes: 1 << 20, ..MemoryConfig::default() };
    /// let e = rounded.validate().unwrap_err();
    /// assert_eq!(e.field, "initial_bytes");
    /// assert!(MemoryConfig::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field: &'static str, value: usize, reason: String| {
            Err(ConfigError {
                field,
                value,
                reason,
            })
        };
        let item = |field: &'static str, v: usize| {
            if !v.is_power_of_two() || !(Self::MIN_ITEM_SIZE..=Self::MAX_ITEM_SIZE).contains(&v) {
                err(field, v, "must be a power of two from 64 bytes to 2 MiB (one item is contiguous and lies in one 2 MiB chunk)".into())
            } else {
                Ok(())
            }
        };
        item("min_item_size", self.min_item_size)?;
        item("max_item_size", self.max_item_size)?;
        if self.min_item_size > self.max_item_size {
            return err(
                "min_item_size",
                self.min_item_size,
                format!("must not be above max_item_size ({})", self.max_item_size),
            );
        }
        let rounded = |b: usize| b.div_ceil(CHUNK_SIZE).max(1).saturating_mul(CHUNK_SIZE);
        if self.initial_bytes > 0 && rounded(self.initial_bytes) > self.max_bytes {
            return err(
                "initial_bytes",
                self.initial_bytes,
                format!(
                    "rounded up to whole 2 MiB chunks ({} bytes, as it is mapped) is above max_bytes = {}",
                    rounded(self.initial_bytes),
                    self.max_bytes
                ),
            );
        }
        if self.grow {
            if self.region_bytes == 0 {
                return err(
                    "region_bytes",
                    0,
                    "must be non-zero when grow is true".into(),
                );
            }
            if rounded(self.region_bytes) > self.max_bytes {
                return err(
                    "region_bytes",
                    self.region_bytes,
                    format!(
                        "rounded up to whole 2 MiB chunks ({} bytes, as it is mapped) is above max_bytes = {}: no region could be mapped",
                        rounded(self.region_bytes),
                        self.max_bytes
                    ),
                );
            }
        } else if self.initial_bytes == 0 {
            return err(
                "initial_bytes",
                0,
                "must be non-zero when grow is false: nothing could ever be allocated".into(),
            );
        }
        Ok(())
    }
}

/// A [`MemoryConfig`] field with a value the allocator cannot honour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field's name.
    pub field: &'static str,
    /// The value given.
    pub value: usize,
    /// What the value must be (and, for sizes mapped in whole chunks, the rounding).
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid MemoryConfig: {} = {} {}",
            self.field, self.value, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}

/// Why an allocation failed.
#[derive(Debug)]
pub enum AllocError {
    /// The [`MemoryConfig`] given to [`PinnedMemory::new`] is invalid.
    InvalidConfig(ConfigError),
    /// The requested size is above the largest size class.
    TooLarge {
        /// Bytes requested.
        requested: usize,
        /// The largest size class.
        max: usize,
    },
    /// All regions are full and no more may be mapped.
    Exhausted {
        /// Bytes mapped now.
        mapped: usize,
        /// The most that may be mapped.
        limit: usize,
    },
    /// The kernel refused a new mapping.
    Map(io::Error),
    /// The datapath's registration hook refused a new region.
    Register(io::Error),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::TooLarge { requested, max } => {
                write!(f, "pinned allocation of {requested} bytes exceeds the largest size class ({max} bytes)")
            }
            AllocError::Exhausted { mapped, limit } => {
                write!(
                    f,
                    "pinned memory exhausted: {mapped} bytes mapped, limit {limit}"
                )
            }
            AllocError::InvalidConfig(e) => e.fmt(f),
            AllocError::Map(e) => write!(f, "mapping a pinned region failed: {e}"),
            AllocError::Register(e) => write!(f, "registering a pinned region failed: {e}"),
        }
    }
}

impl std::error::Error for AllocError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AllocError::Map(e) | AllocError::Register(e) => Some(e),
            AllocError::InvalidConfig(e) => Some(e),
            _ => None,
        }
    }
}

/// Counters describing a [`PinnedMemory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Regions mapped.
    pub regions: usize,
    /// Bytes mapped in all regions.
    pub mapped_bytes: usize,
    /// 2 MiB chunks given to a size class.
    pub chunks_in_use: usize,
    /// Items allocated and not yet returned (held by an `RcBuf` or `RcBufMut`).
    pub live_items: usize,
    /// Regions backed by hugepages.
    pub hugepage_regions: usize,
    /// Regions of 4 KiB pages locked in memory.
    pub locked_regions: usize,
    /// Mapped chunks whose pages [`PinnedMemory::trim`] gave back to the kernel and that no
    /// size class uses now (they are populated again when a class needs a chunk).
    pub released_chunks: usize,
    /// Bytes [`PinnedMemory::trim`] has given back to the kernel so far (it only grows).
    pub trimmed_bytes: usize,
}

/// A 2 MiB chunk serving one size class.
pub(crate) struct Chunk {
    pub base: *mut u8,
    pub shift: u32,
    pub region: *const Region,
    pub refcnts: Box<[Cell<u32>]>,
    pub inner: *const Inner,
    class: usize,
    /// Items of this chunk allocated and not yet returned (a chunk at 0 may be trimmed).
    live: Cell<u32>,
}

/// A mapped chunk no size class uses.
struct Spare {
    base: *mut u8,
    region: *const Region,
    /// Its pages were given back to the kernel ([`PinnedMemory::trim`]): populate (and lock)
    /// them again before use.
    released: bool,
}

type Registrar = Box<dyn FnMut(&Region) -> io::Result<Option<u64>>>;

// Boxed so their addresses stay fixed when the vectors grow: buffers and the lookup table hold
// raw pointers to regions and chunks.
#[allow(clippy::vec_box)]
struct State {
    regions: Vec<Box<Region>>,
    chunks: Vec<Box<Chunk>>,
    /// Chunks mapped but not given to a size class (never used, or trimmed).
    spare: Vec<Spare>,
    /// Bytes trimmed so far.
    trimmed: usize,
    /// Per size class, smallest first.
    classes: Vec<ClassPool>,
    mapped: usize,
    registrar: Option<Registrar>,
}

/// The items of one size class that are free to allocate.
///
/// A chunk given to the class is not cut into a free list up front (a 2 MiB chunk of 64-byte
/// items would be 32768 pushes, paid by whichever allocation needed the chunk): its items are
/// handed out in order from `fresh`, and only items that were allocated and released go on
/// `free`, which is used first.
struct ClassPool {
    /// Released items: (chunk, item index). Last in, first out.
    free: Vec<(*const Chunk, u32)>,
    /// The class's newest chunk; items `next..items` of it have never been handed out.
    fresh: *const Chunk,
    next: u32,
    items: u32,
}

impl ClassPool {
    const EMPTY: ClassPool = ClassPool {
        free: Vec::new(),
        fresh: std::ptr::null(),
        next: 0,
        items: 0,
    };

    /// A free item, or `None` when the class needs a new chunk.
    #[inline]
    fn take(&mut self) -> Option<(*const Chunk, u32)> {
        if let Some(item) = self.free.pop() {
            return Some(item);
        }
        if self.next < self.items {
            let idx = self.next;
            self.next += 1;
            return Some((self.fresh, idx));
        }
        None
    }
}

/// The last table slot a recovery found, field by field (a `Cell<Slot>` would copy the whole
/// 32-byte-aligned slot through the stack, and the callers' frames would be realigned for it).
struct LastChunk {
    key: Cell<usize>,
    chunk: Cell<*const Chunk>,
    refcnts: Cell<*const Cell<u32>>,
    shift: Cell<u32>,
}

impl LastChunk {
    fn new() -> LastChunk {
        LastChunk {
            key: Cell::new(Slot::NONE.key),
            chunk: Cell::new(Slot::NONE.chunk),
            refcnts: Cell::new(Slot::NONE.refcnts),
            shift: Cell::new(Slot::NONE.shift),
        }
    }

    /// The remembered slot when it is chunk `key`'s.
    #[inline(always)]
    fn get(&self, key: usize) -> Option<(*const Chunk, *const Cell<u32>, u32)> {
        if self.key.get() == key {
            Some((self.chunk.get(), self.refcnts.get(), self.shift.get()))
        } else {
            None
        }
    }

    fn set(&self, s: &Slot) {
        self.key.set(s.key);
        self.chunk.set(s.chunk);
        self.refcnts.set(s.refcnts);
        self.shift.set(s.shift);
    }
}

/// State shared by every handle and buffer of one [`PinnedMemory`]. Freed when the last handle
/// is dropped and no item is live.
pub(crate) struct Inner {
    handles: Cell<usize>,
    live: Cell<usize>,
    min_shift: u32,
    max_shift: u32,
    config: MemoryConfig,
    /// Read on every recovery, so not behind a `RefCell`: only `add_chunk` mutates it, and no
    /// reference to it is held across calls (see the SAFETY comments at both uses).
    table: UnsafeCell<ChunkTable>,
    /// The table slot of the last chunk a recovery found: the values of one message, or of
    /// consecutive messages, usually lie in the same 2 MiB chunk, and a hit here skips the hash
    /// and the probe. Its key starts at `usize::MAX`, which no address shifted by
    /// `CHUNK_SHIFT` equals. Only [`PinnedMemory::trim`] removes chunks, and it resets this
    /// slot when it removes the chunk it names, so a slot found here stays true.
    last: LastChunk,
    state: RefCell<State>,
}

/// A per-core pinned memory allocator. Cloning gives another handle to the same pools.
pub struct PinnedMemory {
    inner: NonNull<Inner>,
    _not_send: PhantomData<*const ()>,
}

impl PinnedMemory {
    /// Creates the allocator and maps `config.initial_bytes`. An invalid configuration (see
    /// [`MemoryConfig::validate`]) is refused with [`AllocError::InvalidConfig`].
    pub fn new(config: MemoryConfig) -> Result<PinnedMemory, AllocError> {
        config.validate().map_err(AllocError::InvalidConfig)?;
        let min = config.min_item_size;
        let max = config.max_item_size;
        let min_shift = min.trailing_zeros();
        let max_shift = max.trailing_zeros();
        let classes = (max_shift - min_shift + 1) as usize;
        let inner = Box::new(Inner {
            handles: Cell::new(1),
            live: Cell::new(0),
            min_shift,
            max_shift,
            table: UnsafeCell::new(ChunkTable::new()),
            last: LastChunk::new(),
            state: RefCell::new(State {
                regions: Vec::new(),
                chunks: Vec::new(),
                spare: Vec::new(),
                trimmed: 0,
                classes: (0..classes).map(|_| ClassPool::EMPTY).collect(),
                mapped: 0,
                registrar: None,
            }),
            config,
        });
        let mem = PinnedMemory {
            inner: NonNull::from(Box::leak(inner)),
            _not_send: PhantomData,
        };
        let initial = mem.inner().config.initial_bytes;
        if initial > 0 {
            mem.map_region(initial)?;
        }
        Ok(mem)
    }

    /// Creates an allocator with [`MemoryConfig::default`].
    pub fn with_defaults() -> Result<PinnedMemory, AllocError> {
        Self::new(MemoryConfig::default())
    }

    #[inline]
    fn inner(&self) -> &Inner {
        // SAFETY: `inner` stays allocated while any handle exists (handles > 0).
        unsafe { self.inner.as_ref() }
    }

    /// The configuration in force (as given: [`new`](Self::new) refuses invalid ones).
    pub fn config(&self) -> &MemoryConfig {
        &self.inner().config
    }

    /// Largest size one item can have.
    pub fn max_item_size(&self) -> usize {
        1 << self.inner().max_shift
    }

    /// Allocates a fresh, uniquely owned buffer of `len` bytes (its capacity is the size class).
    /// The bytes are whatever the item held last; callers overwrite them.
    pub fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        let inner = self.inner();
        let shift = (len.max(1).next_power_of_two().trailing_zeros()).max(inner.min_shift);
        if shift > inner.max_shift {
            return Err(AllocError::TooLarge {
                requested: len,
                max: 1 << inner.max_shift,
            });
        }
        let class = (shift - inner.min_shift) as usize;
        let taken = inner.state.borrow_mut().classes[class].take();
        let (chunk, idx) = match taken {
            Some(x) => x,
            None => self.alloc_from_new_chunk(class, shift)?,
        };
        inner.live.set(inner.live.get() + 1);
        // SAFETY: `chunk` points at a chunk owned by `inner.state.chunks` (boxed, never moved;
        // freed only by `trim` once no item of it is live or free-listed, so not while it
        // hands out this item) and `idx` < its item count (free lists only hold valid ones).
        unsafe {
            let c = &*chunk;
            c.live.set(c.live.get() + 1);
            Ok(RcBufMut::from_free_item(
                NonNull::new_unchecked(chunk as *mut Chunk),
                idx,
                len,
            ))
        }
    }

    /// Allocates a buffer and copies `data` into it.
    pub fn alloc_copy(&self, data: &[u8]) -> Result<RcBuf, AllocError> {
        let mut b = self.alloc(data.len())?;
        b.copy_from_slice(data);
        Ok(b.freeze())
    }

    /// Pointer recovery (paper §3.2.2): if `data` lies wholly inside one live item of this
    /// memory, returns an [`RcBuf`] for exactly that slice (reference count + 1). Slices that
    /// straddle items, lie in free items or items still being filled through an [`RcBufMut`],
    /// lie outside pinned memory, or are empty give `None`; so does a reference count at its
    /// maximum (see [`try_recover_ptr`](Self::try_recover_ptr)).
    #[inline]
    pub fn recover_ptr(&self, data: &[u8]) -> Option<RcBuf> {
        self.try_recover_ptr(data).ok().flatten()
    }

    /// [`recover_ptr`](Self::recover_ptr) that reports a saturated reference count as an error.
    #[inline]
    pub fn try_recover_ptr(&self, data: &[u8]) -> Result<Option<RcBuf>, RefCountOverflow> {
        match self.recover_ref(data) {
            Some(r) => r.try_to_rcbuf().map(Some),
            None => Ok(None),
        }
    }

    /// Pointer recovery without a reference: when `data` lies inside one live item of this
    /// memory, a [`PinnedRef`] view of exactly that slice, borrowed for as long as `data` is
    /// (the item's count is not touched: whatever lends `data` keeps the item alive). The
    /// refusals are [`recover_ptr`](Self::recover_ptr)'s, except that a saturated count is
    /// not one (it matters only when a reference is taken, [`PinnedRef::to_rcbuf`]).
    #[inline]
    pub fn recover_ref<'d>(&self, data: &'d [u8]) -> Option<PinnedRef<'d>> {
        let addr = data.as_ptr() as usize;
        let len = data.len();
        let key = addr >> CHUNK_SHIFT;
        let inner = self.inner();
        let (chunk, refcnts, shift) = match inner.last.get(key) {
            Some(hit) => hit,
            None => self.find_chunk(key)?,
        };
        // Items are aligned to their size (a power of two, at most the 2 MiB chunk, which is
        // aligned to it): the slice lies in one item when its first and last bytes agree above
        // the item bits. An empty slice gives `len - 1 = usize::MAX`, which overflows (a
        // slice's address is never 0), so it is refused here with the slices that end in
        // another item.
        let last = addr.checked_add(len.wrapping_sub(1))?;
        if (addr ^ last) >> shift != 0 {
            return None;
        }
        let item_base = addr & !((1usize << shift) - 1);
        let idx = (item_base & (CHUNK_SIZE - 1)) >> shift;
        // SAFETY: `idx` < items per chunk because `addr` is inside the chunk (same key), and the
        // refcount array has one entry per item; the chunk outlives this call.
        let rc = unsafe { &*refcnts.add(idx) };
        let n = rc.get();
        if n == 0 || n & MUT_FLAG != 0 {
            return None;
        }
        // SAFETY: the slice is inside live item `idx` of `chunk`, held by at least one
        // `RcBuf` (count in 1..=MAX_REFS) and by no `RcBufMut`. Safe code reaches the bytes
        // of such an item only through an `RcBuf` (or a view borrowed from one), so `data`'s
        // lender holds a reference for all of `'d`: the count stays at least 1 and the bytes
        // unchanged (an item is written only through an `RcBufMut`) for as long as the view.
        Some(unsafe {
            PinnedRef::borrowed(
                NonNull::new_unchecked(addr as *mut u8),
                len,
                addr - item_base,
                NonNull::from(rc),
                NonNull::new_unchecked(chunk as *mut Chunk),
            )
        })
    }

    /// The table slot of chunk `key` (probing the table, which a recovery does when the chunk
    /// is not the last one found), remembered as the last one found.
    #[inline(always)]
    fn find_chunk(&self, key: usize) -> Option<(*const Chunk, *const Cell<u32>, u32)> {
        if key == 0 {
            // 0 marks the table's empty slots; no item lives in the first 2 MiB of addresses.
            return None;
        }
        let inner = self.inner();
        // SAFETY: the table is only mutated by `add_chunk`, which cannot run during this call
        // (single thread: `PinnedMemory` is !Sync; nothing here calls back into the allocator),
        // and the reference does not outlive the call.
        let table = unsafe { &*inner.table.get() };
        let slot = table.get(key)?;
        inner.last.set(slot);
        Some((slot.chunk, slot.refcnts, slot.shift))
    }

    /// Why [`recover_ptr`](Self::recover_ptr) gives `None` for `data` (for the fallback
    /// counters of the runtime's `Arena`; off the fast path). `None` when it would succeed.
    pub fn why_not_recoverable(&self, data: &[u8]) -> Option<ZeroCopyFallback> {
        let addr = data.as_ptr() as usize;
        let len = data.len();
        if len == 0 {
            return Some(ZeroCopyFallback::NotPinned);
        }
        let key = addr >> CHUNK_SHIFT;
        let Some((_, refcnts, shift)) = self.find_chunk(key) else {
            return Some(if super::region::in_any_region(addr) {
                ZeroCopyFallback::OtherPinnedMemory
            } else {
                ZeroCopyFallback::NotPinned
            });
        };
        let chunk_base = key << CHUNK_SHIFT;
        let idx = (addr - chunk_base) >> shift;
        let last = addr
            .checked_add(len - 1)
            .map(|l| l.wrapping_sub(chunk_base) >> shift);
        if last != Some(idx) {
            return Some(ZeroCopyFallback::SpansItems);
        }
        // SAFETY: as in `try_recover_ptr`: `idx` is in range and the chunk outlives this call.
        let n = unsafe { &*refcnts.add(idx) }.get();
        if n == 0 || n & MUT_FLAG != 0 {
            return Some(ZeroCopyFallback::NotFrozen);
        }
        if n >= super::rcbuf::MAX_REFS {
            return Some(ZeroCopyFallback::RefCountSaturated);
        }
        None
    }

    /// Calls `f` on every region now mapped and on every region mapped later, storing what it
    /// returns as the region's registration handle. An error for a later region fails the
    /// allocation that needed it.
    pub fn set_registrar<F>(&self, mut f: F) -> io::Result<()>
    where
        F: FnMut(&Region) -> io::Result<Option<u64>> + 'static,
    {
        let regions = self.region_ptrs();
        for r in regions {
            // SAFETY: regions are boxed and live as long as `inner`.
            let r = unsafe { &*r };
            r.set_registration(f(r)?);
        }
        self.inner().state.borrow_mut().registrar = Some(Box::new(f));
        Ok(())
    }

    /// The regions now mapped, as pointers: a snapshot taken with the state borrowed only for
    /// the copy, so a callback over them may allocate (and map a region) without a double
    /// borrow. Regions are boxed and live as long as `inner`.
    fn region_ptrs(&self) -> Vec<*const Region> {
        self.inner()
            .state
            .borrow()
            .regions
            .iter()
            .map(|r| &**r as *const Region)
            .collect()
    }

    /// Calls `f` on every region now mapped.
    pub fn for_each_region(&self, mut f: impl FnMut(&Region)) {
        let regions = self.region_ptrs();
        for r in regions {
            // SAFETY: as in `set_registrar`.
            f(unsafe { &*r });
        }
    }

    /// Counters for tests and monitoring.
    pub fn stats(&self) -> MemoryStats {
        let inner = self.inner();
        let st = inner.state.borrow();
        MemoryStats {
            regions: st.regions.len(),
            mapped_bytes: st.mapped,
            chunks_in_use: st.chunks.len(),
            live_items: inner.live.get(),
            hugepage_regions: st
                .regions
                .iter()
                .filter(|r| r.backing() == Backing::HugePages)
                .count(),
            locked_regions: st
                .regions
                .iter()
                .filter(|r| r.backing() == Backing::LockedPages)
                .count(),
            released_chunks: st.spare.iter().filter(|s| s.released).count(),
            trimmed_bytes: st.trimmed,
        }
    }

    /// All chunks as (chunk number, chunk) pairs, for the hash-map baseline.
    #[cfg(any(test, feature = "fixtures"))]
    pub(crate) fn chunk_slots(&self) -> Vec<(usize, usize, Slot)> {
        let st = self.inner().state.borrow();
        st.chunks
            .iter()
            .map(|c| {
                let key = c.base as usize >> CHUNK_SHIFT;
                (
                    c.class,
                    key,
                    Slot {
                        key,
                        chunk: &**c,
                        refcnts: c.refcnts.as_ptr(),
                        shift: c.shift,
                    },
                )
            })
            .collect()
    }

    /// Gives back to the kernel the pages of every chunk none of whose items is allocated,
    /// except each size class's newest chunk (kept so that a class that empties and fills
    /// again does not fault its pages back in every time); returns the bytes given back.
    ///
    /// Such a chunk leaves its size class and waits, still mapped, among the spare chunks;
    /// the next class that needs a chunk populates (and, for a locked region, locks) its
    /// pages again. Mapped bytes ([`MemoryStats::mapped_bytes`], bounded by
    /// [`MemoryConfig::max_bytes`]) do not change; resident memory goes down. A datapath with
    /// many short-lived large buffers (a TCP server's partial frames) calls it after they are
    /// released, so that a burst of connections does not keep its peak resident forever.
    ///
    /// Memory a device may read or write is never trimmed: once a registrar is set
    /// ([`set_registrar`](Self::set_registrar)), or in a region with a registration handle,
    /// this does nothing (the device's mapping would keep the old pages). Regions of
    /// reserved hugepages are not trimmed either (their pages belong to the reserved pool).
    pub fn trim(&self) -> usize {
        let inner = self.inner();
        let mut st = inner.state.borrow_mut();
        if st.registrar.is_some() {
            return 0;
        }
        let mut gone: Vec<Box<Chunk>> = Vec::new();
        let mut i = 0;
        while i < st.chunks.len() {
            let c = &st.chunks[i];
            let cp: *const Chunk = &**c;
            // SAFETY: regions live as long as `inner`.
            let region = unsafe { &*c.region };
            let keep = c.live.get() > 0
                || st.classes[c.class].fresh == cp
                || region.registration().is_some()
                || region.backing() == Backing::HugePages;
            if keep {
                i += 1;
            } else {
                gone.push(st.chunks.swap_remove(i));
            }
        }
        if gone.is_empty() {
            return 0;
        }
        let dead: std::collections::HashSet<*const Chunk> =
            gone.iter().map(|c| &**c as *const Chunk).collect();
        for pool in st.classes.iter_mut() {
            pool.free.retain(|(c, _)| !dead.contains(c));
        }
        // SAFETY: see the field's doc: no other reference to the table exists during this call.
        let table = unsafe { &mut *inner.table.get() };
        for c in gone {
            let key = c.base as usize >> CHUNK_SHIFT;
            table.remove(key);
            if inner.last.get(key).is_some() {
                inner.last.set(&Slot::NONE);
            }
            // SAFETY: the chunk has no live item (`live == 0`), so no buffer or view refers to
            // its bytes, and its free items were just taken off the free list, so none will
            // be handed out; the region is not registered with a device (checked above).
            unsafe { super::region::release_pages(&*c.region, c.base, CHUNK_SIZE) };
            st.spare.push(Spare {
                base: c.base,
                region: c.region,
                released: true,
            });
            st.trimmed += CHUNK_SIZE;
        }
        dead.len() * CHUNK_SIZE
    }

    fn map_region(&self, bytes: usize) -> Result<(), AllocError> {
        let inner = self.inner();
        let (index, limit, mapped) = {
            let st = inner.state.borrow();
            (st.regions.len() as u32, inner.config.max_bytes, st.mapped)
        };
        let rounded = bytes.div_ceil(CHUNK_SIZE).max(1) * CHUNK_SIZE;
        if mapped + rounded > limit {
            return Err(AllocError::Exhausted { mapped, limit });
        }
        let region = Box::new(
            Region::map(rounded, index, inner.config.hugepages, inner.config.lock)
                .map_err(AllocError::Map)?,
        );
        let registrar = inner.state.borrow_mut().registrar.take();
        let result = match registrar {
            Some(mut f) => {
                let r = f(&region);
                inner.state.borrow_mut().registrar = Some(f);
                r.map(|h| region.set_registration(h))
            }
            None => Ok(()),
        };
        result.map_err(AllocError::Register)?;
        let mut st = inner.state.borrow_mut();
        let base = region.base();
        let rp: *const Region = &*region;
        for c in (0..region.len() / CHUNK_SIZE).rev() {
            st.spare.push(Spare {
                // SAFETY: `c * CHUNK_SIZE` < region length.
                base: unsafe { base.add(c * CHUNK_SIZE) },
                region: rp,
                released: false,
            });
        }
        st.mapped += region.len();
        st.regions.push(region);
        Ok(())
    }

    /// The slow path of [`alloc`](Self::alloc): gives the class a new chunk and takes its
    /// first item. Out of line so the common path stays short.
    #[cold]
    #[inline(never)]
    fn alloc_from_new_chunk(
        &self,
        class: usize,
        shift: u32,
    ) -> Result<(*const Chunk, u32), AllocError> {
        self.add_chunk(class, shift)?;
        Ok(self.inner().state.borrow_mut().classes[class]
            .take()
            .expect("a new chunk has free items"))
    }

    /// Gives size class `class` a new chunk. Only called when the class has no free item, so
    /// the chunk it replaces as `fresh` has handed out all its items.
    fn add_chunk(&self, class: usize, shift: u32) -> Result<(), AllocError> {
        let inner = self.inner();
        if inner.state.borrow().spare.is_empty() {
            let (grow, mapped, limit) = {
                let st = inner.state.borrow();
                (inner.config.grow, st.mapped, inner.config.max_bytes)
            };
            if !grow {
                return Err(AllocError::Exhausted {
                    mapped,
                    limit: limit.min(mapped),
                });
            }
            self.map_region(inner.config.region_bytes)?;
        }
        let mut st = inner.state.borrow_mut();
        let Spare {
            base,
            region,
            released,
        } = st.spare.pop().expect("spare chunk after mapping");
        if released {
            // SAFETY: regions live as long as `inner`; `base` is a chunk of `region` that no
            // size class uses, so no item (and no reference to its bytes) exists.
            unsafe { super::region::repopulate(&*region, base, CHUNK_SIZE) };
        }
        let items = CHUNK_SIZE >> shift;
        let chunk = Box::new(Chunk {
            base,
            shift,
            region,
            refcnts: (0..items).map(|_| Cell::new(0)).collect(),
            inner: inner as *const Inner,
            class,
            live: Cell::new(0),
        });
        let cp: *const Chunk = &*chunk;
        // SAFETY: see the field's doc: no other reference to the table exists during this call.
        unsafe { &mut *inner.table.get() }.insert(Slot {
            key: base as usize >> CHUNK_SHIFT,
            chunk: cp,
            refcnts: chunk.refcnts.as_ptr(),
            shift,
        });
        st.chunks.push(chunk);
        let pool = &mut st.classes[class];
        debug_assert!(pool.free.is_empty() && pool.next == pool.items);
        pool.fresh = cp;
        pool.next = 0;
        pool.items = items as u32;
        Ok(())
    }
}

impl Inner {
    /// Returns item `idx` of `chunk` to its free list. Called when its count reaches 0.
    ///
    /// # Safety
    /// `this` must be live (the item being released keeps it so) and the item's count must have
    /// just reached zero.
    #[inline]
    pub(crate) unsafe fn release(this: *const Inner, chunk: *const Chunk, idx: u32) {
        // SAFETY: caller guarantees `this` is live.
        let inner = unsafe { &*this };
        // SAFETY: `chunk` belongs to `inner` and is not freed while it has a live item (this
        // one, until now).
        let c = unsafe { &*chunk };
        let class = c.class;
        c.live.set(c.live.get() - 1);
        inner.state.borrow_mut().classes[class]
            .free
            .push((chunk, idx));
        let live = inner.live.get() - 1;
        inner.live.set(live);
        if live == 0 && inner.handles.get() == 0 {
            // SAFETY: no handle and no live item remain, so nothing refers to `inner` any more.
            unsafe { Inner::free(this) };
        }
    }

    /// Unmaps everything. Out of line: the release path above stays short (it runs for every
    /// buffer returned) and this runs once.
    ///
    /// # Safety
    /// Nothing refers to `this` any more (no handle, no live item); it was created by
    /// `Box::leak` in `PinnedMemory::new`.
    #[cold]
    #[inline(never)]
    unsafe fn free(this: *const Inner) {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(this as *mut Inner) });
    }
}

impl Clone for PinnedMemory {
    fn clone(&self) -> Self {
        let inner = self.inner();
        inner.handles.set(inner.handles.get() + 1);
        PinnedMemory {
            inner: self.inner,
            _not_send: PhantomData,
        }
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        let inner = self.inner();
        let h = inner.handles.get() - 1;
        inner.handles.set(h);
        if h == 0 && inner.live.get() == 0 {
            // SAFETY: the last handle is gone and no buffer refers to `inner`; it came from
            // `Box::leak`.
            unsafe { Inner::free(self.inner.as_ptr()) };
        }
    }
}

impl fmt::Debug for PinnedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedMemory")
            .field("stats", &self.stats())
            .finish()
    }
}
