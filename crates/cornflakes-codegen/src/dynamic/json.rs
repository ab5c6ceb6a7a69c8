//! JSON ⇄ [`DynMessage`] following the protobuf JSON mapping: field names as in the `.proto`
//! or, with [`Names::Json`], lowerCamelCase (both accepted on input), bytes as base64, 64-bit
//! integers as strings (numbers accepted), enums by name (numbers accepted), maps as objects;
//! the well-known types in their own forms (at the end of this file).

use std::fmt::{self, Write as _};

use base64::Engine as _;
use cornflakes::{Arena, CFPtr, LeafList, MessageList, PackedList};
use serde_json::Value as Json;

use super::{DynMessage, Packed, Value};
use crate::schema::{FieldDef, FieldKind, MsgId, ScalarKind, Schema};

/// How [`DynMessage::to_json_with`] names fields (input accepts both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Names {
    /// As written in the `.proto` (`user_id`): protobuf's `preserving_proto_field_name`.
    #[default]
    Proto,
    /// The JSON name (`userId`, or the field's `json_name`): protobuf's default.
    Json,
}

/// JSON that does not fit the message, or a decoded message that has no JSON form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Where: `Msg.field[2].sub`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for JsonError {}

fn err(path: &str, message: impl Into<String>) -> JsonError {
    JsonError {
        path: path.to_string(),
        message: message.into(),
    }
}

fn describe(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

fn parse_int<T: TryFrom<i128>>(v: &Json, path: &str, what: &str) -> Result<T, JsonError> {
    let n: Option<i128> = match v {
        Json::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 1.9e19)
                    .map(|f| f as i128)
            }),
        Json::String(s) => s.trim().parse::<i128>().ok(),
        _ => None,
    };
    let n = n.ok_or_else(|| err(path, format!("expected {what}, got {}", describe(v))))?;
    T::try_from(n).map_err(|_| err(path, format!("{n} is out of range for {what}")))
}

fn parse_float(v: &Json, path: &str) -> Result<f64, JsonError> {
    match v {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            s => s.trim().parse().ok(),
        },
        _ => None,
    }
    .ok_or_else(|| err(path, format!("expected a number, got {}", describe(v))))
}

fn parse_bytes(v: &Json, path: &str) -> Result<Vec<u8>, JsonError> {
    let Json::String(s) = v else {
        return Err(err(
            path,
            format!("expected a base64 string, got {}", describe(v)),
        ));
    };
    let cleaned: String = s.trim_end_matches('=').chars().collect();
    let engine = if cleaned.contains(['-', '_']) {
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
    } else {
        &base64::engine::general_purpose::STANDARD_NO_PAD
    };
    engine
        .decode(cleaned.as_bytes())
        .map_err(|e| err(path, format!("invalid base64: {e}")))
}

/// A leaf for `data`: zero-copy from pinned memory when the arena has pinned memory and the
/// value is at least its threshold long, else copied into the arena.
fn leaf<'a>(data: &[u8], arena: &'a Arena) -> CFPtr<'a> {
    if let Some(mem) = arena.memory() {
        if !data.is_empty() && data.len() >= arena.threshold() {
            if let Ok(buf) = mem.alloc_copy(data) {
                return CFPtr::from_rcbuf(buf, arena);
            }
        }
    }
    CFPtr::new(data, arena)
}

impl<'a> DynMessage<'a> {
    /// Builds message `msg` from its JSON form. String/bytes values are copied into `arena`;
    /// when `arena` has pinned memory, values at least its threshold long are placed there
    /// and sent zero-copy (so their bytes land in the ZERO-COPY AREA).
    pub fn from_json(
        schema: &'a Schema,
        msg: MsgId,
        json: &Json,
        arena: &'a Arena,
    ) -> Result<Self, JsonError> {
        from_json(schema, msg, json, arena, &schema.messages[msg].name)
    }

    /// The JSON form, pretty-printed, fields in increasing number, named as in the `.proto`
    /// (protobuf's `preserving_proto_field_name`).
    pub fn to_json(&self) -> Result<String, JsonError> {
        self.to_json_with(Names::Proto)
    }

