//! `Struct`, `Value` and `ListValue` ↔ `serde_json::Value` (feature `json`): the JSON a
//! `Struct` stands for, and back.

use cornflakes::{Arena, CFString};
use serde_json::{Map, Number, Value as Json};

use crate::value::KindValue;
use crate::{ListValue, NullValue, Struct, Value};

impl<'a> Value<'a> {
    /// The `Value` of a JSON value, in `arena` (numbers as doubles, as protobuf holds them).
    pub fn from_json(json: &Json, arena: &'a Arena) -> Self {
        let mut v = Value::new_in(arena);
        match json {
            Json::Null => v.set_null_value(NullValue::NullValue),
            Json::Bool(b) => v.set_bool_value(*b),
            Json::Number(n) => v.set_number_value(n.as_f64().unwrap_or(f64::NAN)),
            Json::String(s) => v.set_string_value(CFString::new(s, arena)),
            Json::Array(items) => v.set_list_value(ListValue::from_json(items, arena)),
            Json::Object(map) => v.set_struct_value(Struct::from_json(map, arena)),
        }
        v
    }

    /// The JSON value this `Value` holds (`null` when no kind is set; a number that JSON
    /// cannot write, NaN or an infinity, as `null`).
    pub fn to_json(&self) -> Json {
        match self.get_kind() {
            None | Some(KindValue::NullValue(_)) => Json::Null,
            Some(KindValue::BoolValue(b)) => Json::Bool(b),
            Some(KindValue::NumberValue(n)) => Number::from_f64(n).map_or(Json::Null, Json::Number),
            Some(KindValue::StringValue(s)) => {
                Json::String(String::from_utf8_lossy(s.as_bytes()).into_owned())
            }
            Some(KindValue::ListValue(l)) => l.to_json(),
            Some(KindValue::StructValue(s)) => s.to_json(),
        }
    }
}

impl<'a> Struct<'a> {
    /// The `Struct` of a JSON object, in `arena`.
    pub fn from_json(map: &Map<String, Json>, arena: &'a Arena) -> Self {
        let mut s = Struct::new_in(arena);
        for (k, v) in map {
            s.insert_fields(k, Value::from_json(v, arena));
        }
        s
    }

    /// The JSON object (a key that repeats on the wire keeps its last value).
    pub fn to_json(&self) -> Json {
        let mut map = Map::new();
        for e in self.get_fields().iter() {
            let key = String::from_utf8_lossy(e.get_key().as_bytes()).into_owned();
            let value = e.get_value().map_or(Json::Null, Value::to_json);
            map.insert(key, value);
        }
        Json::Object(map)
    }
}

impl<'a> ListValue<'a> {
    /// The `ListValue` of a JSON array, in `arena`.
    pub fn from_json(items: &[Json], arena: &'a Arena) -> Self {
        let mut l = ListValue::new_in(arena);
        l.init_values(items.len());
        for it in items {
            l.get_mut_values().append(Value::from_json(it, arena));
        }
        l
    }

    /// The JSON array.
    pub fn to_json(&self) -> Json {
        Json::Array(self.get_values().iter().map(Value::to_json).collect())
    }
}
