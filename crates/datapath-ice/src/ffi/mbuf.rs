//! Mbufs and mempools: owned handles, pinned buffers attached as external data, and the
//! receive/transmit bursts.
//!
//! # External buffers and who frees them
//! [`Mbuf::attach`] takes an [`RcBuf`] clone and attaches its bytes to a fresh mbuf as an
//! external buffer. The clone lives in a heap `ExtCtx` (allocations are recycled per thread)
//! whose first field is the `rte_mbuf_ext_shared_info` DPDK is given; its free callback is
//! `ext_free`, with the context as opaque pointer. DPDK calls it when the last mbuf using the buffer is freed
//! (by the PMD after transmission, by `rte_eth_tx_done_cleanup`, or by whoever frees the chain),
//! and that drops the clone: the pinned buffer outlives the NIC's use of it, and no longer.

use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CString};
use std::fmt;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_uint};
use std::ptr::NonNull;
use std::rc::Rc;

use cornflakes_mem::RcBuf;

use super::eal::DpdkError;
use super::sys;

/// Transmit-side counters shared between a datapath and the free callbacks of its buffers.
#[derive(Debug, Default)]
pub struct ExtCounters {
    /// External buffers attached and not yet released by DPDK.
    pub in_flight: Cell<usize>,
    /// External buffers released so far.
    pub released: Cell<u64>,
}

/// What DPDK's free callback gets: the shared-info struct DPDK reads and writes (first, so a
/// pointer to the context is one to it), the buffer reference, and the counters.
#[repr(C)]
struct ExtCtx {
    shinfo: sys::rte_mbuf_ext_shared_info,
    buf: RcBuf,
    counters: Rc<ExtCounters>,
}

/// Most recycled context allocations kept per thread.
const SPARE_CTX_MAX: usize = 8192;

thread_local! {
    /// Allocations of finished contexts (their fields already dropped), reused by
    /// `Mbuf::attach` so a transmitted segment costs no `malloc`/`free` in steady state. Boxed
    /// on purpose: DPDK holds each context's address while its segment is attached.
    #[allow(clippy::vec_box)]
    static SPARE_CTX: RefCell<Vec<Box<MaybeUninit<ExtCtx>>>> = const { RefCell::new(Vec::new()) };
}

/// A context allocation: a recycled one, or a new one.
fn ctx_slot() -> Box<MaybeUninit<ExtCtx>> {
    SPARE_CTX
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new(MaybeUninit::uninit()))
}

/// DPDK's free callback for `ExtCtx` buffers.
unsafe extern "C" fn ext_free(_addr: *mut c_void, opaque: *mut c_void) {
    let ctx = opaque.cast::<ExtCtx>();
    // SAFETY: `opaque` is the context `Mbuf::attach` initialised and leaked; DPDK calls this
    // exactly once, when the shared-info refcount (set to 1 there) drops to 0, on the thread
    // that frees the mbuf (the datapath's own: a PinnedMemory and its buffers are
    // single-threaded). Its fields are read, then dropped in place exactly once.
    unsafe {
        let c = &(*ctx).counters;
        c.in_flight.set(c.in_flight.get() - 1);
        c.released.set(c.released.get() + 1);
        std::ptr::drop_in_place(ctx);
    }
    // SAFETY: the allocation came from a `Box<MaybeUninit<ExtCtx>>` (`ctx_slot`) and its
    // contents were just dropped, so it is an uninitialised slot again, owned by us.
    let slot = unsafe { Box::from_raw(ctx.cast::<MaybeUninit<ExtCtx>>()) };
    let _ = SPARE_CTX.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARE_CTX_MAX {
            s.push(slot);
        }
    });
}

/// An owned mempool, freed on drop. All of its mbufs must have been returned by then.
pub struct Mempool {
    mp: NonNull<sys::rte_mempool>,
    name: String,
}

