//! Target 4a: the `.proto` front end (the crate's own parser, name resolution and validation)
//! and the code generator on arbitrary text. A schema that loads must generate code (or be
//! refused as unsupported or as a name clash), and that code must parse as Rust (syn);
//! anything else is an error that says what and where, never a panic and never an "internal
//! error".
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use cornflakes_codegen::{Config, ErrorKind, Schema};
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("cornflakes-fuzz-proto-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temporary directory");
        d
    })
}

/// At most 64 messages and 400 fields (the seeds have up to 18 and 58).
fn small(schema: &Schema) -> bool {
    let fields: usize = schema.messages.iter().map(|m| m.fields.len()).sum();
    schema.messages.len() <= 64 && fields <= 400
}

fuzz_target!(|data: &[u8]| {
    let file = dir().join("fuzz.proto");
    std::fs::write(&file, data).expect("write the input");
    match Schema::load(&[&file], &[dir()]) {
        // Generating (and formatting) costs ~20 ms per message and ~4 ms per field under ASan
        // and coverage: a schema of hundreds, which 16 KiB can spell, would exceed the 10 s
        // per-input limit. Generation of large schemas is linear and covered by the codegen
        // tests; here it runs on schemas up to 4 × the seeds' largest.
        Ok(schema) if !small(&schema) => {}
        Ok(schema) => match Config::new().rerun_if_changed(false).generate(&schema) {
            Ok(files) => {
                for (name, text) in files {
                    assert!(text.starts_with("// @generated"));
                    if let Err(e) = syn::parse_file(&text) {
                        panic!("generated {name} does not parse as Rust: {e}\n{text}");
                    }
                }
            }
            // Refusals a schema can earn at generation (a construct the compiler does not
            // support, two elements whose Rust names meet, a broken rule of services), one
            // list with the test that replays this oracle (tests/fuzz_inputs.rs).
            Err(e) => assert!(
                e.kind().is_generation_refusal(),
                "a loaded schema fails to generate: {e}"
            ),
        },
        Err(e) => {
            let text = e.to_string();
            assert_ne!(e.kind(), ErrorKind::Internal, "{text}");
            assert!(!text.is_empty());
            if e.kind() == ErrorKind::Parse && std::str::from_utf8(data).is_ok() {
                assert!(
                    text.contains("fuzz.proto"),
                    "a parse error does not say where: {text}"
                );
            }
        }
    }
});
