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
use kv_store::{Op, OpKind, Reply, Serialization, Shared, Status};

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
    let hybrid = raw_replies(Serialization::Shared(Shared::CORNFLAKES));
    let no_ssend = raw_replies(Serialization::Shared(Shared::CORNFLAKES_NO_SSEND));
    assert_eq!(hybrid.len(), no_ssend.len());
    for ((op, want), (_, bytes)) in hybrid.iter().zip(&no_ssend) {
        assert_eq!(bytes, want, "cornflakes-no-ssend {op:?}");
    }
    // The libraries: the reply equals the library's own encoding of the expected response
    // (whatever network path it took: Cap'n Proto's goes out as segments).
    for ser in [
        Serialization::Shared(Shared::PROTOBUF),
        Serialization::Shared(Shared::CAPNP),
        Serialization::Shared(Shared::FLATBUFFERS),
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
        (Serialization::Shared(Shared::CORNFLAKES), 2),
        (Serialization::Shared(Shared::CORNFLAKES_SG), 2),
        (Serialization::Shared(Shared::CORNFLAKES_COPY), 1),
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
    let protobuf = live_in_flight(Serialization::Shared(Shared::PROTOBUF));
    assert_eq!(
        live_in_flight(Serialization::Shared(Shared::FLATBUFFERS)),
        protobuf
    );
    assert_eq!(
        live_in_flight(Serialization::Shared(Shared::CAPNP)),
        protobuf + 1
    );
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
            StoreConfig {
                memory_limit: 3000,
                ..StoreConfig::default()
            },
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
        Serialization::Shared(Shared::CORNFLAKES),
        Serialization::Shared(Shared::CORNFLAKES_SG),
        Serialization::Shared(Shared::CORNFLAKES_NO_SSEND),
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
        // A request that decodes but whose key is not UTF-8 is answered BAD_REQUEST (RESP's
        // `GET \xff` under each of the 3 message types; the Cornflakes GetReq). In the
        // Cornflakes serializations, a message type the service `kv.Kv` has no method for
        // (99) gets the error reply, whatever its bytes. The rest does not decode: no reply.
        let bad = match ser {
            Serialization::Resp => 3,
            s if s.is_cornflakes() => 1,
            _ => 0,
        };
        let unknown = if ser.is_cornflakes() { junk.len() } else { 0 };
        assert_eq!(
            replies.len(),
            bad + unknown,
            "{ser}: replies to junk {ids:?}"
        );
        for m in &replies {
            if m.msg.ty == cornflakes_rpc::ERROR_TYPE {
                let e = cornflakes_rpc::RpcError::decode(&m.data).unwrap();
                assert_eq!(e.code, cornflakes_rpc::ErrorCode::UnknownMethod, "{ser}");
                assert_eq!(e.method, 99, "{ser}");
                continue;
            }
            let (_, reply) = decode_reply(ser, OpKind::Get, &m.data).unwrap();
            assert_eq!(reply.status, Status::BadRequest, "{ser}");
        }
        assert_eq!(
            r.server.handler().unknown_methods(),
            unknown as u64,
            "{ser}"
        );
        assert_eq!(stats.received, sent, "{ser}: {stats}");
        assert_eq!(
            stats.malformed,
            sent - (bad + unknown) as u64,
            "{ser}: {stats}"
        );
        assert_eq!(stats.app.bad_requests, bad as u64, "{ser}: {stats}");
        assert_eq!(
            r.call(&Op::Get { key: k("k") }),
            ok(vec![b"v".to_vec()]),
            "{ser}"
        );
    }
}

/// Sends `body` as a raw request of `kind` and returns the decoded reply (or `None` when the
/// server answered nothing).
fn raw_call(r: &mut Rig, kind: OpKind, id: u32, body: &[u8]) -> Option<Reply> {
    r.client
        .send_copy(r.conn, Msg::new(id, kind.msg_type()), body)
        .unwrap();
    r.client.flush().unwrap();
    r.server.poll();
    let rx = r.recv();
    rx.first()
        .map(|m| decode_reply(r.ser, kind, &m.data).unwrap().1)
}

/// Issue 24, fault 2: `putm` / `MSET` checked each key's UTF-8 inside the write loop, so
/// `[good, "\xff\xfe"]` wrote `good`, then dropped the request unanswered.
#[test]
fn a_multi_key_put_with_a_bad_second_key_writes_nothing_and_answers_bad_request() {
    for ser in Serialization::ALL {
        if ser.library().is_some() {
            continue; // their decoders refuse a non-UTF-8 string: see the next test
        }
        let mut r = rig(ser);
        let body = if ser == Serialization::Resp {
            b"*5\r\n$4\r\nMSET\r\n$4\r\ngood\r\n$1\r\nv\r\n$2\r\n\xff\xfe\r\n$1\r\nw\r\n".to_vec()
        } else {
            let arena = Arena::new();
            let mut m = kv_store::schema::PutMReq::new_in(&arena);
            m.set_id(7);
            m.init_keys(2);
            for key in [&b"good"[..], b"\xff\xfe"] {
                m.get_mut_keys()
                    .append(cornflakes::CFString::from_ptr_unchecked_utf8(
                        cornflakes::CFPtr::borrowed(key),
                    ));
            }
            m.init_vals(2);
            for v in [&b"v"[..], b"w"] {
                m.get_mut_vals().append(cornflakes::CFBytes::new(v, &arena));
            }
            cornflakes::CornflakesObj::serialize_to_vec(&m)
        };
        let reply = raw_call(&mut r, OpKind::PutM, 7, &body).expect("an answer, not silence");
        assert_eq!(reply.status, Status::BadRequest, "{ser}");
        assert_eq!(
            r.server.handler().store().get("good").unwrap_err(),
            Status::NotFound,
            "{ser}: half-applied"
        );
        assert_eq!(r.server.stats().app.bad_requests, 1, "{ser}");
        assert_eq!(r.server.stats().malformed, 0, "{ser}");
    }
}

