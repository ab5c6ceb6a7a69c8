//! Decode errors: what was wrong, at which byte, in which field.

use std::fmt;

/// A buffer too small for an object (defined with the datapath interface, whose sends report it).
pub use cornflakes_datapath::BufferTooSmall;

/// What was wrong with an encoded object.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// A header, slot or pair array runs past the end of the object.
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes left in the object from its start.
        available: usize,
    },
    /// An offset + length (or count × element size) points outside the object.
    OutOfBounds {
        /// What the offset points at.
        what: &'static str,
        /// The offset read from the wire.
        offset: u64,
        /// The length it covers.
        len: u64,
        /// Length of the whole object.
        object_len: usize,
    },
    /// The bitmap word count `W` is above the largest field number protobuf allows.
    TooManyBitmapWords {
        /// `W` as read.
        words: u32,
        /// The largest accepted.
        max: u32,
    },
    /// Nested objects go deeper than the decoder allows.
    TooDeep {
        /// The deepest nesting followed.
        max: u32,
    },
    /// A bool slot or packed bool holds something other than 0 or 1.
    InvalidBool {
        /// The byte found.
        value: u8,
    },
    /// A field this reader does not know is present below its highest known field number.
    UnknownField {
        /// Its field number.
        field: u32,
    },
    /// A string is not UTF-8 (found when a view reads it as `&str`).
    InvalidUtf8 {
        /// Bytes of the string that are valid UTF-8 before the first invalid one.
        valid_up_to: usize,
    },
    /// A nested-message slot's first word must be 0.
    NestedSlotLength {
        /// The word found.
        value: u32,
    },
    /// Headers and pair arrays reference more bytes than the object holds (shared or cyclic
    /// offsets used to amplify decoding work).
    BudgetExceeded {
        /// Length of the whole object.
        object_len: usize,
    },
    /// Bytes follow the object that none of its fields references (the default
    /// `deserialize*` calls refuse them; `deserialize_prefix` reports the length instead).
    TrailingBytes {
        /// Bytes the object uses (the furthest byte any field references).
        consumed: usize,
        /// Length of the input.
        len: usize,
    },
    /// The arena already holds more than the limit set with `Arena::set_limit`: reset it
    /// between requests (`Arena::scope`) or raise the limit.
    ArenaLimit {
        /// Bytes the arena holds.
        allocated: usize,
        /// Its limit.
        limit: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
    kind: DecodeErrorKind,
    offset: usize,
    path: Vec<&'static str>,
}

/// A malformed object. Boxed so `Result<T, DecodeError>` stays small.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct DecodeError(Box<Inner>);

impl DecodeError {
    /// An error of `kind` found at byte `offset` of the object.
    #[cold]
    pub fn new(kind: DecodeErrorKind, offset: usize) -> DecodeError {
        DecodeError(Box::new(Inner {
            kind,
            offset,
            path: Vec::new(),
        }))
    }

    /// Adds the field being decoded (`"Message.field"`), innermost first.
    #[inline(always)]
    pub fn within(self, field: &'static str) -> DecodeError {
        push_field(self, field)
    }

    /// What was wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.0.kind
    }

    /// Byte offset (from the object base) where the problem was found.
    pub fn offset(&self) -> usize {
        self.0.offset
    }

    /// Fields from the outermost to the innermost, e.g. `["Outer.list", "Inner.b"]`.
    pub fn path(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.path.iter().rev().copied()
    }
}

/// [`DecodeError::within`]'s work, out of line and `extern "C"`: a call that cannot unwind, so
/// a generated decode calling it needs no landing pad that would drop the object being built
/// through its address (see the decoder's error builders in `wire/decode.rs`). Called from
/// Rust only.
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn push_field(mut e: DecodeError, field: &'static str) -> DecodeError {
    e.0.path.push(field);
    e
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeErrorKind::Truncated { what, need, available } => {
                write!(f, "{what} needs {need} bytes but only {available} remain")
            }
            DecodeErrorKind::OutOfBounds { what, offset, len, object_len } => write!(
                f,
                "{what} at offset {offset} with length {len} ends past the object ({object_len} bytes)"
            ),
            DecodeErrorKind::TooManyBitmapWords { words, max } => {
                write!(f, "bitmap of {words} words exceeds the maximum of {max}")
            }
            DecodeErrorKind::TooDeep { max } => write!(f, "objects nested deeper than {max} levels"),
            DecodeErrorKind::InvalidBool { value } => write!(f, "bool byte is {value}, not 0 or 1"),
            DecodeErrorKind::UnknownField { field } => write!(
                f,
                "unknown field {field} is present below the highest known field number"
            ),
            DecodeErrorKind::InvalidUtf8 { valid_up_to } => write!(
                f,
                "string is not UTF-8 (the first {valid_up_to} bytes are)"
            ),
            DecodeErrorKind::NestedSlotLength { value } => {
                write!(f, "nested message slot starts with {value}, expected 0")
            }
            DecodeErrorKind::BudgetExceeded { object_len } => write!(
                f,
                "headers reference more bytes than the {object_len}-byte object holds"
            ),
            DecodeErrorKind::TrailingBytes { consumed, len } => write!(
                f,
                "{} trailing bytes: the object ends at byte {consumed} of {len} (decode with `deserialize_prefix` to accept bytes after it)",
                len - consumed
            ),
            DecodeErrorKind::ArenaLimit { allocated, limit } => write!(
                f,
                "the arena holds {allocated} bytes, above its limit of {limit}: reset it between requests (`Arena::scope`) or raise `Arena::set_limit`"
            ),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed object at byte {}", self.0.offset)?;
        let mut path = self.path().peekable();
        if path.peek().is_some() {
            f.write_str(" in ")?;
            for (i, p) in path.enumerate() {
                if i > 0 {
                    f.write_str(" > ")?;
                }
                f.write_str(p)?;
            }
        }
        write!(f, ": {}", self.0.kind)
    }
}

impl std::error::Error for DecodeError {}
