//! Transmit paths shared by every link-layer datapath: serialize-and-send, scatter-gather and
//! copy sends over any descriptor queue implementing [`TxSink`].
//!
//! Single-frame objects (the common case) take the paper's path: one transmit buffer gets the
//! Ethernet/IPv4/UDP headers (from the connection's template), the framing header and the
//! object's header and copy areas; then every zero-copy entry is posted as its own descriptor
//! ([`TxSink::post_object_frame`]: after the head, from inside
//! [`SendObject::for_each_object_leaf`], or — for a queue that fills its descriptor slots by
//! index, as the ConnectX send queue does — while the head is written, in one walk). Nothing
//! is collected and nothing is allocated besides the one transmit buffer. An object without
//! zero-copy entries is not walked for them. With software UDP checksums the zero-copy
//! entries are walked once more first, to sum them.
//!
//! Objects above one frame are cut by a [`Cursor`]: each frame gets a small header buffer,
//! the header and copy areas go into one more pinned buffer, and every descriptor references
//! a slice of that buffer or of a zero-copy entry.

use cornflakes_datapath::{BufferTooSmall, ConnId, Msg, SendError, SendObject, SendPlan};
use cornflakes_mem::{PinnedMemory, PinnedRef, RcBuf, RcBufMut};

use crate::checksum::Accumulator;
use crate::iface::{EthStack, FRAME_OVERHEAD};
use crate::segment::{Cursor, FramePlan};
use crate::template::{HeaderTemplate, TEMPLATE_LEN};
use crate::wire::framing;

/// Shortest Ethernet frame (without FCS); control frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;

/// A transmit descriptor queue.
pub trait TxSink {
    /// Descriptors that can still be posted before the queue is full.
    fn free_slots(&self) -> usize;

    /// Posts one descriptor covering all of `buf`; `end_of_frame` marks a frame's last
    /// descriptor. The queue keeps `buf` (and so its memory) until the device has sent it.
    fn post(&mut self, buf: RcBuf, end_of_frame: bool);

    /// Posts one whole frame of a serialize-and-send: `head` is the frame's first buffer,
    /// already holding the link, IP, UDP and framing headers in its first `at` bytes (UDP
    /// checksum final or left to the device); the object's head goes at `at`
    /// ([`SendPlan::head_len`] bytes, `head` is that long), then every zero-copy entry of
    /// `plan` follows as a descriptor of its own, the last one ending the frame. Nothing is
    /// posted when the object refuses the buffer.
    ///
    /// The default writes the head, then walks the entries and posts them one behind (so the
    /// last is known). A queue that can fill its descriptor slots by index overrides it to
    /// post each entry as the object's walk writes its slot
    /// ([`SendPlan::write_head_and_entries`]): one walk of the object instead of two.
    #[inline]
    fn post_object_frame<O: SendObject + ?Sized>(
        &mut self,
        mut head: RcBufMut,
        at: usize,
        plan: &SendPlan<'_, O>,
    ) -> Result<(), BufferTooSmall>
    where
        Self: Sized,
    {
        plan.write_head(&mut head[at..])?;
        post_head_then_entries(self, head.freeze(), plan);
        Ok(())
    }
}

/// Posts a frame of a serialize-and-send whose head is written: `head`, then each non-empty
/// zero-copy entry of `plan` as its own descriptor, one behind so that the last one is known
/// to end the frame when it is posted (the default of [`TxSink::post_object_frame`]).
#[inline]
pub fn post_head_then_entries<S: TxSink, O: SendObject + ?Sized>(
    sink: &mut S,
    head: RcBuf,
    plan: &SendPlan<'_, O>,
) {
    let mut pending = head;
    if plan.zero_copy_entries() > 0 {
        plan.for_each_zero_copy(|b: PinnedRef<'_>| {
            if !b.is_empty() {
                let prev = std::mem::replace(&mut pending, b.to_rcbuf());
                sink.post(prev, false);
            }
        });
    }
    sink.post(pending, true);
}

#[inline]
fn check_len(stack: &EthStack, total: usize) -> Result<FramePlan, SendError> {
    let max = stack.config().max_message_len;
    if total > max {
        return Err(SendError::TooLarge { len: total, max });
    }
    FramePlan::new(total, stack.frame_room()).map_err(|e| SendError::TooLarge {
        len: e.len,
        max: e.max,
    })
}

