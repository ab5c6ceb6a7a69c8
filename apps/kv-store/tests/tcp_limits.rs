//! The KV store over kernel TCP against careless and hostile clients, the server polled by
//! hand on this thread:
//!
//! - a client that pipelines writes and never reads is closed after the stall timeout, and the
//!   store holds exactly a prefix of its writes, each of them answered: none it sent beyond
//!   what the server answered was applied (read back over another connection);
//! - a slowloris (connections announcing the largest frame and sending 100 bytes, others
//!   sending 100 KB of it) does not make the store answer `STORE_FULL`: its memory limit is
//!   charged for its own entries only, and partial frames cannot exhaust the pinned pool the
//!   store shares with the datapath. Writes of 1 000 B, 60 kB and the largest value that fits
//!   a frame are applied and read back meanwhile.

mod common;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use cornflakes::datapath::{Connect, Receive};
use cornflakes::{Arena, ConnId, Msg, SendError};
use datapath_tcp::frame::{write_header, HEADER_LEN};
use datapath_tcp::{TcpConfig, TcpDatapath};
use kv_store::client::{decode_reply, send_op};
use kv_store::server::{memory_config, KvServer, ServerConfig};
use kv_store::store::StoreConfig;
use kv_store::{Op, OpKind, Reply, Serialization, Shared, Status};

use common::{k, val};

const SER: Serialization = Serialization::Shared(Shared::CORNFLAKES);
const MEMORY_LIMIT: usize = 16 << 20;

