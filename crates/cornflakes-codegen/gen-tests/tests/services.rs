//! A generated service end to end over the in-process loopback NIC: the generated dispatcher
//! serves a `Store` implementation, the generated client calls it (closed loop, with retries)
//! and drives it open loop, in every Cornflakes configuration; unknown methods, malformed
//! requests, replies too large for the datapath and full or timed-out open-loop tables.

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{CFBytes, CFPtr, Datapath, RxMsg};
use cornflakes_codegen_tests::rpc::{
    Blob, BlobView, Store, StoreClient, StoreMethod, StoreReply, StoreServer, Sum, SumView,
};
use cornflakes_rpc::{
    CallError, Cornflakes, Dispatcher, ErrorCode, Handler, Interleaved, Kept, Replied, Reply,
    RetryPolicy, Unanswered,
};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

/// The service: answers from the request and from a large buffer it holds, and counts the
/// requests of its exactly-once methods it ran.
struct Impl {
    big: Vec<u8>,
    runs: u64,
}

impl Store for Impl {
    fn echo<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut b = Blob::new_in(reply.arena());
        b.set_id(req.get_id());
        b.set_data(reply.bytes(req.get_data()?));
        b.set_note(reply.string(req.get_note()?));
        reply.send(&b)
    }

    fn measure<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>>,
    ) -> Result<Replied, Unanswered> {
        let data = req.get_data()?;
        let mut s = Sum::new_in(reply.arena());
        s.set_id(req.get_id());
        s.set_total(data.iter().map(|&b| u64::from(b)).sum());
        s.set_len(data.len() as u32);
        reply.send(&s)
    }

    fn fetch<'r, D: Datapath>(
        &'r mut self,
        req: SumView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        let len = (req.get_len() as usize).min(self.big.len());
        let mut b = Blob::new_in(reply.arena());
        b.set_id(req.get_id());
        // Borrowed from the service for the call: copied into the packet at send time.
        b.set_data(CFBytes(CFPtr::borrowed(&self.big[..len])));
        let id = req.get_id();
        reply.send_or(&b, |arena| {
            let mut t = Blob::new_in(arena);
            t.set_id(id);
            t.set_note(cornflakes::CFString::new("too large", arena));
            t
        })
    }

    fn count<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>, Kept<'r>>,
    ) -> Result<Replied, Unanswered> {
        self.runs += 1;
        let mut s = Sum::new_in(reply.arena());
        s.set_id(req.get_id());
        s.set_total(self.runs);
        reply.send(&s)
    }

    fn take<'r, D: Datapath>(
        &'r mut self,
        req: SumView<'r>,
        reply: Reply<'r, D, Blob<'r>, Kept<'r>>,
    ) -> Result<Replied, Unanswered> {
        self.runs += 1;
        let len = (req.get_len() as usize).min(self.big.len());
        let mut b = Blob::new_in(reply.arena());
        b.set_id(req.get_id());
        b.set_data(CFBytes(CFPtr::borrowed(&self.big[..len])));
        reply.send(&b)
    }
}

/// The server end: its datapath, the generated dispatcher, what became of each request.
struct ServerSide {
    dp: Loopback,
    server: StoreServer<Impl>,
    rx: Vec<RxMsg>,
    malformed: u64,
    /// While false, requests are received and dropped (a server that does not answer).
    answering: bool,
    /// The framing headers of the requests dropped so.
    dropped: Vec<cornflakes::Msg>,
}

impl ServerSide {
    fn poll(&mut self) {
        self.rx.clear();
        let _ = self.dp.recv_burst(&mut self.rx);
        for m in self.rx.drain(..) {
            if !self.answering {
                self.dropped.push(m.msg);
                continue;
            }
            match self.server.handle(&mut self.dp, &m) {
                Ok(()) => {}
                Err(Unanswered::Malformed(_)) => self.malformed += 1,
                Err(Unanswered::Send(e)) => panic!("reply not sent: {e}"),
            }
        }
        let _ = self.dp.flush();
        self.dp.poll_completions();
    }
}

