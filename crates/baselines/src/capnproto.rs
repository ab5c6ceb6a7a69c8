//! Cap'n Proto through capnp.
//!
//! A message is built in a reusable, zeroed scratch segment (Cap'n Proto's
//! builder writes the wire format directly, so building copies each value
//! once), then the segment table and segment are copied into the transmit
//! buffer. Reading is zero-copy from the received bytes, bounded by reader
//! limits (traversal and nesting) so hostile input cannot make it loop.

use crate::generated::capnp_gen::echo_capnp::{list_msg as list, node, single, tree};
use crate::shape::{precheck, tree_depth, Codec, CodecError, EchoMsg, Shape, ShapeError};
use capnp::message::{Allocator, Builder, ReaderOptions, ScratchSpaceHeapAllocator};
use capnp::serialize;

/// Scratch segment size; larger messages spill into heap segments.
const SCRATCH_WORDS: usize = 2048;

/// Deepest pointer nesting accepted when reading (tree depth 5 needs 7).
const NESTING_LIMIT: i32 = 16;

/// capnp codec with a reusable first segment.
pub struct CapnpCodec {
    scratch: Vec<capnp::Word>,
}

impl std::fmt::Debug for CapnpCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapnpCodec")
            .field("scratch_words", &self.scratch.len())
            .finish()
    }
}

impl Default for CapnpCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl CapnpCodec {
    /// A codec with a 16 KiB scratch segment.
    pub fn new() -> Self {
        CapnpCodec {
            scratch: capnp::Word::allocate_zeroed_vec(SCRATCH_WORDS),
        }
    }

    /// A zeroed-on-use prefix of the scratch segment of about `words` words:
    /// only what the message will use is zeroed per message.
    fn allocator(&mut self, words: usize) -> ScratchSpaceHeapAllocator<'_> {
        let words = words.clamp(1, SCRATCH_WORDS);
        ScratchSpaceHeapAllocator::new(capnp::Word::words_to_bytes_mut(&mut self.scratch[..words]))
    }
}

/// Words a message of `shape` with these values occupies in one segment:
/// root pointer, root struct (1 data word + 1 pointer), then per shape the
/// list pointers or tree nodes (3 pointers each), then the padded values.
fn message_words(shape: Shape, vals: &[&[u8]]) -> usize {
    let data: usize = vals.iter().map(|v| v.len().div_ceil(8)).sum();
    let structure = match shape {
        Shape::Single => 0,
        Shape::List => vals.len(),
        Shape::Tree(_) => 3 * (2 * vals.len()).saturating_sub(1),
    };
    3 + structure + data
}

fn reader_options(input: &[u8]) -> ReaderOptions {
    let mut opts = ReaderOptions::new();
    // Decoding reads each word about once and echoing about twice; 4x leaves
    // room while still bounding work by the input size.
    opts.traversal_limit_in_words(Some(256 + 4 * input.len() / 8))
        .nesting_limit(NESTING_LIMIT);
    opts
}

fn list_len(n: usize) -> Result<u32, CodecError> {
    u32::try_from(n).map_err(|_| {
        CodecError::Shape(ShapeError::ValueCount {
            expected: u32::MAX as usize,
            found: n,
        })
    })
}

fn write_to<A: Allocator>(message: &Builder<A>, out: &mut [u8]) -> Result<usize, CodecError> {
    let needed = serialize::compute_serialized_size_in_words(message) * 8;
    if needed > out.len() {
        return Err(CodecError::BufferTooSmall {
            needed,
            available: out.len(),
        });
    }
    serialize::write_message(&mut out[..needed], message)?;
    Ok(needed)
}

fn fill_node<'v>(
    mut node: node::Builder<'_>,
    depth: u8,
    vals: &mut impl Iterator<Item = &'v [u8]>,
) {
    if depth == 0 {
        node.set_val(vals.next().unwrap_or_default());
    } else {
        fill_node(node.reborrow().init_left(), depth - 1, vals);
        fill_node(node.init_right(), depth - 1, vals);
    }
}

fn visit_node(
    node: node::Reader<'_>,
    level: u8,
    depth: u8,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<(), CodecError> {
    let (left, right) = (node.has_left(), node.has_right());
    if level == depth {
        if left || right {
            return Err(ShapeError::TooDeep.into());
        }
        visit(node.get_val()?);
        Ok(())
    } else if left && right {
        if !node.get_val()?.is_empty() {
            return Err(ShapeError::InteriorValue { level }.into());
        }
        visit_node(node.get_left()?, level + 1, depth, visit)?;
        visit_node(node.get_right()?, level + 1, depth, visit)
    } else {
        Err(ShapeError::MissingChild { level }.into())
    }
}

type Incoming<'a> = capnp::message::Reader<serialize::NoAllocSliceSegments<'a>>;

/// Opens `input` (segment table + segments) without copying.
fn open(input: &[u8]) -> Result<Incoming<'_>, CodecError> {
    let mut slice = input;
    Ok(serialize::read_message_from_flat_slice_no_alloc(
        &mut slice,
        reader_options(input),
    )?)
}

