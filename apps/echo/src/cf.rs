//! The echo messages as Cornflakes objects (generated from `schemas/echo.proto`): the server
//! as the generated service `echo.Echo` (read in place → new object → send), building a
//! request, and checking a response.

use cornflakes::bumpalo::collections::Vec as BumpVec;
use cornflakes::SendError;
use cornflakes::{Arena, CFBytes, CFPtr, ConnId, CornflakesObj, Datapath, DecodeObj, Msg};
use cornflakes_rpc::{Replied, Reply, Unanswered};
pub use serializations::SendPath;

use crate::schema::{
    Echo, List, ListView, Single, SingleView, Tree1, Tree1View, Tree2, Tree2View, Tree3, Tree3View,
    Tree4, Tree4View, Tree5, Tree5View,
};
use crate::shape::{Kind, ShapeSpec, ValueChecker};

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

/// A tree request read in place, echoed: the reply tree built from its leaves, each a slice
/// of the received packet (referenced when at least the threshold long).
trait TreeView<'r>: Copy {
    /// The reply object.
    type Obj: CornflakesObj;
    /// The reply with this tree's leaves, or why there is none (a node or leaf missing, a
    /// nested object that does not read).
    fn echo<D: Datapath, B: CornflakesObj>(
        self,
        reply: &Reply<'r, D, B>,
    ) -> Result<Self::Obj, Unanswered>;
}

impl<'r> TreeView<'r> for Tree1View<'r> {
    type Obj = Tree1<'r>;
    #[inline]
    fn echo<D: Datapath, B: CornflakesObj>(
        self,
        reply: &Reply<'r, D, B>,
    ) -> Result<Tree1<'r>, Unanswered> {
        if !(self.has_left() && self.has_right()) {
            return Err(incomplete());
        }
        let mut t = Tree1::new_in(reply.arena());
        t.set_left(reply.bytes(self.get_left()?));
        t.set_right(reply.bytes(self.get_right()?));
        Ok(t)
    }
}

macro_rules! tree_view {
    ($v:ident, $t:ident) => {
        impl<'r> TreeView<'r> for $v<'r> {
            type Obj = $t<'r>;
            #[inline]
            fn echo<D: Datapath, B: CornflakesObj>(
                self,
                reply: &Reply<'r, D, B>,
            ) -> Result<$t<'r>, Unanswered> {
                let (Some(l), Some(r)) = (self.get_left()?, self.get_right()?) else {
                    return Err(incomplete());
                };
                let mut t = $t::new_in(reply.arena());
                t.set_left(l.echo(reply)?);
                t.set_right(r.echo(reply)?);
                Ok(t)
            }
        }
    };
}

tree_view!(Tree2View, Tree2);
tree_view!(Tree3View, Tree3);
tree_view!(Tree4View, Tree4);
tree_view!(Tree5View, Tree5);

#[cold]
fn incomplete() -> Unanswered {
    Unanswered::Malformed("incomplete tree".to_owned())
}

/// Echoes tree request `req`.
#[inline]
fn echo_tree<'r, V: TreeView<'r>, D: Datapath>(
    req: V,
    reply: Reply<'r, D, V::Obj>,
) -> Result<Replied, Unanswered> {
    let t = req.echo(&reply)?;
    reply.send(&t)
}

/// The echo server's Cornflakes modes as the generated service `echo.Echo`: each method reads
/// its request in place and answers a new object of the same shape, built from the request's
/// values (each a slice of the received packet: referenced when at least the arena's threshold
/// long, else copied into the reply at send time).
pub struct Service;

impl Echo for Service {
    #[inline]
    fn single<'r, D: Datapath>(
        &'r mut self,
        req: SingleView<'r>,
        reply: Reply<'r, D, Single<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut resp = Single::new_in(reply.arena());
        if req.has_val() {
            resp.set_val(reply.bytes(req.get_val()?));
        }
        reply.send(&resp)
    }

    #[inline]
    fn list<'r, D: Datapath>(
        &'r mut self,
        req: ListView<'r>,
        reply: Reply<'r, D, List<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut resp = List::new_in(reply.arena());
        if req.has_id() {
            resp.set_id(req.get_id());
        }
        if req.has_vals() {
            let vals = req.get_vals()?;
            resp.init_vals(vals.len());
            resp.get_mut_vals()
                .extend_from_packet(reply.packet(), &vals, reply.arena())?;
        }
        reply.send(&resp)
    }

    fn tree1<'r, D: Datapath>(
        &'r mut self,
        req: Tree1View<'r>,
        reply: Reply<'r, D, Tree1<'r>>,
    ) -> Result<Replied, Unanswered> {
        echo_tree(req, reply)
    }

    fn tree2<'r, D: Datapath>(
        &'r mut self,
        req: Tree2View<'r>,
        reply: Reply<'r, D, Tree2<'r>>,
    ) -> Result<Replied, Unanswered> {
        echo_tree(req, reply)
    }

    fn tree3<'r, D: Datapath>(
        &'r mut self,
        req: Tree3View<'r>,
        reply: Reply<'r, D, Tree3<'r>>,
    ) -> Result<Replied, Unanswered> {
        echo_tree(req, reply)
    }

    fn tree4<'r, D: Datapath>(
        &'r mut self,
        req: Tree4View<'r>,
        reply: Reply<'r, D, Tree4<'r>>,
    ) -> Result<Replied, Unanswered> {
        echo_tree(req, reply)
    }

    fn tree5<'r, D: Datapath>(
        &'r mut self,
        req: Tree5View<'r>,
        reply: Reply<'r, D, Tree5<'r>>,
    ) -> Result<Replied, Unanswered> {
        echo_tree(req, reply)
    }
}

/// An echo request of one shape (the generated `EchoCall`: one variant per method, sent on
/// a datapath or through the generated client), built here with its values borrowed (copied
/// into the packet when it is sent).
pub use crate::schema::EchoCall as Request;

fn tree<'a, T: TreeObj<'a>>(vals: &'a [u8], spec: &ShapeSpec, arena: &'a Arena) -> T {
    let mut chunks = vals.chunks(spec.len.max(1));
    T::build(arena, &mut || {
        CFBytes(CFPtr::borrowed(chunks.next().unwrap_or_default()))
    })
}

impl<'a> Request<'a> {
    /// Request `id` of `spec` whose values are `vals` (back to back, as
    /// [`crate::shape::fill_values`] writes them).
    pub fn build(id: u64, spec: &ShapeSpec, vals: &'a [u8], arena: &'a Arena) -> Request<'a> {
        let value = |i: usize| CFBytes(CFPtr::borrowed(&vals[i * spec.len..(i + 1) * spec.len]));
        match spec.kind {
            Kind::Single => {
                let mut m = Single::new_in(arena);
                m.set_val(value(0));
                Request::Single(m)
            }
            Kind::List => {
                let mut m = List::new_in(arena);
                m.set_id(id as u32);
                m.init_vals(spec.count);
                for i in 0..spec.count {
                    m.get_mut_vals().append(value(i));
                }
                Request::List(m)
            }
            Kind::Tree(1) => Request::Tree1(tree(vals, spec, arena)),
            Kind::Tree(2) => Request::Tree2(tree(vals, spec, arena)),
            Kind::Tree(3) => Request::Tree3(tree(vals, spec, arena)),
            Kind::Tree(4) => Request::Tree4(tree(vals, spec, arena)),
            Kind::Tree(_) => Request::Tree5(tree(vals, spec, arena)),
        }
    }
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
    Request::build(id, spec, vals, arena).send(dp, conn, msg)
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
