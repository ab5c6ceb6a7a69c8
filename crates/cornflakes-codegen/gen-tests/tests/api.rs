//! The generated API: presence, oneofs, enums with unknown numbers, proto2 defaults, maps,
//! recursion, imports, decode errors with field paths, and tolerance of newer fields.

use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, DecodeErrorKind};
use cornflakes_codegen_tests::common::{Color, Point};
use cornflakes_codegen_tests::features::everything::{self, ByIdEntry, Choice, Kind, Nested};
use cornflakes_codegen_tests::features::{Everything, Tree};
use cornflakes_codegen_tests::{kv, legacy};

#[test]
fn scalars_are_absent_until_set_and_default_when_absent() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    assert!(!m.has_i64() && m.get_i64() == 0);
    m.set_i64(-5);
    m.set_fl(1.5);
    m.set_flag(false);
    assert!(m.has_i64() && m.has_flag());
    assert_eq!(m.get_i64(), -5);
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(
        (back.get_i64(), back.get_fl(), back.has_flag()),
        (-5, 1.5, true)
    );
    assert!(!back.has_u64());
    m.clear_i64();
    assert!(!m.has_i64() && m.get_i64() == 0);
    // proto3 `optional` tracks presence like everything else.
    m.set_maybe(0);
    assert!(m.has_maybe());
}

#[test]
fn oneof_members_exclude_each_other_last_set_wins() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    assert_eq!(m.which_choice(), None);
    m.set_name(CFString::new("n", &arena));
    assert_eq!(m.which_choice(), Some(Choice::Name));
    m.set_number(9);
    assert_eq!(m.which_choice(), Some(Choice::Number));
    assert!(!m.has_name());
    m.get_mut_sub().set_leaf(CFBytes::new(b"x", &arena));
    assert_eq!(m.which_choice(), Some(Choice::Sub));
    assert!(!m.has_number());
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.which_choice(), Some(Choice::Sub));
    assert_eq!(back.get_sub().unwrap().get_leaf().as_bytes(), b"x");
}

#[test]
fn enums_keep_unknown_numbers() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    assert_eq!(m.get_kind(), Ok(Kind::Unspecified));
    m.set_kind(Kind::Negative);
    assert_eq!(m.get_kind_raw(), -3);
    m.set_color(Color::Blue);
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_kind(), Ok(Kind::Negative));
    assert_eq!(back.get_color(), Ok(Color::Blue));
    m.set_kind_raw(77);
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_kind(), Err(77));
    assert_eq!(Kind::try_from(2), Ok(Kind::Large));
    assert_eq!(Kind::from_str_name("KIND_SMALL"), Some(Kind::Small));
    assert_eq!(Kind::Small.as_str_name(), "KIND_SMALL");
    assert_eq!(i32::from(Kind::Negative), -3);
    m.init_r_kind(2);
    m.get_mut_r_kind().append(Kind::Large as i32);
    m.get_mut_r_kind().append(1234);
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_r_kind().as_slice(), &[2, 1234]);
}

#[test]
fn proto2_defaults_apply_when_absent() {
    let arena = Arena::new();
    let r = legacy::Record::new_in(&arena);
    assert!(!r.has_name());
    assert_eq!(r.get_name().as_str().unwrap(), "anon");
    assert_eq!(r.get_score(), -7);
    assert_eq!(r.get_ratio(), 0.5);
    assert!(r.get_on());
    assert_eq!(r.get_level(), Ok(legacy::record::Level::High));
    assert_eq!(r.get_temp(), f32::NEG_INFINITY);
    assert_eq!(r.get_big(), u64::MAX);
    assert_eq!(r.get_magic().as_bytes(), b"\0\xffcf");
    assert_eq!(
        legacy::Record::view(&[0, 0, 0, 0])
            .unwrap()
            .get_magic()
            .unwrap(),
        b"\0\xffcf"
    );
    // Absent fields take no space, defaults or not.
    assert_eq!(r.serialize_to_vec(), [0, 0, 0, 0]);
    let mut r = r;
    r.set_score(3);
    r.clear_score();
    assert_eq!(r.get_score(), -7);
}

