//! Pinned memory as DPDK sees it: regions registered for DMA, and the receive mempool whose
//! data rooms are pinned items.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;

use cornflakes_mem::{Backing, Region, CHUNK_SIZE};
use cornflakes_mem::{PinnedMemory, RcBuf};

use super::mbuf::{Mempool, RxInfo};
use super::port::{self, DeviceHandle};

/// The IO address of a pinned buffer: its region's IOVA base plus its offset; the virtual
/// address when the region is not registered (virtual devices do not use it).
#[inline]
pub fn iova_of(buf: &RcBuf) -> u64 {
    match buf.region().registration() {
        Some(base) => base + buf.region_offset() as u64,
        None => buf.as_ptr() as u64,
    }
}

/// The regions registered for one device, kept by the registrar closure a datapath installs
/// with [`PinnedMemory::set_registrar`] (shared with the datapath, which calls
/// [`unregister_all`](Self::unregister_all) when it goes away).
#[derive(Debug)]
pub struct DmaRegistrations {
    device: Cell<Option<DeviceHandle>>,
    regions: RefCell<Vec<(usize, usize)>>,
}

impl DmaRegistrations {
    /// Registrations for `device`.
    pub fn new(device: DeviceHandle) -> DmaRegistrations {
        DmaRegistrations {
            device: Cell::new(Some(device)),
            regions: RefCell::new(Vec::new()),
        }
    }

    /// Registers `r` with DPDK and maps it for the device; returns the IOVA of its base, or
    /// `None` once [`unregister_all`](Self::unregister_all) has run.
    pub fn register(&self, r: &Region) -> io::Result<Option<u64>> {
        let Some(dev) = self.device.get() else {
            // The datapath is gone; memory mapped from now on is not for its device.
            return Ok(None);
        };
        let page = match r.backing() {
            Backing::HugePages => CHUNK_SIZE,
            Backing::LockedPages | Backing::UnlockedPages => 4096,
        };
        // SAFETY: a region stays mapped while its `PinnedMemory` lives, and is unmapped only
        // after every buffer in it is released; the owner of these registrations unregisters
        // them (`unregister_all`, from the datapath's Drop) while it still holds a handle to
        // that memory, so the range is mapped for as long as it is registered.
        let iova = unsafe { port::register_memory(dev, r.base(), r.len(), page) }?;
        self.regions.borrow_mut().push((r.base() as usize, r.len()));
        Ok(Some(iova))
    }

    /// Unregisters every region; later regions are not registered any more.
    pub fn unregister_all(&self) {
        let Some(dev) = self.device.take() else {
            return;
        };
        for (base, len) in self.regions.borrow_mut().drain(..) {
            // SAFETY: the datapath calls this after stopping and closing its port and freeing
            // every mbuf that referred to pinned memory (or, on a failed start, before any
            // was created), so no descriptor uses the range.
            unsafe { port::unregister_memory(dev, base as *mut u8, len) };
        }
    }
}

/// The receive mempool over pinned items: each mbuf's data room is one item of a
/// [`PinnedMemory`], held here with count 1 (the "pool reference") for the pool's life. A
/// received frame is handed out as an [`RcBuf`] slice of its item; while any such view lives
/// (count > 1) the caller must keep the mbuf out of the pool, so the NIC only ever writes items
/// nobody can read.
pub struct PinnedRxPool {
    // Field order is drop order: the pool goes before the items backing it.
    pool: Mempool,
    items: Vec<RcBuf>,
    by_addr: HashMap<usize, u32, BuildHasherDefault<AddrHasher>>,
    item_size: usize,
}

/// Hashes buffer addresses (distinct multiples of the item size) with one multiplication,
/// instead of SipHash, on the per-packet lookup.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, v: usize) {
        // Fibonacci hashing; the low bits of item addresses are all zero, the multiplication
        // spreads the rest over the high bits hashbrown uses.
        self.0 = (v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl PinnedRxPool {
    /// `n` mbufs over `n` fresh items of `item_size` bytes (a power of two, below 64 KiB) from
    /// `mem`, whose regions must already be registered.
    pub fn new(
        name: &str,
        mem: &PinnedMemory,
        n: u32,
        item_size: usize,
    ) -> io::Result<PinnedRxPool> {
        let elt = u16::try_from(item_size)
            .ok()
            .filter(|_| item_size.is_power_of_two())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "receive buffers of {item_size} bytes: need a power of two below 64 KiB"
                    ),
                )
            })?;
        let mut items = Vec::with_capacity(n as usize);
        let mut zones = Vec::with_capacity(n as usize);
        let mut by_addr =
            HashMap::with_capacity_and_hasher(n as usize, BuildHasherDefault::default());
        for i in 0..n {
            let b = mem
                .alloc(item_size)
                .map_err(|e| io::Error::other(format!("receive buffer {i}: {e}")))?
                .freeze();
            zones.push((b.as_ptr().cast_mut(), iova_of(&b)));
            by_addr.insert(b.as_ptr() as usize, i);
            items.push(b);
        }
        // SAFETY: every zone is a whole pinned item of `item_size` bytes held by `items` (count
        // 1) until after the pool is freed (field order). Nothing reads an item through the
        // pool reference, and views are handed out only for received frames, whose mbufs the
        // caller keeps out of the pool until the views are gone (`in_use`).
        let pool = unsafe { Mempool::extbuf(name, &zones, elt) }?;
        Ok(PinnedRxPool {
            pool,
            items,
            by_addr,
            item_size,
        })
    }

    /// The mempool (for RX queue setup).
    pub fn pool(&self) -> &Mempool {
        &self.pool
    }

    /// Size of each item.
    pub fn item_size(&self) -> usize {
        self.item_size
    }

    /// The item behind a received mbuf, when it is a single-segment mbuf of this pool.
    #[inline]
    pub fn item_of(&self, m: &RxInfo) -> Option<u32> {
        if m.segments != 1 || m.pool != self.pool.id() {
            return None;
        }
        self.by_addr.get(&m.buf_addr).copied()
    }

    /// A view of the frame a received mbuf holds in item `idx`; `None` when its data lies
    /// outside the item (a PMD bug) or the item's count is saturated.
    #[inline]
    pub fn view(&self, idx: u32, m: &RxInfo) -> Option<RcBuf> {
        self.items
            .get(idx as usize)?
            .try_slice(m.data_off, m.data_len)
            .ok()
            .flatten()
    }

    /// Whether views of item `idx` are still alive (its mbuf must stay out of the pool).
    pub fn in_use(&self, idx: u32) -> bool {
        self.items
            .get(idx as usize)
            .is_some_and(|b| b.ref_count() > 1)
    }
}

impl std::fmt::Debug for PinnedRxPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedRxPool")
            .field("items", &self.items.len())
            .field("item_size", &self.item_size)
            .field("pool", &self.pool)
            .finish()
    }
}
