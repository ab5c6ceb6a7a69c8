//! The traps a new user fell into (issue 16), one test each; every test failed (or did not
//! compile) before the fix.

use cornflakes::handwritten::{GetM, Outer};
use cornflakes::mem::{AllocError, HugePages, MemoryConfig};
use cornflakes::wire::{BufferTooSmall, Demote};
use cornflakes::{
    Arena, CFBytes, CornflakesObj, PinnedMemory, SendPlan, ZeroCopyFallback, ZeroCopyFallbacks,
};

fn mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

/// Trap 1: appending through `get_mut_*` without `init_*` used to drop the field on the wire.
#[test]
fn appending_without_init_sends_the_values() {
    let arena = Arena::new();
    let mut m = GetM::new_in(&arena);
    m.get_mut_vals().append(CFBytes::new(b"hello", &arena));
    assert!(m.has_vals());
    let bytes = m.serialize_to_vec();
    let rx = Arena::new();
    let back = GetM::deserialize(&bytes, &rx).unwrap();
    assert_eq!(back.get_vals().len(), 1);
    assert_eq!(back.get_vals()[0].as_bytes(), b"hello");

    let mut o = Outer::new_in(&arena);
    o.get_mut_nums().append(-3);
    let bytes = o.serialize_to_vec();
    let back = <Outer as cornflakes::DecodeObj>::deserialize_bytes(&bytes, &rx).unwrap();
    assert_eq!(back.get_nums().as_slice(), &[-3]);
}