type Client = StoreClient<Interleaved<Loopback, Box<dyn FnMut()>>>;

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// A server in configuration `mode` (hybrid threshold 512) and a client whose every receive
/// first lets the server run.
fn pair(mode: Cornflakes, policy: RetryPolicy) -> (Client, Rc<RefCell<ServerSide>>) {
    pair_losing(mode, policy, 0.0)
}

/// [`pair`] whose client end loses `loss` of the frames it receives (the replies).
fn pair_losing(
    mode: Cornflakes,
    policy: RetryPolicy,
    loss: f64,
) -> (Client, Rc<RefCell<ServerSide>>) {
    let cfg =
        |mac, addr| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, mac]), addr));
    let mut client_end = cfg(2, CLIENT);
    client_end.faults = datapath_loopback::Faults {
        loss,
        duplicate: 0.0,
        seed: 11,
    };
    let (a, mut b) = Loopback::pair(cfg(1, SERVER), client_end).unwrap();
    let rt = Dispatcher::new(a.memory(), mode, 512);
    let side = Rc::new(RefCell::new(ServerSide {
        dp: a,
        server: StoreServer::new(
            Impl {
                big: (0..100_000u32).map(|i| i as u8).collect(),
                runs: 0,
            },
            rt,
        ),
        rx: Vec::new(),
        malformed: 0,
        answering: true,
        dropped: Vec::new(),
    }));
    let conn = b.connect(SERVER).unwrap();
    // Address resolution: the server answers the client's ARP request.
    side.borrow_mut().poll();
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).unwrap();
    let s = side.clone();
    let before: Box<dyn FnMut()> = Box::new(move || s.borrow_mut().poll());
    (
        StoreClient::new(Interleaved::new(b, before), conn, policy),
        side,
    )
}

fn blob<'a>(arena: &'a cornflakes::Arena, id: u32, data: &[u8], note: &str) -> Blob<'a> {
    let mut b = Blob::new_in(arena);
    b.set_id(id);
    b.set_data(CFBytes::new(data, arena));
    b.set_note(cornflakes::CFString::new(note, arena));
    b
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        timeout: Duration::from_millis(20),
        tries: 3,
    }
}

#[test]
fn every_configuration_answers_calls_with_the_methods_replies() {
    for mode in Cornflakes::ALL {
        let (mut client, side) = pair(mode, quick());
        let arena = cornflakes::Arena::new();
        for len in [0usize, 10, 511, 512, 1000, 4000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let req = blob(&arena, len as u32, &data, "n");
            let echoed = client.echo(&req).unwrap();
            let v = echoed.view().unwrap();
            assert_eq!(v.get_id(), len as u32, "{mode:?}");
            assert_eq!(v.get_data().unwrap(), &data[..], "{mode:?} {len}");
            assert_eq!(v.get_note().unwrap(), "n");
            let sum = client.measure(&req).unwrap();
            let s = sum.view().unwrap();
            assert_eq!(s.get_len() as usize, len);
            assert_eq!(
                s.get_total(),
                data.iter().map(|&b| u64::from(b)).sum::<u64>()
            );
        }
        let stats = client.inner().stats();
        assert_eq!((stats.calls, stats.retries, stats.timed_out), (12, 0, 0));
        assert_eq!(side.borrow().server.counters().unknown_methods, 0);
    }
}

#[test]
fn method_numbers_are_the_schemas() {
    assert_eq!(StoreMethod::Echo.id(), 1);
    assert_eq!(StoreMethod::Measure.id(), 11);
    assert_eq!(StoreMethod::Fetch.id(), 3);
    assert_eq!(StoreMethod::from_id(11), Some(StoreMethod::Measure));
    assert_eq!(StoreMethod::from_id(2), None);
    assert_eq!(StoreMethod::Fetch.name(), "rpc.Store.Fetch");
    assert_eq!(StoreServer::<Impl>::SERVICE, "rpc.Store");
}

