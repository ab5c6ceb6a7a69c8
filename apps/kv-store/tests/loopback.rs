//! The server over the in-process loopback NIC: every request type in every serialization with
//! byte-exact values, missing keys and bad indexes, values in pieces, the pointer-swap safety
//! of puts while a reply is in flight, and malformed requests. Nothing is timed.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::mem::MemoryConfig;
use cornflakes::{Arena, ConnId, Msg, RxMsg};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use kv_store::client::decode_reply;
use kv_store::server::{memory_config, KvServer, ServerConfig};
use kv_store::store::StoreConfig;
use kv_store::{Op, OpKind, Reply, Serialization, Status};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

struct Rig {
    server: KvServer<Loopback>,
    client: Loopback,
    conn: ConnId,
    ser: Serialization,
    requests: common::Requests,
}

fn rig_with(ser: Serialization, mem: MemoryConfig, store: StoreConfig) -> Rig {
    let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
    a.memory = mem.clone();
    let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
    b.memory = mem;
    let (a, mut b) = Loopback::pair(a, b).unwrap();
    let conn = b.connect(SERVER).unwrap();
    let mut server = kv_store::server::new(
        a,
        ServerConfig {
            store,
            ..ServerConfig::new(ser)
        },
    );
    let mut rx = Vec::new();
    server.poll(); // answers the ARP request
    b.recv_burst(&mut rx).unwrap();
    Rig {
        server,
        client: b,
        conn,
        ser,
        requests: common::Requests::new(conn, ser),
    }
}

fn rig(ser: Serialization) -> Rig {
    rig_with(
        ser,
        memory_config(16 * 1024, 1 << 30),
        StoreConfig::default(),
    )
}

impl Rig {
    fn send(&mut self, op: &Op) -> Msg {
        self.requests.send(&mut self.client, op)
    }

    fn recv(&mut self) -> Vec<RxMsg> {
        let mut rx = Vec::new();
        self.client.recv_burst(&mut rx).unwrap();
        self.client.poll_completions();
        rx
    }

    /// Sends `op`, lets the server answer, and decodes the reply.
    fn call(&mut self, op: &Op) -> Reply {
        let msg = self.send(op);
        assert_eq!(self.server.poll(), 1);
        let rx = self.recv();
        assert_eq!(rx.len(), 1, "{} {op:?}: one reply", self.ser);
        assert_eq!(rx[0].msg, msg, "reply carries the request's id and type");
        let (id, reply) = decode_reply(self.ser, OpKind::of(op), &rx[0].data)
            .unwrap_or_else(|e| panic!("{} {op:?}: {e}", self.ser));
        if let Some(id) = id {
            assert_eq!(id, msg.id);
        }
        reply
    }
}

use common::{k, ok, st, val};

#[test]
fn every_request_in_every_serialization() {
    for ser in Serialization::ALL {
        let mut r = rig(ser);
        common::every_request(ser, &mut |op| r.call(op));
        let stats = r.server.stats();
        assert_eq!(
            (stats.malformed, stats.send_failed),
            (0, 0),
            "{ser}: {stats}"
        );
    }
}

#[test]
fn resp_replies_are_byte_exact() {
    let mut r = rig(Serialization::Resp);
    r.call(&Op::Put {
        key: k("x"),
        val: b"hello".to_vec(),
    });
    r.send(&Op::Get { key: k("x") });
    r.server.poll();
    assert_eq!(&r.recv()[0].data[..], b"$5\r\nhello\r\n");
    r.send(&Op::GetM {
        keys: vec![k("x"), k("y")],
    });
    r.server.poll();
    assert_eq!(&r.recv()[0].data[..], b"*2\r\n$5\r\nhello\r\n$-1\r\n");
}

