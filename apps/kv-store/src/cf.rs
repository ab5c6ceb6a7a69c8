//! The Cornflakes serializations (`schemas/kv.proto`): the store as the generated service
//! `kv.Kv` ([`Service`], whose requests the generated dispatcher routes), and the client's
//! encoding of requests and decoding of replies.
//!
//! Each method reads its request in place (a view of the received buffer: only the fields the
//! operation takes are read and checked) and builds its reply from the store's pinned buffers
//! with [`CFPtr::from_rcbuf_ref`](cornflakes::CFPtr::from_rcbuf_ref) (a list's elements with
//! [`LeafList::append_rcbuf_ref`](cornflakes::LeafList::append_rcbuf_ref), the same decision
//! written into the list): a value at least the arena's threshold long goes out by reference
//! (scatter-gather, no copy, no pointer recovery), a shorter one is borrowed from the store and
//! copied once, into the packet at send time. The threshold and the send path are the
//! dispatcher's (hybrid, 0 or infinite; serialize-and-send or not).

use cornflakes::wire::BytesListView;
use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, Datapath, DecodeError, RcBuf};
use cornflakes_rpc::once::Incoming;
use cornflakes_rpc::{CallError, Replied, Reply, Unanswered};

use crate::exec::{self, Answer, Items};
use crate::ops::{status_from_raw, Op, OpKind, Reply as OpReply, Status};
use crate::schema::*;
use crate::store::{Store, Value};
use crate::validate;

/// A stored value as a reply field: referenced when at least the threshold long, else borrowed
/// from the store (which outlives the reply) and copied once, into the packet at send time.
#[inline]
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

/// A single-key request read in place: the operation's key and value (when it takes one) and
/// list index, read from the view before the store's operation runs.
struct One<'r> {
    kind: OpKind,
    key: &'r [u8],
    val: Option<&'r [u8]>,
    index: usize,
}

impl exec::Request for One<'_> {
    #[inline]
    fn kind(&self) -> OpKind {
        self.kind
    }
    #[inline]
    fn key_count(&self) -> usize {
        1
    }
    #[inline]
    fn key(&self, i: usize) -> Result<&str, Status> {
        if i == 0 {
            validate::key(self.key)
        } else {
            Err(Status::BadRequest)
        }
    }
    #[inline]
    fn val_count(&self) -> usize {
        self.val.is_some() as usize
    }
    #[inline]
    fn val(&self, _: usize) -> &[u8] {
        self.val.unwrap_or_default()
    }
    #[inline]
    fn index(&self) -> usize {
        self.index
    }
}

/// A multi-key request read in place: its keys and values as lists of the received buffer,
/// every element's bounds checked before the store's operation runs (a list that points out
/// of the message is malformed, as when the request was decoded whole).
struct Many<'r> {
    kind: OpKind,
    keys: BytesListView<'r>,
    vals: BytesListView<'r>,
}

impl<'r> Many<'r> {
    fn new(
        kind: OpKind,
        keys: BytesListView<'r>,
        vals: BytesListView<'r>,
    ) -> Result<Self, DecodeError> {
        keys.iter()
            .chain(vals.iter())
            .try_for_each(|e| e.map(drop))?;
        Ok(Many { kind, keys, vals })
    }
}

impl exec::Request for Many<'_> {
    #[inline]
    fn kind(&self) -> OpKind {
        self.kind
    }
    #[inline]
    fn key_count(&self) -> usize {
        self.keys.len()
    }
    #[inline]
    fn key(&self, i: usize) -> Result<&str, Status> {
        match self.keys.get(i) {
            Some(Ok(k)) => validate::key(k),
            _ => Err(Status::BadRequest),
        }
    }
    #[inline]
    fn val_count(&self) -> usize {
        self.vals.len()
    }
    #[inline]
    fn val(&self, i: usize) -> &[u8] {
        match self.vals.get(i) {
            Some(Ok(v)) => v,
            _ => &[],
        }
    }
    #[inline]
    fn index(&self) -> usize {
        0
    }
}

