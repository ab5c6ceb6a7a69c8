//! The object wire format (`docs/wire-format.md`): primitives used by generated code and by the
//! schema-driven codec of the `cornflakes` command.

mod decode;
mod encode;
mod error;
mod scalar;
mod view;

pub use decode::{Decoder, HeaderReader, LeafIter, MessageIter, MAX_BITMAP_WORDS, MAX_DEPTH};
pub use encode::{
    bit_is_set, set_bit, sparse_used_words, used_words, write_pair, Demote, Encoder, Presence,
};
pub use error::{BufferTooSmall, DecodeError, DecodeErrorKind};
pub use scalar::Scalar;
pub use view::{
    BytesListView, MessageListView, MessageView, ObjectView, PackedView, StrListView, ViewLayout,
};

/// Bytes of a slot for a scalar of `size` bytes, or a (len|count, offset) pair.
pub const PAIR: usize = 8;

/// Bytes of an object header with `words` bitmap words and `slot_bytes` of slots.
#[inline]
pub const fn header_len(words: usize, slot_bytes: usize) -> usize {
    4 + 4 * words + slot_bytes
}
