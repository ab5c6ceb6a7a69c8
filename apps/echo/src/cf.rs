//! The echo messages as Cornflakes objects (generated from `schemas/echo.proto`): building a
//! request, the server's deserialize → new object → send, and checking a response.

use cornflakes::bumpalo::collections::Vec as BumpVec;
use cornflakes::{
    Arena, CFBytes, CFPtr, ConnId, CornflakesObj, Datapath, DecodeError, DecodeObj, Msg,
};
use cornflakes::{RcBuf, SendError};
pub use serializations::SendPath;

use crate::schema::{List, Single, Tree1, Tree2, Tree3, Tree4, Tree5};
use crate::shape::{Kind, ShapeSpec, ValueChecker};

/// Why the server could not echo a Cornflakes message.
#[derive(Debug)]
pub enum CfError {
    /// The message did not decode.
    Decode(DecodeError),
    /// It decoded, but a tree lacked nodes.
    IncompleteTree,
    /// The reply could not be sent.
    Send(SendError),
}

impl From<DecodeError> for CfError {
    fn from(e: DecodeError) -> Self {
        CfError::Decode(e)
    }
}

impl From<SendError> for CfError {
    fn from(e: SendError) -> Self {
        CfError::Send(e)
    }
}

/// A generated tree message, built from and flattened into its leaves in order.
trait TreeObj<'a>: CornflakesObj + DecodeObj<'a> {
    /// A full tree taking its leaves from `next`, left to right.
    fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self;
    /// Appends the leaves, left to right; false when a node or leaf is missing.
    fn leaves(&self, out: &mut BumpVec<'a, CFBytes<'a>>) -> bool;
}

impl<'a> TreeObj<'a> for Tree1<'a> {
    fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self {
        let mut t = Tree1::new_in(arena);
        t.set_left(next());
        t.set_right(next());
        t
    }

    fn leaves(&self, out: &mut BumpVec<'a, CFBytes<'a>>) -> bool {
        out.push(self.get_left().clone());
        out.push(self.get_right().clone());
        self.has_left() && self.has_right()
    }
}

macro_rules! tree_node {
    ($t:ident, $child:ident) => {
        impl<'a> TreeObj<'a> for $t<'a> {
            fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self {
                let mut t = $t::new_in(arena);
                t.set_left($child::build(arena, next));
                t.set_right($child::build(arena, next));
                t
            }

            fn leaves(&self, out: &mut BumpVec<'a, CFBytes<'a>>) -> bool {
                match (self.get_left(), self.get_right()) {
                    (Some(l), Some(r)) => l.leaves(out) && r.leaves(out),
                    _ => false,
                }
            }
        }
    };
}

tree_node!(Tree2, Tree1);
tree_node!(Tree3, Tree2);
tree_node!(Tree4, Tree3);
tree_node!(Tree5, Tree4);

fn echo_tree<'a, T: TreeObj<'a>, D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    data: &'a RcBuf,
    arena: &'a Arena,
    path: SendPath,
) -> Result<(), CfError> {
    let req = T::deserialize_rcbuf(data, arena)?;
    let mut leaves = BumpVec::new_in(arena.bump());
    if !req.leaves(&mut leaves) {
        return Err(CfError::IncompleteTree);
    }
    let mut it = leaves.into_iter();
    let resp = T::build(arena, &mut || it.next().unwrap_or_default());
    Ok(path.send(dp, conn, msg, &resp)?)
}

/// The server's work for one Cornflakes message of `kind`: deserialize `data` (fields at least
/// the arena's threshold long stay references into the received buffer), build a new object
/// from the fields (a list moves over whole; single values and tree leaves are shared, one
/// reference each), and send it. `arena` holds this message's objects; the caller resets it.
pub fn echo<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    kind: Kind,
    data: &RcBuf,
    arena: &Arena,
    path: SendPath,
) -> Result<(), CfError> {
    match kind {
        Kind::Single => {
            let req = Single::deserialize_rcbuf(data, arena)?;
            let mut resp = Single::new_in(arena);
            if req.has_val() {
                resp.set_val(req.get_val().clone());
            }
            Ok(path.send(dp, conn, msg, &resp)?)
        }
        Kind::List => {
            let mut req = List::deserialize_rcbuf(data, arena)?;
            let mut resp = List::new_in(arena);
            if req.has_id() {
                resp.set_id(req.get_id());
            }
            if req.has_vals() {
                // The request is not used again: its values move to the reply whole (no
                // reference-count traffic, no second list), as a decoded protobuf message
                // is re-encoded as it is.
                std::mem::swap(resp.get_mut_vals(), req.get_mut_vals());
            }
            Ok(path.send(dp, conn, msg, &resp)?)
        }
        Kind::Tree(1) => echo_tree::<Tree1, D>(dp, conn, msg, data, arena, path),
        Kind::Tree(2) => echo_tree::<Tree2, D>(dp, conn, msg, data, arena, path),
        Kind::Tree(3) => echo_tree::<Tree3, D>(dp, conn, msg, data, arena, path),
        Kind::Tree(4) => echo_tree::<Tree4, D>(dp, conn, msg, data, arena, path),
        Kind::Tree(_) => echo_tree::<Tree5, D>(dp, conn, msg, data, arena, path),
    }
}

