//! The send side of one connection: the queue of pinned buffers not yet taken by the device
//! ([`TxQueue`], every stream datapath's), and the buffers the kernel still refers to after
//! `MSG_ZEROCOPY` sends ([`ZcInFlight`], kernel TCP's); and how a message becomes queued
//! buffers ([`FramedObject`], [`framed_copy`], [`sga_header`]).

use std::collections::VecDeque;

use cornflakes_datapath::{Msg, SendError, SendObject, SendPlan};
use cornflakes_mem::{PinnedMemory, RcBuf};

use crate::frame::{write_header, HEADER_LEN};

/// An object framed for a stream: one pinned buffer with the frame header, the object header
/// and the copy area, then one reference per zero-copy field ([`FramedObject::queue`]).
#[derive(Debug)]
pub struct FramedObject<'o, O: ?Sized> {
    plan: SendPlan<'o, O>,
    head: RcBuf,
    /// The message's length (without the frame header).
    pub total: usize,
}

impl<'o, O: SendObject + ?Sized> FramedObject<'o, O> {
    /// Writes `obj`'s head into a new buffer of `mem`, at most `max_zero_copy` fields by
    /// reference (smaller ones beyond that are copied into the head). `Ok(None)` when the head
    /// alone is larger than a pinned item (a huge copy area): send the serialized bytes with
    /// [`framed_copy`] instead.
    pub fn new(
        mem: &PinnedMemory,
        msg: Msg,
        obj: &'o O,
        max_zero_copy: usize,
    ) -> Result<Option<Self>, SendError> {
        let plan = SendPlan::new(obj, max_zero_copy);
        let total = plan.total_len();
        if HEADER_LEN + plan.head_len() > mem.max_item_size() {
            return Ok(None);
        }
        let mut head = mem.alloc(HEADER_LEN + plan.head_len())?;
        write_header(&mut head, msg, total as u32);
        let n = plan.write_head(&mut head[HEADER_LEN..])?;
        head.set_len(HEADER_LEN + n);
        Ok(Some(FramedObject {
            plan,
            head: head.freeze(),
            total,
        }))
    }

    /// Appends the head and a reference to each zero-copy field to `tx` (fields at least
    /// `zero_copy_threshold` long marked for a zero-copy send). Returns the buffers queued.
    pub fn queue(self, tx: &mut TxQueue, zero_copy_threshold: usize) -> usize {
        let before = tx.len();
        tx.push(self.head, false);
        self.plan
            .for_each_zero_copy(|b| tx.push(b.to_rcbuf(), b.len() >= zero_copy_threshold));
        tx.len() - before
    }
}

/// `data` framed as one message in pinned buffers of `mem` (copied): the frame header and as
/// much of `data` as fits in the first item, then the rest in items of the largest size.
pub fn framed_copy(mem: &PinnedMemory, msg: Msg, data: &[u8]) -> Result<Vec<RcBuf>, SendError> {
    let item = mem.max_item_size();
    let mut bufs = Vec::with_capacity(1 + (HEADER_LEN + data.len()) / item);
    let first = data.len().min(item - HEADER_LEN);
    let mut b = mem.alloc(HEADER_LEN + first)?;
    write_header(&mut b, msg, data.len() as u32);
    b[HEADER_LEN..].copy_from_slice(&data[..first]);
    bufs.push(b.freeze());
    for chunk in data[first..].chunks(item) {
        bufs.push(mem.alloc_copy(chunk)?);
    }
    Ok(bufs)
}

/// The frame header of a message that is the concatenation of `entries` (sent by reference
/// after it), and that message's length.
pub fn sga_header(
    mem: &PinnedMemory,
    msg: Msg,
    entries: &[RcBuf],
) -> Result<(RcBuf, usize), SendError> {
    let total: usize = entries.iter().map(|e| e.len()).sum();
    let mut head = mem.alloc(HEADER_LEN)?;
    write_header(&mut head, msg, total as u32);
    Ok((head.freeze(), total))
}

/// One queued buffer: a framing-header + head buffer, or a zero-copy field.
#[derive(Debug)]
struct Piece {
    buf: RcBuf,
    /// A zero-copy field at least the zero-copy threshold long: its send uses `MSG_ZEROCOPY`.
    zero_copy: bool,
}

/// Buffers queued for one stream, in order. The front one may be partly sent.
#[derive(Debug, Default)]
pub struct TxQueue {
    pieces: VecDeque<Piece>,
    /// Bytes of the front piece already sent.
    front_sent: usize,
    /// Bytes queued and not sent.
    bytes: usize,
}

impl TxQueue {
    /// Appends `buf` (empty buffers are skipped).
    pub fn push(&mut self, buf: RcBuf, zero_copy: bool) {
        if buf.is_empty() {
            return;
        }
        self.bytes += buf.len();
        self.pieces.push_back(Piece { buf, zero_copy });
    }

    /// Bytes queued and not yet sent.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Buffers queued (the front one possibly partly sent).
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Hands the unsent bytes of up to `max` buffers to `f`, in order, and says whether any of
    /// them is a zero-copy field (so the send should use `MSG_ZEROCOPY`).
    pub fn for_each_unsent(&self, max: usize, mut f: impl FnMut(&[u8])) -> bool {
        let mut zc = false;
        for (i, p) in self.pieces.iter().take(max).enumerate() {
            let from = if i == 0 { self.front_sent } else { 0 };
            f(&p.buf[from..]);
            zc |= p.zero_copy;
        }
        zc
    }

