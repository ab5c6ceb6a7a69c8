//! The command's JSON against a real implementation of protobuf's JSON mapping: Python's
//! `google.protobuf.json_format`, with descriptors from `protoc --descriptor_set_out`.
//!
//! For random messages (seeded) of several schemas: our JSON (proto field names) is read by
//! json_format and written back, which must give the same JSON (what one writes, the other
//! reads the same); and json_format's own output with its default lowerCamelCase names is read
//! by us and written again, which must give the same JSON too. Both sides omit fields whose
//! value is the default (protobuf omits proto3 fields without presence at their default,
//! Cornflakes tracks presence for every field), so defaults are dropped before comparing.
//! Without protoc or the Python package (crates/cornflakes-cli/PIP_PACKAGES), SKIPPED.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use cornflakes::Arena;
use cornflakes_codegen::dynamic::{DynMessage, Names};
use cornflakes_codegen::schema::{FieldDef, FieldKind, MsgId, ScalarKind, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value as Json};

const MESSAGES_PER_SCHEMA: usize = 60;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Why the test cannot run here, if it cannot.
fn missing_tools() -> Option<String> {
    let protoc = Command::new("protoc").arg("--version").output();
    if !protoc.is_ok_and(|o| o.status.success()) {
        return Some("protoc is not installed (Debian: protobuf-compiler)".into());
    }
    let py = Command::new("python3")
        .args(["-c", "import google.protobuf.json_format"])
        .output();
    if !py.is_ok_and(|o| o.status.success()) {
        return Some(
            "Python's protobuf package is not installed (crates/cornflakes-cli/PIP_PACKAGES)"
                .into(),
        );
    }
    None
}

/// (include directory, file, message) of each schema checked.
fn schemas() -> Vec<(PathBuf, &'static str, &'static str)> {
    let m = manifest();
    vec![
        (m.join("tests/json"), "mapping.proto", "mapping.All"),
        (
            m.join("../cornflakes-codegen/tests/corpus/protobuf"),
            "google/protobuf/test_messages_proto3.proto",
            "protobuf_test_messages.proto3.TestAllTypesProto3",
        ),
        (m.join("../../schemas"), "kv.proto", "kv.PutMReq"),
    ]
}

