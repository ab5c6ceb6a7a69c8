//! Heap allocations per request of a baseline server's path, counted by a global allocator:
//! decode a request ([`KvCodec::with_request`]), look its keys up in a store, build the
//! response from borrowed values (its lists recycled with [`baselines::kv::recycle`]) and
//! encode it into a reused transmit buffer. After warm-up, a careful server allocates only
//! what the library's API forces; each library's count is stated and explained here (and in
//! `crates/baselines/src/kv.rs`'s docs), per operation:
//!
//! - protobuf (prost): one per key and one per value of the request: the decoded message
//!   owns a `String` per key and a `Bytes` per value (prost 0.14 decodes a `bytes` field
//!   from a `&[u8]` through `Buf::copy_to_bytes`, `prost::encoding::bytes::merge`; the
//!   request's values are generated as `bytes::Bytes`, so no second copy into a `Vec<u8>`);
//! - Cap'n Proto: one per response (the `Builder`'s segment table; the segment itself is
//!   reused scratch);
//! - FlatBuffers: none.
//!
//! Echo's server step (`Codec::echo`, per shape) is measured the same way: prost 1 (single
//! value), 16 (8 values), 30 (depth-3 tree), all in its decode; Cap'n Proto 1; FlatBuffers 0.
//! Echo's Cap'n Proto network path (`capnp_echo_sga_into`, segments in pinned memory sent as
//! a reused list) allocates 1 per reply, the `Builder`'s segment table (the list-returning
//! `capnp_echo_sga` 2).
//!
//! The counter is per thread (the harness's own threads allocate too).

use std::collections::HashMap;

use baselines::alloc_count::{allocs, Counting};

use baselines::kv::{recycle, KvCodec, KvRequestView, KvResponseView};
use baselines::{EchoMsg, Library, Shape};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// An operation's request (keys, values) and whether its reply returns the keys' values.
struct Op {
    name: &'static str,
    keys: usize,
    vals: usize,
    reply_vals: usize,
}

const OPS: [Op; 6] = [
    Op {
        name: "get",
        keys: 1,
        vals: 0,
        reply_vals: 1,
    },
    Op {
        name: "put",
        keys: 1,
        vals: 1,
        reply_vals: 0,
    },
    Op {
        name: "getm (8 keys)",
        keys: 8,
        vals: 0,
        reply_vals: 8,
    },
    Op {
        name: "putm (8 keys)",
        keys: 8,
        vals: 8,
        reply_vals: 0,
    },
    Op {
        name: "getlist (16 values)",
        keys: 1,
        vals: 0,
        reply_vals: 16,
    },
    Op {
        name: "append",
        keys: 1,
        vals: 1,
        reply_vals: 0,
    },
];

/// What each library's API forces per request of `op` (see the module docs).
fn forced(lib: Library, op: &Op) -> u64 {
    match lib {
        Library::Protobuf => (op.keys + op.vals) as u64,
        Library::Capnp => 1,
        Library::Flatbuffers => 0,
    }
}

/// Heap allocations per call of `f`, after four warm-up calls.
fn allocations_per_call(mut f: impl FnMut()) -> f64 {
    for _ in 0..4 {
        f();
    }
    const N: u64 = 100;
    let before = allocs();
    for _ in 0..N {
        f();
    }
    (allocs() - before) as f64 / N as f64
}

/// The echo server's step per library and shape ([`baselines::Codec::echo`]: decode into
/// the codec's reused message, encode into the transmit buffer).
fn echo_allocations() -> Vec<(Library, Shape, f64)> {
    let vals: Vec<Vec<u8>> = (0..16).map(|i| vec![i as u8; 64 + 300 * i]).collect();
    let mut out = Vec::new();
    for lib in Library::ALL {
        for (shape, n) in [(Shape::Single, 1), (Shape::List, 8), (Shape::Tree(3), 8)] {
            let refs: Vec<&[u8]> = vals[..n].iter().map(Vec::as_slice).collect();
            let mut c = lib.codec();
            let mut input = vec![0u8; 64 * 1024];
            let len = c
                .encode(
                    &EchoMsg {
                        id: 3,
                        shape,
                        vals: &refs,
                    },
                    &mut input,
                )
                .expect("encode");
            input.truncate(len);
            let mut tx = vec![0u8; 64 * 1024];
            let per = allocations_per_call(|| {
                assert!(c.echo(shape, &input, &mut tx).expect("echo") > 0);
            });
            let decode = allocations_per_call(|| {
                c.decode(shape, &input, &mut |_| {}).expect("decode");
            });
            eprintln!("{lib:?} {shape}: echo {per}, of which decoding {decode}");
            out.push((lib, shape, per));
        }
    }
    out
}

