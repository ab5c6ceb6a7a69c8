//! The spec's two worked examples through generated code: exact bytes out, same values back.

#[path = "../../../cornflakes/tests/common/mod.rs"]
mod common;
use common::{hex, EXAMPLE1, EXAMPLE2};

use cornflakes::{Arena, CFBytes, CFPtr, CFString, CornflakesObj, PinnedMemory};
use cornflakes_codegen_tests::examples::{GetM, Inner, Outer};

#[test]
fn example1_encodes_byte_for_byte() {
    let arena = Arena::new();
    let mut m = GetM::new_in(&arena);
    m.set_id(7);
    m.init_vals(2);
    m.get_mut_vals().append(CFBytes::new(b"hello", &arena));
    m.get_mut_vals().append(CFBytes::new(b"world!", &arena));
    assert!(!m.has_keys());
    assert_eq!(m.serialize_to_vec(), hex(EXAMPLE1));
    let s = m.sizes();
    assert_eq!((s.header, s.copy, s.zero_copy_count), (36, 11, 0));
}

#[test]
fn example1_decodes_and_reencodes() {
    let arena = Arena::new();
    let wire = hex(EXAMPLE1);
    let m = GetM::deserialize(&wire, &arena).unwrap();
    assert_eq!(m.get_id(), 7);
    assert!(!m.has_keys());
    let vals: Vec<&[u8]> = m.get_vals().iter().map(|v| v.as_bytes()).collect();
    assert_eq!(vals, [&b"hello"[..], b"world!"]);
    assert_eq!(m.serialize_to_vec(), wire);
}

fn build_example2<'a>(arena: &'a Arena, xyz: CFPtr<'a>) -> Outer<'a> {
    let mut o = Outer::new_in(arena);
    o.set_a(1);
    let inner = o.get_mut_in();
    inner.set_b(CFBytes::new(b"ab", arena));
    inner.set_f(true);
    o.init_list(2);
    let mut e0 = Inner::new_in(arena);
    e0.set_b(CFBytes(xyz));
    o.get_mut_list().append(e0);
    o.get_mut_list().append(Inner::new_in(arena));
    o.init_nums(2);
    o.get_mut_nums().append(-1);
    o.get_mut_nums().append(2);
    o
}

#[test]
fn example2_encodes_byte_for_byte_with_a_zero_copy_leaf() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(3);
    let pinned = mem.alloc_copy(b"xyz").unwrap();
    let xyz = CFPtr::new(&pinned, &arena);
    assert!(xyz.is_zero_copy());
    let o = build_example2(&arena, xyz);
    let s = o.sizes();
    assert_eq!(
        (s.header, s.copy, s.zero_copy_count, s.zero_copy_len),
        (97, 10, 1, 3)
    );
    assert_eq!(o.serialize_to_vec(), hex(EXAMPLE2));
    assert_eq!(o.zero_copy_lens(), vec![3]);
}

#[test]
fn example2_decodes_from_a_packet_zero_copy() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(3);
    let pkt = mem.alloc_copy(&hex(EXAMPLE2)).unwrap();
    let o = Outer::deserialize_rcbuf(&pkt, &arena).unwrap();
    assert_eq!(o.get_a(), 1);
    let inner = o.get_in().unwrap();
    assert_eq!(inner.get_b().as_bytes(), b"ab");
    assert!(inner.get_f());
    assert_eq!(o.get_list().len(), 2);
    assert!(o.get_list()[0].get_b().ptr().is_zero_copy());
    assert!(!o.get_list()[1].has_b());
    assert_eq!(o.get_nums().as_slice(), &[-1, 2]);
    // Re-encoding keeps "xyz" zero-copy: the same bytes come out.
    assert_eq!(o.serialize_to_vec(), hex(EXAMPLE2));
}

#[test]
fn strings_and_clearing_update_sizes() {
    let arena = Arena::new();
    let mut m = GetM::new_in(&arena);
    m.init_keys(1);
    m.get_mut_keys().append(CFString::new("k", &arena));
    assert_eq!(m.get_keys()[0].as_str().unwrap(), "k");
    let with_keys = m.sizes().total();
    m.clear_keys();
    assert!(!m.has_keys());
    assert_eq!(m.sizes().total(), 4, "an empty object is just W = 0");
    assert!(with_keys > 4);
    let back = GetM::deserialize(&[0, 0, 0, 0], &arena).unwrap();
    assert!(!back.has_id() && !back.has_keys() && !back.has_vals());
}

/// The little-endian bytes of `words`.
fn le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// `emit_with` writes an object with every field present through its one-check path (one
/// bitmap word, no oneof) and any other through the general one: both give the bytes of the
/// wire format, spelled out here word by word (docs/performance.md, "Choices the instruction
/// counts rest on").
#[test]
fn full_and_partial_headers_are_the_wire_formats_bytes() {
    use cornflakes_codegen_tests::echo::{List, Tree1, Tree2};
    let arena = Arena::new();
    let list = |id: Option<u32>, vals: Option<&[&[u8]]>| {
        let mut m = List::new_in(&arena);
        if let Some(id) = id {
            m.set_id(id);
        }
        if let Some(vals) = vals {
            m.init_vals(vals.len());
            for v in vals {
                m.get_mut_vals().append(CFBytes::new(v, &arena));
            }
        }
        m.serialize_to_vec()
    };
    // Both fields: W, bitmap 0b11, id, (count, offset of the pair array), the pairs, the bytes.
    let mut want = le(&[1, 0b11, 7, 2, 20, 2, 36, 3, 38]);
    want.extend_from_slice(b"abcde");
    assert_eq!(list(Some(7), Some(&[b"ab", b"cde"])), want);
    // `vals` only (the general path): no id slot, everything 4 bytes earlier.
    let mut want = le(&[1, 0b10, 2, 16, 2, 32, 3, 34]);
    want.extend_from_slice(b"abcde");
    assert_eq!(list(None, Some(&[b"ab", b"cde"])), want);
    // `id` only, and nothing.
    assert_eq!(list(Some(7), None), le(&[1, 0b01, 7]));
    assert_eq!(list(None, None), le(&[0]));
    // An empty list is present: its pair says 0 values at the end of the header.
    assert_eq!(list(Some(7), Some(&[])), le(&[1, 0b11, 7, 0, 20]));

    // Nested: Tree2 { left: Tree1 { "a", "bc" }, right: Tree1 { left: "d" } } — the left
    // object takes the full path, the right one the general path, the root the full path.
    let mut l = Tree1::new_in(&arena);
    l.set_left(CFBytes::new(b"a", &arena));
    l.set_right(CFBytes::new(b"bc", &arena));
    let mut r = Tree1::new_in(&arena);
    r.set_left(CFBytes::new(b"d", &arena));
    let mut t = Tree2::new_in(&arena);
    t.set_left(l);
    t.set_right(r);
    // Root header 24 bytes (0..24), left's 24 (24..48), right's 16 (48..64), copy area at 64.
    let mut want = le(&[1, 0b11, 0, 24, 0, 48]);
    want.extend(le(&[1, 0b11, 1, 64, 2, 65]));
    want.extend(le(&[1, 0b01, 1, 67]));
    want.extend_from_slice(b"abcd");
    assert_eq!(t.serialize_to_vec(), want);
    let back = Tree2::deserialize(&want, &arena).unwrap();
    assert_eq!(back, t);
}