/// Checks `message` is a `shape`, visits the values and returns the id.
fn check(
    shape: Shape,
    message: &Incoming<'_>,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<u32, CodecError> {
    match shape {
        Shape::Single => {
            let root: single::Reader<'_> = message.get_root()?;
            visit(root.get_val()?);
            Ok(root.get_id())
        }
        Shape::List => {
            let root: list::Reader<'_> = message.get_root()?;
            for v in root.get_vals()?.iter() {
                visit(v?);
            }
            Ok(root.get_id())
        }
        Shape::Tree(_) => {
            let depth = tree_depth(shape)?;
            let root: tree::Reader<'_> = message.get_root()?;
            if !root.has_root() {
                return Err(ShapeError::MissingField("Tree.root").into());
            }
            visit_node(root.get_root()?, 0, depth, visit)?;
            Ok(root.get_id())
        }
    }
}

/// Words the echo's reply takes at most: the input's, plus slack.
fn echo_words(input: &[u8]) -> usize {
    input.len() / 8 + 16
}

/// Checks the structure first, then deep-copies the root into a new message, as an
/// application that keeps the data would.
fn copy_root<A: Allocator>(
    shape: Shape,
    incoming: &Incoming<'_>,
    message: &mut Builder<A>,
) -> Result<(), CodecError> {
    match shape {
        Shape::Single => message.set_root(incoming.get_root::<single::Reader<'_>>()?)?,
        Shape::List => message.set_root(incoming.get_root::<list::Reader<'_>>()?)?,
        Shape::Tree(_) => message.set_root(incoming.get_root::<tree::Reader<'_>>()?)?,
    }
    Ok(())
}

/// The echo server's step for Cap'n Proto on its own network path: deserialize `input` as
/// `shape` and reserialize it in segments of `mem`, returned as the scatter-gather list to
/// send (segment table, then one entry per segment; see [`crate::segments`]). The bytes
/// equal [`Codec::echo`]'s. The outer error is the input's, the inner one the memory's.
/// A server uses [`capnp_echo_sga_into`] with a reused list (this one allocates the list).
pub fn capnp_echo_sga(
    shape: Shape,
    input: &[u8],
    mem: &cornflakes::PinnedMemory,
) -> Result<Result<Vec<cornflakes::RcBuf>, cornflakes::mem::AllocError>, CodecError> {
    let mut sga = Vec::new();
    Ok(capnp_echo_sga_into(shape, input, mem, &mut sga)?.map(|()| sga))
}

/// [`capnp_echo_sga`] into `sga` (cleared first), a list the server reuses: per reply only
/// the one allocation capnp's `Builder` forces (its segment table, a `Vec` inside the
/// builder that its API gives no way to keep between messages).
pub fn capnp_echo_sga_into(
    shape: Shape,
    input: &[u8],
    mem: &cornflakes::PinnedMemory,
    sga: &mut Vec<cornflakes::RcBuf>,
) -> Result<Result<(), cornflakes::mem::AllocError>, CodecError> {
    sga.clear();
    let incoming = open(input)?;
    check(shape, &incoming, &mut |_| {})?;
    crate::segments::pinned_sga_into(
        mem,
        echo_words(input),
        |m| copy_root(shape, &incoming, m),
        sga,
    )
}

impl Codec for CapnpCodec {
    fn name(&self) -> &'static str {
        "capnp"
    }

    fn encode(&mut self, msg: &EchoMsg<'_>, out: &mut [u8]) -> Result<usize, CodecError> {
        precheck(msg, out)?;
        let n = list_len(msg.vals.len())?;
        let mut alloc = self.allocator(message_words(msg.shape, msg.vals));
        let mut message = Builder::new(&mut alloc);
        match msg.shape {
            Shape::Single => {
                let mut root = message.init_root::<single::Builder<'_>>();
                root.set_id(msg.id);
                root.set_val(msg.vals[0]);
            }
            Shape::List => {
                let mut root = message.init_root::<list::Builder<'_>>();
                root.set_id(msg.id);
                let mut vals = root.init_vals(n);
                for (i, v) in (0..n).zip(msg.vals) {
                    vals.set(i, v);
                }
            }
            Shape::Tree(depth) => {
                let mut root = message.init_root::<tree::Builder<'_>>();
                root.set_id(msg.id);
                fill_node(root.init_root(), depth, &mut msg.vals.iter().copied());
            }
        }
        write_to(&message, out)
    }

    fn decode(
        &mut self,
        shape: Shape,
        input: &[u8],
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u32, CodecError> {
        check(shape, &open(input)?, visit)
    }

    fn echo(&mut self, shape: Shape, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError> {
        let incoming = open(input)?;
        check(shape, &incoming, &mut |_| {})?;
        let mut alloc = self.allocator(echo_words(input));
        let mut message = Builder::new(&mut alloc);
        copy_root(shape, &incoming, &mut message)?;
        write_to(&message, out)
    }
}
