//! The generated views (`M::view`): a view of an encoded object reads exactly what
//! `deserialize_bytes` gives, field by field, for every field kind (absent fields, empty lists,
//! nested and repeated messages, oneofs, enums with unknown numbers, sparse field numbers above
//! 32, maps, recursion); malformed objects give the right `DecodeErrorKind` and field path and
//! never panic.

#[path = "../../../cornflakes/tests/common/mod.rs"]
mod common;

use cornflakes::wire::MessageView;
use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, DecodeError, DecodeErrorKind};
use cornflakes_codegen_tests::common::Point;
use cornflakes_codegen_tests::examples::{GetM, Inner, Outer};
use cornflakes_codegen_tests::features::everything::{Choice, Kind, Nested};
use cornflakes_codegen_tests::features::{
    envelope, Empty, Envelope, Everything, EverythingView, Far, Sparse, Tree, TreeView,
};

/// An `Everything` with every field present (oneof: `which`), nested and repeated messages,
/// empty lists, a map, a child and children.
fn full<'a>(arena: &'a Arena, which: u8) -> Everything<'a> {
    let mut m = Everything::new_in(arena);
    m.set_i32(-1);
    m.set_i64(-2);
    m.set_u32(3);
    m.set_u64(u64::MAX);
    m.set_s32(-5);
    m.set_s64(-6);
    m.set_f32(7);
    m.set_f64(8);
    m.set_sf32(-9);
    m.set_sf64(-10);
    m.set_fl(1.5);
    m.set_db(-2.25);
    m.set_flag(true);
    m.set_text(CFString::new("héllo", arena));
    m.set_data(CFBytes::new(b"\x00\x01data", arena));
    m.set_kind(Kind::Negative);
    m.set_color_raw(77); // a number the enum does not know
    m.get_mut_nested().set_leaf(CFBytes::new(b"leaf", arena));
    m.get_mut_nested()
        .get_mut_deeper()
        .get_mut_notes()
        .append(CFString::new("n1", arena));
    let mut p = Point::new_in(arena);
    p.set_x(-1);
    m.set_point(p);
    m.set_maybe(0);
    m.init_r_i32(2);
    m.get_mut_r_i32().append(-1);
    m.get_mut_r_i32().append(i32::MAX);
    m.init_r_i64(0); // present and empty
    m.get_mut_r_u64().append(9);
    m.get_mut_r_fl().append(0.5);
    m.get_mut_r_db().append(1e300);
    m.get_mut_r_flag().append(true);
    m.get_mut_r_flag().append(false);
    m.get_mut_r_text().append(CFString::new("a", arena));
    m.get_mut_r_text().append(CFString::new("", arena));
    m.get_mut_r_data().append(CFBytes::new(b"xyz", arena));
    m.get_mut_r_kind().append(Kind::Large as i32);
    m.get_mut_r_kind().append(1234);
    m.get_mut_r_nested().append(Nested::new_in(arena));
    let mut n = Nested::new_in(arena);
    n.set_leaf(CFBytes::new(b"second", arena));
    m.get_mut_r_nested().append(n);
    match which {
        0 => m.set_name(CFString::new("name", arena)),
        1 => m.set_number(41),
        _ => m.get_mut_sub().set_leaf(CFBytes::new(b"sub", arena)),
    }
    m.get_mut_child().set_u32(3);
    m.get_mut_child()
        .get_mut_child()
        .set_text(CFString::new("grandchild", arena));
    m.init_children(2);
    m.get_mut_children().append(Everything::new_in(arena));
    let mut c = Everything::new_in(arena);
    c.set_db(3.0);
    m.get_mut_children().append(c);
    m
}

