//! A user's second hour (issue 28), as a crate outside the workspace: one test per item.

use cornflakes::{
    Arena, BufferTooSmall, CFBytes, CFString, CornflakesObj, DecodeErrorKind, DecodeObj, HugePages,
    MemoryConfig, PinnedMemory, ZeroCopyFallback,
};
use external_user::second::{listing, Amount, Listing};
use external_user::{pb_second, Item, Kind};
use prost::Message as _;

fn mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

/// 1: `a=1, b=2, a=3` read as `a=1` by a first-match reader; protobuf (prost) reads `a=3`.
#[test]
fn map_keys_follow_protobufs_last_wins_rule() {
    let arena = Arena::new();
    let mut l = Listing::new_in(&arena);
    for (k, v) in [("a", b"1"), ("b", b"2"), ("a", b"3")] {
        let mut e = listing::AttrsEntry::new_in(&arena);
        e.set_key(CFString::new(k, &arena));
        e.set_value(CFBytes::new(v, &arena));
        l.get_mut_attrs().append(e);
    }
    let wire = l.serialize_to_vec();
    let rx = Arena::new();
    let back = Listing::deserialize(&wire, &rx).unwrap();
    let got = back.find_attrs("a").unwrap().get_value().as_bytes();

    // prost: the same entries on the wire (two messages concatenated merge, map entries
    // appended), then decoded.
    let first = pb_second::Listing {
        attrs: [("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())].into(),
        ..Default::default()
    };
    let second = pb_second::Listing {
        attrs: [("a".into(), b"3".to_vec())].into(),
        ..Default::default()
    };
    let mut pb_wire = first.encode_to_vec();
    pb_wire.extend(second.encode_to_vec());
    let pb = pb_second::Listing::decode(&pb_wire[..]).unwrap();
    assert_eq!(got, &pb.attrs["a"][..]);
    assert_eq!(got, b"3");

    // Building: insert replaces, one entry per key.
    let mut built = Listing::new_in(&arena);
    built.insert_attrs("a", CFBytes::new(b"1", &arena));
    built.insert_attrs("a", CFBytes::new(b"3", &arena));
    assert_eq!(built.get_attrs().len(), 1);
    assert_eq!(built.find_attrs("a").unwrap().get_value(), b"3");
}

/// A field of a well-known type is `cornflakes_types::Timestamp`, converted from and to
/// `SystemTime`, and reads as prost reads it.
#[test]
fn a_well_known_type_comes_from_cornflakes_types() {
    let arena = Arena::new();
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5_000);
    let mut l = Listing::new_in(&arena);
    l.set_listed_at(cornflakes_types::Timestamp::from_system_time(t, &arena).unwrap());
    let wire = l.serialize_to_vec();
    let back = Listing::deserialize(&wire, &arena).unwrap();
    assert_eq!(back.get_listed_at().unwrap().to_system_time().unwrap(), t);
    let pb = pb_second::Listing {
        listed_at: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 5_000,
        }),
        ..Default::default()
    };
    let ts = back.get_listed_at().unwrap();
    let pb_ts = pb.listed_at.unwrap();
    assert_eq!(
        (ts.get_seconds(), ts.get_nanos()),
        (pb_ts.seconds, pb_ts.nanos)
    );
}

/// 2: one long-lived arena grew 26 B per request and nothing said so.
#[test]
fn arena_growth_is_visible_and_can_be_bounded() {
    let arena = Arena::new();
    let mut item = Item::new_in(&arena);
    item.get_mut_vals().append(CFBytes::new(b"v", &arena));
    item.get_mut_tags().append(1);
    let wire = item.serialize_to_vec();

    let mut per_request = Arena::new();
    for _ in 0..10_000 {
        per_request
            .scope(|a| Item::deserialize(&wire, a).map(|_| ()))
            .unwrap();
    }
    let bounded = per_request.high_water_bytes();

    let limited = Arena::new().with_limit(256 * 1024);
    let mut served = 0;
    let err = loop {
        match Item::deserialize(&wire, &limited) {
            Ok(_) => served += 1,
            Err(e) => break e,
        }
        assert!(served < 1_000_000, "the limit never refused");
    };
    assert!(served > 1000);
    assert!(
        matches!(err.kind(), DecodeErrorKind::ArenaLimit { .. }),
        "{err}"
    );
    assert!(limited.high_water_bytes() > bounded);
    assert!(limited.check_limit().is_err());
}

/// 3: `deserialize(wire ++ [0xEE; 100])` was `Ok` and nothing said how much was used.
#[test]
fn trailing_bytes_are_an_error_unless_asked_for() {
    let arena = Arena::new();
    let mut item = Item::new_in(&arena);
    item.set_id(3);
    item.set_name(CFString::new("book", &arena));
    let wire = item.serialize_to_vec();
    let mut padded = wire.clone();
    padded.extend([0xEE; 100]);
    let err = Item::deserialize(&padded, &arena).unwrap_err();
    assert!(
        matches!(err.kind(), DecodeErrorKind::TrailingBytes { .. }),
        "{err}"
    );
    let (back, used) = Item::deserialize_prefix(&padded, &arena).unwrap();
    assert_eq!((back.get_id(), used), (3, wire.len()));
}

