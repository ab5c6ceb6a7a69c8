//! Schemas, arenas and messages: the generic (schema-driven) object API.

use std::ffi::{c_char, c_int};
use std::path::Path;
use std::rc::Rc;

use cornflakes::wire::Decoder;
use cornflakes::{Arena, CFPtr, CornflakesObj, LeafList, MessageList, PackedList};
use cornflakes_codegen::dynamic::{DynMessage, Packed, Value};
use cornflakes_codegen::schema::{FieldDef, FieldKind, ScalarKind};
use cornflakes_codegen::Schema;

use crate::buf::{buf_of, mem_of};
use crate::error::{bytes, bytes_mut, cf_status, cstr, guard, out, Error, Result};
use crate::table::{
    self, cf_arena, cf_buf, cf_mem, cf_msg, cf_schema, ArenaEntry, Entry, MsgEntry, Owned, RootMsg,
    Step,
};

fn schema_of(t: &table::Table, s: cf_schema) -> Result<&Rc<Schema>> {
    match t.get(s.id, "cf_schema")? {
        Entry::Schema(s) => Ok(s),
        _ => unreachable!("checked kind"),
    }
}

fn arena_of(t: &mut table::Table, a: cf_arena) -> Result<&mut ArenaEntry> {
    match t.get_mut(a.id, "cf_arena")? {
        Entry::Arena(a) => Ok(a),
        _ => unreachable!("checked kind"),
    }
}

fn message_id(s: &Schema, msg_type: u32) -> Result<usize> {
    let id = msg_type as usize;
    if id < s.messages.len() {
        Ok(id)
    } else {
        Err(Error::invalid(format!(
            "message type {msg_type} is not in the schema (it has {} messages; use cf_schema_message)",
            s.messages.len()
        )))
    }
}

fn field<'s>(m: &DynMessage<'s>, index: u32) -> Result<&'s FieldDef> {
    let def = m.def();
    def.fields.get(index as usize).ok_or_else(|| {
        Error::invalid(format!(
            "field index {index} is not a field of {} (it has {} fields; use cf_schema_field)",
            def.full_name,
            def.fields.len()
        ))
    })
}

fn wrong_type(f: &FieldDef, what: &str) -> Error {
    Error::invalid(format!(
        "field `{}` is {}{:?}, not {what}",
        f.name,
        if f.repeated { "repeated " } else { "" },
        f.kind
    ))
}

/// Loads a `.proto` file (and what it imports, searched in `include_dir`; NULL means the
/// file's own directory). Release with `cf_schema_release`; messages keep what they need alive.
#[no_mangle]
pub extern "C" fn cf_schema_load(
    proto_path: *const c_char,
    include_dir: *const c_char,
    out_schema: *mut cf_schema,
) -> cf_status {
    guard("cf_schema_load", || {
        let path = Path::new(cstr(proto_path, "proto_path")?);
        let inc = if include_dir.is_null() {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        } else {
            Path::new(cstr(include_dir, "include_dir")?)
        };
        let s = Schema::load(&[path], &[inc])
            .map_err(|e| Error::new(cf_status::CF_ERR_DECODE, e.to_string()))?;
        let id = table::with(|t| t.insert(Entry::Schema(Rc::new(s))))?;
        out(out_schema, "out_schema", cf_schema { id })
    })
}

/// Releases a schema handle.
#[no_mangle]
pub extern "C" fn cf_schema_release(schema: cf_schema) -> cf_status {
    guard("cf_schema_release", || {
        table::with(|t| t.remove(schema.id, "cf_schema")).map(drop)
    })
}

/// The type number of the message called `name` (`"kv.GetResp"`, package included).
#[no_mangle]
pub extern "C" fn cf_schema_message(
    schema: cf_schema,
    name: *const c_char,
    out_type: *mut u32,
) -> cf_status {
    guard("cf_schema_message", || {
        let name = cstr(name, "name")?;
        let id = table::with(|t| {
            let s = schema_of(t, schema)?;
            s.message(name).ok_or_else(|| {
                Error::invalid(format!(
                    "no message `{name}` in the schema (it has: {})",
                    s.message_names().join(", ")
                ))
            })
        })?;
        out(out_type, "out_type", id as u32)
    })
}

/// The index of field `name` of message type `msg_type` (the index the `cf_msg_*` calls take;
/// fields are numbered from 0 in increasing field number).
#[no_mangle]
pub extern "C" fn cf_schema_field(
    schema: cf_schema,
    msg_type: u32,
    name: *const c_char,
    out_index: *mut u32,
) -> cf_status {
    guard("cf_schema_field", || {
        let name = cstr(name, "name")?;
        let i = table::with(|t| {
            let s = schema_of(t, schema)?;
            let def = &s.messages[message_id(s, msg_type)?];
            def.field_by_name(name).map(|(i, _)| i).ok_or_else(|| {
                Error::invalid(format!("message {} has no field `{name}`", def.full_name))
            })
        })?;
        out(out_index, "out_index", i as u32)
    })
}