/// Serialize-and-send of `obj` on `conn` (see the module docs).
pub fn send_object<S: TxSink, O: SendObject>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    max_segments: usize,
    conn: ConnId,
    msg: Msg,
    obj: &O,
) -> Result<(), SendError> {
    let sizes = obj.object_sizes();
    let total = sizes.total();
    let plan = check_len(stack, total)?;
    if !plan.is_single() {
        return send_object_segmented(stack, mem, sink, max_segments, conn, msg, obj, plan);
    }
    let max_zc = max_segments.saturating_sub(1);
    if sink.free_slots() < 1 + sizes.zero_copy_count.min(max_zc) {
        return Err(SendError::Full);
    }
    let send = SendPlan::with_sizes(obj, sizes, max_zc);
    let (tmpl, ident) = stack.template(conn, 1)?;
    let udp_payload = framing::HEADER_LEN + total;
    let mut hb = mem.alloc(FRAME_OVERHEAD + send.head_len())?;
    tmpl.write(&mut hb, udp_payload, ident);
    framing::Repr::single(msg, total as u32).emit(&mut hb[TEMPLATE_LEN..]);
    if !tmpl.caps().udp_tx {
        // The headers are final.
        if send.zero_copy_entries() == 0 {
            // Every leaf copied (or demoted): the head is the frame, no walk for entries.
            send.write_head(&mut hb[FRAME_OVERHEAD..])?;
            sink.post(hb.freeze(), true);
            return Ok(());
        }
        // The queue posts the frame, in one walk when it can.
        return Ok(sink.post_object_frame(hb, FRAME_OVERHEAD, &send)?);
    }
    // Software UDP checksum: the head and the entries are summed before the frame is posted.
    send.write_head(&mut hb[FRAME_OVERHEAD..])?;
    let mut acc = Accumulator::new();
    acc.add(&hb[TEMPLATE_LEN..]);
    if send.zero_copy_entries() > 0 {
        send.for_each_zero_copy(|b: PinnedRef<'_>| acc.add(&b));
    }
    HeaderTemplate::set_udp_checksum(&mut hb, tmpl.udp_checksum(udp_payload, acc.sum()));
    post_head_then_entries(sink, hb.freeze(), &send);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn send_object_segmented<S: TxSink, O: SendObject>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    max_segments: usize,
    conn: ConnId,
    msg: Msg,
    obj: &O,
    plan: FramePlan,
) -> Result<(), SendError> {
    let sizes = obj.object_sizes();
    // Each frame: its header, at most one slice of the head buffer, and slices of at most
    // `max_segments - 2` zero-copy entries.
    let send = SendPlan::with_sizes(obj, sizes, max_segments.saturating_sub(2));
    let head_len = send.head_len();
    if max_segments < 3 || head_len > mem.max_item_size() {
        // No room for scatter-gather, or a head too large for one pinned buffer: copy all.
        let bytes = obj.object_to_vec();
        return send_copy(stack, mem, sink, conn, msg, &bytes);
    }
    let mut head = mem.alloc(head_len)?;
    send.write_head(&mut head)?;
    let head = head.freeze();
    let pieces = 1 + sizes.zero_copy_count;
    send_pieces(stack, mem, sink, conn, msg, plan, pieces, &mut |f| {
        f(head.pinned());
        send.for_each_zero_copy(|b: PinnedRef<'_>| f(b));
    })
}

/// Produces a message's pieces in order, each through the callback it is given (walked once,
/// or twice when software sums them first).
pub type PieceWalk<'a> = dyn FnMut(&mut dyn FnMut(PinnedRef<'_>)) + 'a;

/// Sends the concatenation of the pieces `walk` produces (called once or twice, producing the
/// same pieces each time), one header descriptor per frame.
#[allow(clippy::too_many_arguments)]
fn send_pieces<S: TxSink>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    conn: ConnId,
    msg: Msg,
    plan: FramePlan,
    pieces: usize,
    walk: &mut PieceWalk<'_>,
) -> Result<(), SendError> {
    // Parts ≤ pieces + frames − 1; plus one header per frame.
    if sink.free_slots() < pieces + 2 * plan.frames {
        return Err(SendError::Full);
    }
    let (tmpl, ident) = stack.template(conn, plan.frames)?;
    let mut headers: Vec<RcBufMut> = Vec::with_capacity(plan.frames);
    for i in 0..plan.frames {
        let mut h = mem.alloc(FRAME_OVERHEAD)?;
        tmpl.write(
            &mut h,
            framing::HEADER_LEN + plan.frame_len(i),
            ident.wrapping_add(i as u16),
        );
        plan.header(i, msg).emit(&mut h[TEMPLATE_LEN..]);
        headers.push(h);
    }
    if tmpl.caps().udp_tx {
        let mut accs = vec![Accumulator::new(); plan.frames];
        for (a, h) in accs.iter_mut().zip(&headers) {
            a.add(&h[TEMPLATE_LEN..]);
        }
        let mut cur = Cursor::new(plan);
        walk(&mut |b: PinnedRef<'_>| {
            cur.feed(b.len(), |p| {
                accs[p.frame].add(&b[p.offset..p.offset + p.len])
            });
        });
        for (i, (a, h)) in accs.iter().zip(headers.iter_mut()).enumerate() {
            let c = tmpl.udp_checksum(framing::HEADER_LEN + plan.frame_len(i), a.sum());
            HeaderTemplate::set_udp_checksum(h, c);
        }
    }
    let mut hdrs = headers.into_iter().map(RcBufMut::freeze);
    let mut cur = Cursor::new(plan);
    walk(&mut |b: PinnedRef<'_>| {
        cur.feed(b.len(), |p| {
            if p.starts_frame {
                if let Some(h) = hdrs.next() {
                    sink.post(h, false);
                }
            }
            // The cursor cuts pieces inside the entry it is fed: `sub` always succeeds.
            if let Some(piece) = b.sub(p.offset, p.len) {
                sink.post(piece.to_rcbuf(), p.ends_frame);
            }
        });
    });
    Ok(())
}