#[test]
fn a_proto2_group_is_a_nested_message() {
    let arena = Arena::new();
    let mut r = legacy::Record::new_in(&arena);
    assert!(r.get_extra().is_none());
    r.get_mut_extra().set_n(9);
    let bytes = r.serialize_to_vec();
    let back = legacy::Record::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_extra().unwrap().get_n(), 9);
    assert_eq!(back, r);
    let empty = legacy::record::Extra::new_in(&arena);
    assert_eq!(empty.get_n(), 5);
}

#[test]
fn maps_are_repeated_entry_messages() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    m.init_by_id(1);
    let mut e = ByIdEntry::new_in(&arena);
    e.set_key(42);
    e.get_mut_value().set_leaf(CFBytes::new(b"v", &arena));
    m.get_mut_by_id().append(e);
    m.init_counts(0);
    let bytes = m.serialize_to_vec();
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    let e = &back.get_by_id()[0];
    assert_eq!(e.get_key(), 42);
    assert_eq!(e.get_value().unwrap().get_leaf().as_bytes(), b"v");
    assert!(back.has_counts() && back.get_counts().is_empty());
}

#[test]
fn nested_imported_and_recursive_messages_round_trip() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    let mut p = Point::new_in(&arena);
    p.set_x(-1);
    m.set_point(p);
    let deeper = m.get_mut_nested().get_mut_deeper();
    deeper.init_notes(1);
    deeper.get_mut_notes().append(CFString::new("note", &arena));
    deeper.set_kind(Kind::Small);
    m.get_mut_child().get_mut_child().set_u32(3);
    m.init_children(2);
    m.get_mut_children().append(Everything::new_in(&arena));
    let mut c = Everything::new_in(&arena);
    c.init_r_nested(1);
    c.get_mut_r_nested().append(Nested::new_in(&arena));
    m.get_mut_children().append(c);
    let bytes = m.serialize_to_vec();
    assert_eq!(bytes.len(), m.sizes().total());
    let back = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_point().unwrap().get_x(), -1);
    let d = back.get_nested().unwrap().get_deeper().unwrap();
    assert_eq!(d.get_notes()[0].as_str().unwrap(), "note");
    assert_eq!(d.get_kind(), Ok(Kind::Small));
    assert_eq!(back.get_child().unwrap().get_child().unwrap().get_u32(), 3);
    assert_eq!(back.get_children().len(), 2);
    assert_eq!(back.get_children()[1].get_r_nested().len(), 1);
    assert_eq!(back.serialize_to_vec(), bytes);
    let dbg = format!("{back:?}");
    assert!(dbg.contains("point: Point { x: -1 }"), "{dbg}");

    // A deep recursive tree.
    fn tree<'a>(arena: &'a Arena, depth: u32) -> Tree<'a> {
        let mut t = Tree::new_in(arena);
        t.set_val(CFBytes::new(&depth.to_le_bytes(), arena));
        if depth > 0 {
            t.set_left(tree(arena, depth - 1));
            t.set_right(tree(arena, depth - 1));
        }
        t
    }
    let t = tree(&arena, 6);
    let bytes = t.serialize_to_vec();
    let back = Tree::deserialize(&bytes, &arena).unwrap();
    let mut leftmost = &back;
    let mut depth = 0;
    while let Some(l) = leftmost.get_left() {
        leftmost = l;
        depth += 1;
    }
    assert_eq!(depth, 6);
    assert_eq!(back.serialize_to_vec(), bytes);
}

#[test]
fn decode_errors_name_the_field_path() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    m.get_mut_nested().set_leaf(CFBytes::new(b"abcdef", &arena));
    let mut bytes = m.serialize_to_vec();
    bytes.truncate(bytes.len() - 2);
    let e = Everything::deserialize(&bytes, &arena).unwrap_err();
    let path: Vec<&str> = e.path().collect();
    assert_eq!(path, ["Everything.nested", "Everything.Nested.leaf"]);
    assert!(matches!(e.kind(), DecodeErrorKind::OutOfBounds { .. }));
    assert!(e
        .to_string()
        .contains("Everything.nested > Everything.Nested.leaf"));
    let e = Everything::deserialize(&[1, 0], &arena).unwrap_err();
    assert!(matches!(e.kind(), DecodeErrorKind::Truncated { .. }));
}