/// Creates an arena. With pinned memory (`mem` not `{0}`), byte fields at least the threshold
/// long that lie in that memory are referenced, not copied; with `{0}` everything is copied.
#[no_mangle]
pub extern "C" fn cf_arena_new(mem: cf_mem, out_arena: *mut cf_arena) -> cf_status {
    guard("cf_arena_new", || {
        let id = table::with(|t| {
            let arena = if mem.id == 0 {
                Arena::new()
            } else {
                Arena::with_memory(mem_of(t, mem)?)
            };
            t.insert(Entry::Arena(ArenaEntry {
                arena: Owned::new(arena),
                msgs: Vec::new(),
            }))
        })?;
        out(out_arena, "out_arena", cf_arena { id })
    })
}

/// Sets the copy threshold of messages built after this call (bytes; 0 references every pinned
/// value, `SIZE_MAX` copies everything). The default is the process's (512 unless
/// `CORNFLAKES_THRESHOLD` says otherwise).
#[no_mangle]
pub extern "C" fn cf_arena_set_threshold(arena: cf_arena, threshold: usize) -> cf_status {
    guard("cf_arena_set_threshold", || {
        table::with(|t| {
            let a = arena_of(t, arena)?;
            if !a.msgs.is_empty() {
                return Err(Error::invalid(
                    "the arena has messages: set the threshold before building any, or after cf_arena_reset",
                ));
            }
            a.arena.get_mut().set_threshold(threshold);
            Ok(())
        })
    })
}

fn invalidate_messages(t: &mut table::Table, arena: cf_arena) -> Result<Vec<Entry>> {
    let msgs = std::mem::take(&mut arena_of(t, arena)?.msgs);
    // Views first (they name their roots), then roots; dropped by the caller.
    Ok(msgs
        .into_iter()
        .rev()
        .filter_map(|h| t.remove_if_live(h))
        .collect())
}

/// Frees every message built in the arena (their handles become invalid, also views taken from
/// them) and the arena's memory, keeping the arena for the next request. Buffers the messages
/// referenced are released; sends in flight keep their own references.
#[no_mangle]
pub extern "C" fn cf_arena_reset(arena: cf_arena) -> cf_status {
    guard("cf_arena_reset", || {
        table::with(|t| {
            let dead = invalidate_messages(t, arena)?;
            drop(dead);
            arena_of(t, arena)?.arena.get_mut().reset();
            Ok(())
        })
    })
}

/// Releases an arena and every message built in it.
#[no_mangle]
pub extern "C" fn cf_arena_release(arena: cf_arena) -> cf_status {
    guard("cf_arena_release", || {
        table::with(|t| {
            let dead = invalidate_messages(t, arena)?;
            drop(dead);
            t.remove(arena.id, "cf_arena").map(drop)
        })
    })
}

fn new_root(
    t: &mut table::Table,
    arena: cf_arena,
    schema: Rc<Schema>,
    make: impl FnOnce(
        &'static Schema,
        &'static Arena,
        &mut Vec<Owned<cornflakes::RcBuf>>,
    ) -> Result<DynMessage<'static>>,
    packet: Option<cornflakes::RcBuf>,
) -> Result<u64> {
    let a = arena_of(t, arena)?.arena.get();
    // SAFETY: the schema lives in an `Rc` that the message keeps (`RootMsg::schema`, dropped
    // after `obj`), so the reference outlives the object that holds it.
    let s: &'static Schema = unsafe { &*Rc::as_ptr(&schema) };
    let mut packets = Vec::new();
    if let Some(p) = packet {
        packets.push(Owned::new(p));
    }
    let obj = make(s, a, &mut packets)?;
    let h = t.insert(Entry::Msg(MsgEntry::Root(Box::new(RootMsg {
        obj,
        packets,
        schema,
        arena: a,
        arena_handle: arena.id,
    }))))?;
    arena_of(t, arena)?.msgs.push(h);
    Ok(h)
}

/// Creates an empty message of type `msg_type` in `arena`. It lives until `cf_msg_release`,
/// `cf_arena_reset` or `cf_arena_release`.
#[no_mangle]
pub extern "C" fn cf_msg_new(
    arena: cf_arena,
    schema: cf_schema,
    msg_type: u32,
    out_msg: *mut cf_msg,
) -> cf_status {
    guard("cf_msg_new", || {
        let id = table::with(|t| {
            let s = schema_of(t, schema)?.clone();
            let m = message_id(&s, msg_type)?;
            new_root(t, arena, s, |s, _, _| Ok(DynMessage::new(s, m)), None)
        })?;
        out(out_msg, "out_msg", cf_msg { id })
    })
}

/// Releases a message (and views taken from it). Its memory returns to the arena at the next
/// reset.
#[no_mangle]
pub extern "C" fn cf_msg_release(msg: cf_msg) -> cf_status {
    guard("cf_msg_release", || {
        table::with(|t| t.remove(msg.id, "cf_msg")).map(drop)
    })
}

