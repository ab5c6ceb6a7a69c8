//! The exactly-once table tells a retry from a new request by every byte, and by the client's
//! incarnation, whatever the serialization and the transport. Each case sends what a client
//! sends (a request encoded in its serialization, framed with an incarnation and an id) to an
//! in-process KV server on a real datapath (kernel UDP on 127.0.0.1, kernel TCP), and reads the
//! store back: nothing is answered `OK` that was not applied, nothing is applied twice.
//!
//! - a reused id whose request matches the first one's 64-byte prefix and length but not its
//!   later bytes is refused `BAD_REQUEST` (it was answered `OK` from the table and never
//!   applied when the table compared only a prefix);
//! - so is one of the largest size the datapath accepts that differs only in one late byte;
//! - a client that reconnects from the same port with its ids restarting is a new request
//!   when it is a new process (new incarnation), and a retry, not applied twice, when it is the
//!   same process (same incarnation); an anonymous client (incarnation 0) on a recycled port
//!   that reuses an id with another request is refused.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use cornflakes::datapath::Connect;
use cornflakes::{Arena, ConnId, Datapath, Msg, RxMsg};
use cornflakes_rpc::ClientIds;
use datapath_socket::{SocketConfig, SocketDatapath};
use datapath_tcp::frame::{parse_header, write_header, HEADER_LEN};
use datapath_tcp::{TcpConfig, TcpDatapath};
use kv_store::call::{Caller, RetryPolicy};
use kv_store::client::decode_reply;
use kv_store::server::{KvServer, ServerConfig};
use kv_store::{Op, OpKind, Reply, Serialization, Shared, Status};

const SERS: [Serialization; 3] = [
    Serialization::Shared(Shared::CORNFLAKES),
    Serialization::Shared(Shared::PROTOBUF),
    Serialization::Resp,
];

fn localhost(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
}

fn inc(v: u64) -> NonZeroU64 {
    NonZeroU64::new(v).unwrap()
}

/// Request `op` with id `id` as a client of `ser` encodes it.
fn encode(ser: Serialization, op: &Op, id: u32) -> Vec<u8> {
    let mut out = Vec::new();
    if ser.is_cornflakes() {
        kv_store::cf::encode_request(op, id, &Arena::new(), &mut out);
    } else if let Some(lib) = ser.library() {
        kv_store::libs::encode_request(lib, op, id, &mut out);
    } else {
        kv_store::resp::encode_request(op, &mut out);
    }
    out
}

/// A client's wire: sends framed messages, returns the replies received so far.
trait Wire {
    fn send(&mut self, msg: Msg, bytes: &[u8]);
    fn recv(&mut self) -> Vec<(Msg, Vec<u8>)>;
}

/// A client on a Cornflakes datapath (UDP or TCP).
struct DpWire<D: Datapath> {
    dp: D,
    conn: ConnId,
    rx: Vec<RxMsg>,
}

impl<D: Datapath> DpWire<D> {
    fn new(mut dp: D, server: SocketAddrV4) -> DpWire<D> {
        let conn = dp.connect(server).unwrap();
        DpWire {
            dp,
            conn,
            rx: Vec::new(),
        }
    }
}

impl<D: Datapath> Wire for DpWire<D> {
    fn send(&mut self, msg: Msg, bytes: &[u8]) {
        self.dp.send_copy(self.conn, msg, bytes).unwrap();
        self.dp.flush().unwrap();
    }

    fn recv(&mut self) -> Vec<(Msg, Vec<u8>)> {
        self.rx.clear();
        self.dp.recv_burst(&mut self.rx).unwrap();
        self.rx
            .drain(..)
            .map(|m| (m.msg, m.data.to_vec()))
            .collect()
    }
}

/// The server, run in the test's thread between a client's send and its receive.
struct Rig<D: Datapath> {
    server: KvServer<D>,
    ser: Serialization,
}

impl<D: Datapath> Rig<D> {
    fn new(dp: D, ser: Serialization) -> Rig<D> {
        Rig {
            server: kv_store::server::new(dp, ServerConfig::new(ser)),
            ser,
        }
    }

