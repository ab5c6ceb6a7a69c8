//! prost's two configurations of a `bytes` field, on the server steps of the echo and KV
//! shapes: `Vec<u8>` (`bytes = "vec"`, prost's default, what `src/generated/` holds for echo)
//! against `bytes::Bytes` (`bytes = "bytes"`, what it holds for the KV request), decoded from a `&[u8]` (`bytes-slice`) or from a
//! `Bytes` that owns the received buffer (`bytes-owned`: what a server gets by wrapping its
//! receive buffer with `Bytes::from_owner`, counted here per request).
//!
//! ```sh
//! cargo build --release -p baselines --example prost_bytes
//! # allocations per step (counted by baselines::alloc_count):
//! target/release/examples/prost_bytes allocs
//! # instructions per step: (Ir(320) - Ir(64)) / 256 of the `step` function, under callgrind
//! GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824 \
//!   valgrind --tool=callgrind --toggle-collect='prost_bytes::step' \
//!   target/release/examples/prost_bytes run vec echo-2x2048 320
//! ```
//!
//! A step is what the server does per request: echo decodes the request into a reused
//! message and encodes it back into a transmit buffer; KV decodes the request into a reused
//! message and reads every key and value.

use std::hint::black_box;
use std::sync::Arc;

use baselines::alloc_count::{allocs, Counting};
use baselines::generated::proto::{echo, kvpb};
use bytes::Bytes;
use prost::Message;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `echo.proto`'s `ListMsg` with `bytes = "bytes"`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListBytes {
    #[prost(uint32, tag = "1")]
    id: u32,
    #[prost(bytes = "bytes", repeated, tag = "2")]
    vals: Vec<Bytes>,
}

/// `echo.proto`'s `Single` with `bytes = "bytes"`.
#[derive(Clone, PartialEq, prost::Message)]
struct SingleBytes {
    #[prost(uint32, tag = "1")]
    id: u32,
    #[prost(bytes = "bytes", tag = "2")]
    val: Bytes,
}

/// `kv.proto`'s `KvRequest` with `bytes = "vec"`.
#[derive(Clone, PartialEq, prost::Message)]
struct KvRequestVec {
    #[prost(uint32, tag = "1")]
    id: u32,
    #[prost(uint32, tag = "2")]
    op: u32,
    #[prost(string, repeated, tag = "3")]
    keys: Vec<String>,
    #[prost(bytes = "vec", repeated, tag = "4")]
    vals: Vec<Vec<u8>>,
    #[prost(uint32, tag = "5")]
    index: u32,
}

const CONFIGS: [&str; 3] = ["vec", "bytes-slice", "bytes-owned"];
const SHAPES: [&str; 5] = ["echo-1x64", "echo-2x2048", "kv-get", "kv-getm8", "kv-putm8"];

/// A received buffer a server would hold (its receive buffer is reference-counted).
#[derive(Clone)]
struct Received(Arc<Vec<u8>>);