fn decode_failure(e: cornflakes_codegen::dynamic::DecodeFailure) -> Error {
    Error::new(cf_status::CF_ERR_DECODE, e.to_string())
}

/// Decodes a message of type `msg_type` from `data[0..len]`, which is copied into the arena
/// first (so `data` may be freed after the call).
#[no_mangle]
pub extern "C" fn cf_msg_decode(
    arena: cf_arena,
    schema: cf_schema,
    msg_type: u32,
    data: *const u8,
    len: usize,
    out_msg: *mut cf_msg,
) -> cf_status {
    guard("cf_msg_decode", || {
        let data = bytes(data, len, "data")?;
        let id = table::with(|t| {
            let s = schema_of(t, schema)?.clone();
            let m = message_id(&s, msg_type)?;
            new_root(
                t,
                arena,
                s,
                |s, a, _| DynMessage::decode(s, m, a.copy_slice(data), a).map_err(decode_failure),
                None,
            )
        })?;
        out(out_msg, "out_msg", cf_msg { id })
    })
}

/// Decodes a message from a received buffer without copying it: values at least the arena's
/// threshold long reference the buffer, shorter ones borrow it (the message keeps the buffer
/// alive, so `buf` may be released after the call).
#[no_mangle]
pub extern "C" fn cf_msg_decode_buf(
    arena: cf_arena,
    schema: cf_schema,
    msg_type: u32,
    buf: cf_buf,
    out_msg: *mut cf_msg,
) -> cf_status {
    guard("cf_msg_decode_buf", || {
        let id = table::with(|t| {
            let s = schema_of(t, schema)?.clone();
            let m = message_id(&s, msg_type)?;
            let pkt = buf_of(t, buf)?
                .try_clone()
                .map_err(|e| Error::new(cf_status::CF_ERR_OVERFLOW, e.to_string()))?;
            new_root(
                t,
                arena,
                s,
                |s, a, packets| {
                    let pkt = packets[0].get();
                    let dec = Decoder::from_rcbuf(pkt, a);
                    let root = dec.root().map_err(|e| decode_failure(e.into()))?;
                    DynMessage::decode_from(s, m, root, a).map_err(decode_failure)
                },
                Some(pkt),
            )
        })?;
        out(out_msg, "out_msg", cf_msg { id })
    })
}

// ---------------------------------------------------------------- setters

fn int_value(f: &FieldDef, v: i64) -> Result<Value<'static>> {
    let range = || {
        Error::invalid(format!(
            "{v} does not fit field `{}` ({:?})",
            f.name, f.kind
        ))
    };
    Ok(match f.kind {
        FieldKind::Scalar(k) => match k {
            ScalarKind::Bool => match v {
                0 | 1 => Value::Bool(v == 1),
                _ => return Err(range()),
            },
            ScalarKind::Int32 | ScalarKind::Sint32 | ScalarKind::Sfixed32 => {
                Value::I32(i32::try_from(v).map_err(|_| range())?)
            }
            ScalarKind::Uint32 | ScalarKind::Fixed32 => {
                Value::U32(u32::try_from(v).map_err(|_| range())?)
            }
            ScalarKind::Int64 | ScalarKind::Sint64 | ScalarKind::Sfixed64 => Value::I64(v),
            ScalarKind::Uint64 | ScalarKind::Fixed64 => {
                Value::U64(u64::try_from(v).map_err(|_| range())?)
            }
            ScalarKind::Float | ScalarKind::Double => return Err(wrong_type(f, "an integer")),
        },
        FieldKind::Enum(_) => Value::I32(i32::try_from(v).map_err(|_| range())?),
        _ => return Err(wrong_type(f, "an integer")),
    })
}

fn double_value(f: &FieldDef, v: f64) -> Result<Value<'static>> {
    match f.kind {
        FieldKind::Scalar(ScalarKind::Float) => Ok(Value::F32(v as f32)),
        FieldKind::Scalar(ScalarKind::Double) => Ok(Value::F64(v)),
        _ => Err(wrong_type(f, "a float or double")),
    }
}

/// Stores a scalar into a singular field or appends it to a repeated one.
fn put_scalar(r: &mut RootMsg, index: usize, repeated: bool, v: Value<'static>) {
    if !repeated {
        r.obj.set(index, v);
        return;
    }
    let a = r.arena;
    let m = &mut r.obj;
    macro_rules! push {
        ($variant:ident, $x:expr) => {{
            if !matches!(m.get(index), Some(Value::Packed(Packed::$variant(_)))) {
                m.set(
                    index,
                    Value::Packed(Packed::$variant(PackedList::with_capacity_in(4, a))),
                );
            }
            if let Some(Value::Packed(Packed::$variant(l))) = m.get_mut(index) {
                l.append($x);
            }
        }};
    }
    match v {
        Value::Bool(x) => push!(Bool, x),
        Value::I32(x) => push!(I32, x),
        Value::U32(x) => push!(U32, x),
        Value::I64(x) => push!(I64, x),
        Value::U64(x) => push!(U64, x),
        Value::F32(x) => push!(F32, x),
        Value::F64(x) => push!(F64, x),
        _ => unreachable!("scalar values only"),
    }
}