    /// [`to_json`](Self::to_json) with the field names of `names`.
    pub fn to_json_with(&self, names: Names) -> Result<String, JsonError> {
        let mut out = String::new();
        write_message(self, &mut out, 0, &self.def().name, names)?;
        Ok(out)
    }
}

fn from_json<'a>(
    schema: &'a Schema,
    msg: MsgId,
    json: &Json,
    arena: &'a Arena,
    path: &str,
) -> Result<DynMessage<'a>, JsonError> {
    if let Some(r) = read_wkt_form(schema, msg, json, arena, path) {
        return r;
    }
    let def = &schema.messages[msg];
    let Json::Object(obj) = json else {
        return Err(err(
            path,
            format!(
                "expected a JSON object for message `{}`, got {}",
                def.full_name,
                describe(json)
            ),
        ));
    };
    let mut m = DynMessage::new(schema, msg);
    let mut oneof_seen: Vec<Option<&str>> = vec![None; def.oneofs.len()];
    for (key, v) in obj {
        let Some((i, f)) = def.field_by_name(key) else {
            let names: Vec<&str> = def.fields.iter().map(|f| f.name.as_str()).collect();
            return Err(err(
                path,
                format!(
                    "unknown field `{key}` in message `{}` (its fields: {})",
                    def.full_name,
                    names.join(", ")
                ),
            ));
        };
        if v.is_null() && (f.repeated || !null_is_a_value(schema, f.kind)) {
            continue;
        }
        if let Some(o) = f.oneof {
            if let Some(prev) = oneof_seen[o] {
                return Err(err(
                    path,
                    format!(
                        "fields `{prev}` and `{}` are both members of oneof `{}`; set at most one",
                        f.name, def.oneofs[o].name
                    ),
                ));
            }
            oneof_seen[o] = Some(f.name.as_str());
        }
        let fpath = format!("{path}.{}", f.name);
        let value = field_value(schema, f, v, arena, &fpath)?;
        m.set(i, value);
    }
    Ok(m)
}

fn field_value<'a>(
    schema: &'a Schema,
    f: &FieldDef,
    v: &Json,
    arena: &'a Arena,
    path: &str,
) -> Result<Value<'a>, JsonError> {
    if !f.repeated {
        return single(schema, f.kind, v, arena, path);
    }
    // map<K, V>: an object of entries.
    if let FieldKind::Message(entry) = f.kind {
        if schema.messages[entry].map_entry {
            let Json::Object(obj) = v else {
                return Err(err(
                    path,
                    format!("expected an object (a map), got {}", describe(v)),
                ));
            };
            let edef = &schema.messages[entry];
            let mut list = MessageList::with_capacity_in(obj.len(), arena);
            for (k, val) in obj {
                let kpath = format!("{path}[{k:?}]");
                let mut e = DynMessage::new(schema, entry);
                if let Some(kf) = edef.fields.iter().position(|x| x.number == 1) {
                    let key_json = map_key_json(edef.fields[kf].kind, k);
                    e.set(
                        kf,
                        single(schema, edef.fields[kf].kind, &key_json, arena, &kpath)?,
                    );
                }
                if let Some(vf) = edef.fields.iter().position(|x| x.number == 2) {
                    if !val.is_null() || null_is_a_value(schema, edef.fields[vf].kind) {
                        e.set(
                            vf,
                            single(schema, edef.fields[vf].kind, val, arena, &kpath)?,
                        );
                    }
                }
                list.append(e);
            }
            return Ok(Value::Messages(list));
        }
    }
    let Json::Array(items) = v else {
        return Err(err(
            path,
            format!("expected an array (repeated field), got {}", describe(v)),
        ));
    };
    let elem_path = |i: usize| format!("{path}[{i}]");
    macro_rules! packed {
        ($variant:ident, $conv:expr) => {{
            let mut l = PackedList::with_capacity_in(items.len(), arena);
            for (i, x) in items.iter().enumerate() {
                let p = elem_path(i);
                l.append($conv(x, p.as_str())?);
            }
            Value::Packed(Packed::$variant(l))
        }};
    }
    use ScalarKind::*;
    Ok(match f.kind {
        FieldKind::Scalar(k) => match k {
            Bool => packed!(Bool, parse_bool),
            Int32 | Sint32 | Sfixed32 => {
                packed!(I32, |x, p| parse_int::<i32>(x, p, "a 32-bit integer"))
            }
            Uint32 | Fixed32 => packed!(U32, |x, p| parse_int::<u32>(
                x,
                p,
                "an unsigned 32-bit integer"
            )),
            Int64 | Sint64 | Sfixed64 => {
                packed!(I64, |x, p| parse_int::<i64>(x, p, "a 64-bit integer"))
            }
            Uint64 | Fixed64 => packed!(U64, |x, p| parse_int::<u64>(
                x,
                p,
                "an unsigned 64-bit integer"
            )),
            Float => packed!(F32, |x, p| parse_float(x, p).map(|v| v as f32)),
            Double => packed!(F64, parse_float),
        },
        FieldKind::Enum(e) => packed!(I32, |x, p| parse_enum(schema, e, x, p)),
        FieldKind::String | FieldKind::Bytes => {
            let mut l = LeafList::with_capacity_in(items.len(), arena);
            for (i, x) in items.iter().enumerate() {
                let p = elem_path(i);
                let data = leaf_bytes(f.kind, x, &p)?;
                l.append(leaf(&data, arena));
            }
            Value::Leaves(l)
        }
        FieldKind::Message(id) => {
            let mut l = MessageList::with_capacity_in(items.len(), arena);
            for (i, x) in items.iter().enumerate() {
                l.append(from_json(schema, id, x, arena, &elem_path(i))?);
            }
            Value::Messages(l)
        }
    })
}

