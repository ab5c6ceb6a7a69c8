//! A stored value ([`Value`]): the pinned buffers the store keeps for one value, which the
//! store holds ([`crate::store`]) and charges for ([`crate::cost`]).

use cornflakes::RcBuf;

/// One stored value: one pinned buffer, or several pieces of a value larger than one buffer.
#[derive(Clone, Debug)]
pub enum Value {
    /// The whole value in one buffer.
    One(RcBuf),
    /// A value larger than one pinned buffer, in order.
    Pieces(Vec<RcBuf>),
}

impl Value {
    /// The buffers, in order.
    pub fn pieces(&self) -> &[RcBuf] {
        match self {
            Value::One(b) => std::slice::from_ref(b),
            Value::Pieces(p) => p,
        }
    }

    /// The single buffer of a value not stored in pieces.
    pub fn single(&self) -> Option<&RcBuf> {
        match self {
            Value::One(b) => Some(b),
            Value::Pieces(_) => None,
        }
    }

    /// Length of the value.
    pub fn len(&self) -> usize {
        self.pieces().iter().map(RcBuf::len).sum()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value's bytes, joined (a copy; for tests and checks).
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces()
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect()
    }
}
