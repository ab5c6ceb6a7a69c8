//! The store: string keys, each holding a list of one or more values in pinned memory.
//!
//! # Updates never touch a buffer that may be on the wire
//! A reply sends a value by reference: the datapath keeps a clone of the value's
//! [`RcBuf`](cornflakes::RcBuf) until the NIC has read it. So a write never modifies a stored
//! buffer. It allocates a new pinned buffer, copies the new bytes in, and swaps it into the
//! map; the old buffer's last
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
//! Every entry is charged what it really costs ([`crate::cost`]): the key's heap block, the
//! list's heap block, each value's pinned size class and reference count, and the hash
//! table's slots. A write that would take the total above [`StoreConfig::memory_limit`], or
//! that finds the pinned memory exhausted, changes nothing and answers `STORE_FULL`.
//!
//! # Whole requests or nothing
//! A multi-key put ([`Store::put_lists`]) allocates every value and checks the limit for all
//! of them before it changes the map: it applies completely or not at all.
//!
//! # Exactly once
//! [`Store::once`] runs a write unless the same write (its client's incarnation and request
//! id, and the same bytes) already ran, in which case it returns the first outcome; a write
//! that reuses a recorded id with other bytes is refused `BAD_REQUEST` and not run
//! ([`cornflakes_rpc::once`]).

use std::collections::HashMap;

use cornflakes::mem::AllocError;
use cornflakes::PinnedMemory;

use cornflakes_rpc::once::{Check, Incoming, OnceStats, OnceTable, Window};

use crate::cost;
use crate::ops::Status;
pub use crate::value::Value;

/// What a write answered: its status and, for an append, the list's new length. It is what
/// the exactly-once table keeps of a write (16 bytes).
pub type Outcome = Result<usize, Status>;

/// Writes remembered per server core by default, for retries: 65 536, at most 8 192 per
/// client ([`cornflakes_rpc::once::Window::DEFAULT`]).
pub const DEFAULT_DEDUP_WINDOW: usize = Window::DEFAULT.per_core;

/// Store settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Most bytes the store's entries may cost ([`crate::cost`]: keys, lists, pinned value
    /// buffers, hash table).
    pub memory_limit: usize,
    /// Write outcomes remembered for retries, an eighth of them (at least 1 024) per client
    /// ([`cornflakes_rpc::once`]); 0 turns deduplication off.
    pub dedup_window: usize,
}

/// Default memory limit: 512 MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 512 << 20;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            memory_limit: DEFAULT_MEMORY_LIMIT,
            dedup_window: DEFAULT_DEDUP_WINDOW,
        }
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
    /// Requests answered `BAD_REQUEST` (decoded, but invalid: nothing was written).
    pub bad_requests: u64,
    /// The retry table's counters (retries answered, writes refused for a reused id).
    pub dedup: OnceStats,
}

/// The key-value store of one server core. Values live in the datapath's pinned memory so
/// replies can reference them.
pub struct Store {
    mem: PinnedMemory,
    map: HashMap<String, Vec<Value>>,
    limit: usize,
    /// What the entries cost, without the table.
    entries: usize,
    /// The largest capacity the map has had (its buckets never shrink).
    table_cap: usize,
    full: u64,
    bad_requests: u64,
    /// `(this core, cores)` when the store is one core's shard.
    shard: Option<(usize, usize)>,
    foreign: std::cell::Cell<u64>,
    dedup: OnceTable<Outcome>,
}