fn map_key_json(kind: FieldKind, key: &str) -> Json {
    match kind {
        FieldKind::Scalar(ScalarKind::Bool) => match key {
            "true" => Json::Bool(true),
            "false" => Json::Bool(false),
            _ => Json::String(key.to_string()),
        },
        _ => Json::String(key.to_string()),
    }
}

fn parse_bool(v: &Json, path: &str) -> Result<bool, JsonError> {
    v.as_bool()
        .ok_or_else(|| err(path, format!("expected true or false, got {}", describe(v))))
}

fn parse_enum(schema: &Schema, e: usize, v: &Json, path: &str) -> Result<i32, JsonError> {
    let def = &schema.enums[e];
    if v.is_null() && def.full_name == "google.protobuf.NullValue" {
        return Ok(0);
    }
    match v {
        Json::String(s) => {
            if let Some(x) = def.values.iter().find(|x| &x.name == s) {
                return Ok(x.number);
            }
            if let Ok(n) = s.parse::<i32>() {
                return Ok(n);
            }
            let names: Vec<&str> = def.values.iter().map(|x| x.name.as_str()).collect();
            Err(err(
                path,
                format!(
                    "`{s}` is not a value of enum `{}` (its values: {})",
                    def.full_name,
                    names.join(", ")
                ),
            ))
        }
        Json::Number(_) => parse_int::<i32>(v, path, "an enum number"),
        _ => Err(err(
            path,
            format!(
                "expected a name or number of enum `{}`, got {}",
                def.full_name,
                describe(v)
            ),
        )),
    }
}

fn leaf_bytes(kind: FieldKind, v: &Json, path: &str) -> Result<Vec<u8>, JsonError> {
    if kind == FieldKind::Bytes {
        return parse_bytes(v, path);
    }
    match v {
        Json::String(s) => Ok(s.as_bytes().to_vec()),
        _ => Err(err(path, format!("expected a string, got {}", describe(v)))),
    }
}

fn single<'a>(
    schema: &'a Schema,
    kind: FieldKind,
    v: &Json,
    arena: &'a Arena,
    path: &str,
) -> Result<Value<'a>, JsonError> {
    use ScalarKind::*;
    Ok(match kind {
        FieldKind::Scalar(k) => match k {
            Bool => Value::Bool(parse_bool(v, path)?),
            Int32 | Sint32 | Sfixed32 => Value::I32(parse_int(v, path, "a 32-bit integer")?),
            Uint32 | Fixed32 => Value::U32(parse_int(v, path, "an unsigned 32-bit integer")?),
            Int64 | Sint64 | Sfixed64 => Value::I64(parse_int(v, path, "a 64-bit integer")?),
            Uint64 | Fixed64 => Value::U64(parse_int(v, path, "an unsigned 64-bit integer")?),
            Float => Value::F32(parse_float(v, path)? as f32),
            Double => Value::F64(parse_float(v, path)?),
        },
        FieldKind::Enum(e) => Value::I32(parse_enum(schema, e, v, path)?),
        FieldKind::String => Value::String(leaf(&leaf_bytes(kind, v, path)?, arena)),
        FieldKind::Bytes => Value::Bytes(leaf(&leaf_bytes(kind, v, path)?, arena)),
        FieldKind::Message(id) => Value::Message(Box::new(from_json(schema, id, v, arena, path)?)),
    })
}

