//! Once warm, serialize-and-send, flush (`sendmmsg`) and receive (`recvmmsg`) perform no heap
//! allocation. (A test binary of its own, so its counting allocator sees only this test.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};

use cornflakes::datapath::{Connect, DatapathMemory, Receive, Transmit};
use cornflakes::handwritten::GetM;
use cornflakes::{Arena, CFBytes, CFPtr, CFString, Msg};
use datapath_socket::{SocketConfig, SocketDatapath};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn send_flush_and_receive_do_not_allocate() {
    let local = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let mut a = SocketDatapath::new(SocketConfig::new(local)).unwrap();
    let mut b = SocketDatapath::new(SocketConfig::new(local)).unwrap();
    let conn = a.connect(b.local_addr()).unwrap();
    let mem = a.memory().clone();
    let arena = Arena::with_memory(&mem);
    let mut m = GetM::new_in(&arena);
    m.set_id(1);
    m.init_keys(1);
    m.get_mut_keys().append(CFString::new("key", &arena));
    m.init_vals(2);
    for n in [600, 700] {
        let v = mem.alloc_copy(&vec![7u8; n]).unwrap();
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v, &arena)));
    }
    let mut rx = Vec::with_capacity(64);
    let round = |a: &mut SocketDatapath, b: &mut SocketDatapath, rx: &mut Vec<_>| {
        for i in 0..16 {
            a.send_object(conn, Msg::new(i, 0), &m).unwrap();
        }
        a.flush().unwrap();
        let mut got = 0;
        for _ in 0..1_000_000 {
            got += b.recv_burst(rx).unwrap();
            if got == 16 {
                break;
            }
            std::thread::yield_now();
        }
        assert_eq!(got, 16);
        rx.clear();
    };
    // Warm up the vectors, the scratch arrays and the pinned size classes.
    for _ in 0..4 {
        round(&mut a, &mut b, &mut rx);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    round(&mut a, &mut b, &mut rx);
    let after = ALLOCS.load(Ordering::Relaxed);
    assert_eq!(
        after - before,
        0,
        "heap allocations in one round of 16 messages"
    );
}
