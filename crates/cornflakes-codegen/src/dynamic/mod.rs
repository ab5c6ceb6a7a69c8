//! A schema-driven message model: any message of a [`Schema`] built, encoded and decoded at run
//! time, like `protoc --encode/--decode`. It implements the runtime's [`CornflakesObj`] and keeps
//! values in the runtime's lists and hybrid pointers, so it lays out bytes with the same
//! [`Encoder`] and reads them with the same [`HeaderReader`] as generated code.
//!
//! JSON conversion (`from_json`, `to_json`) needs the crate's `json` feature (the `cornflakes`
//! command, crate `cornflakes-cli`, turns it on).
//!
//! ```
//! # #[cfg(not(feature = "json"))] fn main() {}
//! # #[cfg(feature = "json")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cornflakes::{Arena, CornflakesObj};
//! use cornflakes_codegen::{dynamic::DynMessage, Schema};
//! let dir = std::env::temp_dir().join("cf-dyn-doc");
//! std::fs::create_dir_all(&dir)?;
//! std::fs::write(dir.join("m.proto"), "syntax = \"proto3\"; message M { uint32 id = 1; }")?;
//! let schema = Schema::load(&[dir.join("m.proto")], &[&dir])?;
//! let arena = Arena::new();
//! let json = serde_json::json!({"id": 7});
//! let m = DynMessage::from_json(&schema, schema.message("M").unwrap(), &json, &arena)?;
//! let bytes = m.serialize_to_vec();
//! assert_eq!(bytes, [1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0]);
//! let back = DynMessage::decode(&schema, schema.message("M").unwrap(), &bytes, &arena)?;
//! assert_eq!(back.to_json()?, "{\n  \"id\": 7\n}");
//! # Ok(()) }
//! ```

#[cfg(feature = "json")]
mod json;

use std::fmt;

use cornflakes::wire::{Decoder, Demote, Encoder, HeaderReader, PAIR};
use cornflakes::{
    Arena, CFPtr, CornflakesObj, DecodeError, LeafList, MessageList, PackedList, PinnedRef, Sizes,
};

use crate::schema::{FieldDef, FieldKind, MessageDef, MsgId, ScalarKind, Schema};

#[cfg(feature = "json")]
pub use json::{JsonError, Names};