// ---- output ----

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn quote_str(s: &str) -> String {
    Json::String(s.to_string()).to_string()
}

fn float64(v: f64) -> String {
    if v.is_nan() {
        "\"NaN\"".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "\"Infinity\"".into()
        } else {
            "\"-Infinity\"".into()
        }
    } else {
        serde_json::Number::from_f64(v).map_or_else(|| "0".into(), |n| n.to_string())
    }
}

fn float32(v: f32) -> String {
    if v.is_finite() {
        // Shortest text that reads back as the same f32.
        let s = format!("{v:?}");
        if s.contains(['e', 'E']) {
            float64(s.parse::<f64>().unwrap_or(v as f64))
        } else {
            s
        }
    } else {
        float64(v as f64)
    }
}

fn utf8<'b>(p: &'b CFPtr<'_>, path: &str) -> Result<&'b str, JsonError> {
    std::str::from_utf8(p.as_bytes())
        .map_err(|e| err(path, format!("string is not valid UTF-8: {e}")))
}

fn base64(b: &[u8]) -> String {
    quote_str(&base64::engine::general_purpose::STANDARD.encode(b))
}

fn enum_text(schema: &Schema, e: usize, n: i32) -> String {
    if schema.enums[e].full_name == "google.protobuf.NullValue" {
        return "null".into();
    }
    match schema.enums[e].value_by_number(n) {
        Some(v) => quote_str(&v.name),
        None => n.to_string(),
    }
}

fn scalar_text(
    schema: &Schema,
    kind: FieldKind,
    v: &Value<'_>,
    path: &str,
) -> Result<String, JsonError> {
    Ok(match v {
        Value::Bool(x) => x.to_string(),
        Value::I32(x) => match kind {
            FieldKind::Enum(e) => enum_text(schema, e, *x),
            _ => x.to_string(),
        },
        Value::U32(x) => x.to_string(),
        Value::I64(x) => format!("\"{x}\""),
        Value::U64(x) => format!("\"{x}\""),
        Value::F32(x) => float32(*x),
        Value::F64(x) => float64(*x),
        Value::String(p) => quote_str(utf8(p, path)?),
        Value::Bytes(p) => base64(p.as_bytes()),
        _ => return Err(err(path, "internal: not a scalar")),
    })
}

fn write_message(
    m: &DynMessage<'_>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Result<(), JsonError> {
    if let Some(r) = write_wkt_form(m, out, level, path, names) {
        return r;
    }
    if m.fields.is_empty() {
        out.push_str("{}");
        return Ok(());
    }
    out.push_str("{\n");
    let n = m.fields.len();
    for (k, (f, v)) in m.fields().enumerate() {
        indent(out, level + 1);
        let key = match names {
            Names::Proto => &f.name,
            Names::Json => &f.json_name,
        };
        let _ = write!(out, "{}: ", quote_str(key));
        let fpath = format!("{path}.{}", f.name);
        write_value(m.schema, f, v, out, level + 1, &fpath, names)?;
        out.push_str(if k + 1 < n { ",\n" } else { "\n" });
    }
    indent(out, level);
    out.push('}');
    Ok(())
}

fn write_list(out: &mut String, level: usize, items: Vec<String>) {
    if items.is_empty() {
        out.push_str("[]");
        return;
    }
    out.push_str("[\n");
    let n = items.len();
    for (i, it) in items.into_iter().enumerate() {
        indent(out, level + 1);
        out.push_str(&it);
        out.push_str(if i + 1 < n { ",\n" } else { "\n" });
    }
    indent(out, level);
    out.push(']');
}

