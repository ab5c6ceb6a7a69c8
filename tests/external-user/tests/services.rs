//! The crate's service end to end over the kernel UDP datapath: the generated dispatcher on
//! the server skeleton in one thread, the generated client in the test, as a user writes them.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use cornflakes::datapath::{Connect, DatapathMemory};
use cornflakes::{Arena, CFBytes, CFString};
use cornflakes_rpc::{CallError, Cornflakes, Dispatcher, ErrorCode, RetryPolicy, Server};
use datapath_socket::{SocketConfig, SocketDatapath};
use external_user::greet::{GreeterClient, GreeterMethod, GreeterReply, GreeterServer, Hello};
use external_user::Greeter;

/// Serves `greet.Greeter` on an ephemeral port of 127.0.0.1 until `stop`; sends the address.
fn serve(stop: Arc<AtomicBool>, addr: mpsc::Sender<SocketAddrV4>) {
    let dp =
        SocketDatapath::new(SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))).unwrap();
    let rt = Dispatcher::new(dp.memory(), Cornflakes::Hybrid, 512);
    let mut server = Server::new(dp, GreeterServer::new(Greeter::default(), rt));
    addr.send(server.datapath().local_addr()).unwrap();
    server.run(&stop, None, 64, &mut |_| std::thread::yield_now());
}

fn hello<'a>(arena: &'a Arena, name: &str, photo: &[u8]) -> Hello<'a> {
    let mut h = Hello::new_in(arena);
    h.set_name(CFString::new(name, arena));
    h.set_photo(CFBytes::new(photo, arena));
    h
}

#[test]
fn the_service_answers_calls_and_open_loop_requests_over_udp() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let server = std::thread::spawn(move || serve(s, tx));
    let addr = rx.recv().unwrap();

    let mut dp =
        SocketDatapath::new(SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))).unwrap();
    let conn = dp.connect(addr).unwrap();
    // Patient: `greet` counts visits and is not run exactly once, so a retry would count twice.
    let policy = RetryPolicy {
        timeout: std::time::Duration::from_secs(2),
        tries: 3,
    };
    let mut client = GreeterClient::new(dp, conn, policy);
    let arena = Arena::new();
    let photo = vec![7u8; 3000];

    // Closed loop: the reply read in place.
    let r = client.greet(&hello(&arena, "ada", &photo)).unwrap();
    let g = r.view().unwrap();
    assert_eq!(g.get_text().unwrap(), "hello, ada");
    assert_eq!(g.get_photo().unwrap(), &photo[..]);
    assert_eq!(g.get_visits(), 1);
    assert_eq!(GreeterMethod::Visits.id(), 7);
    let v = client.visits(&hello(&arena, "", b"")).unwrap();
    assert_eq!(v.view().unwrap().get_visits(), 1);

    // Open loop: ids back with their replies.
    let mut sent = Vec::new();
    for i in 0..10 {
        sent.push(
            client
                .send_greet(&hello(&arena, &format!("v{i}"), b"x"))
                .unwrap(),
        );
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        client.poll(|id, r| match r {
            Ok(GreeterReply::Greet(g)) => got.push((id, g.get_text().unwrap().to_owned())),
            other => panic!("{id}: {:?}", other.err()),
        });
    }
    got.sort();
    let want: Vec<(u32, String)> = sent
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, format!("hello, v{i}")))
        .collect();
    assert_eq!(got, want);

    // A method the service does not have: the error reply.
    match client.inner_mut().call(3, &hello(&arena, "x", b"")) {
        Err(CallError::Refused(e)) => assert_eq!((e.code, e.method), (ErrorCode::UnknownMethod, 3)),
        r => panic!("{r:?}"),
    }
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
}

/// A user's service pulls in the runtime it needs and nothing of the repository's load
/// generator, baselines or launchers.
#[test]
fn a_service_does_not_pull_in_the_benchmark_crates() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock next to Cargo.toml");
    assert!(lock.contains("name = \"cornflakes-rpc\""));
    for dep in [
        "loadgen",
        "baselines",
        "nic-server",
        "app-server",
        "bench-client",
    ] {
        assert!(
            !lock.contains(&format!("name = \"{dep}\"")),
            "{dep} is in a user's lock file"
        );
    }
}
