//! Message shapes, the [`Codec`] interface and its errors.

use std::fmt;
use std::str::FromStr;

/// Deepest tree shape supported (2^5 = 32 leaves).
pub const MAX_TREE_DEPTH: u8 = 5;

/// The echo message shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// `{ uint32 id; bytes val; }`: exactly one value.
    Single,
    /// `{ uint32 id; repeated bytes vals; }`: any number of values.
    List,
    /// `{ uint32 id; Node root; }`, a full binary tree of this depth
    /// (1..=[`MAX_TREE_DEPTH`]) whose `2^depth` leaves hold the values, left
    /// to right. Interior nodes have both children and an empty value.
    Tree(u8),
}

impl Shape {
    /// Number of values the shape holds, `None` for a list (any number).
    pub fn value_count(self) -> Option<usize> {
        match self {
            Shape::Single => Some(1),
            Shape::List => None,
            Shape::Tree(d) => Some(1usize << d.min(MAX_TREE_DEPTH)),
        }
    }

    /// Checks that the shape is valid and holds `values` values.
    pub fn check_values(self, values: usize) -> Result<(), ShapeError> {
        if let Shape::Tree(d) = self {
            if !(1..=MAX_TREE_DEPTH).contains(&d) {
                return Err(ShapeError::BadTreeDepth(d));
            }
        }
        match self.value_count() {
            Some(expected) if expected != values => Err(ShapeError::ValueCount {
                expected,
                found: values,
            }),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Single => write!(f, "single"),
            Shape::List => write!(f, "list"),
            Shape::Tree(d) => write!(f, "tree{d}"),
        }
    }
}

/// A shape or library name that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    input: String,
    expected: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {:?}; expected {}", self.input, self.expected)
    }
}

impl std::error::Error for ParseError {}

impl FromStr for Shape {
    type Err = ParseError;

    /// Parses `single`, `list` or `tree1`..`tree5`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let err = || ParseError {
            input: s.to_owned(),
            expected: "single, list or tree1..tree5",
        };
        match s {
            "single" => Ok(Shape::Single),
            "list" => Ok(Shape::List),
            _ => {
                let d: u8 = s
                    .strip_prefix("tree")
                    .ok_or_else(err)?
                    .parse()
                    .map_err(|_| err())?;
                let shape = Shape::Tree(d);
                shape
                    .check_values(1 << d.min(MAX_TREE_DEPTH))
                    .map_err(|_| err())?;
                Ok(shape)
            }
        }
    }
}

/// A message to serialize: an id and the values, arranged as `shape` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoMsg<'a> {
    /// Message id (e.g. the request id, truncated to 32 bits).
    pub id: u32,
    /// How the values are arranged.
    pub shape: Shape,
    /// The values: 1 for `Single`, K for `List`, `2^depth` leaves for `Tree`.
    pub vals: &'a [&'a [u8]],
}

/// A message does not have the expected shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeError {
    /// Wrong number of values for the shape.
    ValueCount {
        /// Values the shape holds.
        expected: usize,
        /// Values given or found.
        found: usize,
    },
    /// Tree depth outside 1..=[`MAX_TREE_DEPTH`].
    BadTreeDepth(u8),
    /// A tree node above the leaf level lacks a child.
    MissingChild {
        /// Depth of the node (root = 0).
        level: u8,
    },
    /// A node at the leaf level has a child.
    TooDeep,
    /// An interior tree node carries a value.
    InteriorValue {
        /// Depth of the node (root = 0).
        level: u8,
    },
    /// A required nested message (e.g. the tree root) is absent.
    MissingField(&'static str),
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::ValueCount { expected, found } => {
                write!(f, "expected {expected} values, found {found}")
            }
            ShapeError::BadTreeDepth(d) => {
                write!(f, "tree depth {d} is outside 1..={MAX_TREE_DEPTH}")
            }
            ShapeError::MissingChild { level } => {
                write!(f, "tree node at level {level} is missing a child")
            }
            ShapeError::TooDeep => write!(f, "tree is deeper than its shape"),
            ShapeError::InteriorValue { level } => {
                write!(f, "interior tree node at level {level} has a value")
            }
            ShapeError::MissingField(name) => write!(f, "missing field {name}"),
        }
    }
}