/// prost's default `bytes = "vec"` configuration of `schemas/kv.proto`'s request (the
/// generated code uses `bytes::Bytes` for its values): the same fields, values as `Vec<u8>`.
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

/// Allocations per decode of a putm of 8 keys and values into a reused message: prost's
/// default `Vec<u8>` configuration, the generated `Bytes` one from a `&[u8]` (what the
/// servers do), and `Bytes` from a `Bytes` input (what a server would get by wrapping its
/// receive buffer, `Bytes::from_owner`, one allocation per request not counted here; this
/// stack's receive buffer is not `Send`, so it cannot).
fn prost_configurations() -> (f64, f64, f64) {
    use prost::Message;
    let keys: Vec<String> = (0..8).map(|i| format!("key-{i}")).collect();
    let vals: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8; 100 + 300 * i]).collect();
    let req = KvRequestView {
        id: 1,
        op: 1,
        keys: keys.iter().map(String::as_str).collect(),
        vals: vals.iter().map(Vec::as_slice).collect(),
        index: 0,
    };
    let mut input = Vec::new();
    Library::Protobuf
        .kv_codec()
        .encode_request(&req, &mut input);
    let mut v = KvRequestVec::default();
    let vec = allocations_per_call(|| {
        v.clear();
        v.merge(input.as_slice()).expect("decode");
    });
    // The generated request (values as `Bytes`).
    let mut m = baselines::generated::proto::kvpb::KvRequest::default();
    let from_slice = allocations_per_call(|| {
        m.clear();
        m.merge(input.as_slice()).expect("decode");
    });
    let shared = bytes::Bytes::from(input.clone());
    let from_bytes = allocations_per_call(|| {
        m.clear();
        m.merge(shared.clone()).expect("decode");
        assert_eq!(m.vals.len(), 8);
    });
    (vec, from_slice, from_bytes)
}

/// Echo's Cap'n Proto network path per shape ([`baselines::capnp_echo_sga_into`] with a
/// reused list, then [`baselines::capnp_echo_sga`]), replies built in pinned memory.
fn capnp_echo_sga_allocations() -> Vec<(Shape, f64, f64)> {
    use cornflakes::mem::{HugePages, MemoryConfig};
    let mem = cornflakes::PinnedMemory::new(MemoryConfig {
        hugepages: HugePages::Never,
        lock: false,
        ..MemoryConfig::default()
    })
    .expect("pinned memory");
    let vals: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8; 64 + 300 * i]).collect();
    let mut out = Vec::new();
    for (shape, n) in [(Shape::Single, 1), (Shape::List, 8), (Shape::Tree(3), 8)] {
        let refs: Vec<&[u8]> = vals[..n].iter().map(Vec::as_slice).collect();
        let mut input = vec![0u8; 64 * 1024];
        let len = Library::Capnp
            .codec()
            .encode(
                &EchoMsg {
                    id: 3,
                    shape,
                    vals: &refs,
                },
                &mut input,
            )
            .expect("encode");
        input.truncate(len);
        let mut sga = Vec::new();
        let into = allocations_per_call(|| {
            baselines::capnp_echo_sga_into(shape, &input, &mem, &mut sga)
                .expect("decode")
                .expect("pinned memory");
            assert!(sga.len() >= 2);
            // The server drops its references once the list is sent.
            sga.clear();
        });
        let fresh = allocations_per_call(|| {
            let sga = baselines::capnp_echo_sga(shape, &input, &mem)
                .expect("decode")
                .expect("pinned memory");
            assert!(sga.len() >= 2);
        });
        out.push((shape, into, fresh));
    }
    out
}