/// The request `reply` answers as the exactly-once table sees it (taken only for a write):
/// its incarnation and id, its bytes, and its sender's address for an anonymous client.
#[inline]
fn tag<'r, D, B>(reply: &Reply<'r, D, B>) -> impl FnOnce() -> Option<Incoming<'r>> + 'r
where
    D: Datapath,
    B: CornflakesObj,
{
    let m = reply.request();
    move || Incoming::new(m.msg, &m.data, || Some(m.peer))
}

/// The store as the service `kv.Kv`: each method runs its operation once, for every
/// serialization alike ([`exec::execute`]), and answers in that method's reply message.
pub struct Service {
    store: Store,
    /// The `getm` result list, reused.
    items: Items,
}

impl Service {
    /// The service of `store`.
    pub fn new(store: Store) -> Service {
        Service {
            store,
            items: Items::default(),
        }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store, mutably.
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// The store and the reused `getm` list (for the other serializations' handlers).
    pub fn parts(&mut self) -> (&mut Store, &mut Items) {
        (&mut self.store, &mut self.items)
    }

    /// Runs single-key request `req` and returns its answer (a write once, under its tag);
    /// `none` is the `getm` list it never fills.
    #[inline(always)]
    fn one<'r, 'i, D: Datapath, B: CornflakesObj>(
        &'r mut self,
        req: One<'_>,
        reply: &Reply<'r, D, B>,
        none: &'i mut Vec<exec::Item<'r>>,
    ) -> Answer<'r, 'i> {
        exec::execute(&mut self.store, &req, tag(reply), none)
    }
}

/// A reply whose status is the answer's and which carries no values.
macro_rules! write_reply {
    ($self:ident, $req:ident, $reply:ident, $kind:ident, $resp:ident, $key:expr, $val:expr) => {{
        let one = One {
            kind: OpKind::$kind,
            key: $key,
            val: $val,
            index: 0,
        };
        let id = $req.get_id();
        let status = $self.one(one, &$reply, &mut Vec::new()).status();
        let arena = $reply.arena();
        $reply.send(&status_only!($resp, arena, id, status))
    }};
}

impl Kv for Service {
    #[inline]
    fn get<'r, D: Datapath>(
        &'r mut self,
        req: GetReqView<'r>,
        reply: Reply<'r, D, GetResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        let one = One {
            kind: OpKind::Get,
            key: req.get_key_bytes()?,
            val: None,
            index: 0,
        };
        let id = req.get_id();
        let mut none = Vec::new();
        let answer = self.one(one, &reply, &mut none);
        let arena = reply.arena();
        let mut resp = GetResp::new_in(arena);
        resp.set_id(id);
        resp.set_status(answer.status());
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
        reply.send_or(&resp, |a| status_only!(GetResp, a, id, Status::TooLarge))
    }

    #[inline]
    fn put<'r, D: Datapath>(
        &'r mut self,
        req: PutReqView<'r>,
        reply: Reply<'r, D, PutResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        write_reply!(
            self,
            req,
            reply,
            Put,
            PutResp,
            req.get_key_bytes()?,
            Some(req.get_val()?)
        )
    }

    #[inline]
    fn get_m<'r, D: Datapath>(
        &'r mut self,
        req: GetMReqView<'r>,
        reply: Reply<'r, D, GetMResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        let id = req.get_id();
        let many = Many::new(
            OpKind::GetM,
            req.get_keys()?.0,
            BytesListView::empty("GetMReq.vals"),
        )?;
        // Only a getm takes (and gives back) the reused result list.
        let mut getm = self.items.take();
        let answer = exec::execute(&mut self.store, &many, tag(&reply), &mut getm);
        let arena = reply.arena();
        let Answer::Values(items) = answer else {
            let status = answer.status();
            let sent = reply.send(&status_only!(GetMResp, arena, id, status));
            self.items.put_back(getm);
            return sent;
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
        let sent = reply.send_or(&resp, |a| status_only!(GetMResp, a, id, Status::TooLarge));
        drop(resp);
        self.items.put_back(getm);
        sent
    }

    #[inline]
    fn put_m<'r, D: Datapath>(
        &'r mut self,
        req: PutMReqView<'r>,
        reply: Reply<'r, D, PutMResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        let id = req.get_id();
        let many = Many::new(OpKind::PutM, req.get_keys()?.0, req.get_vals()?)?;
        let status = exec::execute(&mut self.store, &many, tag(&reply), &mut Vec::new()).status();
        let arena = reply.arena();
        reply.send(&status_only!(PutMResp, arena, id, status))
    }

    #[inline]
    fn get_list<'r, D: Datapath>(
        &'r mut self,
        req: GetListReqView<'r>,
        reply: Reply<'r, D, GetListResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        let one = One {
            kind: OpKind::GetList,
            key: req.get_key_bytes()?,
            val: None,
            index: 0,
        };
        let id = req.get_id();
        let mut none = Vec::new();
        let answer = self.one(one, &reply, &mut none);
        let arena = reply.arena();
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
            a => a.status(),
        };
        resp.set_status(status);
        reply.send_or(&resp, |a| {
            status_only!(GetListResp, a, id, Status::TooLarge)
        })
    }

    #[inline]
    fn get_from_list<'r, D: Datapath>(
        &'r mut self,
        req: GetFromListReqView<'r>,
        reply: Reply<'r, D, GetFromListResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        let one = One {
            kind: OpKind::GetFromList,
            key: req.get_key_bytes()?,
            val: None,
            index: req.get_index() as usize,
        };
        let id = req.get_id();
        let mut none = Vec::new();
        let answer = self.one(one, &reply, &mut none);
        let arena = reply.arena();
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
            a => a.status(),
        };
        resp.set_status(status);
        reply.send_or(&resp, |a| {
            status_only!(GetFromListResp, a, id, Status::TooLarge)
        })
    }

    #[inline]
    fn append<'r, D: Datapath>(
        &'r mut self,
        req: AppendReqView<'r>,
        reply: Reply<'r, D, AppendResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        write_reply!(
            self,
            req,
            reply,
            Append,
            AppendResp,
            req.get_key_bytes()?,
            Some(req.get_val()?)
        )
    }

    #[inline]
    fn delete<'r, D: Datapath>(
        &'r mut self,
        req: DeleteReqView<'r>,
        reply: Reply<'r, D, DeleteResp<'r>>,
    ) -> Result<Replied, Unanswered> {
        write_reply!(
            self,
            req,
            reply,
            Delete,
            DeleteResp,
            req.get_key_bytes()?,
            None
        )
    }
}

