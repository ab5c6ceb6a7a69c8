//! Pointer recovery (our table vs the paper's chain of hash maps) and CFPtr construction
//! (copy vs zero-copy), in the same run.
//!
//! `cargo bench -p cornflakes-runtime --bench recover`

use std::hint::black_box;

use cornflakes::mem::{HashMapRecover, HugePages, MemoryConfig};
use cornflakes::{Arena, CFPtr, PinnedMemory, RcBuf};
use criterion::{criterion_group, criterion_main, Criterion};

fn populated() -> (PinnedMemory, Vec<RcBuf>) {
    let mem = PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Auto,
        ..MemoryConfig::default()
    })
    .unwrap();
    // Items in every size class, several chunks each, so the baseline's chain has real length.
    let mut held = Vec::new();
    for size in [64usize, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] {
        for _ in 0..(4 << 20) / size {
            held.push(mem.alloc(size).unwrap().freeze());
        }
    }
    (mem, held)
}

fn bench_recover(c: &mut Criterion) {
    let (mem, held) = populated();
    let baseline = HashMapRecover::new(&mem);
    // Probe 2 KiB-class items spread over their chunks.
    let targets: Vec<&[u8]> = held
        .iter()
        .filter(|b| b.len() == 2048)
        .step_by(97)
        .map(|b| &b[100..1100])
        .collect();
    let mut g = c.benchmark_group("recover_ptr");
    g.bench_function("table", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % targets.len();
            black_box(mem.recover_ptr(black_box(targets[i])))
        })
    });
    g.bench_function("hashmap_chain_baseline", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % targets.len();
            black_box(baseline.recover_ptr(black_box(targets[i])))
        })
    });
    let heap = vec![0u8; 2048];
    g.bench_function("table_miss_unpinned", |b| {
        b.iter(|| black_box(mem.recover_ptr(black_box(&heap[..]))))
    });
    g.bench_function("hashmap_chain_miss_unpinned", |b| {
        b.iter(|| black_box(baseline.recover_ptr(black_box(&heap[..]))))
    });
    g.finish();
}

fn bench_cfptr(c: &mut Criterion) {
    let mem = PinnedMemory::with_defaults().unwrap();
    let arena = Arena::with_memory(&mem);
    let big = mem.alloc_copy(&[1u8; 2048]).unwrap();
    let small = [2u8; 64];
    let big_heap = vec![3u8; 2048];
    let mut g = c.benchmark_group("cfptr_new");
    // Copies go into a fresh arena per batch, so the arena's growth is not what is measured.
    g.bench_function("copy_64B", |b| {
        b.iter_batched_ref(
            || Arena::with_memory(&mem),
            |a| {
                black_box(CFPtr::new(black_box(&small), a));
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("zero_copy_2048B_pinned", |b| {
        b.iter(|| {
            black_box(CFPtr::new(black_box(&big[..]), &arena));
        })
    });
    g.bench_function("copy_2048B_unpinned", |b| {
        b.iter_batched_ref(
            || Arena::with_memory(&mem),
            |a| {
                black_box(CFPtr::new(black_box(&big_heap[..]), a));
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_recover, bench_cfptr);
criterion_main!(benches);
