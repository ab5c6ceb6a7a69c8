//! Pinned pools, RcBuf reference counting and pointer recovery (moved with the memory code
//! from the runtime's tests/memory.rs).

use cornflakes_mem::{AllocError, HugePages, MemoryConfig, PinnedMemory, MAX_REFS};

fn small_mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

#[test]
fn clone_drop_and_free_lifecycle() {
    let mem = small_mem();
    let mut m = mem.alloc(100).unwrap();
    assert_eq!(m.capacity(), 128);
    m.copy_from_slice(&[5u8; 100]);
    let a = m.freeze();
    assert_eq!(a.ref_count(), 1);
    assert_eq!(mem.stats().live_items, 1);
    let b = a.clone();
    let c = a.slice(10..20);
    assert_eq!(a.ref_count(), 3);
    assert_eq!(&c[..], &[5u8; 10]);
    drop(b);
    drop(a);
    assert_eq!(c.ref_count(), 1);
    assert_eq!(mem.stats().live_items, 1);
    let addr = c.as_ptr();
    drop(c);
    assert_eq!(mem.stats().live_items, 0);
    // The freed item is reused by the next allocation of its class.
    let again = mem.alloc(128).unwrap();
    // SAFETY: `addr` is 10 bytes into an item of the pool's mapped region, so 10 bytes back
    // is the item's start, inside the same allocation; the pointer is only compared.
    assert_eq!(again.as_ref().as_ptr(), unsafe { addr.sub(10) });
}

#[test]
fn recover_on_a_freed_item_gives_none() {
    let mem = small_mem();
    let buf = mem.alloc_copy(&[1u8; 1000]).unwrap();
    // SAFETY: 1000 bytes of the pool's region, which stays mapped while `mem` lives; after
    // `drop(buf)` the slice is only handed to `recover_ptr`, which compares addresses.
    let raw: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr(), 1000) };
    assert!(mem.recover_ptr(raw).is_some());
    drop(buf);
    assert!(
        mem.recover_ptr(raw).is_none(),
        "a free item must not be recovered"
    );
}

#[test]
fn recover_refuses_an_item_being_filled() {
    let mem = small_mem();
    let mut m = mem.alloc(256).unwrap();
    // SAFETY: the item's 256 bytes, mapped while `mem` lives and not written while `raw` is
    // used (the test only hands it to `recover_ptr`).
    let raw: &[u8] = unsafe { std::slice::from_raw_parts(m.as_mut_ptr(), 256) };
    assert!(mem.recover_ptr(raw).is_none());
    let frozen = m.freeze();
    assert_eq!(mem.recover_ptr(raw).unwrap().ref_count(), 2);
    drop(frozen);
}

#[test]
fn recover_at_item_edges() {
    let mem = small_mem();
    let a = mem.alloc(1024).unwrap().freeze();
    let b = mem.alloc(1024).unwrap().freeze();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY (every use below): `p..p + len` lies inside the pool's mapped region (two
    // adjacent 1024-byte items and at most one byte past the first), which lives as long as
    // `mem`; the slices are only handed to `recover_ptr`.
    let span = |p: *const u8, len: usize| unsafe { std::slice::from_raw_parts(p, len) };
    // Whole item, first byte, last byte.
    assert_eq!(mem.recover_ptr(span(pa, 1024)).unwrap().len(), 1024);
    assert_eq!(mem.recover_ptr(span(pa, 1)).unwrap().item_offset(), 0);
    // SAFETY: byte 1023 of a 1024-byte item.
    let last = mem.recover_ptr(span(unsafe { pa.add(1023) }, 1)).unwrap();
    assert_eq!(last.item_offset(), 1023);
    // SAFETY: as above.
    assert_eq!(last.as_ptr(), unsafe { pa.add(1023) });
    drop(last);
    // One byte past the end of an item straddles into the next: refused.
    if pb as usize == pa as usize + 1024 {
        assert!(mem.recover_ptr(span(pa, 1025)).is_none());
        // SAFETY: byte 1023 of the first item; the next item follows it directly.
        assert!(mem.recover_ptr(span(unsafe { pa.add(1023) }, 2)).is_none());
    }
    // Empty slices and memory outside pinned regions: refused.
    assert!(mem.recover_ptr(span(pa, 0)).is_none());
    let heap = vec![0u8; 4096];
    assert!(mem.recover_ptr(&heap).is_none());
    assert!(mem.recover_ptr(&[1, 2, 3]).is_none());
    assert_eq!(a.ref_count(), 1, "all recovered views were dropped");
    drop(b);
}

