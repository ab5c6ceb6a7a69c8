//! How fast the generators are: Zipf draws, value bytes, request generation, load streaming.
//!
//! `cargo bench -p kv-workloads --bench generate` (timings mean something only on a quiet
//! machine; `-- --test` runs each once as a smoke test).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kv_workloads::*;
use std::hint::black_box;

fn generate(c: &mut Criterion) {
    let mut g = c.benchmark_group("kv-workloads");

    let zipf = Zipf::new(1_000_000, 0.99).unwrap();
    let mut rng = loadgen::SeededRng::new(1);
    g.throughput(Throughput::Elements(1));
    g.bench_function("zipf 1M keys s=0.99 (one draw)", |b| {
        b.iter(|| zipf.sample(black_box(&mut rng)))
    });

    let mut buf = vec![0u8; 4096];
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("fill_value 4096 B", |b| {
        b.iter(|| {
            fill_value(
                black_box(&mut buf),
                black_box("user00000000000000000000000042"),
                0,
                0,
            )
        })
    });

    let ycsb = Ycsb::new(YcsbConfig::default()).unwrap();
    g.throughput(Throughput::Elements(1000));
    g.bench_function("ycsb 1x4096 requests(1000)", |b| {
        b.iter(|| ycsb.requests(black_box(1000), 1))
    });
    let twitter = Twitter::new(TwitterConfig::default()).unwrap();
    g.bench_function("twitter synthetic requests(1000)", |b| {
        b.iter(|| twitter.requests(black_box(1000), 1))
    });

    let google = Google::new(GoogleConfig {
        keys: 1000,
        ..GoogleConfig::with_lists(1, 8)
    })
    .unwrap();
    let bytes: u64 = google
        .load()
        .map(|(_, v)| v.iter().map(|e| e.len() as u64).sum::<u64>())
        .sum();
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("google 1-8 load of 1000 keys", |b| {
        b.iter(|| google.load().count())
    });
    g.finish();
}

criterion_group!(benches, generate);
criterion_main!(benches);
