//! The Cornflakes serializations (`schemas/kv.proto`): the server's handling of each request
//! against the [`Store`], and the client's encoding of requests and decoding of replies.
//!
//! The server builds each reply from the store's pinned buffers with
//! [`CFPtr::from_rcbuf_ref`](cornflakes::CFPtr::from_rcbuf_ref): a value at least the arena's
//! threshold long goes out by reference (scatter-gather, no copy), a shorter one is borrowed
//! from the store and copied once, into the packet at send time. The threshold is the
//! serialization's (hybrid, 0 or infinite).

pub use app_server::serialization::SendPath;
use cornflakes::{
    Arena, CFBytes, CFPtr, CFString, ConnId, CornflakesObj, Datapath, DecodeError, Msg, RcBuf,
    SendError,
};

use crate::ops::{status_from_raw, Op, OpKind, Reply, Status};
use crate::rifl::WriteTag;
use crate::schema::*;
use crate::store::{Store, Value};
use crate::validate;

/// Why the server answered nothing.
#[derive(Debug)]
pub enum ServeError {
    /// The request did not decode (unknown type, bad encoding): counted, dropped. (A request
    /// that decodes but is invalid, e.g. a key not UTF-8, is answered `BAD_REQUEST`.)
    Malformed(String),
    /// The reply could not be sent.
    Send(SendError),
}

impl From<DecodeError> for ServeError {
    fn from(e: DecodeError) -> Self {
        ServeError::Malformed(e.to_string())
    }
}

impl From<SendError> for ServeError {
    fn from(e: SendError) -> Self {
        ServeError::Send(e)
    }
}

/// Sends `obj`, or, when it is longer than the datapath sends, `too_large()` (the same reply
/// with status `TOO_LARGE` and no values).
fn reply<D: Datapath, O: CornflakesObj, P: CornflakesObj>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    obj: &O,
    path: SendPath,
    too_large: impl FnOnce() -> P,
) -> Result<(), SendError> {
    if obj.sizes().total() > dp.max_message_len() {
        return path.send(dp, conn, msg, &too_large());
    }
    match path.send(dp, conn, msg, obj) {
        Err(SendError::TooLarge { .. }) => path.send(dp, conn, msg, &too_large()),
        r => r,
    }
}

fn key<'a>(s: &'a CFString<'_>) -> Result<&'a str, Status> {
    validate::key(s.as_bytes())
}

/// The status of a write's outcome.
fn status(o: Result<usize, Status>) -> Status {
    o.err().unwrap_or(Status::Ok)
}

/// A stored value as a reply field: referenced when at least the threshold long, else borrowed
/// from the store (which outlives the reply) and copied once, into the packet at send time.
fn bytes<'a>(b: &'a RcBuf, arena: &Arena) -> CFBytes<'a> {
    CFBytes(CFPtr::from_rcbuf_ref(b, arena))
}

/// One buffer of a stored value, or `TOO_LARGE` for a value in pieces.
fn single(v: &Value) -> Result<&RcBuf, Status> {
    v.single().ok_or(Status::TooLarge)
}

macro_rules! status_only {
    ($ty:ident, $arena:expr, $id:expr, $status:expr) => {{
        let mut r = $ty::new_in($arena);
        r.set_id($id);
        r.set_status($status);
        r
    }};
}

/// The key of a request, or — when it is not UTF-8 — a `BAD_REQUEST` reply of type `$ty`
/// sent (and counted) in place of serving it.
macro_rules! key_or_bad_request {
    ($k:expr, $ty:ident, $dp:expr, $store:expr, $conn:expr, $msg:expr, $arena:expr, $id:expr, $path:expr) => {
        match key($k) {
            Ok(k) => k,
            Err(e) => {
                let resp = status_only!($ty, $arena, $id, $store.tally(e));
                return Ok($path.send($dp, $conn, $msg, &resp)?);
            }
        }
    };
}

