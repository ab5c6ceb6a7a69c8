//! FlatBuffers through the `flatbuffers` crate (25.12.19, flatc 25.12.19 code).
//!
//! The builder writes back to front into its own buffer (one copy of each
//! value); the finished bytes are then copied into the transmit buffer.
//! Received bytes are checked by the FlatBuffers verifier before any field
//! is read, so malformed input is an error, never a panic.

use crate::generated::fb::echo_fb::{
    Bytes, BytesArgs, ListMsg as List, ListMsgArgs as ListArgs, Node, NodeArgs, Single, SingleArgs,
    Tree, TreeArgs,
};
use crate::shape::{precheck, tree_depth, Codec, CodecError, EchoMsg, Shape, ShapeError};
use flatbuffers::{FlatBufferBuilder, VerifierOptions, WIPOffset};

/// Deepest table nesting the verifier accepts (tree depth 5 needs 7).
const MAX_DEPTH: usize = 16;

/// FlatBuffers codec with a reused builder.
pub struct FlatbuffersCodec {
    fbb: FlatBufferBuilder<'static>,
    /// Offsets of the list elements, reused between messages.
    offsets: Vec<u32>,
    /// A tree's leaves as read in place, reused between messages ([`crate::kv::recycle`]).
    leaves: Vec<&'static [u8]>,
    opts: VerifierOptions,
}

impl std::fmt::Debug for FlatbuffersCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatbuffersCodec").finish_non_exhaustive()
    }
}

impl Default for FlatbuffersCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl FlatbuffersCodec {
    /// A codec with a 16 KiB builder.
    pub fn new() -> Self {
        FlatbuffersCodec {
            fbb: FlatBufferBuilder::with_capacity(16 * 1024),
            offsets: Vec::new(),
            leaves: Vec::new(),
            opts: VerifierOptions {
                max_depth: MAX_DEPTH,
                ..VerifierOptions::default()
            },
        }
    }

    /// Copies the finished buffer into `out`.
    fn copy_out(&self, out: &mut [u8]) -> Result<usize, CodecError> {
        let data = self.fbb.finished_data();
        let available = out.len();
        let dst = out
            .get_mut(..data.len())
            .ok_or(CodecError::BufferTooSmall {
                needed: data.len(),
                available,
            })?;
        dst.copy_from_slice(data);
        Ok(data.len())
    }

    fn build_single(&mut self, id: u32, val: &[u8]) {
        self.fbb.reset();
        let val = Some(self.fbb.create_vector(val));
        let root = Single::create(&mut self.fbb, &SingleArgs { id, val });
        self.fbb.finish_minimal(root);
    }

    fn build_list<'v>(&mut self, id: u32, vals: impl Iterator<Item = &'v [u8]>) {
        let fbb = &mut self.fbb;
        fbb.reset();
        self.offsets.clear();
        for v in vals {
            let data = Some(fbb.create_vector(v));
            self.offsets
                .push(Bytes::create(fbb, &BytesArgs { data }).value());
        }
        let vals =
            Some(fbb.create_vector_from_iter(
                self.offsets.iter().map(|&o| WIPOffset::<Bytes<'_>>::new(o)),
            ));
        let root = List::create(fbb, &ListArgs { id, vals });
        fbb.finish_minimal(root);
    }
}

fn build_node<'v>(
    fbb: &mut FlatBufferBuilder<'static>,
    depth: u8,
    vals: &mut impl Iterator<Item = &'v [u8]>,
) -> WIPOffset<Node<'static>> {
    if depth == 0 {
        let val = Some(fbb.create_vector(vals.next().unwrap_or_default()));
        Node::create(
            fbb,
            &NodeArgs {
                val,
                ..NodeArgs::default()
            },
        )
    } else {
        let left = Some(build_node(fbb, depth - 1, vals));
        let right = Some(build_node(fbb, depth - 1, vals));
        Node::create(
            fbb,
            &NodeArgs {
                left,
                right,
                val: None,
            },
        )
    }
}

fn build_tree<'v>(
    fbb: &mut FlatBufferBuilder<'static>,
    id: u32,
    depth: u8,
    vals: &mut impl Iterator<Item = &'v [u8]>,
) {
    fbb.reset();
    let root = Some(build_node(fbb, depth, vals));
    let tree = Tree::create(fbb, &TreeArgs { id, root });
    fbb.finish_minimal(tree);
}

