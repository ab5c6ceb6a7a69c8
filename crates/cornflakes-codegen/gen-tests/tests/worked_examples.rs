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