/// Views `bytes` as an `Everything` and checks it reads what decode gives: through
/// `to_object_in` (every field, every getter) and field by field for a few.
fn same_as_decode(bytes: &[u8]) {
    let arena = Arena::new();
    let decoded = Everything::deserialize(bytes, &arena).expect("decodes");
    let view = Everything::view(bytes).expect("views");
    let object = view.to_object_in(&arena).expect("every field reads");
    assert!(object == decoded, "{object:?}\n!=\n{decoded:?}");
    assert_eq!(object.serialize_to_vec(), decoded.serialize_to_vec());

    // Field by field, as a reader writes it.
    assert_eq!(view.has_i32(), decoded.has_i32());
    assert_eq!(view.get_i64(), decoded.get_i64());
    assert_eq!(view.get_u64(), decoded.get_u64());
    assert_eq!(view.get_fl().to_bits(), decoded.get_fl().to_bits());
    assert_eq!(view.get_flag(), decoded.get_flag());
    assert_eq!(
        view.get_text().unwrap(),
        decoded.get_text().as_str().unwrap()
    );
    assert_eq!(view.get_data().unwrap(), decoded.get_data().as_bytes());
    assert_eq!(view.get_kind(), decoded.get_kind());
    assert_eq!(view.get_color_raw(), decoded.get_color_raw());
    assert_eq!(view.which_choice(), decoded.which_choice());
    assert_eq!(
        view.get_r_i32().unwrap().iter().collect::<Vec<_>>(),
        decoded.get_r_i32().iter().collect::<Vec<_>>()
    );
    assert_eq!(view.has_r_i64(), decoded.has_r_i64());
    assert_eq!(view.get_r_i64().unwrap().len(), decoded.get_r_i64().len());
    let texts: Vec<&str> = view
        .get_r_text()
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .collect();
    let want: Vec<&str> = decoded
        .get_r_text()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(texts, want);
    let list = view.get_r_nested().unwrap();
    assert_eq!(list.len(), decoded.get_r_nested().len());
    for (i, d) in decoded.get_r_nested().iter().enumerate() {
        let v = list.get(i).unwrap().unwrap();
        assert_eq!(v.get_leaf().unwrap(), d.get_leaf().as_bytes());
        assert_eq!(v.has_deeper(), d.has_deeper());
    }
    assert!(list.get(list.len()).is_none());
    match (view.get_nested().unwrap(), decoded.get_nested()) {
        (Some(v), Some(d)) => {
            assert_eq!(v.get_leaf().unwrap(), d.get_leaf().as_bytes());
            let notes: Vec<&str> = v
                .get_deeper()
                .unwrap()
                .map(|x| x.get_notes().unwrap().iter().map(Result::unwrap).collect())
                .unwrap_or_default();
            let want: Vec<&str> = d
                .get_deeper()
                .map(|x| x.get_notes().iter().map(|s| s.as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(notes, want);
        }
        (None, None) => {}
        _ => panic!("nested presence differs"),
    }
    assert_eq!(
        view.get_child().unwrap().map(|c| c.get_u32()),
        decoded.get_child().map(|c| c.get_u32())
    );
}

#[test]
fn a_view_reads_what_decode_gives_for_every_field_kind() {
    let arena = Arena::new();
    for which in 0..3 {
        same_as_decode(&full(&arena, which).serialize_to_vec());
    }
    // Nothing present.
    same_as_decode(&Everything::new_in(&arena).serialize_to_vec());
}

#[test]
fn absent_fields_read_as_their_defaults() {
    let arena = Arena::new();
    let bytes = Everything::new_in(&arena).serialize_to_vec();
    let v = Everything::view(&bytes).unwrap();
    assert!(!v.has_i32() && v.get_i32() == 0);
    assert!(!v.get_flag());
    assert_eq!(v.get_text().unwrap(), "");
    assert_eq!(v.get_data().unwrap(), b"");
    assert_eq!(v.get_kind(), Ok(Kind::Unspecified));
    assert!(v.get_nested().unwrap().is_none());
    assert!(v.get_r_i32().unwrap().is_empty());
    assert!(v.get_r_text().unwrap().is_empty());
    assert_eq!(v.get_r_nested().unwrap().iter().count(), 0);
    assert_eq!(v.which_choice(), None);
}

#[test]
fn oneofs_report_the_member_set() {
    let arena = Arena::new();
    let mut e = Envelope::new_in(&arena);
    e.get_mut_one().set_n(5);
    let bytes = e.serialize_to_vec();
    let v = Envelope::view(&bytes).unwrap();
    assert_eq!(v.which_payload(), Some(envelope::PayloadCase::One));
    assert_eq!(v.get_one().unwrap().unwrap().get_n(), 5);
    assert!(!v.has_text());
    let m = full(&arena, 1).serialize_to_vec();
    let v = Everything::view(&m).unwrap();
    assert_eq!(v.which_choice(), Some(Choice::Number));
    assert_eq!(v.get_number(), 41);
}

#[test]
fn sparse_field_numbers_above_32_are_read_by_popcount() {
    let arena = Arena::new();
    let mut s = Sparse::new_in(&arena);
    s.set_first(7);
    s.set_mid(CFBytes::new(b"middle", &arena));
    s.set_far(true);
    s.get_mut_large().append(1);
    s.get_mut_large().append(u64::MAX);
    let bytes = s.serialize_to_vec();
    let v = Sparse::view(&bytes).unwrap();
    assert_eq!(v.get_first(), 7);
    assert_eq!(v.get_mid().unwrap(), b"middle");
    assert!(v.get_far());
    assert_eq!(
        v.get_large().unwrap().iter().collect::<Vec<_>>(),
        [1, u64::MAX]
    );
    let d = Sparse::deserialize(&bytes, &arena).unwrap();
    assert!(v.to_object_in(&arena).unwrap() == d);
    // Some fields absent: the later slots move down.
    let mut s = Sparse::new_in(&arena);
    s.set_far(false);
    s.get_mut_large().append(3);
    let bytes = s.serialize_to_vec();
    let v = Sparse::view(&bytes).unwrap();
    assert!(!v.has_first() && !v.has_mid() && v.has_far());
    assert!(!v.get_far());
    assert_eq!(v.get_large().unwrap().get(0), Some(3));

    let mut f = Far::new_in(&arena);
    f.set_near(1);
    f.set_last(true);
    let bytes = f.serialize_to_vec();
    let v = Far::view(&bytes).unwrap();
    assert_eq!((v.get_near(), v.get_last()), (1, true));

    let bytes = Empty::new_in(&arena).serialize_to_vec();
    assert!(Empty::view(&bytes).is_ok());
}

#[test]
fn the_spec_worked_examples_read_through_views() {
    // Worked example 1 (47 bytes).
    let arena = Arena::new();
    let mut g = GetM::new_in(&arena);
    g.set_id(7);
    g.get_mut_vals().append(CFBytes::new(b"hello", &arena));
    g.get_mut_vals().append(CFBytes::new(b"world!", &arena));
    let bytes = g.serialize_to_vec();
    assert_eq!(bytes.len(), 47);
    let v = GetM::view(&bytes).unwrap();
    assert_eq!(v.get_id(), 7);
    assert!(!v.has_keys());
    let vals: Vec<&[u8]> = v.get_vals().unwrap().iter().map(Result::unwrap).collect();
    assert_eq!(vals, [&b"hello"[..], b"world!"]);

    // Worked example 2: a nested bool at field 33, a list of messages, packed ints.
    let mut o = Outer::new_in(&arena);
    o.set_a(1);
    let mut i = Inner::new_in(&arena);
    i.set_b(CFBytes::new(b"ab", &arena));
    i.set_f(true);
    o.set_in(i);
    let mut e0 = Inner::new_in(&arena);
    e0.set_b(CFBytes::new(b"xyz", &arena));
    o.get_mut_list().append(e0);
    o.get_mut_list().append(Inner::new_in(&arena));
    o.get_mut_nums().append(-1);
    o.get_mut_nums().append(2);
    let bytes = o.serialize_to_vec();
    let v = Outer::view(&bytes).unwrap();
    let inner = v.get_in().unwrap().unwrap();
    assert_eq!((inner.get_b().unwrap(), inner.get_f()), (&b"ab"[..], true));
    let list = v.get_list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list.get(0).unwrap().unwrap().get_b().unwrap(), b"xyz");
    assert!(!list.get(1).unwrap().unwrap().has_b());
    assert_eq!(v.get_nums().unwrap().iter().collect::<Vec<_>>(), [-1, 2]);
    assert!(v.to_object_in(&arena).unwrap() == Outer::deserialize(&bytes, &arena).unwrap());
}

#[test]
fn the_committed_spec_vectors_read_through_views() {
    // The spec's bytes as committed (crates/cornflakes/tests/vectors), not re-encoded here.
    let b1 = common::hex(common::EXAMPLE1);
    let v = GetM::view(&b1).unwrap();
    assert_eq!(v.get_id(), 7);
    assert!(!v.has_keys() && v.get_keys().unwrap().is_empty());
    let vals = v.get_vals().unwrap();
    assert_eq!(vals.len(), 2);
    assert_eq!(vals.get(0).unwrap().unwrap(), b"hello");
    assert_eq!(vals.get(1).unwrap().unwrap(), b"world!");

    let b2 = common::hex(common::EXAMPLE2);
    let v = Outer::view(&b2).unwrap();
    assert_eq!(v.get_a(), 1);
    let inner = v.get_in().unwrap().unwrap();
    assert_eq!(inner.object().offset(), 40);
    assert_eq!(inner.get_b().unwrap(), b"ab");
    assert!(inner.get_f());
    let list = v.get_list().unwrap();
    let e0 = list.get(0).unwrap().unwrap();
    assert_eq!(
        (e0.object().offset(), e0.get_b().unwrap()),
        (77, &b"xyz"[..])
    );
    let e1 = list.get(1).unwrap().unwrap();
    assert_eq!(e1.object().offset(), 93);
    assert!(!e1.has_b() && !e1.has_f());
    assert_eq!(v.get_nums().unwrap().iter().collect::<Vec<_>>(), [-1, 2]);
    let arena = Arena::new();
    assert!(v.to_object_in(&arena).unwrap() == Outer::deserialize(&b2, &arena).unwrap());
}

fn tree<'a>(arena: &'a Arena, depth: u32) -> Tree<'a> {
    let mut t = Tree::new_in(arena);
    t.set_val(CFBytes::new(&depth.to_le_bytes(), arena));
    if depth > 0 {
        t.set_left(tree(arena, depth - 1));
        t.set_right(tree(arena, depth - 1));
    }
    t
}

