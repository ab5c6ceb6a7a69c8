//! Cornflakes messages over Demikernel's TCP stack (crate `demikernel` 1.5.13, `catpowder`
//! LibOS: Demikernel's own TCP/IP over a Linux raw socket). Nightly only; see `docs/tcp.md`,
//! "Demikernel".
//!
//! The stream framing is the TCP datapath's (`datapath_tcp::frame`): a 28-byte one-segment
//! framing header, then the message. Received bytes (Demikernel's buffers) are copied into our
//! pinned memory through [`datapath_tcp::frame::Deframer`], so messages decode as they do on
//! the kernel path.
//!
//! **Sending.** The paper pushed each object as a scatter-gather array whose segments
//! referenced the application's buffers, with the packet header in a segment of its own.
//! Demikernel 1.5.13 cannot take such an array: `demi_sgarray_t` has room for one segment
//! (`DEMI_SGARRAY_MAXLEN = 1`), `push` refuses any other count (`EINVAL`, "demi_sgarray_t has
//! invalid segment count"), and the segment must lie inside a buffer the LibOS allocated
//! (`sgaalloc`); a segment pointing anywhere else is refused ("describes data outside backing
//! buffer's allocated region"). [`push_zero_copy`] builds exactly the array Cornflakes wants
//! and shows the refusal; [`push_object`] is what works: the frame header and the whole object
//! (copy area and zero-copy fields) written into one `sgaalloc`ed segment.
//!
//! **The apps over Demikernel.** [`datapath::DemiDatapath`] is the kernel TCP datapath's one
//! stream datapath (`datapath_tcp::StreamDatapath`: framing, receive buffers, send queue,
//! backpressure, caps, timeouts) over Demikernel's queues ([`datapath::DemiQueues`]; copies at
//! the push), so the apps' own handlers (`echo::server::Echo`, `kv_store::server::Kv`)
//! run on `app_server::Server` unchanged: the `demi-server echo|kv` binary
//! (`src/bin/demi-server.rs`). [`config::CatpowderConfig`] writes the LibOS's configuration file.

#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod config;
pub mod datapath;

use std::io;

use cornflakes::{CornflakesObj, Msg, RcBuf};
use datapath_tcp::frame::{write_header, HEADER_LEN};
use demikernel::runtime::fail::Fail;
use demikernel::{demi_sgarray_t, demi_sgaseg_t, LibOS, QDesc, QToken};

/// Turns a Demikernel failure into an `io::Error` carrying its errno and cause.
pub fn io_error(e: Fail) -> io::Error {
    io::Error::new(
        io::Error::from_raw_os_error(e.errno).kind(),
        format!("demikernel: {} (errno {})", e.cause, e.errno),
    )
}

/// The bytes of the single segment of an `sgaalloc`ed array.
pub(crate) fn segment_mut(sga: &mut demi_sgarray_t) -> &mut [u8] {
    let seg = &sga.sga_segs[0];
    // SAFETY: `sga` came from `LibOS::sgaalloc`, whose one segment points at `sgaseg_len`
    // writable bytes of a DemiBuffer the array owns until it is freed; the returned slice
    // borrows `sga` mutably, so it cannot outlive it or alias another view of it.
    unsafe { std::slice::from_raw_parts_mut(seg.sgaseg_buf as *mut u8, seg.sgaseg_len as usize) }
}

/// The bytes of the single segment of a popped array (empty at the end of the stream).
pub(crate) fn segment(sga: &demi_sgarray_t) -> &[u8] {
    let seg = &sga.sga_segs[0];
    // SAFETY: a popped array's one segment points at `sgaseg_len` bytes Demikernel owns until
    // the array is freed (`sgafree`); the slice borrows `sga`, so it cannot outlive it, and
    // nothing writes those bytes meanwhile.
    unsafe { std::slice::from_raw_parts(seg.sgaseg_buf as *const u8, seg.sgaseg_len as usize) }
}