impl Mempool {
    /// A pool of `n` plain packet mbufs with `data_room` bytes each (0 for mbufs that only
    /// carry external buffers).
    pub fn pktmbuf(name: &str, n: u32, data_room: u16) -> Result<Mempool, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError::new("pool name", libc::EINVAL))?;
        // SAFETY: valid name; the result is checked for NULL.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create(
                c.as_ptr(),
                n as c_uint,
                cache_size(n),
                0,
                data_room,
                sys::rte_socket_id() as c_int,
            )
        };
        NonNull::new(mp)
            .map(|mp| Mempool {
                mp,
                name: name.into(),
            })
            .ok_or_else(|| DpdkError::last(format!("rte_pktmbuf_pool_create({name}, {n})")))
    }

    /// A pool whose `zones.len()` mbufs have their data rooms in external (pinned) memory: the
    /// i-th mbuf's data room is `zones[i]` (`(address, iova)`, each `elt_size` bytes), pinned to
    /// it for the pool's life.
    ///
    /// # Safety
    /// Every zone must be `elt_size` bytes of memory that stays valid, and that nothing but
    /// the NIC and this pool's mbufs writes, until the pool is dropped.
    pub unsafe fn extbuf(
        name: &str,
        zones: &[(*mut u8, u64)],
        elt_size: u16,
    ) -> Result<Mempool, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError::new("pool name", libc::EINVAL))?;
        let ext: Vec<sys::rte_pktmbuf_extmem> = zones
            .iter()
            .map(|&(p, iova)| sys::rte_pktmbuf_extmem {
                buf_ptr: p.cast(),
                buf_iova: iova,
                buf_len: usize::from(elt_size),
                elt_size,
            })
            .collect();
        let n = zones.len() as u32;
        // SAFETY: `ext` describes `n` zones the caller vouches for; DPDK copies what it needs
        // from the array during the call.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create_extbuf(
                c.as_ptr(),
                n as c_uint,
                cache_size(n),
                0,
                elt_size,
                sys::rte_socket_id() as c_int,
                ext.as_ptr(),
                ext.len() as c_uint,
            )
        };
        NonNull::new(mp)
            .map(|mp| Mempool {
                mp,
                name: name.into(),
            })
            .ok_or_else(|| DpdkError::last(format!("rte_pktmbuf_pool_create_extbuf({name}, {n})")))
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.mp.as_ptr()
    }

    /// The pool's identity, as [`RxInfo::pool`] reports it.
    pub fn id(&self) -> usize {
        self.mp.as_ptr() as usize
    }

    /// Mbufs currently free in the pool.
    pub fn available(&self) -> usize {
        // SAFETY: the pool is live.
        unsafe { sys::rte_mempool_avail_count(self.mp.as_ptr()) as usize }
    }

    /// Allocates one mbuf.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool is live; the result is checked for NULL.
        NonNull::new(unsafe { sys::cf_pktmbuf_alloc(self.mp.as_ptr()) }).map(Mbuf)
    }
}

fn cache_size(n: u32) -> c_uint {
    // RTE_MEMPOOL_CACHE_MAX_SIZE is 512 and the cache must be at most n / 1.5.
    (n * 2 / 3).min(256) as c_uint
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: owners drop a pool only after every mbuf of it was returned (datapath Drop
        // order: port stopped, queues and rings drained, then pools).
        unsafe { sys::rte_mempool_free(self.mp.as_ptr()) }
    }
}

impl fmt::Debug for Mempool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.name)
            .field("available", &self.available())
            .finish()
    }
}

/// A received mbuf's fields ([`Mbuf::rx_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxInfo {
    /// Address of the data buffer (data room or external buffer).
    pub buf_addr: usize,
    /// The mempool the mbuf belongs to (compare with [`Mempool::id`]).
    pub pool: usize,
    /// Bytes in the whole chain.
    pub pkt_len: usize,
    /// Offset of the first data byte in the buffer.
    pub data_off: usize,
    /// Bytes of data in the first segment.
    pub data_len: usize,
    /// Segments in the chain.
    pub segments: usize,
    /// The port's IPv4 checksum verdict, when it checked.
    pub ip_checksum_ok: Option<bool>,
    /// The port's L4 checksum verdict, when it checked.
    pub l4_checksum_ok: Option<bool>,
}