/// Runs `f` on the root message `msg` and the definition of its field `index`.
fn with_field(
    msg: cf_msg,
    index: u32,
    f: impl FnOnce(&mut RootMsg, &'static FieldDef) -> Result<()>,
) -> Result<()> {
    table::with(|t| {
        let r = t.root_mut(msg.id)?;
        let fd = field(&r.obj, index)?;
        f(r, fd)
    })
}

fn set_scalar(
    msg: cf_msg,
    index: u32,
    repeated: bool,
    mk: impl FnOnce(&FieldDef) -> Result<Value<'static>>,
) -> Result<()> {
    with_field(msg, index, |r, f| {
        if f.repeated != repeated {
            return Err(wrong_type(
                f,
                if repeated {
                    "repeated (use cf_msg_set_*)"
                } else {
                    "singular (use cf_msg_append_*)"
                },
            ));
        }
        let v = mk(f)?;
        put_scalar(r, index as usize, repeated, v);
        Ok(())
    })
}

/// Sets a singular integer, enum or bool field (bool: 0 or 1). A value out of the field's
/// range is refused.
#[no_mangle]
pub extern "C" fn cf_msg_set_int(msg: cf_msg, field: u32, value: i64) -> cf_status {
    guard("cf_msg_set_int", || {
        set_scalar(msg, field, false, |f| int_value(f, value))
    })
}

/// Sets a singular unsigned integer field (also the other integer kinds when in range).
#[no_mangle]
pub extern "C" fn cf_msg_set_uint(msg: cf_msg, field: u32, value: u64) -> cf_status {
    guard("cf_msg_set_uint", || {
        set_scalar(msg, field, false, |f| uint_value(f, value))
    })
}

/// Sets a singular float or double field.
#[no_mangle]
pub extern "C" fn cf_msg_set_double(msg: cf_msg, field: u32, value: f64) -> cf_status {
    guard("cf_msg_set_double", || {
        set_scalar(msg, field, false, |f| double_value(f, value))
    })
}

/// Appends to a repeated integer, enum or bool field.
#[no_mangle]
pub extern "C" fn cf_msg_append_int(msg: cf_msg, field: u32, value: i64) -> cf_status {
    guard("cf_msg_append_int", || {
        set_scalar(msg, field, true, |f| int_value(f, value))
    })
}

/// Appends to a repeated unsigned integer field.
#[no_mangle]
pub extern "C" fn cf_msg_append_uint(msg: cf_msg, field: u32, value: u64) -> cf_status {
    guard("cf_msg_append_uint", || {
        set_scalar(msg, field, true, |f| uint_value(f, value))
    })
}

/// Appends to a repeated float or double field.
#[no_mangle]
pub extern "C" fn cf_msg_append_double(msg: cf_msg, field: u32, value: f64) -> cf_status {
    guard("cf_msg_append_double", || {
        set_scalar(msg, field, true, |f| double_value(f, value))
    })
}

fn uint_value(f: &FieldDef, v: u64) -> Result<Value<'static>> {
    match f.kind {
        FieldKind::Scalar(ScalarKind::Uint64 | ScalarKind::Fixed64) => Ok(Value::U64(v)),
        _ => int_value(
            f,
            i64::try_from(v).map_err(|_| {
                Error::invalid(format!(
                    "{v} does not fit field `{}` ({:?})",
                    f.name, f.kind
                ))
            })?,
        ),
    }
}

/// Stores a leaf into a singular string/bytes field or appends it to a repeated one.
fn put_leaf(
    r: &mut RootMsg,
    f: &FieldDef,
    index: usize,
    repeated: bool,
    p: CFPtr<'static>,
) -> Result<()> {
    let is_str = match f.kind {
        FieldKind::String => true,
        FieldKind::Bytes => false,
        _ => return Err(wrong_type(f, "string or bytes")),
    };
    if f.repeated != repeated {
        return Err(wrong_type(
            f,
            if repeated {
                "repeated (use cf_msg_set_bytes)"
            } else {
                "singular (use cf_msg_append_bytes)"
            },
        ));
    }
    if is_str && std::str::from_utf8(p.as_bytes()).is_err() {
        return Err(Error::invalid(format!(
            "value for string field `{}` is not UTF-8",
            f.name
        )));
    }
    if !repeated {
        r.obj.set(
            index,
            if is_str {
                Value::String(p)
            } else {
                Value::Bytes(p)
            },
        );
        return Ok(());
    }
    let a = r.arena;
    if !matches!(r.obj.get(index), Some(Value::Leaves(_))) {
        r.obj
            .set(index, Value::Leaves(LeafList::with_capacity_in(4, a)));
    }
    if let Some(Value::Leaves(l)) = r.obj.get_mut(index) {
        l.append(p);
    }
    Ok(())
}