#[test]
fn newer_fields_above_the_known_ones_are_tolerated() {
    let arena = Arena::new();
    let mut put = kv::PutReq::new_in(&arena);
    put.set_id(5);
    put.set_key(CFString::new("k", &arena));
    put.set_val(CFBytes::new(b"v", &arena));
    let bytes = put.serialize_to_vec();
    // PutResp knows only field 1; fields 2 and 3 come after its slots.
    let resp = kv::PutResp::deserialize(&bytes, &arena).unwrap();
    assert_eq!(resp.get_id(), 5);
    // Read as GetMReq, whose field 2 is a list, the string slot is taken for (count, offset)
    // of a pair array that runs past the object: an error, not garbage.
    let as_getm = kv::GetMReq::deserialize(&bytes, &arena);
    assert!(as_getm.is_err());
}

#[test]
fn the_nested_module_exposes_nested_types() {
    let arena = Arena::new();
    let n = everything::nested::Deeper::new_in(&arena);
    assert!(!n.has_kind());
}

#[test]
fn several_oneof_members_on_the_wire_last_one_wins_in_both_codecs() {
    // Everything with `name` (40) = "n" and `number` (41) = 9 both present: W = 2,
    // bitmap words 0 and 0x180, two 8-byte slots, then "n" at offset 28.
    let mut bytes = vec![2, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0, 0];
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&28u32.to_le_bytes());
    bytes.extend_from_slice(&9u64.to_le_bytes());
    bytes.push(b'n');
    let arena = Arena::new();
    let g = Everything::deserialize(&bytes, &arena).unwrap();
    assert_eq!(g.which_choice(), Some(Choice::Number));
    assert!(!g.has_name());
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("protos");
    let schema = cornflakes_codegen::Schema::load(&[dir.join("features.proto")], &[&dir]).unwrap();
    let id = schema.message("features.Everything").unwrap();
    let d = cornflakes_codegen::dynamic::DynMessage::decode(&schema, id, &bytes, &arena).unwrap();
    assert_eq!(d.to_json().unwrap(), "{\n  \"number\": \"9\"\n}");
    assert_eq!(d.serialize_to_vec(), g.serialize_to_vec());
}

#[test]
fn the_include_file_builds_the_package_module_tree() {
    use cornflakes_codegen_tests::tree;
    let arena = Arena::new();
    let mut s = tree::outer::inner::Shape::new_in(&arena);
    s.init_points(1);
    let mut p = tree::common::Point::new_in(&arena);
    p.set_y(4);
    s.get_mut_points().append(p);
    s.set_color(tree::common::Color::Green);
    let bytes = s.serialize_to_vec();
    let back = tree::outer::inner::Shape::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.get_points()[0].get_y(), 4);
    assert_eq!(back.get_color(), Ok(tree::common::Color::Green));
    let _ = tree::examples::GetM::new_in(&arena);
}

#[test]
fn a_oneof_named_like_a_nested_type_gets_a_case_suffix() {
    use cornflakes_codegen_tests::features::{envelope, Envelope};
    let arena = Arena::new();
    let mut e = Envelope::new_in(&arena);
    e.get_mut_one().set_n(1);
    assert_eq!(e.which_payload(), Some(envelope::PayloadCase::One));
    e.set_text(CFString::new("t", &arena));
    assert_eq!(e.which_payload(), Some(envelope::PayloadCase::Text));
    assert!(e.get_one().is_none());
    let _: envelope::Payload = envelope::Payload::new_in(&arena);
}