/// Handles one request: decodes `data` as the request `kind` names, applies it to `store`,
/// and queues the reply (same message id and type) on `conn`. `arena` holds this request's
/// objects (the caller resets it).
#[allow(clippy::too_many_arguments)]
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    conn: ConnId,
    msg: Msg,
    data: &RcBuf,
    arena: &Arena,
    path: SendPath,
) -> Result<(), ServeError> {
    let kind = OpKind::from_msg_type(msg.ty)
        .ok_or_else(|| ServeError::Malformed(format!("unknown message type {}", msg.ty)))?;
    match kind {
        OpKind::Get => {
            let req = GetReq::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let mut resp = GetResp::new_in(arena);
            resp.set_id(id);
            let k = key_or_bad_request!(
                req.get_key(),
                GetResp,
                dp,
                store,
                conn,
                msg,
                arena,
                id,
                path
            );
            let status = match store.get(k) {
                Ok(Value::One(b)) => {
                    resp.set_val(bytes(b, arena));
                    Status::Ok
                }
                Ok(Value::Pieces(ps)) => {
                    resp.init_pieces(ps.len());
                    for p in ps {
                        resp.get_mut_pieces().append(bytes(p, arena));
                    }
                    Status::Ok
                }
                Err(s) => s,
            };
            resp.set_status(status);
            Ok(reply(dp, conn, msg, &resp, path, || {
                status_only!(GetResp, arena, id, Status::TooLarge)
            })?)
        }
        OpKind::Put => {
            let req = PutReq::deserialize_rcbuf(data, arena)?;
            let tag = WriteTag::of(dp, conn, msg, data);
            let status = match key(req.get_key()) {
                Ok(k) => status(store.once(tag, |s| s.put(k, req.get_val().as_bytes()).map(|_| 0))),
                Err(e) => store.tally(e),
            };
            let resp = status_only!(PutResp, arena, req.get_id(), status);
            Ok(path.send(dp, conn, msg, &resp)?)
        }
        OpKind::GetM => {
            let req = GetMReq::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let n = req.get_keys().len();
            // Every key checked first (no allocation): a bad one fails the whole request.
            if let Err(e) = validate::all_keys(req.get_keys().iter().map(|k| k.as_bytes())) {
                let resp = status_only!(GetMResp, arena, id, store.tally(e));
                return Ok(path.send(dp, conn, msg, &resp)?);
            }
            let mut resp = GetMResp::new_in(arena);
            resp.set_id(id);
            resp.init_vals(n);
            resp.init_statuses(n);
            let mut first = Status::Ok;
            for k in req.get_keys().iter() {
                let (v, s) = match key(k).and_then(|k| store.get(k)).and_then(single) {
                    Ok(b) => (bytes(b, arena), Status::Ok),
                    Err(s) => (CFBytes::default(), s),
                };
                if first == Status::Ok {
                    first = s;
                }
                resp.get_mut_vals().append(v);
                resp.get_mut_statuses().append(s as i32);
            }
            resp.set_status(first);
            Ok(reply(dp, conn, msg, &resp, path, || {
                status_only!(GetMResp, arena, id, Status::TooLarge)
            })?)
        }
        OpKind::PutM => {
            let req = PutMReq::deserialize_rcbuf(data, arena)?;
            let vals: Vec<&[u8]> = req.get_vals().iter().map(|v| v.as_bytes()).collect();
            // Every key checked before the first write; the store applies all or nothing.
            let status = match validate::keys(req.get_keys().iter().map(|k| k.as_bytes()))
                .and_then(|keys| validate::pairs(&keys, &vals).map(|p| p.to_vec()))
            {
                Ok(pairs) => {
                    let tag = WriteTag::of(dp, conn, msg, data);
                    status(store.once(tag, |s| s.put_many(&pairs).map(|_| 0)))
                }
                Err(e) => store.tally(e),
            };
            let resp = status_only!(PutMResp, arena, req.get_id(), status);
            Ok(path.send(dp, conn, msg, &resp)?)
        }
        OpKind::GetList => {
            let req = GetListReq::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let mut resp = GetListResp::new_in(arena);
            resp.set_id(id);
            let k = key_or_bad_request!(
                req.get_key(),
                GetListResp,
                dp,
                store,
                conn,
                msg,
                arena,
                id,
                path
            );
            // Every element checked first, then appended: no list of the buffers built.
            let list = store.get_list(k).and_then(|list| {
                list.iter()
                    .try_for_each(|v| single(v).map(drop))
                    .map(|()| list)
            });
            let status = match list {
                Ok(list) => {
                    resp.init_vals(list.len());
                    for v in list {
                        if let Some(b) = v.single() {
                            resp.get_mut_vals().append(bytes(b, arena));
                        }
                    }
                    Status::Ok
                }
                Err(s) => s,
            };
            resp.set_status(status);
            Ok(reply(dp, conn, msg, &resp, path, || {
                status_only!(GetListResp, arena, id, Status::TooLarge)
            })?)
        }
        OpKind::GetFromList => {
            let req = GetFromListReq::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let mut resp = GetFromListResp::new_in(arena);
            resp.set_id(id);
            let k = key_or_bad_request!(
                req.get_key(),
                GetFromListResp,
                dp,
                store,
                conn,
                msg,
                arena,
                id,
                path
            );
            let status = match store
                .get_from_list(k, req.get_index() as usize)
                .and_then(single)
            {
                Ok(b) => {
                    resp.set_val(bytes(b, arena));
                    Status::Ok
                }
                Err(s) => s,
            };
            resp.set_status(status);
            Ok(reply(dp, conn, msg, &resp, path, || {
                status_only!(GetFromListResp, arena, id, Status::TooLarge)
            })?)
        }
        OpKind::Append => {
            let req = AppendReq::deserialize_rcbuf(data, arena)?;
            let tag = WriteTag::of(dp, conn, msg, data);
            let status = match key(req.get_key()) {
                Ok(k) => status(store.once(tag, |s| s.append(k, req.get_val().as_bytes()))),
                Err(e) => store.tally(e),
            };
            let resp = status_only!(AppendResp, arena, req.get_id(), status);
            Ok(path.send(dp, conn, msg, &resp)?)
        }
        OpKind::Delete => {
            let req = DeleteReq::deserialize_rcbuf(data, arena)?;
            let tag = WriteTag::of(dp, conn, msg, data);
            let status = match key(req.get_key()) {
                Ok(k) => status(store.once(tag, |s| s.delete(k).map(|_| 0))),
                Err(e) => store.tally(e),
            };
            let resp = status_only!(DeleteResp, arena, req.get_id(), status);
            Ok(path.send(dp, conn, msg, &resp)?)
        }
    }
}