#[test]
fn json_matches_protobufs_json_format() {
    if let Some(why) = missing_tools() {
        test_skip::skip("json_matches_protobufs_json_format", &why);
        return;
    }
    let tmp = std::env::temp_dir().join(format!("cf-json-mapping-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut rng = SmallRng::seed_from_u64(0x6a73_6f6e);
    let mut checked = 0;
    for (k, (include, file, root)) in schemas().into_iter().enumerate() {
        let schema = Schema::load(&[include.join(file)], &[&include]).unwrap();
        let id = schema.message(root).unwrap();
        let set = tmp.join(format!("{k}.pb"));
        // kv.proto imports the options file cornflakes-codegen ships; protoc needs it named.
        let shipped = manifest().join("../cornflakes-codegen/proto");
        let st = Command::new("protoc")
            .arg(format!("-I{}", include.display()))
            .arg(format!("-I{}", shipped.display()))
            .args([
                "--include_imports",
                &format!("--descriptor_set_out={}", set.display()),
                file,
            ])
            .status()
            .unwrap();
        assert!(st.success(), "protoc failed on {file}");
        // Ours: random JSON → our message → our JSON.
        let mut ours = Vec::new();
        for _ in 0..MESSAGES_PER_SCHEMA {
            let input = random_message(&schema, id, &mut rng, 0);
            let arena = Arena::new();
            let m = DynMessage::from_json(&schema, id, &input, &arena)
                .unwrap_or_else(|e| panic!("{root}: {e}\n{input:#}"));
            ours.push(m.to_json().unwrap());
        }
        let answers = json_format(&set, root, &ours);
        for (our, answer) in ours.iter().zip(answers) {
            let our_json: Json = serde_json::from_str(our).unwrap();
            if let Some(e) = answer.get("error") {
                panic!("{root}: json_format refused our JSON: {e}\n{our}");
            }
            let theirs: Json = serde_json::from_str(answer["proto"].as_str().unwrap()).unwrap();
            assert_eq!(
                normalize(&schema, id, &our_json),
                normalize(&schema, id, &theirs),
                "{root}: json_format reads our JSON differently\nours:   {our}\ntheirs: {theirs:#}"
            );
            // Theirs, with lowerCamelCase names, read by us and written again.
            let camel: Json = serde_json::from_str(answer["camel"].as_str().unwrap()).unwrap();
            let arena = Arena::new();
            let m = DynMessage::from_json(&schema, id, &camel, &arena)
                .unwrap_or_else(|e| panic!("{root}: we refuse json_format's JSON: {e}\n{camel:#}"));
            let again: Json = serde_json::from_str(&m.to_json().unwrap()).unwrap();
            assert_eq!(
                normalize(&schema, id, &again),
                normalize(&schema, id, &our_json),
                "{root}: json_format's JSON read back differs\ntheirs: {camel:#}"
            );
            // And our lowerCamelCase output is json_format's, names and all.
            let ours_camel: Json =
                serde_json::from_str(&m.to_json_with(Names::Json).unwrap()).unwrap();
            assert_eq!(
                normalize_camel(&schema, id, &ours_camel),
                normalize_camel(&schema, id, &camel),
                "{root}: lowerCamelCase names differ"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * MESSAGES_PER_SCHEMA);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// json_format's answers for `cases` (JSON texts of message `root`).
fn json_format(set: &Path, root: &str, cases: &[String]) -> Vec<Json> {
    let script = manifest().join("tests/json/json_format_check.py");
    let req = json!({
        "descriptor_set": set.display().to_string(),
        "cases": cases.iter().map(|c| json!({"type": root, "json": c})).collect::<Vec<_>>(),
    });
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "json_format_check.py failed");
    let answers: Vec<Json> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answers.len(), cases.len());
    answers
}

// ---- random JSON of a message ----

fn wkt_name(schema: &Schema, kind: FieldKind) -> Option<&str> {
    match kind {
        FieldKind::Message(id) => schema.messages[id]
            .full_name
            .strip_prefix("google.protobuf."),
        FieldKind::Enum(e) => schema.enums[e].full_name.strip_prefix("google.protobuf."),
        _ => None,
    }
}

fn random_message(schema: &Schema, id: MsgId, rng: &mut SmallRng, depth: usize) -> Json {
    let def = &schema.messages[id];
    let mut obj = Map::new();
    let mut oneof_done = vec![false; def.oneofs.len()];
    for f in &def.fields {
        if !rng.gen_bool(0.6) {
            continue;
        }
        if let Some(o) = f.oneof {
            if oneof_done[o] {
                continue;
            }
            oneof_done[o] = true;
        }
        if matches!(f.kind, FieldKind::Message(_)) && depth >= 3 {
            continue;
        }
        obj.insert(f.name.clone(), random_field(schema, f, rng, depth));
    }
    Json::Object(obj)
}

fn random_field(schema: &Schema, f: &FieldDef, rng: &mut SmallRng, depth: usize) -> Json {
    if !f.repeated {
        return random_single(schema, f.kind, rng, depth);
    }
    let n = rng.gen_range(0..4);
    if let FieldKind::Message(e) = f.kind {
        let entry = &schema.messages[e];
        if entry.map_entry {
            let mut obj = Map::new();
            for _ in 0..n {
                let key = match random_single(schema, entry.fields[0].kind, rng, depth) {
                    Json::String(s) => s,
                    other => other.to_string(),
                };
                obj.insert(
                    key,
                    random_single(schema, entry.fields[1].kind, rng, depth + 1),
                );
            }
            return Json::Object(obj);
        }
    }
    Json::Array(
        (0..n)
            .map(|_| random_single(schema, f.kind, rng, depth + 1))
            .collect(),
    )
}

fn random_text(rng: &mut SmallRng) -> String {
    const PIECES: [&str; 8] = ["a", "Z", "é", "\"", "\\", "\n", "日本", "\u{1F600}"];
    (0..rng.gen_range(0..6))
        .map(|_| PIECES[rng.gen_range(0..PIECES.len())])
        .collect()
}

fn random_float(rng: &mut SmallRng, f32_only: bool) -> Json {
    match rng.gen_range(0..10) {
        0 => json!("NaN"),
        1 => json!("Infinity"),
        2 => json!("-Infinity"),
        _ => {
            let v: f64 = rng.gen_range(-1e6..1e6) * 10f64.powi(rng.gen_range(-8..8));
            let v = if f32_only { v as f32 as f64 } else { v };
            json!(v)
        }
    }
}

fn random_single(schema: &Schema, kind: FieldKind, rng: &mut SmallRng, depth: usize) -> Json {
    if let Some(w) = wkt_name(schema, kind) {
        if let Some(j) = random_wkt(w, rng, depth) {
            return j;
        }
    }
    match kind {
        FieldKind::Scalar(k) => match k {
            ScalarKind::Bool => json!(rng.gen_bool(0.5)),
            ScalarKind::Int32 | ScalarKind::Sint32 | ScalarKind::Sfixed32 => {
                json!(rng.gen::<i32>() >> rng.gen_range(0..31))
            }
            ScalarKind::Uint32 | ScalarKind::Fixed32 => {
                json!(rng.gen::<u32>() >> rng.gen_range(0..31))
            }
            ScalarKind::Int64 | ScalarKind::Sint64 | ScalarKind::Sfixed64 => {
                let v = rng.gen::<i64>() >> rng.gen_range(0..63);
                if rng.gen_bool(0.5) {
                    json!(v.to_string())
                } else {
                    json!(v >> 12) // within a double's exact integers
                }
            }
            ScalarKind::Uint64 | ScalarKind::Fixed64 => {
                json!((rng.gen::<u64>() >> rng.gen_range(0..63)).to_string())
            }
            ScalarKind::Float => random_float(rng, true),
            ScalarKind::Double => random_float(rng, false),
        },
        FieldKind::String => json!(random_text(rng)),
        FieldKind::Bytes => {
            let b: Vec<u8> = (0..rng.gen_range(0..9)).map(|_| rng.gen()).collect();
            json!(base64::engine::general_purpose::STANDARD.encode(b))
        }
        FieldKind::Enum(e) => {
            let values = &schema.enums[e].values;
            json!(values[rng.gen_range(0..values.len())].name)
        }
        FieldKind::Message(id) => random_message(schema, id, rng, depth + 1),
    }
}

fn random_json(rng: &mut SmallRng, depth: usize) -> Json {
    match rng.gen_range(0..if depth > 2 { 4 } else { 6 }) {
        0 => Json::Null,
        1 => json!(rng.gen_bool(0.5)),
        2 => json!(rng.gen_range(-1e9..1e9f64).round() / 8.0),
        3 => json!(random_text(rng)),
        4 => Json::Array(
            (0..rng.gen_range(0..3))
                .map(|_| random_json(rng, depth + 1))
                .collect(),
        ),
        _ => Json::Object(
            (0..rng.gen_range(0..3))
                .map(|i| {
                    (
                        format!("k{i}{}", random_text(rng)),
                        random_json(rng, depth + 1),
                    )
                })
                .collect(),
        ),
    }
}

fn random_wkt(name: &str, rng: &mut SmallRng, depth: usize) -> Option<Json> {
    Some(match name {
        "Timestamp" => {
            let s = rng.gen_range(
                cornflakes_types::MIN_TIMESTAMP_SECONDS..=cornflakes_types::MAX_TIMESTAMP_SECONDS,
            );
            let n = [
                0,
                1_000_000 * rng.gen_range(0..1000),
                rng.gen_range(0..1_000_000_000),
            ][rng.gen_range(0..3)];
            json!(cornflakes_types::timestamp_to_rfc3339(s, n).unwrap())
        }
        "Duration" => {
            let s = rng.gen_range(-1_000_000i64..1_000_000);
            let n = rng.gen_range(0..1_000_000_000) * s.signum() as i32;
            json!(cornflakes_types::duration_to_json(s, n).unwrap())
        }
        "Int32Value" => json!(rng.gen::<i32>()),
        "UInt32Value" => json!(rng.gen::<u32>()),
        "Int64Value" => json!(rng.gen::<i64>().to_string()),
        "UInt64Value" => json!(rng.gen::<u64>().to_string()),
        "FloatValue" => random_float(rng, true),
        "DoubleValue" => random_float(rng, false),
        "BoolValue" => json!(rng.gen_bool(0.5)),
        "StringValue" => json!(random_text(rng)),
        "BytesValue" => json!(base64::engine::general_purpose::STANDARD.encode(random_text(rng))),
        "Struct" => Json::Object(
            (0..rng.gen_range(0..3))
                .map(|i| (format!("f{i}"), random_json(rng, depth)))
                .collect(),
        ),
        "Value" => match random_json(rng, depth) {
            Json::Null => json!(1.5),
            v => v,
        },
        "ListValue" => Json::Array(
            (0..rng.gen_range(0..3))
                .map(|_| random_json(rng, depth))
                .collect(),
        ),
        "FieldMask" => json!(["a", "fooBar", "x.yZ"][..rng.gen_range(0..4)].join(",")),
        "Empty" => json!({}),
        "Any" => {
            if rng.gen_bool(0.5) {
                json!({"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1.5s"})
            } else {
                json!({"@type": "type.googleapis.com/google.protobuf.Timestamp", "value": "2001-02-03T04:05:06Z"})
            }
        }
        "NullValue" => Json::Null,
        _ => return None,
    })
}

// ---- comparison ----

/// `json` (an object of message `id`) without the fields at their default, the form both
/// sides agree on; float32 values rounded as float32.
fn normalize(schema: &Schema, id: MsgId, json: &Json) -> Json {
    normalize_with(schema, id, json, false)
}

fn normalize_camel(schema: &Schema, id: MsgId, json: &Json) -> Json {
    normalize_with(schema, id, json, true)
}

fn normalize_with(schema: &Schema, id: MsgId, json: &Json, camel: bool) -> Json {
    let def = &schema.messages[id];
    if def.full_name.starts_with("google.protobuf.") {
        return json.clone(); // a well-known type's own form: compared as it is
    }
    let Json::Object(obj) = json else {
        return json.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let f = def
            .fields
            .iter()
            .find(|f| {
                if camel {
                    f.json_name == *k
                } else {
                    f.name == *k
                }
            })
            .unwrap_or_else(|| panic!("unknown key `{k}` for {}", def.full_name));
        let v = normalize_value(schema, f, v, camel);
        let default = f.oneof.is_none() && is_default(schema, f, &v);
        if !default {
            out.insert(k.clone(), v);
        }
    }
    Json::Object(out)
}

fn normalize_value(schema: &Schema, f: &FieldDef, v: &Json, camel: bool) -> Json {
    let one = |x: &Json| match f.kind {
        FieldKind::Message(m) => normalize_with(schema, m, x, camel),
        FieldKind::Scalar(ScalarKind::Float) => match x.as_f64() {
            Some(n) => json!(n as f32),
            None => x.clone(),
        },
        _ => x.clone(),
    };
    match (f.repeated, v, f.kind) {
        (true, Json::Object(map), FieldKind::Message(e)) if schema.messages[e].map_entry => {
            let vf = &schema.messages[e].fields[1];
            Json::Object(
                map.iter()
                    .map(|(k, x)| (k.clone(), normalize_value(schema, vf, x, camel)))
                    .collect(),
            )
        }
        (true, Json::Array(items), _) => Json::Array(items.iter().map(one).collect()),
        _ => one(v),
    }
}

fn is_default(schema: &Schema, f: &FieldDef, v: &Json) -> bool {
    if f.repeated {
        return matches!(v, Json::Array(a) if a.is_empty())
            || matches!(v, Json::Object(o) if o.is_empty());
    }
    match f.kind {
        FieldKind::Message(_) => false,
        FieldKind::Enum(e) => {
            let first = &schema.enums[e].values[0];
            *v == json!(first.name) || *v == json!(first.number) || v.is_null()
        }
        _ => {
            matches!(v, Json::Bool(false) | Json::Null)
                || v.as_f64() == Some(0.0) && !v.is_string()
                || *v == json!("0")
                || *v == json!("")
        }
    }
}