fn visit_node<'a>(
    node: Node<'a>,
    level: u8,
    depth: u8,
    visit: &mut dyn FnMut(&'a [u8]),
) -> Result<(), ShapeError> {
    match (node.left(), node.right()) {
        (None, None) if level == depth => {
            visit(node.val().map_or(&[][..], |v| v.bytes()));
            Ok(())
        }
        _ if level == depth => Err(ShapeError::TooDeep),
        (Some(l), Some(r)) => {
            if !node.val().map_or(&[][..], |v| v.bytes()).is_empty() {
                return Err(ShapeError::InteriorValue { level });
            }
            visit_node(l, level + 1, depth, visit)?;
            visit_node(r, level + 1, depth, visit)
        }
        _ => Err(ShapeError::MissingChild { level }),
    }
}

/// A verified root table of one of the shapes.
enum Root<'a> {
    Single(Single<'a>),
    List(List<'a>),
    Tree(Tree<'a>, Node<'a>, u8),
}

impl FlatbuffersCodec {
    /// Verifies `input` as `shape` and checks the tree structure.
    fn open<'a>(&self, shape: Shape, input: &'a [u8]) -> Result<Root<'a>, CodecError> {
        Ok(match shape {
            Shape::Single => Root::Single(flatbuffers::root_with_opts::<Single<'a>>(
                &self.opts, input,
            )?),
            Shape::List => Root::List(flatbuffers::root_with_opts::<List<'a>>(&self.opts, input)?),
            Shape::Tree(_) => {
                let depth = tree_depth(shape)?;
                let tree = flatbuffers::root_with_opts::<Tree<'a>>(&self.opts, input)?;
                let node = tree.root().ok_or(ShapeError::MissingField("Tree.root"))?;
                visit_node(node, 0, depth, &mut |_| {})?;
                Root::Tree(tree, node, depth)
            }
        })
    }
}

impl Codec for FlatbuffersCodec {
    fn name(&self) -> &'static str {
        "flatbuffers"
    }

    fn encode(&mut self, msg: &EchoMsg<'_>, out: &mut [u8]) -> Result<usize, CodecError> {
        precheck(msg, out)?;
        match msg.shape {
            Shape::Single => self.build_single(msg.id, msg.vals[0]),
            Shape::List => self.build_list(msg.id, msg.vals.iter().copied()),
            Shape::Tree(depth) => {
                build_tree(&mut self.fbb, msg.id, depth, &mut msg.vals.iter().copied())
            }
        }
        self.copy_out(out)
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
            let tree = flatbuffers::root_with_opts::<Tree<'_>>(&self.opts, input)?;
            let node = tree.root().ok_or(ShapeError::MissingField("Tree.root"))?;
            visit_node(node, 0, depth, &mut |v| visit(v))?;
            return Ok(tree.id());
        }
        match self.open(shape, input)? {
            Root::Single(s) => {
                visit(s.val().map_or(&[][..], |v| v.bytes()));
                Ok(s.id())
            }
            Root::List(l) => {
                for b in l.vals().iter().flatten() {
                    visit(b.data().map_or(&[][..], |v| v.bytes()));
                }
                Ok(l.id())
            }
            Root::Tree(t, node, depth) => {
                visit_node(node, 0, depth, &mut |v| visit(v))?;
                Ok(t.id())
            }
        }
    }

    fn echo(&mut self, shape: Shape, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        match self.open(shape, input)? {
            Root::Single(s) => self.build_single(s.id(), s.val().map_or(&[][..], |v| v.bytes())),
            Root::List(l) => self.build_list(
                l.id(),
                l.vals()
                    .iter()
                    .flatten()
                    .map(|b| b.data().map_or(&[][..], |v| v.bytes())),
            ),
            Root::Tree(t, node, depth) => {
                let mut leaves = crate::kv::recycle(std::mem::take(&mut self.leaves));
                let visited = visit_node(node, 0, depth, &mut |v| leaves.push(v));
                if visited.is_ok() {
                    build_tree(&mut self.fbb, t.id(), depth, &mut leaves.iter().copied());
                }
                self.leaves = crate::kv::recycle(leaves);
                visited?;
            }
        }
        self.copy_out(out)
    }
}
