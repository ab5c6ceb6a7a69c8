//! Hybrid pointers over pinned memory (the threshold, borrowing, UTF-8) and arena reuse; the
//! pinned pools themselves are tested in cornflakes-mem (tests/pool.rs).

use cornflakes::mem::{HugePages, MemoryConfig};
use cornflakes::{Arena, CFPtr, PinnedMemory};

fn small_mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

#[test]
fn cfptr_applies_the_threshold() {
    let mem = small_mem();
    let big = mem.alloc_copy(&[3u8; 2048]).unwrap();
    let small = mem.alloc_copy(&[4u8; 100]).unwrap();
    let heap = vec![5u8; 4096];
    for (threshold, big_zc, small_zc) in [
        (512, true, false),
        (0, true, true),
        (usize::MAX, false, false),
    ] {
        let arena = Arena::with_memory(&mem).with_threshold(threshold);
        assert_eq!(
            CFPtr::new(&big, &arena).is_zero_copy(),
            big_zc,
            "threshold {threshold}"
        );
        assert_eq!(
            CFPtr::new(&small, &arena).is_zero_copy(),
            small_zc,
            "threshold {threshold}"
        );
        assert!(
            !CFPtr::new(&heap, &arena).is_zero_copy(),
            "unpinned memory is copied"
        );
        assert_eq!(CFPtr::new(&heap, &arena).as_bytes(), &heap[..]);
    }
    let arena = Arena::new().with_threshold(0);
    assert!(
        !CFPtr::new(&big, &arena).is_zero_copy(),
        "no pinned memory in the arena: copy"
    );
    assert_eq!(big.ref_count(), 1);
    assert_eq!(small.ref_count(), 1);
}

#[test]
fn cfptr_from_rcbuf_ref_borrows_short_values_and_references_long_ones() {
    let mem = small_mem();
    let big = mem.alloc_copy(&[3u8; 2048]).unwrap();
    let small = mem.alloc_copy(&[4u8; 100]).unwrap();
    for (threshold, big_zc, small_zc) in [
        (512, true, false),
        (0, true, true),
        (usize::MAX, false, false),
    ] {
        let arena = Arena::with_memory(&mem).with_threshold(threshold);
        let (b, s) = (
            CFPtr::from_rcbuf_ref(&big, &arena),
            CFPtr::from_rcbuf_ref(&small, &arena),
        );
        assert_eq!(
            (b.is_zero_copy(), s.is_zero_copy()),
            (big_zc, small_zc),
            "threshold {threshold}"
        );
        // Either way the bytes are the buffer's own: a reference or a borrow, never a copy.
        assert_eq!(b.as_bytes().as_ptr(), big.as_ptr(), "threshold {threshold}");
        assert_eq!(
            s.as_bytes().as_ptr(),
            small.as_ptr(),
            "threshold {threshold}"
        );
        // Neither kind holds a reference: the buffers outlive the pointers.
        assert_eq!((big.ref_count(), small.ref_count()), (1, 1));
    }
    let empty = mem.alloc_copy(&[]).unwrap();
    let arena = Arena::with_memory(&mem).with_threshold(0);
    assert!(
        !CFPtr::from_rcbuf_ref(&empty, &arena).is_zero_copy(),
        "an empty value is never its own scatter-gather entry"
    );
}

#[test]
fn cfstring_checks_utf8_lazily_and_never_alters_bytes() {
    use cornflakes::CFString;
    let bad = CFString::from_ptr_unchecked_utf8(CFPtr::borrowed(b" \xff trailing "));
    assert!(bad.as_str().is_err());
    assert_eq!(bad.as_bytes(), b" \xff trailing ");
    let good = CFString::from_ptr_unchecked_utf8(CFPtr::borrowed(" caf\u{e9} ".as_bytes()));
    assert_eq!(good.as_str().unwrap(), " caf\u{e9} ");
    assert_eq!(good.as_str().unwrap(), " caf\u{e9} ");
}

#[test]
fn arena_reset_reuses_memory() {
    let mut arena = Arena::new();
    for _ in 0..3 {
        for _ in 0..1000 {
            let _ = arena.copy_slice(&[1u8; 100]);
        }
        let used = arena.allocated_bytes();
        assert!(used >= 100_000);
        arena.reset();
    }
    assert!(
        arena.allocated_bytes() < 1 << 20,
        "reset keeps one chunk, not all"
    );
}
