//! The plan's key-value checks (`"expect": {"kv": ...}`, docs/c-api.md): for a workload with
//! writes, whose right reply depends on what each key holds when the server handles it.
//!
//! The plan names each request's operation (a [`kv_workloads::Request`]: its keys and the
//! values it writes) and the keys' loaded values (`"kv": {"initial": ...}`). The checker is
//! the KV benches' in-order one ([`kv_workloads::expect`]): the one server core answers in
//! the order it handled the requests, so every write's reply is applied when it arrives (late
//! ones too, and one that never came leaves its keys either way until a read settles them)
//! and a read is right only against the value its keys hold then — a stale value is wrong. The
//! tracked contents outlive the trial: the program's store is not reloaded between trials.
//!
//! A reply is RESP (Redis's `GET`/`SET`/`MGET`/`LRANGE`... replies) or, when the request names
//! an `object`, a message of the plan's schema whose `field` holds the values and whose
//! `status` (and, for a multi-key read, `statuses`) use kv.proto's numbering (0 OK,
//! 1 not found, 2 bad index).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cornflakes::Arena;
use cornflakes_codegen::dynamic::{DynMessage, Packed, Value};
use cornflakes_codegen::schema::MsgId;
use cornflakes_codegen::Schema;
use kv_workloads::expect::{Current, Expected, Outcome, Reply};
use kv_workloads::Request;
use serde_json::Value as Json;

/// Where an object reply keeps what the checker reads.
#[derive(Debug)]
struct ObjectReply {
    msg: MsgId,
    vals: usize,
    status: Option<usize>,
    statuses: Option<usize>,
}

/// One request's key-value check.
#[derive(Debug)]
pub(crate) struct KvOp {
    op: Request,
    /// Ids of the keys it names (index [`Tracked::changes`]).
    key_ids: Vec<u32>,
    /// `None`: a RESP reply.
    object: Option<ObjectReply>,
}

/// What the checker knows of the program's store, kept from trial to trial.
struct Tracked {
    now: Current,
    /// Per key id: how often what is known of it changed (writes applied or unanswered, reads
    /// that may have settled one). A reply accepted by hash is accepted again only while the
    /// counts of its keys stay the same.
    changes: Vec<u64>,
}

/// The key-value checks of a plan.
pub(crate) struct KvPlan {
    expected: Expected,
    /// Per request of the plan (`None`: checked otherwise).
    ops: Vec<Option<KvOp>>,
    /// Between trials; a trial's checker holds it.
    state: Mutex<Option<Tracked>>,
    /// Distinct keys.
    keys: usize,
}

/// Reads an `[offset, length]` of plan.bin (the second argument says what, for the error).
pub(crate) type BlobBytes<'a> = &'a dyn Fn(&Json, &str) -> Result<Vec<u8>, String>;

fn bad(why: impl Into<String>) -> String {
    format!("plan.json: {}", why.into())
}

