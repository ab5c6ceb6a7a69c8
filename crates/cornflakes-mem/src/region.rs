//! Large pinned mappings, the unit a datapath registers with a device.
//!
//! A [`Region`] is one anonymous mapping aligned to [`CHUNK_SIZE`] (2 MiB). It is backed by 2 MiB
//! hugepages when the machine has them reserved, and otherwise by ordinary pages that are
//! populated and, where `RLIMIT_MEMLOCK` allows, locked. Those are advised as transparent
//! hugepages ([`HugePages::Auto`]), so where THP is enabled (`madvise` or `always`, the
//! default on most distributions) they are 2 MiB pages too, without any reservation. Both
//! work unprivileged; [`Region::backing`] tells which one a region got.

use std::cell::Cell;
use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Every region mapped in the process, as `(start, end)`: the cold path of the zero-copy
/// fallback counters asks it whether bytes outside one `PinnedMemory` lie in another one
/// ([`ZeroCopyFallback::OtherPinnedMemory`](crate::ZeroCopyFallback::OtherPinnedMemory)).
/// Touched only when a region is mapped or unmapped and on that fallback path.
static ALL_REGIONS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn all_regions() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    // A panic while holding the lock cannot leave the vector inconsistent (push/retain).
    ALL_REGIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `addr` lies in a region of any [`PinnedMemory`](crate::PinnedMemory) of this
/// process (any thread). Off the fast path: takes a lock and scans the regions.
pub fn in_any_region(addr: usize) -> bool {
    all_regions().iter().any(|&(s, e)| (s..e).contains(&addr))
}

/// Size and alignment of the chunks regions are cut into (one 2 MiB hugepage).
pub const CHUNK_SHIFT: u32 = 21;
/// `1 << CHUNK_SHIFT`.
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;

/// Whether regions may, must or must not use hugepages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HugePages {
    /// Use 2 MiB hugepages when the kernel has some reserved, else ordinary pages advised as
    /// transparent hugepages (2 MiB where THP is enabled, else 4 KiB).
    #[default]
    Auto,
    /// Always use 4 KiB pages (no reservation, no transparent hugepages).
    Never,
    /// Fail when no hugepages can be had.
    Require,
}

/// How a region's memory is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB hugepages (never swapped, physically contiguous per page).
    HugePages,
    /// Ordinary pages (4 KiB, or transparent 2 MiB ones with [`HugePages::Auto`] where THP is
    /// enabled), populated and locked with `mlock`.
    LockedPages,
    /// Ordinary pages as above, populated but not locked (`RLIMIT_MEMLOCK` was too small).
    UnlockedPages,
}

/// One pinned mapping. Owned by a [`PinnedMemory`](crate::PinnedMemory); never moved or unmapped
/// while any buffer inside it lives.
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    index: u32,
    backing: Backing,
    registration: Cell<Option<u64>>,
}

impl Region {
    /// Maps `len` bytes (rounded up to a whole number of chunks), aligned to [`CHUNK_SIZE`].
    pub(crate) fn map(len: usize, index: u32, huge: HugePages, lock: bool) -> io::Result<Region> {
        let r = Self::map_inner(len, index, huge, lock)?;
        let start = r.base.as_ptr() as usize;
        all_regions().push((start, start + r.len));
        Ok(r)
    }