#[test]
fn recovered_buffer_keeps_item_alive() {
    let mem = small_mem();
    let a = mem.alloc_copy(&[9u8; 600]).unwrap();
    let r = mem.recover_ptr(&a[100..600]).unwrap();
    drop(a);
    assert_eq!(r.ref_count(), 1);
    assert_eq!(&r[..], &[9u8; 500][..]);
    assert_eq!(mem.stats().live_items, 1);
    drop(r);
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn refcount_overflow_is_an_error_not_a_wrap() {
    let mem = small_mem();
    let a = mem.alloc_copy(&[1u8; 64]).unwrap();
    // SAFETY: restored to 1 (the one live reference) before `a` is dropped.
    unsafe { a.set_ref_count_for_test(MAX_REFS) };
    assert!(a.try_clone().is_err());
    assert!(a.try_slice(0, 1).is_err());
    assert!(mem.try_recover_ptr(&a).is_err());
    assert!(
        mem.recover_ptr(&a).is_none(),
        "saturated: recovery falls back (to a copy)"
    );
    assert_eq!(a.ref_count(), MAX_REFS, "a failed clone changes nothing");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.clone()));
    assert!(r.is_err(), "Clone panics instead of wrapping");
    // SAFETY: back to the one live reference, `a`, before it is dropped.
    unsafe { a.set_ref_count_for_test(1) };
    drop(a);
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn size_classes_and_limits() {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        max_item_size: 8192,
        ..MemoryConfig::default()
    })
    .unwrap();
    assert_eq!(mem.alloc(0).unwrap().capacity(), 64);
    assert_eq!(mem.alloc(65).unwrap().capacity(), 128);
    assert_eq!(mem.alloc(8192).unwrap().capacity(), 8192);
    assert!(matches!(
        mem.alloc(8193),
        Err(AllocError::TooLarge {
            requested: 8193,
            max: 8192
        })
    ));
}

#[test]
fn growth_across_many_chunks_and_regions_keeps_recovery_exact() {
    let mem = small_mem();
    // 40 MiB of 16 KiB items: 20 chunks, 20 regions, forcing table growth.
    let bufs: Vec<_> = (0..2560u32)
        .map(|i| mem.alloc_copy(&i.to_le_bytes().repeat(4096)).unwrap())
        .collect();
    assert!(mem.stats().regions >= 20);
    for (i, b) in bufs.iter().enumerate() {
        let r = mem.recover_ptr(&b[4..16]).unwrap();
        assert_eq!(&r[..4], &(i as u32).to_le_bytes());
        assert_eq!(r.item_offset(), 4);
    }
    drop(bufs);
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn items_are_handed_out_once_and_freed_ones_reused_before_fresh_ones() {
    let mem = small_mem();
    // One and a half chunks of 16 KiB items (128 per 2 MiB chunk).
    let mut held: Vec<_> = (0..192).map(|_| mem.alloc(16384).unwrap()).collect();
    let mut addrs: Vec<usize> = held.iter_mut().map(|b| b.as_mut_ptr() as usize).collect();
    addrs.sort_unstable();
    addrs.dedup();
    assert_eq!(addrs.len(), 192, "no item handed out twice");
    assert_eq!(mem.stats().chunks_in_use, 2);
    // Free ten items of the first chunk: the next ten allocations take exactly those, and
    // only then the second chunk's never-used items.
    let mut freed: Vec<usize> = held
        .drain(20..30)
        .map(|mut b| b.as_mut_ptr() as usize)
        .collect();
    let mut again: Vec<usize> = (0..10)
        .map(|_| mem.alloc(16384).unwrap())
        .map(|mut b| {
            let a = b.as_mut_ptr() as usize;
            held.push(b);
            a
        })
        .collect();
    freed.sort_unstable();
    again.sort_unstable();
    assert_eq!(again, freed);
    let more: Vec<_> = (0..64).map(|_| mem.alloc(16384).unwrap()).collect();
    assert_eq!(
        mem.stats().chunks_in_use,
        2,
        "the second chunk is filled first"
    );
    assert_eq!(mem.stats().live_items, 192 + 64);
    drop((held, more));
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn no_growth_means_exhaustion_error() {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        grow: false,
        initial_bytes: 2 << 20,
        ..MemoryConfig::default()
    })
    .unwrap();
    let held: Vec<_> = (0..128).map(|_| mem.alloc(16384).unwrap()).collect();
    assert!(matches!(
        mem.alloc(16384),
        Err(AllocError::Exhausted { .. })
    ));
    drop(held);
    assert!(mem.alloc(16384).is_ok(), "freed items are reused");
}

