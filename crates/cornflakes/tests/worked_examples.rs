//! The two worked examples of docs/wire-format.md, byte for byte, both ways.

mod common;
use common::{hex, EXAMPLE1, EXAMPLE2};

use cornflakes::handwritten::{GetM, Inner, Outer};
use cornflakes::{Arena, CFBytes, CFPtr, CornflakesObj, DecodeObj, PinnedMemory};

#[test]
fn example1_encodes_byte_for_byte() {
    let arena = Arena::new();
    let mut m = GetM::new_in(&arena);
    m.set_id(7);
    m.init_vals(2);
    m.get_mut_vals().append(CFBytes::new(b"hello", &arena));
    m.get_mut_vals().append(CFBytes::new(b"world!", &arena));
    let bytes = m.serialize_to_vec();
    assert_eq!(bytes.len(), 47);
    assert_eq!(bytes, hex(EXAMPLE1));
    let s = m.sizes();
    assert_eq!((s.header, s.copy, s.zero_copy_count), (36, 11, 0));
}

#[test]
fn example1_decodes() {
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
    let arena = Arena::with_memory(&mem).with_threshold(0);
    let pinned = mem.alloc_copy(b"xyz").unwrap();
    let xyz = CFPtr::new(&pinned, &arena);
    assert!(xyz.is_zero_copy());
    let o = build_example2(&arena, xyz);
    let s = o.sizes();
    assert_eq!(
        (s.header, s.copy, s.zero_copy_count, s.zero_copy_len),
        (97, 10, 1, 3)
    );
    let bytes = o.serialize_to_vec();
    assert_eq!(bytes.len(), 110);
    assert_eq!(bytes, hex(EXAMPLE2));

    // The two-walk send path gives the same bytes: first entry, then each zero-copy entry.
    let mut head = vec![0u8; s.head()];
    o.write_header_and_copy(&s, &mut head, cornflakes::wire::Demote::NONE, 0)
        .expect("sized by sizes()");
    let mut wire = head;
    let mut keep_all = cornflakes::wire::Demote::NONE;
    o.for_each_zero_copy(&mut keep_all, &mut |b: cornflakes::PinnedRef<'_>| {
        wire.extend_from_slice(&b)
    });
    assert_eq!(wire, hex(EXAMPLE2));
}

#[test]
fn example2_decodes_and_references_the_packet() {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(3);
    let pkt = mem.alloc_copy(&hex(EXAMPLE2)).unwrap();
    let o = Outer::deserialize_rcbuf(&pkt, &arena).unwrap();
    assert_eq!(o.get_a(), 1);
    let inner = o.get_in().unwrap();
    assert_eq!(inner.get_b().as_bytes(), b"ab");
    assert!(
        !inner.get_b().ptr().is_zero_copy(),
        "2 bytes is below the threshold of 3"
    );
    assert!(inner.get_f());
    assert_eq!(o.get_list().len(), 2);
    let b0 = o.get_list()[0].get_b();
    assert_eq!(b0.as_bytes(), b"xyz");
    assert!(
        b0.ptr().is_zero_copy(),
        "3 bytes at the threshold reference the packet"
    );
    assert_eq!(
        b0.ptr().as_pinned().unwrap().as_ptr(),
        pkt[107..].as_ptr(),
        "no copy"
    );
    assert_eq!(
        pkt.ref_count(),
        1,
        "a view borrowed like the packet: no count taken"
    );
    assert!(!o.get_list()[1].has_b());
    assert_eq!(o.get_nums().as_slice(), &[-1, 2]);
    // Re-encoding the decoded object (xyz now zero-copy from the packet) reproduces the bytes.
    assert_eq!(o.serialize_to_vec(), hex(EXAMPLE2));
    drop(o);
    assert_eq!(pkt.ref_count(), 1);
}

#[test]
fn example2_decodes_from_plain_bytes() {
    let arena = Arena::new();
    let wire = hex(EXAMPLE2);
    let o = Outer::deserialize_bytes(&wire, &arena);
    let o = o.unwrap();
    assert_eq!(o.get_list()[0].get_b().as_bytes(), b"xyz");
    assert!(!o.get_list()[0].get_b().ptr().is_zero_copy());
}