/// `get_mut_*` of a repeated field makes it present: appending without `init_*` used to leave
/// the field absent, so the values were silently not encoded (issue 16).
#[test]
fn appending_without_init_is_encoded() {
    let arena = Arena::new();
    let mut m = kv::PutMReq::new_in(&arena);
    assert!(!m.has_keys());
    m.get_mut_keys().append(CFString::new("k", &arena));
    m.get_mut_vals().append(CFBytes::new(b"v", &arena));
    let mut e = Everything::new_in(&arena);
    e.get_mut_r_i32().append(-1);
    assert!(m.has_keys() && m.has_vals() && e.has_r_i32());
    let rx = Arena::new();
    let mb = m.serialize_to_vec();
    let back = kv::PutMReq::deserialize(&mb, &rx).unwrap();
    assert_eq!(back.get_keys()[0].as_str(), Ok("k"));
    assert_eq!(back.get_vals()[0].as_bytes(), b"v");
    let eb = e.serialize_to_vec();
    let back = Everything::deserialize(&eb, &rx).unwrap();
    assert_eq!(back.get_r_i32().as_slice(), &[-1]);
    // Only asking for the list makes it present, and empty.
    let mut m = kv::PutMReq::new_in(&arena);
    let _ = m.get_mut_keys();
    let mb = m.serialize_to_vec();
    let back = kv::PutMReq::deserialize(&mb, &rx).unwrap();
    assert!(back.has_keys() && back.get_keys().is_empty());
}

/// Builds an `Everything` whose zero-copy leaves sit in every place a leaf can: a singular
/// string and bytes, a oneof member's nested message, lists of strings, bytes and messages, a
/// boxed child and a list of children. Every leaf borrows `value` (threshold 0).
fn zero_copy_everywhere<'a>(arena: &'a Arena, value: &'a cornflakes::RcBuf) -> Everything<'a> {
    let b = || CFBytes::new_ref(&value[..], arena);
    let s = || CFString::new_ref(std::str::from_utf8(&value[..]).unwrap(), arena);
    let mut m = Everything::new_in(arena);
    m.set_text(s());
    m.set_data(b());
    m.init_r_text(2);
    m.get_mut_r_text().append(s());
    m.get_mut_r_text().append(s());
    m.init_r_data(1);
    m.get_mut_r_data().append(b());
    m.init_r_nested(1);
    let mut n = Nested::new_in(arena);
    n.set_leaf(b());
    n.get_mut_deeper().init_notes(1);
    n.get_mut_deeper().get_mut_notes().append(s());
    m.get_mut_r_nested().append(n);
    m.get_mut_sub().set_leaf(b());
    m.get_mut_child().set_data(b());
    m.init_children(1);
    let mut c = Everything::new_in(arena);
    c.set_text(s());
    m.get_mut_children().append(c);
    m
}