fn write_value(
    schema: &Schema,
    f: &FieldDef,
    v: &Value<'_>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Result<(), JsonError> {
    match v {
        Value::Message(sub) => write_message(sub, out, level, path, names),
        Value::Packed(p) => {
            let items: Vec<String> = match p {
                Packed::Bool(l) => l.iter().map(|x| x.to_string()).collect(),
                Packed::I32(l) => match f.kind {
                    FieldKind::Enum(e) => l.iter().map(|x| enum_text(schema, e, x)).collect(),
                    _ => l.iter().map(|x| x.to_string()).collect(),
                },
                Packed::U32(l) => l.iter().map(|x| x.to_string()).collect(),
                Packed::I64(l) => l.iter().map(|x| format!("\"{x}\"")).collect(),
                Packed::U64(l) => l.iter().map(|x| format!("\"{x}\"")).collect(),
                Packed::F32(l) => l.iter().map(float32).collect(),
                Packed::F64(l) => l.iter().map(float64).collect(),
            };
            write_list(out, level, items);
            Ok(())
        }
        Value::Leaves(l) => {
            let mut items = Vec::with_capacity(l.len());
            for (i, p) in l.iter().enumerate() {
                items.push(if f.kind == FieldKind::Bytes {
                    base64(p.as_bytes())
                } else {
                    quote_str(utf8(p, &format!("{path}[{i}]"))?)
                });
            }
            write_list(out, level, items);
            Ok(())
        }
        Value::Messages(l) => {
            let entry = match f.kind {
                FieldKind::Message(id) if schema.messages[id].map_entry => Some(id),
                _ => None,
            };
            if let Some(entry) = entry {
                return write_map(schema, entry, l, out, level, path, names);
            }
            let mut items = Vec::with_capacity(l.len());
            for (i, m) in l.iter().enumerate() {
                let mut s = String::new();
                write_message(m, &mut s, level + 1, &format!("{path}[{i}]"), names)?;
                items.push(s);
            }
            write_list(out, level, items);
            Ok(())
        }
        _ => {
            out.push_str(&scalar_text(schema, f.kind, v, path)?);
            Ok(())
        }
    }
}