    /// Marks `n` bytes sent. Buffers wholly sent are dropped; when `keep` is given (a
    /// zero-copy send), a reference to every buffer the `n` bytes touched goes into it, for
    /// the kernel still reads them. Returns how many buffers were wholly sent.
    pub fn advance(&mut self, mut n: usize, mut keep: Option<&mut Vec<RcBuf>>) -> usize {
        debug_assert!(n <= self.bytes);
        n = n.min(self.bytes);
        self.bytes -= n;
        let mut done = 0;
        while n > 0 {
            let Some(front) = self.pieces.front() else {
                break;
            };
            let left = front.buf.len() - self.front_sent;
            if let Some(k) = keep.as_deref_mut() {
                k.push(front.buf.clone());
            }
            if n < left {
                self.front_sent += n;
                break;
            }
            n -= left;
            self.front_sent = 0;
            self.pieces.pop_front();
            done += 1;
        }
        done
    }

    /// Drops everything queued (the connection is gone). Returns how many buffers.
    pub fn clear(&mut self) -> usize {
        let n = self.pieces.len();
        self.pieces.clear();
        self.front_sent = 0;
        self.bytes = 0;
        n
    }
}

/// The buffers of `MSG_ZEROCOPY` sends the kernel has not yet reported complete, by send
/// number, with the bytes each send carried. The kernel numbers a socket's zero-copy sends 0,
/// 1, 2, … (one number per `sendmsg` that took bytes) and reports ranges of numbers done on
/// the error queue.
#[derive(Debug, Default)]
pub struct ZcInFlight {
    next: u32,
    sends: VecDeque<(u32, Vec<RcBuf>, usize)>,
    buffers: usize,
}

impl ZcInFlight {
    /// The number the next recorded send gets.
    pub fn next_id(&self) -> u32 {
        self.next
    }

    /// Records the next zero-copy send's buffers and the bytes it carried; returns its number.
    pub fn record(&mut self, bufs: Vec<RcBuf>, bytes: usize) -> u32 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.buffers += bufs.len();
        self.sends.push_back((id, bufs, bytes));
        id
    }

    /// The kernel is done with sends `lo..=hi` (wrapping): releases their buffers. Returns how
    /// many buffer references were dropped and the bytes those sends carried. Numbers not in
    /// flight are ignored.
    pub fn complete(&mut self, lo: u32, hi: u32) -> (usize, usize) {
        let span = hi.wrapping_sub(lo);
        // Completions come in order for TCP (the matching sends are at the front), but any
        // order is handled.
        let (mut dropped, mut bytes) = (0, 0);
        self.sends.retain(|(id, b, n)| {
            let done = id.wrapping_sub(lo) <= span;
            if done {
                dropped += b.len();
                bytes += n;
            }
            !done
        });
        self.buffers -= dropped;
        (dropped, bytes)
    }

    /// Sends not yet complete.
    pub fn sends(&self) -> usize {
        self.sends.len()
    }

    /// Buffer references held for them.
    pub fn buffers(&self) -> usize {
        self.buffers
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use cornflakes_mem::PinnedMemory;

    #[test]
    fn advance_keeps_order_and_partial_fronts() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let mut q = TxQueue::default();
        q.push(mem.alloc_copy(b"abc").unwrap(), false);
        q.push(mem.alloc_copy(b"").unwrap(), true);
        q.push(mem.alloc_copy(b"defgh").unwrap(), true);
        assert_eq!((q.len(), q.bytes()), (2, 8));
        let mut iov: Vec<Vec<u8>> = Vec::new();
        assert!(q.for_each_unsent(8, |s| iov.push(s.to_vec())));
        assert_eq!(iov.len(), 2);
        let mut keep = Vec::new();
        assert_eq!(q.advance(4, Some(&mut keep)), 1);
        assert_eq!(
            keep.len(),
            2,
            "both touched buffers are kept for the kernel"
        );
        iov.clear();
        assert!(q.for_each_unsent(8, |s| iov.push(s.to_vec())));
        assert_eq!(iov, [b"efgh".to_vec()]);
        assert!(!q.for_each_unsent(0, |_| unreachable!()));
        assert_eq!(q.advance(4, None), 1);
        assert!(q.is_empty() && q.bytes() == 0);
    }

    #[test]
    fn completions_release_exactly_their_sends_even_across_wrap() {
        let mem = PinnedMemory::with_defaults().unwrap();
        let b = mem.alloc_copy(&[1; 600]).unwrap();
        let mut z = ZcInFlight {
            next: u32::MAX - 1,
            ..ZcInFlight::default()
        };
        for i in 0..4 {
            z.record(vec![b.clone(), b.clone()], 1000 + i);
        }
        assert_eq!(b.ref_count(), 9);
        // Sends MAX-1, MAX, 0, 1: complete MAX..=0, then MAX-1, then 1.
        assert_eq!(z.complete(u32::MAX, 0), (4, 1001 + 1002));
        assert_eq!((z.sends(), z.buffers()), (2, 4));
        assert_eq!(z.complete(u32::MAX - 1, u32::MAX - 1), (2, 1000));
        assert_eq!(
            z.complete(7, 9),
            (0, 0),
            "numbers not in flight are ignored"
        );
        assert_eq!(z.complete(1, 1), (2, 1003));
        assert_eq!((z.sends(), z.buffers(), b.ref_count()), (0, 0, 1));
    }
}