#[test]
fn an_unknown_method_gets_an_error_reply_and_is_counted() {
    let (mut client, side) = pair(Cornflakes::Hybrid, quick());
    let arena = cornflakes::Arena::new();
    let req = blob(&arena, 1, b"x", "");
    for ty in [2u16, 99, 65535] {
        match client.inner_mut().call(ty, &req) {
            Err(CallError::Refused(e)) => {
                assert_eq!((e.code, e.method), (ErrorCode::UnknownMethod, ty));
            }
            r => panic!("type {ty}: {r:?}"),
        }
    }
    assert_eq!(side.borrow().server.counters().unknown_methods, 3);
    assert_eq!(client.inner().stats().refused, 3);
    // The server still answers.
    assert_eq!(client.echo(&req).unwrap().view().unwrap().get_id(), 1);
}

#[test]
fn a_malformed_request_is_refused_counted_and_unanswered() {
    let (mut client, side) = pair(Cornflakes::Hybrid, quick());
    for bad in [
        &b""[..],
        b"\x01\x00\x00\x00",
        b"\xff\xff\xff\xff\x00\x00\x00\x00",
    ] {
        match client.inner_mut().call_bytes(StoreMethod::Echo.id(), bad) {
            Err(CallError::TimedOut) => {}
            r => panic!("{bad:?}: {r:?}"),
        }
    }
    // Each try of each request refused, none answered.
    assert_eq!(side.borrow().malformed, 9);
    // A request whose header opens but whose field does not read is refused when the method
    // reads it: `data` (len 100) points past the end.
    let mut bad = vec![0u8; 20];
    bad[0] = 1;
    bad[4] = 0b10;
    bad[8..12].copy_from_slice(&100u32.to_le_bytes());
    bad[12..16].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(
        client
            .inner_mut()
            .call_bytes(StoreMethod::Measure.id(), &bad),
        Err(CallError::TimedOut)
    ));
    assert_eq!(side.borrow().malformed, 12);
    let arena = cornflakes::Arena::new();
    assert!(client.measure(&blob(&arena, 5, b"ok", "")).is_ok());
}

#[test]
fn a_reply_too_large_for_the_datapath_is_replaced() {
    let (mut client, _side) = pair(Cornflakes::Hybrid, quick());
    let arena = cornflakes::Arena::new();
    let ask = |len: u32| {
        let mut s = Sum::new_in(&arena);
        s.set_id(len);
        s.set_len(len);
        s
    };
    let fits = client.fetch(&ask(3000)).unwrap();
    let v = fits.view().unwrap();
    assert_eq!(v.get_data().unwrap().len(), 3000);
    assert_eq!(v.get_note().unwrap(), "");
    let big = client.fetch(&ask(100_000)).unwrap();
    let v = big.view().unwrap();
    assert_eq!((v.get_id(), v.get_note().unwrap()), (100_000, "too large"));
    assert!(!v.has_data());
}

#[test]
fn a_lost_request_is_sent_again_under_the_same_id() {
    let (mut client, side) = pair(Cornflakes::Hybrid, quick());
    let arena = cornflakes::Arena::new();
    side.borrow_mut().answering = false;
    assert!(matches!(
        client.echo(&blob(&arena, 1, b"a", "")),
        Err(CallError::TimedOut)
    ));
    assert_eq!(client.inner().stats().retries, 2);
    // Every try under one incarnation and id: the client's.
    let tries = side.borrow().dropped.clone();
    assert_eq!(tries.len(), 3);
    assert!(tries.iter().all(|m| *m == tries[0]), "{tries:?}");
    assert_ne!(tries[0].incarnation, 0);
    assert_eq!(tries[0].incarnation, client.inner().ids().incarnation());
    side.borrow_mut().answering = true;
    assert!(client.echo(&blob(&arena, 2, b"b", "")).is_ok());
}