fn send_tree<'a, T: TreeObj<'a>, D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    vals: &'a [u8],
    spec: &ShapeSpec,
    arena: &'a Arena,
) -> Result<(), SendError> {
    let mut chunks = vals.chunks(spec.len.max(1));
    let t = T::build(arena, &mut || {
        CFBytes(CFPtr::borrowed(chunks.next().unwrap_or_default()))
    });
    dp.send_object(conn, msg, &t)
}

/// Sends request `msg` of `spec` whose values are `vals` (back to back, as
/// [`crate::shape::fill_values`] writes them); the values are copied into the packet.
pub fn send_request<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    msg: Msg,
    id: u64,
    spec: &ShapeSpec,
    vals: &[u8],
    arena: &Arena,
) -> Result<(), SendError> {
    let value = |i: usize| CFBytes(CFPtr::borrowed(&vals[i * spec.len..(i + 1) * spec.len]));
    match spec.kind {
        Kind::Single => {
            let mut m = Single::new_in(arena);
            m.set_val(value(0));
            dp.send_object(conn, msg, &m)
        }
        Kind::List => {
            let mut m = List::new_in(arena);
            m.set_id(id as u32);
            m.init_vals(spec.count);
            for i in 0..spec.count {
                m.get_mut_vals().append(value(i));
            }
            dp.send_object(conn, msg, &m)
        }
        Kind::Tree(1) => send_tree::<Tree1, D>(dp, conn, msg, vals, spec, arena),
        Kind::Tree(2) => send_tree::<Tree2, D>(dp, conn, msg, vals, spec, arena),
        Kind::Tree(3) => send_tree::<Tree3, D>(dp, conn, msg, vals, spec, arena),
        Kind::Tree(4) => send_tree::<Tree4, D>(dp, conn, msg, vals, spec, arena),
        Kind::Tree(_) => send_tree::<Tree5, D>(dp, conn, msg, vals, spec, arena),
    }
}

fn check_tree<'a, T: TreeObj<'a>>(
    payload: &'a [u8],
    arena: &'a Arena,
    c: &mut ValueChecker<'_>,
) -> bool {
    let Ok(t) = T::deserialize_bytes(payload, arena) else {
        return false;
    };
    let mut leaves = BumpVec::new_in(arena.bump());
    let complete = t.leaves(&mut leaves);
    leaves.iter().for_each(|v| c.visit(v.as_bytes()));
    complete
}

/// Whether `payload` decodes as the Cornflakes encoding of request `id` of `spec`.
pub fn check_response(id: u64, spec: &ShapeSpec, payload: &[u8], arena: &Arena) -> bool {
    let mut c = ValueChecker::new(id, spec);
    let ok = match spec.kind {
        Kind::Single => match Single::deserialize(payload, arena) {
            Ok(m) => {
                c.visit(m.get_val().as_bytes());
                m.has_val()
            }
            Err(_) => false,
        },
        Kind::List => match List::deserialize(payload, arena) {
            Ok(m) => {
                m.get_vals().iter().for_each(|v| c.visit(v.as_bytes()));
                m.get_id() == id as u32
            }
            Err(_) => false,
        },
        Kind::Tree(1) => check_tree::<Tree1>(payload, arena, &mut c),
        Kind::Tree(2) => check_tree::<Tree2>(payload, arena, &mut c),
        Kind::Tree(3) => check_tree::<Tree3>(payload, arena, &mut c),
        Kind::Tree(4) => check_tree::<Tree4>(payload, arena, &mut c),
        Kind::Tree(_) => check_tree::<Tree5>(payload, arena, &mut c),
    };
    ok && c.finish()
}