fn sum(t: TreeView<'_>) -> Result<u32, DecodeError> {
    let mut n = u32::from_le_bytes(t.get_val()?.try_into().unwrap());
    if let Some(l) = t.get_left()? {
        n += sum(l)?;
    }
    if let Some(r) = t.get_right()? {
        n += sum(r)?;
    }
    Ok(n)
}

#[test]
fn recursive_messages_read_through_views() {
    let arena = Arena::new();
    let bytes = tree(&arena, 6).serialize_to_vec();
    let v = Tree::view(&bytes).unwrap();
    // Each level d holds 2^(6-d) nodes of value d.
    let want: u32 = (0..=6).map(|d| d * (1 << (6 - d))).sum();
    assert_eq!(sum(v).unwrap(), want);
    assert!(v.to_object_in(&arena).unwrap() == Tree::deserialize(&bytes, &arena).unwrap());
}

#[test]
fn a_recursive_reader_is_held_to_decodes_depth_limit() {
    // A chain of left children deeper than MAX_DEPTH: decode refuses it, and a view refuses
    // to open the level decode would refuse.
    let arena = Arena::new();
    let levels = cornflakes::wire::MAX_DEPTH + 2;
    let mut t = Tree::new_in(&arena);
    for _ in 0..levels {
        let mut p = Tree::new_in(&arena);
        p.set_left(t);
        t = p;
    }
    let bytes = t.serialize_to_vec();
    let de = Tree::deserialize(&bytes, &arena).unwrap_err();
    assert!(matches!(de.kind(), DecodeErrorKind::TooDeep { .. }), "{de}");
    let mut v = Tree::view(&bytes).unwrap();
    let mut depth = 0;
    let e = loop {
        match v.get_left() {
            Ok(Some(l)) => {
                v = l;
                depth += 1;
                assert_eq!(v.object().depth(), depth);
            }
            Ok(None) => panic!("the chain ended at {depth}"),
            Err(e) => break e,
        }
    };
    assert_eq!(depth, cornflakes::wire::MAX_DEPTH);
    assert_eq!(e.kind(), de.kind());
    assert_eq!(e.path().last(), Some("Tree"));
    assert_eq!(e.path().next(), Some("Tree.left"));
}

