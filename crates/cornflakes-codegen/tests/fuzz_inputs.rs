//! The `proto_parse` fuzz target's oracle (fuzz/fuzz_targets/proto_parse.rs) on its seeds, its
//! regressions and prefixes of them, as an ordinary test: no panic, never an
//! internal error, a parse error names the file, and the code generated for a schema that
//! loads parses as Rust.

use std::path::{Path, PathBuf};

use cornflakes_codegen::{Config, ErrorKind, Schema};

fn inputs() -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut out = Vec::new();
    for dir in ["seeds/proto", "regressions/proto_parse"] {
        for e in std::fs::read_dir(fuzz.join(dir)).unwrap() {
            out.push(e.unwrap().path());
        }
    }
    out.sort();
    assert!(out.len() >= 10, "{out:?}");
    out
}

/// What the fuzz target checks, on one input.
fn check(dir: &Path, data: &[u8], generate: bool) {
    let file = dir.join("fuzz.proto");
    std::fs::write(&file, data).unwrap();
    match Schema::load(&[&file], &[dir]) {
        Ok(_) if !generate => {}
        Ok(schema) => match Config::new().print_warnings(false).generate(&schema) {
            Ok(files) => {
                for (name, text) in files {
                    if let Err(e) = syn::parse_file(&text) {
                        panic!(
                            "generated {name} does not parse: {e}\n{}",
                            String::from_utf8_lossy(data)
                        );
                    }
                }
            }
            Err(e) => assert!(
                e.kind().is_generation_refusal(),
                "{e}\n{}",
                String::from_utf8_lossy(data)
            ),
        },
        Err(e) => {
            assert_ne!(e.kind(), ErrorKind::Internal, "{e}");
            if e.kind() == ErrorKind::Parse && std::str::from_utf8(data).is_ok() {
                assert!(e.to_string().contains("fuzz.proto"), "{e}");
            }
        }
    }
}

#[test]
fn seeds_regressions_and_their_prefixes_hold_the_fuzz_oracle() {
    let dir = std::env::temp_dir().join(format!("cf-fuzz-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut runs = 0;
    for input in inputs() {
        let data = std::fs::read(&input).unwrap();
        check(&dir, &data, true);
        // Prefixes cut everywhere a construct can be left open (every 3rd byte), the code of
        // one in ten generated (generation is what a debug build spends its time on).
        for (k, end) in (0..data.len()).step_by(3).enumerate() {
            check(&dir, &data[..end], k % 10 == 0);
            runs += 1;
        }
    }
    assert!(runs > 1000, "{runs}");
    let _ = std::fs::remove_dir_all(&dir);
}
