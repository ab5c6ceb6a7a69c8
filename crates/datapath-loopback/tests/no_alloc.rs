//! Serialize-and-send of a single-frame object performs no heap allocation once warm: no
//! scatter-gather vector, no per-send buffers besides the pinned transmit buffer.
//! (A test binary of its own, so its counting allocator sees only this test.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};

use cornflakes::datapath::{Completions, Connect, DatapathMemory, Receive, Transmit};
use cornflakes::handwritten::GetM;
use cornflakes::{Arena, CFBytes, CFPtr, CFString, CornflakesObj, Msg};
use cornflakes_stack::{ChecksumCaps, MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

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
fn send_object_does_not_allocate() {
    for caps in [ChecksumCaps::SOFTWARE, ChecksumCaps::NO_UDP_TX] {
        let a_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 1);
        let b_addr = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 2);
        let mut a = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), a_addr);
        a.caps = caps;
        a.static_arp
            .push((*b_addr.ip(), MacAddr([2, 0, 0, 0, 0, 2])));
        let b = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), b_addr);
        let (mut a, mut b) =
            Loopback::pair(LoopbackConfig::new(a), LoopbackConfig::new(b)).unwrap();
        let conn = a.connect(b_addr).unwrap();
        let mem = a.memory().clone();
        let v1 = mem.alloc_copy(&[1; 600]).unwrap();
        let v2 = mem.alloc_copy(&[2; 700]).unwrap();
        let arena = Arena::with_memory(&mem);
        let mut m = GetM::new_in(&arena);
        m.set_id(1);
        m.init_keys(1);
        m.get_mut_keys().append(CFString::new("key", &arena));
        m.init_vals(2);
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v1, &arena)));
        m.get_mut_vals()
            .append(CFBytes(CFPtr::from_rcbuf(v2, &arena)));
        assert_eq!(m.sizes().zero_copy_count, 2);
        // Warm up: ring capacity and the pinned size classes; then empty the ring.
        for i in 0..64 {
            a.send_object(conn, Msg::new(i, 0), &m).unwrap();
        }
        a.flush().unwrap();
        let mut rx = Vec::new();
        while b.recv_burst(&mut rx).unwrap() > 0 {}
        assert_eq!(rx.len(), 64);
        drop(rx);
        assert_eq!(a.poll_completions(), 64 * 3);
        let before = ALLOCS.load(Ordering::Relaxed);
        for i in 0..32 {
            a.send_object(conn, Msg::new(i, 0), &m).unwrap();
        }
        let after = ALLOCS.load(Ordering::Relaxed);
        assert_eq!(
            after - before,
            0,
            "{caps:?}: heap allocations during 32 sends"
        );
        assert_eq!(a.in_flight(), 32 * 3);
    }
}
