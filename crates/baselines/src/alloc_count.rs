//! A global allocator that counts the calling thread's allocations, for the tests that prove
//! a server path allocates only what its library forces (`tests/alloc.rs` here,
//! `apps/kv-store/tests/server_alloc.rs`). A test binary installs it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;` and reads [`allocs`] before and
//! after the work it measures. The count is per thread: the harness's other threads
//! (output capture, the runner) allocate too and must not count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards every call to the system allocator and counts `alloc` and `realloc` per thread.
pub struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: an allocation during the thread's teardown is not counted, and never panics.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

/// Allocations (and reallocations) this thread has made since it started, when [`Counting`]
/// is the global allocator (0 otherwise).
pub fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