/// The raw reply payloads of a fixed request sequence in `ser` (writes first, then reads of
/// every kind, including a missing key and a bad index).
fn raw_replies(ser: Serialization) -> Vec<(Op, Vec<u8>)> {
    let mut r = rig(ser);
    let (small, big) = (val(40, 1), val(2048, 2));
    for op in [
        Op::Put {
            key: k("a"),
            val: small.clone(),
        },
        Op::Append {
            key: k("l"),
            val: big.clone(),
        },
        Op::Append {
            key: k("l"),
            val: small,
        },
    ] {
        r.call(&op);
    }
    let reads = [
        Op::Get { key: k("a") },
        Op::GetM {
            keys: vec![k("a"), k("missing"), k("l")],
        },
        Op::GetList { key: k("l") },
        Op::GetFromList {
            key: k("l"),
            index: 0,
        },
        Op::GetFromList {
            key: k("l"),
            index: 5,
        },
        Op::Get { key: k("missing") },
        Op::Delete { key: k("a") },
    ];
    reads
        .into_iter()
        .map(|op| {
            r.send(&op);
            r.server.poll();
            let rx = r.recv();
            assert_eq!(rx.len(), 1, "{ser} {op:?}");
            let bytes = rx[0].data.to_vec();
            (op, bytes)
        })
        .collect()
}

#[test]
fn replies_are_byte_exact_in_every_serialization() {
    // Cornflakes: the same policy sent through either API (serialize-and-send, or the
    // scatter-gather array first) puts the same bytes on the wire. (The policies themselves
    // may lay referenced fields out differently; their values are compared exactly by
    // `every_request_in_every_serialization`.)
    let hybrid = raw_replies(Serialization::Cornflakes);
    let no_ssend = raw_replies(Serialization::CornflakesNoSsend);
    assert_eq!(hybrid.len(), no_ssend.len());
    for ((op, want), (_, bytes)) in hybrid.iter().zip(&no_ssend) {
        assert_eq!(bytes, want, "cornflakes-no-ssend {op:?}");
    }
    // The libraries: the reply equals the library's own encoding of the expected response
    // (whatever network path it took: Cap'n Proto's goes out as segments).
    for ser in [
        Serialization::Protobuf,
        Serialization::Capnp,
        Serialization::Flatbuffers,
    ] {
        let lib = ser.library().unwrap();
        let mut codec = lib.kv_codec();
        for (op, bytes) in raw_replies(ser) {
            let (id, reply) = decode_reply(ser, OpKind::of(&op), &bytes).unwrap();
            let view = baselines::kv::KvResponseView {
                id: id.unwrap(),
                status: reply.status as i32,
                vals: reply.vals.iter().map(Vec::as_slice).collect(),
                statuses: reply.statuses.iter().map(|s| *s as i32).collect(),
            };
            let mut want = vec![0u8; codec.response_len_bound(&view)];
            let n = codec.encode_response(&view, &mut want).unwrap();
            assert_eq!(bytes, &want[..n], "{ser} {op:?}");
        }
    }
}

#[test]
fn cornflakes_replies_reference_stored_values_above_the_threshold() {
    // The hybrid mode sends a 2048-byte value by reference: while the reply is in flight the
    // stored buffer has a second reference (the descriptor's); the copy mode never does.
    for (ser, refs) in [
        (Serialization::Cornflakes, 2),
        (Serialization::CornflakesSg, 2),
        (Serialization::CornflakesCopy, 1),
        (Serialization::Resp, 1),
    ] {
        let mut r = rig(ser);
        r.server
            .handler_mut()
            .store_mut()
            .put("v", &val(2048, 9))
            .unwrap();
        r.send(&Op::Get { key: k("v") });
        r.server.poll();
        let stored = r
            .server
            .handler()
            .store()
            .get("v")
            .unwrap()
            .single()
            .unwrap();
        // The store's reference, plus the transmit descriptor's when sent by reference.
        if refs == 1 {
            assert_eq!(stored.ref_count(), 1, "{ser}");
        } else {
            assert!(stored.ref_count() >= 2, "{ser}");
        }
        r.recv();
    }
}