    /// Sends `op` under `msg` (its type set from `op`) on `wire` and returns the reply.
    fn call(&mut self, wire: &mut dyn Wire, msg: Msg, op: &Op) -> Reply {
        let kind = OpKind::of(op);
        let msg = Msg {
            ty: kind.msg_type(),
            ..msg
        };
        wire.send(msg, &encode(self.ser, op, msg.id));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            self.server.poll();
            for (m, data) in wire.recv() {
                if (m.incarnation, m.id) == (msg.incarnation, msg.id) {
                    return decode_reply(self.ser, kind, &data).unwrap().1;
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        panic!("{}: no reply to {msg:?} {op:?}", self.ser);
    }

    /// The stored list of `key` (empty when absent).
    fn stored(&self, key: &str) -> Vec<Vec<u8>> {
        match self.server.handler().store().get_list(key) {
            Ok(l) => l.iter().map(|v| v.to_vec()).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn refused(&self) -> u64 {
        self.server.stats().app.dedup.refused
    }
}

fn put(key: &str, val: &[u8]) -> Op {
    Op::Put {
        key: key.to_owned(),
        val: val.to_vec(),
    }
}

fn append(key: &str, val: &[u8]) -> Op {
    Op::Append {
        key: key.to_owned(),
        val: val.to_vec(),
    }
}

fn get(key: &str) -> Op {
    Op::Get {
        key: key.to_owned(),
    }
}

fn status(s: Status) -> Reply {
    Reply::status(s)
}

/// Two requests under one key whose encodings have the same length and the same first 64
/// bytes but differ later: the second is refused, the first's value stays, and the key of a
/// second write refused that way is not found (never answered `OK`).
fn a_reused_id_past_the_prefix_is_refused<D: Datapath>(
    rig: &mut Rig<D>,
    w: &mut dyn Wire,
    next: &mut dyn FnMut() -> Msg,
) {
    let ser = rig.ser;
    let msg = next();
    let v1 = vec![b'a'; 200];
    let mut v2 = v1.clone();
    v2[150..].fill(b'b');
    let (p1, p2) = (put("k", &v1), put("k", &v2));
    let (e1, e2) = (encode(ser, &p1, msg.id), encode(ser, &p2, msg.id));
    assert_eq!(e1.len(), e2.len(), "{ser}");
    assert_eq!(
        e1[..64],
        e2[..64],
        "{ser}: a 64-byte prefix cannot tell them apart"
    );
    let before = rig.refused();
    assert_eq!(rig.call(w, msg, &p1).status, Status::Ok, "{ser}");
    assert_eq!(rig.call(w, msg, &p1).status, Status::Ok, "{ser}: a retry");
    assert_eq!(
        rig.call(w, msg, &p2),
        status(Status::BadRequest),
        "{ser}: reused id"
    );
    assert_eq!(
        rig.stored("k"),
        vec![v1.clone()],
        "{ser}: the first value stays"
    );
    assert_eq!(rig.refused(), before + 1);

    // Two 80-byte keys that differ after byte 64, one id: the second is refused, and not found.
    let again = next();
    let (k1, k2) = (
        format!("{}1", "k".repeat(79)),
        format!("{}2", "k".repeat(79)),
    );
    assert_eq!(rig.call(w, again, &put(&k1, b"x")).status, Status::Ok);
    assert_eq!(
        rig.call(w, again, &put(&k2, b"x")),
        status(Status::BadRequest)
    );
    assert_eq!(
        rig.call(w, next(), &get(&k2)),
        status(Status::NotFound),
        "{ser}"
    );
    assert_eq!(rig.stored(&k1), vec![b"x".to_vec()]);
}

/// The largest request the datapath accepts (a put whose encoding is as long as the
/// server's largest message), then the same with one late value byte changed: refused.
fn the_largest_request_differing_in_one_byte_is_refused<D: Datapath>(
    rig: &mut Rig<D>,
    w: &mut dyn Wire,
    msg: Msg,
) {
    let ser = rig.ser;
    let limit = rig.server.datapath().max_message_len();
    let len_of = |n: usize| encode(ser, &put("big", &vec![7; n]), msg.id).len();
    let (mut lo, mut hi) = (0, limit);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if len_of(mid) <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    assert!(
        len_of(lo) > limit - 16 && len_of(lo + 1) > limit,
        "{ser}: {lo} {limit}"
    );
    let a = vec![7u8; lo];
    let mut b = a.clone();
    *b.last_mut().unwrap() = 8;
    let (ea, eb) = (
        encode(ser, &put("big", &a), msg.id),
        encode(ser, &put("big", &b), msg.id),
    );
    let differ: Vec<usize> = (0..ea.len()).filter(|&i| ea[i] != eb[i]).collect();
    assert_eq!(differ.len(), 1, "{ser}: one byte apart");
    assert_eq!(
        rig.call(w, msg, &put("big", &a)).status,
        Status::Ok,
        "{ser} {}",
        ea.len()
    );
    assert_eq!(
        rig.call(w, msg, &put("big", &b)),
        status(Status::BadRequest),
        "{ser}"
    );
    assert_eq!(rig.stored("big"), vec![a], "{ser}");
}

fn socket(port: u16) -> SocketDatapath {
    let mut cfg = SocketConfig::new(localhost(port));
    cfg.gso = false;
    SocketDatapath::new(cfg).unwrap()
}

#[test]
fn over_udp_a_reused_id_is_refused_whatever_the_serialization() {
    for ser in Serialization::ALL {
        let mut rig = Rig::new(socket(0), ser);
        let server = rig.server.datapath().local_addr();
        let mut w = DpWire::new(socket(0), server);
        let ids = ClientIds::with_incarnation(inc(0x5eed_0001));
        a_reused_id_past_the_prefix_is_refused(&mut rig, &mut w, &mut || ids.next(0));
        // An anonymous client (incarnation 0): keyed by its address, refused the same way.
        let mut n = 100;
        let mut anon = || {
            n += 1;
            Msg::new(n, 0)
        };
        a_reused_id_past_the_prefix_is_refused(&mut rig, &mut w, &mut anon);
        let mut rig = Rig::new(socket(0), ser);
        let server = rig.server.datapath().local_addr();
        let mut w = DpWire::new(socket(0), server);
        the_largest_request_differing_in_one_byte_is_refused(&mut rig, &mut w, ids.next(0));
        let s = rig.server.stats();
        assert_eq!(s.malformed, 0, "{ser}: {s}");
    }
}

#[test]
fn over_tcp_a_reused_id_is_refused() {
    for ser in SERS {
        let mut rig = Rig::new(
            TcpDatapath::new(TcpConfig::new(Some(localhost(0)))).unwrap(),
            ser,
        );
        let server = rig.server.datapath().local_addr();
        let mut w = DpWire::new(TcpDatapath::new(TcpConfig::new(None)).unwrap(), server);
        let ids = ClientIds::with_incarnation(inc(0x5eed_0002));
        a_reused_id_past_the_prefix_is_refused(&mut rig, &mut w, &mut || ids.next(0));
        the_largest_request_differing_in_one_byte_is_refused(&mut rig, &mut w, ids.next(0));
    }
}

/// A first process appends token A as its request 1, then a second one "reconnects"
/// (`reconnect` gives a new wire from the same port) with its ids restarting at 1 and appends
/// B, whose request has the same length and first 64 bytes as A's: with another incarnation
/// it is applied; anonymous (`anon`), nothing tells it from the first process but its bytes,
/// and it is refused. Then the first process retries its request 1 after a reconnect: it is
/// answered `OK` with the first outcome and not applied twice.
fn reconnects(
    rig: &mut Rig<impl Datapath>,
    reconnect: &mut dyn FnMut() -> Box<dyn Wire>,
    anon: bool,
) {
    let ser = rig.ser;
    let tok = |c: u8| {
        let mut t = vec![b't'; 100];
        t[99] = c;
        t
    };
    let (a, b) = (append("l", &tok(b'A')), append("l", &tok(b'B')));
    let id1 = |inc: u64| Msg::new(1, 0).with_incarnation(inc);
    let (first, second) = if anon {
        (0, 0)
    } else {
        (0xfeed_0001, 0xfeed_0002)
    };
    let mut w = reconnect();
    assert_eq!(
        rig.call(&mut *w, id1(first), &a).status,
        Status::Ok,
        "{ser}"
    );
    drop(w);
    let mut w = reconnect();
    if anon {
        // An anonymous process on the recycled port restarting its ids: nothing tells it from
        // its predecessor but its bytes; refused, not answered with A's outcome.
        assert_eq!(
            rig.call(&mut *w, id1(second), &b),
            status(Status::BadRequest),
            "{ser}"
        );
        assert_eq!(rig.stored("l"), vec![tok(b'A')], "{ser}");
    } else {
        assert_eq!(
            rig.call(&mut *w, id1(second), &b).status,
            Status::Ok,
            "{ser}"
        );
        assert_eq!(
            rig.stored("l"),
            vec![tok(b'A'), tok(b'B')],
            "{ser}: a new process's write"
        );
    }
    drop(w);
    // The first process again, retrying request 1 after its reconnect.
    let mut w = reconnect();
    let r = rig.call(&mut *w, id1(first), &a);
    assert_eq!(r.status, Status::Ok, "{ser}: the retry is answered");
    let want = if anon {
        vec![tok(b'A')]
    } else {
        vec![tok(b'A'), tok(b'B')]
    };
    assert_eq!(rig.stored("l"), want, "{ser}: and not applied twice");
    assert_eq!(rig.server.stats().app.dedup.hits, 1, "{ser}");
}

#[test]
fn over_udp_a_reconnect_from_the_same_port_is_told_apart_by_incarnation() {
    for ser in SERS {
        for anon in [false, true] {
            let mut rig = Rig::new(socket(0), ser);
            let server = rig.server.datapath().local_addr();
            let port = socket(0).local_addr().port(); // a free port, released at once
            let mut reconnect = || -> Box<dyn Wire> { Box::new(DpWire::new(socket(port), server)) };
            reconnects(&mut rig, &mut reconnect, anon);
        }
    }
}

/// A TCP client bound to a port of its choice (the same one again after a reconnect), sending
/// and receiving stream frames itself.
struct RawTcp {
    s: TcpStream,
    buf: Vec<u8>,
}

impl RawTcp {
    fn connect(port: u16, server: SocketAddrV4) -> RawTcp {
        let s = tcp_from(port, server);
        s.set_nonblocking(true).unwrap();
        s.set_nodelay(true).unwrap();
        RawTcp { s, buf: Vec::new() }
    }
}

impl Wire for RawTcp {
    fn send(&mut self, msg: Msg, bytes: &[u8]) {
        let mut f = vec![0u8; HEADER_LEN];
        write_header(&mut f, msg, bytes.len() as u32);
        f.extend_from_slice(bytes);
        let mut at = 0;
        while at < f.len() {
            match self.s.write(&f[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("send: {e}"),
            }
        }
    }

    fn recv(&mut self) -> Vec<(Msg, Vec<u8>)> {
        let mut chunk = [0u8; 65536];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("receive: {e}"),
            }
        }
        let mut out = Vec::new();
        while self.buf.len() >= HEADER_LEN {
            let (msg, len) = parse_header(&self.buf, 0, usize::MAX).unwrap();
            if self.buf.len() < HEADER_LEN + len {
                break;
            }
            out.push((msg, self.buf[HEADER_LEN..HEADER_LEN + len].to_vec()));
            self.buf.drain(..HEADER_LEN + len);
        }
        out
    }
}

impl Drop for RawTcp {
    fn drop(&mut self) {
        // An abortive close (RST): the port leaves no TIME_WAIT behind and can be bound again.
        linger_zero(&self.s);
    }
}

/// A TCP connection from 127.0.0.1:`port` to `server` (`SO_REUSEADDR`, bound before connect:
/// what `std` cannot do, hence libc).
fn tcp_from(port: u16, server: SocketAddrV4) -> TcpStream {
    use std::os::fd::FromRawFd;
    let sa = |a: SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (local, remote) = (sa(localhost(port)), sa(server));
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let one: libc::c_int = 1;
    // SAFETY: plain socket(2); the descriptor is owned by the TcpStream made below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is ours; the option value is a live c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_REUSEADDR: {}", std::io::Error::last_os_error());
    // SAFETY: `local` is a live sockaddr_in of `len` bytes.
    let r = unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) };
    assert_eq!(
        r,
        0,
        "bind to port {port}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `remote` is a live sockaddr_in of `len` bytes (a blocking connect on loopback).
    let r = unsafe { libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is an open, connected TCP socket that nothing else owns.
    unsafe { TcpStream::from_raw_fd(fd) }
}

fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the stream's descriptor is open; the option value is a live linger struct.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[test]
fn over_tcp_a_reconnect_from_the_same_port_is_told_apart_by_incarnation() {
    for ser in SERS {
        for anon in [false, true] {
            let dp = TcpDatapath::new(TcpConfig::new(Some(localhost(0)))).unwrap();
            let mut rig = Rig::new(dp, ser);
            let server = rig.server.datapath().local_addr();
            let port = std::net::TcpListener::bind(localhost(0))
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut reconnect = || -> Box<dyn Wire> { Box::new(RawTcp::connect(port, server)) };
            reconnects(&mut rig, &mut reconnect, anon);
        }
    }
}

/// `Caller`, the retrying client, takes its ids from the process's identity: a second caller
/// of the process (a reconnect) never reuses the first one's ids, so its writes all apply.
#[test]
fn callers_of_one_process_never_reuse_an_id() {
    for ser in SERS {
        let mut rig = Rig::new(socket(0), ser);
        let server = rig.server.datapath().local_addr();
        let mut appended = 0;
        for _ in 0..2 {
            let mut dp = socket(0);
            let conn = dp.connect(server).unwrap();
            let mut c = Caller::new(dp, conn, ser, RetryPolicy::default());
            assert_eq!(c.ids().incarnation(), ClientIds::process().incarnation());
            for _ in 0..3 {
                let r = c
                    .call(&append("c", &[b'v'; 100]), &mut || {
                        rig.server.poll();
                        std::thread::sleep(Duration::from_micros(200));
                    })
                    .unwrap();
                appended += 1;
                assert_eq!(r.status, Status::Ok, "{ser}");
            }
        }
        assert_eq!(rig.stored("c").len(), appended, "{ser}");
        assert_eq!(rig.refused(), 0);
    }
}
