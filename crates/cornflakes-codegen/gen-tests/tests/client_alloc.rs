//! The generated client's open-loop interface allocates nothing per request: after a warm-up,
//! thousands of `send_<method>` and `poll` calls (replies matched, ids handed back, the table
//! cycled through many times) make no heap allocation. The counting allocator of
//! `baselines::alloc_count` counts this thread's allocations while the client runs; the
//! server's turns are not counted, nor are the datapath's own calls (the in-process NIC queues
//! frames on the heap): the client's datapath is [`Fenced`], and what happens inside a fence
//! is subtracted.

use std::cell::Cell;
use std::time::Duration;

use baselines::alloc_count::{allocs, Counting};
use cornflakes::CFBytes;
use cornflakes_codegen_tests::harness::{self, Fenced};
use cornflakes_codegen_tests::rpc::{Blob, StoreClient, StoreReply};
use cornflakes_rpc::{Client, ClientIds, RetryPolicy};
use datapath_loopback::Loopback;

#[global_allocator]
static GLOBAL: Counting = Counting;

thread_local! {
    /// The count when the datapath call under way began.
    static ENTERED: Cell<u64> = const { Cell::new(0) };
    /// Allocations made inside the datapath's calls so far.
    static FENCED: Cell<u64> = const { Cell::new(0) };
}

/// The hook of the client's [`Fenced`] datapath: what its calls allocate is set aside.
fn fence(entering: bool) {
    if entering {
        ENTERED.with(|e| e.set(allocs()));
    } else {
        let inside = allocs() - ENTERED.with(Cell::get);
        FENCED.with(|f| f.set(f.get() + inside));
    }
}

/// The allocations `f` makes on this thread outside the datapath's calls.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let (a, d) = (allocs(), FENCED.with(Cell::get));
    let r = f();
    let total = allocs() - a;
    let inside = FENCED.with(Cell::get) - d;
    (r, total - inside)
}

#[test]
fn the_open_loop_client_allocates_nothing_per_request() {
    let (mut a, mut server, b, conn) = harness::loopback().unwrap();
    let mut srx = Vec::with_capacity(64);
    let policy = RetryPolicy {
        timeout: Duration::from_secs(5),
        tries: 1,
    };
    // A table of 16: the 20 000 requests below cycle through it over a thousand times.
    // An identity of its own, so other tests' clients in this process leave no gaps in its ids.
    let mut client = StoreClient::from_client(
        Client::with_capacity(Fenced::new(b, fence), conn, policy, 16).with_ids(ClientIds::fresh()),
    );
    let arena = cornflakes::Arena::new();
    let mut req = Blob::new_in(&arena);
    req.set_data(CFBytes::new(b"payload", &arena));

    let mut answered = 0u64;
    let mut round = |client: &mut StoreClient<Fenced<Loopback>>, n: u32| {
        let mut made = 0;
        for _ in 0..n {
            let (_, allocs) = counted(|| {
                for _ in 0..8 {
                    client.send_echo(&req).unwrap();
                }
                client.inner_mut().flush().unwrap();
            });
            made += allocs;
            harness::serve(&mut a, &mut server, &mut srx).unwrap();
            let (_, allocs) = counted(|| {
                client.poll(|_, r| {
                    if let Ok(StoreReply::Echo(_)) = r {
                        answered += 1;
                    }
                })
            });
            made += allocs;
        }
        made
    };
    // Warm-up: the receive list reaches its size.
    round(&mut client, 100);
    let made = round(&mut client, 2500);
    assert_eq!(answered, 2600 * 8, "every request answered");
    assert_eq!(made, 0, "allocations by the client in 20 000 requests");
    assert_eq!(client.inner().outstanding(), 0);
    assert_eq!(client.inner().stats().sent, 2600 * 8);
    // The count is live: the fenced datapath did allocate, and a client-side allocation shows.
    assert!(FENCED.with(Cell::get) > 0);
    assert_eq!(counted(|| Box::new(1)).1, 1);
}
