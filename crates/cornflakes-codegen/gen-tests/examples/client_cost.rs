//! The generated client's own cost per open-loop request, for callgrind
//! (`scripts/client-instructions.sh`): bursts of `send_echo` and a `flush`, the in-process
//! server's turn, then `poll` (replies matched to ids, read in place, handed to a callback).
//! `send_burst` and `poll_once` are the client's part; the datapath's calls inside them go
//! through `fence::fenced`, which the script toggles collection off in, so what is counted is
//! the client layer alone (ids, the outstanding table, the framing header, opening the reply
//! view, the callback).
//!
//! `cargo run --release -p cornflakes-codegen-tests --example client_cost -- [REQUESTS]`

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{CFBytes, Datapath};
use cornflakes_codegen_tests::fence::Fenced;
use cornflakes_codegen_tests::rpc::{
    Blob, BlobView, Store, StoreClient, StoreReply, StoreServer, Sum, SumView,
};
use cornflakes_rpc::{Client, Cornflakes, Dispatcher, Replied, Reply, RetryPolicy, Unanswered};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

const BURST: u32 = 16;

/// Answers `echo` with the request's id.
struct Ids;

impl Store for Ids {
    fn echo<'r, D: Datapath>(
        &'r mut self,
        req: BlobView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut b = Blob::new_in(reply.arena());
        b.set_id(req.get_id());
        reply.send(&b)
    }
    fn measure<'r, D: Datapath>(
        &'r mut self,
        _req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>>,
    ) -> Result<Replied, Unanswered> {
        let s = Sum::new_in(reply.arena());
        reply.send(&s)
    }
    fn fetch<'r, D: Datapath>(
        &'r mut self,
        _req: SumView<'r>,
        reply: Reply<'r, D, Blob<'r>>,
    ) -> Result<Replied, Unanswered> {
        let b = Blob::new_in(reply.arena());
        reply.send(&b)
    }
}

type C = StoreClient<Fenced<Loopback>>;

#[inline(never)]
fn send_burst(client: &mut C, req: &Blob<'_>) -> Result<(), String> {
    for _ in 0..BURST {
        client.send_echo(req).map_err(|e| e.to_string())?;
    }
    client.inner_mut().flush().map_err(|e| e.to_string())
}

#[inline(never)]
fn poll_once(client: &mut C, answered: &mut u64) -> usize {
    client.poll(|_, r| {
        if let Ok(StoreReply::Echo(_)) = r {
            *answered += 1;
        }
    })
}

fn main() -> Result<(), String> {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(32_768), |s| s.parse().map_err(|e| format!("{e}")))?;
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let nic =
        |last| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
    let (mut a, mut b) = Loopback::pair(nic(1), nic(2)).map_err(|e| e.to_string())?;
    let rt = Dispatcher::new(a.memory(), Cornflakes::Hybrid, 512);
    let mut server = StoreServer::new(Ids, rt);
    let mut srx = Vec::with_capacity(64);
    let mut serve = |a: &mut Loopback| -> Result<(), String> {
        srx.clear();
        a.recv_burst(&mut srx).map_err(|e| e.to_string())?;
        for m in srx.drain(..) {
            cornflakes_rpc::Handler::handle(&mut server, a, &m).map_err(|e| format!("{e:?}"))?;
        }
        a.flush().map_err(|e| e.to_string())?;
        a.poll_completions();
        Ok(())
    };
    let conn = b.connect(addr(1)).map_err(|e| e.to_string())?;
    serve(&mut a)?; // address resolution
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).map_err(|e| e.to_string())?;
    let policy = RetryPolicy {
        timeout: Duration::from_secs(5),
        tries: 1,
    };
    let mut client: C = StoreClient::from_client(Client::new(Fenced::new(b, |_| {}), conn, policy));
    let arena = cornflakes::Arena::new();
    let mut req = Blob::new_in(&arena);
    req.set_data(CFBytes::new(b"payload", &arena));
    let mut answered = 0;
    for _ in 0..n / u64::from(BURST) {
        send_burst(&mut client, &req)?;
        serve(&mut a)?;
        poll_once(&mut client, &mut answered);
    }
    let s = client.inner().stats();
    println!(
        "sent={} answered={answered} timed_out={}",
        s.sent, s.timed_out
    );
    if answered != s.sent {
        return Err("not every request was answered".into());
    }
    Ok(())
}
