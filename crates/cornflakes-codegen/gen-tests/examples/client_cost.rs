//! The generated client's own cost per open-loop request, for callgrind
//! (`scripts/client-instructions.sh`): bursts of `send_echo` and a `flush`, the in-process
//! server's turn, then `poll` (replies matched to ids, read in place, handed to a callback).
//! `send_burst` and `poll_once` are the client's part; the datapath's calls inside them go
//! through `harness::fenced`, which the script toggles collection off in, so what is counted is
//! the client layer alone (ids, the outstanding table, the framing header, opening the reply
//! view, the callback).
//!
//! `cargo run --release -p cornflakes-codegen-tests --example client_cost -- [REQUESTS]`

use std::time::Duration;

use cornflakes::CFBytes;
use cornflakes_codegen_tests::harness::{self, Fenced};
use cornflakes_codegen_tests::rpc::{Blob, StoreClient, StoreReply};
use cornflakes_rpc::{Client, ClientIds, RetryPolicy};
use datapath_loopback::Loopback;

const BURST: u32 = 16;

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
    let (mut a, mut server, b, conn) = harness::loopback()?;
    let mut srx = Vec::with_capacity(64);
    let policy = RetryPolicy {
        timeout: Duration::from_secs(5),
        tries: 1,
    };
    let mut client: C = StoreClient::from_client(
        Client::new(Fenced::new(b, |_| {}), conn, policy).with_ids(ClientIds::fresh()),
    );
    let arena = cornflakes::Arena::new();
    let mut req = Blob::new_in(&arena);
    req.set_data(CFBytes::new(b"payload", &arena));
    let mut answered = 0;
    for _ in 0..n / u64::from(BURST) {
        send_burst(&mut client, &req)?;
        harness::serve(&mut a, &mut server, &mut srx)?;
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
