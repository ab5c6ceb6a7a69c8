//! Protocol Buffers through prost.
//!
//! Building a message copies each value into the message struct (protobuf's
//! owned representation), and encoding copies it again into the transmit
//! buffer: the classic two-copy path. The structs are kept in the codec and
//! reused, so steady-state encoding does not allocate.

use crate::generated::proto::echo::{ListMsg as List, Node, Single, Tree};
use crate::shape::{precheck, tree_depth, Codec, CodecError, EchoMsg, Shape, ShapeError};
use prost::Message;

/// prost codec with reusable message structs.
#[derive(Debug, Default)]
pub struct ProstCodec {
    single: Single,
    list: List,
    tree: Tree,
}

impl ProstCodec {
    /// A codec with empty scratch messages.
    pub fn new() -> Self {
        Self::default()
    }
}

fn set_bytes(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

/// Fills `node` as a full tree of `depth` with leaves from `vals`, reusing the
/// nodes already allocated.
fn fill_node<'v>(node: &mut Node, depth: u8, vals: &mut impl Iterator<Item = &'v [u8]>) {
    if depth == 0 {
        node.left = None;
        node.right = None;
        set_bytes(&mut node.val, vals.next().unwrap_or_default());
    } else {
        node.val.clear();
        fill_node(
            node.left.get_or_insert_with(Default::default),
            depth - 1,
            vals,
        );
        fill_node(
            node.right.get_or_insert_with(Default::default),
            depth - 1,
            vals,
        );
    }
}

/// Walks a decoded tree, checking it is full at `depth`, visiting leaves.
fn visit_node(
    node: &Node,
    level: u8,
    depth: u8,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<(), ShapeError> {
    match (&node.left, &node.right) {
        (None, None) if level == depth => {
            visit(&node.val);
            Ok(())
        }
        _ if level == depth => Err(ShapeError::TooDeep),
        (Some(l), Some(r)) => {
            if !node.val.is_empty() {
                return Err(ShapeError::InteriorValue { level });
            }
            visit_node(l, level + 1, depth, visit)?;
            visit_node(r, level + 1, depth, visit)
        }
        _ => Err(ShapeError::MissingChild { level }),
    }
}

fn encode_into<M: Message>(m: &M, out: &mut [u8]) -> Result<usize, CodecError> {
    let available = out.len();
    let mut buf = out;
    m.encode(&mut buf).map_err(|e| CodecError::BufferTooSmall {
        needed: e.required_capacity(),
        available,
    })?;
    Ok(available - buf.len())
}

impl ProstCodec {
    /// Decodes `input` into the scratch message of `shape` and checks it.
    fn load(&mut self, shape: Shape, input: &[u8]) -> Result<(), CodecError> {
        match shape {
            Shape::Single => {
                self.single.clear();
                self.single.merge(input)?;
            }
            Shape::List => {
                self.list.clear();
                self.list.merge(input)?;
            }
            Shape::Tree(_) => {
                let depth = tree_depth(shape)?;
                self.tree.clear();
                self.tree.merge(input)?;
                let root = self
                    .tree
                    .root
                    .as_ref()
                    .ok_or(ShapeError::MissingField("Tree.root"))?;
                visit_node(root, 0, depth, &mut |_| {})?;
            }
        }
        Ok(())
    }
}

impl Codec for ProstCodec {
    fn name(&self) -> &'static str {
        "protobuf"
    }

    fn encode(&mut self, msg: &EchoMsg<'_>, out: &mut [u8]) -> Result<usize, CodecError> {
        precheck(msg, out)?;
        match msg.shape {
            Shape::Single => {
                self.single.id = msg.id;
                set_bytes(&mut self.single.val, msg.vals[0]);
                encode_into(&self.single, out)
            }
            Shape::List => {
                let list = &mut self.list;
                list.id = msg.id;
                list.vals.resize_with(msg.vals.len(), Vec::new);
                for (dst, src) in list.vals.iter_mut().zip(msg.vals) {
                    set_bytes(dst, src);
                }
                encode_into(&self.list, out)
            }
            Shape::Tree(depth) => {
                self.tree.id = msg.id;
                let root = self.tree.root.get_or_insert_with(Default::default);
                fill_node(root, depth, &mut msg.vals.iter().copied());
                encode_into(&self.tree, out)
            }
        }
    }

    fn decode(
        &mut self,
        shape: Shape,
        input: &[u8],
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u32, CodecError> {
        if let Shape::Tree(_) = shape {
            // One walk both checks the structure and visits the leaves.
            let depth = tree_depth(shape)?;
            self.tree.clear();
            self.tree.merge(input)?;
            let root = self
                .tree
                .root
                .as_ref()
                .ok_or(ShapeError::MissingField("Tree.root"))?;
            visit_node(root, 0, depth, visit)?;
            return Ok(self.tree.id);
        }
        self.load(shape, input)?;
        match shape {
            Shape::List => {
                self.list.vals.iter().for_each(|v| visit(v));
                Ok(self.list.id)
            }
            _ => {
                visit(&self.single.val);
                Ok(self.single.id)
            }
        }
    }

    fn echo(&mut self, shape: Shape, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        self.load(shape, input)?;
        match shape {
            Shape::Single => encode_into(&self.single, out),
            Shape::List => encode_into(&self.list, out),
            Shape::Tree(_) => encode_into(&self.tree, out),
        }
    }
}