#[test]
fn max_bytes_limits_growth() {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        max_bytes: 4 << 20,
        ..MemoryConfig::default()
    })
    .unwrap();
    let held: Vec<_> = (0..256).map(|_| mem.alloc(16384).unwrap()).collect();
    let err = mem.alloc(16384).unwrap_err();
    assert!(err.to_string().contains("exhausted"), "{err}");
    drop(held);
}

#[test]
fn buffers_outlive_every_handle() {
    let mem = small_mem();
    let b = mem.alloc_copy(b"still here").unwrap();
    let c = b.clone();
    drop(mem);
    assert_eq!(&b[..], b"still here");
    drop(b);
    assert_eq!(&c[..], b"still here");
    drop(c); // the last reference unmaps the memory
}

#[test]
fn registration_slots_are_filled_for_existing_and_new_regions() {
    let mem = small_mem();
    let mut next = 100u64;
    mem.set_registrar(move |r| {
        next += 1;
        Ok(Some(next + r.index() as u64 * 1000))
    })
    .unwrap();
    let first = mem.alloc_copy(&[0u8; 16384]).unwrap();
    assert_eq!(first.region().registration(), Some(101));
    let many: Vec<_> = (0..200)
        .map(|_| mem.alloc(16384).unwrap().freeze())
        .collect();
    let last = many.last().unwrap();
    assert!(last.region().index() >= 1);
    assert_eq!(
        last.region().registration(),
        Some(100 + 1 + last.region().index() as u64 * 1001)
    );
    assert_eq!(last.region_offset() % 16384, 0);
}

#[test]
fn registrar_failure_fails_the_allocation_that_needed_a_region() {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        initial_bytes: 0,
        ..MemoryConfig::default()
    })
    .unwrap();
    mem.set_registrar(|_| Err(std::io::Error::other("device refused")))
        .unwrap();
    let err = mem.alloc(64).unwrap_err();
    assert!(matches!(err, AllocError::Register(_)), "{err}");
}

#[test]
fn hugepages_required_but_absent_is_a_clear_error() {
    let reserved = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let r = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Require,
        ..MemoryConfig::default()
    });
    if reserved == 0 {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("hugepages"), "{e}");
    } else {
        eprintln!("note: {reserved} hugepages reserved; checking the hugepage path instead");
        let mem = r.unwrap();
        assert_eq!(mem.stats().hugepage_regions, 1);
    }
}

/// The `VmFlags` line of the mapping in /proc/self/smaps that contains `addr`.
fn vm_flags_of(addr: usize) -> Option<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = head.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.trim().to_owned());
            }
        }
    }
    None
}

