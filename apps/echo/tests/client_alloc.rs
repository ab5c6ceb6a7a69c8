//! Heap allocations per request of an echo load-generator core: its transport's send
//! (`ClientTransport::send_request`: the request's values, build, serialize, queue) and its
//! receive (`poll_responses`: flush, receive, match the reply to its request, hand it on),
//! counted by a per-thread global allocator over the in-process loopback NIC. The server's
//! work and the checker run outside the count; so does the loopback wire's own copy of each
//! frame (its emulated DMA gathers a frame into a fresh `Vec`: measured on a bare receive and
//! subtracted). Nothing is timed.
//!
//! Expected after warm-up: none in the raw, hand-written and Cornflakes modes; protobuf and
//! FlatBuffers 1, Cap'n Proto 2 per request sent: what the libraries' encoders allocate, as on
//! the server (crates/baselines/README.md).

use std::net::{Ipv4Addr, SocketAddrV4};

use app_server::Handler;
use baselines::alloc_count::{allocs, Counting};
use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{Msg, RxMsg};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use echo::client::EchoClient;
use echo::server::{Echo, ServerConfig};
use echo::Mode;
use loadgen::{request_id, ClientTransport};

#[global_allocator]
static GLOBAL: Counting = Counting;

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// Requests per measured batch.
const N: u64 = 16;

fn pair() -> (Loopback, Loopback) {
    let mem = cornflakes::mem::MemoryConfig {
        max_item_size: 64 * 1024,
        ..Default::default()
    };
    let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
    a.memory = mem.clone();
    let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
    b.memory = mem;
    Loopback::pair(a, b).unwrap()
}

/// Allocations the loopback wire makes per frame it delivers, once warm.
fn wire_allocs_per_frame(from: &mut Loopback, to: &mut Loopback) -> u64 {
    let conn = from.connect(CLIENT).unwrap();
    let mut rx: Vec<RxMsg> = Vec::with_capacity(64);
    let mut last = u64::MAX;
    for _ in 0..6 {
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
        last = if got == N as usize {
            used / N
        } else {
            u64::MAX
        };
    }
    assert_ne!(last, u64::MAX, "the wire's baseline frames did not arrive");
    last
}

/// (allocations per request sent, per reply received) of a client core in `mode`.
fn per_request(mode: Mode) -> (u64, u64) {
    let (mut dp, mut client_dp) = pair();
    let wire = wire_allocs_per_frame(&mut dp, &mut client_dp);
    let cfg = ServerConfig {
        mode,
        threshold: 512,
    };
    let mut echo = Echo::new(dp.memory(), cfg).unwrap();
    let shape = "list-2x600".parse().unwrap();
    let mut client = EchoClient::new(client_dp, SERVER, 0, mode, shape).unwrap();
    let mut seq = 0u64;
    let mut batch = || -> (u64, u64) {
        let before = allocs();
        for _ in 0..N {
            client.send_request(request_id(0, seq)).unwrap();
            seq += 1;
        }
        let sent = allocs() - before;
        let mut replies = 0u64;
        client.poll_responses(&mut |_| replies += 1).unwrap(); // flushes the requests
        let mut got = Vec::new();
        while got.len() < N as usize {
            assert!(
                dp.recv_burst(&mut got).unwrap() > 0,
                "{mode}: requests lost"
            );
        }
        for m in &got {
            echo.handle(&mut dp, m).unwrap();
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
            assert!(n.unwrap() > 0, "{mode}: replies lost");
        }
        let received = allocs() - before - wire * N;
        dp.poll_completions();
        (sent, received)
    };
    for _ in 0..4 {
        batch();
    }
    let (sent, received) = batch();
    (sent / N, received / N)
}

#[test]
fn an_echo_client_core_allocates_only_what_the_library_forces() {
    let mut failures = Vec::new();
    for mode in Mode::ALL {
        let (sent, received) = per_request(mode);
        let want = match mode.name() {
            "protobuf" | "flatbuffers" => 1,
            "capnp" => 2,
            _ => 0,
        };
        println!(
            "{mode}: {sent} allocations per request sent (expected {want}), {received} per reply received"
        );
        if (sent, received) != (want, 0) {
            failures.push(format!("{mode}: {sent} sending, {received} receiving"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