/// The most bytes one push should carry: Demikernel 1.5.13 sends a push that finds the send
/// window open as one segment without cutting it to the MSS (`Sender::send`, "TODO: What
/// limits buffer len to MSS?"), so a longer push becomes an IP packet above the MTU, which the
/// raw socket refuses ("send failed"), and the connection stalls retransmitting it. Pushes are
/// cut to this size (the MSS of a 1500-byte MTU).
pub const MAX_PUSH: usize = 1460;

/// Pushes `obj` as one frame: the header and the serialized object copied into `sgaalloc`ed
/// segments of at most [`MAX_PUSH`] bytes, one push each (the only array Demikernel 1.5.13
/// accepts is one LibOS-allocated segment). Returns the pushes' tokens.
pub fn push_object<O: CornflakesObj + ?Sized>(
    libos: &mut LibOS,
    qd: QDesc,
    msg: Msg,
    obj: &O,
) -> io::Result<Vec<QToken>> {
    let bytes = obj.serialize_to_vec();
    push_bytes(libos, qd, msg, &bytes)
}

/// Pushes `data` as one frame (header and data copied into pushes of at most [`MAX_PUSH`]
/// bytes). Returns the pushes' tokens. Each array is freed here; Demikernel keeps its own
/// reference until the data is acknowledged.
pub fn push_bytes(libos: &mut LibOS, qd: QDesc, msg: Msg, data: &[u8]) -> io::Result<Vec<QToken>> {
    let mut header = [0u8; HEADER_LEN];
    write_header(&mut header, msg, data.len() as u32);
    let total = HEADER_LEN + data.len();
    let byte = |i: usize| {
        if i < HEADER_LEN {
            header[i]
        } else {
            data[i - HEADER_LEN]
        }
    };
    let mut tokens = Vec::with_capacity(total.div_ceil(MAX_PUSH));
    let mut at = 0;
    while at < total {
        let n = (total - at).min(MAX_PUSH);
        let mut sga = libos.sgaalloc(n).map_err(io_error)?;
        let seg = segment_mut(&mut sga);
        if at >= HEADER_LEN {
            seg.copy_from_slice(&data[at - HEADER_LEN..at - HEADER_LEN + n]);
        } else {
            for (i, b) in seg.iter_mut().enumerate() {
                *b = byte(at + i);
            }
        }
        let qt = libos.push(qd, &sga);
        libos.sgafree(sga).map_err(io_error)?;
        tokens.push(qt.map_err(io_error)?);
        at += n;
    }
    Ok(tokens)
}

/// Pushes the frame the paper's way: one segment for the frame header, then the message's
/// pinned buffers referenced in place. Demikernel 1.5.13 holds at most one segment per array,
/// so the array can only carry the first segment and say how many there are; `push` refuses
/// it. Returns that refusal (an error with `EINVAL`), or the token if a future version
/// accepts it.
///
/// The array carries no DemiBuffer token (the memory is ours), which `push` also refuses.
pub fn push_zero_copy(
    libos: &mut LibOS,
    qd: QDesc,
    header: &RcBuf,
    parts: &[RcBuf],
) -> io::Result<QToken> {
    let seg = |b: &RcBuf| demi_sgaseg_t {
        sgaseg_buf: b.as_ptr() as *mut std::ffi::c_void,
        sgaseg_len: b.len() as u32,
    };
    // SAFETY: an all-zero demi_sgarray_t is plain data (null token, no address).
    let mut sga: demi_sgarray_t = unsafe { std::mem::zeroed() };
    sga.sga_numsegs = 1 + parts.len() as u32;
    sga.sga_segs[0] = seg(header);
    // No DemiBuffer token: the memory is ours, not the LibOS's (a null token is refused too,
    // after the segment count).
    sga.sga_buf = std::ptr::null_mut();
    libos.push(qd, &sga).map_err(io_error)
}