impl std::error::Error for ShapeError {}

/// Why encoding or decoding failed.
#[derive(Debug)]
pub enum CodecError {
    /// The transmit buffer cannot hold the serialized message.
    BufferTooSmall {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
    /// The message (to encode, or as decoded) does not match the shape.
    Shape(ShapeError),
    /// protobuf decoding failed.
    Protobuf(prost::DecodeError),
    /// Cap'n Proto reading or building failed.
    Capnp(capnp::Error),
    /// The FlatBuffers verifier rejected the input.
    Flatbuffers(flatbuffers::InvalidFlatbuffer),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::BufferTooSmall { needed, available } => write!(
                f,
                "transmit buffer too small: need {needed} bytes, have {available}"
            ),
            CodecError::Shape(e) => write!(f, "wrong shape: {e}"),
            CodecError::Protobuf(e) => write!(f, "protobuf: {e}"),
            CodecError::Capnp(e) => write!(f, "capnp: {e}"),
            CodecError::Flatbuffers(e) => write!(f, "flatbuffers: {e}"),
        }
    }
}

impl std::error::Error for CodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CodecError::BufferTooSmall { .. } => None,
            CodecError::Shape(e) => Some(e),
            CodecError::Protobuf(e) => Some(e),
            CodecError::Capnp(e) => Some(e),
            CodecError::Flatbuffers(e) => Some(e),
        }
    }
}

impl From<ShapeError> for CodecError {
    fn from(e: ShapeError) -> Self {
        CodecError::Shape(e)
    }
}

impl From<prost::DecodeError> for CodecError {
    fn from(e: prost::DecodeError) -> Self {
        CodecError::Protobuf(e)
    }
}

impl From<capnp::Error> for CodecError {
    fn from(e: capnp::Error) -> Self {
        CodecError::Capnp(e)
    }
}

impl From<flatbuffers::InvalidFlatbuffer> for CodecError {
    fn from(e: flatbuffers::InvalidFlatbuffer) -> Self {
        CodecError::Flatbuffers(e)
    }
}

/// One serialization library, able to handle every [`Shape`].
///
/// A codec keeps reusable scratch state (builders, decoded structs), so use
/// one per thread. No method panics on malformed input.
///
/// ```
/// use baselines::{EchoMsg, Library, Shape};
///
/// let mut codec = Library::Capnp.codec();
/// let vals: [&[u8]; 2] = [b"hello", b"world"];
/// let msg = EchoMsg { id: 7, shape: Shape::List, vals: &vals };
/// let mut tx = vec![0u8; 9000];
/// let n = codec.encode(&msg, &mut tx).unwrap();
/// let mut got = Vec::new();
/// let id = codec.decode(Shape::List, &tx[..n], &mut |v| got.push(v.to_vec())).unwrap();
/// assert_eq!((id, got), (7, vec![b"hello".to_vec(), b"world".to_vec()]));
///
/// // The echo server's work: deserialize, then reserialize into a TX buffer.
/// let mut echoed = vec![0u8; 9000];
/// let m = codec.echo(Shape::List, &tx[..n], &mut echoed).unwrap();
/// assert!(m > 0);
/// ```
pub trait Codec {
    /// The library's name (`"protobuf"`, `"capnp"`, `"flatbuffers"`).
    fn name(&self) -> &'static str;