fn set_bytes(msg: cf_msg, index: u32, repeated: bool, data: *const u8, len: usize) -> Result<()> {
    let data = bytes(data, len, "data")?;
    with_field(msg, index, |r, f| {
        // Checked before the bytes are copied into the arena.
        if !matches!(f.kind, FieldKind::String | FieldKind::Bytes) {
            return Err(wrong_type(f, "string or bytes"));
        }
        let p = CFPtr::new(data, r.arena);
        put_leaf(r, f, index as usize, repeated, p)
    })
}

fn set_buf(msg: cf_msg, index: u32, repeated: bool, buf: cf_buf) -> Result<()> {
    table::with(|t| {
        let b = buf_of(t, buf)?
            .try_clone()
            .map_err(|e| Error::new(cf_status::CF_ERR_OVERFLOW, e.to_string()))?;
        let r = t.root_mut(msg.id)?;
        let f = field(&r.obj, index)?;
        let p = CFPtr::from_rcbuf(b, r.arena);
        put_leaf(r, f, index as usize, repeated, p)
    })
}

/// Sets a string or bytes field to `data[0..len]`. At least the arena's threshold long and
/// inside the arena's pinned memory (a `cf_buf`'s bytes, found by pointer recovery): the field
/// references that memory (one more reference, which the arena keeps until it is reset or
/// released, so the buffer may be released right after);
/// otherwise the bytes are copied into the arena now. Either way `data` may be freed after the
/// call. A string field must be given UTF-8.
#[no_mangle]
pub extern "C" fn cf_msg_set_bytes(
    msg: cf_msg,
    field: u32,
    data: *const u8,
    len: usize,
) -> cf_status {
    guard("cf_msg_set_bytes", || {
        set_bytes(msg, field, false, data, len)
    })
}

/// Appends `data[0..len]` to a repeated string or bytes field (as `cf_msg_set_bytes`).
#[no_mangle]
pub extern "C" fn cf_msg_append_bytes(
    msg: cf_msg,
    field: u32,
    data: *const u8,
    len: usize,
) -> cf_status {
    guard("cf_msg_append_bytes", || {
        set_bytes(msg, field, true, data, len)
    })
}

/// Sets a string or bytes field to a pinned buffer: referenced (zero-copy) when at least the
/// arena's threshold long, else copied. The arena takes its own reference, kept until it is
/// reset or released; `buf` stays the caller's.
#[no_mangle]
pub extern "C" fn cf_msg_set_buf(msg: cf_msg, field: u32, buf: cf_buf) -> cf_status {
    guard("cf_msg_set_buf", || set_buf(msg, field, false, buf))
}

/// Appends a pinned buffer to a repeated string or bytes field (as `cf_msg_set_buf`).
#[no_mangle]
pub extern "C" fn cf_msg_append_buf(msg: cf_msg, field: u32, buf: cf_buf) -> cf_status {
    guard("cf_msg_append_buf", || set_buf(msg, field, true, buf))
}

fn put_message(parent: cf_msg, index: u32, repeated: bool, child: cf_msg) -> Result<()> {
    table::with(|t| {
        // Check everything before the child is taken out of the table.
        let (child_arena, child_type, child_schema) = match t.get(child.id, "cf_msg")? {
            Entry::Msg(MsgEntry::Root(c)) => (c.arena as *const Arena, c.obj.def().full_name.clone(), Rc::clone(&c.schema)),
            _ => return Err(Error::invalid("the child is a read-only view; only a message of its own can be moved into another")),
        };
        if parent.id == child.id {
            return Err(Error::invalid("a message cannot be set into itself"));
        }
        let r = t.root_mut(parent.id)?;
        let f = field(&r.obj, index)?;
        let FieldKind::Message(want) = f.kind else {
            return Err(wrong_type(f, "a message"));
        };
        if f.repeated != repeated {
            return Err(wrong_type(
                f,
                if repeated {
                    "repeated (use cf_msg_set_message)"
                } else {
                    "singular (use cf_msg_append_message)"
                },
            ));
        }
        if !std::ptr::eq(child_arena, r.arena) {
            return Err(Error::invalid(
                "the child was built in another arena; build both in one",
            ));
        }
        if !Rc::ptr_eq(&child_schema, &r.schema) || r.schema.messages[want].full_name != child_type
        {
            return Err(Error::invalid(format!(
                "field `{}` holds {}, the child is {child_type} (of this schema?)",
                f.name, r.schema.messages[want].full_name
            )));
        }
        let Entry::Msg(MsgEntry::Root(c)) = t.remove(child.id, "cf_msg")? else {
            unreachable!("checked above")
        };
        let c = *c;
        let RootMsg { obj, packets, .. } = c;
        let r = t.root_mut(parent.id)?;
        // Packets the child borrows now belong to the parent.
        r.packets.extend(packets);
        let a = r.arena;
        if !repeated {
            r.obj.set(index as usize, Value::Message(Box::new(obj)));
        } else {
            if !matches!(r.obj.get(index as usize), Some(Value::Messages(_))) {
                r.obj.set(
                    index as usize,
                    Value::Messages(MessageList::with_capacity_in(4, a)),
                );
            }
            if let Some(Value::Messages(l)) = r.obj.get_mut(index as usize) {
                l.append(obj);
            }
        }
        Ok(())
    })
}