fn write_map(
    schema: &Schema,
    entry: usize,
    l: &MessageList<'_, DynMessage<'_>>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Result<(), JsonError> {
    let edef = &schema.messages[entry];
    if l.is_empty() {
        out.push_str("{}");
        return Ok(());
    }
    // Every entry as (key, value) text first: the wire may repeat a key, a JSON object must
    // not, and protobuf keeps the last entry of a repeated key.
    let mut entries = Vec::with_capacity(l.len());
    for e in l.iter() {
        let key_field = edef.fields.iter().find(|x| x.number == 1);
        let val_field = edef.fields.iter().find(|x| x.number == 2);
        let mut key = String::new();
        let mut val: Option<String> = None;
        for (f, v) in e.fields() {
            if f.number == 1 {
                key = match v {
                    Value::String(p) => utf8(p, path)?.to_string(),
                    Value::I64(x) => x.to_string(),
                    Value::U64(x) => x.to_string(),
                    _ => scalar_text(schema, f.kind, v, path)?,
                };
            } else if f.number == 2 {
                let mut s = String::new();
                write_value(
                    schema,
                    f,
                    v,
                    &mut s,
                    level + 1,
                    &format!("{path}[{key:?}]"),
                    names,
                )?;
                val = Some(s);
            }
        }
        if key.is_empty() && key_field.is_some_and(|k| k.kind != FieldKind::String) {
            key = match key_field.map(|k| k.kind) {
                Some(FieldKind::Scalar(ScalarKind::Bool)) => "false".into(),
                _ => "0".into(),
            };
        }
        let val = match (val, val_field) {
            (Some(v), _) => v,
            (None, Some(f)) => default_json(f.kind),
            (None, None) => "null".into(),
        };
        entries.push((key, val));
    }
    let mut seen = std::collections::HashSet::new();
    let mut last: Vec<bool> = entries
        .iter()
        .rev()
        .map(|(k, _)| seen.insert(k.as_str()))
        .collect();
    last.reverse();
    out.push_str("{\n");
    let n = last.iter().filter(|&&l| l).count();
    let kept = entries.iter().zip(&last).filter(|(_, &l)| l);
    for (i, ((key, val), _)) in kept.enumerate() {
        indent(out, level + 1);
        let _ = write!(out, "{}: {}", quote_str(key), val);
        out.push_str(if i + 1 < n { ",\n" } else { "\n" });
    }
    indent(out, level);
    out.push('}');
    Ok(())
}

fn default_json(kind: FieldKind) -> String {
    match kind {
        FieldKind::Scalar(ScalarKind::Bool) => "false".into(),
        FieldKind::Scalar(
            ScalarKind::Int64
            | ScalarKind::Uint64
            | ScalarKind::Sint64
            | ScalarKind::Fixed64
            | ScalarKind::Sfixed64,
        ) => "\"0\"".into(),
        FieldKind::Scalar(_) | FieldKind::Enum(_) => "0".into(),
        FieldKind::String | FieldKind::Bytes => "\"\"".into(),
        FieldKind::Message(_) => "{}".into(),
    }
}

// ---- well-known types ----
//
// protobuf's JSON forms of the well-known types: `Timestamp` as RFC 3339 text, `Duration` as
// `"1.5s"`, the wrappers as their bare value, `Struct`/`Value`/`ListValue` as the JSON they
// stand for, `FieldMask` as `"a.b,cD"`, `Any` as an object with `@type`, `NullValue` as
// `null`. The text conversions are `cornflakes-types`'s.

const WRAPPERS: [&str; 9] = [
    "DoubleValue",
    "FloatValue",
    "Int64Value",
    "UInt64Value",
    "Int32Value",
    "UInt32Value",
    "BoolValue",
    "StringValue",
    "BytesValue",
];

/// The well-known type `full_name` names (`Timestamp`), if it is one with a JSON form of its own.
fn wkt(full_name: &str) -> Option<&str> {
    let n = full_name.strip_prefix("google.protobuf.")?;
    let special = [
        "Timestamp",
        "Duration",
        "Struct",
        "Value",
        "ListValue",
        "FieldMask",
        "Any",
    ];
    (special.contains(&n) || WRAPPERS.contains(&n)).then_some(n)
}

/// Whether a JSON `null` is a value of a field of `kind` (a `Value`, or the `NullValue` enum),
/// not "absent".
fn null_is_a_value(schema: &Schema, kind: FieldKind) -> bool {
    match kind {
        FieldKind::Message(id) => schema.messages[id].full_name == "google.protobuf.Value",
        FieldKind::Enum(e) => schema.enums[e].full_name == "google.protobuf.NullValue",
        _ => false,
    }
}

fn index(m: &DynMessage<'_>, number: u32) -> Option<usize> {
    m.def().fields.iter().position(|f| f.number == number)
}

fn int_field(m: &DynMessage<'_>, number: u32) -> i64 {
    match index(m, number).and_then(|i| m.get(i)) {
        Some(Value::I64(v)) => *v,
        Some(Value::I32(v)) => *v as i64,
        _ => 0,
    }
}

/// `lowerCamel` → `snake_case`.
fn snake(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes `m` in its special JSON form, or returns `None` when it has none.
fn write_wkt_form(
    m: &DynMessage<'_>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Option<Result<(), JsonError>> {
    let kind = wkt(&m.def().full_name)?;
    Some(write_wkt(kind, m, out, level, path, names))
}

fn write_wkt(
    kind: &str,
    m: &DynMessage<'_>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Result<(), JsonError> {
    let quote = |s: &str| Json::String(s.to_string()).to_string();
    match kind {
        "Timestamp" => {
            let t = cornflakes_types::timestamp_to_rfc3339(int_field(m, 1), int_field(m, 2) as i32)
                .map_err(|e| err(path, e.to_string()))?;
            out.push_str(&quote(&t));
        }
        "Duration" => {
            let d = cornflakes_types::duration_to_json(int_field(m, 1), int_field(m, 2) as i32)
                .map_err(|e| err(path, e.to_string()))?;
            out.push_str(&quote(&d));
        }
        "Struct" | "ListValue" => {
            // Their one field (a map of Values, a list of Values) is the JSON.
            match m.fields().next() {
                Some((f, v)) => write_value(m.schema(), f, v, out, level, path, names)?,
                None => out.push_str(if kind == "Struct" { "{}" } else { "[]" }),
            }
        }
        "Value" => match m.fields().next() {
            Some((f, _)) if f.number == 1 => out.push_str("null"),
            Some((f, v)) => write_value(m.schema(), f, v, out, level, path, names)?,
            None => out.push_str("null"),
        },
        "FieldMask" => {
            let mut paths = Vec::new();
            if let Some(Value::Leaves(l)) = index(m, 1).and_then(|i| m.get(i)) {
                for p in l.iter() {
                    let p = std::str::from_utf8(p.as_bytes())
                        .map_err(|_| err(path, "a FieldMask path is not UTF-8"))?;
                    paths.push(
                        p.split('.')
                            .map(crate::parse::json_name)
                            .collect::<Vec<_>>()
                            .join("."),
                    );
                }
            }
            out.push_str(&quote(&paths.join(",")));
        }
        "Any" => write_any(m, out, level, path, names)?,
        _ => {
            // A wrapper: its `value`, or the type's default when absent.
            let f = m
                .def()
                .fields
                .iter()
                .find(|f| f.number == 1)
                .ok_or_else(|| err(path, "a wrapper without its `value` field"))?;
            match index(m, 1).and_then(|i| m.get(i)) {
                Some(v) => out.push_str(&scalar_text(m.schema(), f.kind, v, path)?),
                None => out.push_str(&default_json(f.kind)),
            }
        }
    }
    Ok(())
}

/// `{"@type": url, …fields}`, or `{"@type": url, "value": …}` for a well-known type.
fn write_any(
    m: &DynMessage<'_>,
    out: &mut String,
    level: usize,
    path: &str,
    names: Names,
) -> Result<(), JsonError> {
    let schema = m.schema();
    let url = match index(m, 1).and_then(|i| m.get(i)) {
        Some(Value::String(p)) => std::str::from_utf8(p.as_bytes())
            .map_err(|_| err(path, "the Any's type URL is not UTF-8"))?
            .to_string(),
        _ => String::new(),
    };
    let value: &[u8] = match index(m, 2).and_then(|i| m.get(i)) {
        Some(Value::Bytes(p)) => p.as_bytes(),
        _ => &[],
    };
    if url.is_empty() && value.is_empty() {
        out.push_str("{}");
        return Ok(());
    }
    let name = url.rsplit('/').next().unwrap_or(&url);
    let id = schema.message(name).ok_or_else(|| {
        err(
            path,
            format!("the Any holds `{name}`, which the schema does not define"),
        )
    })?;
    let arena = Arena::new();
    let inner = DynMessage::decode(schema, id, value, &arena).map_err(|e| {
        err(
            path,
            format!("the Any's value does not decode as `{name}`: {e}"),
        )
    })?;
    let mut body = String::new();
    write_message(&inner, &mut body, level, path, names)?;
    let type_field = format!(
        "{}: {}",
        Json::String("@type".into()),
        Json::String(url.clone())
    );
    let pad = "  ".repeat(level + 1);
    if wkt(&schema.messages[id].full_name).is_some() {
        out.push_str(&format!(
            "{{\n{pad}{type_field},\n{pad}\"value\": {body}\n{}}}",
            "  ".repeat(level)
        ));
    } else if body == "{}" {
        out.push_str(&format!("{{\n{pad}{type_field}\n{}}}", "  ".repeat(level)));
    } else {
        // `{\n  "a": …` → `{\n  "@type": …,\n  "a": …`
        out.push_str(&format!("{{\n{pad}{type_field},{}", &body[1..]));
    }
    Ok(())
}

/// Reads message `msg` from its special JSON form, or returns `None` when it has none.
fn read_wkt_form<'a>(
    schema: &'a Schema,
    msg: MsgId,
    json: &Json,
    arena: &'a Arena,
    path: &str,
) -> Option<Result<DynMessage<'a>, JsonError>> {
    let kind = wkt(&schema.messages[msg].full_name)?;
    // An `Any` in the usual object form is read here too; other objects of types whose JSON
    // is a string or a bare value are refused below.
    Some(read_wkt(kind, schema, msg, json, arena, path))
}

