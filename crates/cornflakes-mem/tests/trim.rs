//! `PinnedMemory::trim`: chunks with no live item give their pages back to the kernel (checked
//! page by page with `mincore`, which other tests running in this process cannot disturb, as
//! they could a whole-process RSS), keep their mapping, and serve again, resident, when a size
//! class needs a chunk; memory a device may use is never trimmed.

use cornflakes_mem::{HugePages, MemoryConfig, PinnedMemory, CHUNK_SIZE};

const ITEM: usize = 256 << 10;
const PAGE: usize = 4096;

fn mem() -> PinnedMemory {
    PinnedMemory::new(MemoryConfig {
        max_item_size: ITEM,
        hugepages: HugePages::Never,
        ..MemoryConfig::default()
    })
    .unwrap()
}

/// How many of the 4 KiB pages of `addr..addr+len` are resident.
fn resident_pages(addr: usize, len: usize) -> usize {
    let pages = len.div_ceil(PAGE);
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` is page-aligned (items of 256 KiB are aligned to their size) and lies in a
    // mapping this process owns for the whole range; `vec` has one byte per page, as mincore
    // writes.
    let r = unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn free_chunks_give_their_pages_back_and_serve_again() {
    let m = mem();
    // 12 chunks' worth of 256 KiB items (8 per chunk), each written.
    let bufs: Vec<_> = (0..96u8)
        .map(|i| m.alloc_copy(&vec![i; ITEM]).unwrap())
        .collect();
    let addrs: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
    let chunks = m.stats().chunks_in_use;
    assert!(chunks >= 12, "{:?}", m.stats());
    assert_eq!(m.trim(), 0, "every chunk has live items");
    // One item kept alive pins its chunk; every other chunk of the class is free.
    let kept = bufs[5].clone();
    drop(bufs);
    let mapped = m.stats().mapped_bytes;
    let trimmed = m.trim();
    let st = m.stats();
    // Kept: the chunk of the live item and the class's newest chunk.
    assert!(
        trimmed >= (chunks - 2) * CHUNK_SIZE && trimmed <= (chunks - 1) * CHUNK_SIZE,
        "{trimmed} {st:?}"
    );
    assert_eq!(st.trimmed_bytes, trimmed);
    assert_eq!(st.released_chunks * CHUNK_SIZE, trimmed);
    assert_eq!(st.chunks_in_use, chunks - st.released_chunks);
    assert_eq!(
        st.mapped_bytes, mapped,
        "still mapped: only the pages went back"
    );
    assert_eq!(st.live_items, 1);
    let gone = addrs
        .iter()
        .filter(|&&a| resident_pages(a, ITEM) == 0)
        .count();
    assert!(gone * ITEM >= trimmed, "{gone} items not resident");
    assert_eq!(&kept[..3], &[5, 5, 5], "the live item is untouched");
    assert_eq!(resident_pages(addrs[5], ITEM), ITEM / PAGE);
    assert_eq!(m.trim(), 0, "nothing more to trim");
    // A trimmed address is no item any more: recovery refuses it (without touching freed
    // bookkeeping: AddressSanitizer runs this test too).
    let probe = addrs
        .iter()
        .copied()
        .find(|&a| resident_pages(a, ITEM) == 0);
    let probe = probe.expect("a trimmed item");
    // SAFETY: `probe..probe+16` lies in a chunk that is still mapped (trim keeps mappings),
    // so reading it is defined; it reads zeros.
    let stale = unsafe { std::slice::from_raw_parts(probe as *const u8, 16) };
    assert!(m.recover_ptr(stale).is_none());
    assert_eq!(stale, &[0u8; 16], "trimmed pages read as zeros");
    // Allocating again takes the spare chunks back, resident, in any size class.
    let again: Vec<_> = (0..64)
        .map(|i| m.alloc_copy(&vec![i as u8; 64 << 10]).unwrap())
        .collect();
    assert!(m.stats().released_chunks < st.released_chunks);
    assert_eq!(m.stats().mapped_bytes, mapped, "reused, not mapped anew");
    for (i, b) in again.iter().enumerate() {
        assert_eq!(resident_pages(b.as_ptr() as usize, 64 << 10), 16);
        assert!(b.iter().all(|&x| x == i as u8));
        assert!(m.recover_ptr(&b[10..20]).is_some());
    }
}

#[test]
fn memory_a_device_may_use_is_never_trimmed() {
    let m = mem();
    m.set_registrar(|r| Ok(Some(r.index() as u64))).unwrap();
    let bufs: Vec<_> = (0..40).map(|_| m.alloc(ITEM).unwrap()).collect();
    drop(bufs);
    assert_eq!(m.trim(), 0);
    assert_eq!(m.stats().released_chunks, 0);
}