#[test]
fn ordinary_page_regions_are_advised_as_transparent_hugepages_unless_never() {
    for (huge, advised) in [(HugePages::Auto, true), (HugePages::Never, false)] {
        let mem = PinnedMemory::new(MemoryConfig {
            hugepages: huge,
            ..MemoryConfig::default()
        })
        .unwrap();
        let b = mem.alloc(4096).unwrap().freeze();
        if b.region().backing() == cornflakes_mem::Backing::HugePages {
            test_skip::skip(
                &format!("hugepage advice, the {huge:?} case"),
                "the region got reserved hugepages",
            );
            continue;
        }
        let Some(flags) = vm_flags_of(b.region().base() as usize) else {
            test_skip::skip(
                &format!("hugepage advice, the {huge:?} case"),
                "/proc/self/smaps has no VmFlags here",
            );
            continue;
        };
        let hg = flags.split_whitespace().any(|f| f == "hg");
        assert_eq!(
            hg,
            advised,
            "{huge:?}: region VmFlags `{flags}` should {}carry `hg` (MADV_HUGEPAGE)",
            if advised { "" } else { "not " }
        );
    }
}

#[test]
fn recovery_alternating_between_chunks_and_classes_stays_exact() {
    // Recovery remembers the last chunk it found: every switch (another chunk of the same
    // class, a chunk of another class, memory outside the pools) must still give the right
    // item, offset and count, and a miss must not disturb the next hit.
    let mem = small_mem();
    // 16 KiB items: 128 per chunk, so these 300 span three chunks.
    let big: Vec<_> = (0..300u32)
        .map(|i| mem.alloc_copy(&i.to_le_bytes().repeat(4096)).unwrap())
        .collect();
    let small: Vec<_> = (0..4u8)
        .map(|i| mem.alloc_copy(&[i; 64]).unwrap())
        .collect();
    let heap = vec![7u8; 4096];
    for round in 0..3 {
        for (i, j) in [(0usize, 1usize), (299, 2), (128, 0), (1, 3), (200, 1)] {
            let r = mem.recover_ptr(&big[i][8..24]).unwrap();
            assert_eq!(
                &r[..4],
                &(i as u32).to_le_bytes(),
                "round {round}, value {i}"
            );
            assert_eq!((r.item_offset(), r.len(), r.ref_count()), (8, 16, 2));
            assert!(mem.recover_ptr(&heap).is_none());
            // Empty slices are refused, inside an item of the chunk just found and at its start.
            assert!(mem.recover_ptr(&big[i][5..5]).is_none());
            assert!(mem.recover_ptr(&big[i][..0]).is_none());
            assert!(mem.recover_ptr(&[]).is_none());
            // A slice crossing into the next item is refused even when its chunk is the last one found.
            let whole = mem.recover_ptr(&big[i]).unwrap();
            // SAFETY: the pointer stays inside the 16 KiB item `whole` views (one byte back
            // from its end), and the slice is only handed to recovery, which reads no byte.
            let crossing = unsafe { std::slice::from_raw_parts(whole.as_ptr().add(16383), 2) };
            assert!(mem.recover_ptr(crossing).is_none());
            let s = mem.recover_ptr(&small[j][..]).unwrap();
            assert_eq!((s[0], s.item_capacity(), s.ref_count()), (j as u8, 64, 2));
            assert_eq!(mem.why_not_recoverable(&small[j][..]), None);
        }
    }
    drop((big, small));
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn recover_ref_views_the_slice_without_a_count_and_refuses_what_recover_ptr_refuses() {
    let mem = small_mem();
    let a = mem.alloc_copy(&[3u8; 1024]).unwrap();
    let r = mem.recover_ref(&a[100..300]).expect("inside one live item");
    assert_eq!((r.len(), r.as_ptr()), (200, a[100..].as_ptr()));
    assert_eq!(
        (a.ref_count(), r.ref_count()),
        (1, 1),
        "a view takes no count"
    );
    assert_eq!(
        (r.region().base(), r.region_offset()),
        (a.region().base(), a.region_offset() + 100)
    );
    // The refusals of recover_ptr: empty, not pinned, another item, being filled, freed.
    assert!(mem.recover_ref(&a[..0]).is_none());
    assert!(mem.recover_ref(&vec![0u8; 4096]).is_none());
    let b = mem.alloc_copy(&[4u8; 1024]).unwrap();
    if b.as_ptr() as usize == a.as_ptr() as usize + 1024 {
        // SAFETY: the last byte of `a` and the first of `b`, adjacent items of one mapped
        // region that lives as long as `mem`; only handed to `recover_ref`.
        let across = unsafe { std::slice::from_raw_parts(a.as_ptr().add(1023), 2) };
        assert!(mem.recover_ref(across).is_none());
    }
    let mut filling = mem.alloc(256).unwrap();
    // SAFETY: the item's bytes, mapped while `mem` lives, only handed to `recover_ref`.
    let raw: &[u8] = unsafe { std::slice::from_raw_parts(filling.as_mut_ptr(), 256) };
    assert!(mem.recover_ref(raw).is_none(), "an item being filled");
    drop(filling);
    assert!(mem.recover_ref(raw).is_none(), "a free item");
    // A reference taken from the view keeps the item alive after its lender goes, and
    // releases it (item and offset right) when dropped.
    let desc = r.to_rcbuf();
    assert_eq!(
        (a.ref_count(), desc.item_offset(), desc.len()),
        (2, 100, 200)
    );
    drop(a);
    assert_eq!(&desc[..], &[3u8; 200][..]);
    let live = mem.stats().live_items;
    drop(desc);
    assert_eq!(mem.stats().live_items, live - 1);
    drop(b);
}

#[test]
fn a_saturated_count_refuses_the_reference_not_the_view() {
    let mem = small_mem();
    let a = mem.alloc_copy(&[1u8; 64]).unwrap();
    // SAFETY: restored to 1 (the one live reference) before `a` is dropped.
    unsafe { a.set_ref_count_for_test(MAX_REFS) };
    let r = mem.recover_ref(&a).expect("viewing takes no count");
    assert!(r.try_to_rcbuf().is_err());
    assert_eq!(
        a.ref_count(),
        MAX_REFS,
        "a refused reference changes nothing"
    );
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.to_rcbuf()));
    assert!(
        p.is_err(),
        "to_rcbuf panics instead of wrapping, as Clone does"
    );
    // SAFETY: back to the one live reference, `a`, before it is dropped.
    unsafe { a.set_ref_count_for_test(1) };
    drop(a);
    assert_eq!(mem.stats().live_items, 0);
}

