//! Every mode echoes every shape correctly, over the in-process loopback NIC and over the
//! kernel socket datapath on 127.0.0.1; every response is deserialized and compared with what
//! was sent. Waits are bounded (a lost reply fails the test instead of hanging it) but nothing
//! is timed.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use cornflakes::Datapath;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};
use datapath_socket::{SocketConfig, SocketDatapath};
use echo::client::{EchoClient, Verifier};
use echo::server::ServerConfig;
use echo::{Mode, Serialization, ShapeSpec};
use loadgen::{request_id, ClientTransport, Response};

/// Shapes covering copy-only, zero-copy-only and mixed objects, more fields than one loopback
/// frame has descriptors (demotion), segmentation over the 1500-byte loopback MTU, and every
/// tree depth.
fn shapes() -> Vec<ShapeSpec> {
    [
        "single-2048",
        "single-100",
        "single-0",
        "list-2x2048",
        "list-4x64",
        "list-12x600",
        "list-1x9000",
        "tree1-600",
        "tree2-1024",
        "tree3-64",
        "tree4-512",
        "tree5-300",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect()
}

fn available_modes() -> Vec<Mode> {
    Mode::ALL.to_vec()
}

/// Sends requests `0..n` one at a time and checks each reply; `pump` drives the server side
/// (the loopback server runs on this thread). Returns the number verified.
fn closed_loop<D: Datapath>(
    client: &mut EchoClient<D>,
    verifier: &Verifier,
    n: u64,
    first_seq: u64,
    pump: &mut dyn FnMut(),
) -> u64 {
    let mut verified = 0;
    for seq in first_seq..first_seq + n {
        let id = request_id(0, seq);
        client.send_request(id).expect("send");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got: Option<bool> = None;
        while got.is_none() {
            assert!(
                Instant::now() < deadline,
                "no reply to request {seq}; client datapath {:?}",
                client.datapath().counters()
            );
            pump();
            client
                .poll_responses(&mut |r: Response<'_>| {
                    assert_eq!(r.id, Some(id), "reply to another request");
                    got = Some(verifier.check(id, r.payload));
                })
                .expect("poll");
        }
        if got == Some(true) {
            verified += 1;
        }
    }
    verified
}

fn loopback_pair() -> (Loopback, Loopback, SocketAddrV4) {
    let mac_c = MacAddr([2, 0, 0, 0, 0, 1]);
    let mac_s = MacAddr([2, 0, 0, 0, 0, 2]);
    let ac = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 5000);
    let as_ = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);
    let mut c = StackConfig::new(mac_c, ac);
    let mut s = StackConfig::new(mac_s, as_);
    c.static_arp.push((*as_.ip(), mac_s));
    s.static_arp.push((*ac.ip(), mac_c));
    let (c, s) = Loopback::pair(LoopbackConfig::new(c), LoopbackConfig::new(s)).unwrap();
    (c, s, as_)
}

#[test]
fn every_mode_echoes_every_shape_over_loopback() {
    for mode in available_modes() {
        for spec in shapes() {
            let (c, s, server_addr) = loopback_pair();
            let mut server = echo::server::new(
                s,
                ServerConfig {
                    mode,
                    threshold: 512,
                },
            )
            .unwrap();
            let mut client = EchoClient::new(c, server_addr, 0, mode, spec).unwrap();
            let verifier = Verifier::new(mode, spec).unwrap();
            let n = 6;
            let ok = closed_loop(&mut client, &verifier, n, 0, &mut || {
                server.poll();
            });
            assert_eq!(ok, n, "{mode} {spec}: {} of {n} replies verified", ok);
            let st = server.stats();
            assert_eq!(
                (st.received, st.replied, st.malformed),
                (n, n, 0),
                "{mode} {spec}: {st}"
            );
        }
    }
}

#[test]
fn every_mode_echoes_every_shape_over_udp_sockets() {
    for mode in available_modes() {
        // Jumbo frames (one datagram per message, as in the bench), then the default 1500-byte
        // MTU, where larger messages and replies are segmented and reassembled. Both ends use
        // the same MTU, as on a real link.
        for mtu in [9000, 1500] {
            let mut sc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
            sc.mtu = mtu;
            let cfg = ServerConfig {
                mode,
                threshold: 512,
            };
            let server = echo::server::spawn(cfg, sc, None, false).unwrap();
            let mut sent = 0;
            for spec in shapes() {
                let mut cc = SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
                cc.mtu = mtu;
                let dp = SocketDatapath::new(cc).unwrap();
                let mut client = EchoClient::new(dp, server.addr(), 0, mode, spec).unwrap();
                let verifier = Verifier::new(mode, spec).unwrap();
                let n = 5;
                let ok = closed_loop(&mut client, &verifier, n, 100, &mut || {});
                assert_eq!(
                    ok, n,
                    "{mode} {spec} MTU {mtu}: {ok} of {n} replies verified"
                );
                sent += n;
            }
            let st = server.stop().unwrap();
            assert_eq!(
                (st.received, st.replied, st.malformed),
                (sent, sent, 0),
                "{mode}: {st}"
            );
        }
    }
}

#[test]
fn a_response_from_another_mode_does_not_verify() {
    // The checkers really look at the bytes: a correct reply in one format fails in another,
    // and a reply to another request fails.
    let spec: ShapeSpec = "list-2x600".parse().unwrap();
    let (c, s, addr) = loopback_pair();
    let mut server = echo::server::new(
        s,
        ServerConfig {
            mode: Mode::Shared(Serialization::CORNFLAKES),
            threshold: 512,
        },
    )
    .unwrap();
    let mut client =
        EchoClient::new(c, addr, 0, Mode::Shared(Serialization::CORNFLAKES), spec).unwrap();
    let id = request_id(0, 3);
    client.send_request(id).unwrap();
    let mut reply = None;
    for _ in 0..1000 {
        server.poll();
        client
            .poll_responses(&mut |r: Response<'_>| reply = Some(r.payload.to_vec()))
            .unwrap();
        if reply.is_some() {
            break;
        }
    }
    let reply = reply.expect("reply");
    assert!(Verifier::new(Mode::Shared(Serialization::CORNFLAKES), spec)
        .unwrap()
        .check(id, &reply));
    assert!(
        !Verifier::new(Mode::Shared(Serialization::CORNFLAKES), spec)
            .unwrap()
            .check(request_id(0, 4), &reply)
    );
    assert!(!Verifier::new(Mode::OneCopy, spec)
        .unwrap()
        .check(id, &reply));
    let other: ShapeSpec = "list-3x600".parse().unwrap();
    assert!(
        !Verifier::new(Mode::Shared(Serialization::CORNFLAKES), other)
            .unwrap()
            .check(id, &reply)
    );
    let mut cut = reply.clone();
    cut.pop();
    assert!(
        !Verifier::new(Mode::Shared(Serialization::CORNFLAKES), spec)
            .unwrap()
            .check(id, &cut)
    );
}
