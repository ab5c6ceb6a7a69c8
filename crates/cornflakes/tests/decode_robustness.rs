//! Thousands of random and mutated byte strings through the decoder: errors, never panics;
//! reference counts always balance.

mod common;
use common::{hex, EXAMPLE1, EXAMPLE2};

use cornflakes::handwritten::{GetM, Outer};
use cornflakes::mem::{HugePages, MemoryConfig};
use cornflakes::{Arena, CornflakesObj, DecodeErrorKind, DecodeObj, PinnedMemory};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn decode_all(mem: &PinnedMemory, arena: &Arena, bytes: &[u8]) -> (bool, bool) {
    let a = Outer::deserialize_bytes(bytes, arena)
        .map(|o| o.serialize_to_vec())
        .is_ok();
    let b = GetM::deserialize(bytes, arena)
        .map(|o| o.serialize_to_vec())
        .is_ok();
    if !bytes.is_empty() && bytes.len() <= mem.max_item_size() {
        let pkt = mem.alloc_copy(bytes).unwrap();
        let r = Outer::deserialize_rcbuf(&pkt, arena);
        assert_eq!(r.is_ok(), a);
        drop(r);
        let r = GetM::deserialize_rcbuf(&pkt, arena);
        assert_eq!(r.is_ok(), b);
        drop(r);
        assert_eq!(pkt.ref_count(), 1, "decoded references released");
    }
    (a, b)
}

#[test]
fn random_and_mutated_inputs_never_panic() {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap();
    let mut arena = Arena::with_memory(&mem).with_threshold(2);
    let mut rng = SmallRng::seed_from_u64(0xC0FFEE);
    let seeds = [hex(EXAMPLE1), hex(EXAMPLE2)];
    let mut ok = 0;
    for i in 0..20_000 {
        let bytes: Vec<u8> = if i % 4 == 0 {
            let n = rng.gen_range(0..200);
            (0..n)
                .map(|_| {
                    if rng.gen_bool(0.5) {
                        rng.gen_range(0..4)
                    } else {
                        rng.gen()
                    }
                })
                .collect()
        } else {
            let mut b = seeds[i % 2].clone();
            for _ in 0..rng.gen_range(1..4) {
                match rng.gen_range(0..4) {
                    0 if !b.is_empty() => {
                        let j = rng.gen_range(0..b.len());
                        b[j] = rng.gen();
                    }
                    1 if !b.is_empty() => {
                        let j = rng.gen_range(0..b.len());
                        b[j] ^= 1 << rng.gen_range(0..8);
                    }
                    2 => b.truncate(rng.gen_range(0..=b.len())),
                    _ => {
                        let j = rng.gen_range(0..b.len().max(1));
                        let v = [0u8, 1, 0xff, 0x7f, 0x80][rng.gen_range(0..5)];
                        if j < b.len() {
                            b[j] = v;
                        }
                    }
                }
            }
            b
        };
        let (a, b) = decode_all(&mem, &arena, &bytes);
        ok += a as usize + b as usize;
        if i % 1000 == 0 {
            arena.reset();
        }
    }
    assert!(ok > 0, "some mutations still decode");
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn specific_malformations_give_the_right_error() {
    let arena = Arena::new();
    let e = Outer::deserialize_bytes(&[], &arena).unwrap_err();
    assert!(matches!(e.kind(), DecodeErrorKind::Truncated { .. }), "{e}");

    let mut b = hex(EXAMPLE1);
    b[20] = 0xff; // vals pair array offset far out of bounds
    let e = GetM::deserialize(&b, &arena).unwrap_err();
    assert!(
        matches!(e.kind(), DecodeErrorKind::OutOfBounds { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("GetM.vals"), "{e}");

    let mut b = hex(EXAMPLE1);
    b[12] = 0xff;
    b[13] = 0xff; // vals count 65535: checked against the bytes before any allocation
    let e = GetM::deserialize(&b, &arena).unwrap_err();
    assert!(
        matches!(e.kind(), DecodeErrorKind::OutOfBounds { .. }),
        "{e}"
    );

    let mut b = hex(EXAMPLE2);
    b[60] = 2; // Inner.f = 2 in the `in` header (header @40: W, 2 words, b slot, f)
    let e = Outer::deserialize_bytes(&b, &arena).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::InvalidBool { value: 2 });
    assert_eq!(e.path().collect::<Vec<_>>(), ["Outer.in", "Inner.f"]);

    let mut b = hex(EXAMPLE1);
    b[4] = 0x0d; // field 3 bit set with unknown field... set bit 4 (field 3 of 1,3 + field 4? no: 0b1101 = fields 1,3,4)
                 // Field 4 is above every known field (3): tolerated; its slot is simply not read.
    assert!(GetM::deserialize(&b, &arena).is_ok());
    let mut b = hex(EXAMPLE2);
    b[4] = 0x1f; // Outer field 3 unknown, below known field 5: an error
    let e = Outer::deserialize_bytes(&b, &arena).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::UnknownField { field: 3 });
    assert_eq!(e.offset(), 4, "the bitmap word of the top-level header");
}

#[test]
fn a_tolerated_unknown_field_accepts_what_follows_and_a_known_one_does_not() {
    // The one-word bitmap check: field 4 of GetM (known 1..=3) is above every known field,
    // so its data may lie anywhere and bytes after the known data are accepted; without it
    // the same bytes are trailing.
    let arena = Arena::new();
    let mut b = hex(EXAMPLE1);
    b.extend_from_slice(&[0xaa; 3]);
    let e = GetM::deserialize(&b, &arena).unwrap_err();
    assert!(
        matches!(e.kind(), DecodeErrorKind::TrailingBytes { .. }),
        "{e}"
    );
    b[4] |= 0x08;
    let m = GetM::deserialize(&b, &arena).unwrap();
    let orig = hex(EXAMPLE1);
    let want = GetM::deserialize(&orig, &arena).unwrap();
    assert_eq!(m.get_id(), want.get_id());
    let vals = |g: &GetM<'_>| -> Vec<Vec<u8>> {
        g.get_vals().iter().map(|v| v.as_bytes().to_vec()).collect()
    };
    assert_eq!(vals(&m), vals(&want));
}

