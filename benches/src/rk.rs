//! rkyv (zero-copy deserialization): the same shapes as Rust types archived straight from
//! borrowed values into the transmit buffer, and read through the validating `access`.

use std::hint::black_box;

use cornflakes::RcBuf;
use rkyv::api::high::HighSerializer;
use rkyv::rancor::Error;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::ser::writer::Buffer;
use rkyv::with::InlineAsBox;
use rkyv::{Archive, Serialize};

use crate::{Lib, Shape, Store, MAX_VALUES};

/// One value, borrowed from the store and archived as an owned byte box.
#[derive(Archive, Serialize)]
pub struct Val<'a>(#[rkyv(with = InlineAsBox)] pub &'a [u8]);

/// `{ id; vals }`.
#[derive(Archive, Serialize)]
pub struct ListMsg<'a> {
    /// Message id.
    pub id: u32,
    /// The values.
    #[rkyv(with = InlineAsBox)]
    pub vals: &'a [Val<'a>],
}

/// A tree node with two children of the same type (leaves are [`Val`]s), archived inline.
#[derive(Archive, Serialize)]
pub struct Pair<T> {
    /// Left subtree.
    pub left: T,
    /// Right subtree.
    pub right: T,
}

/// A tree type built from, and read as, its leaves in order.
trait Tree<'a>: Sized + Archive {
    fn build(next: &mut dyn FnMut() -> &'a [u8]) -> Self;
    fn read(a: &Self::Archived) -> usize;
}

impl<'a> Tree<'a> for Val<'a> {
    fn build(next: &mut dyn FnMut() -> &'a [u8]) -> Self {
        Val(next())
    }

    fn read(a: &ArchivedVal<'a>) -> usize {
        black_box(a.0.get()).len()
    }
}

impl<'a, T: Tree<'a>> Tree<'a> for Pair<T> {
    fn build(next: &mut dyn FnMut() -> &'a [u8]) -> Self {
        let left = T::build(next);
        Pair {
            left,
            right: T::build(next),
        }
    }

    fn read(a: &ArchivedPair<T>) -> usize {
        T::read(&a.left) + T::read(&a.right)
    }
}

type T1<'a> = Pair<Val<'a>>;
type T2<'a> = Pair<T1<'a>>;
type T3<'a> = Pair<T2<'a>>;
type T4<'a> = Pair<T3<'a>>;
type T5<'a> = Pair<T4<'a>>;

/// rkyv in the matrix.
pub struct Rkyv;

macro_rules! with_tree {
    ($depth:expr, $t:ident => $body:expr) => {
        match $depth {
            1 => {
                type $t<'a> = T1<'a>;
                $body
            }
            2 => {
                type $t<'a> = T2<'a>;
                $body
            }
            3 => {
                type $t<'a> = T3<'a>;
                $body
            }
            4 => {
                type $t<'a> = T4<'a>;
                $body
            }
            _ => {
                type $t<'a> = T5<'a>;
                $body
            }
        }
    };
}

/// Archives `v` at the start of `tx`; returns its length.
fn write<'b, V>(v: &V, tx: &'b mut [u8]) -> usize
where
    V: for<'x> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'x>, Error>>,
{
    rkyv::api::high::to_bytes_in::<Buffer<'b>, Error>(v, Buffer::from(tx))
        .expect("message fits")
        .len()
}

impl Lib for Rkyv {
    fn name(&self) -> &'static str {
        "rkyv"
    }

    #[inline(never)]
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize {
        let value = |i: &u32| &store.vals[*i as usize][..];
        match store.shape {
            Shape::Tree { depth, .. } => {
                let mut it = idx.iter();
                let mut next = || it.next().map_or(&[][..], value);
                with_tree!(depth, T => write(&T::build(&mut next), tx))
            }
            _ => {
                let mut vals: [Val<'_>; MAX_VALUES] = std::array::from_fn(|_| Val(&[]));
                for (v, i) in vals.iter_mut().zip(idx) {
                    v.0 = value(i);
                }
                let msg = ListMsg {
                    id: 42,
                    vals: &vals[..idx.len()],
                };
                write(&msg, tx)
            }
        }
    }

    #[inline(never)]
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize {
        match shape {
            Shape::Tree { depth, .. } => with_tree!(depth, T => {
                let a = rkyv::access::<<T<'_> as Archive>::Archived, Error>(rx).expect("valid message");
                T::read(a)
            }),
            _ => {
                let m = rkyv::access::<ArchivedListMsg<'_>, Error>(rx).expect("valid message");
                let mut n = m.id.to_native() as usize;
                for v in m.vals.iter() {
                    n += black_box(v.0.get()).len();
                }
                n
            }
        }
    }

    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        self.serialize(store, idx, out)
    }
}
