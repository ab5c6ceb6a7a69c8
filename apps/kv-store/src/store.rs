//! The store: string keys, each holding a list of one or more values in pinned memory.
//!
//! # Updates never touch a buffer that may be on the wire
//! A reply sends a value by reference: the datapath keeps a clone of the value's [`RcBuf`]
//! until the NIC has read it. So a write never modifies a stored buffer. It allocates a new
//! pinned buffer, copies the new bytes in, and swaps it into the map; the old buffer's last
//! reference is then either the map's (freed at once) or a transmit descriptor's (freed when
//! the send completes). The bytes on the wire are always the bytes at the time of the send
//! (paper §4, "the KV store").
//!
//! # Values larger than one pinned buffer
//! A pinned buffer holds at most [`PinnedMemory::max_item_size`] bytes (a datapath setting,
//! up to 2 MiB; the KV server's default is 256 KiB). A value that fits one buffer but not one
//! frame is sent whole: the stack segments the reply. A larger value (only a local load can
//! store one: a request is itself at most one buffer) is stored as several buffers
//! ("pieces"), in order. `get` sends them as the `pieces` field of its reply, each by
//! reference, when the datapath takes a message that long; today's datapaths receive a
//! message into one pinned buffer and so cap messages at one item, and the reply is then
//! `TOO_LARGE`, never a cut value. The list reads (`getm`, `getlist`, `get_from_list`) answer
//! `TOO_LARGE` for a value in pieces. Large objects are meant to be stored as lists of
//! frame-sized values and fetched element by element with `get_from_list`, as the CDN
//! workload does.
//!
//! # Memory limit
//! Every stored buffer is charged its pinned size class (its capacity), plus the key's length.
//! A write that would take the total above [`StoreConfig::memory_limit`], or that finds the
//! pinned memory exhausted, changes nothing and answers `STORE_FULL`.

use std::collections::HashMap;

use cornflakes::mem::AllocError;
use cornflakes::{PinnedMemory, RcBuf};

use crate::ops::Status;

/// Store settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Most bytes of keys and pinned value buffers the store holds.
    pub memory_limit: usize,
}

/// Default memory limit: 512 MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 512 << 20;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            memory_limit: DEFAULT_MEMORY_LIMIT,
        }
    }
}

/// One stored value: one pinned buffer, or several pieces of a value larger than one buffer.
#[derive(Clone, Debug)]
pub enum Value {
    /// The whole value in one buffer.
    One(RcBuf),
    /// A value larger than one pinned buffer, in order.
    Pieces(Vec<RcBuf>),
}

impl Value {
    /// The buffers, in order.
    pub fn pieces(&self) -> &[RcBuf] {
        match self {
            Value::One(b) => std::slice::from_ref(b),
            Value::Pieces(p) => p,
        }
    }

    /// The single buffer of a value not stored in pieces.
    pub fn single(&self) -> Option<&RcBuf> {
        match self {
            Value::One(b) => Some(b),
            Value::Pieces(_) => None,
        }
    }

    /// Length of the value.
    pub fn len(&self) -> usize {
        self.pieces().iter().map(RcBuf::len).sum()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value's bytes, joined (a copy; for tests and checks).
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces()
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect()
    }

    fn cost(&self) -> usize {
        self.pieces().iter().map(RcBuf::item_capacity).sum()
    }
}

/// What the store holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Keys stored.
    pub keys: usize,
    /// Bytes charged against the memory limit.
    pub used_bytes: usize,
    /// Writes refused because of the memory limit or exhausted pinned memory.
    pub full: u64,
    /// Accesses to keys of another core's shard (a store with a shard only; always 0 when
    /// clients steer every key to its core, `docs/cores.md`).
    pub foreign: u64,
}

/// The key-value store of one server core. Values live in the datapath's pinned memory so
/// replies can reference them.
pub struct Store {
    mem: PinnedMemory,
    map: HashMap<String, Vec<Value>>,
    limit: usize,
    used: usize,
    full: u64,
    /// `(this core, cores)` when the store is one core's shard.
    shard: Option<(usize, usize)>,
    foreign: std::cell::Cell<u64>,
}

fn key_cost(key: &str) -> usize {
    key.len()
}

impl Store {
    /// An empty store whose values are allocated from `mem` (the datapath's memory).
    pub fn new(mem: &PinnedMemory, cfg: StoreConfig) -> Store {
        Store {
            mem: mem.clone(),
            map: HashMap::new(),
            limit: cfg.memory_limit,
            used: 0,
            full: 0,
            shard: None,
            foreign: std::cell::Cell::new(0),
        }
    }

