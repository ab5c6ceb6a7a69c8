//! The one place that touches memory shared with the device: queue buffers (WQEs, CQEs),
//! doorbell records and the doorbell (BlueFlame) register. Every access is volatile, so the
//! compiler neither elides nor merges it, and the barriers say which order the device sees.
//!
//! Callers pass pointers they got from a [`QueueMemory`](crate::queue::QueueMemory), whose
//! contract makes them valid; the functions check alignment in debug builds.
//!
//! # The words that synchronize
//! A device (real, or the emulated one on its own thread, [`crate::emu::threaded`]) runs
//! concurrently with the driver. The bulk of queue memory (WQEs, CQE bodies, packet buffers) is
//! written by one side and read by the other only after a hand-over, so plain volatile
//! accesses suffice. The hand-over words themselves are accessed **atomically**, so the hand-over
//! is a release/acquire pair in the Rust memory model too, not only on x86:
//! - doorbell records ([`write_dbrec`] is a release store, [`read_dbrec`] an acquire load): the
//!   driver publishes WQEs and consumer indices, the device publishes nothing through them;
//! - a CQE's `op_own` byte ([`write_u8`] / [`read_u8`] are atomic): the device fills the entry,
//!   then release-stores `op_own` ([`write_cqe`]); the driver loads it and issues
//!   [`from_device_barrier`] (acquire) before reading the rest.

use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};

/// Orders all earlier stores to queue memory before later ones (rdma-core's
/// `udma_to_device_barrier`: WQE contents before the doorbell record).
#[inline]
pub fn to_device_barrier() {
    fence(Ordering::Release);
}

/// Orders the check of a CQE's ownership before reading its other fields (rdma-core's
/// `udma_from_device_barrier`).
#[inline]
pub fn from_device_barrier() {
    fence(Ordering::Acquire);
}

/// Flushes the doorbell write out of the write-combining buffer (rdma-core's
/// `mmio_flush_writes`; `sfence`-strength or stronger).
#[inline]
pub fn flush_writes() {
    fence(Ordering::SeqCst);
}

/// Hints that the cache lines of `bytes` move from this core's private caches to the shared
/// last-level cache (`cldemote`), where a NIC's DMA with DDIO would have left them. A hint
/// only: it never changes memory or faults, and it is a no-op on CPUs without it (the
/// instruction is in the reserved-NOP space) and on other architectures.
#[inline]
pub fn demote_to_llc(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut line = bytes.as_ptr() as usize & !63;
        let end = bytes.as_ptr() as usize + bytes.len();
        while line < end {
            // SAFETY: `cldemote` is a cache hint on a line of `bytes`, which is valid memory
            // we hold a reference to; it reads and writes nothing and cannot fault.
            unsafe {
                std::arch::asm!("cldemote [{0}]", in(reg) line, options(nostack, preserves_flags))
            };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Writes one 16-byte WQE unit.
///
/// # Safety
/// `dst` must be valid for writes of 16 bytes and 16-byte aligned.
#[inline]
pub unsafe fn write_unit(dst: *mut u8, unit: &[u8; 16]) {
    debug_assert_eq!(dst as usize % 16, 0);
    let lo = u64::from_ne_bytes([
        unit[0], unit[1], unit[2], unit[3], unit[4], unit[5], unit[6], unit[7],
    ]);
    let hi = u64::from_ne_bytes([
        unit[8], unit[9], unit[10], unit[11], unit[12], unit[13], unit[14], unit[15],
    ]);
    // SAFETY: the caller guarantees 16 writable, aligned bytes at `dst`.
    unsafe {
        std::ptr::write_volatile(dst.cast::<u64>(), lo);
        std::ptr::write_volatile(dst.add(8).cast::<u64>(), hi);
    }
}

/// Reads one 16-byte WQE unit.
///
/// # Safety
/// `src` must be valid for reads of 16 bytes and 16-byte aligned.
#[inline]
pub unsafe fn read_unit(src: *const u8) -> [u8; 16] {
    debug_assert_eq!(src as usize % 16, 0);
    // SAFETY: the caller guarantees 16 readable, aligned bytes at `src`.
    let (lo, hi) = unsafe {
        (
            std::ptr::read_volatile(src.cast::<u64>()),
            std::ptr::read_volatile(src.add(8).cast::<u64>()),
        )
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&lo.to_ne_bytes());
    out[8..].copy_from_slice(&hi.to_ne_bytes());
    out
}

/// Writes one byte atomically (a WQE flag byte, a CQE's `op_own`); callers order it with a
/// barrier before it.
///
/// # Safety
/// `dst` must be valid for a one-byte write, and every access to it that may race with this
/// one must be atomic too.
#[inline]
pub unsafe fn write_u8(dst: *mut u8, v: u8) {
    // SAFETY: the caller guarantees a valid byte whose racing accesses are atomic; a byte is
    // always aligned for `AtomicU8`.
    unsafe { AtomicU8::from_ptr(dst) }.store(v, Ordering::Relaxed)
}

/// Reads one byte atomically (a CQE's `op_own`); callers issue [`from_device_barrier`] before
/// reading what it guards.
///
/// # Safety
/// `src` must be valid for a one-byte read, and every access to it that may race with this
/// one must be atomic too.
#[inline]
pub unsafe fn read_u8(src: *const u8) -> u8 {
    // SAFETY: as in `write_u8`; the atomic is only loaded from.
    unsafe { AtomicU8::from_ptr(src.cast_mut()) }.load(Ordering::Relaxed)
}

/// Reads a whole 64-byte CQE.
///
/// # Safety
/// `src` must be valid for reads of 64 bytes and 16-byte aligned.
#[inline]
pub unsafe fn read_cqe(src: *const u8) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, chunk) in out.chunks_exact_mut(16).enumerate() {
        // SAFETY: `i * 16 + 16 <= 64`, inside the caller's range; alignment is preserved.
        chunk.copy_from_slice(&unsafe { read_unit(src.add(i * 16)) });
    }
    out
}

