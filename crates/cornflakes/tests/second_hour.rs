//! What a user hit in the second hour (issue 28), runtime side, one test each; each fails on
//! the code before the fix (or does not compile against it).

use cornflakes::handwritten::{GetM, Inner, Outer};
use cornflakes::{
    Arena, ArenaFull, BufferTooSmall, CFBytes, CFString, ConfigError, CornflakesObj,
    DecodeErrorKind, DecodeObj, HugePages, MemoryConfig, PinnedMemory, ZeroCopyFallback,
};

fn cfg() -> MemoryConfig {
    MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    }
}

fn getm_wire() -> Vec<u8> {
    let a = Arena::new();
    let mut m = GetM::new_in(&a);
    m.set_id(7);
    m.get_mut_keys().append(CFString::new("k", &a));
    m.get_mut_vals().append(CFBytes::new(b"hello", &a));
    m.serialize_to_vec()
}

/// Item 3: bytes after the object were accepted silently. Now refused by default, and the
/// explicit prefix decode reports how many bytes the object used.
#[test]
fn trailing_bytes_are_refused_unless_asked_for() {
    let wire = getm_wire();
    let arena = Arena::new();
    assert!(GetM::deserialize(&wire, &arena).is_ok(), "the exact object");

    let mut padded = wire.clone();
    padded.extend_from_slice(&[0xEE; 100]);
    let err = GetM::deserialize(&padded, &arena).unwrap_err();
    assert_eq!(
        err.kind(),
        &DecodeErrorKind::TrailingBytes {
            consumed: wire.len(),
            len: padded.len()
        }
    );
    assert!(err.to_string().contains("100 trailing bytes"), "{err}");

    let (m, used) = GetM::deserialize_prefix(&padded, &arena).unwrap();
    assert_eq!((m.get_id(), used), (7, wire.len()));
    let (_, used) = GetM::deserialize_prefix(&wire, &arena).unwrap();
    assert_eq!(used, wire.len());

    // From a packet as well.
    let mem = PinnedMemory::new(cfg()).unwrap();
    let pkt = mem.alloc_copy(&padded).unwrap();
    assert!(matches!(
        GetM::deserialize_rcbuf(&pkt, &arena).unwrap_err().kind(),
        DecodeErrorKind::TrailingBytes { .. }
    ));
    let (_, used) = GetM::deserialize_rcbuf_prefix(&pkt, &arena).unwrap();
    assert_eq!(used, wire.len());
}

/// Every byte of a canonical encoding is used: nested headers, pair arrays, copy and
/// zero-copy areas (worked example 2 has all of them), so the default never refuses one.
#[test]
fn every_canonical_encoding_is_used_whole() {
    let mem = PinnedMemory::new(cfg()).unwrap();
    let tx = Arena::with_memory(&mem).with_threshold(3);
    let xyz = mem.alloc_copy(b"xyz").unwrap();
    let mut o = Outer::new_in(&tx);
    o.set_a(1);
    o.get_mut_in().set_b(CFBytes::new(b"ab", &tx));
    o.get_mut_in().set_f(true);
    let mut e0 = Inner::new_in(&tx);
    e0.set_b(CFBytes::new(&xyz[..], &tx));
    o.get_mut_list().append(e0);
    o.get_mut_list().append(Inner::new_in(&tx));
    o.get_mut_nums().append(-1);
    o.get_mut_nums().append(2);
    let wire = o.serialize_to_vec();
    assert_eq!(wire.len(), 110);
    let rx = Arena::new();
    assert!(Outer::deserialize_bytes(&wire, &rx).is_ok());
    // An empty object is its 4-byte header.
    let empty = Outer::new_in(&tx).serialize_to_vec();
    assert_eq!(Outer::deserialize_prefix(&empty, &rx).unwrap().1, 4);
    // Cutting the last byte off is still an error of its own (not "trailing").
    assert!(matches!(
        Outer::deserialize_bytes(&wire[..109], &rx)
            .unwrap_err()
            .kind(),
        DecodeErrorKind::OutOfBounds { .. }
    ));
}

/// A field this reader does not know (from a newer schema) may hold data anywhere: trailing
/// bytes cannot be told from it, so such an object is accepted and the prefix decode
/// reports the whole input.
#[test]
fn unknown_newer_fields_are_not_mistaken_for_trailing_bytes() {
    // GetM with a string field 4 (unknown to this reader), value after the known data.
    let a = Arena::new();
    let mut m = GetM::new_in(&a);
    m.set_id(9);
    let mut wire = m.serialize_to_vec(); // W=1, bitmap, id
    wire[4] |= 1 << 3; // field 4 present
    let off = (wire.len() + 8) as u32;
    wire.extend_from_slice(&3u32.to_le_bytes());
    wire.extend_from_slice(&off.to_le_bytes());
    wire.extend_from_slice(b"new");
    let rx = Arena::new();
    let back = GetM::deserialize(&wire, &rx).unwrap();
    assert_eq!(back.get_id(), 9);
    assert_eq!(GetM::deserialize_prefix(&wire, &rx).unwrap().1, wire.len());
}

