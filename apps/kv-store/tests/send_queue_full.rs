//! Issue #24, fault 1: a write whose reply meets a full transmit queue must be applied once.
//! The server's queue holds 4 datagrams and every `get` reply of a 5 000-byte value takes all 4
//! (GSO off: one datagram per frame), so the reply of each `append` that follows a `get` in
//! the same burst finds the queue full. The server must flush and retry the *built reply*,
//! never run the append again. Both ends are kernel UDP sockets on 127.0.0.1, driven from
//! this one thread (the server is polled by hand), so nothing depends on timing.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Completions, Connect, Receive};
use cornflakes::RxMsg;
use datapath_socket::{SocketConfig, SocketDatapath};
use kv_store::client::decode_reply;
use kv_store::server::{memory_config, KvServer, ServerConfig};
use kv_store::{Op, OpKind, Reply, Serialization, Status};

use common::{k, val};

const APPENDS: usize = 12;

fn socket(tx_queue: usize) -> SocketDatapath {
    let mut cfg = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cfg.memory = memory_config(16 * 1024, 64 << 20);
    cfg.gso = false;
    cfg.tx_queue = tx_queue;
    SocketDatapath::new(cfg).unwrap()
}

/// Polls the server and the client until `want` replies arrived (or 5 s passed).
fn collect(
    server: &mut KvServer<SocketDatapath>,
    client: &mut SocketDatapath,
    want: usize,
) -> Vec<RxMsg> {
    let (mut got, mut rx) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < want && Instant::now() < deadline {
        server.poll();
        rx.clear();
        client.recv_burst(&mut rx).unwrap();
        client.poll_completions();
        got.append(&mut rx);
    }
    got
}

fn call(
    server: &mut KvServer<SocketDatapath>,
    client: &mut SocketDatapath,
    req: &mut common::Requests,
    op: &Op,
) -> Reply {
    let msg = req.send(client, op);
    let rx = collect(server, client, 1);
    assert_eq!(rx.len(), 1, "one reply to {op:?}");
    assert_eq!(rx[0].msg, msg);
    decode_reply(req.ser, OpKind::of(op), &rx[0].data)
        .unwrap()
        .1
}

#[test]
fn an_append_whose_reply_meets_a_full_send_queue_is_applied_once() {
    for ser in Serialization::ALL {
        let mut server = kv_store::server::new(socket(4), ServerConfig::new(ser));
        let mut client = socket(4096);
        let conn = client.connect(server.datapath().local_addr()).unwrap();
        let mut req = common::Requests::new(conn, ser);
        let big = val(5000, 7);
        let put = |key: &str, v: Vec<u8>| Op::Put {
            key: k(key),
            val: v,
        };
        for op in [put("big", big.clone()), put("l", b"0".to_vec())] {
            assert_eq!(
                call(&mut server, &mut client, &mut req, &op).status,
                Status::Ok
            );
        }
        // One burst: (get big, append l) × APPENDS, all queued in the server's socket before
        // it polls.
        for _ in 0..APPENDS {
            req.send(&mut client, &Op::Get { key: k("big") });
            req.send(
                &mut client,
                &Op::Append {
                    key: k("l"),
                    val: b"a".to_vec(),
                },
            );
        }
        let replies = collect(&mut server, &mut client, 2 * APPENDS);
        assert_eq!(replies.len(), 2 * APPENDS, "{ser}: every request answered");
        let list = call(
            &mut server,
            &mut client,
            &mut req,
            &Op::GetList { key: k("l") },
        );
        assert_eq!(
            list.vals.len(),
            1 + APPENDS,
            "{ser}: each append applied exactly once"
        );
        let stats = server.stats();
        assert_eq!(stats.send_failed, 0, "{ser}: {stats}");
        assert!(stats.send_retries >= APPENDS as u64, "{ser}: {stats}");
    }
}