#[test]
fn larger_w_with_zero_extra_words_is_accepted() {
    let arena = Arena::new();
    // GetM { id = 9 } with W = 3 (two zero words of padding).
    let b = hex("03000000 01000000 00000000 00000000 09000000");
    let m = GetM::deserialize(&b, &arena).unwrap();
    assert_eq!(m.get_id(), 9);
    assert_eq!(
        m.serialize_to_vec(),
        hex("01000000 01000000 09000000"),
        "encoders write the smallest W"
    );
}

#[test]
fn cyclic_and_shared_offsets_cannot_amplify_work() {
    let arena = Arena::new();
    // Outer with list = 1000 elements all pointing at the Outer header itself is not possible
    // (elements are Inner), so build Outer whose `in` header is the object itself: depth and
    // budget stop it.
    let mut b = hex("01000000 02000000 00000000 00000000");
    b[12] = 0; // in -> header at offset 0 (itself): W=1, bitmap=field 2 -> recursion
    let e = Outer::deserialize_bytes(&b, &arena).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::BudgetExceeded { .. }
                | DecodeErrorKind::TooDeep { .. }
                | DecodeErrorKind::UnknownField { .. }
        ),
        "{e}"
    );
    // A list whose 2000 pairs all point at one element header: the pair array is 16000 bytes of
    // real data, so it fits the budget; one header shared 2000 times exceeds it.
    let n = 2000u32;
    let mut v = Vec::new();
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&8u32.to_le_bytes()); // field 4
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&16u32.to_le_bytes());
    let elem = 16 + n as usize * 8;
    for _ in 0..n {
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&(elem as u32).to_le_bytes());
    }
    // Element: Inner with W=1, b present pointing at a large range.
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    let e = Outer::deserialize_bytes(&v, &arena).unwrap_err();
    assert!(
        matches!(e.kind(), DecodeErrorKind::BudgetExceeded { .. }),
        "{e}"
    );
}

#[test]
fn a_one_word_header_is_refused_as_any_header_is() {
    // `Decoder::header` reads a one-word header (W = 1) with one bounds check; each refusal
    // must still be the general path's, at the same offset.
    let arena = Arena::new();
    let truncated_bitmap = |bytes: &[u8], at: usize, available: usize| {
        let e = Outer::deserialize_bytes(bytes, &arena).unwrap_err();
        assert_eq!(
            e.kind(),
            &DecodeErrorKind::Truncated {
                what: "bitmap",
                need: 4,
                available
            },
            "{e}"
        );
        assert_eq!(e.offset(), at, "{e}");
        e
    };
    // The top-level header: W = 1 and no bitmap word, or half of one.
    truncated_bitmap(&hex("01000000"), 4, 0);
    truncated_bitmap(&hex("01000000 0200"), 4, 2);
    // A nested one (`in` at offset 16, its bitmap word cut after two bytes).
    let e = truncated_bitmap(
        &hex("01000000 02000000 00000000 10000000 01000000 0000"),
        20,
        2,
    );
    assert_eq!(e.path().collect::<Vec<_>>(), ["Outer.in"]);
    // W = 0 and W = 2 take the general path: an empty header, and a second word present.
    let empty = hex("00000000");
    let m = Outer::deserialize_bytes(&empty, &arena).unwrap();
    assert!(!m.has_in());
    let two_words = hex("02000000 01000000 00000000 07000000 00000000");
    let m = Outer::deserialize_bytes(&two_words, &arena).unwrap();
    assert_eq!(m.get_a(), 7);
    // The budget: `in` points back at the top-level header, whose 8 bytes were charged with
    // the slot's 8; charging them again exceeds the 16-byte object, at the header's offset.
    let e =
        Outer::deserialize_bytes(&hex("01000000 02000000 00000000 00000000"), &arena).unwrap_err();
    assert_eq!(
        e.kind(),
        &DecodeErrorKind::BudgetExceeded { object_len: 16 },
        "{e}"
    );
    assert_eq!(e.offset(), 0);
    assert_eq!(e.path().collect::<Vec<_>>(), ["Outer.in"]);
}