    /// Serializes `msg` into the start of `out` and returns its length.
    /// Stale bytes in `out` do not matter.
    fn encode(&mut self, msg: &EchoMsg<'_>, out: &mut [u8]) -> Result<usize, CodecError>;

    /// Deserializes a message of `shape`, checks its structure, calls `visit`
    /// with each value in order and returns the id.
    fn decode(
        &mut self,
        shape: Shape,
        input: &[u8],
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u32, CodecError>;

    /// The echo server's step: deserializes and checks `input`, then
    /// serializes the same message into `out`; returns the length written.
    fn echo(&mut self, shape: Shape, input: &[u8], out: &mut [u8]) -> Result<usize, CodecError>;
}

/// The serialization libraries of the paper's evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Library {
    /// Protocol Buffers through `prost`.
    Protobuf,
    /// Cap'n Proto through `capnp`.
    Capnp,
    /// FlatBuffers through `flatbuffers`.
    Flatbuffers,
}

impl Library {
    /// Every library, in the paper's order.
    pub const ALL: [Library; 3] = [Library::Protobuf, Library::Flatbuffers, Library::Capnp];

    /// A fresh codec for this library.
    pub fn codec(self) -> Box<dyn Codec + Send> {
        match self {
            Library::Protobuf => Box::new(crate::ProstCodec::new()),
            Library::Capnp => Box::new(crate::CapnpCodec::new()),
            Library::Flatbuffers => Box::new(crate::FlatbuffersCodec::new()),
        }
    }

    /// The library's name, as accepted by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            Library::Protobuf => "protobuf",
            Library::Capnp => "capnp",
            Library::Flatbuffers => "flatbuffers",
        }
    }
}

impl fmt::Display for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Library {
    type Err = ParseError;

    /// Parses `protobuf` (or `prost`), `capnp` or `flatbuffers`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "protobuf" | "prost" => Ok(Library::Protobuf),
            "capnp" => Ok(Library::Capnp),
            "flatbuffers" => Ok(Library::Flatbuffers),
            _ => Err(ParseError {
                input: s.to_owned(),
                expected: "protobuf, capnp or flatbuffers",
            }),
        }
    }
}

/// Checks `msg` before encoding and fails early if `out` is obviously too
/// small (smaller than the raw values).
pub(crate) fn precheck(msg: &EchoMsg<'_>, out: &[u8]) -> Result<(), CodecError> {
    msg.shape.check_values(msg.vals.len())?;
    let raw = msg.vals.iter().map(|v| v.len()).sum::<usize>();
    if raw > out.len() {
        return Err(CodecError::BufferTooSmall {
            needed: raw,
            available: out.len(),
        });
    }
    Ok(())
}

/// Depth of a tree shape, with the shape validated.
pub(crate) fn tree_depth(shape: Shape) -> Result<u8, ShapeError> {
    match shape {
        Shape::Tree(d) if (1..=MAX_TREE_DEPTH).contains(&d) => Ok(d),
        Shape::Tree(d) => Err(ShapeError::BadTreeDepth(d)),
        _ => Err(ShapeError::BadTreeDepth(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_print_and_count() {
        for s in ["single", "list", "tree1", "tree5"] {
            assert_eq!(s.parse::<Shape>().unwrap().to_string(), s);
        }
        for bad in ["tree0", "tree6", "tree", "treex", "lists", ""] {
            assert!(bad.parse::<Shape>().is_err(), "{bad}");
        }
        assert_eq!(Shape::Tree(3).value_count(), Some(8));
        assert_eq!(Shape::List.value_count(), None);
        assert!(Shape::List.check_values(0).is_ok());
        assert_eq!(
            Shape::Single.check_values(2),
            Err(ShapeError::ValueCount {
                expected: 1,
                found: 2
            })
        );
        assert_eq!(
            Shape::Tree(9).check_values(512),
            Err(ShapeError::BadTreeDepth(9))
        );
    }

    #[test]
    fn libraries_parse_and_print() {
        for lib in Library::ALL {
            assert_eq!(lib.name().parse::<Library>().unwrap(), lib);
        }
        assert_eq!("prost".parse::<Library>().unwrap(), Library::Protobuf);
        let e = "json".parse::<Library>().unwrap_err();
        assert!(e.to_string().contains("json"));
    }
}