// ---------------------------------------------------------------------------------------------
// Malformed objects.

fn kind_of<T>(r: Result<T, DecodeError>) -> DecodeErrorKind {
    match r {
        Ok(_) => panic!("accepted a malformed object"),
        Err(e) => e.kind().clone(),
    }
}

#[test]
fn truncated_headers_and_slot_areas_are_refused() {
    assert!(matches!(
        kind_of(Everything::view(&[1, 0])),
        DecodeErrorKind::Truncated {
            what: "object header",
            ..
        }
    ));
    // W = 2 but one word.
    assert!(matches!(
        kind_of(Everything::view(&[2, 0, 0, 0, 1, 0, 0, 0])),
        DecodeErrorKind::Truncated { what: "bitmap", .. }
    ));
    // Field 1 (i32) present, its slot missing.
    let e = Everything::view(&[1, 0, 0, 0, 1, 0, 0, 0, 9]).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::Truncated {
                what: "slots",
                need: 4,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.offset(), 8);
    assert_eq!(e.path().collect::<Vec<_>>(), ["Everything"]);
    // The empty buffer.
    assert!(matches!(
        kind_of(Empty::view(&[])),
        DecodeErrorKind::Truncated { .. }
    ));
}

#[test]
fn bitmaps_too_large_and_unknown_low_fields_are_refused() {
    let mut b = vec![0xff, 0xff, 0xff, 0x7f];
    b.extend([0; 8]);
    assert!(matches!(
        kind_of(Everything::view(&b)),
        DecodeErrorKind::TooManyBitmapWords { .. }
    ));
    // Field 45 is reserved in Everything (unknown, below field 51): refused, as decode does.
    let mut b = vec![2, 0, 0, 0, 0, 0, 0, 0];
    b.extend((1u32 << 12).to_le_bytes());
    let arena = Arena::new();
    let de = Everything::deserialize(&b, &arena).unwrap_err();
    let ve = Everything::view(&b).unwrap_err();
    assert_eq!(ve.kind(), &DecodeErrorKind::UnknownField { field: 45 });
    assert_eq!(ve.kind(), de.kind());
    assert_eq!(ve.offset(), de.offset());
    // A field above every known one is tolerated (its slot is not read).
    let mut put = cornflakes_codegen_tests::kv::PutReq::new_in(&arena);
    put.set_id(5);
    put.set_key(CFString::new("k", &arena));
    let bytes = put.serialize_to_vec();
    let v = cornflakes_codegen_tests::kv::PutResp::view(&bytes).unwrap();
    assert_eq!(v.get_id(), 5);
    // Extra bitmap words that are zero are accepted.
    let b = [3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0];
    let v = Everything::view(&b).unwrap();
    assert_eq!(v.get_u32(), 9);
    assert_eq!(
        v.get_u32(),
        Everything::deserialize(&b, &arena).unwrap().get_u32()
    );
}