/// Moves `child` (a message of the field's type, built in the same arena) into a singular
/// message field of `parent`. The child's handle is invalid afterwards.
#[no_mangle]
pub extern "C" fn cf_msg_set_message(parent: cf_msg, field: u32, child: cf_msg) -> cf_status {
    guard("cf_msg_set_message", || {
        put_message(parent, field, false, child)
    })
}

/// Moves `child` to the end of a repeated message field of `parent` (as `cf_msg_set_message`).
#[no_mangle]
pub extern "C" fn cf_msg_append_message(parent: cf_msg, field: u32, child: cf_msg) -> cf_status {
    guard("cf_msg_append_message", || {
        put_message(parent, field, true, child)
    })
}

/// Removes a field (absent afterwards; views into it become invalid at their next use).
#[no_mangle]
pub extern "C" fn cf_msg_clear(msg: cf_msg, field: u32) -> cf_status {
    guard("cf_msg_clear", || {
        with_field(msg, field, |r, _| {
            r.obj.clear(field as usize);
            Ok(())
        })
    })
}

// ---------------------------------------------------------------- getters

fn read<R>(
    msg: cf_msg,
    index: u32,
    f: impl FnOnce(&DynMessage<'static>, &'static FieldDef) -> Result<R>,
) -> Result<R> {
    table::with(|t| {
        let (m, _) = t.msg(msg.id)?;
        let fd = field(m, index)?;
        f(m, fd)
    })
}

/// Whether a field is present (`*out_present` 1 or 0). A repeated field is present once set or
/// appended to, even if empty.
#[no_mangle]
pub extern "C" fn cf_msg_has(msg: cf_msg, field: u32, out_present: *mut c_int) -> cf_status {
    guard("cf_msg_has", || {
        let p = read(msg, field, |m, _| Ok(m.get(field as usize).is_some()))?;
        out(out_present, "out_present", c_int::from(p))
    })
}

/// The number of elements of a repeated field (0 when absent); for a singular field 1 when
/// present, else 0.
#[no_mangle]
pub extern "C" fn cf_msg_count(msg: cf_msg, field: u32, out_count: *mut usize) -> cf_status {
    guard("cf_msg_count", || {
        let n = read(msg, field, |m, _| {
            Ok(match m.get(field as usize) {
                None => 0,
                Some(Value::Packed(p)) => p.len(),
                Some(Value::Leaves(l)) => l.len(),
                Some(Value::Messages(l)) => l.len(),
                Some(_) => 1,
            })
        })?;
        out(out_count, "out_count", n)
    })
}

/// A scalar as (signed, unsigned, double) views; `None` for a non-scalar.
enum Num {
    I(i64),
    U(u64),
    F(f64),
}

fn scalar_at(
    m: &DynMessage<'static>,
    f: &FieldDef,
    index: usize,
    elem: Option<usize>,
) -> Result<Num> {
    if !matches!(f.kind, FieldKind::Scalar(_) | FieldKind::Enum(_)) {
        return Err(wrong_type(f, "a scalar"));
    }
    if f.repeated != elem.is_some() {
        return Err(wrong_type(
            f,
            if f.repeated {
                "singular (use the *_at getter)"
            } else {
                "repeated (use the getter without _at)"
            },
        ));
    }
    let v = match (m.get(index), elem) {
        (None, None) => {
            return Ok(match f.kind {
                FieldKind::Scalar(ScalarKind::Float | ScalarKind::Double) => Num::F(0.0),
                _ => Num::I(0),
            })
        }
        (Some(Value::Bool(b)), None) => Num::I(i64::from(*b)),
        (Some(Value::I32(x)), None) => Num::I(i64::from(*x)),
        (Some(Value::U32(x)), None) => Num::I(i64::from(*x)),
        (Some(Value::I64(x)), None) => Num::I(*x),
        (Some(Value::U64(x)), None) => Num::U(*x),
        (Some(Value::F32(x)), None) => Num::F(f64::from(*x)),
        (Some(Value::F64(x)), None) => Num::F(*x),
        (p, Some(i)) => {
            let oob = || Error::invalid(format!("index {i} is past the end of field `{}`", f.name));
            let Some(Value::Packed(p)) = p else {
                return Err(oob());
            };
            match p {
                Packed::Bool(l) => Num::I(i64::from(l.get(i).ok_or_else(oob)?)),
                Packed::I32(l) => Num::I(i64::from(l.get(i).ok_or_else(oob)?)),
                Packed::U32(l) => Num::I(i64::from(l.get(i).ok_or_else(oob)?)),
                Packed::I64(l) => Num::I(l.get(i).ok_or_else(oob)?),
                Packed::U64(l) => Num::U(l.get(i).ok_or_else(oob)?),
                Packed::F32(l) => Num::F(f64::from(l.get(i).ok_or_else(oob)?)),
                Packed::F64(l) => Num::F(l.get(i).ok_or_else(oob)?),
            }
        }
        _ => return Err(wrong_type(f, "a scalar")),
    };
    Ok(v)
}

