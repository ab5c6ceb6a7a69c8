//! Key steering (`docs/cores.md`): with N server cores, key `k` lives on core
//! [`core_of`]`(k, N)` only, and a client sends each request to the core that owns its key —
//! to that core's port, so the NIC (or the kernel) delivers it to that core's queue. The
//! shards are disjoint; no core ever reads another's memory.
//!
//! A `getm` / `putm` whose keys belong to several cores is [`split`] by the client into one
//! request per core (each with that core's keys, in their original order), and the replies are
//! [`merge`]d back into the one reply the whole request would have had: values and statuses
//! in key order, overall status the first non-`OK` one. The server never forwards requests.
//! The socket client ([`crate::client::KvClient::steered`]) and the emulated-NIC bench
//! ([`crate::emu::CorePlan`]) both split and merge with these functions.

use crate::ops::{Op, Reply, Status};

/// The core (0..`cores`) that owns `key`: [`percore::core_of_key`] (64-bit FNV-1a of its
/// bytes, mod `cores`; stable across processes and builds, clients and servers must agree).
pub fn core_of(key: &str, cores: usize) -> usize {
    percore::core_of_key(key.as_bytes(), cores)
}

/// The one core that owns every key of `op`, or `None` when its keys belong to several cores
/// (then [`split`] it). Allocates nothing.
pub fn owner(op: &Op, cores: usize) -> Option<usize> {
    match op {
        Op::GetM { keys } | Op::PutM { keys, .. } => {
            let first = keys.first().map_or(0, |k| core_of(k, cores));
            keys.iter()
                .all(|k| core_of(k, cores) == first)
                .then_some(first)
        }
        Op::Get { key }
        | Op::Put { key, .. }
        | Op::GetList { key }
        | Op::GetFromList { key, .. }
        | Op::Append { key, .. }
        | Op::Delete { key } => Some(core_of(key, cores)),
    }
}

/// The replies to a split request's parts, in part order, as one payload for the load
/// generator's checker: `u16` part count, then per part a `u32` length and the reply bytes
/// (little-endian).
pub fn encode_parts(parts: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(parts.len() as u16).to_le_bytes());
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
}

/// The part replies [`encode_parts`] wrote, or why `buf` is not such a payload.
pub fn decode_parts(buf: &[u8]) -> Result<Vec<&[u8]>, String> {
    let (n, mut rest) = match buf {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => return Err("split reply shorter than its count".to_owned()),
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(format!("split reply part {i}: no length"));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(format!(
                "split reply part {i}: {len} bytes announced, {} left",
                tail.len()
            ));
        }
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes after the split reply's parts",
            rest.len()
        ));
    }
    Ok(out)
}

/// One core's part of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The core it goes to.
    pub core: usize,
    /// The request for that core: the whole request, or the keys (and values) of that core.
    pub op: Op,
    /// For a split `getm` / `putm`: the positions in the original request of this part's
    /// keys, in order. Empty for a request that is not split.
    pub positions: Vec<usize>,
}

/// The request(s) `op` becomes with `cores` server cores: one part for a single-key request
/// (to its key's core) or a multi-key request whose keys share a core; otherwise one part per
/// core that owns some of its keys, in core order.
pub fn split(op: &Op, cores: usize) -> Vec<Part> {
    let whole = |core| {
        vec![Part {
            core,
            op: op.clone(),
            positions: Vec::new(),
        }]
    };
    let keys = match op {
        Op::GetM { keys } | Op::PutM { keys, .. } => keys,
        single => return whole(core_of(single.keys()[0], cores)),
    };
    let owner: Vec<usize> = keys.iter().map(|k| core_of(k, cores)).collect();
    match owner.first() {
        None => return whole(0),
        Some(&c) if owner.iter().all(|&o| o == c) => return whole(c),
        Some(_) => {}
    }
    let mut parts = Vec::new();
    for core in 0..cores {
        let positions: Vec<usize> = (0..keys.len()).filter(|&i| owner[i] == core).collect();
        if positions.is_empty() {
            continue;
        }
        let ks = positions.iter().map(|&i| keys[i].clone()).collect();
        let op = match op {
            Op::PutM { vals, .. } => Op::PutM {
                keys: ks,
                vals: positions
                    .iter()
                    .map(|&i| vals.get(i).cloned().unwrap_or_default())
                    .collect(),
            },
            _ => Op::GetM { keys: ks },
        };
        parts.push(Part {
            core,
            op,
            positions,
        });
    }
    parts
}