/// 4: 1 MiB of `initial_bytes` under a 1 MiB limit passed `validate()`, then `new` failed
/// with "0 bytes mapped" naming no field.
#[test]
fn validate_names_the_field_and_the_rounding() {
    let cfg = MemoryConfig {
        initial_bytes: 1 << 20,
        max_bytes: 1 << 20,
        ..MemoryConfig::default()
    };
    let e = cfg.validate().unwrap_err();
    assert_eq!(e.field, "initial_bytes");
    assert!(e.to_string().contains("rounded up"), "{e}");
    let Err(err) = PinnedMemory::new(cfg) else {
        panic!("refused by new as well")
    };
    assert!(err.to_string().contains("initial_bytes"), "{err}");
}

/// 5: the runtime could not be published under its crates.io name; its package is now
/// `cornflakes-runtime`, its library still `cornflakes` (this file's `use cornflakes::…`).
#[test]
fn the_runtime_is_the_package_cornflakes_runtime() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock next to Cargo.toml");
    assert!(lock.contains("name = \"cornflakes-runtime\""));
    assert!(
        !lock.contains("name = \"cornflakes\"\n"),
        "no package takes crates.io's `cornflakes`"
    );
}

/// 6: the documented `main() -> Result<(), Box<dyn Error>>` printed
/// `Error { kind: Parse, message: "…" }` on one line, and the hint said `-I`.
#[test]
fn codegen_errors_print_well_from_main() {
    let dir = std::env::temp_dir().join(format!("external-user-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.proto"),
        "syntax = \"proto3\";\nimport \"missing/dep.proto\";\nmessage M {}\n",
    )
    .unwrap();
    let r: Result<(), Box<dyn std::error::Error>> = cornflakes_codegen::Config::new()
        .out_dir(&dir)
        .rerun_if_changed(false)
        .compile_protos(&["bad.proto"], &[&dir])
        .map_err(Into::into);
    let e = r.unwrap_err();
    let shown = format!("{e:?}"); // what `main` prints after "Error: "
    assert_eq!(shown, e.to_string());
    assert!(
        shown.contains("\n2 | import \"missing/dep.proto\";"),
        "{shown}"
    );
    assert!(shown.contains("`includes` of `compile_protos`"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 7: a value from another `PinnedMemory` was counted as `not_pinned` ("heap, stack").
#[test]
fn a_value_from_another_pinned_memory_is_counted_as_such() {
    let (ours, other) = (mem(), mem());
    let arena = Arena::with_memory(&ours);
    let v = other.alloc_copy(&[1u8; 2048]).unwrap();
    let mut item = Item::new_in(&arena);
    item.get_mut_vals().append(CFBytes::new(&v[..], &arena));
    let f = arena.zero_copy_fallbacks();
    assert_eq!(f.get(ZeroCopyFallback::OtherPinnedMemory), 1);
    assert_eq!(f.not_pinned, 0);
}

/// 8: compare, clone, print, keep past the request, match a oneof, build in one expression,
/// compare strings with `&str`; the common types at the crate root.
#[test]
fn messages_compare_clone_print_and_build_briefly() {
    let kept = {
        let arena = Arena::new();
        let item = Item::builder(&arena)
            .id(1)
            .name("book")
            .vals([&b"v1"[..], b"v2"])
            .tags([7, 8])
            .kind(Kind::Book)
            .build();
        let rx = Arena::new();
        let wire = item.serialize_to_vec();
        let back = Item::deserialize(&wire, &rx).unwrap();
        assert_eq!(back, item, "one assert instead of one per field");
        assert!(*back.get_name() == "book");
        assert!(format!("{back:?}").contains("book"));
        back.to_owned()
    };
    let copy = kept.clone();
    assert_eq!(copy, kept);
    let arena = Arena::new();
    assert_eq!(
        kept.decode_in(&arena).unwrap().get_tags().as_slice(),
        &[7, 8]
    );
    // The owned encoding read in place: nothing built.
    let tags = kept.view().unwrap().get_tags().unwrap();
    assert_eq!(tags.iter().collect::<Vec<u32>>(), [7, 8]);

    let mut l = Listing::new_in(&arena);
    l.get_mut_amount().set_cents(250);
    let text = match l.get_body() {
        Some(listing::BodyValue::Note(n)) => n.as_str().unwrap().to_string(),
        Some(listing::BodyValue::Amount(a)) => format!("{} cents", a.get_cents()),
        None => String::new(),
    };
    assert_eq!(text, "250 cents");
    let _: Option<&Amount> = l.get_amount();

    let too_small: BufferTooSmall = item_into(&mut [0u8; 4]).unwrap_err();
    assert!(too_small.needed > 4);
}

fn item_into(buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
    let arena = Arena::new();
    let item = Item::builder(&arena).name("long enough").build();
    item.serialize_into(buf)
}

/// 9: a schema with a custom option (`extend google.protobuf.FieldOptions`) was refused;
/// `second.proto` (named relative to the include directory, as protoc takes it) compiled in
/// build.rs by both compilers, the option left out.
#[test]
fn a_schema_with_custom_options_compiles_with_both() {
    let arena = Arena::new();
    let l = Listing::builder(&arena)
        .id(4)
        .weight(1200)
        .note("n")
        .build();
    let wire = l.serialize_to_vec();
    let back = <Listing as DecodeObj>::deserialize_bytes(&wire, &arena).unwrap();
    assert_eq!(back.get_weight(), 1200);
    let pb = pb_second::Listing {
        id: 4,
        weight: 1200,
        body: Some(pb_second::listing::Body::Note("n".into())),
        ..Default::default()
    };
    assert_eq!(
        pb_second::Listing::decode(&pb.encode_to_vec()[..]).unwrap(),
        pb
    );
}