#[test]
fn a_baseline_server_path_allocates_only_what_its_library_forces() {
    // prost: 8 keys, 8 values. `Vec<u8>`: a `String` per key, a `Bytes` and a `Vec` per value.
    // `Bytes` from a slice (the generated request): one per value fewer. From a `Bytes`: the
    // values are slices of the input, only the keys' `String`s are left.
    let (vec, from_slice, from_bytes) = prost_configurations();
    eprintln!("prost putm (8 keys): Vec<u8> {vec}, Bytes from &[u8] {from_slice}, Bytes from Bytes {from_bytes}");
    assert_eq!((vec, from_slice, from_bytes), (24.0, 16.0, 8.0));
    // Echo: everything prost allocates is in its decode (a `Bytes` then a `Vec` per value,
    // and a `Box` per nested message: the single message's one value reuses its `Vec`);
    // Cap'n Proto's one is its `Builder`'s segment table; FlatBuffers none.
    for (lib, shape, per) in echo_allocations() {
        let forced = match (lib, shape) {
            (Library::Protobuf, Shape::Single) => 1.0,
            (Library::Protobuf, Shape::List) => 16.0,
            (Library::Protobuf, _) => 30.0,
            (Library::Capnp, _) => 1.0,
            (Library::Flatbuffers, _) => 0.0,
        };
        assert_eq!(
            per, forced,
            "echo {lib:?} {shape}: {per} allocations per message"
        );
    }
    // Echo's Cap'n Proto network path (segments in pinned memory, sent as a list): with the
    // server's reused list only the `Builder`'s segment table; the list-returning form
    // allocates the list too.
    for (shape, into, fresh) in capnp_echo_sga_allocations() {
        assert_eq!(
            (into, fresh),
            (1.0, 2.0),
            "echo capnp segments {shape}: reused list {into}, fresh list {fresh}"
        );
    }
    let store: HashMap<String, Vec<u8>> = (0..16)
        .map(|i| (format!("key-{i}"), vec![i as u8; 64 + 200 * i]))
        .collect();
    let names: Vec<String> = (0..16).map(|i| format!("key-{i}")).collect();
    let put_vals: Vec<Vec<u8>> = (0..8)
        .map(|i| vec![0xa0 + i as u8; 100 + 300 * i])
        .collect();
    let mut report = Vec::new();
    for lib in [Library::Protobuf, Library::Capnp, Library::Flatbuffers] {
        for op in &OPS {
            let mut c: Box<dyn KvCodec + Send> = lib.kv_codec();
            let req = KvRequestView {
                id: 7,
                op: 1,
                keys: names[..op.keys].iter().map(String::as_str).collect(),
                vals: put_vals[..op.vals].iter().map(Vec::as_slice).collect(),
                index: 0,
            };
            let mut input = Vec::new();
            c.encode_request(&req, &mut input);
            // The transmit buffer (a pinned buffer in the server), the response's lists.
            let mut tx = vec![0u8; 64 * 1024];
            let mut resp_vals: Vec<&[u8]> = Vec::new();
            let mut statuses: Vec<i32> = Vec::new();
            let mut serve = |c: &mut Box<dyn KvCodec + Send>,
                             resp_vals: &mut Vec<&[u8]>,
                             statuses: &mut Vec<i32>| {
                let mut vals = recycle(std::mem::take(resp_vals));
                statuses.clear();
                let mut id = 0;
                c.with_request(&input, &mut |r| {
                    id = r.id;
                    if op.reply_vals > 0 {
                        // Values borrowed from the store, read in place.
                        // A list (more values than keys) reads the first reply_vals entries.
                        let list = op.reply_vals > r.keys.len();
                        for (i, name) in names.iter().take(op.reply_vals).enumerate() {
                            let key = if list { name.as_str() } else { r.keys[i] };
                            vals.push(store[key].as_slice());
                            statuses.push(0);
                        }
                    } else {
                        assert_eq!(r.vals.len(), op.vals);
                    }
                })
                .expect("decode");
                let resp = KvResponseView {
                    id,
                    status: 0,
                    vals,
                    statuses: std::mem::take(statuses),
                };
                let n = c.encode_response(&resp, &mut tx).expect("encode");
                assert!(n > 0);
                *statuses = resp.statuses;
                *resp_vals = recycle(resp.vals);
            };
            for _ in 0..4 {
                serve(&mut c, &mut resp_vals, &mut statuses);
            }
            const N: u64 = 100;
            let before = allocs();
            for _ in 0..N {
                serve(&mut c, &mut resp_vals, &mut statuses);
            }
            let per = (allocs() - before) as f64 / N as f64;
            report.push(format!(
                "{lib:?} {}: {per} (forced {})",
                op.name,
                forced(lib, op)
            ));
            assert_eq!(
                per,
                forced(lib, op) as f64,
                "{lib:?} {}: {per} heap allocations per request, the library forces {}",
                op.name,
                forced(lib, op)
            );
        }
    }
    eprintln!("{}", report.join("\n"));
}