#[test]
fn bad_bools_are_refused_at_open() {
    // Field 13 (flag) = 2.
    let b = [1, 0, 0, 0, 0, 0x10, 0, 0, 2];
    let e = Everything::view(&b).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::InvalidBool { value: 2 });
    assert_eq!(e.offset(), 8);
    // Packed bools are checked when the list is read.
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    m.get_mut_r_flag().append(true);
    let mut bytes = m.serialize_to_vec();
    let last = bytes.len() - 1;
    bytes[last] = 7;
    let v = Everything::view(&bytes).unwrap();
    let e = v.get_r_flag().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::InvalidBool { value: 7 });
    assert_eq!(e.path().collect::<Vec<_>>(), ["Everything.r_flag"]);
}

#[test]
fn offsets_out_of_bounds_and_bad_utf8_are_errors_of_the_getter() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    m.get_mut_nested().set_leaf(CFBytes::new(b"abcdef", &arena));
    m.set_text(CFString::new("ok", &arena));
    let mut bytes = m.serialize_to_vec();
    bytes.truncate(bytes.len() - 2);
    let v = Everything::view(&bytes).expect("the top header is whole");
    let nested = v.get_nested().unwrap().unwrap();
    let e = nested.get_leaf().unwrap_err();
    assert!(
        matches!(e.kind(), DecodeErrorKind::OutOfBounds { .. }),
        "{e}"
    );
    assert_eq!(e.path().collect::<Vec<_>>(), ["Everything.Nested.leaf"]);
    // The same object through decode: the same kind, the path from the top.
    let de = Everything::deserialize(&bytes, &arena).unwrap_err();
    assert_eq!(de.kind(), e.kind());

    // Bad UTF-8: the bytes getter reads it, the str getter refuses it.
    let mut m = Everything::new_in(&arena);
    m.set_text(CFString::new("abc", &arena));
    let mut bytes = m.serialize_to_vec();
    let last = bytes.len() - 1;
    bytes[last] = 0xff;
    let v = Everything::view(&bytes).unwrap();
    let e = v.get_text().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::InvalidUtf8 { valid_up_to: 2 });
    assert_eq!(e.offset(), last);
    assert_eq!(e.path().collect::<Vec<_>>(), ["Everything.text"]);
    assert!(e.to_string().contains("not UTF-8"), "{e}");

    // And in a repeated string: only the bad element is refused, by `get` and `iter` alike,
    // at its own byte, as decode refuses it.
    let mut m = GetM::new_in(&arena);
    m.get_mut_keys().append(CFString::new("ab", &arena));
    m.get_mut_keys().append(CFString::new("cd", &arena));
    let mut bytes = m.serialize_to_vec();
    let last = bytes.len() - 1;
    bytes[last] = 0xff;
    let keys = GetM::view(&bytes).unwrap().get_keys().unwrap();
    assert_eq!(keys.get(0).unwrap().unwrap(), "ab");
    let e = keys.get(1).unwrap().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::InvalidUtf8 { valid_up_to: 1 });
    assert_eq!(e.offset(), last);
    assert_eq!(e.path().collect::<Vec<_>>(), ["GetM.keys"]);
    let all: Vec<_> = keys.iter().collect();
    assert_eq!(all[0].as_ref().unwrap(), &"ab");
    assert_eq!(all[1].as_ref().unwrap_err(), &e);
    assert!(keys.get(2).is_none());
}

