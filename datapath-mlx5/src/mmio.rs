//! The one place that touches memory shared with the device: queue buffers (WQEs, CQEs),
//! doorbell records and the doorbell (BlueFlame) register. Every access is volatile, so the
//! compiler neither elides nor merges it, and the barriers say which order the device sees.
//!
//! Callers pass pointers they got from a [`QueueMemory`](crate::queue::QueueMemory), whose
//! contract makes them valid; the functions check alignment in debug builds.

use std::sync::atomic::{fence, Ordering};

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

/// Writes one byte (a WQE flag byte, a CQE's `op_own`).
///
/// # Safety
/// `dst` must be valid for a one-byte write.
#[inline]
pub unsafe fn write_u8(dst: *mut u8, v: u8) {
    // SAFETY: the caller guarantees a writable byte.
    unsafe { std::ptr::write_volatile(dst, v) }
}

/// Reads one byte (a CQE's `op_own`).
///
/// # Safety
/// `src` must be valid for a one-byte read.
#[inline]
pub unsafe fn read_u8(src: *const u8) -> u8 {
    // SAFETY: the caller guarantees a readable byte.
    unsafe { std::ptr::read_volatile(src) }
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
/// `dst` must be valid for writes of 64 bytes and 16-byte aligned.
#[inline]
pub unsafe fn write_cqe(dst: *mut u8, cqe: &[u8; 64]) {
    // Everything but the last unit first, then the unit holding `op_own`, as the device does:
    // a poller that sees the new owner bit sees the whole entry.
    for i in 0..3 {
        let mut u = [0u8; 16];
        u.copy_from_slice(&cqe[i * 16..i * 16 + 16]);
        // SAFETY: inside the caller's 64 bytes.
        unsafe { write_unit(dst.add(i * 16), &u) };
    }
    to_device_barrier();
    let mut u = [0u8; 16];
    u.copy_from_slice(&cqe[48..64]);
    // SAFETY: as above.
    unsafe { write_unit(dst.add(48), &u) };
}

/// Writes a big-endian doorbell record.
///
/// # Safety
/// `dst` must be valid for a 4-byte aligned write.
#[inline]
pub unsafe fn write_dbrec(dst: *mut u32, v: u32) {
    // SAFETY: the caller guarantees an aligned, writable u32.
    unsafe { std::ptr::write_volatile(dst, v.to_be()) }
}

/// Reads a big-endian doorbell record.
///
/// # Safety
/// `src` must be valid for a 4-byte aligned read.
#[inline]
pub unsafe fn read_dbrec(src: *const u32) -> u32 {
    // SAFETY: the caller guarantees an aligned, readable u32.
    u32::from_be(unsafe { std::ptr::read_volatile(src) })
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
