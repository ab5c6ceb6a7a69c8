//! Every mode's echo is correct end to end over loopback TCP, and the server counts requests
//! it cannot decode instead of answering them.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use app_server::TcpSpec;
use loadgen::{ClientTransport, Response};
use tcp_echo::{verdict_ok, Client, Mode, ServerHandle};

fn start() -> (SocketAddrV4, ServerHandle) {
    let s = tcp_echo::spawn(
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
        &TcpSpec::default(),
        false,
    )
    .unwrap();
    (s.addr(), s)
}

#[test]
fn every_mode_echoes_correct_responses() {
    let (addr, server) = start();
    for mode in Mode::ALL {
        for size in [1, 1024, 5000] {
            let mut c = Client::connect(addr, 3, mode, size, &TcpSpec::default()).unwrap();
            for id in 0..30 {
                c.send_request(id).unwrap();
            }
            let mut got = Vec::new();
            let end = Instant::now() + Duration::from_secs(10);
            while got.len() < 30 {
                assert!(
                    Instant::now() < end,
                    "{mode} {size}: {} responses",
                    got.len()
                );
                c.poll_responses(&mut |r: Response<'_>| {
                    got.push((r.id.unwrap(), verdict_ok(0, r.payload)))
                })
                .unwrap();
            }
            got.sort();
            let want: Vec<(u64, bool)> = (0..30).map(|i| (i, true)).collect();
            assert_eq!(got, want, "{mode} {size}");
        }
    }
    let st = server.stop().unwrap();
    assert_eq!(st.replied, 5 * 3 * 30);
    assert_eq!((st.malformed, st.send_failed, st.io_errors), (0, 0, 0));
}

#[test]
fn requests_that_do_not_decode_are_counted_not_answered() {
    use datapath_tcp::frame::{write_header, HEADER_LEN};
    use std::io::{Read, Write};
    let (addr, server) = start();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut send = |ty: u16, body: &[u8]| {
        let mut f = vec![0u8; HEADER_LEN];
        write_header(&mut f, cornflakes::Msg::new(1, ty), body.len() as u32);
        f.extend_from_slice(body);
        w.write_all(&f).unwrap();
    };
    send(Mode::FLATBUFFERS.msg_type(), &[0xFF; 40]);
    send(Mode::CORNFLAKES.msg_type(), &[0xFF; 40]);
    send(99, b"unknown mode");
    // A correct request after them, on the same connection, is still answered (and, the
    // stream being in order, the bad ones were handled before it).
    send(Mode::Raw.msg_type(), b"ping");
    let mut reply = vec![0u8; HEADER_LEN + 4];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[HEADER_LEN..], b"ping");
    let st = server.stop().unwrap();
    assert_eq!(st.malformed, 3, "{st:?}");
    assert_eq!(st.replied, 1);
}