#[test]
fn nested_slots_with_a_nonzero_first_word_and_pair_arrays_out_of_bounds_are_refused() {
    let arena = Arena::new();
    let mut o = Outer::new_in(&arena);
    o.get_mut_in().set_f(true);
    let mut bytes = o.serialize_to_vec();
    // Outer: W, bitmap (fields 2), slot of `in` at 8: (0, off).
    bytes[8] = 1;
    let v = Outer::view(&bytes).unwrap();
    let e = v.get_in().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::NestedSlotLength { value: 1 });
    assert_eq!(e.offset(), 8);
    assert_eq!(e.path().collect::<Vec<_>>(), ["Outer.in"]);
    assert_eq!(
        Outer::deserialize(&bytes, &arena).unwrap_err().kind(),
        e.kind()
    );

    // A list of messages whose pair array runs past the end.
    let mut o = Outer::new_in(&arena);
    o.get_mut_list().append(Inner::new_in(&arena));
    let mut bytes = o.serialize_to_vec();
    bytes[8..12].copy_from_slice(&1000u32.to_le_bytes()); // count
    let v = Outer::view(&bytes).unwrap();
    let e = v.get_list().unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::OutOfBounds {
                what: "message pair array",
                ..
            }
        ),
        "{e}"
    );
    // A list element whose pair has a nonzero first word.
    let mut o = Outer::new_in(&arena);
    o.get_mut_list().append(Inner::new_in(&arena));
    let mut bytes = o.serialize_to_vec();
    let pairs = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    bytes[pairs] = 3;
    let v = Outer::view(&bytes).unwrap();
    let e = v.get_list().unwrap().get(0).unwrap().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::NestedSlotLength { value: 3 });
    assert_eq!(e.path().collect::<Vec<_>>(), ["Outer.list"]);
    let e = v.get_list().unwrap().iter().next().unwrap().unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::NestedSlotLength { value: 3 });
}