fn get_int(msg: cf_msg, index: u32, elem: Option<usize>) -> Result<i64> {
    read(msg, index, |m, f| {
        match scalar_at(m, f, index as usize, elem)? {
            Num::I(x) => Ok(x),
            Num::U(x) => i64::try_from(x).map_err(|_| {
                Error::invalid(format!(
                    "field `{}` holds {x}, past INT64_MAX: use cf_msg_get_uint",
                    f.name
                ))
            }),
            Num::F(_) => Err(wrong_type(f, "an integer")),
        }
    })
}

fn get_uint(msg: cf_msg, index: u32, elem: Option<usize>) -> Result<u64> {
    read(msg, index, |m, f| {
        match scalar_at(m, f, index as usize, elem)? {
            Num::U(x) => Ok(x),
            Num::I(x) => u64::try_from(x).map_err(|_| {
                Error::invalid(format!(
                    "field `{}` holds {x}, negative: use cf_msg_get_int",
                    f.name
                ))
            }),
            Num::F(_) => Err(wrong_type(f, "an integer")),
        }
    })
}

fn get_double(msg: cf_msg, index: u32, elem: Option<usize>) -> Result<f64> {
    read(msg, index, |m, f| {
        match scalar_at(m, f, index as usize, elem)? {
            Num::F(x) => Ok(x),
            _ => Err(wrong_type(f, "a float or double")),
        }
    })
}

/// A singular integer, enum or bool field (0 when absent).
#[no_mangle]
pub extern "C" fn cf_msg_get_int(msg: cf_msg, field: u32, out_value: *mut i64) -> cf_status {
    guard("cf_msg_get_int", || {
        out(out_value, "out_value", get_int(msg, field, None)?)
    })
}

/// A singular unsigned integer field (0 when absent; a negative value is refused).
#[no_mangle]
pub extern "C" fn cf_msg_get_uint(msg: cf_msg, field: u32, out_value: *mut u64) -> cf_status {
    guard("cf_msg_get_uint", || {
        out(out_value, "out_value", get_uint(msg, field, None)?)
    })
}

/// A singular float or double field (0 when absent).
#[no_mangle]
pub extern "C" fn cf_msg_get_double(msg: cf_msg, field: u32, out_value: *mut f64) -> cf_status {
    guard("cf_msg_get_double", || {
        out(out_value, "out_value", get_double(msg, field, None)?)
    })
}

/// Element `i` of a repeated integer, enum or bool field.
#[no_mangle]
pub extern "C" fn cf_msg_get_int_at(
    msg: cf_msg,
    field: u32,
    i: usize,
    out_value: *mut i64,
) -> cf_status {
    guard("cf_msg_get_int_at", || {
        out(out_value, "out_value", get_int(msg, field, Some(i))?)
    })
}

/// Element `i` of a repeated unsigned integer field.
#[no_mangle]
pub extern "C" fn cf_msg_get_uint_at(
    msg: cf_msg,
    field: u32,
    i: usize,
    out_value: *mut u64,
) -> cf_status {
    guard("cf_msg_get_uint_at", || {
        out(out_value, "out_value", get_uint(msg, field, Some(i))?)
    })
}

/// Element `i` of a repeated float or double field.
#[no_mangle]
pub extern "C" fn cf_msg_get_double_at(
    msg: cf_msg,
    field: u32,
    i: usize,
    out_value: *mut f64,
) -> cf_status {
    guard("cf_msg_get_double_at", || {
        out(out_value, "out_value", get_double(msg, field, Some(i))?)
    })
}

fn get_leaf(msg: cf_msg, index: u32, elem: Option<usize>) -> Result<(*const u8, usize)> {
    read(msg, index, |m, f| {
        if !matches!(f.kind, FieldKind::String | FieldKind::Bytes) {
            return Err(wrong_type(f, "string or bytes"));
        }
        if f.repeated != elem.is_some() {
            return Err(wrong_type(
                f,
                if f.repeated {
                    "singular (use cf_msg_get_bytes_at)"
                } else {
                    "repeated (use cf_msg_get_bytes)"
                },
            ));
        }
        let p = match (m.get(index as usize), elem) {
            (None, None) => return Ok((std::ptr::null(), 0)),
            (Some(Value::String(p) | Value::Bytes(p)), None) => p,
            (v, Some(i)) => match v {
                Some(Value::Leaves(l)) => l.get(i),
                _ => None,
            }
            .ok_or_else(|| {
                Error::invalid(format!("index {i} is past the end of field `{}`", f.name))
            })?,
            _ => return Err(wrong_type(f, "string or bytes")),
        };
        let b = p.as_bytes();
        Ok((b.as_ptr(), b.len()))
    })
}

