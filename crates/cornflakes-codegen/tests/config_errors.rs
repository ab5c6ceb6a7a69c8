//! A `Config` path that is not a Rust path is the user's mistake: a `Config` error that names
//! the setting, never an internal error, and never a silently ignored setting.

use std::path::PathBuf;

use cornflakes_codegen::{Config, ErrorKind, Schema};

fn schema() -> (Schema, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cf-config-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("t.proto"),
        "syntax = \"proto3\";\npackage t;\nimport \"google/protobuf/timestamp.proto\";\n\
         message M { bytes b = 1; google.protobuf.Timestamp at = 2; }\n",
    )
    .unwrap();
    (Schema::load(&["t.proto"], &[&dir]).unwrap(), dir)
}

/// Sets one path of a `Config`.
type Setter = fn(&mut Config);

#[test]
fn bad_paths_in_config_are_config_errors_naming_the_setting() {
    let (schema, _dir) = schema();
    let cases: [(&str, Setter); 4] = [
        ("Config::runtime_path", |c| {
            c.runtime_path("not a path");
        }),
        ("Config::runtime_path", |c| {
            c.runtime_path("crate::");
        }),
        ("Config::rpc_path", |c| {
            c.rpc_path("::cornflakes_rpc +");
        }),
        ("Config::extern_path(\".google.protobuf\"", |c| {
            c.extern_path(".google.protobuf", "::my types");
        }),
    ];
    for (setting, set) in cases {
        let mut c = Config::new();
        set(&mut c);
        let e = c.generate(&schema).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        let text = e.to_string();
        assert!(text.contains(setting), "{text}");
        assert!(!text.contains("internal error"), "{text}");
    }
}

#[test]
fn good_paths_generate() {
    let (schema, _dir) = schema();
    let mut c = Config::new();
    c.runtime_path("crate::rt")
        .rpc_path("::cornflakes_rpc")
        .extern_path(".google.protobuf", "::my_types::wkt");
    let files = c.generate(&schema).unwrap();
    let text: String = files.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        text.contains("crate :: rt") || text.contains("crate::rt"),
        "{text}"
    );
    assert!(text.contains("my_types"), "{text}");
}
