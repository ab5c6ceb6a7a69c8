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