/// An owned mbuf chain (its head); dropping it frees every segment.
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

impl Mbuf {
    /// Attaches `buf` (whose IO address is `iova`) to a fresh mbuf from `pool` as its external
    /// data buffer; the mbuf's data is all of `buf`. `buf` is released when DPDK frees the
    /// mbuf (see the module docs). `None` when the pool is empty or `buf` is longer than an
    /// mbuf segment can describe (64 KiB).
    pub fn attach(
        pool: &Mempool,
        buf: RcBuf,
        iova: u64,
        counters: &Rc<ExtCounters>,
    ) -> Option<Mbuf> {
        let len = u16::try_from(buf.len()).ok()?;
        let m = pool.alloc()?;
        let addr = buf.as_ptr() as *mut c_void;
        let ctx = Box::into_raw(ctx_slot()).cast::<ExtCtx>();
        // SAFETY: `ctx` is an uninitialised, exclusively owned allocation for an `ExtCtx`;
        // writing initialises it without dropping anything. It stays ours until attached.
        unsafe {
            ctx.write(ExtCtx {
                shinfo: sys::rte_mbuf_ext_shared_info {
                    free_cb: Some(ext_free),
                    fcb_opaque: ctx.cast(),
                    ..Default::default()
                },
                buf,
                counters: Rc::clone(counters),
            })
        };
        counters.in_flight.set(counters.in_flight.get() + 1);
        // SAFETY: `m` is a fresh direct mbuf with refcount 1; `addr..addr+len` is the pinned
        // buffer kept alive by `ctx.buf` until `ext_free` runs; DPDK only reads it (transmit).
        // `shinfo` lives in `ctx`, which stays allocated until the callback frees it.
        unsafe {
            sys::cf_attach_extbuf(
                m.0.as_ptr(),
                addr,
                iova,
                len,
                std::ptr::addr_of_mut!((*ctx).shinfo),
            )
        };
        Some(m)
    }

    /// Appends `tail` to this chain. Gives `tail` back when the chain would exceed DPDK's
    /// segment count limit.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: both are live chains we own; on success the head owns the tail.
        let ret = unsafe { sys::cf_pktmbuf_chain(self.0.as_ptr(), tail.0.as_ptr()) };
        if ret == 0 {
            std::mem::forget(tail);
            Ok(())
        } else {
            Err(tail)
        }
    }

    /// Requests IPv4 and UDP checksum offload (call on a frame's head).
    pub fn request_checksum_offload(&mut self, l2_len: u16, l3_len: u16) {
        // SAFETY: a live mbuf we own.
        unsafe { sys::cf_set_tx_cksum_offload(self.0.as_ptr(), l2_len, l3_len) }
    }

    /// Number of segments in the chain.
    pub fn segments(&self) -> usize {
        // SAFETY: a live mbuf we own.
        usize::from(unsafe { sys::cf_mbuf_nb_segs(self.0.as_ptr()) })
    }

    /// Total bytes of the chain.
    pub fn pkt_len(&self) -> usize {
        // SAFETY: a live mbuf we own.
        unsafe { sys::cf_mbuf_pkt_len(self.0.as_ptr()) as usize }
    }

    /// The `(l2_len, l3_len)` of a frame head that requests IPv4 and UDP checksum offload,
    /// `None` when it requests none.
    pub fn tx_checksum_offload(&self) -> Option<(u16, u16)> {
        let (mut l2, mut l3) = (0u16, 0u16);
        // SAFETY: a live mbuf we own; `l2`/`l3` are valid out-pointers for the call.
        let on = unsafe { sys::cf_mbuf_tx_cksum_offload(self.0.as_ptr(), &mut l2, &mut l3) };
        (on != 0).then_some((l2, l3))
    }

    /// What the receive path needs to know about this mbuf, read in one call.
    pub fn rx_info(&self) -> RxInfo {
        let mut i = sys::cf_rx_info::default();
        // SAFETY: a live mbuf we own; `i` is a valid out-pointer for the call.
        unsafe { sys::cf_mbuf_rx_info(self.0.as_ptr(), &mut i) };
        let verdict = |v: i8| match v {
            1 => Some(true),
            -1 => Some(false),
            _ => None,
        };
        RxInfo {
            buf_addr: i.buf_addr as usize,
            pool: i.pool as usize,
            pkt_len: i.pkt_len as usize,
            data_off: usize::from(i.data_off),
            data_len: usize::from(i.data_len),
            segments: usize::from(i.nb_segs),
            ip_checksum_ok: verdict(i.ip_cksum),
            l4_checksum_ok: verdict(i.l4_cksum),
        }
    }

    /// Copies the whole chain into `out` (at least [`pkt_len`](Self::pkt_len) bytes); returns
    /// the bytes copied, which is less than `pkt_len` only for a chain whose segment lengths
    /// do not add up (counted as truncated by the caller).
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        let mut seg = self.0.as_ptr();
        let mut guard = 0;
        while !seg.is_null() && guard < u16::MAX as usize {
            // SAFETY: `seg` is a segment of our live chain.
            let (data, len) = unsafe {
                (
                    sys::cf_mbuf_data(seg).cast::<u8>().cast_const(),
                    usize::from(sys::cf_mbuf_data_len(seg)),
                )
            };
            if at + len > out.len() {
                break;
            }
            // SAFETY: the segment's `len` data bytes are initialised packet data the PMD wrote;
            // `out[at..at+len]` is in bounds (checked above) and does not overlap DPDK memory.
            unsafe { std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(at), len) };
            at += len;
            // SAFETY: as above.
            seg = unsafe { sys::cf_mbuf_next(seg) };
            guard += 1;
        }
        at
    }

    /// Gives the mbuf to DPDK without freeing it (after the PMD accepted it).
    fn into_raw(self) -> *mut sys::rte_mbuf {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the chain; freeing returns each segment to its pool and releases
        // external buffers through their callbacks.
        unsafe { sys::cf_pktmbuf_free(self.0.as_ptr()) }
    }
}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mbuf")
            .field("segments", &self.segments())
            .field("pkt_len", &self.pkt_len())
            .finish()
    }
}

