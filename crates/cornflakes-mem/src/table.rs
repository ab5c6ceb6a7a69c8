//! The pointer-recovery table: chunk number (`addr >> 21`) → what `recover_ptr` needs.
//!
//! Open addressing with linear probing over a power-of-two array kept at most half full. A slot
//! holds the key and everything recovery needs (item size, refcount array), so a hit touches one
//! cache line of the table and one of the refcount array — the paper's chain of per-pool hash
//! maps touched several (see [`HashMapRecover`](crate::HashMapRecover) for that baseline).

use std::cell::Cell;

use super::pool::Chunk;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(crate) struct Slot {
    /// Chunk number (`addr >> CHUNK_SHIFT`); 0 means empty (no mapping lives at address 0).
    pub key: usize,
    pub chunk: *const Chunk,
    pub refcnts: *const Cell<u32>,
    /// log2 of the chunk's item size.
    pub shift: u32,
}

impl Slot {
    /// A slot no chunk number matches (the initial "last slot found" of a recovery).
    pub const NONE: Slot = Slot {
        key: usize::MAX,
        chunk: std::ptr::null(),
        refcnts: std::ptr::null(),
        shift: 0,
    };
}

const EMPTY: Slot = Slot {
    key: 0,
    chunk: std::ptr::null(),
    refcnts: std::ptr::null(),
    shift: 0,
};

pub(crate) struct ChunkTable {
    slots: Vec<Slot>,
    mask: usize,
    len: usize,
}

#[inline]
fn hash(key: usize) -> usize {
    // Fibonacci hashing: consecutive chunk numbers spread over the table.
    (key as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(32) as usize
}

impl ChunkTable {
    pub fn new() -> Self {
        ChunkTable {
            slots: vec![EMPTY; 64],
            mask: 63,
            len: 0,
        }
    }

    #[inline]
    pub fn get(&self, key: usize) -> Option<&Slot> {
        let mut i = hash(key) & self.mask;
        loop {
            let s = &self.slots[i];
            if s.key == key {
                return Some(s);
            }
            if s.key == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    pub fn insert(&mut self, slot: Slot) {
        debug_assert!(slot.key != 0);
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.place(slot);
        self.len += 1;
    }

    /// Removes chunk `key`'s slot, if any (backward-shift deletion: the slots after it in its
    /// probe run move up, so lookups never need tombstones).
    pub fn remove(&mut self, key: usize) -> bool {
        let mut i = hash(key) & self.mask;
        loop {
            match self.slots[i].key {
                k if k == key => break,
                0 => return false,
                _ => i = (i + 1) & self.mask,
            }
        }
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let k = self.slots[j].key;
            if k == 0 {
                break;
            }
            // The slot at `j` may fill the hole when the hole lies on its probe path, i.e. its
            // home is not strictly between the hole and `j` (cyclically).
            let home = hash(k) & self.mask;
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = EMPTY;
        self.len -= 1;
        true
    }

    fn place(&mut self, slot: Slot) {
        let mut i = hash(slot.key) & self.mask;
        while self.slots[i].key != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let doubled = vec![EMPTY; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.key != 0) {
            self.place(s);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    fn slot(key: usize) -> Slot {
        Slot {
            key,
            shift: (key % 13) as u32,
            ..EMPTY
        }
    }

    #[test]
    fn removal_keeps_every_other_key_findable() {
        // Consecutive chunk numbers (as regions give) and a spread, many sharing probe runs.
        let keys: Vec<usize> = (1..400).chain((1..300).map(|i| i * 977)).collect();
        let mut t = ChunkTable::new();
        for &k in &keys {
            if t.get(k).is_none() {
                t.insert(slot(k));
            }
        }
        let mut removed = std::collections::HashSet::new();
        for (i, &k) in keys.iter().enumerate() {
            if i % 3 != 1 || removed.contains(&k) {
                continue;
            }
            assert!(t.remove(k), "{k} present");
            assert!(!t.remove(k), "{k} removed once");
            removed.insert(k);
            for &other in &keys {
                let found = t.get(other).map(|s| (s.key, s.shift));
                if removed.contains(&other) {
                    assert_eq!(found, None, "{other} was removed");
                } else {
                    assert_eq!(found, Some((other, (other % 13) as u32)), "{other} kept");
                }
            }
        }
        // Removed keys can come back.
        for &k in &removed {
            t.insert(slot(k));
        }
        for &k in &keys {
            assert_eq!(t.get(k).map(|s| s.key), Some(k));
        }
    }
}