/// Parses the `kv` check of request `i`; `bytes` reads an `[offset, length]` of plan.bin and
/// `ids` numbers the keys.
pub(crate) fn parse_op(
    e: &Json,
    i: usize,
    schema: Option<&Schema>,
    bytes: BlobBytes<'_>,
    ids: &mut HashMap<String, u32>,
) -> Result<KvOp, String> {
    let keys: Vec<String> = e
        .get("keys")
        .and_then(Json::as_array)
        .ok_or_else(|| bad(format!("request {i}: kv needs keys")))?
        .iter()
        .map(|k| k.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or_else(|| bad(format!("request {i}: keys must be strings")))?;
    let vals: Vec<Vec<u8>> =
        e.get("vals")
            .and_then(Json::as_array)
            .map_or(Ok(Vec::new()), |v| {
                v.iter()
                    .map(|x| bytes(x, &format!("request {i}'s value")))
                    .collect()
            })?;
    let one = |what: &str| -> Result<String, String> {
        match keys.as_slice() {
            [k] => Ok(k.clone()),
            _ => Err(bad(format!("request {i}: {what} takes one key"))),
        }
    };
    let op = match e.get("op").and_then(Json::as_str).unwrap_or("") {
        "get" => Request::Get { key: one("get")? },
        "getlist" => Request::GetList {
            key: one("getlist")?,
        },
        "getm" if !keys.is_empty() => Request::GetM { keys: keys.clone() },
        "put" if vals.len() == 1 => Request::Put {
            key: one("put")?,
            val: vals[0].clone(),
        },
        "putm" if !keys.is_empty() && vals.len() == keys.len() => Request::PutM {
            keys: keys.clone(),
            vals,
        },
        "append" if vals.len() == 1 => Request::Append {
            key: one("append")?,
            val: vals[0].clone(),
        },
        "delete" => Request::Delete {
            key: one("delete")?,
        },
        o => {
            return Err(bad(format!(
                "request {i}: kv op {o:?} with {} keys and {} values is not one of get, \
                 getlist, getm, put (one value), putm (a value per key), append, delete",
                keys.len(),
                vals.len()
            )))
        }
    };
    let object = match e.get("object").and_then(Json::as_str) {
        None => None,
        Some(name) => {
            let s = schema.ok_or_else(|| bad("an object check needs \"schema\""))?;
            let msg = s
                .message(name)
                .ok_or_else(|| bad(format!("no message {name} in the schema")))?;
            let def = &s.messages[msg];
            let field = |n: &str| def.field_by_name(n).map(|(i, _)| i);
            let vals = match e.get("field").and_then(Json::as_str) {
                Some(f) => field(f).ok_or_else(|| bad(format!("{name} has no field {f:?}")))?,
                // A write's reply carries no values: any field index that is never present.
                None => usize::MAX,
            };
            Some(ObjectReply {
                msg,
                vals,
                status: field("status"),
                statuses: field("statuses"),
            })
        }
    };
    let key_ids = op
        .keys()
        .into_iter()
        .map(|k| {
            let n = ids.len() as u32;
            *ids.entry(k.to_owned()).or_insert(n)
        })
        .collect();
    Ok(KvOp {
        op,
        key_ids,
        object,
    })
}

/// The loaded lists of `kv.initial` (`{"key": [[offset, length], ...]}`).
pub(crate) fn parse_initial(
    kv: &Json,
    bytes: BlobBytes<'_>,
) -> Result<HashMap<String, Vec<Vec<u8>>>, String> {
    let Some(map) = kv.get("initial").and_then(Json::as_object) else {
        return Err(bad("kv.initial must map each loaded key to its values"));
    };
    map.iter()
        .map(|(k, v)| {
            let vals = v
                .as_array()
                .ok_or_else(|| bad(format!("kv.initial.{k} must be a list")))?
                .iter()
                .map(|x| bytes(x, &format!("kv.initial.{k}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((k.clone(), vals))
        })
        .collect()
}

impl KvPlan {
    /// The checks `ops` (per request) of a store loaded with `initial`; `keys` distinct keys.
    pub(crate) fn new(
        initial: HashMap<String, Vec<Vec<u8>>>,
        ops: Vec<Option<KvOp>>,
        keys: usize,
    ) -> KvPlan {
        let requests: Vec<Request> = ops.iter().flatten().map(|o| o.op.clone()).collect();
        let expected = Expected::new(Box::new(move |k| initial.get(k).cloned()), &requests);
        KvPlan {
            expected,
            ops,
            state: Mutex::new(Some(Tracked {
                now: Current::default(),
                changes: vec![0; keys],
            })),
            keys,
        }
    }

    /// Request `i`'s check (it must be [covered](Self::covers)).
    fn op(&self, i: usize) -> &KvOp {
        self.ops[i].as_ref().expect("a key-value request")
    }

    /// Whether request `i` is checked here.
    pub(crate) fn covers(&self, i: usize) -> bool {
        self.ops.get(i).is_some_and(Option::is_some)
    }

    /// A trial's checker: it holds the tracked contents until it is dropped.
    pub(crate) fn trial(self: &Arc<Self>) -> KvTrial {
        let t = self.state.lock().map(|mut s| s.take()).unwrap_or(None);
        KvTrial {
            plan: self.clone(),
            t: t.unwrap_or_else(|| Tracked {
                now: Current::default(),
                changes: vec![0; self.keys],
            }),
        }
    }
}

/// The key-value checker of one trial (on the device thread).
pub(crate) struct KvTrial {
    plan: Arc<KvPlan>,
    t: Tracked,
}

impl Drop for KvTrial {
    fn drop(&mut self) {
        let t = std::mem::replace(
            &mut self.t,
            Tracked {
                now: Current::default(),
                changes: Vec::new(),
            },
        );
        if let Ok(mut s) = self.plan.state.lock() {
            *s = Some(t);
        }
    }
}

impl KvTrial {
    fn op(&self, i: usize) -> &KvOp {
        self.plan.op(i)
    }

    fn bump(&mut self, i: usize) {
        for &id in &self.plan.op(i).key_ids {
            if let Some(c) = self.t.changes.get_mut(id as usize) {
                *c += 1;
            }
        }
    }

    /// See [`emu_bench::ReplyCheck::version`].
    pub(crate) fn version(&self, i: usize) -> u64 {
        self.op(i).key_ids.iter().fold(0u64, |h, &id| {
            h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(self.t.changes.get(id as usize).copied().unwrap_or(0))
        })
    }

    /// Every write's reply is applied.
    pub(crate) fn sees_every(&self, i: usize) -> bool {
        self.op(i).op.is_write()
    }

    /// A write answered too late to count still changed the store.
    pub(crate) fn late(&mut self, i: usize) {
        let plan = self.plan.clone();
        let op = &plan.op(i).op;
        if op.is_write() {
            plan.expected.apply_to(&mut self.t.now, op);
            self.bump(i);
        }
    }

    /// A write with no reply may or may not have changed the store.
    pub(crate) fn unanswered(&mut self, i: usize) {
        let plan = self.plan.clone();
        plan.expected.unanswered(&mut self.t.now, &plan.op(i).op);
        self.bump(i);
    }

    /// Checks `reply` to request `i` against what its keys hold now, then applies its write.
    pub(crate) fn check(
        &mut self,
        i: usize,
        reply: &[u8],
        schema: Option<&Schema>,
    ) -> Result<(), String> {
        let plan = self.plan.clone();
        let k = plan.op(i);
        let decoded = match &k.object {
            None => decode_resp(&k.op, reply),
            Some(o) => decode_object(o, reply, schema.ok_or("no schema")?),
        };
        if self.t.now.uncertain() > 0 {
            self.bump(i);
        }
        let right = decoded
            .as_ref()
            .is_ok_and(|r| plan.expected.check_now(&mut self.t.now, &k.op, r));
        if k.op.is_write() {
            plan.expected.apply_to(&mut self.t.now, &k.op);
            self.bump(i);
        }
        let r = decoded.map_err(|e| format!("request {i} ({}): {e}", k.op.kind()))?;
        if right {
            Ok(())
        } else {
            Err(format!(
                "request {i} ({}): wrong reply {:?} with values of {:?} bytes (not what its \
                 keys hold now)",
                k.op.kind(),
                r.outcome,
                r.vals.iter().map(Vec::len).collect::<Vec<_>>()
            ))
        }
    }
}

/// A Redis reply to `op`, as the checker reads it: a bulk string (or nil: not found) for a
/// read of one key, an array for `MGET` (nil elements not found) and `LRANGE` (empty: not
/// found, as Redis answers for a missing key), `+OK` for `SET`/`MSET`, an integer for
/// `APPEND`/`RPUSH` and `DEL` (0: not found), an error reply a failure.
fn decode_resp(op: &Request, reply: &[u8]) -> Result<Reply, String> {
    use resp::Value as V;
    let v = match resp::parse(reply) {
        Ok(Some((v, used))) if used == reply.len() => v,
        Ok(Some((_, used))) => {
            return Err(format!("{} bytes after the RESP reply", reply.len() - used))
        }
        Ok(None) => return Err("a truncated RESP reply".to_owned()),
        Err(e) => return Err(format!("not RESP: {e}")),
    };
    let one = |v: &V| match v {
        V::Bulk(Some(b)) => Some((Outcome::Ok, b.clone())),
        V::Bulk(None) => Some((Outcome::NotFound, Vec::new())),
        _ => None,
    };
    let shape = || format!("a reply of the wrong shape to {}: {v:?}", op.kind());
    Ok(match (op, &v) {
        (_, V::Error(_)) => Reply::new(Outcome::Failed, Vec::new()),
        (Request::Get { .. } | Request::GetFromList { .. }, b) => {
            let (o, val) = one(b).ok_or_else(shape)?;
            Reply::new(o, if o == Outcome::Ok { vec![val] } else { vec![] })
        }
        (Request::GetM { .. }, V::Array(Some(items))) => {
            let each: Vec<(Outcome, Vec<u8>)> = items
                .iter()
                .map(one)
                .collect::<Option<_>>()
                .ok_or_else(shape)?;
            let outcome = each
                .iter()
                .map(|e| e.0)
                .find(|o| *o != Outcome::Ok)
                .unwrap_or(Outcome::Ok);
            let (outcomes, vals) = each.into_iter().unzip();
            Reply {
                outcome,
                vals,
                outcomes,
            }
        }
        (Request::GetList { .. }, V::Array(Some(items))) if items.is_empty() => {
            Reply::new(Outcome::NotFound, Vec::new())
        }
        (Request::GetList { .. }, V::Array(Some(items))) => Reply::new(
            Outcome::Ok,
            items
                .iter()
                .map(|i| match i {
                    V::Bulk(Some(b)) => Some(b.clone()),
                    _ => None,
                })
                .collect::<Option<_>>()
                .ok_or_else(shape)?,
        ),
        (Request::Put { .. } | Request::PutM { .. }, V::Simple(s)) if s == b"OK" => {
            Reply::new(Outcome::Ok, Vec::new())
        }
        (Request::Append { .. }, V::Integer(_)) | (Request::Delete { .. }, V::Integer(1..)) => {
            Reply::new(Outcome::Ok, Vec::new())
        }
        (Request::Delete { .. }, V::Integer(0)) => Reply::new(Outcome::NotFound, Vec::new()),
        _ => return Err(shape()),
    })
}

/// kv.proto's status numbering.
fn outcome(status: i32) -> Outcome {
    match status {
        0 => Outcome::Ok,
        1 => Outcome::NotFound,
        2 => Outcome::BadIndex,
        _ => Outcome::Failed,
    }
}

/// An object reply, as the checker reads it.
fn decode_object(o: &ObjectReply, reply: &[u8], schema: &Schema) -> Result<Reply, String> {
    let arena = Arena::new();
    let m = DynMessage::decode(schema, o.msg, reply, &arena)
        .map_err(|f| format!("undecodable reply: {f}"))?;
    let status = match o.status.and_then(|i| m.get(i)) {
        None => 0,
        Some(Value::I32(s)) => *s,
        Some(_) => return Err("the status field is not an enum".to_owned()),
    };
    let vals: Vec<Vec<u8>> = match m.get(o.vals) {
        None => Vec::new(),
        Some(Value::Bytes(p) | Value::String(p)) => vec![p.as_bytes().to_vec()],
        Some(Value::Leaves(l)) => l.iter().map(|p| p.as_bytes().to_vec()).collect(),
        Some(_) => return Err("the values field is not bytes".to_owned()),
    };
    let outcomes = match o.statuses.and_then(|i| m.get(i)) {
        None => Vec::new(),
        Some(Value::Packed(Packed::I32(l))) => l.iter().map(outcome).collect(),
        Some(Value::I32(s)) => vec![outcome(*s)],
        Some(_) => return Err("the statuses field is not a list of enums".to_owned()),
    };
    Ok(Reply {
        outcome: outcome(status),
        vals,
        outcomes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_replies_read_as_the_checker_needs_them() {
        let get = Request::Get { key: "a".into() };
        assert_eq!(
            decode_resp(&get, b"$2\r\nv1\r\n").unwrap(),
            Reply::new(Outcome::Ok, vec![b"v1".to_vec()])
        );
        assert_eq!(
            decode_resp(&get, b"$-1\r\n").unwrap().outcome,
            Outcome::NotFound
        );
        assert_eq!(
            decode_resp(&get, b"-ERR no\r\n").unwrap().outcome,
            Outcome::Failed
        );
        assert!(
            decode_resp(&get, b"$2\r\nv1\r\n+OK\r\n").is_err(),
            "trailing bytes"
        );
        assert!(decode_resp(&get, b"$2\r\nv").is_err(), "truncated");
        assert!(decode_resp(&get, b":1\r\n").is_err(), "wrong shape");
        let put = Request::Put {
            key: "a".into(),
            val: b"x".to_vec(),
        };
        assert_eq!(decode_resp(&put, b"+OK\r\n").unwrap().outcome, Outcome::Ok);
        let getm = Request::GetM {
            keys: vec!["a".into(), "b".into()],
        };
        let r = decode_resp(&getm, b"*2\r\n$1\r\nx\r\n$-1\r\n").unwrap();
        assert_eq!(r.outcome, Outcome::NotFound);
        assert_eq!(r.outcomes, vec![Outcome::Ok, Outcome::NotFound]);
        let list = Request::GetList { key: "l".into() };
        assert_eq!(
            decode_resp(&list, b"*0\r\n").unwrap().outcome,
            Outcome::NotFound
        );
    }
}