#[test]
fn every_prefix_and_every_byte_flip_is_an_error_value_or_what_decode_reads() {
    let arena = Arena::new();
    let bytes = full(&arena, 2).serialize_to_vec();
    let check = |b: &[u8]| {
        let arena = Arena::new();
        let decoded = Everything::deserialize(b, &arena);
        let view = Everything::view(b).and_then(|v| v.to_object_in(&arena));
        if let Ok(d) = decoded {
            let v = view.expect("a view reads whatever decode accepts");
            // Compared by their encodings: a flipped float may be NaN, which `==` refuses.
            assert_eq!(v.serialize_to_vec(), d.serialize_to_vec(), "{b:?}");
        }
    };
    for n in 0..bytes.len() {
        check(&bytes[..n]);
    }
    for i in 0..bytes.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= x;
            check(&b);
        }
    }
}

#[test]
fn views_open_at_any_header_through_the_trait() {
    let arena = Arena::new();
    let bytes = full(&arena, 0).serialize_to_vec();
    let v = <EverythingView as MessageView>::open_at(&bytes, 0, 0).unwrap();
    let child = v.get_child().unwrap().unwrap();
    let again =
        <EverythingView as MessageView>::open_at(&bytes, child.object().offset(), 1).unwrap();
    assert_eq!(again.get_u32(), 3);
    assert!(matches!(
        kind_of(<EverythingView as MessageView>::open_at(
            &bytes,
            0,
            cornflakes::wire::MAX_DEPTH + 1
        )),
        DecodeErrorKind::TooDeep { .. }
    ));
    let _ = Point::new_in(&arena);
}

/// Values read through a view of a received packet and put into a reply reference the packet
/// exactly where `deserialize_rcbuf` would (at least the threshold long), else are borrowed;
/// a list element outside the message is an error.
#[test]
fn values_read_in_place_from_a_packet_are_referenced_as_decode_would() {
    use cornflakes::{CFPtr, LeafList, PinnedMemory};
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(512);
    let mut m = GetM::new_in(&arena);
    m.set_id(3);
    m.init_vals(3);
    for len in [4usize, 600, 511] {
        m.get_mut_vals()
            .append(CFBytes::new(&vec![len as u8; len], &arena));
    }
    let pkt = mem.alloc_copy(&m.serialize_to_vec()).unwrap();
    let decoded = GetM::deserialize_rcbuf(&pkt, &arena).unwrap();
    let view = GetM::view_rcbuf(&pkt).unwrap().get_vals().unwrap();
    let mut list: LeafList<CFBytes> = LeafList::with_capacity_in(view.len(), &arena);
    list.extend_from_packet(&pkt, &view, &arena).unwrap();
    assert_eq!(list.len(), 3);
    for (i, d) in decoded.get_vals().iter().enumerate() {
        let (a, b) = (list[i].ptr(), d.ptr());
        assert_eq!(a.is_zero_copy(), b.is_zero_copy(), "element {i}");
        assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr(), "element {i}");
        let one = CFPtr::from_packet(&pkt, view.get(i).unwrap().unwrap(), &arena);
        assert_eq!(one.is_zero_copy(), b.is_zero_copy(), "element {i}");
    }
    assert_eq!(list.sizes(), decoded.get_vals().sizes());
    // Element 1's pair pointing past the end of the message: the error, not a value.
    let mut bytes = m.serialize_to_vec();
    let at = bytes
        .windows(4)
        .position(|w| w == 600u32.to_le_bytes())
        .expect("element 1's pair");
    bytes[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let bad = mem.alloc_copy(&bytes).unwrap();
    let v = GetM::view_rcbuf(&bad).unwrap().get_vals().unwrap();
    let mut list: LeafList<CFBytes> = LeafList::with_capacity_in(v.len(), &arena);
    let err = list.extend_from_packet(&bad, &v, &arena).unwrap_err();
    assert!(err.to_string().contains("GetM.vals"), "{err}");
    assert_eq!(list.len(), 1, "the element before it was appended");
}