/// Item 2: an arena never reset grew without bound and nothing said so. The high-water
/// figure shows it; the limit refuses the next request instead of growing further.
#[test]
fn arena_growth_is_visible_and_bounded() {
    let wire = getm_wire();
    let mut arena = Arena::new();
    for _ in 0..1000 {
        arena
            .scope(|a| GetM::deserialize(&wire, a).map(|_| ()))
            .unwrap();
    }
    let per_request = arena.high_water_bytes();
    assert!(per_request <= 32 * 1024, "one first chunk: {per_request}");

    let mut unbounded = Arena::new();
    for _ in 0..5000 {
        let _ = GetM::deserialize(&wire, &unbounded).unwrap();
    }
    assert!(
        unbounded.high_water_bytes() > per_request,
        "growth is visible"
    );
    unbounded.reset();
    assert_eq!(
        unbounded.high_water_bytes(),
        unbounded
            .high_water_bytes()
            .max(unbounded.allocated_bytes()),
        "kept across reset"
    );

    let limit = 64 * 1024;
    let limited = Arena::new().with_limit(limit);
    assert_eq!(limited.limit(), Some(limit));
    let mut refused = None;
    for i in 0..100_000 {
        match GetM::deserialize(&wire, &limited) {
            Ok(_) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (i, e) = refused.expect("the limit refuses a request");
    assert!(i > 100, "requests under the limit are served ({i})");
    assert!(
        matches!(e.kind(), DecodeErrorKind::ArenaLimit { limit: l, .. } if *l == limit),
        "{e}"
    );
    assert!(e.to_string().contains("Arena::scope"), "{e}");
    let full: ArenaFull = limited.check_limit().unwrap_err();
    assert!(full.allocated > limit);
    // Bounded: one request past the limit at most (one more chunk).
    assert!(
        limited.high_water_bytes() <= 4 * limit,
        "{}",
        limited.high_water_bytes()
    );
}

/// Item 4: `validate` passed configurations `PinnedMemory::new` (or every allocation)
/// then refused, e.g. `initial_bytes` rounded up to 2 MiB above `max_bytes`.
#[test]
fn validate_refuses_what_new_would_refuse_naming_field_and_rounding() {
    let mib = 1 << 20;
    let cases: Vec<(MemoryConfig, &str, &str)> = vec![
        (
            MemoryConfig {
                initial_bytes: mib,
                max_bytes: mib,
                ..cfg()
            },
            "initial_bytes",
            "(2097152 bytes, as it is mapped) is above max_bytes = 1048576",
        ),
        (
            MemoryConfig {
                initial_bytes: 3 * mib,
                max_bytes: 3 * mib,
                ..cfg()
            },
            "initial_bytes",
            "4194304 bytes",
        ),
        (
            MemoryConfig {
                initial_bytes: 0,
                region_bytes: 5 * mib,
                max_bytes: 4 * mib,
                ..cfg()
            },
            "region_bytes",
            "6291456 bytes",
        ),
        (
            MemoryConfig {
                initial_bytes: 0,
                grow: false,
                ..cfg()
            },
            "initial_bytes",
            "grow is false",
        ),
        (
            MemoryConfig {
                min_item_size: 4096,
                max_item_size: 1024,
                ..cfg()
            },
            "min_item_size",
            "max_item_size (1024)",
        ),
    ];
    for (c, field, words) in cases {
        let e: ConfigError = c.validate().unwrap_err();
        assert_eq!(e.field, field, "{e}");
        assert!(e.to_string().contains(words), "{e}");
        assert!(PinnedMemory::new(c).is_err());
    }
    // What validate accepts, new accepts and can allocate from.
    for c in [
        MemoryConfig {
            initial_bytes: mib,
            max_bytes: 2 * mib,
            ..cfg()
        },
        MemoryConfig {
            initial_bytes: 2 * mib,
            grow: false,
            max_bytes: 2 * mib,
            ..cfg()
        },
        MemoryConfig {
            initial_bytes: 0,
            max_bytes: 2 * mib,
            ..cfg()
        },
    ] {
        c.validate().unwrap();
        let m = PinnedMemory::new(c).unwrap();
        assert!(m.alloc(100).is_ok());
    }
}

/// Item 7: a value in another `PinnedMemory` was counted as `not_pinned` ("heap, stack").
#[test]
fn values_from_another_pinned_memory_are_counted_apart() {
    let ours = PinnedMemory::new(cfg()).unwrap();
    let theirs = PinnedMemory::new(cfg()).unwrap();
    let arena = Arena::with_memory(&ours);
    let foreign = theirs.alloc_copy(&[3u8; 4096]).unwrap();
    let heap = vec![3u8; 4096];
    assert!(!CFBytes::new(&foreign[..], &arena).ptr().is_zero_copy());
    assert!(!CFBytes::new(&heap, &arena).ptr().is_zero_copy());
    let f = arena.zero_copy_fallbacks();
    assert_eq!(f.get(ZeroCopyFallback::OtherPinnedMemory), 1);
    assert_eq!((f.other_pinned_memory, f.not_pinned, f.total()), (1, 1, 2));
    // Once that memory is gone, its addresses are no longer "pinned".
    let addr_range = foreign.as_ptr() as usize;
    drop(foreign);
    drop(theirs);
    assert!(!cornflakes::mem::region::in_any_region(addr_range));
}

/// Item 8 (runtime side): string values compare with `&str`, bytes with byte strings, and
/// the commonly needed types are at the crate root.
#[test]
fn values_compare_with_plain_strings_and_types_are_at_the_root() {
    let arena = Arena::new();
    let s = CFString::new("k", &arena);
    assert!(s == "k", "CFString == &str");
    assert!("k" == s, "&str == CFString");
    assert!(s != "x");
    assert_eq!(s, "k");
    let b = CFBytes::new(b"v", &arena);
    assert!(b == b"v", "CFBytes == &[u8; N]");
    assert!(b == b"v"[..], "CFBytes == [u8]");
    assert!(b != b"w");
    let _: fn(usize, usize) -> BufferTooSmall = BufferTooSmall::new;
    let _ = cornflakes::AllocError::TooLarge {
        requested: 1,
        max: 0,
    };
}
