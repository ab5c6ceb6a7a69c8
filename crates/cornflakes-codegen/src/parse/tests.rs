//! The parser on what today's schemas write, and its errors' positions.

use protobuf::descriptor::field_descriptor_proto::{Label, Type};

use super::{parse, ParsedFile};

fn ok(src: &str) -> ParsedFile {
    parse("t.proto", src).unwrap_or_else(|e| panic!("{}:{}: {}", e.loc.line, e.loc.col, e.message))
}

fn err(src: &str) -> (u32, u32, String) {
    let e = parse("t.proto", src).expect_err(src);
    (e.loc.line, e.loc.col, e.message)
}

#[test]
fn reads_what_todays_descriptor_proto_writes() {
    let f = ok(r#"syntax = "proto2";
package google.protobuf;
message FileDescriptorSet {
  repeated FileDescriptorProto file = 1;
  extensions 536000000 [declaration = {
    number: 536000000
    type: ".buf.descriptor.v1.FileDescriptorSetExtension"
    full_name: ".buf.descriptor.v1.buf_file_descriptor_set_extension"
  }];
  extensions 1000 to max, 5 [verification = UNVERIFIED];
}
message FileDescriptorProto {
  optional bool unverified_lazy = 15 [default = false, unverified_lazy = true];
  optional float f = 2 [default = -inf];
  reserved 4, 6 to 9;
  reserved "a", "b";
}
"#);
    assert_eq!(f.fd.message_type.len(), 2);
    let field = &f.fd.message_type[1].field[1];
    assert_eq!(field.default_value(), "-inf");
}

#[test]
fn editions_map_onto_labels_and_features_are_checked() {
    let f = ok(r#"edition = "2023";
package e;
option features.field_presence = IMPLICIT;
option features.(pb.cpp).legacy_closed_enum = true;
option features = { enum_type: CLOSED repeated_field_encoding: EXPANDED, utf8_validation: NONE };
import option "opts.proto";
message M {
  int32 a = 1 [features.field_presence = LEGACY_REQUIRED, default = 7];
  repeated int32 b = 2 [features.repeated_field_encoding = EXPANDED];
  M child = 3 [features.message_encoding = DELIMITED];
  enum E { option features.enum_type = CLOSED; X = 1; }
}
"#);
    assert_eq!(f.fd.syntax(), "editions");
    let m = &f.fd.message_type[0];
    assert_eq!(m.field[0].label(), Label::LABEL_OPTIONAL);
    assert_eq!(m.field[0].default_value(), "7");
    assert_eq!(m.field[1].label(), Label::LABEL_REPEATED);
    let (l, c, msg) = err("edition = \"2023\";\nmessage M { int32 a = 1 [features.nope = X]; }\n");
    assert_eq!((l, c), (2, 26));
    assert!(msg.contains("unsupported feature `features.nope`"), "{msg}");
    let (_, _, msg) =
        err("edition = \"2023\";\nmessage M { int32 a = 1 [features.enum_type = SOMETIMES]; }\n");
    assert!(msg.contains("OPEN, CLOSED"), "{msg}");
    let (_, _, msg) = err("edition = \"2023\";\noption features = { enum_type: MAYBE };\n");
    assert!(msg.contains("OPEN, CLOSED"), "{msg}");
    let (l, c, msg) = err("edition = \"2099\";\n");
    assert_eq!((l, c), (1, 11));
    assert!(msg.contains("edition \"2099\" is not supported"), "{msg}");
    let (_, _, msg) = err("edition = \"2023\";\nmessage M { optional int32 a = 1; }\n");
    assert!(msg.contains("not a label in editions"), "{msg}");
    let (_, _, msg) = err("syntax = \"proto3\";\noption features.enum_type = OPEN;\n");
    assert!(msg.contains("only valid in files with `edition"), "{msg}");
}

#[test]
fn groups_maps_and_oneofs_become_what_protoc_makes() {
    let f = ok(r#"syntax = "proto2";
message M {
  optional group Data = 1 { optional int32 x = 2; }
  map<string, M> by_name = 3;
  oneof o { int32 a = 4; group G = 5 { optional bytes b = 1 [default = "\001\xff"]; } }
  optional bytes raw = 6 [default = "a\"b\n"];
}
"#);
    let m = &f.fd.message_type[0];
    let names: Vec<&str> = m.field.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["data", "by_name", "a", "g", "raw"]);
    assert_eq!(m.field[0].type_(), Type::TYPE_GROUP);
    assert_eq!(m.field[0].type_name(), ".M.Data");
    let nested: Vec<&str> = m.nested_type.iter().map(|n| n.name()).collect();
    assert_eq!(nested, ["Data", "ByNameEntry", "G"]);
    assert!(m.nested_type[1].options.map_entry());
    assert_eq!(m.field[3].oneof_index(), 0);
    assert_eq!(super::c_unescape(m.field[4].default_value()), b"a\"b\n");
    assert_eq!(
        super::c_unescape(m.nested_type[2].field[0].default_value()),
        b"\x01\xff"
    );
}

#[test]
fn errors_say_where() {
    let cases = [
        (
            "syntax = \"proto3\";\nmessage M {\n  uint32 id = ;\n}\n",
            (3, 15),
            "expected an integer",
        ),
        (
            "syntax = \"proto2\";\nmessage M { int32 a = 1; }\n",
            (2, 13),
            "needs a label",
        ),
        (
            "message M { optional int32 a = 0; }",
            (1, 32),
            "out of range",
        ),
        (
            "message M { optional int32 a = 1; optional int32 b = 1; }",
            (1, 50),
            "used twice",
        ),
        ("enum E {}", (1, 1), "has no values"),
        (
            "message M {}\nservice S { rpc A(M) returns (M); rpc A(M) returns (M); }",
            (2, 39),
            "`S.A` is defined twice (first at 2:17)",
        ),
        (
            "message M { map<float, int32> m = 1; }",
            (1, 17),
            "a map's key",
        ),
        ("message M { oneof o { } }", (1, 13), "has no fields"),
        (
            "message M { optional int32 a = 1 [default = {x: 1}]; }",
            (1, 35),
            "not a message",
        ),
        (
            "syntax = \"proto3\";\nmessage M { int32 a = 1 [default = 2]; }",
            (2, 26),
            "no `[default",
        ),
        ("message M {", (1, 11), "expected `}`"),
        ("import \"a.proto\"\nmessage M {}", (2, 1), "expected `;`"),
        (
            "message M { optional string s = 1 [default = \"\\q\"]; }",
            (1, 46),
            "unknown escape",
        ),
    ];
    for (src, at, want) in cases {
        let (l, c, msg) = err(src);
        assert!(msg.contains(want), "{src}: {msg}");
        assert_eq!((l, c), at, "{src}: {msg}");
    }
}

#[test]
fn services_and_extensions_are_read() {
    let f = ok(r#"syntax = "proto3";
package s;
import public "other.proto";
service S {
  rpc Get(Req) returns (stream .s.Resp);
  rpc Put(stream Req) returns (Resp) { option idempotency_level = IDEMPOTENT; }
}
extend google.protobuf.FieldOptions { string unit = 50001; }
"#);
    let m = &f.fd.service[0].method;
    assert!(m[0].server_streaming() && !m[0].client_streaming());
    assert_eq!(m[0].output_type(), ".s.Resp");
    assert!(m[1].client_streaming());
    assert_eq!(f.fd.public_dependency, [0]);
    assert_eq!(f.fd.extension[0].extendee(), "google.protobuf.FieldOptions");
}