/// The reply to the whole of `op` from the replies to its `parts` (as [`split`] made them,
/// in the same order). A single part's reply is returned as it is. For a split `getm`, each
/// key's value and status go back to the key's position and the overall status is the first
/// non-`OK` key status; for a split `putm`, the first non-`OK` part status. An error when the
/// parts do not fit the request.
pub fn merge(op: &Op, parts: &[Part], replies: Vec<Reply>) -> Result<Reply, String> {
    if parts.len() != replies.len() {
        return Err(format!(
            "{} replies for {} parts",
            replies.len(),
            parts.len()
        ));
    }
    if parts.len() == 1 && parts[0].positions.is_empty() {
        return Ok(replies.into_iter().next().expect("one reply"));
    }
    match op {
        Op::GetM { keys } => {
            let mut vals = vec![Vec::new(); keys.len()];
            let mut statuses = vec![Status::Ok; keys.len()];
            for (p, r) in parts.iter().zip(replies) {
                if r.vals.len() != p.positions.len() || r.statuses.len() != p.positions.len() {
                    return Err(format!(
                        "core {}'s getm reply has {} values and {} statuses for {} keys",
                        p.core,
                        r.vals.len(),
                        r.statuses.len(),
                        p.positions.len()
                    ));
                }
                for ((&at, v), s) in p.positions.iter().zip(r.vals).zip(r.statuses) {
                    vals[at] = v;
                    statuses[at] = s;
                }
            }
            let status = statuses
                .iter()
                .copied()
                .find(|s| *s != Status::Ok)
                .unwrap_or(Status::Ok);
            Ok(Reply {
                status,
                vals,
                statuses,
            })
        }
        Op::PutM { .. } => Ok(Reply::status(
            replies
                .iter()
                .map(|r| r.status)
                .find(|s| *s != Status::Ok)
                .unwrap_or(Status::Ok),
        )),
        other => Err(format!(
            "a {:?} request is never split",
            crate::ops::OpKind::of(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("key-{i}")).collect()
    }

    #[test]
    fn keys_spread_over_the_cores_and_one_core_owns_all() {
        let mut per = [0usize; 4];
        for k in keys(4000) {
            per[core_of(&k, 4)] += 1;
            assert_eq!(core_of(&k, 1), 0);
        }
        assert!(per.iter().all(|&n| n > 800), "{per:?}");
        // Stable: the same answer in every process (clients and servers must agree).
        assert_eq!(core_of("key-0", 2), core_of("key-0", 2));
        assert_eq!(core_of("", 7), (0xcbf2_9ce4_8422_2325u64 % 7) as usize);
    }

    #[test]
    fn a_getm_over_two_cores_is_split_and_merged_in_key_order() {
        let ks = keys(10);
        let op = Op::GetM { keys: ks.clone() };
        let parts = split(&op, 2);
        assert_eq!(parts.len(), 2, "10 keys land on both cores");
        let mut seen = Vec::new();
        for p in &parts {
            let Op::GetM { keys: pk } = &p.op else {
                panic!("a getm part")
            };
            for (k, &at) in pk.iter().zip(&p.positions) {
                assert_eq!(core_of(k, 2), p.core);
                assert_eq!(k, &ks[at]);
                seen.push(at);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>(), "every key exactly once");
        // Each core answers its keys: the value is the key's bytes; key-3 is missing.
        let replies: Vec<Reply> = parts
            .iter()
            .map(|p| {
                let Op::GetM { keys: pk } = &p.op else {
                    unreachable!()
                };
                let statuses: Vec<Status> = pk
                    .iter()
                    .map(|k| {
                        if k == "key-3" {
                            Status::NotFound
                        } else {
                            Status::Ok
                        }
                    })
                    .collect();
                Reply {
                    status: statuses
                        .iter()
                        .copied()
                        .find(|s| *s != Status::Ok)
                        .unwrap_or(Status::Ok),
                    vals: pk
                        .iter()
                        .map(|k| {
                            if k == "key-3" {
                                vec![]
                            } else {
                                k.clone().into_bytes()
                            }
                        })
                        .collect(),
                    statuses,
                }
            })
            .collect();
        let merged = merge(&op, &parts, replies).unwrap();
        assert_eq!(merged.status, Status::NotFound);
        for (i, k) in ks.iter().enumerate() {
            if i == 3 {
                assert_eq!(merged.statuses[i], Status::NotFound);
            } else {
                assert_eq!(merged.vals[i], k.as_bytes());
                assert_eq!(merged.statuses[i], Status::Ok);
            }
        }
        let short = vec![Reply::status(Status::Ok), Reply::status(Status::Ok)];
        assert!(merge(&op, &parts, short).is_err(), "values missing");
    }

    #[test]
    fn part_payloads_round_trip_and_bad_ones_are_rejected() {
        let parts = vec![b"one".to_vec(), Vec::new(), b"three".to_vec()];
        let mut buf = Vec::new();
        encode_parts(&parts, &mut buf);
        let got = decode_parts(&buf).unwrap();
        assert_eq!(got, vec![&b"one"[..], &b""[..], &b"three"[..]]);
        assert!(decode_parts(&buf[..buf.len() - 1]).is_err(), "short");
        assert!(decode_parts(&[1]).is_err(), "no count");
        let mut long = buf.clone();
        long.push(0);
        assert!(decode_parts(&long).is_err(), "trailing bytes");
    }

    #[test]
    fn single_core_requests_are_not_split() {
        let get = Op::Get {
            key: "key-1".into(),
        };
        let p = split(&get, 2);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].core, core_of("key-1", 2));
        assert_eq!(owner(&get, 2), Some(p[0].core));
        assert!(p[0].positions.is_empty());
        assert_eq!(owner(&Op::GetM { keys: keys(10) }, 2), None);
        let same: Vec<String> = keys(40)
            .into_iter()
            .filter(|k| core_of(k, 2) == 1)
            .take(3)
            .collect();
        let p = split(&Op::GetM { keys: same }, 2);
        assert_eq!((p.len(), p[0].core), (1, 1));
        let putm = Op::PutM {
            keys: keys(6),
            vals: (0..6).map(|i| vec![i as u8]).collect(),
        };
        let parts = split(&putm, 2);
        assert_eq!(parts.len(), 2);
        for p in &parts {
            let Op::PutM { keys: k, vals: v } = &p.op else {
                panic!("a putm part")
            };
            for ((k, v), &at) in k.iter().zip(v).zip(&p.positions) {
                assert_eq!((k.clone(), v[0] as usize), (format!("key-{at}"), at));
            }
        }
        let r = merge(
            &putm,
            &parts,
            vec![Reply::status(Status::Ok), Reply::status(Status::StoreFull)],
        )
        .unwrap();
        assert_eq!(r.status, Status::StoreFull);
    }
}
