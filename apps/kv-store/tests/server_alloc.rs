//! Heap allocations per request of the KV *server* (its whole poll: receive, decode, execute,
//! encode, send), per serialization and read operation, counted by a per-thread global
//! allocator. Requests are sent before the count starts, so only the server's work counts.
//!
//! Expected, after warm-up (documented in crates/baselines/README.md):
//! - Cornflakes (hybrid, only-SG, only-copy), FlatBuffers: none;
//! - `cornflakes-no-ssend`: one, the scatter-gather array `object_to_sga` returns — that
//!   mode is the paper's "serialize to an array, then send" configuration, the array is what
//!   it measures;
//! - protobuf (prost): one per request key — the decoded message owns a `String` per key;
//! - Cap'n Proto: one, the `Builder`'s segment table;
//! - RESP: none (the `resp` crate's parser keeps its argument list, the `getm` list is
//!   reused, and the reply is sized first and written straight into the transmit buffer).
//!
//! Writes are not counted: the store copies a written value into pinned memory and builds its
//! entries, whatever the serialization. Nothing is timed.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};

use app_server::Handler;
use baselines::alloc_count::{allocs, Counting};
use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::RxMsg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use kv_store::server::{memory_config, Kv, ServerConfig};
use kv_store::{Op, Serialization, Shared};

#[global_allocator]
static GLOBAL: Counting = Counting;

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// Requests per measured batch.
const N: u64 = 16;

/// The read operations and their request key counts.
fn ops() -> Vec<(&'static str, Op, u64)> {
    vec![
        ("get", Op::Get { key: "k0".into() }, 1),
        (
            "get_from_list",
            Op::GetFromList {
                key: "l".into(),
                index: 2,
            },
            1,
        ),
        ("getlist", Op::GetList { key: "l".into() }, 1),
        (
            "getm",
            Op::GetM {
                keys: vec!["k0".into(), "k1".into(), "missing".into(), "k2".into()],
            },
            4,
        ),
    ]
}

/// Heap allocations per request of `op` in `ser` in the server's handler (`Kv::handle`:
/// decode, execute, encode, queue the reply), after warm-up. The datapath's receive and
/// flush run outside the count: they are the datapath's, the same for every serialization.
fn per_request(ser: Serialization, op: &Op) -> u64 {
    let mem = memory_config(16 * 1024, 1 << 28);
    let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
    a.memory = mem.clone();
    let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
    b.memory = mem;
    let (mut dp, mut client) = Loopback::pair(a, b).unwrap();
    let conn = client.connect(SERVER).unwrap();
    let mut kv = Kv::new(dp.memory(), ServerConfig::new(ser));
    let mut rx: Vec<RxMsg> = Vec::new();
    dp.recv_burst(&mut rx).unwrap(); // answers the ARP request
    dp.flush().unwrap();
    client.recv_burst(&mut rx).unwrap();
    rx.clear();
    {
        let store = kv.store_mut();
        for i in 0..3 {
            store
                .put(&format!("k{i}"), &common::val(64 + 300 * i, i as u8))
                .unwrap();
        }
        let list: Vec<Vec<u8>> = (0..4).map(|i| common::val(50 + 150 * i, 9)).collect();
        let refs: Vec<&[u8]> = list.iter().map(Vec::as_slice).collect();
        store.put_list("l", &refs).unwrap();
    }
    let mut requests = common::Requests::new(conn, ser);
    let mut batch = || -> u64 {
        for _ in 0..N {
            requests.send(&mut client, op);
        }
        let mut got = Vec::new();
        while got.len() < N as usize {
            assert!(dp.recv_burst(&mut got).unwrap() > 0, "{ser}: requests lost");
        }
        let before = allocs();
        for m in &got {
            kv.handle(&mut dp, m).unwrap();
        }
        let used = allocs() - before;
        drop(got);
        dp.flush().unwrap();
        dp.poll_completions();
        let mut replies = Vec::new();
        while client.recv_burst(&mut replies).unwrap() > 0 {}
        assert_eq!(replies.len(), N as usize, "{ser}: replies");
        drop(replies);
        client.poll_completions();
        dp.poll_completions();
        used
    };
    // Warm-up: rings, pinned size classes, reused lists and messages reach their sizes.
    for _ in 0..4 {
        batch();
    }
    let used = batch();
    assert_eq!(used % N, 0, "{ser}: {used} allocations over {N} requests");
    used / N
}

#[test]
fn server_read_paths_allocate_only_what_the_library_forces() {
    let mut failures = Vec::new();
    for ser in Serialization::ALL {
        for (name, op, keys) in ops() {
            let got = per_request(ser, &op);
            let want = match ser {
                Serialization::Shared(Shared::PROTOBUF) => keys,
                Serialization::Shared(Shared::CAPNP | Shared::CORNFLAKES_NO_SSEND) => 1,
                _ => 0,
            };
            println!("{ser} {name}: {got} allocations per request (expected {want})");
            if got != want {
                failures.push(format!("{ser} {name}: {got}, expected {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
