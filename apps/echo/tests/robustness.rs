//! The server survives whatever arrives on its UDP port: garbage is counted (by the datapath
//! when the framing is bad, by the server when the message is not its format) and valid
//! requests are still answered afterwards.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use cornflakes::Msg;
use cornflakes_stack::wire::framing;
use datapath_socket::{SocketConfig, SocketDatapath};
use echo::client::{EchoClient, Verifier};
use echo::server::{ServerConfig, ServerHandle};
use echo::shape::Kind;
use echo::{Mode, ShapeSpec};
use loadgen::{request_id, ClientTransport, Response};

/// Both ends' IP MTU.
const MTU: usize = 9000;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A datagram with a valid single-frame framing header around `payload`.
fn framed(id: u32, ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; framing::HEADER_LEN + payload.len()];
    framing::Repr::single(Msg::new(id, ty), payload.len() as u32).emit(&mut d);
    d[framing::HEADER_LEN..].copy_from_slice(payload);
    d
}

fn start(mode: Mode) -> ServerHandle {
    let mut sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    sc.mtu = MTU;
    echo::server::spawn(
        ServerConfig {
            mode,
            threshold: 512,
        },
        sc,
        None,
        false,
    )
    .unwrap()
}

/// One valid request of `spec` is answered correctly.
fn still_answers(server: &ServerHandle, mode: Mode, spec: ShapeSpec) {
    let mut cc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    cc.mtu = MTU;
    let dp = SocketDatapath::new(cc).unwrap();
    let mut client = EchoClient::new(dp, server.addr(), 0, mode, spec).unwrap();
    let verifier = Verifier::new(mode, spec).unwrap();
    let id = request_id(0, 42);
    client.send_request(id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ok = None;
    while ok.is_none() {
        assert!(
            Instant::now() < deadline,
            "{mode}: no reply after the garbage"
        );
        client
            .poll_responses(&mut |r: Response<'_>| ok = Some(verifier.check(id, r.payload)))
            .unwrap();
    }
    assert_eq!(
        ok,
        Some(true),
        "{mode}: reply after the garbage did not verify"
    );
}

/// Waits (bounded) until the server has handled everything sent before: a valid request sent
/// now is answered only after the datagrams queued ahead of it.
fn sync(server: &ServerHandle, mode: Mode) {
    still_answers(server, mode, "list-2x600".parse().unwrap());
}

#[test]
fn malformed_requests_are_counted_and_the_server_survives() {
    for mode in Mode::ALL.into_iter().filter(|m| *m != Mode::Raw) {
        let server = start(mode);
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let to = server.addr();
        let mut rng = Rng(0x1234_5678 ^ mode.name().len() as u64);
        // Framing the datapath rejects: nothing reaches the server.
        sock.send_to(&[], to).unwrap();
        sock.send_to(&[1, 2, 3], to).unwrap();
        let mut junk = rng.bytes(300);
        junk[0] = 0xee; // not the framing version
        sock.send_to(&junk, to).unwrap();
        // Unknown message types.
        sock.send_to(&framed(1, 0, b"hello"), to).unwrap();
        sock.send_to(&framed(2, 999, &rng.bytes(64)), to).unwrap();
        let mut sure_malformed = 2;
        // A list message whose count is absurd, in the hand-written format; a Cornflakes
        // header claiming a huge bitmap; truncations of a real request.
        sock.send_to(&framed(3, Kind::List.msg_type(), &[0xff; 16]), to)
            .unwrap();
        sure_malformed += 1;
        // Random payloads under every valid type: most are malformed, some may parse; either
        // way the server must keep going. Batches of 20, each followed by a valid request
        // whose reply shows the batch was consumed (so no socket buffer overflows).
        let mut valid = 0;
        for i in 0..200u32 {
            let ty = [1u16, 2, 11, 12, 13, 14, 15][i as usize % 7];
            let len = (rng.next() % 600) as usize + 1;
            sock.send_to(&framed(100 + i, ty, &rng.bytes(len)), to)
                .unwrap();
            if i % 20 == 19 {
                sync(&server, mode);
                valid += 1;
            }
        }
        still_answers(&server, mode, "tree3-64".parse().unwrap());
        still_answers(&server, mode, "single-2048".parse().unwrap());
        valid += 2;
        let st = server.stop().unwrap();
        assert!(st.malformed >= sure_malformed, "{mode}: {st}");
        assert_eq!(
            st.received,
            st.replied + st.malformed + st.send_failed,
            "{mode}: {st}"
        );
        assert!(st.datapath.total_drops() >= 3, "{mode}: {st}");
        assert_eq!(st.received, 2 + 1 + 200 + valid, "{mode}: {st}");
    }
}

#[test]
fn raw_mode_echoes_anything_framed() {
    let server = start(Mode::Raw);
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let d = framed(7, 999, b"not a message of any format");
    sock.send_to(&d, server.addr()).unwrap();
    let mut buf = [0u8; 256];
    let (n, _) = sock.recv_from(&mut buf).expect("raw echo");
    assert_eq!(&buf[framing::HEADER_LEN..n], b"not a message of any format");
    let st = server.stop().unwrap();
    assert_eq!((st.received, st.replied, st.malformed), (1, 1, 0));
}