/// Sends a prepared scatter-gather array: one header descriptor per frame, then the entries
/// (sliced at frame boundaries). At most `max_segments - 1` non-empty entries.
pub fn send_sga<S: TxSink>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    max_segments: usize,
    conn: ConnId,
    msg: Msg,
    entries: &[RcBuf],
) -> Result<(), SendError> {
    let n = entries.iter().filter(|e| !e.is_empty()).count();
    let max = max_segments.saturating_sub(1);
    if n > max {
        return Err(SendError::TooManySegments { entries: n, max });
    }
    let total = entries.iter().map(|e| e.len()).sum();
    let plan = check_len(stack, total)?;
    if n == 0 {
        return send_copy(stack, mem, sink, conn, msg, &[]);
    }
    if plan.is_single() {
        return send_sga_single(stack, mem, sink, conn, msg, total, n, entries);
    }
    send_pieces(stack, mem, sink, conn, msg, plan, n, &mut |f| {
        for e in entries.iter().filter(|e| !e.is_empty()) {
            f(e.pinned());
        }
    })
}

/// [`send_sga`] of a one-frame message (`n` non-empty entries, `total` bytes): one header
/// buffer, then the entries as they are, posted one behind as in [`send_object`] (no frame
/// cursor, no vector of header buffers).
#[allow(clippy::too_many_arguments)]
fn send_sga_single<S: TxSink>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    conn: ConnId,
    msg: Msg,
    total: usize,
    n: usize,
    entries: &[RcBuf],
) -> Result<(), SendError> {
    if sink.free_slots() < 1 + n {
        return Err(SendError::Full);
    }
    let (tmpl, ident) = stack.template(conn, 1)?;
    let udp_payload = framing::HEADER_LEN + total;
    let mut hb = mem.alloc(FRAME_OVERHEAD)?;
    tmpl.write(&mut hb, udp_payload, ident);
    framing::Repr::single(msg, total as u32).emit(&mut hb[TEMPLATE_LEN..]);
    if tmpl.caps().udp_tx {
        let mut acc = Accumulator::new();
        acc.add(&hb[TEMPLATE_LEN..]);
        entries.iter().for_each(|e| acc.add(e));
        HeaderTemplate::set_udp_checksum(&mut hb, tmpl.udp_checksum(udp_payload, acc.sum()));
    }
    let mut pending = hb.freeze();
    for e in entries.iter().filter(|e| !e.is_empty()) {
        let prev = std::mem::replace(&mut pending, e.clone());
        sink.post(prev, false);
    }
    sink.post(pending, true);
    Ok(())
}

/// Sends contiguous bytes, copied into one transmit buffer per frame.
pub fn send_copy<S: TxSink>(
    stack: &mut EthStack,
    mem: &PinnedMemory,
    sink: &mut S,
    conn: ConnId,
    msg: Msg,
    data: &[u8],
) -> Result<(), SendError> {
    let plan = check_len(stack, data.len())?;
    if sink.free_slots() < plan.frames {
        return Err(SendError::Full);
    }
    let (tmpl, ident) = stack.template(conn, plan.frames)?;
    let mut bufs = Vec::with_capacity(if plan.is_single() { 0 } else { plan.frames });
    let mut single = None;
    for i in 0..plan.frames {
        let len = plan.frame_len(i);
        let udp_payload = framing::HEADER_LEN + len;
        let mut b = mem.alloc(FRAME_OVERHEAD + len)?;
        tmpl.write(&mut b, udp_payload, ident.wrapping_add(i as u16));
        plan.header(i, msg).emit(&mut b[TEMPLATE_LEN..]);
        let start = i * plan.per_frame;
        b[FRAME_OVERHEAD..].copy_from_slice(&data[start..start + len]);
        if tmpl.caps().udp_tx {
            let mut acc = Accumulator::new();
            acc.add(&b[TEMPLATE_LEN..]);
            HeaderTemplate::set_udp_checksum(&mut b, tmpl.udp_checksum(udp_payload, acc.sum()));
        }
        if plan.is_single() {
            single = Some(b);
        } else {
            bufs.push(b);
        }
    }
    for b in single.into_iter().chain(bufs) {
        sink.post(b.freeze(), true);
    }
    Ok(())
}

/// Sends a control frame (ARP) copied into a pinned buffer, padded to [`MIN_FRAME_LEN`].
/// Returns false when it could not be queued (the protocol retries).
pub fn send_control<S: TxSink>(mem: &PinnedMemory, sink: &mut S, frame: &[u8]) -> bool {
    if sink.free_slots() == 0 {
        return false;
    }
    let len = frame.len().max(MIN_FRAME_LEN);
    let Ok(mut b) = mem.alloc(len) else {
        return false;
    };
    b[..frame.len()].copy_from_slice(frame);
    b[frame.len()..].fill(0);
    sink.post(b.freeze(), true);
    true
}