/// A KV server as `kv server --datapath tcp` sizes it (pinned pool: the store's limit plus
/// 256 MiB), with `cfg` applied.
fn server(cfg: impl FnOnce(&mut TcpConfig)) -> KvServer<TcpDatapath> {
    let mut c = TcpConfig::new(Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
    c.stream.memory = memory_config(256 << 10, MEMORY_LIMIT + (256 << 20));
    cfg(&mut c);
    let mut sc = ServerConfig::new(SER);
    sc.store = StoreConfig {
        memory_limit: MEMORY_LIMIT,
        ..StoreConfig::default()
    };
    kv_store::server::new(TcpDatapath::new(c).unwrap(), sc)
}

fn client() -> TcpDatapath {
    TcpDatapath::new(TcpConfig::new(None)).unwrap()
}

/// Sends `op` and polls both ends until its reply arrives.
fn call(
    srv: &mut KvServer<TcpDatapath>,
    cl: &mut TcpDatapath,
    req: &mut common::Requests,
    op: &Op,
) -> Reply {
    let msg = req.send(cl, op);
    let mut rx = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    while rx.is_empty() {
        assert!(Instant::now() < end, "no reply to {op:?}");
        srv.poll();
        cl.recv_burst(&mut rx).unwrap();
    }
    assert_eq!(rx.len(), 1);
    assert_eq!(rx[0].msg, msg);
    decode_reply(SER, OpKind::of(op), &rx[0].data).unwrap().1
}

fn put(key: &str, v: Vec<u8>) -> Op {
    Op::Put {
        key: k(key),
        val: v,
    }
}

#[test]
fn writes_of_a_client_that_never_reads_are_a_prefix_each_answered_when_it_is_closed() {
    let mut srv = server(|c| {
        c.stream.tx_limit = 64 << 10;
        c.socket_buffer = Some(32 << 10);
        c.stream.stall_timeout = Duration::from_millis(300);
    });
    let addr = srv.datapath().local_addr();
    let mut setup = client();
    let conn = setup.connect(addr).unwrap();
    let mut req = common::Requests::new(conn, SER);
    // A large value whose gets fill the reply queue quickly.
    let big = val(100_000, 9);
    assert_eq!(
        call(&mut srv, &mut setup, &mut req, &put("big", big)).status,
        Status::Ok
    );

    // The deaf client: (put k<i>, get big) pipelined until its own queue is refused; it never
    // reads a reply.
    let mut deaf_dp = {
        let mut c = TcpConfig::new(None);
        c.socket_buffer = Some(32 << 10);
        TcpDatapath::new(c).unwrap()
    };
    let deaf = deaf_dp.connect(addr).unwrap();
    let (mut arena, mut buf) = (Arena::new(), Vec::new());
    let mut sent = 0usize;
    let mut id = 1;
    let mut send = |dp: &mut TcpDatapath, op: &Op| {
        let msg = Msg::new(id, OpKind::of(op).msg_type());
        id += 1;
        send_op(dp, deaf, msg, SER, op, &mut arena, &mut buf)
    };
    let end = Instant::now() + Duration::from_secs(20);
    while srv.datapath().stats().stall_timeouts == 0 {
        assert!(Instant::now() < end, "{:?}", srv.datapath().stats());
        if deaf_dp.is_open(deaf) {
            match send(
                &mut deaf_dp,
                &put(&format!("k{sent}"), val(200, sent as u8)),
            ) {
                Ok(()) => {
                    sent += 1;
                    let _ = send(&mut deaf_dp, &Op::Get { key: k("big") });
                }
                Err(SendError::Full) => {}
                Err(e) => panic!("{e}"),
            }
            let _ = cornflakes::datapath::Transmit::flush(&mut deaf_dp);
        }
        srv.poll();
    }
    let dstats = srv.datapath().stats();
    assert!(
        dstats.unexecuted_dropped <= dstats.held_for_room,
        "{dstats:?}"
    );
    assert!(
        !srv.datapath().is_open(ConnId(1)),
        "the deaf connection is closed"
    );

    // Read back: the writes applied are k0..kE, a prefix, and each was answered.
    let mut applied = 0;
    for i in 0..sent {
        let r = call(
            &mut srv,
            &mut setup,
            &mut req,
            &Op::Get {
                key: format!("k{i}"),
            },
        );
        match r.status {
            Status::Ok => {
                assert_eq!(applied, i, "k{i} applied after a gap");
                assert_eq!(r.vals, vec![val(200, i as u8)]);
                applied += 1;
            }
            Status::NotFound => {}
            s => panic!("k{i}: {s:?}"),
        }
    }
    assert!(applied > 0 && applied < sent, "{applied} of {sent}");
    let st = srv.stats();
    assert_eq!(st.send_failed, 0, "{st}");
    assert_eq!(
        st.received, st.replied,
        "every request run was answered: {st}"
    );
}

fn header(len: usize) -> Vec<u8> {
    let mut h = vec![0u8; HEADER_LEN];
    write_header(&mut h, Msg::new(1, 1), len as u32);
    h
}

#[test]
fn a_slowloris_never_makes_the_store_answer_store_full() {
    // A pinned pool of the store's limit plus 32 MiB (the kv server adds 256 MiB; a smaller
    // margin lets a few hundred connections, within the default descriptor limit, show what
    // thousands would against the real one): partial frames may hold a quarter of it.
    let mut srv = server(|c| c.stream.memory = memory_config(256 << 10, MEMORY_LIMIT + (32 << 20)));
    let addr = srv.datapath().local_addr();
    let cap = srv.datapath().config().partial_limit;
    assert_eq!(cap, (MEMORY_LIMIT + (32 << 20)) / 4);
    let largest = cornflakes::datapath::Transmit::max_message_len(srv.datapath());
    let mut cl = client();
    let conn = cl.connect(addr).unwrap();
    let mut req = common::Requests::new(conn, SER);
    // The store at about a third of its limit.
    for i in 0..20 {
        let r = call(
            &mut srv,
            &mut cl,
            &mut req,
            &put(&format!("base{i}"), val(250_000, i)),
        );
        assert_eq!(r.status, Status::Ok);
    }
    // 250 connections announce the largest frame and send 100 bytes (62 MiB announced, more
    // than the pool's margin); 100 more send 100 KB of it (more than the cap).
    let mut attack = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    for (n, sent) in [(250, 100), (100, 100_000)] {
        let mut first = header(largest);
        first.resize(sent, 0xAB);
        for _ in 0..n {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&first).unwrap();
            attack.push(s);
            // Accepted as they come (the listen backlog is short).
            while srv.datapath().stats().accepted < 1 + attack.len() as u64 {
                assert!(Instant::now() < end, "{:?}", srv.datapath().stats());
                srv.poll();
            }
        }
    }
    while srv.datapath().partial_bytes().0 < 250 * 100 {
        assert!(Instant::now() < end, "{:?}", srv.datapath().stats());
        srv.poll();
    }
    for _ in 0..100 {
        srv.poll();
    }
    assert!(srv.datapath().partial_bytes().1 <= cap + (256 << 10));
    // Writes of every size are applied and read back.
    for (i, len) in [1000usize, 60_000, largest - 200].into_iter().enumerate() {
        let key = format!("new{i}");
        let v = val(len, 40 + i as u8);
        let r = call(&mut srv, &mut cl, &mut req, &put(&key, v.clone()));
        assert_eq!(r.status, Status::Ok, "a {len}-byte put during the attack");
        let r = call(&mut srv, &mut cl, &mut req, &Op::Get { key });
        assert_eq!(r.vals, vec![v]);
    }
    let st = srv.stats();
    assert_eq!(st.app.full, 0, "{st}");
    assert!(st.app.used_bytes < MEMORY_LIMIT / 2, "{st}");
    drop(attack);
}