    fn map_inner(len: usize, index: u32, huge: HugePages, lock: bool) -> io::Result<Region> {
        let len = len.div_ceil(CHUNK_SIZE).max(1) * CHUNK_SIZE;
        if huge != HugePages::Never {
            match map_huge(len) {
                Ok(base) => {
                    return Ok(Region {
                        base,
                        len,
                        index,
                        backing: Backing::HugePages,
                        registration: Cell::new(None),
                    })
                }
                Err(e) if huge == HugePages::Require => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("no 2 MiB hugepages for a {len}-byte region ({e}); reserve some in /proc/sys/vm/nr_hugepages"),
                    ))
                }
                Err(_) => {}
            }
        }
        let base = map_aligned(len)?;
        if huge == HugePages::Auto {
            advise_transparent_huge(base, len);
        }
        let backing = populate(base, len, lock);
        Ok(Region {
            base,
            len,
            index,
            backing,
            registration: Cell::new(None),
        })
    }

    /// First byte of the region.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Length in bytes (a multiple of [`CHUNK_SIZE`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region has at least one chunk.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Position of the region in its [`PinnedMemory`](crate::PinnedMemory) (0 for the first).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// What backs the region.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// The handle a datapath stored for this region (an ibverbs lkey, an AF_XDP UMEM offset, a
    /// DPDK IOVA base), if any.
    #[inline]
    pub fn registration(&self) -> Option<u64> {
        self.registration.get()
    }

    /// Stores the datapath's handle for this region.
    pub fn set_registration(&self, handle: Option<u64>) {
        self.registration.set(handle)
    }

    /// Whether `addr` lies inside the region.
    pub fn contains(&self, addr: *const u8) -> bool {
        let a = addr as usize;
        let b = self.base.as_ptr() as usize;
        a >= b && a < b + self.len
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("index", &self.index)
            .field("base", &self.base)
            .field("len", &self.len)
            .field("backing", &self.backing)
            .field("registration", &self.registration.get())
            .finish()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let start = self.base.as_ptr() as usize;
        all_regions().retain(|&(s, _)| s != start);
        // SAFETY: `base..base+len` is a mapping this region created and owns alone; the owning
        // `PinnedMemory` drops regions only after every buffer inside them was released.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

fn map_huge(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: an anonymous private mapping with no address hint has no preconditions; the result
    // is checked against MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned NULL"))
}

/// Maps `len + CHUNK_SIZE` bytes and trims both ends so the result is chunk-aligned.
fn map_aligned(len: usize) -> io::Result<NonNull<u8>> {
    let total = len + CHUNK_SIZE;
    // SAFETY: as in `map_huge`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let start = p as usize;
    let aligned = (start + CHUNK_SIZE - 1) & !(CHUNK_SIZE - 1);
    let head = aligned - start;
    let tail = total - head - len;
    // SAFETY: both ranges lie inside the mapping just created and outside `aligned..aligned+len`,
    // which is what we keep; nothing else refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    NonNull::new(aligned as *mut u8).ok_or_else(|| io::Error::other("mmap returned NULL"))
}

/// Asks the kernel to back `base..base+len` with transparent 2 MiB pages (THP in `madvise` or
/// `always` mode), before it is populated. Best effort: without THP the call fails and the
/// range keeps 4 KiB pages. One 2 MiB page spares the device and the cores a TLB entry per
/// 4 KiB of buffers, which counts when receive buffers span many MiB (measured in
/// docs/performance.md, "The emulated ConnectX").
fn advise_transparent_huge(base: NonNull<u8>, len: usize) {
    // SAFETY: `base..base+len` is a private anonymous mapping owned by the caller; the advice
    // only changes how its pages are backed, never its contents.
    unsafe {
        libc::madvise(base.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
    }
}

/// Gives the pages of `base..base+len`, a part of `region`, back to the kernel: unlocked
/// first if the region is locked, then dropped (`MADV_DONTNEED`); the range stays mapped and
/// reads as zeros until [`repopulate`]d. Best effort: a refused call leaves the pages resident.
///
/// # Safety
/// The range lies inside `region`, no buffer or view refers to its bytes, and no device has it
/// mapped (the region has no registration).
pub(crate) unsafe fn release_pages(region: &Region, base: *mut u8, len: usize) {
    debug_assert!(region.contains(base) && region.registration().is_none());
    let addr = base.cast::<libc::c_void>();
    if region.backing() == Backing::LockedPages {
        // SAFETY: the caller's contract: a range of our own mapping; munlock changes residency
        // only.
        unsafe { libc::munlock(addr, len) };
    }
    // SAFETY: the caller's contract: nothing refers to these bytes, so dropping their
    // contents (private anonymous memory reads back as zeros) loses nothing; no device maps
    // them, so no DMA can target the old pages.
    unsafe { libc::madvise(addr, len, libc::MADV_DONTNEED) };
}

/// Makes `base..base+len`, a part of `region` [`release_pages`] gave back, resident again as
/// the region was: locked for a locked region (if `mlock` still succeeds), else populated.
///
/// # Safety
/// The range lies inside `region` and no buffer or view refers to its bytes.
pub(crate) unsafe fn repopulate(region: &Region, base: *mut u8, len: usize) {
    debug_assert!(region.contains(base));
    if let Some(base) = NonNull::new(base) {
        populate(base, len, region.backing() == Backing::LockedPages);
    }
}

/// Faults every page in and tries to lock the range; reports what it achieved.
fn populate(base: NonNull<u8>, len: usize, lock: bool) -> Backing {
    let addr = base.as_ptr().cast::<libc::c_void>();
    // SAFETY: `addr..addr+len` is a private anonymous mapping owned by the caller; mlock and
    // madvise only change residency, never contents.
    let locked = lock && unsafe { libc::mlock(addr, len) } == 0;
    if !locked {
        // SAFETY: as above.
        let ok = unsafe { libc::madvise(addr, len, libc::MADV_POPULATE_WRITE) } == 0;
        if !ok {
            // Older kernels: touch one byte per page. The memory is fresh zeroed anonymous memory
            // (or pages `release_pages` dropped, which read as zeros too), so writing a zero
            // changes nothing but residency.
            let page = 4096;
            let mut off = 0;
            while off < len {
                // SAFETY: `off < len`, inside the mapping; volatile so the store is not elided.
                unsafe { std::ptr::write_volatile(base.as_ptr().add(off), 0) };
                off += page;
            }
        }
    }
    if locked {
        Backing::LockedPages
    } else {
        Backing::UnlockedPages
    }
}