fn s<'a>(v: &str, arena: &'a Arena) -> CFString<'a> {
    CFString::new(v, arena)
}

fn b<'a>(v: &[u8], arena: &'a Arena) -> CFBytes<'a> {
    CFBytes::new(v, arena)
}

/// A request of the store (the generated `KvCall`: one variant per method, sent on a
/// datapath, through the generated client, or encoded), built here from an operation with its
/// values (copied into the arena unless they lie in its pinned memory and reach its
/// threshold).
pub use crate::schema::KvCall as Request;

/// Calls `$f` with the request object of `$r`, whatever its type.
macro_rules! each {
    ($r:expr, $m:ident => $f:expr) => {
        match $r {
            Request::Get($m) => $f,
            Request::Put($m) => $f,
            Request::GetM($m) => $f,
            Request::PutM($m) => $f,
            Request::GetList($m) => $f,
            Request::GetFromList($m) => $f,
            Request::Append($m) => $f,
            Request::Delete($m) => $f,
        }
    };
}

impl<'a> Request<'a> {
    /// Request `op` with id `id`.
    pub fn build(op: &Op, id: u32, arena: &'a Arena) -> Request<'a> {
        match op {
            Op::Get { key } => {
                let mut m = GetReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                Request::Get(m)
            }
            Op::Put { key, val } => {
                let mut m = PutReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                m.set_val(b(val, arena));
                Request::Put(m)
            }
            Op::GetM { keys } => {
                let mut m = GetMReq::new_in(arena);
                m.set_id(id);
                m.init_keys(keys.len());
                for k in keys {
                    m.get_mut_keys().append(s(k, arena));
                }
                Request::GetM(m)
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
                Request::PutM(m)
            }
            Op::GetList { key } => {
                let mut m = GetListReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                Request::GetList(m)
            }
            Op::GetFromList { key, index } => {
                let mut m = GetFromListReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                m.set_index(*index);
                Request::GetFromList(m)
            }
            Op::Append { key, val } => {
                let mut m = AppendReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                m.set_val(b(val, arena));
                Request::Append(m)
            }
            Op::Delete { key } => {
                let mut m = DeleteReq::new_in(arena);
                m.set_id(id);
                m.set_key(s(key, arena));
                Request::Delete(m)
            }
        }
    }

    /// Sends it through the runtime client and waits for its reply, counting receives (see
    /// `Client::call_polling`).
    pub fn call_polling<D: Datapath>(
        &self,
        client: &mut cornflakes_rpc::Client<D>,
        polls_per_try: u32,
        wait: &mut dyn FnMut(),
    ) -> Result<cornflakes::RxMsg, CallError> {
        let ty = self.kind().msg_type();
        each!(self, m => client.call_polling(ty, m, polls_per_try, wait))
    }

    /// The operation it asks for.
    pub fn kind(&self) -> OpKind {
        match self {
            Request::Get(_) => OpKind::Get,
            Request::Put(_) => OpKind::Put,
            Request::GetM(_) => OpKind::GetM,
            Request::PutM(_) => OpKind::PutM,
            Request::GetList(_) => OpKind::GetList,
            Request::GetFromList(_) => OpKind::GetFromList,
            Request::Append(_) => OpKind::Append,
            Request::Delete(_) => OpKind::Delete,
        }
    }

    /// Its encoding, appended to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.serialize_to_vec());
    }
}