/// The library formats carry keys and values as lists for every operation: a `get`, `put`,
/// `append` or `delete` with several keys (or values) is refused, not served with the first;
/// a `putm` whose keys and values do not pair up changes nothing.
#[test]
fn library_requests_with_extra_keys_or_values_are_refused() {
    use baselines::kv::KvRequestView;
    for ser in Serialization::ALL {
        let Some(lib) = ser.library() else { continue };
        let mut r = rig(ser);
        r.server.handler_mut().store_mut().put("a", b"old").unwrap();
        type Case<'a> = (OpKind, &'a [&'a str], &'a [&'a [u8]]);
        let cases: [Case<'_>; 6] = [
            (OpKind::Get, &["a", "b"], &[]),
            (OpKind::Put, &["a", "b"], &[b"new"]),
            (OpKind::Put, &["a"], &[b"new", b"newer"]),
            (OpKind::Append, &["a"], &[b"x", b"y"]),
            (OpKind::Delete, &["a", "b"], &[]),
            (OpKind::PutM, &["a", "b"], &[b"new"]),
        ];
        for (i, (kind, keys, vals)) in cases.into_iter().enumerate() {
            let view = KvRequestView {
                id: 100 + i as u32,
                op: kind.msg_type(),
                keys: keys.to_vec(),
                vals: vals.to_vec(),
                ..KvRequestView::default()
            };
            let mut body = Vec::new();
            kv_store::libs::with_codec(lib, |c| c.encode_request(&view, &mut body));
            let reply = raw_call(&mut r, kind, view.id, &body).expect("an answer");
            assert_eq!(reply.status, Status::BadRequest, "{ser} {kind:?} {keys:?}");
        }
        assert_eq!(
            r.server.handler().store().get_list("a").unwrap().len(),
            1,
            "{ser}: nothing written"
        );
        assert_eq!(
            r.server.handler().store().get("a").unwrap().to_vec(),
            b"old"
        );
        assert_eq!(r.server.stats().app.bad_requests, 6, "{ser}");
    }
}

/// Issue 24, fault 3: every datagram with a valid framing header took a connection-table
/// entry, body junk or not, and none was ever evicted: after a flood of spoofed sources a
/// fresh client got no reply (`conn_table_full`). Now junk from 6 000 spoofed sources (more
/// than the stack's 4 096 entries) fills the table, and a client that arrives after it is
/// still answered (an unanswered entry is evicted for it).
#[test]
fn a_flood_of_spoofed_sources_does_not_lock_out_a_fresh_client() {
    use cornflakes_stack::wire::{framing, ipv4};
    const IP: usize = 14;
    const UDP: usize = 34;
    const BODY: usize = 42 + framing::HEADER_LEN;
    let mut r = rig(Serialization::Shared(Shared::CORNFLAKES));
    r.server.handler_mut().store_mut().put("k", b"v").unwrap();
    // A real request frame, as the client put it on the wire, to forge the flood from.
    r.client.set_capture(true);
    r.send(&Op::Get { key: k("k") });
    r.server.poll();
    r.recv();
    let template = r.client.take_captured().remove(0);
    let forge = |ip: [u8; 4], port: u16, id: u32, junk: bool| {
        let mut f = template.clone();
        f[IP + 12..IP + 16].copy_from_slice(&ip);
        f[UDP..UDP + 2].copy_from_slice(&port.to_be_bytes());
        f[UDP + 6..UDP + 8].copy_from_slice(&[0, 0]); // no UDP checksum
        f[42 + 4..42 + 8].copy_from_slice(&id.to_le_bytes()); // message id
        if junk {
            f[BODY..].fill(0xff);
        }
        ipv4::Packet::new_unchecked(&mut f[IP..]).fill_checksum();
        f
    };
    let flood = 6000u32;
    for n in 0..flood {
        let ip = [10, 9, (n >> 8) as u8, n as u8];
        r.server
            .datapath_mut()
            .inject_frame(&forge(ip, 1000 + (n % 7) as u16, n, true));
        if n % 32 == 31 {
            r.server.poll();
        }
    }
    while r.server.poll() > 0 {}
    let stats = r.server.stats();
    assert_eq!(stats.malformed, u64::from(flood), "{stats}");
    assert!(
        stats.datapath.conn_evicted >= u64::from(flood) - 4096,
        "{:?}",
        stats.datapath
    );
    // A fresh client (the client's address, another port) after the flood: answered.
    r.server.datapath_mut().set_capture(true);
    r.server
        .datapath_mut()
        .inject_frame(&forge([10, 0, 0, 2], 7001, 424242, false));
    assert_eq!(r.server.poll(), 1);
    r.recv(); // the client's NIC reads the reply (its stack drops it: nobody on port 7001)
    let replies = r.server.datapath_mut().take_captured();
    let answered = replies.iter().any(|f| {
        f.len() > BODY
            && f[UDP + 2..UDP + 4] == 7001u16.to_be_bytes()
            && f[42 + 4..42 + 8] == 424242u32.to_le_bytes()
    });
    assert!(
        answered,
        "the fresh client got no reply: {:?}",
        r.server.stats().datapath
    );
    assert_eq!(r.server.stats().datapath.conn_table_full, 0);
}