impl Store {
    /// An empty store whose values are allocated from `mem` (the datapath's memory).
    pub fn new(mem: &PinnedMemory, cfg: StoreConfig) -> Store {
        Store {
            mem: mem.clone(),
            map: HashMap::new(),
            limit: cfg.memory_limit,
            entries: 0,
            table_cap: 0,
            full: 0,
            bad_requests: 0,
            shard: None,
            foreign: std::cell::Cell::new(0),
            dedup: OnceTable::new(Window::of(cfg.dedup_window)),
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
            entries: self.entries,
            table_cap: self.table_cap,
            full: self.full,
            bad_requests: self.bad_requests,
            shard: self.shard,
            foreign: self.foreign.clone(),
            dedup: self.dedup.clone(),
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
            used_bytes: self.used(),
            full: self.full,
            foreign: self.foreign.get(),
            bad_requests: self.bad_requests,
            dedup: self.dedup.stats(),
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

    /// Bytes charged: the entries and the hash table.
    fn used(&self) -> usize {
        self.entries + cost::table(self.table_cap)
    }

    /// The table's full capacity once `new_keys` more keys are in.
    fn table_cap_after(&self, new_keys: usize) -> usize {
        let len = self.map.len() + new_keys;
        if len <= self.map.capacity() {
            self.table_cap
        } else {
            cost::capacity_for(len.max(self.table_cap + 1)).max(self.table_cap)
        }
    }

    /// Refuses (and counts) a write whose entries would cost `entries` with the table at
    /// capacity `table_cap`, when that is over the limit.
    fn check(&mut self, entries: usize, table_cap: usize) -> Result<(), Status> {
        if entries.saturating_add(cost::table(table_cap)) > self.limit {
            self.full += 1;
            return Err(Status::StoreFull);
        }
        Ok(())
    }

    /// After the map changed: the table's real capacity.
    fn sync_table(&mut self) {
        self.table_cap = self.table_cap.max(self.map.capacity());
    }

    /// Counts a request refused before it reached the store (decoded but invalid: a
    /// `BAD_REQUEST`, nothing written); returns `status`.
    pub fn tally(&mut self, status: Status) -> Status {
        if status == Status::BadRequest {
            self.bad_requests += 1;
        }
        status
    }

    /// Runs write `f` once: when `req` is a write already run (a client's retry: same
    /// client, id and bytes), returns its first outcome without running `f`; when its client
    /// and id were recorded for other bytes (a reused id), refuses it `BAD_REQUEST` without
    /// running `f` (counted in [`OnceStats::refused`]); else runs `f` and records the outcome.
    /// Without `req` (an anonymous client whose address is unknown) `f` simply runs.
    pub fn once(
        &mut self,
        req: Option<Incoming<'_>>,
        f: impl FnOnce(&mut Store) -> Outcome,
    ) -> Outcome {
        let Some(req) = req else {
            return f(self);
        };
        match self.dedup.check(&req) {
            Check::Run(fresh) => {
                let o = f(self);
                self.dedup.record(fresh, o);
                o
            }
            Check::Answered(o) => o,
            Check::Refused => Err(Status::BadRequest),
        }
    }

    /// Replaces the lists of several keys, each by its values (at least one): all of them, or
    /// — when one is invalid, over the memory limit, or finds the pinned memory exhausted —
    /// none. A key given twice ends with its last list, as if the puts ran in order. The old
    /// buffers are released when their last reference (the store's, or an in-flight send's)
    /// drops.
    pub fn put_lists(&mut self, items: &[(&str, &[&[u8]])]) -> Result<(), Status> {
        if items.is_empty() || items.iter().any(|(_, v)| v.is_empty()) {
            return Err(Status::BadRequest);
        }
        for (k, _) in items {
            self.touch(k);
        }
        // The last occurrence of each key wins (a few keys are compared directly: a put has
        // one, and a map would cost an allocation).
        let last: Option<HashMap<&str, usize>> = (items.len() > 16).then(|| {
            items
                .iter()
                .enumerate()
                .map(|(i, (k, _))| (*k, i))
                .collect()
        });
        let is_last = |i: usize, k: &str| match &last {
            Some(m) => m.get(k) == Some(&i),
            None => !items[i + 1..].iter().any(|(k2, _)| *k2 == k),
        };
        let mut new = Vec::with_capacity(items.len());
        for (i, (k, vals)) in items.iter().enumerate() {
            if !is_last(i, k) {
                continue;
            }
            let list = vals
                .iter()
                .map(|v| self.alloc_or_full(v))
                .collect::<Result<Vec<Value>, Status>>()?;
            new.push((*k, list));
        }
        let mut entries = self.entries;
        let mut new_keys = 0;
        for (k, list) in &new {
            entries += cost::entry(k, list);
            match self.map.get(*k) {
                Some(old) => entries = entries.saturating_sub(cost::entry(k, old)),
                None => new_keys += 1,
            }
        }
        self.check(entries, self.table_cap_after(new_keys))?;
        // The swap: the old lists drop here, or later if a send still references a buffer.
        for (k, list) in new {
            match self.map.get_mut(k) {
                Some(slot) => *slot = list,
                None => {
                    self.map.insert(k.to_owned(), list);
                }
            }
        }
        self.entries = entries;
        self.sync_table();
        Ok(())
    }

    /// Stores one value at each key ([`Store::put_lists`]: all or nothing).
    pub fn put_many(&mut self, pairs: &[(&str, &[u8])]) -> Result<(), Status> {
        let singles: Vec<[&[u8]; 1]> = pairs.iter().map(|(_, v)| [*v]).collect();
        let items: Vec<(&str, &[&[u8]])> = pairs
            .iter()
            .zip(&singles)
            .map(|((k, _), v)| (*k, &v[..]))
            .collect();
        self.put_lists(&items)
    }

    /// Replaces the list at `key` by `vals` (at least one). The old buffers are released when
    /// their last reference (the store's, or an in-flight send's) drops.
    pub fn put_list(&mut self, key: &str, vals: &[&[u8]]) -> Result<(), Status> {
        self.put_lists(&[(key, vals)])
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
        let (before, after, table_cap) = match self.map.get(key) {
            Some(l) => {
                let cap = cost::grown_capacity(l.len(), l.capacity());
                let before = cost::entry(key, l);
                let after = cost::key(key) + cost::list(l, cap) + cost::value(&v);
                (before, after, self.table_cap)
            }
            None => {
                let cap = cost::grown_capacity(0, 0);
                let after = cost::key(key) + cost::list(&[], cap) + cost::value(&v);
                (0, after, self.table_cap_after(1))
            }
        };
        let entries = self.entries - before + after;
        self.check(entries, table_cap)?;
        let list = self.map.entry(key.to_owned()).or_default();
        list.push(v);
        let n = list.len();
        // The real cost (the same as predicted unless std's growth policy changed).
        let real = cost::entry(key, list);
        self.entries = self.entries - before + real;
        self.sync_table();
        Ok(n)
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &str) -> Result<(), Status> {
        self.touch(key);
        let old = self.map.remove(key).ok_or(Status::NotFound)?;
        self.entries = self.entries.saturating_sub(cost::entry(key, &old));
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
        let mut s = Store::new(&m, StoreConfig::default());
        s.put("a", &[1; 2000]).unwrap();
        let one = s.stats().used_bytes;
        // Each entry costs its key, its list, its 2 KiB buffer and the table's share.
        assert!(one > 2048 + 1, "{one}");
        let limit = 2 * one + 100;
        let mut s = Store::new(
            &m,
            StoreConfig {
                memory_limit: limit,
                ..StoreConfig::default()
            },
        );
        s.put("a", &[1; 2000]).unwrap();
        s.put("b", &[2; 2000]).unwrap();
        let two = s.stats().used_bytes;
        assert!(two <= limit);
        assert_eq!(s.put("c", &[3; 2000]).unwrap_err(), Status::StoreFull);
        assert_eq!(s.get("c").unwrap_err(), Status::NotFound);
        assert_eq!(s.stats().used_bytes, two, "a refused write charges nothing");
        // Replacing a value releases the old one's charge first.
        s.put("a", &[4; 1500]).unwrap();
        assert_eq!(s.get("a").unwrap().to_vec(), vec![4; 1500]);
        assert_eq!(s.stats().used_bytes, two);
        assert_eq!(s.stats().full, 1);
        s.delete("b").unwrap();
        s.put("c", &[3; 2000]).unwrap();
        assert_eq!(s.stats().used_bytes, two);
    }

    #[test]
    fn a_multi_key_put_applies_all_or_nothing() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        s.put("a", b"old").unwrap();
        let used = s.stats().used_bytes;
        // An invalid part (a key with no value) refuses the whole request.
        assert_eq!(
            s.put_lists(&[("a", &[b"new"]), ("b", &[])]).unwrap_err(),
            Status::BadRequest
        );
        assert_eq!(s.get("a").unwrap().to_vec(), b"old");
        // Over the limit on the second key: nothing written.
        let mut small = Store::new(
            &m,
            StoreConfig {
                memory_limit: used + 200,
                ..StoreConfig::default()
            },
        );
        small.put("a", b"old").unwrap();
        let live = m.stats().live_items;
        assert_eq!(
            small
                .put_many(&[("a", b"new"), ("b", &[0; 4000])])
                .unwrap_err(),
            Status::StoreFull
        );
        assert_eq!(small.get("a").unwrap().to_vec(), b"old");
        assert_eq!(small.get("b").unwrap_err(), Status::NotFound);
        assert_eq!(m.stats().live_items, live, "the refused values were freed");
        // A key given twice ends with its last value.
        s.put_many(&[("k", b"1"), ("k", b"2")]).unwrap();
        assert_eq!(s.get("k").unwrap().to_vec(), b"2");
        assert_eq!(s.get_list("k").unwrap().len(), 1);
        // The same with more keys than are compared directly.
        let keys: Vec<String> = (0..20).map(|i| format!("m{}", i % 19)).collect();
        let vals: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8]).collect();
        let pairs: Vec<(&str, &[u8])> = keys
            .iter()
            .zip(&vals)
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let before = s.stats().keys;
        s.put_many(&pairs).unwrap();
        assert_eq!(s.stats().keys, before + 19);
        assert_eq!(s.get("m0").unwrap().to_vec(), vec![19]);
        assert_eq!(s.get("m1").unwrap().to_vec(), vec![1]);
    }

    #[test]
    fn charges_track_appends_and_deletes_exactly() {
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        for i in 0..100 {
            s.append("l", &[i as u8; 100]).unwrap();
            s.put(&format!("k{i}"), b"v").unwrap();
        }
        let entries: usize = s.map.iter().map(|(k, l)| cost::entry(k, l)).sum();
        assert_eq!(s.stats().used_bytes, entries + cost::table(s.table_cap));
        for i in 0..100 {
            s.delete(&format!("k{i}")).unwrap();
        }
        s.delete("l").unwrap();
        assert_eq!(s.stats().used_bytes, cost::table(s.table_cap));
    }

    #[test]
    fn a_tagged_write_runs_once() {
        use cornflakes::Msg;
        use std::net::{Ipv4Addr, SocketAddrV4};
        let m = mem(16 * 1024);
        let mut s = Store::new(&m, StoreConfig::default());
        let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9);
        let t = Incoming::new(Msg::new(5, 7), b"append l x", || Some(client));
        for _ in 0..3 {
            assert_eq!(s.once(t, |s| s.append("l", b"x")), Ok(1));
        }
        assert_eq!(s.get_list("l").unwrap().len(), 1);
        assert_eq!(s.stats().dedup.hits, 2);
        // The same client and id with other bytes: refused, not run, not answered Ok.
        let reused = Incoming::new(Msg::new(5, 7), b"append l y", || Some(client));
        assert_eq!(
            s.once(reused, |s| s.append("l", b"y")),
            Err(Status::BadRequest)
        );
        assert_eq!(s.get_list("l").unwrap().len(), 1);
        assert_eq!(s.stats().dedup.refused, 1);
        // Without a tag (or with deduplication off) a write runs every time.
        assert_eq!(s.once(None, |s| s.append("l", b"x")), Ok(2));
        let mut off = Store::new(
            &m,
            StoreConfig {
                dedup_window: 0,
                ..StoreConfig::default()
            },
        );
        off.once(t, |s| s.append("l", b"x")).unwrap();
        off.once(t, |s| s.append("l", b"x")).unwrap();
        assert_eq!(off.get_list("l").unwrap().len(), 2);
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