/// The Cornflakes encoding of request `op` with id `id`, appended to `out`.
pub fn encode_request(op: &Op, id: u32, arena: &Arena, out: &mut Vec<u8>) {
    Request::build(op, id, arena).encode(out);
}

fn status_of(raw: i32) -> Result<Status, String> {
    status_from_raw(raw)
}

/// Decodes the reply to a request of `kind`: its id and contents.
pub fn decode_reply(kind: OpKind, payload: &[u8], arena: &Arena) -> Result<(u32, OpReply), String> {
    let e = |e: DecodeError| format!("{} reply: {e}", kind.name());
    let vals = |l: &cornflakes::LeafList<'_, CFBytes<'_>>| -> Vec<Vec<u8>> {
        l.iter().map(|v| v.as_bytes().to_vec()).collect()
    };
    Ok(match kind {
        OpKind::Get => {
            let m = GetResp::deserialize(payload, arena).map_err(e)?;
            let status = status_of(m.get_status_raw())?;
            let mut r = OpReply::status(status);
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
            let mut r = OpReply::status(status_of(m.get_status_raw())?);
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
            let mut r = OpReply::status(status_of(m.get_status_raw())?);
            r.vals = vals(m.get_vals());
            (m.get_id(), r)
        }
        OpKind::GetFromList => {
            let m = GetFromListResp::deserialize(payload, arena).map_err(e)?;
            let status = status_of(m.get_status_raw())?;
            let mut r = OpReply::status(status);
            if status == Status::Ok {
                r.vals.push(m.get_val().as_bytes().to_vec());
            }
            (m.get_id(), r)
        }
        OpKind::Put => {
            let m = PutResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), OpReply::status(status_of(m.get_status_raw())?))
        }
        OpKind::PutM => {
            let m = PutMResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), OpReply::status(status_of(m.get_status_raw())?))
        }
        OpKind::Append => {
            let m = AppendResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), OpReply::status(status_of(m.get_status_raw())?))
        }
        OpKind::Delete => {
            let m = DeleteResp::deserialize(payload, arena).map_err(e)?;
            (m.get_id(), OpReply::status(status_of(m.get_status_raw())?))
        }
    })
}