#[test]
fn the_open_loop_interface_matches_replies_to_ids_and_bounds_the_table() {
    let (client, side) = pair(Cornflakes::Hybrid, quick());
    // An identity of its own: ids without gaps, so the table of 4 fills at the fifth.
    let mut client = StoreClient::from_client(
        cornflakes_rpc::Client::with_capacity(
            client.into_inner().into_datapath(),
            cornflakes::ConnId(0),
            quick(),
            4,
        )
        .with_ids(cornflakes_rpc::ClientIds::fresh()),
    );
    // The loopback's first connection is 0 (the only one the client made).
    let arena = cornflakes::Arena::new();
    let mut ids = Vec::new();
    for i in 0..4u32 {
        let req = blob(&arena, i, &[i as u8; 3], "");
        ids.push(if i % 2 == 0 {
            client.send_echo(&req).unwrap()
        } else {
            client.send_measure(&req).unwrap()
        });
    }
    assert!(matches!(
        client.send_echo(&blob(&arena, 9, b"", "")),
        Err(CallError::Full)
    ));
    let mut got = Vec::new();
    while got.len() < 4 {
        client.poll(|id, r| match r.unwrap() {
            StoreReply::Echo(v) => got.push((id, v.get_id(), v.get_data().unwrap().to_vec())),
            StoreReply::Measure(v) => got.push((id, v.get_id(), vec![v.get_total() as u8])),
            _ => panic!("only echo and measure were sent"),
        });
    }
    got.sort();
    assert_eq!(
        got,
        [
            (ids[0], 0, vec![0, 0, 0]),
            (ids[1], 1, vec![3]),
            (ids[2], 2, vec![2, 2, 2]),
            (ids[3], 3, vec![9]),
        ]
    );
    assert_eq!(client.inner().outstanding(), 0);
    // A server that does not answer: the requests time out, and the table empties.
    side.borrow_mut().answering = false;
    let id = client.send_echo(&blob(&arena, 7, b"", "")).unwrap();
    let mut timed_out = Vec::new();
    let start = std::time::Instant::now();
    while timed_out.is_empty() && start.elapsed() < Duration::from_secs(5) {
        client.poll(|id, r| {
            assert!(matches!(r, Err(CallError::TimedOut)));
            timed_out.push(id);
        });
    }
    assert_eq!(timed_out, [id]);
    assert_eq!(client.inner().outstanding(), 0);
    assert_eq!(client.inner().stats().timed_out, 1);
}

/// The request enum: a request of any method, sent through the client without waiting or on
/// the datapath under any framing header (its type is set to the method's), answered by that
/// method; its encoding is the message's.
#[test]
fn the_request_enum_sends_each_method_its_request() {
    use cornflakes_codegen_tests::rpc::StoreCall;
    let (mut client, _side) = pair(Cornflakes::Hybrid, quick());
    let arena = cornflakes::Arena::new();
    let mut sum = Sum::new_in(&arena);
    sum.set_id(5);
    sum.set_len(3);
    let reqs = [
        StoreCall::Echo(blob(&arena, 1, b"abc", "e")),
        StoreCall::Measure(blob(&arena, 2, &[1, 2, 3], "")),
        StoreCall::Fetch(sum),
    ];
    let methods: Vec<StoreMethod> = reqs.iter().map(StoreCall::method).collect();
    assert_eq!(
        methods,
        [StoreMethod::Echo, StoreMethod::Measure, StoreMethod::Fetch]
    );
    assert_eq!(
        reqs[0].serialize_to_vec(),
        cornflakes::CornflakesObj::serialize_to_vec(&blob(&arena, 1, b"abc", "e"))
    );
    let mut sent = Vec::new();
    for r in &reqs {
        sent.push((r.send_with(&mut client).unwrap(), r.method()));
    }
    let mut got = Vec::new();
    while got.len() < reqs.len() {
        client.poll(|id, r| {
            let r = r.unwrap();
            assert!(!r.bytes().is_empty());
            got.push((
                id,
                StoreMethod::from_id(match r {
                    StoreReply::Echo(v) => {
                        assert_eq!(v.get_data().unwrap(), b"abc");
                        StoreMethod::Echo.id()
                    }
                    StoreReply::Measure(v) => {
                        assert_eq!(v.get_total(), 6);
                        StoreMethod::Measure.id()
                    }
                    StoreReply::Fetch(v) => {
                        assert_eq!(v.get_data().unwrap().len(), 3);
                        StoreMethod::Fetch.id()
                    }
                    _ => panic!("only echo, measure and fetch were sent"),
                })
                .unwrap(),
            ));
        });
    }
    got.sort_by_key(|g| g.0);
    assert_eq!(got, sent);
    // On the datapath, under a header of another method's type: the request's method answers.
    let conn = client.inner().conn();
    let wrong = cornflakes::Msg::new(77, StoreMethod::Echo.id());
    let dp = client.inner_mut().datapath_mut();
    reqs[1].send(dp, conn, wrong).unwrap();
    dp.flush().unwrap();
    let mut rx = Vec::new();
    for _ in 0..4 {
        dp.recv_burst(&mut rx).unwrap();
    }
    assert_eq!(rx.len(), 1);
    assert_eq!(
        (rx[0].msg.id, rx[0].msg.ty),
        (77, StoreMethod::Measure.id())
    );
}