#[test]
fn pinned_views_slice_inside_their_bounds_only() {
    let mem = small_mem();
    let a = mem
        .alloc_copy(&(0..=255u8).cycle().take(1000).collect::<Vec<_>>())
        .unwrap();
    let whole = a.pinned();
    assert_eq!((whole.len(), whole.as_slice()), (1000, &a[..]));
    let s = a.pinned_slice(10, 20).unwrap();
    assert_eq!(s.as_slice(), &a[10..30]);
    let t = s.sub(5, 15).unwrap();
    assert_eq!(t.as_slice(), &a[15..30]);
    assert!(s.sub(5, 16).is_none() && s.sub(usize::MAX, 2).is_none());
    assert!(a.pinned_slice(990, 11).is_none() && a.pinned_slice(usize::MAX, 1).is_none());
    assert!(a.pinned_slice(1000, 0).unwrap().is_empty());
    // A reference from a sub-view knows where it is in its item.
    let r = t.to_rcbuf();
    assert_eq!((r.item_offset(), &r[..]), (15, &a[15..30]));
    assert_eq!(a.ref_count(), 2);
    drop(r);
    assert_eq!(a.ref_count(), 1);
}

#[test]
fn a_keeper_holds_its_buffers_until_cleared_or_dropped() {
    let mem = small_mem();
    let a = mem.alloc_copy(&[7u8; 700]).unwrap();
    let mut keeper = cornflakes_mem::Keeper::default();
    let view = keeper.keep(a.clone());
    assert_eq!((view.len(), a.ref_count(), keeper.len()), (700, 2, 1));
    keeper.clear();
    assert_eq!((a.ref_count(), keeper.is_empty()), (1, true));
    let b = mem.alloc_copy(&[8u8; 700]).unwrap();
    let addr = b.as_ptr();
    let view = keeper.keep(b);
    // The keeper's reference is the only one: the view's bytes live as long as the keeper.
    assert_eq!((view.as_ptr(), view.ref_count()), (addr, 1));
    let live = mem.stats().live_items;
    drop(keeper);
    assert_eq!(mem.stats().live_items, live - 1);
    drop(a);
}
