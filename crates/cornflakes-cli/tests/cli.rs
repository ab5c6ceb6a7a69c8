//! The `cornflakes` command end to end: the spec's worked examples both ways, `gen`, and the
//! error paths (bad input exits non-zero with a message saying what and where, never a panic).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn examples_proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cornflakes-codegen/gen-tests/protos/examples.proto")
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cornflakes"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may exit (on a bad schema) before reading its input.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects failure: exit code 1, a message, no panic.
fn fails(args: &[&str], stdin: &[u8]) -> String {
    let o = run(args, stdin);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "expected exit 1: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cornflakes-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[path = "../../cornflakes/tests/common/mod.rs"]
mod vectors;

/// The worked examples as `--hex` prints them.
fn example1() -> String {
    vectors::compact(vectors::EXAMPLE1)
}

fn example2() -> String {
    vectors::compact(vectors::EXAMPLE2)
}

const EXAMPLE1_JSON: &str = r#"{"id": 7, "vals": ["aGVsbG8=", "d29ybGQh"]}"#;
const EXAMPLE2_JSON: &str =
    r#"{"a": 1, "in": {"b": "YWI=", "f": true}, "list": [{"b": "eHl6"}, {}], "nums": [-1, 2]}"#;

#[test]
fn example1_encodes_to_the_spec_bytes() {
    let p = examples_proto();
    let args = [
        "encode",
        "--schema",
        p.to_str().unwrap(),
        "--message",
        "examples.GetM",
    ];
    let o = run(&[&args[..], &["--hex"]].concat(), EXAMPLE1_JSON.as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap().trim(), example1());
    // Raw output is the same bytes.
    let raw = run(&args, EXAMPLE1_JSON.as_bytes());
    let hex: String = raw.stdout.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, example1());
}