#[test]
fn the_one_walk_send_writes_the_same_head_and_hands_over_the_same_leaves_in_order() {
    use cornflakes::wire::Demote;
    let mem = cornflakes::PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(0);
    // Distinct pinned values, so the order of the leaves shows.
    let values: Vec<_> = (0..10u8)
        .map(|i| mem.alloc_copy(&[b'a' + i; 600]).unwrap())
        .collect();
    let mut next = values.iter();
    let mut v = || next.next().expect("ten leaves");
    fn bytes<'a>(v: &'a cornflakes::RcBuf, arena: &'a Arena) -> CFBytes<'a> {
        CFBytes::new_ref(&v[..], arena)
    }
    fn text<'a>(v: &'a cornflakes::RcBuf, arena: &'a Arena) -> CFString<'a> {
        CFString::new_ref(std::str::from_utf8(&v[..]).unwrap(), arena)
    }
    let m = {
        let b = |v| bytes(v, &arena);
        let s = |v| text(v, &arena);
        let mut m = Everything::new_in(&arena);
        m.set_text(s(v()));
        m.set_data(b(v()));
        m.init_r_text(2);
        m.get_mut_r_text().append(s(v()));
        m.get_mut_r_text().append(s(v()));
        m.init_r_data(1);
        m.get_mut_r_data().append(b(v()));
        m.init_r_nested(1);
        let mut n = Nested::new_in(&arena);
        n.set_leaf(b(v()));
        n.get_mut_deeper().init_notes(1);
        n.get_mut_deeper().get_mut_notes().append(s(v()));
        m.get_mut_r_nested().append(n);
        m.get_mut_sub().set_leaf(b(v()));
        m.get_mut_child().set_data(b(v()));
        m.init_children(1);
        let mut c = Everything::new_in(&arena);
        c.set_text(s(v()));
        m.get_mut_children().append(c);
        m
    };
    let s = m.sizes();
    assert_eq!(s.zero_copy_count, 10);
    for max in [10, 3, 0] {
        let (plan, demoted) = Demote::plan(&m.zero_copy_lens(), max);
        let mut two = vec![0u8; s.head() + demoted];
        m.write_header_and_copy(&s, &mut two, plan, demoted)
            .unwrap();
        let mut lent = Vec::new();
        m.for_each_zero_copy(&mut plan.clone(), &mut |b: cornflakes::PinnedRef<'_>| {
            lent.push(b.as_ptr())
        });
        let mut one = vec![0u8; s.head() + demoted];
        let mut handed = Vec::new();
        let n = m
            .write_head_and_leaves(&s, &mut one, plan, demoted, &mut |b| {
                handed.push(b.as_ptr())
            })
            .unwrap();
        assert_eq!(n, s.head() + demoted, "max {max}");
        assert_eq!(one, two, "the same head, max {max}");
        assert_eq!(handed, lent, "the same leaves in the same order, max {max}");
        assert_eq!(handed.len(), max.min(10));
    }
    // A buffer too short is refused before any leaf is handed over.
    let mut short = vec![0u8; s.head() - 1];
    let mut called = false;
    let err = m
        .write_head_and_leaves(&s, &mut short, Demote::NONE, 0, &mut |_| called = true)
        .unwrap_err();
    assert_eq!((err.needed, called), (s.head(), false));
    assert!(values.iter().all(|v| v.ref_count() == 1));
}

#[test]
fn the_zero_copy_walk_lends_every_leaf_in_wire_order_and_the_object_holds_no_reference() {
    use cornflakes::wire::Demote;
    let mem = cornflakes::PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(0);
    // One pinned value (UTF-8, for the strings) behind every leaf.
    let value = &mem.alloc_copy(&[b'v'; 600]).unwrap();
    let m = zero_copy_everywhere(&arena, value);
    let s = m.sizes();
    assert_eq!(s.zero_copy_count, 10, "every leaf is zero-copy");
    // The leaves borrow the value: building took no reference.
    assert_eq!(value.ref_count(), 1);
    let mut lent = Vec::new();
    let mut keep_all = Demote::NONE;
    m.for_each_zero_copy(&mut keep_all, &mut |b: cornflakes::PinnedRef<'_>| {
        lent.push(b.to_rcbuf())
    });
    // What a send keeps (one reference per descriptor) outlives the object.
    let wire = m.serialize_to_vec();
    drop(m);
    assert_eq!(value.ref_count(), 1 + 10);
    assert!(lent
        .iter()
        .all(|b| b.as_ptr() == value.as_ptr() && b.len() == 600));
    drop(lent);
    assert_eq!(value.ref_count(), 1);
    // Every leaf's bytes are on the wire, in order.
    let back = Everything::deserialize(&wire, &arena).unwrap();
    assert_eq!(back.get_r_text().len(), 2);
    assert_eq!(back.get_data().as_bytes(), &value[..]);

    // With at most 3 entries the other 7 leaves (all the same length: the first 7 in wire
    // order) are demoted: not handed over.
    let m = zero_copy_everywhere(&arena, value);
    let (mut plan, _) = Demote::plan(&m.zero_copy_lens(), 3);
    let mut kept = 0;
    m.for_each_zero_copy(&mut plan, &mut |_| kept += 1);
    assert_eq!(kept, 3);
    assert_eq!(value.ref_count(), 1);
}