fn s<'a>(v: &str, arena: &'a Arena) -> CFString<'a> {
    CFString::new(v, arena)
}

fn b<'a>(v: &[u8], arena: &'a Arena) -> CFBytes<'a> {
    CFBytes::new(v, arena)
}

/// What to do with a request object once it is built (see [`with_request`]).
pub trait RequestVisitor {
    /// The result.
    type Out;
    /// Called once with the request.
    fn visit<O: CornflakesObj>(self, obj: &O) -> Self::Out;
}

/// Builds request `op` with id `id` and hands it to `v` (to send or serialize). Values are
/// copied into `arena` unless they lie in its pinned memory and reach its threshold.
pub fn with_request<V: RequestVisitor>(op: &Op, id: u32, arena: &Arena, v: V) -> V::Out {
    match op {
        Op::Get { key } => {
            let mut m = GetReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            v.visit(&m)
        }
        Op::Put { key, val } => {
            let mut m = PutReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            m.set_val(b(val, arena));
            v.visit(&m)
        }
        Op::GetM { keys } => {
            let mut m = GetMReq::new_in(arena);
            m.set_id(id);
            m.init_keys(keys.len());
            for k in keys {
                m.get_mut_keys().append(s(k, arena));
            }
            v.visit(&m)
        }
        Op::PutM { keys, vals } => {
            let mut m = PutMReq::new_in(arena);
            m.set_id(id);
            m.init_keys(keys.len());
            for k in keys {
                m.get_mut_keys().append(s(k, arena));
            }
            m.init_vals(vals.len());
            for x in vals {
                m.get_mut_vals().append(b(x, arena));
            }
            v.visit(&m)
        }
        Op::GetList { key } => {
            let mut m = GetListReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            v.visit(&m)
        }
        Op::GetFromList { key, index } => {
            let mut m = GetFromListReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            m.set_index(*index);
            v.visit(&m)
        }
        Op::Append { key, val } => {
            let mut m = AppendReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            m.set_val(b(val, arena));
            v.visit(&m)
        }
        Op::Delete { key } => {
            let mut m = DeleteReq::new_in(arena);
            m.set_id(id);
            m.set_key(s(key, arena));
            v.visit(&m)
        }
    }
}