/// A packed repeated scalar (enums as `I32`).
pub enum Packed<'a> {
    Bool(PackedList<'a, bool>),
    I32(PackedList<'a, i32>),
    U32(PackedList<'a, u32>),
    I64(PackedList<'a, i64>),
    U64(PackedList<'a, u64>),
    F32(PackedList<'a, f32>),
    F64(PackedList<'a, f64>),
}

macro_rules! packed_dispatch {
    ($p:expr, $l:ident => $e:expr) => {
        match $p {
            Packed::Bool($l) => $e,
            Packed::I32($l) => $e,
            Packed::U32($l) => $e,
            Packed::I64($l) => $e,
            Packed::U64($l) => $e,
            Packed::F32($l) => $e,
            Packed::F64($l) => $e,
        }
    };
}

impl Packed<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        packed_dispatch!(self, l => l.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One present field's value.
pub enum Value<'a> {
    Bool(bool),
    /// int32, sint32, sfixed32 and enums.
    I32(i32),
    /// uint32, fixed32.
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    String(CFPtr<'a>),
    Bytes(CFPtr<'a>),
    Message(Box<DynMessage<'a>>),
    Packed(Packed<'a>),
    /// Repeated string or bytes.
    Leaves(LeafList<'a, CFPtr<'a>>),
    Messages(MessageList<'a, DynMessage<'a>>),
}

/// A message of a [`Schema`], built at run time.
pub struct DynMessage<'a> {
    schema: &'a Schema,
    msg: MsgId,
    /// Present fields: (index in `MessageDef::fields`, value), ascending.
    fields: Vec<(usize, Value<'a>)>,
}

/// A malformed object, with the fields being decoded (outermost first).
#[derive(Debug)]
pub struct DecodeFailure {
    pub error: DecodeError,
    pub path: Vec<String>,
}

impl DecodeFailure {
    fn within(mut self, field: String) -> DecodeFailure {
        self.path.insert(0, field);
        self
    }
}

impl From<DecodeError> for DecodeFailure {
    fn from(error: DecodeError) -> Self {
        DecodeFailure {
            error,
            path: Vec::new(),
        }
    }
}

impl fmt::Display for DecodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed object at byte {}", self.error.offset())?;
        if !self.path.is_empty() {
            write!(f, " in {}", self.path.join(" > "))?;
        }
        write!(f, ": {}", self.error.kind())
    }
}

impl std::error::Error for DecodeFailure {}

impl Value<'_> {
    /// Bytes of this value's slot. Taken from the value, not the schema, so sizing and
    /// emitting always agree even for a value that does not match its field's type.
    fn slot_size(&self) -> usize {
        match self {
            Value::Bool(_) => 1,
            Value::I32(_) | Value::U32(_) | Value::F32(_) => 4,
            Value::I64(_) | Value::U64(_) | Value::F64(_) => 8,
            _ => PAIR,
        }
    }
}

impl<'a> DynMessage<'a> {
    /// An empty message `msg` of `schema`.
    pub fn new(schema: &'a Schema, msg: MsgId) -> Self {
        DynMessage {
            schema,
            msg,
            fields: Vec::new(),
        }
    }

    /// The message's definition.
    pub fn def(&self) -> &'a MessageDef {
        &self.schema.messages[self.msg]
    }

    /// The schema.
    pub fn schema(&self) -> &'a Schema {
        self.schema
    }

    /// Present fields in increasing field number: (definition, value).
    pub fn fields(&self) -> impl Iterator<Item = (&'a FieldDef, &Value<'a>)> + '_ {
        let def = self.def();
        self.fields.iter().map(move |(i, v)| (&def.fields[*i], v))
    }

    /// The value of field `index` (in `MessageDef::fields`), if present.
    pub fn get(&self, index: usize) -> Option<&Value<'a>> {
        self.fields
            .binary_search_by_key(&index, |(i, _)| *i)
            .ok()
            .map(|k| &self.fields[k].1)
    }

    /// The value of field `index`, mutably (to append to a list in place), if present.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut Value<'a>> {
        self.fields
            .binary_search_by_key(&index, |(i, _)| *i)
            .ok()
            .map(|k| &mut self.fields[k].1)
    }

    /// Sets field `index`; a member of a oneof clears the other members. The value should match
    /// the field's type (`from_json` and [`decode`](Self::decode) ensure it);
    /// one that does not is encoded as it is. Panics if `index` is not a field index.
    pub fn set(&mut self, index: usize, v: Value<'a>) {
        let def = self.def();
        if let Some(o) = def.fields[index].oneof {
            let others = &def.oneofs[o].fields;
            self.fields
                .retain(|(i, _)| *i == index || !others.contains(i));
        }
        match self.fields.binary_search_by_key(&index, |(i, _)| *i) {
            Ok(k) => self.fields[k].1 = v,
            Err(k) => self.fields.insert(k, (index, v)),
        }
    }

    /// Removes field `index`.
    pub fn clear(&mut self, index: usize) {
        self.fields.retain(|(i, _)| *i != index);
    }

    fn bitmap(&self) -> Vec<u32> {
        let def = self.def();
        let Some((last, _)) = self.fields.last() else {
            return Vec::new();
        };
        let mut words = vec![0u32; (def.fields[*last].number as usize).div_ceil(32)];
        for (i, _) in &self.fields {
            let n = def.fields[*i].number - 1;
            words[(n / 32) as usize] |= 1 << (n % 32);
        }
        words
    }

    fn own_header_len(&self) -> usize {
        let def = self.def();
        let words = self
            .fields
            .last()
            .map_or(0, |(i, _)| (def.fields[*i].number as usize).div_ceil(32));
        let slots: usize = self.fields.iter().map(|(_, v)| v.slot_size()).sum();
        cornflakes::wire::header_len(words, slots)
    }

    /// Decodes message `msg` of `schema` from plain bytes (values borrow `buf`). Bytes after
    /// the object are refused, as by generated code (`docs/wire-format.md`, trailing bytes);
    /// [`decode_prefix`](Self::decode_prefix) accepts them.
    pub fn decode(
        schema: &'a Schema,
        msg: MsgId,
        buf: &'a [u8],
        arena: &'a Arena,
    ) -> Result<Self, DecodeFailure> {
        let dec = Decoder::new(buf);
        let m = Self::decode_from(schema, msg, dec.root()?, arena)?;
        dec.check_no_trailing_bytes()?;
        Ok(m)
    }

    /// Decodes an object at the start of `buf`, accepting bytes after it; returns it and the
    /// bytes it uses (all of `buf` when it has fields the schema does not know).
    pub fn decode_prefix(
        schema: &'a Schema,
        msg: MsgId,
        buf: &'a [u8],
        arena: &'a Arena,
    ) -> Result<(Self, usize), DecodeFailure> {
        let dec = Decoder::new(buf);
        let m = Self::decode_from(schema, msg, dec.root()?, arena)?;
        Ok((m, dec.consumed().unwrap_or(buf.len())))
    }

    /// Decodes the object whose header `h` has opened, as generated code does.
    pub fn decode_from(
        schema: &'a Schema,
        msg: MsgId,
        mut h: HeaderReader<'_, 'a>,
        arena: &'a Arena,
    ) -> Result<Self, DecodeFailure> {
        let def = &schema.messages[msg];
        let mut known = Vec::new();
        let mut words = Vec::new();
        for f in &def.fields {
            let w = (f.number - 1) / 32;
            if words.last() != Some(&w) {
                words.push(w);
                known.push(0);
            }
            if let Some(k) = known.last_mut() {
                *k |= 1u32 << ((f.number - 1) % 32);
            }
        }
        h.check_fields_sparse(&known, &words, def.max_field())
            .map_err(|e| DecodeFailure::from(e).within(def.name.clone()))?;
        let mut m = DynMessage::new(schema, msg);
        for (i, f) in def.fields.iter().enumerate() {
            if !h.has(f.number) {
                continue;
            }
            let v = read_value(schema, f, &mut h, arena)
                .map_err(|e| e.within(format!("{}.{}", def.name, f.name)))?;
            m.set(i, v);
        }
        Ok(m)
    }
}

fn read_value<'a>(
    schema: &'a Schema,
    f: &FieldDef,
    h: &mut HeaderReader<'_, 'a>,
    arena: &'a Arena,
) -> Result<Value<'a>, DecodeFailure> {
    use ScalarKind::*;
    macro_rules! packed {
        ($variant:ident, $t:ty) => {{
            let (bytes, n) = h.packed::<$t>()?;
            Value::Packed(Packed::$variant(PackedList::from_le_bytes(bytes, n, arena)))
        }};
    }
    Ok(match (f.repeated, f.kind) {
        (false, FieldKind::Scalar(k)) => match k {
            Bool => Value::Bool(h.scalar()?),
            Int32 | Sint32 | Sfixed32 => Value::I32(h.scalar()?),
            Uint32 | Fixed32 => Value::U32(h.scalar()?),
            Int64 | Sint64 | Sfixed64 => Value::I64(h.scalar()?),
            Uint64 | Fixed64 => Value::U64(h.scalar()?),
            Float => Value::F32(h.scalar()?),
            Double => Value::F64(h.scalar()?),
        },
        (false, FieldKind::Enum(_)) => Value::I32(h.scalar()?),
        (false, FieldKind::String) => Value::String(h.leaf()?),
        (false, FieldKind::Bytes) => Value::Bytes(h.leaf()?),
        (false, FieldKind::Message(id)) => {
            let sub = h.nested()?;
            Value::Message(Box::new(DynMessage::decode_from(schema, id, sub, arena)?))
        }
        (true, FieldKind::Scalar(k)) => match k {
            Bool => packed!(Bool, bool),
            Int32 | Sint32 | Sfixed32 => packed!(I32, i32),
            Uint32 | Fixed32 => packed!(U32, u32),
            Int64 | Sint64 | Sfixed64 => packed!(I64, i64),
            Uint64 | Fixed64 => packed!(U64, u64),
            Float => packed!(F32, f32),
            Double => packed!(F64, f64),
        },
        (true, FieldKind::Enum(_)) => packed!(I32, i32),
        (true, FieldKind::String | FieldKind::Bytes) => {
            let mut it = h.leaf_list()?;
            let mut l = LeafList::with_capacity_in(it.len(), arena);
            while let Some(v) = it.next_leaf() {
                l.append(v?);
            }
            Value::Leaves(l)
        }
        (true, FieldKind::Message(id)) => {
            let mut it = h.message_list()?;
            let mut l = MessageList::with_capacity_in(it.len(), arena);
            while let Some(sub) = it.next_header() {
                l.append(DynMessage::decode_from(schema, id, sub?, arena)?);
            }
            Value::Messages(l)
        }
    })
}