/// Whatever bytes arrive under whatever message type, the dispatcher answers, refuses as
/// malformed, or sends the error reply; it never panics, and it counts every unknown type.
#[test]
fn random_requests_are_answered_refused_or_counted_never_a_panic() {
    use rand::{Rng, SeedableRng};
    let (mut client, side) = pair(Cornflakes::Hybrid, quick());
    let arena = cornflakes::Arena::new();
    // A real request first: the server's connection to the client, resolved.
    client.echo(&blob(&arena, 1, b"x", "n")).unwrap();
    let valid: Vec<Vec<u8>> = [0usize, 7, 600]
        .iter()
        .map(|&n| {
            let b = blob(&arena, 9, &vec![3u8; n], "note");
            cornflakes::CornflakesObj::serialize_to_vec(&b)
        })
        .collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(25);
    let conn = cornflakes::ConnId(0);
    let (mut answered, mut malformed, mut unknown) = (0u64, 0u64, 0u64);
    let mut drained = Vec::new();
    for i in 0..20_000u32 {
        let ty = match rng.gen_range(0..4) {
            0 => 1,
            1 => 11,
            2 => 3,
            _ => rng.gen(),
        };
        let mut bytes = valid[rng.gen_range(0..valid.len())].clone();
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..8) {
                    let at = rng.gen_range(0..bytes.len());
                    bytes[at] = rng.gen();
                }
            }
            1 => bytes.truncate(rng.gen_range(0..bytes.len() + 1)),
            _ => bytes = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect(),
        }
        let known = matches!(ty, 1 | 3 | 11);
        {
            let mut s = side.borrow_mut();
            let ServerSide { dp, server, .. } = &mut *s;
            let m = RxMsg {
                conn,
                peer: CLIENT,
                msg: cornflakes::Msg::new(i, ty),
                data: dp.memory().alloc_copy(&bytes).unwrap(),
            };
            match server.handle(dp, &m) {
                Ok(()) => {
                    answered += 1;
                    unknown += !known as u64;
                }
                Err(Unanswered::Malformed(_)) => {
                    assert!(known, "type {ty}: only a method's request is malformed");
                    malformed += 1;
                }
                Err(Unanswered::Send(e)) => panic!("type {ty}: {e}"),
            }
            let _ = dp.flush();
        }
        // The client end takes the replies (and the server reaps its completions).
        if i % 16 == 0 {
            drained.clear();
            let _ = client.inner_mut().datapath_mut().recv_burst(&mut drained);
            side.borrow_mut().dp.poll_completions();
        }
    }
    let s = side.borrow();
    assert_eq!(s.server.counters().unknown_methods, unknown);
    assert!(
        answered > unknown && malformed > 0,
        "{answered} {malformed} {unknown}"
    );
}

