//! A workload's run mapped onto a peer's protocol: how each request is encoded, how its
//! replies are reduced to a compact verdict payload, and which payloads are correct.
//!
//! Verification: for every key the run names, the plan replays the run's writes in order from
//! the key's loaded value ([`Workload::initial_value`]) and keeps a 64-bit hash of every state
//! the key passes through. A read is correct when what it returned is one of those states
//! (the loaded value or one the run wrote; concurrent connections may see a write early or
//! late, so any state of the run is accepted, not only the latest). Writes are correct when
//! the server acknowledges them; their effect is checked by the reads that follow.

use crate::memcache;
use crate::server::Peer;
use kv_workloads::{Request, Workload};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;

/// How values live in the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One string per key (`SET`/`GET`; memcached items): workloads without list requests. A
    /// key loaded with several elements holds their concatenation; `Append` concatenates.
    Strings,
    /// A list per key (Redis lists: `RPUSH`, `LRANGE`, `LINDEX`; memcached has none, so
    /// element `j` of key `k` is the item `k/j`): workloads with `GetList`/`GetFromList`.
    Lists,
}

/// Hash of "no value" (a missing key or index).
pub const NONE_HASH: u64 = 0x6e6f_6e65_6e6f_6e65;

/// A fast 64-bit hash of bytes (8 bytes per step), good enough to tell values apart.
pub fn hash_bytes(data: &[u8]) -> u64 {
    let mut h: u64 =
        0x243f_6a88_85a3_08d3 ^ (data.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    if h == NONE_HASH {
        h ^= 1;
    }
    h
}

/// Hash of a whole list, from its elements' hashes (empty list: [`NONE_HASH`]).
pub fn hash_list(elems: impl IntoIterator<Item = u64>) -> u64 {
    let mut h: u64 = 0x1357_9bdf_2468_ace0;
    let mut n = 0u64;
    for e in elems {
        h = (h ^ e).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(27);
        n += 1;
    }
    if n == 0 {
        NONE_HASH
    } else {
        h ^ n
    }
}

/// Everything a key may legitimately return during the run.
#[derive(Debug, Default, Clone)]
struct Accept {
    /// Hashes of the key's value as one string (concatenated elements), or NONE when absent.
    concat: HashSet<u64>,
    /// Hashes of the key's whole list.
    list: HashSet<u64>,
    /// Per index: hashes of that element (NONE when the list was shorter).
    elems: Vec<HashSet<u64>>,
    /// Longest list the key held (memcached lists layout: how many items to fetch).
    max_len: usize,
    /// States recorded so far.
    states: usize,
}

impl Accept {
    fn add(&mut self, state: Option<&[Vec<u8>]>) {
        let hs: Vec<u64> =
            state.map_or_else(Vec::new, |v| v.iter().map(|e| hash_bytes(e)).collect());
        if self.elems.len() < hs.len() {
            // Indexes a list reaches only now were absent in every earlier state.
            let fill: HashSet<u64> = if self.states > 0 {
                [NONE_HASH].into()
            } else {
                HashSet::new()
            };
            self.elems.resize(hs.len(), fill);
        }
        for (i, e) in self.elems.iter_mut().enumerate() {
            e.insert(hs.get(i).copied().unwrap_or(NONE_HASH));
        }
        match state {
            None => {
                self.concat.insert(NONE_HASH);
                self.list.insert(NONE_HASH);
            }
            Some(v) => {
                self.concat.insert(if v.len() == 1 {
                    hs[0]
                } else {
                    hash_bytes(&v.concat())
                });
                self.list.insert(hash_list(hs.iter().copied()));
            }
        }
        self.max_len = self.max_len.max(hs.len());
        self.states += 1;
    }
}

/// Why a plan cannot be built.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

/// One run of a workload against one peer.
#[derive(Debug)]
pub struct Plan {
    /// Which protocol.
    pub peer: Peer,
    /// How values are stored.
    pub layout: Layout,
    /// The run's requests.
    pub requests: Vec<Request>,
    /// The units (ranges of `requests`) the load generator schedules: one request each, or
    /// one object's pieces (CDN).
    pub units: Vec<Range<usize>>,
    accept: HashMap<String, Accept>,
}

/// A verdict payload: per request, `O` (acknowledged write), `V` + u32 count + u64 hashes
/// (values read), or `E` + u32 length + text (an error reply).
pub(crate) fn push_ok(out: &mut Vec<u8>) {
    out.push(b'O');
}

pub(crate) fn push_values(out: &mut Vec<u8>, hashes: &[u64]) {
    out.push(b'V');
    out.extend_from_slice(&(hashes.len() as u32).to_le_bytes());
    for h in hashes {
        out.extend_from_slice(&h.to_le_bytes());
    }
}

pub(crate) fn push_error(out: &mut Vec<u8>, what: &str) {
    out.push(b'E');
    out.extend_from_slice(&(what.len() as u32).to_le_bytes());
    out.extend_from_slice(what.as_bytes());
}

impl Plan {
    /// Builds the plan of `requests` (from `workload.requests`) for `peer`.
    pub fn new(
        peer: Peer,
        workload: &dyn Workload,
        requests: Vec<Request>,
    ) -> Result<Plan, PlanError> {
        let lists = requests
            .iter()
            .any(|r| matches!(r, Request::GetList { .. } | Request::GetFromList { .. }));
        let layout = if lists {
            Layout::Lists
        } else {
            Layout::Strings
        };
        if peer == Peer::Memcached
            && layout == Layout::Lists
            && requests.iter().any(Request::is_write)
        {
            return Err(PlanError(
                "memcached has no lists: a workload with list reads and writes cannot run on it"
                    .into(),
            ));
        }
        if peer == Peer::Redis
            && layout == Layout::Lists
            && requests.iter().any(|r| matches!(r, Request::GetM { .. }))
        {
            return Err(PlanError(
                "redis: getm over list keys is not mapped (MGET reads strings only)".into(),
            ));
        }
        let bounds = workload.unit_boundaries(&requests);
        let mut units = Vec::with_capacity(bounds.len());
        for (i, &b) in bounds.iter().enumerate() {
            let end = bounds.get(i + 1).copied().unwrap_or(requests.len());
            if b < end {
                units.push(b..end);
            }
        }
        if units.is_empty() {
            return Err(PlanError("the workload generated no requests".into()));
        }
        let mut state: HashMap<String, Option<Vec<Vec<u8>>>> = HashMap::new();
        let mut accept: HashMap<String, Accept> = HashMap::new();
        for r in &requests {
            for k in r.keys() {
                if peer == Peer::Memcached {
                    let probe = if layout == Layout::Lists {
                        format!("{k}/0")
                    } else {
                        k.to_owned()
                    };
                    memcache::check_key(probe.as_bytes()).map_err(|e| PlanError(format!("{e}")))?;
                }
                if !state.contains_key(k) {
                    let v = workload.initial_value(k);
                    let a = accept.entry(k.to_owned()).or_default();
                    a.add(v.as_deref());
                    state.insert(k.to_owned(), v);
                }
            }
            let mut set = |state: &mut HashMap<String, Option<Vec<Vec<u8>>>>,
                           key: &str,
                           new: Option<Vec<Vec<u8>>>| {
                accept.get_mut(key).expect("seen").add(new.as_deref());
                state.insert(key.to_owned(), new);
            };
            match r {
                Request::Put { key, val } => set(&mut state, key, Some(vec![val.clone()])),
                Request::PutM { keys, vals } => {
                    for (k, v) in keys.iter().zip(vals) {
                        set(&mut state, k, Some(vec![v.clone()]));
                    }
                }
                Request::Append { key, val } => {
                    let mut cur = state
                        .get(key.as_str())
                        .cloned()
                        .flatten()
                        .unwrap_or_default();
                    if layout == Layout::Strings && !cur.is_empty() {
                        let mut joined = cur.concat();
                        joined.extend_from_slice(val);
                        cur = vec![joined];
                    } else {
                        cur.push(val.clone());
                    }
                    set(&mut state, key, Some(cur));
                }
                Request::Delete { key } => set(&mut state, key, None),
                _ => {}
            }
        }
        Ok(Plan {
            peer,
            layout,
            requests,
            units,
            accept,
        })
    }

    /// The unit a request id stands for: ids are spread over the units round-robin by
    /// (sequence number, thread), wrapping when a run is longer than the plan.
    pub fn unit_of(&self, id: u64, threads: usize) -> usize {
        let (thread, seq) = loadgen::split_request_id(id);
        ((seq as u128 * threads as u128 + thread as u128) % self.units.len() as u128) as usize
    }

    /// Longest list of `key` (memcached lists layout).
    pub fn list_len(&self, key: &str) -> usize {
        self.accept.get(key).map_or(0, |a| a.max_len)
    }

    /// Appends the commands of request `i` to `out`; returns how many replies they produce.
    pub fn encode(&self, i: usize, out: &mut Vec<u8>) -> usize {
        let r = &self.requests[i];
        match self.peer {
            Peer::Redis => {
                let b = |s: &str| s.as_bytes().to_vec();
                let args: Vec<Vec<u8>> = match (r, self.layout) {
                    (Request::Get { key }, Layout::Strings) => vec![b("GET"), b(key)],
                    (Request::Get { key }, Layout::Lists) => vec![b("LINDEX"), b(key), b("0")],
                    (Request::Put { key, val }, Layout::Strings) => {
                        vec![b("SET"), b(key), val.clone()]
                    }
                    (Request::Put { key, val }, Layout::Lists) => {
                        // Replace the list by one element, atomically.
                        let mut o = Vec::new();
                        resp::Out::command(&mut o, &[b"MULTI"]);
                        resp::Out::command(&mut o, &[b"DEL", key.as_bytes()]);
                        resp::Out::command(&mut o, &[b"RPUSH", key.as_bytes(), val]);
                        resp::Out::command(&mut o, &[b"EXEC"]);
                        out.extend_from_slice(&o);
                        return 4;
                    }
                    (Request::GetM { keys }, _) => std::iter::once(b("MGET"))
                        .chain(keys.iter().map(|k| b(k)))
                        .collect(),
                    (Request::PutM { keys, vals }, _) => std::iter::once(b("MSET"))
                        .chain(keys.iter().zip(vals).flat_map(|(k, v)| [b(k), v.clone()]))
                        .collect(),
                    (Request::GetList { key }, _) => vec![b("LRANGE"), b(key), b("0"), b("-1")],
                    (Request::GetFromList { key, index }, _) => {
                        vec![b("LINDEX"), b(key), index.to_string().into_bytes()]
                    }
                    (Request::Append { key, val }, Layout::Strings) => {
                        vec![b("APPEND"), b(key), val.clone()]
                    }
                    (Request::Append { key, val }, Layout::Lists) => {
                        vec![b("RPUSH"), b(key), val.clone()]
                    }
                    (Request::Delete { key }, _) => vec![b("DEL"), b(key)],
                };
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                resp::Out::command(out, &refs);
                1
            }
            // Keys were checked when the plan was built, so encoding cannot fail here.
            Peer::Memcached => {
                let elem = |k: &str, j: usize| format!("{k}/{j}");
                let res = match (r, self.layout) {
                    (Request::Get { key }, Layout::Strings) => {
                        memcache::encode_get(out, &[key.as_bytes()]).map(|_| 1)
                    }
                    (Request::Get { key }, Layout::Lists) => {
                        memcache::encode_get(out, &[elem(key, 0).as_bytes()]).map(|_| 1)
                    }
                    (Request::GetM { keys }, _) => {
                        let names: Vec<String> = match self.layout {
                            Layout::Strings => keys.clone(),
                            Layout::Lists => keys.iter().map(|k| elem(k, 0)).collect(),
                        };
                        let refs: Vec<&[u8]> = names.iter().map(|k| k.as_bytes()).collect();
                        memcache::encode_get(out, &refs).map(|_| 1)
                    }
                    (Request::GetList { key }, _) => {
                        let names: Vec<String> = (0..self.list_len(key).max(1))
                            .map(|j| elem(key, j))
                            .collect();
                        let refs: Vec<&[u8]> = names.iter().map(|k| k.as_bytes()).collect();
                        memcache::encode_get(out, &refs).map(|_| 1)
                    }
                    (Request::GetFromList { key, index }, _) => {
                        memcache::encode_get(out, &[elem(key, *index as usize).as_bytes()])
                            .map(|_| 1)
                    }
                    (Request::Put { key, val }, _) => {
                        memcache::encode_store(out, "set", key.as_bytes(), val).map(|_| 1)
                    }
                    (Request::PutM { keys, vals }, _) => keys
                        .iter()
                        .zip(vals)
                        .try_for_each(|(k, v)| memcache::encode_store(out, "set", k.as_bytes(), v))
                        .map(|_| keys.len()),
                    (Request::Append { key, val }, _) => {
                        memcache::encode_store(out, "append", key.as_bytes(), val).map(|_| 1)
                    }
                    (Request::Delete { key }, _) => {
                        memcache::encode_delete(out, key.as_bytes()).map(|_| 1)
                    }
                };
                res.expect("keys checked when the plan was built")
            }
        }
    }

    /// Reduces the Redis replies of request `i` to its verdict payload, appended to `out`.
    pub fn reduce_resp(&self, i: usize, replies: &[resp::Value], out: &mut Vec<u8>) {
        use resp::Value as V;
        let r = &self.requests[i];
        let bulk = |v: &V| -> Result<u64, String> {
            match v {
                V::Bulk(Some(d)) => Ok(hash_bytes(d)),
                V::Bulk(None) => Ok(NONE_HASH),
                other => Err(format!("expected a bulk string, got {other:?}")),
            }
        };
        let res: Result<Vec<u64>, String> = match (r, replies) {
            (_, [V::Error(e)]) => Err(String::from_utf8_lossy(e).into_owned()),
            (Request::Get { .. } | Request::GetFromList { .. }, [v]) => bulk(v).map(|h| vec![h]),
            (Request::GetM { keys }, [V::Array(Some(items))]) if items.len() == keys.len() => {
                items.iter().map(bulk).collect()
            }
            (Request::GetList { .. }, [V::Array(Some(items))]) => items
                .iter()
                .map(bulk)
                .collect::<Result<Vec<u64>, String>>()
                .map(|hs| vec![hash_list(hs)]),
            (Request::Put { .. } | Request::PutM { .. }, [V::Simple(s)]) if s == b"OK" => {
                Ok(vec![])
            }
            (Request::Append { .. } | Request::Delete { .. }, [V::Integer(_)]) => Ok(vec![]),
            (
                Request::Put { .. },
                [V::Simple(a), V::Simple(b), V::Simple(c), V::Array(Some(x))],
            ) if a == b"OK" && b == b"QUEUED" && c == b"QUEUED" && x.len() == 2 => Ok(vec![]),
            (_, other) => Err(format!("unexpected reply to {}: {other:?}", r.kind())),
        };
        match res {
            Ok(h) if r.is_write() && h.is_empty() => push_ok(out),
            Ok(h) => push_values(out, &h),
            Err(e) => push_error(out, &e),
        }
    }

    /// Reduces the memcached replies of request `i` to its verdict payload, appended to `out`.
    pub fn reduce_memcache(&self, i: usize, replies: &[memcache::Reply], out: &mut Vec<u8>) {
        use memcache::Reply as R;
        let r = &self.requests[i];
        let lookup = |items: &[(Vec<u8>, Vec<u8>)], name: &str| -> u64 {
            items
                .iter()
                .find(|(k, _)| k == name.as_bytes())
                .map_or(NONE_HASH, |(_, d)| hash_bytes(d))
        };
        let elem = |k: &str, j: usize| format!("{k}/{j}");
        let res: Result<Vec<u64>, String> = match (r, replies) {
            (_, [R::Error(e)]) => Err(e.clone()),
            (Request::Get { key }, [R::Values(items)]) => Ok(vec![lookup(
                items,
                &match self.layout {
                    Layout::Strings => key.clone(),
                    Layout::Lists => elem(key, 0),
                },
            )]),
            (Request::GetM { keys }, [R::Values(items)]) => Ok(keys
                .iter()
                .map(|k| {
                    lookup(
                        items,
                        &match self.layout {
                            Layout::Strings => k.clone(),
                            Layout::Lists => elem(k, 0),
                        },
                    )
                })
                .collect()),
            (Request::GetFromList { key, index }, [R::Values(items)]) => {
                Ok(vec![lookup(items, &elem(key, *index as usize))])
            }
            (Request::GetList { key }, [R::Values(items)]) => {
                let hs: Vec<u64> = (0..self.list_len(key).max(1))
                    .map(|j| lookup(items, &elem(key, j)))
                    .take_while(|&h| h != NONE_HASH)
                    .collect();
                Ok(vec![hash_list(hs)])
            }
            (
                Request::Put { .. }
                | Request::PutM { .. }
                | Request::Append { .. }
                | Request::Delete { .. },
                rs,
            ) if !rs.is_empty() && rs.iter().all(|x| matches!(x, R::Status(_))) => Ok(vec![]),
            (_, other) => Err(format!("unexpected reply to {}: {other:?}", r.kind())),
        };
        match res {
            Ok(h) if r.is_write() && h.is_empty() => push_ok(out),
            Ok(h) => push_values(out, &h),
            Err(e) => push_error(out, &e),
        }
    }

    /// Whether `payload` is a correct verdict for the unit of request id `id`.
    pub fn check(&self, id: u64, threads: usize, payload: &[u8]) -> bool {
        let unit = self.units[self.unit_of(id, threads)].clone();
        let mut p = payload;
        for i in unit {
            let r = &self.requests[i];
            let Some((&tag, rest)) = p.split_first() else {
                return false;
            };
            p = rest;
            match tag {
                b'O' if r.is_write() => {}
                b'V' if !r.is_write() => {
                    let Some((n, rest)) = take_u32(p) else {
                        return false;
                    };
                    p = rest;
                    let mut hashes = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let Some((h, rest)) = take_u64(p) else {
                            return false;
                        };
                        hashes.push(h);
                        p = rest;
                    }
                    if !self.accepts(r, &hashes) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        p.is_empty()
    }

    fn accepts(&self, r: &Request, hashes: &[u64]) -> bool {
        let a = |k: &str| self.accept.get(k);
        match (r, hashes) {
            (Request::Get { key }, [h]) => a(key).is_some_and(|a| match self.layout {
                Layout::Strings => a.concat.contains(h),
                Layout::Lists => a.elems.first().is_some_and(|e| e.contains(h)),
            }),
            (Request::GetM { keys }, hs) if hs.len() == keys.len() => {
                keys.iter().zip(hs).all(|(k, h)| {
                    a(k).is_some_and(|a| match self.layout {
                        Layout::Strings => a.concat.contains(h),
                        Layout::Lists => a.elems.first().is_some_and(|e| e.contains(h)),
                    })
                })
            }
            (Request::GetList { key }, [h]) => a(key).is_some_and(|a| a.list.contains(h)),
            (Request::GetFromList { key, index }, [h]) => {
                a(key).is_some_and(|a| match a.elems.get(*index as usize) {
                    Some(e) => e.contains(h),
                    None => *h == NONE_HASH,
                })
            }
            _ => false,
        }
    }
}

fn take_u32(p: &[u8]) -> Option<(u32, &[u8])> {
    let (h, rest) = p.split_at_checked(4)?;
    Some((u32::from_le_bytes(h.try_into().ok()?), rest))
}

fn take_u64(p: &[u8]) -> Option<(u64, &[u8])> {
    let (h, rest) = p.split_at_checked(8)?;
    Some((u64::from_le_bytes(h.try_into().ok()?), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_workloads::{Twitter, TwitterConfig, Ycsb, YcsbAccess, YcsbConfig};

    fn id(seq: u64) -> u64 {
        loadgen::request_id(0, seq)
    }

    #[test]
    fn correct_payloads_pass_and_wrong_ones_fail() {
        let w = Ycsb::new(YcsbConfig {
            keys: 50,
            ..YcsbConfig::with_shape("2x64", YcsbAccess::GetM).unwrap()
        })
        .unwrap();
        let reqs = w.requests(20, 1);
        let plan = Plan::new(Peer::Redis, &w, reqs.clone()).unwrap();
        assert_eq!(plan.layout, Layout::Strings);
        assert_eq!(plan.units.len(), 20);
        let Request::GetM { keys } = &reqs[3] else {
            panic!()
        };
        let good: Vec<u64> = keys
            .iter()
            .map(|k| hash_bytes(&w.initial_value(k).unwrap()[0]))
            .collect();
        let mut p = Vec::new();
        push_values(&mut p, &good);
        assert!(plan.check(id(3), 1, &p));
        assert!(!plan.check(id(4), 1, &p), "another request's values");
        let mut bad = Vec::new();
        push_values(&mut bad, &[good[0], good[0] ^ 1]);
        assert!(!plan.check(id(3), 1, &bad));
        let mut missing = Vec::new();
        push_values(&mut missing, &[good[0], NONE_HASH]);
        assert!(
            !plan.check(id(3), 1, &missing),
            "a loaded key must not be missing"
        );
        assert!(!plan.check(id(3), 1, &p[..p.len() - 1]), "truncated");
        let mut longer = p.clone();
        longer.push(b'O');
        assert!(!plan.check(id(3), 1, &longer), "trailing bytes");
        let mut err = Vec::new();
        push_error(&mut err, "ERR boom");
        assert!(!plan.check(id(3), 1, &err));
        assert!(!plan.check(id(3), 1, b""));
        // Replies reduce to the same payloads.
        let mut out = Vec::new();
        let items = keys
            .iter()
            .map(|k| resp::Value::Bulk(Some(w.initial_value(k).unwrap()[0].clone())))
            .collect();
        plan.reduce_resp(3, &[resp::Value::Array(Some(items))], &mut out);
        assert_eq!(out, p);
        out.clear();
        plan.reduce_resp(3, &[resp::Value::Error(b"ERR x".to_vec())], &mut out);
        assert_eq!(out[0], b'E');
        out.clear();
        plan.reduce_resp(3, &[resp::Value::Integer(1)], &mut out);
        assert!(!plan.check(id(3), 1, &out), "a reply of the wrong type");
    }

    #[test]
    fn reads_may_see_any_state_a_write_of_the_run_made() {
        let w = Twitter::new(TwitterConfig {
            keys: 20,
            write_share: 0.5,
            ..TwitterConfig::default()
        })
        .unwrap();
        let reqs = w.requests(200, 2);
        let (put_i, key, val) = reqs
            .iter()
            .enumerate()
            .find_map(|(i, r)| match r {
                Request::Put { key, val } => Some((i, key.clone(), val.clone())),
                _ => None,
            })
            .unwrap();
        let get_i = reqs
            .iter()
            .position(|r| matches!(r, Request::Get { key: k } if *k == key))
            .expect("the key is read too");
        let plan = Plan::new(Peer::Memcached, &w, reqs.clone()).unwrap();
        for v in [w.initial_value(&key).unwrap()[0].clone(), val] {
            let mut out = Vec::new();
            plan.reduce_memcache(
                get_i,
                &[memcache::Reply::Values(vec![(key.clone().into_bytes(), v)])],
                &mut out,
            );
            assert!(plan.check(id(get_i as u64), 1, &out));
        }
        let mut out = Vec::new();
        plan.reduce_memcache(
            get_i,
            &[memcache::Reply::Values(vec![(
                key.into_bytes(),
                b"forged".to_vec(),
            )])],
            &mut out,
        );
        assert!(!plan.check(id(get_i as u64), 1, &out));
        let mut ok = Vec::new();
        plan.reduce_memcache(put_i, &[memcache::Reply::Status("STORED".into())], &mut ok);
        assert_eq!(ok, b"O");
        assert!(plan.check(id(put_i as u64), 1, &ok));
        let mut e = Vec::new();
        plan.reduce_memcache(
            put_i,
            &[memcache::Reply::Error("SERVER_ERROR out of memory".into())],
            &mut e,
        );
        assert!(!plan.check(id(put_i as u64), 1, &e));
    }

    #[test]
    fn ids_spread_over_units_and_wrap() {
        let w = Ycsb::new(YcsbConfig {
            keys: 10,
            ..YcsbConfig::default()
        })
        .unwrap();
        let plan = Plan::new(Peer::Redis, &w, w.requests(10, 1)).unwrap();
        let units: Vec<usize> = (0..5)
            .flat_map(|s| (0..2).map(move |t| (t, s)))
            .map(|(t, s)| plan.unit_of(loadgen::request_id(t, s), 2))
            .collect();
        assert_eq!(units, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(plan.unit_of(loadgen::request_id(0, 5), 2), 0);
    }

    #[test]
    fn memcached_lists_with_writes_are_refused_and_bad_keys_too() {
        let w = kv_workloads::Google::new(kv_workloads::GoogleConfig {
            keys: 10,
            ..Default::default()
        })
        .unwrap();
        let mut reqs = w.requests(5, 1);
        assert!(Plan::new(Peer::Memcached, &w, reqs.clone()).is_ok());
        reqs.push(Request::Delete {
            key: "google-1".into(),
        });
        let e = Plan::new(Peer::Memcached, &w, reqs.clone()).unwrap_err();
        assert!(e.0.contains("no lists"), "{e}");
        assert!(Plan::new(Peer::Redis, &w, reqs).is_ok());
        // A put into a list key replaces the list atomically: four replies, one verdict.
        let mut with_put = w.requests(3, 1);
        with_put.push(Request::Put {
            key: "google-2".into(),
            val: b"new".to_vec(),
        });
        let plan = Plan::new(Peer::Redis, &w, with_put).unwrap();
        let mut cmds = Vec::new();
        assert_eq!(plan.encode(3, &mut cmds), 4);
        assert!(cmds.starts_with(b"*1\r\n$5\r\nMULTI\r\n"));
        use resp::Value as V;
        let replies = [
            V::Simple(b"OK".to_vec()),
            V::Simple(b"QUEUED".to_vec()),
            V::Simple(b"QUEUED".to_vec()),
            V::Array(Some(vec![V::Integer(1), V::Integer(1)])),
        ];
        let mut out = Vec::new();
        plan.reduce_resp(3, &replies, &mut out);
        assert_eq!(out, b"O");
        out.clear();
        let aborted = [
            replies[0].clone(),
            replies[1].clone(),
            replies[2].clone(),
            V::Array(None),
        ];
        plan.reduce_resp(3, &aborted, &mut out);
        assert_eq!(out[0], b'E', "an aborted transaction is an error");
        let bad = vec![Request::Get {
            key: "has space".into(),
        }];
        let e = Plan::new(Peer::Memcached, &w, bad).unwrap_err();
        assert!(e.0.contains("0x20"), "{e}");
    }
}