/// Queues a request on a datapath (serialize-and-send).
pub struct SendRequest<'d, D> {
    /// The datapath.
    pub dp: &'d mut D,
    /// The server's connection.
    pub conn: ConnId,
    /// Framing header.
    pub msg: Msg,
}

impl<D: Datapath> RequestVisitor for SendRequest<'_, D> {
    type Out = Result<(), SendError>;
    fn visit<O: CornflakesObj>(self, obj: &O) -> Self::Out {
        self.dp.send_object(self.conn, self.msg, obj)
    }
}

struct ToVec<'o>(&'o mut Vec<u8>);

impl RequestVisitor for ToVec<'_> {
    type Out = ();
    fn visit<O: CornflakesObj>(self, obj: &O) {
        self.0.extend_from_slice(&obj.serialize_to_vec());
    }
}

/// The Cornflakes encoding of request `op` with id `id`, appended to `out`.
pub fn encode_request(op: &Op, id: u32, arena: &Arena, out: &mut Vec<u8>) {
    with_request(op, id, arena, ToVec(out));
}

fn status_of(raw: i32) -> Result<Status, String> {
    status_from_raw(raw)
}

/// Decodes the reply to a request of `kind`: its id and contents.
pub fn decode_reply(kind: OpKind, payload: &[u8], arena: &Arena) -> Result<(u32, Reply), String> {
    let e = |e: DecodeError| format!("{} reply: {e}", kind.name());
    let vals = |l: &cornflakes::LeafList<'_, CFBytes<'_>>| -> Vec<Vec<u8>> {
        l.iter().map(|v| v.as_bytes().to_vec()).collect()
    };
    Ok(match kind {
        OpKind::Get => {
            let m = GetResp::deserialize(payload, arena).map_err(e)?;
            let status = status_of(m.get_status_raw())?;
            let mut r = Reply::status(status);
            if status == Status::Ok {
                if m.has_pieces() {
                    r.vals.push(
                        m.get_pieces()
                            .iter()
                            .flat_map(|p| p.as_bytes())
                            .copied()
                            .collect(),
                    );
                } else {
                    r.vals.push(m.get_val().as_bytes().to_vec());
                }
            }
            (m.get_id(), r)
        }
        OpKind::GetM => {
            let m = GetMResp::deserialize(payload, arena).map_err(e)?;
            let mut r = Reply::status(status_of(m.get_status_raw())?);
            r.vals = vals(m.get_vals());
            r.statuses = m
                .get_statuses()
                .iter()
                .map(status_of)
                .collect::<Result<_, _>>()?;
            (m.get_id(), r)
        }
        OpKind::GetList => {
            let m = GetListResp::deserialize(payload, arena).map_err(e)?;
            let mut r = Reply::status(status_of(m.get_status_raw())?);
            r.vals = vals(m.get_vals());
            (m.get_id(), r)
        }
        OpKind::GetFromList => {
            let m = GetFromListResp::deserialize(payload, arena).map_err(e)?;
            let status = status_of(m.get_status_raw())?;
            let mut r = Reply::status(status);
            if status == Status::Ok {
                r.vals.push(m.get_val().as_bytes().to_vec());
            }
            (m.get_id(), r)
        }
        OpKind::Put => {
            let m = PutResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), Reply::status(status_of(m.get_status_raw())?))
        }
        OpKind::PutM => {
            let m = PutMResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), Reply::status(status_of(m.get_status_raw())?))
        }
        OpKind::Append => {
            let m = AppendResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), Reply::status(status_of(m.get_status_raw())?))
        }
        OpKind::Delete => {
            let m = DeleteResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), Reply::status(status_of(m.get_status_raw())?))
        }
    })
}
