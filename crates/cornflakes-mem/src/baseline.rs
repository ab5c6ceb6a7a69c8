//! The paper's pointer-recovery scheme, kept as a benchmark baseline: one hash map per size-class
//! pool, tried in turn until one knows the address.

use std::collections::HashMap;
use std::ptr::NonNull;

use super::pool::{Chunk, PinnedMemory};
use super::rcbuf::RcBuf;
use super::rcbuf::MUT_FLAG;
use super::region::CHUNK_SHIFT;
use super::table::Slot;

/// A snapshot of a [`PinnedMemory`]'s chunks as a chain of `HashMap`s (one per size class).
/// For benchmarks only: it does not see chunks added after it was built.
pub struct HashMapRecover {
    /// Keeps the chunks the maps point into alive.
    _mem: PinnedMemory,
    pools: Vec<HashMap<usize, Slot>>,
}

impl HashMapRecover {
    /// Snapshots `mem`'s chunks.
    pub fn new(mem: &PinnedMemory) -> Self {
        let mut pools: Vec<HashMap<usize, Slot>> = Vec::new();
        for (class, key, slot) in mem.chunk_slots() {
            if pools.len() <= class {
                pools.resize_with(class + 1, HashMap::new);
            }
            pools[class].insert(key, slot);
        }
        HashMapRecover {
            _mem: mem.clone(),
            pools,
        }
    }

    /// Same contract as [`PinnedMemory::recover_ptr`].
    pub fn recover_ptr(&self, data: &[u8]) -> Option<RcBuf> {
        let addr = data.as_ptr() as usize;
        if data.is_empty() {
            return None;
        }
        let key = addr >> CHUNK_SHIFT;
        let slot = self.pools.iter().find_map(|m| m.get(&key))?;
        let chunk_base = key << CHUNK_SHIFT;
        let idx = (addr - chunk_base) >> slot.shift;
        if (addr + data.len() - 1 - chunk_base) >> slot.shift != idx {
            return None;
        }
        // SAFETY: as in `PinnedMemory::try_recover_ptr`; the snapshot holds a handle so the
        // chunks stay alive.
        let rc = unsafe { &*slot.refcnts.add(idx) };
        let n = rc.get();
        if n == 0 || n & MUT_FLAG != 0 {
            return None;
        }
        let item_base = chunk_base + (idx << slot.shift);
        // SAFETY: as in `PinnedMemory::try_recover_ptr`.
        unsafe {
            RcBuf::recovered(
                NonNull::new_unchecked(addr as *mut u8),
                data.len(),
                addr - item_base,
                NonNull::from(rc),
                NonNull::new_unchecked(slot.chunk as *mut Chunk),
            )
        }
        .ok()
    }
}
