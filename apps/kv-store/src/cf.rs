//! The Cornflakes serializations (`schemas/kv.proto`): the server's handling of each request
//! against the [`Store`], and the client's encoding of requests and decoding of replies.
//!
//! The server builds each reply from the store's pinned buffers with
//! [`CFPtr::from_rcbuf_ref`](cornflakes::CFPtr::from_rcbuf_ref) (a list's elements with
//! [`LeafList::append_rcbuf_ref`](cornflakes::LeafList::append_rcbuf_ref), the same decision
//! written into the list): a value at least the arena's threshold long goes out by reference
//! (scatter-gather, no copy, no pointer recovery), a shorter one is borrowed from the store and
//! copied once, into the packet at send time. The threshold is the serialization's (hybrid, 0
//! or infinite).

use cornflakes::{
    Arena, CFBytes, CFString, ConnId, CornflakesObj, Datapath, DecodeError, Msg, RcBuf, SendError,
};
pub use serializations::SendPath;

use crate::exec::{self, Answer, Items};
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

/// A stored value as a reply field: referenced when at least the threshold long, else borrowed
/// from the store (which outlives the reply) and copied once, into the packet at send time.
fn bytes<'a>(b: &'a RcBuf, arena: &Arena) -> CFBytes<'a> {
    CFBytes::from_rcbuf_ref(b, arena)
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

/// The request messages as the store's operations see them ([`exec::Request`]): one message
/// type per operation (`schemas/kv.proto`), read in place from the received buffer. Each
/// type names its operation statically, so [`exec::execute`], inlined per type, knows it.
macro_rules! one_key_request {
    ($ty:ident, $kind:ident, vals: $vals:expr, val: |$m:ident, $i:ident| $val:expr, index: |$m2:ident| $index:expr) => {
        impl exec::Request for $ty<'_> {
            #[inline]
            fn kind(&self) -> OpKind {
                OpKind::$kind
            }
            #[inline]
            fn key_count(&self) -> usize {
                1
            }
            #[inline]
            fn key(&self, i: usize) -> Result<&str, Status> {
                if i == 0 {
                    validate::key(self.get_key().as_bytes())
                } else {
                    Err(Status::BadRequest)
                }
            }
            #[inline]
            fn val_count(&self) -> usize {
                $vals
            }
            #[inline]
            fn val(&self, $i: usize) -> &[u8] {
                let $m = self;
                $val
            }
            #[inline]
            fn index(&self) -> usize {
                let $m2 = self;
                $index
            }
        }
    };
}

one_key_request!(GetReq, Get, vals: 0, val: |_m, _i| &[], index: |_m| 0);
one_key_request!(GetListReq, GetList, vals: 0, val: |_m, _i| &[], index: |_m| 0);
one_key_request!(DeleteReq, Delete, vals: 0, val: |_m, _i| &[], index: |_m| 0);
one_key_request!(GetFromListReq, GetFromList, vals: 0, val: |_m, _i| &[], index: |m| m.get_index() as usize);
one_key_request!(PutReq, Put, vals: 1, val: |m, i| if i == 0 { m.get_val().as_bytes() } else { &[] }, index: |_m| 0);
one_key_request!(AppendReq, Append, vals: 1, val: |m, i| if i == 0 { m.get_val().as_bytes() } else { &[] }, index: |_m| 0);

impl exec::Request for GetMReq<'_> {
    #[inline]
    fn kind(&self) -> OpKind {
        OpKind::GetM
    }
    #[inline]
    fn key_count(&self) -> usize {
        self.get_keys().len()
    }
    #[inline]
    fn key(&self, i: usize) -> Result<&str, Status> {
        self.get_keys()
            .get(i)
            .map_or(Err(Status::BadRequest), |k| validate::key(k.as_bytes()))
    }
    #[inline]
    fn val_count(&self) -> usize {
        0
    }
    #[inline]
    fn val(&self, _: usize) -> &[u8] {
        &[]
    }
    #[inline]
    fn index(&self) -> usize {
        0
    }
}

impl exec::Request for PutMReq<'_> {
    #[inline]
    fn kind(&self) -> OpKind {
        OpKind::PutM
    }
    #[inline]
    fn key_count(&self) -> usize {
        self.get_keys().len()
    }
    #[inline]
    fn key(&self, i: usize) -> Result<&str, Status> {
        self.get_keys()
            .get(i)
            .map_or(Err(Status::BadRequest), |k| validate::key(k.as_bytes()))
    }
    #[inline]
    fn val_count(&self) -> usize {
        self.get_vals().len()
    }
    #[inline]
    fn val(&self, i: usize) -> &[u8] {
        self.get_vals().get(i).map_or(&[], |v| v.as_bytes())
    }
    #[inline]
    fn index(&self) -> usize {
        0
    }
}

