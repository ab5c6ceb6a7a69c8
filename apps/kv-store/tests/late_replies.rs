//! A client core keeps its datapath across load points and builds a fresh client for each
//! (`bench_client::client_core`). A reply of the last point that arrives late must not be
//! taken for this point's request with the same sequence number: every client has its own
//! incarnation, and a reply under another is dropped (the generated client's table for the
//! Cornflakes serializations; the hand-built ones check the reply's incarnation). Over the
//! in-process loopback NIC.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use app_server::Handler;
use cornflakes::datapath::{Completions, DatapathMemory, Receive, Transmit};
use cornflakes::RxMsg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use kv_store::client::{KvClient, RunRequests};
use kv_store::server::{memory_config, Kv, ServerConfig};
use kv_store::{Op, Serialization};
use loadgen::{request_id, ClientTransport};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

fn answer(dp: &mut Loopback, kv: &mut Kv) {
    let mut got: Vec<RxMsg> = Vec::new();
    while dp.recv_burst(&mut got).unwrap() > 0 {}
    for m in &got {
        kv.handle(dp, m).unwrap();
    }
    drop(got);
    dp.flush().unwrap();
    dp.poll_completions();
}

#[test]
fn a_late_reply_of_the_last_run_is_not_this_runs() {
    for ser in Serialization::ALL {
        let mem = memory_config(16 * 1024, 1 << 26);
        let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
        a.memory = mem.clone();
        let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
        b.memory = mem;
        let (mut dp, client_dp) = Loopback::pair(a, b).unwrap();
        let mut kv = Kv::new(dp.memory(), ServerConfig::new(ser));
        kv.store_mut().put("k", b"v").unwrap();
        let reqs = Arc::new(RunRequests {
            ops: vec![Op::Get { key: "k".into() }],
            threads: 1,
        });
        let mut first = KvClient::new(client_dp, SERVER, 0, ser, reqs.clone()).unwrap();
        // ARP, then request 0 of the first run, answered but never read by it.
        answer(&mut dp, &mut kv);
        first.poll_responses(&mut |_| {}).unwrap();
        first.send_request(request_id(0, 0)).unwrap();
        first.poll_responses(&mut |_| {}).unwrap();
        answer(&mut dp, &mut kv);
        // The next run's client on the same datapath sends its own request 0.
        let mut second = KvClient::new(first.into_datapath(), SERVER, 0, ser, reqs).unwrap();
        second.send_request(request_id(0, 0)).unwrap();
        let mut ids = Vec::new();
        second.poll_responses(&mut |r| ids.push(r.id)).unwrap();
        answer(&mut dp, &mut kv);
        second.poll_responses(&mut |r| ids.push(r.id)).unwrap();
        assert_eq!(ids, [Some(request_id(0, 0))], "{ser}: only its own reply");
    }
}
