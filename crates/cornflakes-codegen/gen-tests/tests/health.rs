//! gRPC's health service (`grpc.health.v1.Health`, vendored unchanged in the corpus) generated,
//! served and called end to end over the kernel UDP datapath: `Check` answers each service's
//! status, `List` all of them (a map in the reply), and `Watch`, which streams its replies,
//! was left out with a warning naming it.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use cornflakes::datapath::{Connect, DatapathMemory};
use cornflakes::{Arena, CFString, Datapath};
use cornflakes_codegen_tests::grpc::health::v1::health_check_response::ServingStatus;
use cornflakes_codegen_tests::grpc::health::v1::{
    Health, HealthCheckRequest, HealthCheckRequestView, HealthCheckResponse, HealthClient,
    HealthListRequest, HealthListRequestView, HealthListResponse, HealthMethod, HealthServer,
};
use cornflakes_rpc::{Cornflakes, Dispatcher, Replied, Reply, RetryPolicy, Server, Unanswered};
use datapath_socket::{SocketConfig, SocketDatapath};

/// The statuses of the services a server runs; `""` is the server as a whole.
struct Statuses(HashMap<String, ServingStatus>);

impl Health for Statuses {
    fn check<'r, D: Datapath>(
        &'r mut self,
        req: HealthCheckRequestView<'r>,
        reply: Reply<'r, D, HealthCheckResponse<'r>>,
    ) -> Result<Replied, Unanswered> {
        // gRPC fails the call with NOT_FOUND for an unknown service; a Cornflakes reply has
        // no call status, so it says SERVICE_UNKNOWN.
        let status = self
            .0
            .get(req.get_service()?)
            .copied()
            .unwrap_or(ServingStatus::ServiceUnknown);
        let mut r = HealthCheckResponse::new_in(reply.arena());
        r.set_status(status);
        reply.send(&r)
    }

    fn list<'r, D: Datapath>(
        &'r mut self,
        _req: HealthListRequestView<'r>,
        reply: Reply<'r, D, HealthListResponse<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut r = HealthListResponse::new_in(reply.arena());
        for (service, &status) in &self.0 {
            let mut s = HealthCheckResponse::new_in(reply.arena());
            s.set_status(status);
            r.insert_statuses(service, s);
        }
        reply.send(&r)
    }
}

#[test]
fn watch_was_left_out_with_a_warning_naming_it() {
    let warnings = include_str!(concat!(env!("OUT_DIR"), "/health.warnings"));
    let lines: Vec<&str> = warnings.lines().collect();
    assert_eq!(lines.len(), 1, "{warnings}");
    assert!(
        lines[0].contains("health.proto:")
            && lines[0].contains("streaming rpc `grpc.health.v1.Health.Watch`"),
        "{warnings}"
    );
    assert_eq!(HealthMethod::ALL, [HealthMethod::Check, HealthMethod::List]);
    // Numbered by declaration order.
    assert_eq!((HealthMethod::Check.id(), HealthMethod::List.id()), (1, 2));
}

#[test]
fn check_and_list_are_served_and_called_over_udp() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let server = std::thread::spawn(move || {
        let dp = SocketDatapath::new(SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)))
            .unwrap();
        let rt = Dispatcher::new(dp.memory(), Cornflakes::Hybrid, 512);
        let statuses = Statuses(HashMap::from([
            (String::new(), ServingStatus::Serving),
            ("kv".to_owned(), ServingStatus::NotServing),
        ]));
        let mut server = Server::new(dp, HealthServer::new(statuses, rt));
        tx.send(server.datapath().local_addr()).unwrap();
        server.run(&s, None, 64, &mut |_| std::thread::yield_now());
        server.stats()
    });
    let addr = rx.recv().unwrap();
    let mut dp =
        SocketDatapath::new(SocketConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))).unwrap();
    let conn = dp.connect(addr).unwrap();
    let policy = RetryPolicy {
        timeout: Duration::from_millis(500),
        tries: 4,
    };
    let mut client = HealthClient::new(dp, conn, policy);
    let arena = Arena::new();
    for (service, want) in [
        ("", ServingStatus::Serving),
        ("kv", ServingStatus::NotServing),
        ("nope", ServingStatus::ServiceUnknown),
    ] {
        let mut req = HealthCheckRequest::new_in(&arena);
        req.set_service(CFString::new(service, &arena));
        let r = client.check(&req).unwrap();
        assert_eq!(r.view().unwrap().get_status(), Ok(want), "{service:?}");
    }
    let r = client.list(&HealthListRequest::new_in(&arena)).unwrap();
    let list = r.view().unwrap().to_object_in(&arena).unwrap();
    let mut listed: Vec<(String, ServingStatus)> = list
        .get_statuses()
        .iter()
        .map(|e| {
            let status = e.get_value().expect("every entry has a value").get_status();
            (e.get_key().as_str().unwrap().to_owned(), status.unwrap())
        })
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            (String::new(), ServingStatus::Serving),
            ("kv".to_owned(), ServingStatus::NotServing)
        ]
    );
    stop.store(true, Ordering::Relaxed);
    let stats = server.join().unwrap();
    assert_eq!(stats.malformed, 0);
    assert!(stats.replied >= 4, "{stats}");
}
