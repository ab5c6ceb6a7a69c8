//! What a user hit in the second hour (issue 28), generated-code side: maps with protobuf's
//! last-wins rule and a keyed lookup, messages that compare, print and outlive their arena,
//! oneofs read with one `match`, building in one expression. Each fails to compile (or
//! fails) against the code generated before.

use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, PinnedMemory};
use cornflakes_codegen_tests::features::{envelope, everything, Envelope, Everything};
use cornflakes_codegen_tests::kv::PutMReq;

/// Item 1: `a=1, b=2, a=3` on the wire: the lookup reads the last value for a key (prost
/// gives `{"a": 3}`); inserting replaces the value of an existing key.
#[test]
fn maps_read_the_last_value_for_a_key_and_insert_replaces() {
    let arena = Arena::new();
    let mut m = Everything::new_in(&arena);
    for (k, v) in [("a", 1), ("b", 2), ("a", 3)] {
        let mut e = everything::CountsEntry::new_in(&arena);
        e.set_key(CFString::new(k, &arena));
        e.set_value(v);
        m.get_mut_counts().append(e);
    }
    let wire = m.serialize_to_vec();
    let rx = Arena::new();
    let back = Everything::deserialize(&wire, &rx).unwrap();
    assert_eq!(
        back.get_counts().len(),
        3,
        "decoding keeps the wire's entries, zero-copy"
    );
    assert_eq!(back.find_counts("a").map(|e| e.get_value()), Some(3));
    assert_eq!(back.find_counts("b").map(|e| e.get_value()), Some(2));
    assert!(back.find_counts("c").is_none());

    // Building: insert replaces in place, so the wire holds one entry per key.
    let mut b = Everything::new_in(&arena);
    b.insert_counts("a", 1);
    b.insert_counts("b", 2);
    b.insert_counts("a", 3);
    assert_eq!(b.get_counts().len(), 2);
    assert_eq!(b.find_counts("a").unwrap().get_value(), 3);
    let wire = b.serialize_to_vec();
    let back = Everything::deserialize(&wire, &rx).unwrap();
    assert_eq!(back.get_counts().len(), 2);
    assert_eq!(back.find_counts("a").unwrap().get_value(), 3);

    // Integer keys, message values.
    let mut n = everything::Nested::new_in(&arena);
    n.set_leaf(CFBytes::new(b"x", &arena));
    b.insert_by_id(7, n);
    let mut n2 = everything::Nested::new_in(&arena);
    n2.set_leaf(CFBytes::new(b"y", &arena));
    b.insert_by_id(7, n2);
    assert_eq!(b.get_by_id().len(), 1);
    let leaf = b
        .find_by_id(7)
        .and_then(|e| e.get_value())
        .map(|v| v.get_leaf().as_bytes());
    assert_eq!(leaf, Some(&b"y"[..]));
}

/// Item 8: a round-trip check was one assert per field; now one `assert_eq!`, and a
/// difference prints readably.
#[test]
fn messages_compare_by_value_and_print() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let value = mem.alloc_copy(&[9u8; 2048]).unwrap();
    let tx = Arena::with_memory(&mem);
    let mut m = PutMReq::new_in(&tx);
    m.set_id(7);
    m.get_mut_keys().append(CFString::new("user:1", &tx));
    m.get_mut_vals().append(CFBytes::new(&value[..], &tx));
    assert!(m.get_vals()[0].ptr().is_zero_copy());
    let wire = m.serialize_to_vec();
    let rx = Arena::new(); // decoded values are copies here: equality is by value
    let back = PutMReq::deserialize(&wire, &rx).unwrap();
    assert!(!back.get_vals()[0].ptr().is_zero_copy());
    assert_eq!(back, m);

    let mut other = PutMReq::new_in(&tx);
    other.set_id(7);
    assert_ne!(other, m, "a missing field differs");
    other.get_mut_keys().append(CFString::new("user:1", &tx));
    other.get_mut_vals().append(CFBytes::new(&[9u8; 2047], &tx));
    assert_ne!(other, m, "a different value differs");

    // Present-but-empty differs from absent (it is encoded).
    let (mut a, b) = (Everything::new_in(&tx), Everything::new_in(&tx));
    assert_eq!(a, b);
    a.init_r_text(0);
    assert_ne!(a, b);

    // String getters compare with &str.
    assert!(*back.get_keys()[0].as_bytes() == *b"user:1");
    assert!(back.get_keys()[0] == "user:1");
    let printed = format!("{back:?}");
    assert!(
        printed.contains("id: 7") && printed.contains("user:1"),
        "{printed}"
    );
}

