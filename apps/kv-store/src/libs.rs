//! The protobuf, Cap'n Proto and FlatBuffers serializations of the store (crate `baselines`,
//! `baselines::kv`): one request and one response message per library.
//!
//! Network path (paper §6.1.3): each library gets the path that suits its output, so none pays
//! a copy a careful deployment would not make. Protobuf and FlatBuffers serialize the response
//! straight into one pinned transmit buffer, sent as a single scatter-gather entry (the copies
//! left are the library's own: prost copies values into its message struct, then into the
//! buffer; FlatBuffers builds in its builder and is written out). Cap'n Proto builds the
//! response in segments allocated from the datapath's pinned memory and sends the segment
//! table and each segment as one scatter-gather entry (`baselines::segments`): its builder
//! writes the wire format in place, so each value is copied once, into the segment.

use std::cell::RefCell;

use baselines::kv::{recycle, KvCodec, KvRequestView, KvResponseView};
use baselines::Library;
use cornflakes::{ConnId, Datapath, Msg, RcBuf, SendError};
use cornflakes_rpc::once::Incoming;

use crate::exec::{self, Answer, Item, Items};
use crate::ops::{status_from_raw, Op, OpKind, Reply, Status};
use crate::store::{Store, Value};
use cornflakes_rpc::Unanswered;

/// The response lists a library server reuses from one request to the next (recycled with
/// [`baselines::kv::recycle`]), so answering a request allocates nothing of the server's own:
/// the values returned are borrowed from the store straight into the response view.
#[derive(Debug, Default)]
pub struct Scratch {
    vals: Vec<&'static [u8]>,
    statuses: Vec<i32>,
    /// Cap'n Proto's scatter-gather list (segment table, segments).
    sga: Vec<RcBuf>,
}

fn single(v: &Value) -> Result<&RcBuf, Status> {
    v.single().ok_or(Status::TooLarge)
}

/// A library's decoded request as the store's operations see it ([`exec::Request`]).
struct LibRequest<'r, 'a> {
    view: &'r KvRequestView<'a>,
    kind: OpKind,
}

impl exec::Request for LibRequest<'_, '_> {
    fn kind(&self) -> OpKind {
        self.kind
    }
    fn key_count(&self) -> usize {
        self.view.keys.len()
    }
    fn key(&self, i: usize) -> Result<&str, Status> {
        // The libraries' string fields are UTF-8 once decoded.
        self.view.keys.get(i).copied().ok_or(Status::BadRequest)
    }
    fn val_count(&self) -> usize {
        self.view.vals.len()
    }
    fn val(&self, i: usize) -> &[u8] {
        self.view.vals.get(i).copied().unwrap_or_default()
    }
    fn index(&self) -> usize {
        self.view.index as usize
    }
}

/// Runs request `r` ([`exec::execute`]) and writes the answer into `out` (its lists empty on
/// entry): the status, the stored values returned — borrowed from `store`, no copy, no
/// allocation — and `getm`'s per-key statuses. A value stored in pieces does not fit the
/// libraries' one `bytes` field per value: `TOO_LARGE`.
#[inline]
fn answer<'s, 'd>(
    store: &'s mut Store,
    r: &KvRequestView<'_>,
    tag: impl FnOnce() -> Option<Incoming<'d>>,
    items: &mut Items,
    out: &mut KvResponseView<'s>,
) -> Result<(), Unanswered> {
    let kind = OpKind::from_msg_type(r.op)
        .ok_or_else(|| Unanswered::Malformed(format!("unknown operation {}", r.op)))?;
    out.id = r.id;
    // Only a getm takes (and gives back) the reused result list.
    let mut getm: Vec<Item<'s>> = if kind == OpKind::GetM {
        items.take()
    } else {
        Vec::new()
    };
    let a = exec::execute(store, &LibRequest { view: r, kind }, tag, &mut getm);
    fill(a, out);
    if kind == OpKind::GetM {
        items.put_back(getm);
    }
    Ok(())
}

/// The answer as the response view.
#[inline(always)]
fn fill<'s>(a: Answer<'s, '_>, out: &mut KvResponseView<'s>) {
    out.status = a.status() as i32;
    match a {
        Answer::Value(Ok(v)) => match single(v) {
            Ok(b) => out.vals.push(&b[..]),
            Err(s) => out.status = s as i32,
        },
        Answer::List(Ok(list)) => {
            for v in list {
                match single(v) {
                    Ok(b) => out.vals.push(&b[..]),
                    Err(s) => {
                        out.vals.clear();
                        out.status = s as i32;
                        break;
                    }
                }
            }
        }
        Answer::Values(items) => {
            let mut first = Status::Ok;
            for it in items {
                let s = match it.and_then(single) {
                    Ok(b) => {
                        out.vals.push(&b[..]);
                        Status::Ok
                    }
                    Err(s) => {
                        // A missing key is an empty value in the reply.
                        out.vals.push(&[]);
                        s
                    }
                };
                if first == Status::Ok {
                    first = s;
                }
                out.statuses.push(s as i32);
            }
            out.status = first as i32;
        }
        Answer::Refused(_) | Answer::Wrote(_) | Answer::Value(Err(_)) | Answer::List(Err(_)) => {}
    }
}