/// Writes a whole 64-byte CQE (the emulated device).
///
/// # Safety
/// `dst` must be valid for writes of 64 bytes and 16-byte aligned; the poller may be reading
/// the entry's `op_own` byte (atomically) meanwhile, but nothing else of it.
#[inline]
pub unsafe fn write_cqe(dst: *mut u8, cqe: &[u8; 64]) {
    // Everything but `op_own` first, then `op_own` with release ordering, as the device does:
    // a poller that sees the new owner bit (and then issues an acquire barrier) sees the whole
    // entry.
    for i in 0..3 {
        let mut u = [0u8; 16];
        u.copy_from_slice(&cqe[i * 16..i * 16 + 16]);
        // SAFETY: inside the caller's 64 bytes.
        unsafe { write_unit(dst.add(i * 16), &u) };
    }
    for (i, &b) in cqe[48..63].iter().enumerate() {
        // SAFETY: bytes 48..63 of the entry: inside the caller's range, not `op_own`.
        unsafe { std::ptr::write_volatile(dst.add(48 + i), b) };
    }
    to_device_barrier();
    // SAFETY: byte 63 (`op_own`), whose only racing access is the poller's atomic load.
    unsafe { write_u8(dst.add(63), cqe[63]) };
}

/// Writes a big-endian doorbell record: a release store, so everything written before it
/// (WQEs, or reads of consumed CQEs) is visible to a device that acquires the record.
///
/// # Safety
/// `dst` must be valid for a 4-byte aligned write and only ever accessed atomically.
#[inline]
pub unsafe fn write_dbrec(dst: *mut u32, v: u32) {
    // SAFETY: the caller guarantees an aligned, valid u32 accessed only atomically.
    unsafe { AtomicU32::from_ptr(dst) }.store(v.to_be(), Ordering::Release)
}

/// Reads a big-endian doorbell record: an acquire load (pairs with [`write_dbrec`]).
///
/// # Safety
/// `src` must be valid for a 4-byte aligned read and only ever accessed atomically.
#[inline]
pub unsafe fn read_dbrec(src: *const u32) -> u32 {
    // SAFETY: as in `write_dbrec`; the atomic is only loaded from.
    u32::from_be(unsafe { AtomicU32::from_ptr(src.cast_mut()) }.load(Ordering::Acquire))
}

/// Writes the 8-byte doorbell word to a device register (UAR / BlueFlame page).
///
/// # Safety
/// `reg` must be a mapped, 8-byte aligned device register (or memory standing in for one).
#[inline]
pub unsafe fn write_reg64(reg: *mut u64, v: u64) {
    // SAFETY: the caller guarantees a mapped, aligned register.
    unsafe { std::ptr::write_volatile(reg, v) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn demoting_lines_changes_no_byte() {
        let buf: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let before = buf.clone();
        // Unaligned start and end, an empty slice, and the whole buffer.
        super::demote_to_llc(&buf[3..257]);
        super::demote_to_llc(&buf[10..10]);
        super::demote_to_llc(&buf);
        assert_eq!(buf, before);
    }
}