impl AsRef<[u8]> for Received {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The request of `shape`, encoded.
fn request(shape: &str) -> Vec<u8> {
    let val = |i: usize, n: usize| vec![i as u8; n];
    match shape {
        "echo-1x64" => echo::Single {
            id: 7,
            val: val(1, 64),
        }
        .encode_to_vec(),
        "echo-2x2048" => echo::ListMsg {
            id: 7,
            vals: vec![val(1, 2048), val(2, 2048)],
        }
        .encode_to_vec(),
        "kv-get" | "kv-getm8" | "kv-putm8" => {
            let keys = if shape == "kv-get" { 1 } else { 8 };
            kvpb::KvRequest {
                id: 7,
                op: 1,
                keys: (0..keys).map(|i| format!("key-{i:08}")).collect(),
                vals: if shape == "kv-putm8" {
                    (0..8).map(|i| Bytes::from(val(i, 100 + 300 * i))).collect()
                } else {
                    Vec::new()
                },
                index: 0,
            }
            .encode_to_vec()
        }
        other => panic!("unknown shape {other} (one of {SHAPES:?})"),
    }
}

/// One server's reused state: the decoded messages of both configurations and a transmit
/// buffer.
#[derive(Default)]
struct Server {
    single: echo::Single,
    list: echo::ListMsg,
    kv: KvRequestVec,
    single_b: SingleBytes,
    list_b: ListBytes,
    kv_b: kvpb::KvRequest,
    tx: Vec<u8>,
}

fn read_kv(keys: &[String], vals: impl Iterator<Item = usize>) -> usize {
    keys.iter().map(String::len).sum::<usize>() + vals.sum::<usize>()
}

/// The server's step for one request.
#[inline(never)]
fn step(s: &mut Server, config: &str, shape: &str, input: &Received) -> usize {
    let slice = input.0.as_slice();
    let owned = || Bytes::from_owner(input.clone());
    let mut tx = std::mem::take(&mut s.tx);
    tx.clear();
    let n = match (config, shape) {
        ("vec", "echo-1x64") => {
            s.single.clear();
            s.single.merge(slice).expect("decode");
            s.single.encode(&mut tx).expect("encode");
            tx.len()
        }
        ("vec", "echo-2x2048") => {
            s.list.clear();
            s.list.merge(slice).expect("decode");
            s.list.encode(&mut tx).expect("encode");
            tx.len()
        }
        ("vec", _) => {
            s.kv.clear();
            s.kv.merge(slice).expect("decode");
            read_kv(&s.kv.keys, s.kv.vals.iter().map(Vec::len))
        }
        (_, "echo-1x64") => {
            s.single_b.clear();
            if config == "bytes-owned" {
                s.single_b.merge(owned()).expect("decode");
            } else {
                s.single_b.merge(slice).expect("decode");
            }
            s.single_b.encode(&mut tx).expect("encode");
            tx.len()
        }
        (_, "echo-2x2048") => {
            s.list_b.clear();
            if config == "bytes-owned" {
                s.list_b.merge(owned()).expect("decode");
            } else {
                s.list_b.merge(slice).expect("decode");
            }
            s.list_b.encode(&mut tx).expect("encode");
            tx.len()
        }
        _ => {
            s.kv_b.clear();
            if config == "bytes-owned" {
                s.kv_b.merge(owned()).expect("decode");
            } else {
                s.kv_b.merge(slice).expect("decode");
            }
            let n = read_kv(&s.kv_b.keys, s.kv_b.vals.iter().map(Bytes::len));
            // The decoded values hold the received buffer: release it with the request.
            s.kv_b.vals.clear();
            n
        }
    };
    if config == "bytes-owned" {
        s.single_b.val = Bytes::new();
        s.list_b.vals.clear();
    }
    s.tx = tx;
    n
}

fn run(config: &str, shape: &str, n: usize) -> (u64, usize) {
    let input = Received(Arc::new(request(shape)));
    let mut s = Server {
        tx: Vec::with_capacity(64 * 1024),
        ..Server::default()
    };
    // Warm-up: the reused message's lists reach their size.
    let mut sum = 0;
    for _ in 0..4 {
        sum += step(&mut s, config, shape, &input);
    }
    let before = allocs();
    for _ in 0..n {
        sum += step(&mut s, config, shape, black_box(&input));
    }
    (allocs() - before, black_box(sum))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["allocs"] => {
            println!("| shape | {} |", CONFIGS.join(" | "));
            println!("|---|{}", "---:|".repeat(CONFIGS.len()));
            for shape in SHAPES {
                let per: Vec<String> = CONFIGS
                    .iter()
                    .map(|c| format!("{}", run(c, shape, 100).0 as f64 / 100.0))
                    .collect();
                println!("| {shape} | {} |", per.join(" | "));
            }
        }
        ["run", config, shape, n] => {
            assert!(CONFIGS.contains(&config), "config one of {CONFIGS:?}");
            let n: usize = n.parse().expect("a count");
            let (a, _) = run(config, shape, n);
            println!("{config} {shape}: {n} steps, {a} allocations");
        }
        _ => {
            eprintln!(
                "usage: prost_bytes allocs | prost_bytes run <{}> <{}> <n>",
                CONFIGS.join("|"),
                SHAPES.join("|")
            );
            std::process::exit(2);
        }
    }
}
