//! A client core keeps its datapath across load points and builds a fresh client for each
//! (`bench_client::client_core`). A reply of the last point that arrives late must not be
//! taken for this point's request with the same sequence number: in the hand-built modes the
//! message ids count from a random base per client, so the late reply maps to another request
//! id (the load generator counts it as unexpected). Over the in-process loopback NIC.

use std::net::{Ipv4Addr, SocketAddrV4};

use app_server::Handler;
use cornflakes::datapath::{Completions, DatapathMemory, Receive, Transmit};
use cornflakes::RxMsg;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use echo::client::EchoClient;
use echo::server::{Echo, ServerConfig};
use echo::Mode;
use loadgen::{request_id, ClientTransport};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

fn answer(dp: &mut Loopback, echo: &mut Echo) {
    let mut got: Vec<RxMsg> = Vec::new();
    while dp.recv_burst(&mut got).unwrap() > 0 {}
    for m in &got {
        echo.handle(dp, m).unwrap();
    }
    drop(got);
    dp.flush().unwrap();
    dp.poll_completions();
}

#[test]
fn a_late_reply_of_the_last_run_is_not_this_runs() {
    for mode in ["raw", "one-copy", "protobuf", "cornflakes"] {
        let mode: Mode = mode.parse().unwrap();
        let (mut dp, client_dp) = Loopback::pair(
            LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER)),
            LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT)),
        )
        .unwrap();
        let cfg = ServerConfig {
            mode,
            threshold: 512,
        };
        let mut echo = Echo::new(dp.memory(), cfg).unwrap();
        let shape = "list-2x100".parse().unwrap();
        let mut first = EchoClient::new(client_dp, SERVER, 0, mode, shape).unwrap();
        // ARP, then request 0 of the first run, answered but never read by it.
        answer(&mut dp, &mut echo);
        first.poll_responses(&mut |_| {}).unwrap();
        first.send_request(request_id(0, 0)).unwrap();
        first.poll_responses(&mut |_| {}).unwrap();
        answer(&mut dp, &mut echo);
        // The next run's client on the same datapath sends its own request 0.
        let mut second = EchoClient::new(first.into_datapath(), SERVER, 0, mode, shape).unwrap();
        second.send_request(request_id(0, 0)).unwrap();
        let mut ids = Vec::new();
        second.poll_responses(&mut |r| ids.push(r.id)).unwrap();
        answer(&mut dp, &mut echo);
        second.poll_responses(&mut |r| ids.push(r.id)).unwrap();
        let this_runs = ids
            .iter()
            .filter(|id| **id == Some(request_id(0, 0)))
            .count();
        assert_eq!(
            this_runs, 1,
            "{mode}: replies reported as request 0: {ids:?}"
        );
    }
}