/// Sends request `req` of method `ty` with framing header `msg` straight on the client's
/// datapath (its next receive lets the server run) and returns the replies that came back.
fn raw<O: cornflakes::datapath::SendObject>(
    client: &mut Client,
    msg: cornflakes::Msg,
    req: &O,
) -> Vec<RxMsg> {
    let conn = client.inner().conn();
    let dp = client.inner_mut().datapath_mut();
    dp.send_object(conn, msg, req).unwrap();
    dp.flush().unwrap();
    let mut rx = Vec::new();
    for _ in 0..4 {
        dp.recv_burst(&mut rx).unwrap();
    }
    rx
}

#[test]
fn an_exactly_once_method_runs_once_per_request_however_often_it_comes() {
    use cornflakes_codegen_tests::rpc::{StoreMethod, SumView as ReplySum};
    let (mut client, side) = pair(Cornflakes::Hybrid, quick());
    assert!(StoreMethod::Count.exactly_once() && !StoreMethod::Echo.exactly_once());
    let arena = cornflakes::Arena::new();
    let count = StoreMethod::Count.id();
    let req = blob(&arena, 1, b"abc", "");
    let msg = cornflakes::Msg::new(7, count).with_incarnation(42);
    // The first: run. The same request again (a retry, or a duplicate on the wire): the kept
    // reply, byte for byte, and not run again.
    let first = raw(&mut client, msg, &req);
    let again = raw(&mut client, msg, &req);
    assert_eq!((first.len(), again.len()), (1, 1));
    assert_eq!(first[0].msg, msg);
    assert_eq!(again[0].msg, msg);
    assert_eq!(&first[0].data[..], &again[0].data[..]);
    assert_eq!(ReplySum::open(&again[0].data).unwrap().get_total(), 1);
    assert_eq!(side.borrow().server.service().runs, 1);
    // The same id for other bytes: refused, not run.
    let other = raw(&mut client, msg, &blob(&arena, 2, b"abd", ""));
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].msg.ty, cornflakes_rpc::ERROR_TYPE);
    let e = cornflakes_rpc::RpcError::decode(&other[0].data).unwrap();
    assert_eq!((e.code, e.method), (ErrorCode::IdReused, count));
    // Another incarnation's id 7, or this one's id 8: new requests.
    raw(
        &mut client,
        cornflakes::Msg::new(7, count).with_incarnation(43),
        &req,
    );
    raw(
        &mut client,
        cornflakes::Msg::new(8, count).with_incarnation(42),
        &req,
    );
    assert_eq!(side.borrow().server.service().runs, 3);
    // A reply too long to keep: sent once; its retry is told so, and not run.
    let take = StoreMethod::Take.id();
    let mut long = Sum::new_in(&arena);
    long.set_len(1000);
    let msg = cornflakes::Msg::new(9, take).with_incarnation(42);
    let r = raw(&mut client, msg, &long);
    assert_eq!(r[0].msg.ty, take);
    let r = raw(&mut client, msg, &long);
    let e = cornflakes_rpc::RpcError::decode(&r[0].data).unwrap();
    assert_eq!(e.code, ErrorCode::ReplyNotKept);
    assert_eq!(side.borrow().server.service().runs, 4);
    let c = side.borrow().server.counters();
    assert_eq!((c.once.hits, c.once.refused), (2, 1));
}

/// Through the generated client, over a wire that loses a third of the replies: each lost
/// reply's call is retried under its id and answered from the table, so every call ran once.
#[test]
fn calls_whose_replies_are_lost_run_once() {
    let policy = RetryPolicy {
        timeout: Duration::from_millis(2),
        tries: 16,
    };
    let (mut client, side) = pair_losing(Cornflakes::Hybrid, policy, 0.33);
    let arena = cornflakes::Arena::new();
    for i in 1..=200u64 {
        let sum = client.count(&blob(&arena, i as u32, b"x", "")).unwrap();
        // The reply to the first run of this request: no call ran twice.
        assert_eq!(sum.view().unwrap().get_total(), i);
    }
    assert_eq!(side.borrow().server.service().runs, 200);
    let retried = client.inner().stats().retries;
    let answered = side.borrow().server.counters().once.hits;
    assert!(
        retried > 20 && answered > 20,
        "{retried} retries, {answered} answered"
    );
}