// Datapaths send it like a generated object.
impl cornflakes::datapath::SendObject for DynMessage<'_> {
    cornflakes::send_object_methods!();
}

impl CornflakesObj for DynMessage<'_> {
    fn sizes(&self) -> Sizes {
        let mut s = Sizes {
            header: self.own_header_len(),
            ..Sizes::default()
        };
        for (_, v) in &self.fields {
            match v {
                Value::String(p) | Value::Bytes(p) => s.add_leaf(p),
                Value::Message(m) => s += m.sizes(),
                Value::Packed(p) => s += packed_dispatch!(p, l => l.sizes()),
                Value::Leaves(l) => s += l.sizes(),
                Value::Messages(l) => s += l.sizes(),
                _ => {}
            }
        }
        s
    }

    fn emit(&self, enc: &mut Encoder<'_>, pos: usize) -> usize {
        let mut slot = enc.bitmap(pos, &self.bitmap());
        let mut sub = pos + self.own_header_len();
        for (_, v) in &self.fields {
            match v {
                Value::Bool(x) => enc.put(slot, *x),
                Value::I32(x) => enc.put(slot, *x),
                Value::U32(x) => enc.put(slot, *x),
                Value::I64(x) => enc.put(slot, *x),
                Value::U64(x) => enc.put(slot, *x),
                Value::F32(x) => enc.put(slot, *x),
                Value::F64(x) => enc.put(slot, *x),
                Value::String(p) | Value::Bytes(p) => enc.leaf(slot, p),
                Value::Message(m) => {
                    enc.put_pair(slot, 0, sub);
                    sub = m.emit(enc, sub);
                }
                Value::Packed(p) => packed_dispatch!(p, l => enc.packed(slot, l)),
                Value::Leaves(l) => {
                    enc.put_pair(slot, l.len(), sub);
                    sub = l.emit(enc, sub);
                }
                Value::Messages(l) => {
                    enc.put_pair(slot, l.len(), sub);
                    sub = l.emit(enc, sub);
                }
            }
            slot += v.slot_size();
        }
        sub
    }

    fn for_each_zero_copy<F: FnMut(PinnedRef<'_>)>(&self, demote: &mut Demote, f: &mut F) {
        for (_, v) in &self.fields {
            match v {
                Value::String(p) | Value::Bytes(p) => {
                    if let Some(b) = p.as_pinned() {
                        if demote.keep_zero_copy(b.len()) {
                            f(b);
                        }
                    }
                }
                Value::Message(m) => m.for_each_zero_copy(demote, f),
                Value::Leaves(l) => l.for_each_zero_copy(demote, f),
                Value::Messages(l) => l.for_each_zero_copy(demote, f),
                _ => {}
            }
        }
    }
}
