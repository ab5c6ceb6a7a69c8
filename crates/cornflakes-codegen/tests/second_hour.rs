//! What a user hit in the second hour (issue 28), compiler side: errors that print well from
//! build.rs, one path style, custom options, file arguments resolved against the include
//! paths, and a corpus of real schemas.

use std::path::{Path, PathBuf};

use cornflakes_codegen::{Config, ErrorKind, Schema};

/// A fresh directory below the workspace's `target/`, named relative to the package
/// directory (the test's current directory), as a build script names its files.
fn rel_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(format!(
        "../../target/cf-second-hour-{name}-{}",
        std::process::id()
    ));
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

/// Item 6: `main() -> Result<(), Box<dyn Error>>` prints `Debug`, which was
/// `Error { kind: Parse, message: "…\n4 | …\n  | ^" }` on one line.
#[test]
fn debug_reads_like_display() {
    let dir = rel_dir("debug");
    let bad = write(
        &dir,
        "bad.proto",
        "syntax = \"proto3\";\nmessage M {\n  uint32 id = ;\n}\n",
    );
    let err = Schema::load(&[&bad], &[&dir]).err().unwrap();
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    let debug = format!("{boxed:?}");
    assert_eq!(debug, boxed.to_string());
    assert!(debug.contains("\n3 |   uint32 id = ;\n"), "{debug}");
    assert!(!debug.contains("Error {"), "{debug}");
    let err = Schema::load(&[&bad], &[&dir]).err().unwrap();
    assert!(format!("{err:#?}").contains("kind: Parse"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 6: syntax errors named the file by its absolute path, every other error by the path
/// the caller gave.
#[test]
fn every_error_names_the_file_as_the_caller_did() {
    let dir = rel_dir("paths");
    let syntax = write(
        &dir,
        "syntax.proto",
        "syntax = \"proto3\";\nmessage M { uint32 id = ; }\n",
    );
    let unsupported = write(
        &dir,
        "unsupported.proto",
        "syntax = \"proto2\";\nmessage M { optional M m = 1 [default = 1]; }\n",
    );
    let bad_import = write(
        &dir,
        "imp.proto",
        "syntax = \"proto3\";\nimport \"sub/broken.proto\";\nmessage A { B b = 1; }\n",
    );
    write(
        &dir,
        "sub/broken.proto",
        "syntax = \"proto3\";\nmessage B { uint32 x = ; }\n",
    );
    let shown = |p: &Path| p.display().to_string();
    for (file, expect) in [
        (&syntax, shown(&syntax) + ":2:"),
        (&unsupported, shown(&unsupported) + ":2:13"),
        (&bad_import, shown(&dir.join("sub/broken.proto")) + ":2:"),
    ] {
        let text = Schema::load(&[file], &[&dir]).err().unwrap().to_string();
        assert!(text.starts_with(&expect), "expected {expect}…, got: {text}");
        let abs = std::fs::canonicalize(&dir).unwrap();
        assert!(!text.contains(&*abs.to_string_lossy()), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 6: the missing-import hint used the command line's wording (`-I`) in build.rs too.
#[test]
fn the_missing_import_hint_fits_build_rs_and_the_command() {
    let dir = rel_dir("hint");
    let a = write(
        &dir,
        "a.proto",
        "syntax = \"proto3\";\nimport \"elsewhere/x.proto\";\nmessage A {}\n",
    );
    let text = Schema::load(&[&a], &[&dir]).err().unwrap().to_string();
    assert!(
        text.contains("the `includes` of `compile_protos` in build.rs")
            && text.contains("`-I` on the command line"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 9: `extend google.protobuf.*Options` (custom options) was refused; it is read and
/// left out as prost does, and so is any other `extend`, with a note.
#[test]
fn custom_options_are_accepted_other_extensions_noted() {
    let dir = rel_dir("extend");
    let opts = write(
        &dir,
        "opts.proto",
        r#"syntax = "proto3";
package my.opts;
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { string unit = 50001; }
extend .google.protobuf.MethodOptions { bool idempotent = 50002; }
message Holder {
  extend google.protobuf.MessageOptions { int32 version = 50003; }
  uint32 x = 1;
}
"#,
    );
    let user = write(
        &dir,
        "user.proto",
        r#"syntax = "proto3";
package my;
import "opts.proto";
message Reading {
  option (my.opts.Holder.version) = 2;
  double value = 1 [(my.opts.unit) = "kelvin"];
}
"#,
    );
    let schema = Schema::load(&[&opts, &user], &[&dir]).unwrap();
    let holder = schema.message("my.opts.Holder").unwrap();
    assert_eq!(
        schema.messages[holder].fields.len(),
        1,
        "extension fields left out"
    );
    let files = Config::new().generate(&schema).unwrap();
    let reading = &files
        .iter()
        .find(|(n, _)| n == "my.cornflakes.rs")
        .unwrap()
        .1;
    assert!(
        reading.contains("pub fn get_value(&self) -> f64"),
        "{reading}"
    );
    assert!(!reading.contains("unit") && !reading.contains("version"));

    let other = write(
        &dir,
        "other.proto",
        "syntax = \"proto2\";\nmessage Base { extensions 100 to 200; }\nextend Base { optional int32 more = 100; }\n",
    );
    // Any other `extend` is read and left out with a note (as prost-build leaves it out).
    let schema = Schema::load(&[&other], &[&dir]).unwrap();
    let base = schema.message("Base").unwrap();
    assert!(
        schema.messages[base].fields.is_empty(),
        "extension left out"
    );
    assert_eq!(schema.notes.len(), 1, "{:?}", schema.notes);
    assert!(
        schema.notes[0].starts_with(&format!("{}:3:1: `extend Base` left out", other.display())),
        "{:?}",
        schema.notes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 9: a file argument was looked up from the current directory only; protoc (and now
/// this compiler) also resolves it against the include paths.
#[test]
fn file_arguments_are_resolved_against_the_include_paths() {
    let dir = rel_dir("resolve");
    write(
        &dir,
        "pkg/inner.proto",
        "syntax = \"proto3\";\npackage pkg;\nmessage Inner { uint32 x = 1; }\n",
    );
    let schema = Schema::load(&["pkg/inner.proto"], &[&dir]).unwrap();
    assert!(schema.message("pkg.Inner").is_some());
    let err = Schema::load(&["pkg/nowhere.proto"], &[&dir]).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(err.to_string().contains("each include directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 9: a corpus of real schemas, fetched (not committed) by
/// `scripts/fetch-proto-corpus.sh`: googleapis' common protos (PyPI) and protobuf's
/// well-known types. Every file compiles, the two that declare a `service` into a server and
/// a client, and nothing is left out.
#[test]
fn real_world_corpus_compiles() {
    let corpus = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("proto-corpus");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-proto-corpus.sh");
    let fetched = std::process::Command::new(&script).arg(&corpus).output();
    match fetched {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            test_skip::skip(
                "real_world_corpus_compiles",
                &format!(
                    "fetching the corpus failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            return;
        }
        Err(e) => {
            test_skip::skip(
                "real_world_corpus_compiles",
                &format!("cannot run {}: {e}", script.display()),
            );
            return;
        }
    }
    let (apis, wkt) = (corpus.join("googleapis"), corpus.join("wkt"));
    let mut files = Vec::new();
    collect(&apis, &apis, &mut files);
    assert_eq!(
        files.len(),
        63,
        "googleapis-common-protos 1.76.0 has 63 files"
    );
    let mut wkt_files = Vec::new();
    collect(&wkt, &wkt, &mut wkt_files);
    assert!(wkt_files.iter().any(|f| f.ends_with("descriptor.proto")));

    let (mut ok, mut services, mut extends) = (0, 0, 0);
    for (root, list) in [(&apis, &files), (&wkt, &wkt_files)] {
        for rel in list {
            let text = std::fs::read_to_string(root.join(rel)).unwrap();
            let has_service = text.lines().any(|l| l.starts_with("service "));
            extends += text
                .lines()
                .any(|l| l.starts_with("extend google.protobuf.")) as usize;
            // The file named relative to the include directory, as `cornflakes gen -I` takes it.
            let r = Schema::load(&[rel], &[&apis, &wkt])
                .and_then(|s| Config::new().generate_with_warnings(&s));
            match r {
                Ok((files, warnings)) => {
                    ok += 1;
                    assert!(warnings.is_empty(), "{rel:?}: {warnings:?}");
                    if has_service {
                        assert!(
                            files.iter().any(|(_, code)| code.contains("Server<T>")
                                && code.contains("Client<D>")),
                            "{rel:?}: no service generated"
                        );
                        services += 1;
                    }
                }
                Err(e) => panic!("{rel:?}: {e}"),
            }
        }
    }
    assert!(
        extends >= 10,
        "the corpus declares custom options ({extends} files)"
    );
    assert_eq!(services, 2);
    assert_eq!(ok, files.len() + wkt_files.len());
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "proto") {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    out.sort();
}

/// Two schema elements whose generated Rust names meet are refused by the compiler, naming
/// the Rust item and the module, not left for rustc to report in generated code.
#[test]
fn generated_names_that_meet_are_refused_with_the_item_and_module() {
    let dir = rel_dir("clash");
    let cases = [
        (
            "view.proto",
            "syntax = \"proto3\";\npackage a.b;\nmessage Foo { uint32 id = 1; }\nmessage FooView { uint32 id = 1; }\n",
            "package `a.b`: two schema elements generate the item `FooView` twice in module `a::b`",
        ),
        (
            "bytes.proto",
            "syntax = \"proto3\";\npackage c;\nmessage M { string x = 1; bytes x_bytes = 2; }\n",
            "message `c.M`: field `x` and field `x_bytes` both generate the Rust method `get_x_bytes`",
        ),
        (
            "nested.proto",
            "syntax = \"proto3\";\npackage d;\nmessage Outer { message In { uint32 a = 1; } message InView { uint32 b = 1; } In x = 1; }\n",
            "the item `InView` twice in module `d`, module `outer`",
        ),
    ];
    for (name, text, want) in cases {
        let p = write(&dir, name, text);
        let schema = Schema::load(&[&p], &[&dir]).unwrap();
        let err = Config::new().generate(&schema).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::NameClash, "{name}: {err}");
        assert!(err.to_string().contains(want), "{name}: {err}");
        assert!(err.to_string().contains("rename one of them in the .proto"));
    }
    // Names that only look alike are fine.
    let ok = write(
        &dir,
        "ok.proto",
        "syntax = \"proto3\";\npackage e;\nmessage Foo { string x = 1; bytes x_raw_bytes = 2; }\nmessage Views { uint32 v = 1; }\n",
    );
    let schema = Schema::load(&[&ok], &[&dir]).unwrap();
    assert!(Config::new().generate(&schema).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A well-known type is referred to in `cornflakes-types` (not generated again); another
/// crate's package can be declared with `extern_path`; `compile_well_known_types` generates
/// them after all.
#[test]
fn extern_paths_refer_to_types_generated_elsewhere() {
    let dir = rel_dir("extern");
    write(
        &dir,
        "common.proto",
        "syntax = \"proto3\";\npackage acme.common;\nmessage Money { int64 cents = 1; }\n",
    );
    let order = write(
        &dir,
        "order.proto",
        "syntax = \"proto3\";\npackage shop;\nimport \"google/protobuf/timestamp.proto\";\nimport \"common.proto\";\nmessage Order {\n  google.protobuf.Timestamp at = 1;\n  repeated acme.common.Money prices = 2;\n}\n",
    );
    let common = dir.join("common.proto");
    let schema = Schema::load(&[&order, &common], &[&dir]).unwrap();
    let files = Config::new()
        .extern_path(".acme.common", "::acme_common")
        .generate(&schema)
        .unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["shop.cornflakes.rs"], "acme.common is extern");
    let shop = &files[0].1;
    assert!(shop.contains("::cornflakes_types::Timestamp<'a>"), "{shop}");
    assert!(shop.contains("::acme_common::Money<'a>"), "{shop}");
    assert!(
        shop.contains("::cornflakes_types::TimestampView<'a>"),
        "{shop}"
    );
    // The well-known types generated in place, when asked.
    let wkt = PathBuf::from("google/protobuf/timestamp.proto");
    let schema = Schema::load(&[&order, &wkt], &[&dir]).unwrap();
    let files = Config::new()
        .compile_well_known_types()
        .generate(&schema)
        .unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["google.protobuf.cornflakes.rs", "shop.cornflakes.rs"]
    );
    assert!(
        files[1]
            .1
            .contains("super::google::protobuf::Timestamp<'a>"),
        "{}",
        files[1].1
    );
    let _ = std::fs::remove_dir_all(&dir);
}