/// Hands the frames at the front of `pkts` to the port's TX queue 0; the ones it took are
/// removed from `pkts` (now owned by the PMD), the rest stay. Returns how many were taken.
pub fn tx_burst(port: u16, pkts: &mut Vec<Mbuf>) -> usize {
    tx_burst_queue(port, 0, pkts)
}

/// As [`tx_burst`], on TX queue `queue` (a port with one queue pair per core).
pub fn tx_burst_queue(port: u16, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
    let n = pkts.len().min(u16::MAX as usize) as u16;
    if n == 0 {
        return 0;
    }
    // `Mbuf` is a transparent NonNull<rte_mbuf>, so the vector is an array of mbuf pointers.
    let arr = pkts.as_mut_ptr().cast::<*mut sys::rte_mbuf>();
    // SAFETY: `arr` holds `n` live mbuf chains we own; the PMD takes ownership of the first
    // `sent`, which are then forgotten below (never freed by us).
    let sent = usize::from(unsafe { sys::cf_tx_burst(port, queue, arr, n) });
    for m in pkts.drain(..sent) {
        m.into_raw();
    }
    sent
}

/// Receives up to `max` frames from the port's RX queue 0, appended to `out`.
pub fn rx_burst(port: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
    rx_burst_queue(port, 0, out, max)
}

/// As [`rx_burst`], from RX queue `queue`.
pub fn rx_burst_queue(port: u16, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
    let max = max.min(u16::MAX as usize);
    out.reserve(max);
    let len = out.len();
    // SAFETY: `out` has room for `max` more pointers after `len`.
    let arr = unsafe { out.as_mut_ptr().add(len).cast::<*mut sys::rte_mbuf>() };
    // SAFETY: the PMD writes at most `max` non-NULL mbuf pointers it hands over to us.
    let got = usize::from(unsafe { sys::cf_rx_burst(port, queue, arr, max as u16) });
    // SAFETY: the first `got` new slots were initialised with owned, non-NULL mbufs.
    unsafe { out.set_len(len + got) };
    got
}
