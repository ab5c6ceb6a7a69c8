//! prost used directly (`prost-direct`): what a prost user writes by hand, nothing between.
//!
//! The message structs are kept and reused; building one is `Vec::clear` +
//! `extend_from_slice` per value, and serializing is `Message::encode` into the transmit
//! buffer after the 42-byte packet header. Deserializing is `merge` into the reused struct,
//! then every field is read directly (no callback, no shape check). The `prost` column goes
//! through `baselines::Codec` instead (a precheck of the message, a shape dispatch and, when
//! decoding, one indirect call per value).

use std::hint::black_box;

use baselines::generated::proto::echo::{ListMsg, Node, Tree};
use cornflakes::RcBuf;
use prost::Message;

use crate::{Lib, Shape, Store, PACKET_HEADER};

/// prost 0.14 called directly, with reused message structs.
#[derive(Default)]
pub struct ProstDirect {
    list: ListMsg,
    tree: Tree,
}

/// Refills `node` as a full tree of `depth` with leaves from `vals`, reusing its nodes.
fn fill_from(node: &mut Node, depth: u8, vals: &mut std::slice::Iter<'_, &[u8]>) {
    if depth == 0 {
        node.val.clear();
        node.val
            .extend_from_slice(vals.next().copied().unwrap_or_default());
    } else {
        fill_from(
            node.left.get_or_insert_with(Default::default),
            depth - 1,
            vals,
        );
        fill_from(
            node.right.get_or_insert_with(Default::default),
            depth - 1,
            vals,
        );
    }
}

/// Sums the leaves' lengths (each read through `black_box`).
fn read(node: &Node) -> usize {
    match (&node.left, &node.right) {
        (Some(l), Some(r)) => read(l) + read(r),
        _ => black_box(&node.val[..]).len(),
    }
}

impl ProstDirect {
    /// A fresh instance (empty reused structs).
    pub fn new() -> ProstDirect {
        ProstDirect::default()
    }

    /// Builds message `idx` into the reused structs and encodes it at the start of `out`.
    #[inline(always)]
    fn build_and_encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        let available = out.len();
        let mut buf = out;
        match store.shape {
            Shape::Tree { depth, .. } => {
                let mut vals: [&[u8]; crate::MAX_VALUES] = [&[]; crate::MAX_VALUES];
                for (v, &i) in vals.iter_mut().zip(idx) {
                    *v = &store.vals[i as usize][..];
                }
                self.tree.id = 42;
                let root = self.tree.root.get_or_insert_with(Default::default);
                fill_from(root, depth, &mut vals[..idx.len()].iter());
                self.tree.encode(&mut buf).expect("message fits");
            }
            _ => {
                let list = &mut self.list;
                list.id = 42;
                list.vals.resize_with(idx.len(), Vec::new);
                for (dst, &i) in list.vals.iter_mut().zip(idx) {
                    dst.clear();
                    dst.extend_from_slice(&store.vals[i as usize]);
                }
                list.encode(&mut buf).expect("message fits");
            }
        }
        available - buf.len()
    }
}

impl Lib for ProstDirect {
    fn name(&self) -> &'static str {
        "prost-direct"
    }

    #[inline(never)]
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize {
        PACKET_HEADER + self.build_and_encode(store, idx, &mut tx[PACKET_HEADER..])
    }

    #[inline(never)]
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize {
        match shape {
            Shape::Tree { .. } => {
                self.tree.clear();
                self.tree.merge(&rx[..]).expect("valid message");
                self.tree.root.as_ref().map_or(0, read) + self.tree.id as usize
            }
            _ => {
                self.list.clear();
                self.list.merge(&rx[..]).expect("valid message");
                let mut n = self.list.id as usize;
                for v in &self.list.vals {
                    n += black_box(&v[..]).len();
                }
                n
            }
        }
    }

    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        self.build_and_encode(store, idx, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_filled_twice_reuses_its_nodes_and_reads_its_leaves() {
        let mut root = Node::default();
        let leaves: [&[u8]; 4] = [b"a", b"bb", b"ccc", b"dddd"];
        for _ in 0..2 {
            fill_from(&mut root, 2, &mut leaves.iter());
            assert_eq!(read(&root), 10);
        }
    }
}