/// Handles one request in `codec`'s format: decode, apply to `store`, serialize the response
/// into one pinned transmit buffer and queue it. The response's lists come from `scratch`
/// and go back to it, whatever the outcome.
#[allow(clippy::too_many_arguments)]
pub fn serve<D: Datapath>(
    dp: &mut D,
    store: &mut Store,
    codec: &mut dyn KvCodec,
    scratch: &mut Scratch,
    items: &mut Items,
    conn: ConnId,
    msg: Msg,
    data: &[u8],
) -> Result<(), Unanswered> {
    let mut view = KvResponseView {
        id: 0,
        status: 0,
        vals: recycle(std::mem::take(&mut scratch.vals)),
        statuses: std::mem::take(&mut scratch.statuses),
    };
    view.statuses.clear();
    let result = serve_in(
        dp,
        store,
        codec,
        &mut view,
        items,
        &mut scratch.sga,
        conn,
        msg,
        data,
    );
    scratch.vals = recycle(view.vals);
    scratch.statuses = view.statuses;
    result
}

#[allow(clippy::too_many_arguments)]
fn serve_in<'s, D: Datapath>(
    dp: &mut D,
    store: &'s mut Store,
    codec: &mut dyn KvCodec,
    view: &mut KvResponseView<'s>,
    items: &mut Items,
    sga: &mut Vec<RcBuf>,
    conn: ConnId,
    msg: Msg,
    data: &[u8],
) -> Result<(), Unanswered> {
    let peer: &D = dp;
    // The closure may run once; it hands the store (and so the borrow of the values it
    // returns) to `execute`.
    let mut store = Some(store);
    let mut result: Option<Result<(), Unanswered>> = None;
    codec
        .with_request(data, &mut |r| {
            result = Some(match store.take() {
                Some(store) => answer(
                    store,
                    r,
                    || Incoming::new(msg, data, || peer.peer_addr(conn)),
                    items,
                    view,
                ),
                None => Err(Unanswered::Malformed("more than one request".to_owned())),
            });
        })
        .map_err(|e| Unanswered::Malformed(e.to_string()))?;
    result.ok_or_else(|| Unanswered::Malformed("no request".to_owned()))??;
    let mem = dp.memory();
    let limit = mem.max_item_size().min(dp.max_message_len());
    if codec.response_len_bound(view) > limit {
        view.status = Status::TooLarge as i32;
        view.vals.clear();
        view.statuses.clear();
    }
    if codec.library() == Library::Capnp {
        return send_capnp_segments(dp, conn, msg, view, sga);
    }
    let mut out = mem
        .alloc(codec.response_len_bound(view))
        .map_err(SendError::from)?;
    let n = codec
        .encode_response(view, &mut out)
        .map_err(|e| Unanswered::Send(SendError::Io(std::io::Error::other(e.to_string()))))?;
    out.set_len(n);
    Ok(dp.send_sga(conn, msg, &[out.freeze()])?)
}

/// Cap'n Proto's path: the response built in pinned segments, sent as the segment table plus
/// one scatter-gather entry per segment, listed in the server's reused `sga` (emptied again
/// after the send, so no buffer stays referenced).
fn send_capnp_segments<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    view: &KvResponseView<'_>,
    sga: &mut Vec<RcBuf>,
) -> Result<(), Unanswered> {
    let built = baselines::kv::capnp_response_sga_into(view, dp.memory(), sga)
        .map_err(|e| Unanswered::Send(SendError::Io(std::io::Error::other(e.to_string()))))
        .and_then(|r| r.map_err(|e| Unanswered::Send(SendError::from(e))));
    let sent = built.and_then(|()| Ok(dp.send_sga(conn, msg, sga)?));
    sga.clear();
    sent
}

thread_local! {
    static CODECS: RefCell<Vec<(Library, Box<dyn KvCodec + Send>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's codec of `lib`.
pub fn with_codec<R>(lib: Library, f: impl FnOnce(&mut dyn KvCodec) -> R) -> R {
    CODECS.with(|c| {
        let mut c = c.borrow_mut();
        let i = match c.iter().position(|(l, _)| *l == lib) {
            Some(i) => i,
            None => {
                c.push((lib, lib.kv_codec()));
                c.len() - 1
            }
        };
        f(c[i].1.as_mut())
    })
}

/// The encoding of request `op` with id `id` in `lib`'s format, into `out`.
pub fn encode_request(lib: Library, op: &Op, id: u32, out: &mut Vec<u8>) {
    let index;
    let mut view = KvRequestView {
        id,
        op: OpKind::of(op).msg_type(),
        ..KvRequestView::default()
    };
    match op {
        Op::Get { key } | Op::GetList { key } | Op::Delete { key } => view.keys.push(key),
        Op::Put { key, val } | Op::Append { key, val } => {
            view.keys.push(key);
            view.vals.push(val);
        }
        Op::GetM { keys } => view.keys.extend(keys.iter().map(String::as_str)),
        Op::PutM { keys, vals } => {
            view.keys.extend(keys.iter().map(String::as_str));
            view.vals.extend(vals.iter().map(Vec::as_slice));
        }
        Op::GetFromList { key, index: i } => {
            index = *i;
            view.keys.push(key);
            view.index = index;
        }
    }
    with_codec(lib, |c| c.encode_request(&view, out));
}

/// Decodes a response in `lib`'s format: its id and contents.
pub fn decode_reply(lib: Library, kind: OpKind, payload: &[u8]) -> Result<(u32, Reply), String> {
    let r = with_codec(lib, |c| c.decode_response(payload)).map_err(|e| e.to_string())?;
    let status = status_from_raw(r.status)?;
    let mut reply = Reply::status(status);
    reply.statuses = r
        .statuses
        .into_iter()
        .map(status_from_raw)
        .collect::<Result<_, _>>()?;
    if kind == OpKind::GetM || status == Status::Ok {
        reply.vals = r.vals;
    }
    Ok((r.id, reply))
}