#[test]
fn capnp_replies_go_out_as_the_segment_table_and_one_entry_per_segment() {
    // While a reply is in flight its transmit buffers are live pinned items: protobuf and
    // FlatBuffers write one buffer; Cap'n Proto builds in a pinned segment and sends the
    // segment table beside it, so one more. The bytes on the wire are checked by decoding.
    let live_in_flight = |ser: Serialization| {
        let mut r = rig(ser);
        let v = val(2048, 9);
        r.server.handler_mut().store_mut().put("v", &v).unwrap();
        let before = r.server.datapath().memory().stats().live_items;
        let msg = r.send(&Op::Get { key: k("v") });
        r.server.poll();
        let during = r.server.datapath().memory().stats().live_items;
        let rx = r.recv();
        assert_eq!(rx.len(), 1);
        assert_eq!(rx[0].msg, msg);
        let (_, reply) = decode_reply(ser, OpKind::Get, &rx[0].data).unwrap();
        assert_eq!(reply, ok(vec![v]), "{ser}");
        during - before
    };
    let protobuf = live_in_flight(Serialization::Protobuf);
    assert_eq!(live_in_flight(Serialization::Flatbuffers), protobuf);
    assert_eq!(live_in_flight(Serialization::Capnp), protobuf + 1);
}

/// A value above one pinned buffer (4 KiB items here) is stored in pieces. No reply can carry
/// it: a message is received into one pinned buffer, so the datapaths cap messages at one
/// item. The server answers TOO_LARGE (never a crash or a cut value) and keeps the value.
#[test]
fn values_larger_than_one_pinned_buffer_are_kept_and_answered_too_large() {
    for ser in Serialization::ALL {
        let mut r = rig_with(ser, memory_config(4096, 1 << 30), StoreConfig::default());
        let v = val(10_000, 5);
        r.server.handler_mut().store_mut().put("big", &v).unwrap();
        assert_eq!(
            r.server
                .handler()
                .store()
                .get("big")
                .unwrap()
                .pieces()
                .len(),
            3
        );
        assert_eq!(
            r.call(&Op::Get { key: k("big") }),
            st(Status::TooLarge),
            "{ser}"
        );
        assert_eq!(
            r.call(&Op::GetList { key: k("big") }),
            st(Status::TooLarge),
            "{ser}"
        );
        assert!(r.server.handler().store().get("big").unwrap().to_vec() == v);
        // A value that fits one item but not one 1500-byte frame is segmented by the stack.
        let fits = val(3000, 6);
        r.server
            .handler_mut()
            .store_mut()
            .put("fits", &fits)
            .unwrap();
        let reply = r.call(&Op::Get { key: k("fits") });
        assert!(reply == ok(vec![fits]), "{ser}: {reply}");
    }
}

#[test]
fn memory_limit_answers_store_full() {
    for ser in Serialization::ALL {
        let mut r = rig_with(
            ser,
            memory_config(16 * 1024, 1 << 30),
            StoreConfig { memory_limit: 3000 },
        );
        assert_eq!(
            r.call(&Op::Put {
                key: k("a"),
                val: val(2000, 1)
            }),
            st(Status::Ok)
        );
        assert_eq!(
            r.call(&Op::Put {
                key: k("b"),
                val: val(2000, 1)
            }),
            st(Status::StoreFull),
            "{ser}"
        );
        assert_eq!(r.call(&Op::Get { key: k("b") }), st(Status::NotFound));
        assert_eq!(r.server.stats().app.full, 1);
    }
}

