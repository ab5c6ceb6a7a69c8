//! Services in the schema model: what `Schema::load` reads of a `service` (names, types,
//! streaming, docs, the options of `cornflakes/options.proto`), what it refuses, and the
//! `Config` switches of generation.

use std::path::{Path, PathBuf};

use cornflakes_codegen::{Config, ErrorKind, Schema, OPTIONS_PROTO, OPTIONS_PROTO_PATH};

fn temp_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cf-services-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

const KV: &str = r#"syntax = "proto3";
package demo.v1;

import "cornflakes/options.proto";

message GetReq { bytes key = 1; }
message GetResp { bytes val = 1; }

// The store.
service Store {
  // Reads one key.
  rpc Get(GetReq) returns (GetResp) {
    option (cornflakes.method_id) = 11;
  }
  rpc Put(GetReq) returns (GetResp) {
    option (cornflakes.exactly_once) = true;
  }
  rpc Watch(GetReq) returns (stream GetResp);
  rpc Feed(stream GetReq) returns (GetResp);
}
"#;

#[test]
fn a_service_is_read_with_its_methods_docs_and_options() {
    let dir = temp_dir("model");
    write(&dir, "kv.proto", KV);
    // `cornflakes/options.proto` is not in `dir`: the shipped copy is found.
    let schema = Schema::load(&["kv.proto"], &[&dir]).unwrap();
    assert_eq!(schema.services.len(), 1);
    let s = &schema.services[schema.service("demo.v1.Store").unwrap()];
    assert_eq!(
        schema.service(".demo.v1.Store"),
        schema.service("demo.v1.Store")
    );
    assert_eq!((s.name.as_str(), s.package.as_str()), ("Store", "demo.v1"));
    assert_eq!(s.doc, " The store.");
    assert_eq!((s.loc.line, s.loc.col), (10, 1));
    assert!(schema.files[s.file].is_input);
    let names: Vec<&str> = s.methods.iter().map(|m| m.full_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "demo.v1.Store.Get",
            "demo.v1.Store.Put",
            "demo.v1.Store.Watch",
            "demo.v1.Store.Feed"
        ]
    );
    let get = &s.methods[0];
    assert_eq!(schema.messages[get.input].full_name, "demo.v1.GetReq");
    assert_eq!(schema.messages[get.output].full_name, "demo.v1.GetResp");
    assert_eq!(get.doc, " Reads one key.");
    assert_eq!((get.loc.line, get.loc.col), (12, 3));
    assert_eq!((get.pinned_id, get.exactly_once), (Some(11), false));
    let put = &s.methods[1];
    assert_eq!((put.pinned_id, put.exactly_once), (None, true));
    let (watch, feed) = (&s.methods[2], &s.methods[3]);
    assert!(watch.server_streaming && !watch.client_streaming && watch.is_streaming());
    assert!(feed.client_streaming && !feed.server_streaming && feed.is_streaming());
    assert!(!get.is_streaming() && !put.is_streaming());
    // The imported options file is part of the load, not an input.
    let options = schema
        .files
        .iter()
        .find(|f| f.name == OPTIONS_PROTO_PATH)
        .unwrap();
    assert!(!options.is_input);
    assert_eq!(
        std::fs::read_to_string(&options.path).unwrap(),
        OPTIONS_PROTO
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_vendored_options_file_comes_first() {
    let dir = temp_dir("vendored");
    write(&dir, "kv.proto", KV);
    let vendored = write(&dir, OPTIONS_PROTO_PATH, OPTIONS_PROTO);
    let schema = Schema::load(&["kv.proto"], &[&dir]).unwrap();
    let options = schema
        .files
        .iter()
        .find(|f| f.name == OPTIONS_PROTO_PATH)
        .unwrap();
    assert_eq!(options.path, vendored);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_method_number_outside_the_message_types_is_refused_where_it_is_written() {
    for bad in ["0", "65536", "4294967295"] {
        let dir = temp_dir(&format!("range-{bad}"));
        let text = KV.replace("method_id) = 11", &format!("method_id) = {bad}"));
        let p = write(&dir, "kv.proto", &text);
        let err = Schema::load(&[&p], &[&dir]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}:12:3: method `demo.v1.Store.Get`", p.display())),
            "{text}"
        );
        assert!(text.contains("1 to 65535"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn streaming_rpcs_are_skipped_with_a_warning_or_refused_and_services_can_be_off() {
    let dir = temp_dir("config");
    let p = write(&dir, "kv.proto", KV);
    let schema = Schema::load(&[&p], &[&dir]).unwrap();

    let (files, warnings) = Config::new().generate_with_warnings(&schema).unwrap();
    assert_eq!(files.len(), 1);
    let code = &files[0].1;
    assert!(code.contains("pub struct GetReq"));
    assert!(code.contains("pub trait Store"));
    assert!(code.contains("fn get<") && code.contains("fn put<"));
    // Put is exactly-once: its arm goes through the table; Get's does not.
    assert_eq!(code.matches("rt.once(dp, m)?").count(), 1, "{code}");
    assert!(code.contains("StoreMethod::Put => true"), "{code}");
    let code_once = Config::new()
        .exactly_once("demo.v1.Store.Get")
        .generate(&schema)
        .unwrap();
    assert_eq!(code_once[0].1.matches("rt.once(dp, m)?").count(), 2);
    assert!(!code.contains("fn watch") && !code.contains("fn feed"));
    let shown: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    let at = p.display().to_string();
    assert!(shown[0].starts_with(&format!("{at}:18:3: streaming rpc `demo.v1.Store.Watch`")));
    assert!(shown[1].starts_with(&format!("{at}:19:3: streaming rpc `demo.v1.Store.Feed`")));

    let err = Config::new()
        .refuse_streaming(true)
        .generate(&schema)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(
        err.to_string().starts_with(&format!(
            "{at}:18:3: unsupported streaming rpc `demo.v1.Store.Watch`"
        )),
        "{err}"
    );

    let (off, warnings) = Config::new()
        .services(false)
        .refuse_streaming(true)
        .generate_with_warnings(&schema)
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(off[0].1.contains("pub struct GetReq"));
    assert!(!off[0].1.contains("trait Store") && !off[0].1.contains("cornflakes_rpc"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn method_numbers_default_to_positions_can_be_pinned_and_must_differ() {
    let dir = temp_dir("numbers");
    let p = write(&dir, "kv.proto", KV);
    let schema = Schema::load(&[&p], &[&dir]).unwrap();
    let code = |c: &Config| c.generate(&schema).map(|f| f[0].1.clone());
    // Get is pinned to 11 by the schema; Put is second.
    let text = code(&Config::new()).unwrap();
    assert!(
        text.contains("Get = 11,") && text.contains("Put = 2,"),
        "{text}"
    );
    // Config wins over the schema.
    let text = code(Config::new().method_id("demo.v1.Store.Get", 7)).unwrap();
    assert!(text.contains("Get = 7,") && text.contains("Put = 2,"));
    // Two methods of one number: an error naming both.
    let err = code(Config::new().method_id(".demo.v1.Store.Put", 11)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:15:3: methods `demo.v1.Store.Get` and `demo.v1.Store.Put` both have number 11",
            p.display()
        )),
        "{text}"
    );
    let err = code(Config::new().method_id("demo.v1.Store.Get", 0)).unwrap_err();
    assert!(err.to_string().contains("number 0"), "{err}");
    // A setting that names no method is an error, not ignored.
    let err = code(Config::new().method_id("demo.v1.Store.Gett", 3)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid);
    assert!(
        err.to_string().contains("no method `demo.v1.Store.Gett`"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn services_of_imported_files_are_read_but_not_generated() {
    let dir = temp_dir("imported");
    write(&dir, "kv.proto", KV);
    let top = write(
        &dir,
        "top.proto",
        "syntax = \"proto3\";\npackage top;\nimport \"kv.proto\";\nmessage T { demo.v1.GetReq r = 1; }\n",
    );
    let schema = Schema::load(&[&top], &[&dir]).unwrap();
    assert_eq!(schema.services.len(), 1);
    assert!(!schema.files[schema.services[0].file].is_input);
    let (_, warnings) = Config::new()
        .refuse_streaming(true)
        .generate_with_warnings(&schema)
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_services_rust_path_follows_its_package_modules_and_rust_names() {
    let dir = temp_dir("path");
    write(&dir, "kv.proto", KV);
    write(
        &dir,
        "odd.proto",
        "syntax = \"proto3\";\npackage My.type;\nmessage M {}\nservice store_api { rpc Get(M) returns (M); }\n",
    );
    let schema = Schema::load(&["kv.proto", "odd.proto"], &[&dir]).unwrap();
    let path = |name| cornflakes_codegen::service_rust_path(&schema, schema.service(name).unwrap());
    assert_eq!(path("demo.v1.Store"), "demo::v1::Store");
    assert_eq!(path("My.type.store_api"), "my::type_::StoreApi");
}
