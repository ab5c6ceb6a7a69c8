//! Heap allocations per request of a KV load-generator core: its transport's send
//! (`ClientTransport::send_request`: build, serialize, queue) and its receive
//! (`poll_responses`: flush, receive, match the reply to its request, hand it on), counted by
//! a per-thread global allocator over the in-process loopback NIC. The server's work runs
//! outside the count. Nothing is timed.
//!
//! Expected after warm-up, for the single-key reads a client core sends to one server core:
//! - receiving: none in every serialization beyond the loopback wire's own copy of each frame
//!   (its emulated DMA gathers a frame into a fresh `Vec`; measured here on a bare receive and
//!   subtracted — a NIC's receive ring does not allocate);
//! - sending: none for the Cornflakes serializations (the generated client's table and the
//!   arena are reused) and RESP (encoded into a reused buffer); protobuf and Cap'n Proto 3,
//!   FlatBuffers 2: the request view's key list and what the library's encoder allocates, as
//!   on the server (crates/baselines/README.md).
//!
//! Outside this count: a `getm` split over several server cores keeps its parts' replies until
//! the last arrives, and the checker decodes each reply into owned values.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use app_server::Handler;
use baselines::alloc_count::{allocs, Counting};
use cornflakes::datapath::{Completions, DatapathMemory, Receive, Transmit};
use cornflakes::RxMsg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use kv_store::client::{KvClient, RunRequests};
use kv_store::server::{memory_config, Kv, ServerConfig};
use kv_store::{Op, Serialization, Shared};
use loadgen::{request_id, ClientTransport};

#[global_allocator]
static GLOBAL: Counting = Counting;

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// Requests per measured batch.
const N: u64 = 16;

/// (allocations per request sent, per reply received) of a client core sending `ops` in `ser`.
fn per_request(ser: Serialization, ops: Vec<Op>) -> (u64, u64) {
    let mem = memory_config(16 * 1024, 1 << 28);
    let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
    a.memory = mem.clone();
    let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
    b.memory = mem;
    let (mut dp, mut client_dp) = Loopback::pair(a, b).unwrap();
    let wire = wire_allocs_per_frame(&mut dp, &mut client_dp);
    let mut kv = Kv::new(dp.memory(), ServerConfig::new(ser));
    for i in 0..4 {
        kv.store_mut()
            .put(&format!("k{i}"), &vec![i as u8; 100 + 400 * i])
            .unwrap();
    }
    let reqs = Arc::new(RunRequests { ops, threads: 1 });
    let mut client = KvClient::new(client_dp, SERVER, 0, ser, reqs).unwrap();
    let mut rx: Vec<RxMsg> = Vec::new();
    // ARP: the server answers, the client's poll takes the answer in.
    let mut seen = 0;
    dp.recv_burst(&mut rx).unwrap();
    dp.flush().unwrap();
    client.poll_responses(&mut |_| seen += 1).unwrap();
    let mut seq = 0u64;
    let mut batch = || -> (u64, u64) {
        let before = allocs();
        for _ in 0..N {
            client.send_request(request_id(0, seq)).unwrap();
            seq += 1;
        }
        let sent = allocs() - before;
        // The requests leave at the client's next poll; the server answers outside the count.
        let mut replies = 0u64;
        client.poll_responses(&mut |_| replies += 1).unwrap();
        let mut got = Vec::new();
        while got.len() < N as usize {
            assert!(dp.recv_burst(&mut got).unwrap() > 0, "{ser}: requests lost");
        }
        for m in &got {
            kv.handle(&mut dp, m).unwrap();
        }
        drop(got);
        dp.flush().unwrap();
        dp.poll_completions();
        let before = allocs();
        while replies < N {
            let n = client.poll_responses(&mut |r| {
                assert!(r.id.is_some() && !r.payload.is_empty());
                replies += 1
            });
            assert!(n.unwrap() > 0, "{ser}: replies lost");
        }
        let received = allocs() - before - wire * N;
        dp.poll_completions();
        (sent, received)
    };
    // Warm-up: rings, the generated client's table, scratch buffers reach their sizes.
    for _ in 0..4 {
        batch();
    }
    let (sent, received) = batch();
    (sent / N, received / N)
}

#[test]
fn a_client_core_allocates_only_what_the_library_forces() {
    let ops = vec![
        Op::Get { key: "k1".into() },
        Op::Get { key: "k3".into() },
        Op::Get {
            key: "missing".into(),
        },
        Op::GetList { key: "k2".into() },
    ];
    let mut failures = Vec::new();
    for ser in Serialization::ALL {
        let (sent, received) = per_request(ser, ops.clone());
        let want = match ser {
            Serialization::Shared(Shared::PROTOBUF | Shared::CAPNP) => 3,
            Serialization::Shared(Shared::FLATBUFFERS) => 2,
            _ => 0,
        };
        println!(
            "{ser}: {sent} allocations per request sent (expected {want}), {received} per reply received"
        );
        if (sent, received) != (want, 0) {
            failures.push(format!("{ser}: {sent} sending, {received} receiving"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Allocations the loopback wire makes per frame it delivers (its emulated DMA copies each
/// frame into a fresh `Vec`): `N` frames sent from `from` and received by `to` on a bare
/// `recv_burst`, once warm.
fn wire_allocs_per_frame(from: &mut Loopback, to: &mut Loopback) -> u64 {
    use cornflakes::datapath::Connect;
    use cornflakes::Msg;
    let conn = from.connect(CLIENT).unwrap();
    let mut rx: Vec<RxMsg> = Vec::with_capacity(64);
    let mut round = |from: &mut Loopback, to: &mut Loopback| -> u64 {
        // Until ARP is done the sends are refused; the receives answer it.
        for i in 0..N {
            let _ = from.send_copy(conn, Msg::new(i as u32, 1), &[7u8; 64]);
        }
        from.flush().unwrap();
        from.poll_completions();
        let before = allocs();
        let mut got = 0;
        while to.recv_burst(&mut rx).unwrap() > 0 {
            got += rx.len();
            rx.clear();
        }
        let used = allocs() - before;
        to.flush().unwrap();
        from.recv_burst(&mut rx).unwrap();
        rx.clear();
        if got == N as usize {
            used / N
        } else {
            u64::MAX
        }
    };
    let mut last = u64::MAX;
    for _ in 0..6 {
        last = round(from, to);
    }
    assert_ne!(last, u64::MAX, "the wire's baseline frames did not arrive");
    last
}
