//! What a stored entry really costs in memory, as the store charges it against its limit
//! ([`crate::store::StoreConfig::memory_limit`]).
//!
//! An entry is more than its bytes: the key is a heap allocation, the list of values is
//! another, each value is a pinned buffer of its size class (plus the 4-byte reference count
//! its chunk keeps per item), a value in pieces has a heap vector of buffer handles, and the
//! hash table holds a slot (key and list handles plus one control byte) for each of its
//! buckets, of which up to 1/8 are kept empty and which double when the table grows. Heap
//! blocks are charged as glibc's allocator sizes them: the request plus an 8-byte header,
//! rounded up to 16, at least 32 bytes.
//!
//! `tests/memory_charge.rs` checks these charges against the resident memory a store really
//! takes, within 20 % either way: about 100 000 and 200 000 entries (three quarters of the way
//! between two growths of the table, [`capacity_for`]) of empty, 16-, 100- and 600-byte values
//! and of two appended values.

use std::mem::size_of;

use cornflakes::RcBuf;

use crate::value::Value;

/// Bytes of the reference count a pinned chunk keeps for each of its items (on the heap).
const REFCOUNT: usize = size_of::<u32>();

/// What the allocator takes for a heap block of `n` requested bytes (0 for no block): glibc
/// malloc's chunk, the request plus an 8-byte header rounded up to 16, at least 32.
pub fn heap_block(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n + 8).div_ceil(16).max(2) * 16
    }
}

/// The key's heap allocation (a `String` of exactly the key's length).
pub fn key(key: &str) -> usize {
    heap_block(key.len())
}

/// One value: its pinned buffers' size classes and reference counts, and for a value in
/// pieces the heap vector of their handles.
pub fn value(v: &Value) -> usize {
    let bufs: usize = v
        .pieces()
        .iter()
        .map(|b| b.item_capacity() + REFCOUNT)
        .sum();
    match v {
        Value::One(_) => bufs,
        Value::Pieces(p) => bufs + heap_block(p.capacity() * size_of::<RcBuf>()),
    }
}

/// A list of values held in a vector of capacity `capacity`.
pub fn list(list: &[Value], capacity: usize) -> usize {
    heap_block(capacity * size_of::<Value>()) + list.iter().map(value).sum::<usize>()
}

/// A whole entry: key, list vector and values (the table slot is charged by [`table`]).
pub fn entry(k: &str, l: &Vec<Value>) -> usize {
    key(k) + list(l, l.capacity())
}

/// The capacity a `Vec` of capacity `cap` holding `len` elements has after one push: the
/// same while there is room, else doubled (at least 4, std's smallest non-zero capacity for
/// elements of this size).
pub fn grown_capacity(len: usize, cap: usize) -> usize {
    if len < cap {
        cap
    } else {
        (cap * 2).max(len + 1).max(4)
    }
}

/// Buckets of a hash table whose full capacity (items it holds before growing) is `cap`:
/// tables under 8 buckets fill every bucket but one, larger ones 7/8 of them.
fn buckets_of_capacity(cap: usize) -> usize {
    match cap {
        0 => 0,
        c if c < 7 => c + 1,
        c => c / 7 * 8,
    }
}

/// Full capacity of the table the map grows to when it must hold `items`: buckets are a
/// power of two, at least 4, with room for `items` at 7/8 load.
pub fn capacity_for(items: usize) -> usize {
    let buckets = if items < 4 {
        4
    } else if items < 8 {
        8
    } else {
        (items * 8 / 7).next_power_of_two()
    };
    if buckets < 8 {
        buckets - 1
    } else {
        buckets / 8 * 7
    }
}

/// The hash table's own allocation at full capacity `cap`: one slot (a `String` and a
/// `Vec<Value>`) plus one control byte per bucket, and a group of 16 trailing control bytes.
pub fn table(cap: usize) -> usize {
    let buckets = buckets_of_capacity(cap);
    if buckets == 0 {
        return 0;
    }
    heap_block(buckets * (size_of::<(String, Vec<Value>)>() + 1) + 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_blocks_are_sized_like_glibc_chunks() {
        assert_eq!(heap_block(0), 0);
        assert_eq!(heap_block(1), 32);
        assert_eq!(heap_block(24), 32);
        assert_eq!(heap_block(25), 48);
        assert_eq!(heap_block(100), 112);
    }

    #[test]
    fn table_capacity_matches_std() {
        // The prediction of the growth the store charges before inserting must be the
        // capacity std's map really reaches.
        let mut m: std::collections::HashMap<String, Vec<Value>> = Default::default();
        let mut full = 0;
        for i in 0..5000 {
            let before = m.capacity();
            let predicted = if m.len() < before {
                before
            } else {
                capacity_for((m.len() + 1).max(before + 1))
            };
            m.insert(i.to_string(), Vec::new());
            full = full.max(m.capacity());
            assert_eq!(full, predicted, "after {} inserts", i + 1);
        }
        assert!(table(full) > 0);
    }

    #[test]
    fn vec_growth_matches_std() {
        let mut v: Vec<u64> = Vec::new();
        for _ in 0..100 {
            let predicted = grown_capacity(v.len(), v.capacity());
            v.push(1);
            assert_eq!(v.capacity(), predicted);
        }
    }
}
