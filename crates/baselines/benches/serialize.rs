//! Serialize `{ uint32 id; repeated bytes vals }` into a reused transmit
//! buffer: 2 x 2048 B (the paper's Figure 2 message) and 1 x 64 B, for each
//! library and a plain memcpy lower bound.
//!
//! `cargo bench -p baselines --bench serialize`

use baselines::{memcpy_baseline, CapnpCodec, Codec, EchoMsg, FlatbuffersCodec, ProstCodec, Shape};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use std::hint::black_box;

fn bench_codec<C: Codec>(g: &mut BenchmarkGroup<'_, WallTime>, mut codec: C, msg: &EchoMsg<'_>) {
    let mut tx = vec![0u8; 16 * 1024];
    g.bench_function(codec.name(), |b| {
        b.iter(|| {
            codec
                .encode(black_box(msg), black_box(&mut tx[..]))
                .expect("message fits the transmit buffer")
        })
    });
}

fn serialize(c: &mut Criterion) {
    for (count, size) in [(2usize, 2048usize), (1, 64)] {
        let owned: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8 + 1; size]).collect();
        let vals: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let msg = EchoMsg {
            id: 42,
            shape: Shape::List,
            vals: &vals,
        };
        let mut g = c.benchmark_group(format!("serialize_list_{count}x{size}"));
        g.throughput(Throughput::Bytes((count * size) as u64));
        bench_codec(&mut g, ProstCodec::new(), &msg);
        bench_codec(&mut g, CapnpCodec::new(), &msg);
        bench_codec(&mut g, FlatbuffersCodec::new(), &msg);
        let mut tx = vec![0u8; 16 * 1024];
        g.bench_function("memcpy", |b| {
            b.iter(|| {
                memcpy_baseline(42, black_box(&vals), black_box(&mut tx[..]))
                    .expect("message fits the transmit buffer")
            })
        });
        g.finish();
    }
}

criterion_group!(benches, serialize);
criterion_main!(benches);
