//! Criterion benchmarks of the matrix in `benches/src/lib.rs`: for every shape, hot and cold,
//! every library's serialize and deserialize.
//!
//! ```sh
//! cargo bench -p benches                           # everything (long: cold stores are 128 MiB)
//! cargo bench -p benches -- 'serialize/1x64/hot'   # one cell group (criterion filter)
//! ```

use benches::{libraries, received, tx_buffer, Shape, Store, Temp};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn matrix(c: &mut Criterion) {
    for shape in Shape::all() {
        for temp in [Temp::Hot, Temp::Cold] {
            let store = Store::new(shape, temp);
            let mut tx = tx_buffer();
            let mut g = c.benchmark_group(format!("serialize/{shape}/{temp}"));
            for mut lib in libraries(&store.mem) {
                let mut i = 0usize;
                g.bench_function(lib.name(), |b| {
                    b.iter(|| {
                        let n = lib.serialize(&store, black_box(store.msg(i)), &mut tx);
                        lib.after();
                        i = i.wrapping_add(1);
                        n
                    })
                });
            }
            g.finish();
            let mut g = c.benchmark_group(format!("deserialize/{shape}/{temp}"));
            for mut lib in libraries(&store.mem) {
                let rx = received(lib.as_mut(), &store, temp);
                let mut i = 0usize;
                g.bench_function(lib.name(), |b| {
                    b.iter(|| {
                        let n = lib.deserialize(shape, black_box(&rx[i % rx.len()]));
                        lib.after();
                        i = i.wrapping_add(1);
                        n
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, matrix);
criterion_main!(benches);