/// Handles one request: decodes `data` as the request message its type names, runs it
/// ([`exec::execute`]), and queues the reply (same message id and type) on `conn`. `arena`
/// holds this request's objects (the caller resets it); `items` is the server's reused
/// `getm` list.
#[allow(clippy::too_many_arguments)]
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    items: &mut Items,
    conn: ConnId,
    msg: Msg,
    data: &RcBuf,
    arena: &Arena,
    path: SendPath,
) -> Result<(), ServeError> {
    let kind = OpKind::from_msg_type(msg.ty)
        .ok_or_else(|| ServeError::Malformed(format!("unknown message type {}", msg.ty)))?;
    // Decode as the message type, run, answer: the operation's meaning is `execute`'s, the
    // message types are this format's.
    macro_rules! run {
        ($ty:ident) => {{
            let req = $ty::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let mut none = Vec::new();
            let answer =
                exec::execute(store, &req, || WriteTag::of(dp, conn, msg, data), &mut none);
            send_answer(dp, conn, msg, kind, id, &answer, arena, path)
        }};
    }
    let sent = match kind {
        OpKind::Get => run!(GetReq),
        OpKind::Put => run!(PutReq),
        OpKind::PutM => run!(PutMReq),
        OpKind::GetList => run!(GetListReq),
        OpKind::GetFromList => run!(GetFromListReq),
        OpKind::Append => run!(AppendReq),
        OpKind::Delete => run!(DeleteReq),
        OpKind::GetM => {
            // Only a getm takes (and gives back) the reused result list.
            let req = GetMReq::deserialize_rcbuf(data, arena)?;
            let id = req.get_id();
            let mut getm = items.take();
            let answer =
                exec::execute(store, &req, || WriteTag::of(dp, conn, msg, data), &mut getm);
            let sent = send_answer(dp, conn, msg, kind, id, &answer, arena, path);
            items.put_back(getm);
            sent
        }
    };
    Ok(sent?)
}

/// Encodes `answer` to a request of `kind` as that operation's response message and queues
/// it. Stored values go by reference or copy as the arena's threshold decides; `get`
/// carries a value stored in pieces as its `pieces`, the other reads answer `TOO_LARGE`.
// Inlined into each operation's arm of `serve`, where the operation is known: the match on
// it, and on the answer `execute` just built, fold away.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn send_answer<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    kind: OpKind,
    id: u32,
    answer: &Answer<'_, '_>,
    arena: &Arena,
    path: SendPath,
) -> Result<(), SendError> {
    let status = answer.status();
    match kind {
        OpKind::Get => {
            let mut resp = GetResp::new_in(arena);
            resp.set_id(id);
            resp.set_status(status);
            match answer {
                Answer::Value(Ok(Value::One(b))) => resp.set_val(bytes(b, arena)),
                Answer::Value(Ok(Value::Pieces(ps))) => {
                    resp.init_pieces(ps.len());
                    let pieces = resp.get_mut_pieces();
                    for p in ps {
                        pieces.append_rcbuf_ref(p, arena);
                    }
                }
                _ => {}
            }
            reply(dp, conn, msg, &resp, path, || {
                status_only!(GetResp, arena, id, Status::TooLarge)
            })
        }
        OpKind::GetFromList => {
            let mut resp = GetFromListResp::new_in(arena);
            resp.set_id(id);
            let status = match answer {
                Answer::Value(Ok(v)) => match single(v) {
                    Ok(b) => {
                        resp.set_val(bytes(b, arena));
                        Status::Ok
                    }
                    Err(s) => s,
                },
                _ => status,
            };
            resp.set_status(status);
            reply(dp, conn, msg, &resp, path, || {
                status_only!(GetFromListResp, arena, id, Status::TooLarge)
            })
        }
        OpKind::GetList => {
            let mut resp = GetListResp::new_in(arena);
            resp.set_id(id);
            // Every element checked first, then appended: no list of the buffers built.
            let status = match answer {
                Answer::List(Ok(list)) => match list.iter().try_for_each(|v| single(v).map(drop)) {
                    Ok(()) => {
                        resp.init_vals(list.len());
                        let vals = resp.get_mut_vals();
                        for v in list.iter() {
                            if let Some(b) = v.single() {
                                vals.append_rcbuf_ref(b, arena);
                            }
                        }
                        Status::Ok
                    }
                    Err(s) => s,
                },
                _ => status,
            };
            resp.set_status(status);
            reply(dp, conn, msg, &resp, path, || {
                status_only!(GetListResp, arena, id, Status::TooLarge)
            })
        }
        OpKind::GetM => {
            let Answer::Values(items) = answer else {
                return path.send(dp, conn, msg, &status_only!(GetMResp, arena, id, status));
            };
            let mut resp = GetMResp::new_in(arena);
            resp.set_id(id);
            resp.init_vals(items.len());
            resp.init_statuses(items.len());
            let mut first = Status::Ok;
            for it in items.iter() {
                let s = match it.and_then(single) {
                    Ok(b) => {
                        resp.get_mut_vals().append_rcbuf_ref(b, arena);
                        Status::Ok
                    }
                    Err(s) => {
                        resp.get_mut_vals().append(CFBytes::default());
                        s
                    }
                };
                if first == Status::Ok {
                    first = s;
                }
                resp.get_mut_statuses().append(s as i32);
            }
            resp.set_status(first);
            reply(dp, conn, msg, &resp, path, || {
                status_only!(GetMResp, arena, id, Status::TooLarge)
            })
        }
        OpKind::Put => path.send(dp, conn, msg, &status_only!(PutResp, arena, id, status)),
        OpKind::PutM => path.send(dp, conn, msg, &status_only!(PutMResp, arena, id, status)),
        OpKind::Append => path.send(dp, conn, msg, &status_only!(AppendResp, arena, id, status)),
        OpKind::Delete => path.send(dp, conn, msg, &status_only!(DeleteResp, arena, id, status)),
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