/// Trap 2: an item size above 2 MiB was accepted (and `config()` disagreed with
/// `max_item_size()`) until the first large `alloc`.
#[test]
fn memory_config_is_validated_at_construction() {
    let too_big = MemoryConfig {
        max_item_size: 256 << 20,
        ..MemoryConfig::default()
    };
    let Err(err) = PinnedMemory::new(too_big) else {
        panic!("256 MiB items accepted")
    };
    assert!(matches!(&err, AllocError::InvalidConfig(e) if e.field == "max_item_size"));
    let text = err.to_string();
    assert!(
        text.contains("max_item_size = 268435456") && text.contains("2 MiB"),
        "{text}"
    );

    for bad in [
        MemoryConfig {
            max_item_size: 10_000,
            ..MemoryConfig::default()
        },
        MemoryConfig {
            min_item_size: 32,
            ..MemoryConfig::default()
        },
        MemoryConfig {
            min_item_size: 64 << 10,
            max_item_size: 16 << 10,
            ..MemoryConfig::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
        assert!(PinnedMemory::new(bad).is_err());
    }

    let biggest = PinnedMemory::new(MemoryConfig {
        max_item_size: MemoryConfig::MAX_ITEM_SIZE,
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap();
    assert_eq!(biggest.config().max_item_size, biggest.max_item_size());
    assert!(biggest.alloc(2 << 20).is_ok());
}

/// Trap 3: a short buffer made `write_header_and_copy` panic inside the encoder.
#[test]
fn short_buffers_are_an_error() {
    let arena = Arena::new();
    let mut m = GetM::new_in(&arena);
    m.set_id(9);
    m.get_mut_vals().append(CFBytes::new(&[1u8; 100], &arena));
    let s = m.sizes();
    let mut short = vec![0u8; s.head() - 1];
    assert_eq!(
        m.write_header_and_copy(&s, &mut short, Demote::NONE, 0),
        Err(BufferTooSmall {
            needed: s.head(),
            available: s.head() - 1
        })
    );
    assert!(short.iter().all(|&b| b == 0), "nothing written");
    let plan = SendPlan::new(&m, 4);
    assert!(plan.write_head(&mut short).is_err());
    let mut exact = vec![0u8; s.head()];
    assert_eq!(plan.write_head(&mut exact), Ok(s.head()));
    assert!(m.serialize_into(&mut short).is_err());
}

/// Trap 7: a custom datapath serializes into its own buffer and gets the descriptors.
#[test]
fn send_plan_gives_head_and_descriptors() {
    let mem = mem();
    let arena = Arena::with_memory(&mem);
    let values: Vec<_> = [600usize, 10, 700, 800]
        .iter()
        .enumerate()
        .map(|(i, &n)| mem.alloc_copy(&vec![i as u8 + 1; n]).unwrap())
        .collect();
    let mut m = GetM::new_in(&arena);
    m.set_id(3);
    for v in &values {
        m.get_mut_vals().append(CFBytes::new(&v[..], &arena));
    }
    let flat = m.serialize_to_vec();
    for max_zc in [0, 1, 2, 3, 8] {
        let plan = SendPlan::new(&m, max_zc);
        assert_eq!(plan.total_len(), flat.len());
        let mut wire = vec![0u8; plan.head_len()];
        assert_eq!(plan.write_head(&mut wire), Ok(plan.head_len()));
        let mut entries = 0;
        plan.for_each_zero_copy(|b| {
            entries += 1;
            wire.extend_from_slice(&b);
        });
        assert_eq!(entries, plan.zero_copy_entries(), "max {max_zc}");
        assert_eq!(entries, max_zc.min(3));
        assert_eq!(wire.len(), flat.len());
        if max_zc >= 3 {
            assert_eq!(wire, flat);
            assert_eq!(plan.demoted_bytes(), 0);
        }
        let rx = Arena::new();
        let back = GetM::deserialize(&wire, &rx).unwrap();
        let got: Vec<&[u8]> = back.get_vals().iter().map(|v| v.as_bytes()).collect();
        let want: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
        assert_eq!(got, want, "max {max_zc}");
    }
}

/// Trap 8: per-request reuse of one arena without an inner scope.
#[test]
fn arena_scope_resets_after_each_request() {
    let mut arena = Arena::new();
    let mut sent = Vec::new();
    for id in 0..100u32 {
        sent.push(arena.scope(|a| {
            let mut m = GetM::new_in(a);
            m.set_id(id);
            m.get_mut_vals().append(CFBytes::new(&[id as u8; 300], a));
            m.serialize_to_vec()
        }));
    }
    let rx = Arena::new();
    for (id, bytes) in sent.iter().enumerate() {
        assert_eq!(GetM::deserialize(bytes, &rx).unwrap().get_id(), id as u32);
    }
    // Reset each time: the arena holds one request's worth, not a hundred.
    assert!(
        arena.allocated_bytes() < 100 * 300,
        "{}",
        arena.allocated_bytes()
    );
}

/// Trap 9: values that could not go zero-copy are counted, by reason.
#[test]
fn zero_copy_fallbacks_are_counted_by_reason() {
    let mem = mem();
    let arena = Arena::with_memory(&mem);
    assert_eq!(arena.zero_copy_fallbacks(), ZeroCopyFallbacks::default());
    let heap = vec![1u8; 4096];
    assert!(!CFBytes::new(&heap, &arena).ptr().is_zero_copy());
    let mut filling = mem.alloc(4096).unwrap();
    filling.fill(2);
    assert!(!CFBytes::new(&filling[..], &arena).ptr().is_zero_copy());
    let pinned = filling.freeze();
    assert!(CFBytes::new(&pinned[..], &arena).ptr().is_zero_copy());
    // Below the threshold a copy is the plan, not a fallback.
    assert!(!CFBytes::new(&heap[..100], &arena).ptr().is_zero_copy());
    let f = arena.zero_copy_fallbacks();
    assert_eq!(f.get(ZeroCopyFallback::NotPinned), 1);
    assert_eq!(f.not_frozen, 1);
    assert_eq!(f.total(), 2);

    let mut plain = Arena::new();
    let _ = CFBytes::new(&heap, &plain);
    assert_eq!(plain.zero_copy_fallbacks().no_pinned_memory, 1);
    plain.reset();
    assert_eq!(plain.zero_copy_fallbacks().total(), 1, "kept across reset");
}