#[test]
fn example1_decodes_to_json() {
    let p = examples_proto();
    let o = run(
        &[
            "decode",
            "--schema",
            p.to_str().unwrap(),
            "--message",
            "GetM",
            "--hex",
        ],
        example1().as_bytes(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "{\n  \"id\": 7,\n  \"vals\": [\n    \"aGVsbG8=\",\n    \"d29ybGQh\"\n  ]\n}\n"
    );
}

#[test]
fn example2_encodes_to_the_spec_bytes_with_a_zero_copy_leaf() {
    let p = examples_proto();
    let o = run(
        &[
            "encode",
            "--schema",
            p.to_str().unwrap(),
            "-I",
            p.parent().unwrap().to_str().unwrap(),
            "--message",
            "examples.Outer",
            "--hex",
            "--zero-copy-threshold",
            "3",
        ],
        EXAMPLE2_JSON.as_bytes(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap().trim(), example2());
}

#[test]
fn example2_decodes_to_json() {
    let p = examples_proto();
    let o = run(
        &[
            "decode",
            "--schema",
            p.to_str().unwrap(),
            "--message",
            "examples.Outer",
            "--hex",
        ],
        example2().as_bytes(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // 64-bit integers come out as strings (protobuf JSON mapping).
    let expected: serde_json::Value = serde_json::from_str(
        r#"{"a": "1", "in": {"b": "YWI=", "f": true}, "list": [{"b": "eHl6"}, {}], "nums": [-1, 2]}"#,
    )
    .unwrap();
    assert_eq!(out, expected);
}

#[test]
fn gen_writes_one_file_per_package_only_when_changed() {
    let out = temp_dir("gen");
    let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    let args: [String; 7] = [
        "gen".into(),
        schemas.join("kv.proto").to_str().unwrap().to_string(),
        schemas.join("echo.proto").to_str().unwrap().to_string(),
        "-I".into(),
        schemas.to_str().unwrap().to_string(),
        "-o".into(),
        out.to_str().unwrap().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args, b"");
    assert!(o.status.success(), "{}", stderr(&o));
    let kv = std::fs::read_to_string(out.join("kv.cornflakes.rs")).unwrap();
    assert!(kv.starts_with("// @generated by cornflakes-codegen from kv.proto"));
    assert!(kv.contains("pub struct GetMReq<'a>"));
    assert!(out.join("echo.cornflakes.rs").is_file());
    let before = std::fs::metadata(out.join("kv.cornflakes.rs"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(run(&args, b"").status.success());
    let after = std::fs::metadata(out.join("kv.cornflakes.rs"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "an unchanged file must not be rewritten");
}

#[test]
fn malformed_proto_reports_file_line_and_column() {
    let d = temp_dir("bad");
    std::fs::write(
        d.join("bad.proto"),
        "syntax = \"proto3\";\nmessage M {\n  uint32 id = ;\n}\n",
    )
    .unwrap();
    let p = d.join("bad.proto");
    let err = fails(
        &["encode", "--schema", p.to_str().unwrap(), "--message", "M"],
        b"{}",
    );
    assert!(err.contains("bad.proto:3:"), "{err}");
    let err = fails(
        &["gen", p.to_str().unwrap(), "-o", d.to_str().unwrap()],
        b"",
    );
    assert!(err.contains("bad.proto:3:"), "{err}");
}

#[test]
fn unsupported_constructs_are_rejected_with_their_location_and_services_warned() {
    let d = temp_dir("unsupported");
    std::fs::write(
        d.join("svc.proto"),
        "syntax = \"proto3\";\nmessage M { uint32 id = 1; }\n\nservice S {\n  rpc Get(M) returns (M);\n  rpc Watch(M) returns (stream M);\n}\n",
    )
    .unwrap();
    // A service is generated; what generation leaves out (a streaming rpc) is a warning
    // naming it, not an error.
    let p = d.join("svc.proto");
    let o = run(
        &["gen", p.to_str().unwrap(), "-o", d.to_str().unwrap()],
        b"",
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.starts_with("warning: ") && err.contains("svc.proto:6:3: streaming rpc `S.Watch`"),
        "{err}"
    );
    let code = std::fs::read_to_string(d.join("_.cornflakes.rs")).unwrap();
    assert!(
        code.contains("pub trait S ") && code.contains("fn get<"),
        "{code}"
    );
    assert!(code.contains("use ::cornflakes_rpc as cf_rpc;"), "{code}");
    let o = run(
        &[
            "gen",
            p.to_str().unwrap(),
            "-o",
            d.to_str().unwrap(),
            "--rpc-path",
            "crate::rpc",
        ],
        b"",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let code = std::fs::read_to_string(d.join("_.cornflakes.rs")).unwrap();
    assert!(code.contains("use crate::rpc as cf_rpc;"), "{code}");
    let o = run(
        &[
            "gen",
            p.to_str().unwrap(),
            "-o",
            d.to_str().unwrap(),
            "--no-services",
        ],
        b"",
    );
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
    let code = std::fs::read_to_string(d.join("_.cornflakes.rs")).unwrap();
    assert!(
        !code.contains("trait S") && code.contains("pub struct M"),
        "{code}"
    );
    std::fs::write(
        d.join("group.proto"),
        "syntax = \"proto2\";\nmessage M {\n  optional group G = 1 { optional int32 a = 2; }\n}\n",
    )
    .unwrap();
    // A proto2 group is its nested message (the Cornflakes wire has no group encoding).
    let p = d.join("group.proto");
    let out = run(
        &["gen", p.to_str().unwrap(), "-o", d.to_str().unwrap()],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let code = std::fs::read_to_string(d.join("_.cornflakes.rs")).unwrap();
    assert!(code.contains("pub fn get_g(&self)"), "{code}");
    assert!(code.contains("pub struct G<'a>"), "{code}");
}

#[test]
fn json_errors_name_the_field() {
    let p = examples_proto();
    let schema = p.to_str().unwrap();
    let err = fails(
        &["encode", "--schema", schema, "--message", "examples.GetM"],
        br#"{"id": 1, "nope": 2}"#,
    );
    assert!(
        err.contains("unknown field `nope` in message `examples.GetM`"),
        "{err}"
    );
    let err = fails(
        &["encode", "--schema", schema, "--message", "examples.GetM"],
        br#"{"id": "seven"}"#,
    );
    assert!(
        err.contains("GetM.id: expected an unsigned 32-bit integer"),
        "{err}"
    );
    let err = fails(
        &["encode", "--schema", schema, "--message", "examples.Outer"],
        br#"{"in": {"b": 5}}"#,
    );
    assert!(
        err.contains("Outer.in.b: expected a base64 string"),
        "{err}"
    );
    let err = fails(
        &["encode", "--schema", schema, "--message", "examples.Outer"],
        br#"{"nums": [1, 2.5]}"#,
    );
    assert!(
        err.contains("Outer.nums[1]: expected a 32-bit integer, got 2.5"),
        "{err}"
    );
    let err = fails(
        &["encode", "--schema", schema, "--message", "examples.GetM"],
        br#"{"id": 1"#,
    );
    assert!(err.contains("not valid JSON"), "{err}");
    let err = fails(
        &[
            "encode",
            "--schema",
            schema,
            "--message",
            "examples.Missing",
        ],
        b"{}",
    );
    assert!(err.contains("no message `examples.Missing`"), "{err}");
}

#[test]
fn truncated_or_malformed_bytes_fail_cleanly() {
    let p = examples_proto();
    let schema = p.to_str().unwrap();
    // Every proper prefix of the worked example is an error, never a panic.
    let full = example2();
    for cut in (0..full.len()).step_by(2) {
        let o = run(
            &[
                "decode",
                "--schema",
                schema,
                "--message",
                "examples.Outer",
                "--hex",
            ],
            &full.as_bytes()[..cut],
        );
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "prefix of {} hex digits: {err}",
            cut
        );
        assert!(err.contains("malformed object"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let err = fails(
        &[
            "decode",
            "--schema",
            schema,
            "--message",
            "examples.Outer",
            "--hex",
        ],
        b"0100000",
    );
    assert!(err.contains("odd number of digits"), "{err}");
    // A bool byte that is not 0/1, with the field path in the message.
    let bad_bool = example2().replace("6100000001", "6100000007");
    let err = fails(
        &[
            "decode",
            "--schema",
            schema,
            "--message",
            "examples.Outer",
            "--hex",
        ],
        bad_bool.as_bytes(),
    );
    assert!(
        err.contains("in Outer.in > Inner.f: bool byte is 7"),
        "{err}"
    );
    // Raw (not hex) input too.
    let err = fails(
        &["decode", "--schema", schema, "--message", "examples.GetM"],
        &[1, 0, 0, 0],
    );
    assert!(err.contains("malformed object at byte 4"), "{err}");
}

/// Bytes after the object are refused, as by generated code (issue 28): the framing gives
/// the object's length, so extra bytes are an error, saying how many and where.
#[test]
fn decode_refuses_trailing_bytes() {
    let p = examples_proto();
    let args = [
        "decode",
        "--schema",
        p.to_str().unwrap(),
        "--message",
        "GetM",
        "--hex",
    ];
    let padded = format!("{}eeeeee", example1());
    let err = fails(&args, padded.as_bytes());
    assert!(
        err.contains("3 trailing bytes: the object ends at byte 47 of 50"),
        "{err}"
    );
}

/// `gen -I DIR path/in/DIR.proto` resolves the file against the include directory, as
/// protoc does (issue 28), and names it as given in errors.
#[test]
fn gen_resolves_file_arguments_against_include_paths() {
    let d = temp_dir("resolve");
    std::fs::create_dir_all(d.join("inc/pkg")).unwrap();
    std::fs::write(
        d.join("inc/pkg/a.proto"),
        "syntax = \"proto3\";\npackage pkg;\nmessage A { uint32 x = 1; }\n",
    )
    .unwrap();
    let out = d.join("out");
    let o = run(
        &[
            "gen",
            "pkg/a.proto",
            "-I",
            d.join("inc").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("pkg.cornflakes.rs").is_file());
}
