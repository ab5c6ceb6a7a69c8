//! protobuf's JSON forms of the well-known types: `Timestamp` as RFC 3339 text, `Duration` as
//! `"1.5s"`, the wrappers as their bare value, `Struct`/`Value`/`ListValue` as the JSON they
//! stand for, `FieldMask` as `"a.b,cD"`, `Any` as an object with `@type`, `NullValue` as
//! `null`. Text conversions are `cornflakes-types`'s.

use cornflakes::{Arena, LeafList};
use serde_json::Value as Json;

use super::json::{err, from_json, scalar_text, single, write_message, JsonError, Names};
use super::{DynMessage, Value};
use crate::schema::{FieldKind, MsgId, Schema};

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
pub(super) fn null_is_a_value(schema: &Schema, kind: FieldKind) -> bool {
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
pub(super) fn write(
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
                Some((f, v)) => {
                    super::json::write_value(m.schema(), f, v, out, level, path, names)?
                }
                None => out.push_str(if kind == "Struct" { "{}" } else { "[]" }),
            }
        }
        "Value" => match m.fields().next() {
            Some((f, _)) if f.number == 1 => out.push_str("null"),
            Some((f, v)) => super::json::write_value(m.schema(), f, v, out, level, path, names)?,
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
                None => out.push_str(&super::json::default_json(f.kind)),
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
pub(super) fn read<'a>(
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
                let v = super::json::field_value(schema, &def.fields[i], json, arena, path)?;
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