fn set_number<'a>(m: &mut DynMessage<'a>, number: u32, v: Value<'a>) {
    if let Some(i) = index(m, number) {
        m.set(i, v);
    }
}

fn read_wkt<'a>(
    kind: &str,
    schema: &'a Schema,
    msg: MsgId,
    json: &Json,
    arena: &'a Arena,
    path: &str,
) -> Result<DynMessage<'a>, JsonError> {
    let mut m = DynMessage::new(schema, msg);
    let def = &schema.messages[msg];
    let text = || {
        json.as_str().ok_or_else(|| {
            err(
                path,
                format!("expected a string for `{}`, got {json}", def.full_name),
            )
        })
    };
    match kind {
        "Timestamp" | "Duration" => {
            let (s, n) = if kind == "Timestamp" {
                cornflakes_types::timestamp_from_rfc3339(text()?)
            } else {
                cornflakes_types::duration_from_json(text()?)
            }
            .map_err(|e| err(path, e.to_string()))?;
            if s != 0 {
                set_number(&mut m, 1, Value::I64(s));
            }
            if n != 0 {
                set_number(&mut m, 2, Value::I32(n));
            }
        }
        "FieldMask" => {
            let t = text()?;
            if !t.is_empty() {
                let mut l = LeafList::with_capacity_in(4, arena);
                for p in t.split(',') {
                    let p = p.split('.').map(snake).collect::<Vec<_>>().join(".");
                    l.append(cornflakes::CFPtr::new(p.as_bytes(), arena));
                }
                set_number(&mut m, 1, Value::Leaves(l));
            }
        }
        "Struct" | "ListValue" => {
            // The one field, a map or a list of Values, is the JSON object or array.
            if json.is_object() != (kind == "Struct") || json.is_array() != (kind == "ListValue") {
                let want = if kind == "Struct" {
                    "an object"
                } else {
                    "an array"
                };
                return Err(err(
                    path,
                    format!("expected {want} for a {kind}, got {json}"),
                ));
            }
            if let Some(i) = def.fields.iter().position(|f| f.number == 1) {
                let v = field_value(schema, &def.fields[i], json, arena, path)?;
                m.set(i, v);
            }
        }
        "Value" => {
            let number = match json {
                Json::Null => 1,
                Json::Number(_) => 2,
                Json::String(_) => 3,
                Json::Bool(_) => 4,
                Json::Object(_) => 5,
                Json::Array(_) => 6,
            };
            if let Some(i) = index(&m, number) {
                let f = &def.fields[i];
                let v = if number == 1 {
                    Value::I32(0)
                } else {
                    single(schema, f.kind, json, arena, path)?
                };
                m.set(i, v);
            }
        }
        "Any" => {
            let Json::Object(obj) = json else {
                return Err(err(
                    path,
                    format!("expected an object for an Any, got {json}"),
                ));
            };
            let Some(url) = obj.get("@type").and_then(Json::as_str) else {
                return if obj.is_empty() {
                    Ok(m)
                } else {
                    Err(err(path, "an Any needs its `@type`"))
                };
            };
            let name = url.rsplit('/').next().unwrap_or(url);
            let id = schema.message(name).ok_or_else(|| {
                err(
                    path,
                    format!("`@type` `{url}`: the schema has no message `{name}`"),
                )
            })?;
            let inner = if wkt(&schema.messages[id].full_name).is_some() {
                let v = obj.get("value").unwrap_or(&Json::Null);
                from_json(schema, id, v, arena, path)?
            } else {
                let mut rest = obj.clone();
                rest.remove("@type");
                from_json(schema, id, &Json::Object(rest), arena, path)?
            };
            let bytes = cornflakes::CornflakesObj::serialize_to_vec(&inner);
            set_number(
                &mut m,
                1,
                Value::String(cornflakes::CFPtr::new(url.as_bytes(), arena)),
            );
            set_number(
                &mut m,
                2,
                Value::Bytes(cornflakes::CFPtr::new(&bytes, arena)),
            );
        }
        _ => {
            // A wrapper: the bare value.
            if let Some(i) = index(&m, 1) {
                let v = single(schema, def.fields[i].kind, json, arena, path)?;
                m.set(i, v);
            }
        }
    }
    Ok(m)
}
