//! The generated client's open-loop interface allocates nothing per request: after a warm-up,
//! thousands of `send_<method>` and `poll` calls (replies matched, ids handed back, the table
//! cycled through many times) make no heap allocation. A counting global allocator counts the
//! allocations of this thread while the client runs; the server's turns are not counted, nor
//! are the datapath's own calls (the in-process NIC queues frames on the heap): the client's
//! datapath is wrapped in one that stops the count while it works.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::{CFBytes, Datapath, RxMsg};
use cornflakes_codegen_tests::fence::Fenced;
use cornflakes_codegen_tests::rpc::{
    Blob, BlobView, Store, StoreClient, StoreReply, StoreServer, Sum, SumView,
};
use cornflakes_rpc::{Client, Cornflakes, Dispatcher, Replied, Reply, RetryPolicy, Unanswered};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the thread's locals may be gone while it exits.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is passed to the system allocator unchanged; the count is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: `ptr` and `layout` are the caller's, from this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts the allocations `f` makes on this thread.
fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// The client's datapath calls stop the count (the hook of a [`Fenced`] datapath).
fn pause(entering: bool) {
    thread_local! {
        static WAS: Cell<bool> = const { Cell::new(false) };
    }
    if entering {
        WAS.with(|w| w.set(COUNTING.with(|c| c.replace(false))));
    } else {
        COUNTING.with(|c| c.set(WAS.with(Cell::get)));
    }
}

/// Echoes `id` only.
struct Echo;

impl Store for Echo {
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
        req: BlobView<'r>,
        reply: Reply<'r, D, Sum<'r>>,
    ) -> Result<Replied, Unanswered> {
        let mut s = Sum::new_in(reply.arena());
        s.set_id(req.get_id());
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

#[test]
fn the_open_loop_client_allocates_nothing_per_request() {
    let addr = |last| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, last), 7000);
    let nic =
        |last| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, last]), addr(last)));
    let (mut a, mut b) = Loopback::pair(nic(1), nic(2)).unwrap();
    let rt = Dispatcher::new(a.memory(), Cornflakes::Hybrid, 512);
    let mut server = StoreServer::new(Echo, rt);
    let mut serve = |a: &mut Loopback, rx: &mut Vec<RxMsg>| {
        rx.clear();
        a.recv_burst(rx).unwrap();
        for m in rx.drain(..) {
            cornflakes_rpc::Handler::handle(&mut server, a, &m).unwrap();
        }
        a.flush().unwrap();
        a.poll_completions();
    };
    let mut srx = Vec::with_capacity(64);
    let conn = b.connect(addr(1)).unwrap();
    serve(&mut a, &mut srx); // address resolution
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).unwrap();
    let policy = RetryPolicy {
        timeout: Duration::from_secs(5),
        tries: 1,
    };
    // A table of 16: the 20 000 requests below cycle through it over a thousand times.
    let mut client = StoreClient::from_client(Client::with_capacity(
        Fenced::new(b, pause),
        conn,
        policy,
        16,
    ));
    let arena = cornflakes::Arena::new();
    let mut req = Blob::new_in(&arena);
    req.set_data(CFBytes::new(b"payload", &arena));

    let mut answered = 0u64;
    let mut round =
        |client: &mut StoreClient<Fenced<Loopback>>, serve: &mut dyn FnMut(), n: u32| {
            let mut left = 0;
            for _ in 0..n {
                let (_, allocs) = counted(|| {
                    for _ in 0..8 {
                        client.send_echo(&req).unwrap();
                    }
                    client.inner_mut().flush().unwrap();
                });
                left += allocs;
                serve();
                let (_, allocs) = counted(|| {
                    client.poll(|_, r| {
                        if let Ok(StoreReply::Echo(_)) = r {
                            answered += 1;
                        }
                    })
                });
                left += allocs;
            }
            left
        };
    let mut serve = || serve(&mut a, &mut srx);
    // Warm-up: the receive list, the datapath's queues and the arena reach their sizes.
    round(&mut client, &mut serve, 100);
    let allocs = round(&mut client, &mut serve, 2500);
    assert_eq!(answered, 2600 * 8, "every request answered");
    assert_eq!(allocs, 0, "allocations by the client in 20 000 requests");
    assert_eq!(client.inner().outstanding(), 0);
    assert_eq!(client.inner().stats().sent, 2600 * 8);
}