/// The paper's update model: a get's reply references the stored buffer; a put of the same
/// key while that reply is in flight swaps in a new buffer. The wire carries the old bytes,
/// and the old buffer goes back to its pool only when the send completes.
#[test]
fn a_put_never_writes_a_buffer_in_flight() {
    for ser in [
        Serialization::Cornflakes,
        Serialization::CornflakesSg,
        Serialization::CornflakesNoSsend,
    ] {
        let mut r = rig(ser);
        let (old, new) = (val(3000, 1), val(3000, 2));
        r.server.handler_mut().store_mut().put("k", &old).unwrap();
        let old_addr = r
            .server
            .handler()
            .store()
            .get("k")
            .unwrap()
            .single()
            .unwrap()
            .as_ptr() as usize;
        // Both requests reach the server in one burst: the get's reply is queued (by
        // reference) before the put runs.
        r.send(&Op::Get { key: k("k") });
        r.send(&Op::Put {
            key: k("k"),
            val: new.clone(),
        });
        assert_eq!(r.server.poll(), 2);
        assert_eq!(r.server.handler().store().get("k").unwrap().to_vec(), new);
        let mem = r.server.datapath().memory().clone();
        // In flight: the old item is still allocated, so a new 3000-byte allocation (same size
        // class, last freed first) gets another item.
        let probe = mem.alloc(3000).unwrap();
        assert_ne!(
            probe.as_ptr() as usize,
            old_addr,
            "{ser}: old buffer freed too early"
        );
        drop(probe);
        let (_, visible, _) = r.server.datapath().ring_state();
        assert!(visible > 0, "replies flushed, not yet read by the NIC");
        // The NIC reads the frames now: the get's reply carries the old bytes.
        let rx = r.recv();
        assert_eq!(rx.len(), 2);
        let (_, get) = decode_reply(ser, OpKind::Get, &rx[0].data).unwrap();
        assert_eq!(get, ok(vec![old.clone()]), "{ser}");
        // Completion: the old buffer returns to its pool.
        let live = mem.stats().live_items;
        r.server.datapath_mut().poll_completions();
        assert!(mem.stats().live_items < live);
        let probe = mem.alloc(3000).unwrap();
        assert_eq!(
            probe.as_ptr() as usize,
            old_addr,
            "{ser}: old buffer returned at completion"
        );
    }
}

#[test]
fn malformed_requests_are_counted_and_the_server_keeps_answering() {
    for ser in Serialization::ALL {
        let mut r = rig(ser);
        r.server.handler_mut().store_mut().put("k", b"v").unwrap();
        let junk: [&[u8]; 5] = [
            b"",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"*1\r\n$9\r\nGET\r\n",
            &[1, 0, 0, 0, 6, 0, 0, 0],
            b"*2\r\n$3\r\nGET\r\n$1\r\n\xff\r\n",
        ];
        let mut sent = 0;
        for (i, j) in junk.iter().enumerate() {
            for ty in [1u16, 5, 99] {
                r.client
                    .send_copy(r.conn, Msg::new(1000 + i as u32, ty), j)
                    .unwrap();
                sent += 1;
            }
        }
        // A cornflakes GetReq whose key is not UTF-8.
        let mut bad_key = Vec::new();
        let arena = Arena::new();
        let mut m = kv_store::schema::GetReq::new_in(&arena);
        m.set_key(cornflakes::CFString::from_ptr_unchecked_utf8(
            cornflakes::CFPtr::borrowed(b"\xff\xfe"),
        ));
        bad_key.extend(cornflakes::CornflakesObj::serialize_to_vec(&m));
        r.client
            .send_copy(r.conn, Msg::new(2000, OpKind::Get.msg_type()), &bad_key)
            .unwrap();
        sent += 1;
        r.client.flush().unwrap();
        while r.server.poll() > 0 {}
        let replies = r.recv();
        let stats = r.server.stats();
        let ids: Vec<(u32, u16)> = replies.iter().map(|m| (m.msg.id, m.msg.ty)).collect();
        assert!(replies.is_empty(), "{ser}: replies to junk {ids:?}");
        assert_eq!(stats.received, sent, "{ser}: {stats}");
        assert_eq!(stats.malformed, sent, "{ser}: {stats}");
        assert_eq!(
            r.call(&Op::Get { key: k("k") }),
            ok(vec![b"v".to_vec()]),
            "{ser}"
        );
    }
}