    /// A second store with this one's contents, settings and counters, sharing its value
    /// buffers: each buffer's reference count goes up, no byte is copied. A write to either
    /// never shows in the other, because a write swaps a new buffer into its own map and
    /// never changes a stored one. The emulated-NIC bench loads a store once and serves
    /// every trial from a snapshot of it, so each trial starts from the loaded contents.
    pub fn snapshot(&self) -> Store {
        Store {
            mem: self.mem.clone(),
            map: self.map.clone(),
            limit: self.limit,
            used: self.used,
            full: self.full,
            shard: self.shard,
            foreign: self.foreign.clone(),
        }
    }

    /// Makes this store core `core`'s shard of `cores` ([`crate::steer::core_of`]): every
    /// access to a key of another core is counted in [`StoreStats::foreign`] (and still
    /// served: the key is simply not here).
    pub fn set_shard(&mut self, core: usize, cores: usize) {
        self.shard = (cores > 1).then_some((core, cores));
    }

    /// The shard, `(core, cores)`, if any.
    pub fn shard(&self) -> Option<(usize, usize)> {
        self.shard
    }

    fn touch(&self, key: &str) {
        if let Some((core, cores)) = self.shard {
            if crate::steer::core_of(key, cores) != core {
                self.foreign.set(self.foreign.get() + 1);
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            keys: self.map.len(),
            used_bytes: self.used,
            full: self.full,
            foreign: self.foreign.get(),
        }
    }

    /// Copies `data` into new pinned buffers (pieces when it exceeds one buffer).
    fn alloc_value(&mut self, data: &[u8]) -> Result<Value, Status> {
        let max = self.mem.max_item_size();
        let alloc = |chunk: &[u8]| {
            self.mem.alloc_copy(chunk).map_err(|e| match e {
                AllocError::TooLarge { .. } => Status::TooLarge,
                _ => Status::StoreFull,
            })
        };
        let v = if data.len() <= max {
            Value::One(alloc(data)?)
        } else {
            Value::Pieces(data.chunks(max).map(alloc).collect::<Result<_, _>>()?)
        };
        Ok(v)
    }

    fn alloc_or_full(&mut self, data: &[u8]) -> Result<Value, Status> {
        let r = self.alloc_value(data);
        if r.as_ref().err() == Some(&Status::StoreFull) {
            self.full += 1;
        }
        r
    }

    /// Charges `add` bytes and releases `release`, or refuses when over the limit.
    fn charge(&mut self, add: usize, release: usize) -> Result<(), Status> {
        let after = self.used.saturating_sub(release).saturating_add(add);
        if after > self.limit {
            self.full += 1;
            return Err(Status::StoreFull);
        }
        self.used = after;
        Ok(())
    }

    fn list_cost(key: &str, list: &[Value]) -> usize {
        key_cost(key) + list.iter().map(Value::cost).sum::<usize>()
    }

    /// Replaces the list at `key` by `vals` (at least one). The old buffers are released when
    /// their last reference (the store's, or an in-flight send's) drops.
    pub fn put_list(&mut self, key: &str, vals: &[&[u8]]) -> Result<(), Status> {
        self.touch(key);
        if vals.is_empty() {
            return Err(Status::BadRequest);
        }
        let new = vals
            .iter()
            .map(|v| self.alloc_or_full(v))
            .collect::<Result<Vec<Value>, Status>>()?;
        let add = Self::list_cost(key, &new);
        let release = self.map.get(key).map_or(0, |old| Self::list_cost(key, old));
        self.charge(add, release)?;
        // The swap: the old list drops here, or later if a send still references a buffer.
        self.map.insert(key.to_owned(), new);
        Ok(())
    }

    /// Stores one value at `key`, replacing its list.
    pub fn put(&mut self, key: &str, val: &[u8]) -> Result<(), Status> {
        self.put_list(key, &[val])
    }

    /// Appends `val` to the list at `key` (a new list of one when the key is absent).
    /// Returns the list's new length.
    pub fn append(&mut self, key: &str, val: &[u8]) -> Result<usize, Status> {
        self.touch(key);
        let v = self.alloc_or_full(val)?;
        let add = v.cost()
            + if self.map.contains_key(key) {
                0
            } else {
                key_cost(key)
            };
        self.charge(add, 0)?;
        let list = self.map.entry(key.to_owned()).or_default();
        list.push(v);
        Ok(list.len())
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &str) -> Result<(), Status> {
        self.touch(key);
        let old = self.map.remove(key).ok_or(Status::NotFound)?;
        self.used = self.used.saturating_sub(Self::list_cost(key, &old));
        Ok(())
    }

    /// The value of `key` (the first element of its list).
    pub fn get(&self, key: &str) -> Result<&Value, Status> {
        self.get_list(key)?.first().ok_or(Status::NotFound)
    }

    /// The whole list at `key`.
    pub fn get_list(&self, key: &str) -> Result<&[Value], Status> {
        self.touch(key);
        self.map.get(key).map(Vec::as_slice).ok_or(Status::NotFound)
    }

    /// Element `index` of the list at `key`.
    pub fn get_from_list(&self, key: &str, index: usize) -> Result<&Value, Status> {
        self.get_list(key)?.get(index).ok_or(Status::BadIndex)
    }

    /// The pinned memory values live in.
    pub fn memory(&self) -> &PinnedMemory {
        &self.mem
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cornflakes::mem::MemoryConfig;

    fn mem(max_item: usize) -> PinnedMemory {
        PinnedMemory::new(MemoryConfig {
            max_item_size: max_item,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn statuses_for_missing_keys_and_bad_indexes() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        assert_eq!(s.get("a").unwrap_err(), Status::NotFound);
        assert_eq!(s.get_from_list("a", 0).unwrap_err(), Status::NotFound);
        s.put_list("a", &[b"x", b"yy"]).unwrap();
        assert_eq!(s.get_from_list("a", 1).unwrap().to_vec(), b"yy");
        assert_eq!(s.get_from_list("a", 2).unwrap_err(), Status::BadIndex);
        assert_eq!(s.append("a", b"zzz").unwrap(), 3);
        assert_eq!(s.append("b", b"q").unwrap(), 1);
        assert_eq!(s.get("b").unwrap().to_vec(), b"q");
        s.delete("a").unwrap();
        assert_eq!(s.delete("a").unwrap_err(), Status::NotFound);
        assert_eq!(s.put_list("c", &[]).unwrap_err(), Status::BadRequest);
    }

    #[test]
    fn a_snapshot_shares_buffers_and_neither_sees_the_others_writes() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        s.put_list("a", &[b"x", b"yy"]).unwrap();
        s.put("b", &[3u8; 2048]).unwrap();
        let live = m.stats().live_items;
        let mut snap = s.snapshot();
        assert_eq!(m.stats().live_items, live, "no buffer copied");
        assert_eq!(snap.stats(), s.stats());
        // Writes to the copy: an append, a replacement, a delete, a new key.
        snap.append("a", b"zzz").unwrap();
        snap.put("b", b"new").unwrap();
        snap.delete("a").unwrap();
        snap.put("c", b"c").unwrap();
        assert_eq!(s.get_list("a").unwrap().len(), 2);
        assert_eq!(s.get("b").unwrap().to_vec(), vec![3u8; 2048]);
        assert_eq!(s.get("c").unwrap_err(), Status::NotFound);
        assert_ne!(snap.stats(), s.stats());
        // A fresh snapshot of the original is the original again; dropping the written
        // copy frees exactly what its writes allocated.
        drop(snap);
        assert_eq!(m.stats().live_items, live);
        let again = s.snapshot();
        assert_eq!(again.get("b").unwrap().to_vec(), vec![3u8; 2048]);
        assert_eq!(again.stats(), s.stats());
    }

    #[test]
    fn memory_limit_refuses_writes_and_changes_nothing() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig { memory_limit: 5000 });
        s.put("a", &[1; 2000]).unwrap(); // 2048 + 1
        s.put("b", &[2; 2000]).unwrap(); // 4098 in all
        assert_eq!(s.put("c", &[3; 2000]).unwrap_err(), Status::StoreFull);
        assert_eq!(s.get("c").unwrap_err(), Status::NotFound);
        // Replacing a value releases the old one's charge first.
        s.put("a", &[4; 1500]).unwrap();
        assert_eq!(s.get("a").unwrap().to_vec(), vec![4; 1500]);
        assert_eq!(s.stats().used_bytes, 4098);
        assert_eq!(s.stats().full, 1);
        s.delete("b").unwrap();
        s.put("c", &[3; 2000]).unwrap();
    }

    #[test]
    fn values_larger_than_one_buffer_are_stored_in_pieces() {
        let m = mem(1024);
        let mut s = Store::new(&m, StoreConfig::default());
        let big: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        s.put("big", &big).unwrap();
        let v = s.get("big").unwrap();
        assert_eq!(v.pieces().len(), 5);
        assert!(v.single().is_none());
        assert_eq!(v.to_vec(), big);
    }

    #[test]
    fn a_put_swaps_in_a_new_buffer_and_leaves_the_old_one_intact() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        s.put("k", &[1; 600]).unwrap();
        let in_flight = s.get("k").unwrap().single().unwrap().clone();
        s.put("k", &[2; 600]).unwrap();
        assert_eq!(&in_flight[..], &[1; 600][..]);
        assert_eq!(
            in_flight.ref_count(),
            1,
            "the store let go of the old buffer"
        );
        assert_eq!(s.get("k").unwrap().to_vec(), vec![2; 600]);
        let live = m.stats().live_items;
        drop(in_flight);
        assert_eq!(m.stats().live_items, live - 1);
    }
}