/// A singular string or bytes field: `*out_data` points into the message (or the buffer it
/// references) and stays valid while the message is live; NULL and 0 when absent. Strings are
/// not NUL-terminated.
#[no_mangle]
pub extern "C" fn cf_msg_get_bytes(
    msg: cf_msg,
    field: u32,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> cf_status {
    guard("cf_msg_get_bytes", || {
        let (p, n) = get_leaf(msg, field, None)?;
        out(out_data, "out_data", p)?;
        out(out_len, "out_len", n)
    })
}

/// Element `i` of a repeated string or bytes field (as `cf_msg_get_bytes`).
#[no_mangle]
pub extern "C" fn cf_msg_get_bytes_at(
    msg: cf_msg,
    field: u32,
    i: usize,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> cf_status {
    guard("cf_msg_get_bytes_at", || {
        let (p, n) = get_leaf(msg, field, Some(i))?;
        out(out_data, "out_data", p)?;
        out(out_len, "out_len", n)
    })
}

fn get_view(msg: cf_msg, index: u32, elem: Option<usize>) -> Result<u64> {
    table::with(|t| {
        let (m, _) = t.msg(msg.id)?;
        let f = field(m, index)?;
        if !matches!(f.kind, FieldKind::Message(_)) {
            return Err(wrong_type(f, "a message"));
        }
        if f.repeated != elem.is_some() {
            return Err(wrong_type(
                f,
                if f.repeated {
                    "singular (use cf_msg_get_message_at)"
                } else {
                    "repeated (use cf_msg_get_message)"
                },
            ));
        }
        let s = Step {
            field: index as usize,
            elem,
        };
        if table::step(m, s).is_none() {
            return Err(Error::invalid(match elem {
                None => format!("field `{}` is absent", f.name),
                Some(i) => format!("index {i} is past the end of field `{}`", f.name),
            }));
        }
        let (root, mut path) = match t.get(msg.id, "cf_msg")? {
            Entry::Msg(MsgEntry::View { root, path }) => (*root, path.clone()),
            _ => (msg.id, Vec::new()),
        };
        path.push(s);
        let arena_h = arena_handle_of(t, root)?;
        let h = t.insert(Entry::Msg(MsgEntry::View { root, path }))?;
        if let Some(a) = arena_h {
            if let Ok(Entry::Arena(a)) = t.get_mut(a, "cf_arena") {
                a.msgs.push(h);
            }
        }
        Ok(h)
    })
}

/// The arena handle whose message list holds `root` (views are registered with it too, so a
/// reset invalidates them).
fn arena_handle_of(t: &table::Table, root: u64) -> Result<Option<u64>> {
    let (_, r) = t.msg(root)?;
    Ok(Some(r.arena_handle))
}

/// A read-only view of a singular message field, valid while the outer message is live and
/// the field is not replaced or cleared. Release it with `cf_msg_release` (or let the arena's
/// reset do it).
#[no_mangle]
pub extern "C" fn cf_msg_get_message(msg: cf_msg, field: u32, out_msg: *mut cf_msg) -> cf_status {
    guard("cf_msg_get_message", || {
        out(
            out_msg,
            "out_msg",
            cf_msg {
                id: get_view(msg, field, None)?,
            },
        )
    })
}

/// A read-only view of element `i` of a repeated message field (as `cf_msg_get_message`).
#[no_mangle]
pub extern "C" fn cf_msg_get_message_at(
    msg: cf_msg,
    field: u32,
    i: usize,
    out_msg: *mut cf_msg,
) -> cf_status {
    guard("cf_msg_get_message_at", || {
        out(
            out_msg,
            "out_msg",
            cf_msg {
                id: get_view(msg, field, Some(i))?,
            },
        )
    })
}

// ---------------------------------------------------------------- serialize

/// The number of bytes `cf_msg_serialize` writes.
#[no_mangle]
pub extern "C" fn cf_msg_serialized_len(msg: cf_msg, out_len: *mut usize) -> cf_status {
    guard("cf_msg_serialized_len", || {
        let n = table::with(|t| Ok(t.msg(msg.id)?.0.sizes().total()))?;
        out(out_len, "out_len", n)
    })
}

/// Serializes the message into `out[0..cap]` (copying every field), the bytes a receiver
/// decodes with `cf_msg_decode`. A buffer shorter than `cf_msg_serialized_len` is refused
/// with `CF_ERR_TOO_LARGE` before anything is written.
#[no_mangle]
pub extern "C" fn cf_msg_serialize(
    msg: cf_msg,
    out_buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> cf_status {
    guard("cf_msg_serialize", || {
        let dst = bytes_mut(out_buf, cap, "out_buf")?;
        let n = table::with(|t| {
            let m = t.msg(msg.id)?.0;
            m.serialize_into(dst)
                .map_err(|e| Error::new(cf_status::CF_ERR_TOO_LARGE, e.to_string()))
        })?;
        out(out_len, "out_len", n)
    })
}