/// Item 8: nothing could be kept past the request; the owned form outlives the arena and
/// comes back zero-copy.
#[test]
fn the_owned_form_outlives_the_arena_and_comes_back() {
    let owned = {
        let arena = Arena::new();
        let m = Everything::builder(&arena)
            .u32(5)
            .text("kept")
            .r_data([&b"a"[..], b"bc"])
            .name("chosen")
            .build();
        m.into_owned()
    }; // the arena is gone
    let cache = [owned.clone(), owned];
    let arena = Arena::new();
    let back = cache[0].decode_in(&arena).unwrap();
    assert_eq!(back.get_u32(), 5);
    assert!(*back.get_text() == "kept");
    assert_eq!(back.get_r_data().len(), 2);
    assert_eq!(cache[0], cache[1]);
    assert!(format!("{:?}", cache[0]).contains("kept"));
    // Values of the view borrow the owned bytes: nothing copied.
    let bytes = cache[0].as_bytes().as_ptr_range();
    assert!(bytes.contains(&back.get_text().as_bytes().as_ptr()));
    // Or read in place, nothing built: the view reads the same values from the same bytes.
    let view = cache[0].view().unwrap();
    assert_eq!(view.get_u32(), 5);
    assert_eq!(view.get_text().unwrap(), "kept");
    assert!(bytes.contains(&view.get_text().unwrap().as_ptr()));
    assert_eq!(view.to_object_in(&arena).unwrap(), back);
    // And from bytes, checked.
    let again = everything_owned_from(cache[1].clone().into_bytes());
    assert_eq!(again, cache[0]);
    assert!(cornflakes_codegen_tests::features::EverythingOwned::from_bytes(vec![1, 2]).is_err());
}

fn everything_owned_from(bytes: Vec<u8>) -> cornflakes_codegen_tests::features::EverythingOwned {
    cornflakes_codegen_tests::features::EverythingOwned::from_bytes(bytes).unwrap()
}

/// Item 8: a oneof was `which_…()` plus a getter; now one `match` on `get_<oneof>()`.
#[test]
fn oneofs_are_read_with_one_match() {
    let arena = Arena::new();
    let describe = |m: &Everything<'_>| match m.get_choice() {
        Some(everything::ChoiceValue::Name(s)) => format!("name {}", s.as_str().unwrap()),
        Some(everything::ChoiceValue::Number(n)) => format!("number {n}"),
        Some(everything::ChoiceValue::Sub(sub)) => format!("sub {}", sub.get_leaf().len()),
        None => "none".to_string(),
    };
    let mut m = Everything::new_in(&arena);
    assert_eq!(describe(&m), "none");
    m.set_number(4);
    assert_eq!(describe(&m), "number 4");
    m.set_name(CFString::new("n", &arena));
    assert_eq!(describe(&m), "name n");
    m.get_mut_sub().set_leaf(CFBytes::new(b"abc", &arena));
    assert_eq!(describe(&m), "sub 3");

    // A oneof named like a nested type: `PayloadCase` and `PayloadValue`.
    let mut e = Envelope::new_in(&arena);
    e.set_text(CFString::new("t", &arena));
    assert!(matches!(e.get_payload(), Some(envelope::PayloadValue::Text(t)) if *t == "t"));
    assert_eq!(e.which_payload(), Some(envelope::PayloadCase::Text));
}

/// Item 8: eight setter calls each taking `&arena` become one expression, with the same
/// copy-or-zero-copy choice as the setters.
#[test]
fn a_builder_sets_fields_in_one_expression() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let value = mem.alloc_copy(&[1u8; 4096]).unwrap();
    let arena = Arena::with_memory(&mem);
    let built = PutMReq::builder(&arena)
        .id(3)
        .keys(["a", "b"])
        .vals([&value[..], b"small"])
        .build();
    let mut by_hand = PutMReq::new_in(&arena);
    by_hand.set_id(3);
    by_hand.get_mut_keys().append(CFString::new("a", &arena));
    by_hand.get_mut_keys().append(CFString::new("b", &arena));
    by_hand
        .get_mut_vals()
        .append(CFBytes::new(&value[..], &arena));
    by_hand
        .get_mut_vals()
        .append(CFBytes::new(b"small", &arena));
    assert_eq!(built, by_hand);
    assert!(built.get_vals()[0].ptr().is_zero_copy());
    assert!(!built.get_vals()[1].ptr().is_zero_copy());
    assert_eq!(built.serialize_to_vec(), by_hand.serialize_to_vec());
}
