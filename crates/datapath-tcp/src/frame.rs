//! Stream framing: length-delimited frames of Cornflakes messages on a byte stream
//! (`docs/wire-format.md`, "Stream framing"), and the receive side's [`Deframer`].
//!
//! A frame is the 28-byte framing header of the UDP datapaths with one segment (`version 2`,
//! `flags 0`, `segment index 0`, `segment count 1`, `segment offset 0`, and the sender's
//! incarnation), whose `total length` is the length prefix, then that many message bytes. The same header type
//! ([`cornflakes_stack::wire::framing`]) writes it; a stream never carries several segments
//! of one message, since TCP already delivers bytes in order.

use std::fmt;

use cornflakes_datapath::Msg;
use cornflakes_mem::AllocError;
use cornflakes_mem::{PinnedMemory, RcBuf, RcBufMut};
use cornflakes_stack::wire::framing::{self, Packet, Repr};

/// Bytes of the frame header (the framing header of `docs/wire-format.md`).
pub const HEADER_LEN: usize = framing::HEADER_LEN;

/// Why a byte stream is not a valid sequence of frames. The connection cannot be resynchronised
/// after one (there is no marker to find the next frame), so it is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The header at stream offset `at` is not a one-segment frame header of version 2
    /// (wrong version, e.g. a version-1 sender, or flags, segment count not 1, index or offset
    /// not 0).
    BadHeader {
        /// Stream offset of the header.
        at: u64,
    },
    /// The length prefix at stream offset `at` is above the limit.
    TooLong {
        /// Stream offset of the header.
        at: u64,
        /// The length the header announced.
        len: u64,
        /// The most this receiver accepts.
        max: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadHeader { at } => write!(
                f,
                "bad frame header at stream offset {at}: not a one-segment version-{} framing header",
                framing::VERSION
            ),
            FrameError::TooLong { at, len, max } => write!(
                f,
                "frame at stream offset {at} announces {len} message bytes, above the limit of {max}"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Writes the frame header of a `len`-byte message `msg` (its incarnation, id and type) into the
/// first [`HEADER_LEN`] bytes of `buf`.
#[inline]
pub fn write_header(buf: &mut [u8], msg: Msg, len: u32) {
    Repr::single(msg, len).emit(buf);
}

/// Checks a frame header (its first [`HEADER_LEN`] bytes) found at stream offset `at` and
/// returns the message identity (incarnation, id, type) and length.
pub fn parse_header(hdr: &[u8], at: u64, max_len: usize) -> Result<(Msg, usize), FrameError> {
    if hdr.len() < HEADER_LEN {
        return Err(FrameError::BadHeader { at });
    }
    let p = Packet::new_unchecked(&hdr[..HEADER_LEN]);
    let ok = p.version() == framing::VERSION
        && p.flags() == 0
        && p.seg_count() == 1
        && p.seg_index() == 0
        && p.seg_offset() == 0;
    if !ok {
        return Err(FrameError::BadHeader { at });
    }
    let len = p.total_len() as u64;
    if len > max_len as u64 {
        return Err(FrameError::TooLong {
            at,
            len,
            max: max_len,
        });
    }
    let msg = Msg::new(p.msg_id(), p.msg_type()).with_incarnation(p.incarnation());
    Ok((msg, len as usize))
}

/// Counts kept by a [`Deframer`]; they only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeframeStats {
    /// Messages delivered.
    pub messages: u64,
    /// Messages whose bytes arrived across more than one receive buffer and were gathered into
    /// one pinned item (the part received before copied once into it).
    pub gathered: u64,
    /// Bytes copied to gather such messages (and the header bytes of a frame cut by the end of
    /// a receive buffer).
    pub gathered_bytes: u64,
}

/// Smallest buffer a partly received frame is kept in while its connection is idle
/// ([`Deframer::settle`]): a frame that needs no more is kept whole, so its next read completes
/// it.
pub const SETTLE_MIN: usize = 512;

/// The receive side of one stream: reads go into a pinned buffer; every frame wholly inside it
/// is delivered as a view of that buffer (zero-copy); the bytes of a frame cut by the end of a
/// read are moved to a buffer of their own, which the next reads fill.
///
/// # Memory grows with the bytes that arrived
/// A frame's header announces its length, but a buffer is never sized from that alone: a
/// partly received frame is held in a buffer of at most about twice the bytes of it that have
/// arrived — read, or waiting in the socket (the `waiting` of [`space_for`](Self::space_for)),
/// rounded up to a size class — and at least what it needs when that is below a read buffer.
/// So a peer that announces a large frame and sends a few bytes holds a few hundred bytes
/// ([`settle`](Self::settle) compacts the read buffer they arrived in), not the announced
/// length; a frame that arrives at once is gathered into one buffer of its size, as before.
/// An idle stream between frames holds nothing.
#[derive(Debug)]
pub struct Deframer {
    max_message_len: usize,
    rx_buffer: usize,
    /// The buffer reads go into: a fresh read buffer, or the buffer of a partly received frame.
    buf: Option<RcBufMut>,
    /// Bytes of `buf` holding received data.
    filled: usize,
    /// The bytes of a frame cut by the end of the last read, still in that read's (frozen,
    /// shared) buffer: `(buffer, start, end)`. The next [`space_for`](Self::space_for) or
    /// [`settle`](Self::settle) moves them into a buffer of their own.
    cut: Option<(RcBuf, usize, usize)>,
    /// Stream offset of the partial frame's first byte (`buf[0]` or `cut`'s start).
    base: u64,
    /// The partial frame's bytes were copied from an earlier buffer.
    gathering: bool,
    /// Header and message bytes of the partial frame once its header has arrived, else 0.
    need: usize,
    stats: DeframeStats,
}

impl Deframer {
    /// A deframer that accepts messages up to `max_message_len` bytes and reads into buffers of
    /// `rx_buffer` bytes (at least one header; larger when a frame needs it).
    pub fn new(max_message_len: usize, rx_buffer: usize) -> Deframer {
        Deframer {
            max_message_len,
            rx_buffer: rx_buffer.max(HEADER_LEN),
            buf: None,
            filled: 0,
            cut: None,
            base: 0,
            gathering: false,
            need: 0,
            stats: DeframeStats::default(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> DeframeStats {
        self.stats
    }

    /// Bytes of a partly received frame held (0 between frames).
    pub fn partial_bytes(&self) -> usize {
        match &self.cut {
            Some((_, start, end)) => end - start,
            None => self.filled,
        }
    }

    /// Pinned bytes held for a partly received frame: the capacity of its buffer (of the read
    /// buffer it arrived in, until it is moved); 0 between frames.
    pub fn held_capacity(&self) -> usize {
        match (&self.cut, &self.buf) {
            (Some((b, _, _)), _) => b.item_capacity(),
            (None, Some(b)) if self.filled > 0 => b.capacity(),
            _ => 0,
        }
    }

    /// Stream bytes consumed so far (delivered or held).
    pub fn stream_offset(&self) -> u64 {
        self.base + self.partial_bytes() as u64
    }

    /// Whether the next [`space_for`](Self::space_for) allocates a buffer for a partly received
    /// frame (its bytes fill their buffer, or were cut by the end of a read): the caller may
    /// then learn how many bytes wait in the socket, and [`growth`](Self::growth) says how
    /// large that buffer will be.
    pub fn needs_buffer(&self) -> bool {
        self.cut.is_some()
            || self
                .buf
                .as_ref()
                .is_some_and(|b| self.filled == b.capacity())
    }

    /// Whether the next [`space_for`](Self::space_for) sizes a partial frame's buffer by the
    /// bytes waiting (its frame is larger than a read buffer): only then is `waiting` worth a
    /// system call to learn.
    pub fn asks_waiting(&self) -> bool {
        self.needs_buffer() && self.need() > self.rx_buffer
    }

    /// Stream offset of the partial frame's first byte (or of the next frame's, between
    /// frames): which frame is partly received.
    pub fn frame_offset(&self) -> u64 {
        self.base
    }

    /// The capacity [`space_for`](Self::space_for)`(mem, waiting)` asks for, for a partly
    /// received frame, when [`needs_buffer`](Self::needs_buffer); else 0.
    pub fn growth(&self, mem: &PinnedMemory, waiting: usize) -> usize {
        let have = self.partial_bytes();
        if !self.needs_buffer() || have == 0 {
            return 0;
        }
        size_class(self.target(have, waiting).min(mem.max_item_size()))
    }

    /// The free part of the receive buffer for the next read, when nothing says how many bytes
    /// wait: [`space_for`](Self::space_for)`(mem, 0)`.
    pub fn space(&mut self, mem: &PinnedMemory) -> Result<&mut [u8], AllocError> {
        self.space_for(mem, 0)
    }

    /// The free part of the receive buffer for the next read (never empty). A read buffer of
    /// `rx_buffer` bytes is allocated when none is held; a partly received frame that fills its
    /// buffer, or was cut by the end of the last read, is moved to a buffer of its own: a read
    /// buffer when the frame fits one, else about `have + waiting` bytes (at least twice `have`,
    /// at most the whole frame), where `waiting` is how many more bytes are known to have
    /// arrived (in the socket, or in the rest of a popped segment). On an error nothing
    /// changed.
    pub fn space_for(
        &mut self,
        mem: &PinnedMemory,
        waiting: usize,
    ) -> Result<&mut [u8], AllocError> {
        if self.needs_buffer() {
            let have = self.partial_bytes();
            let want = self.target(have, waiting).min(mem.max_item_size());
            self.move_partial(mem, want)?;
        } else if self.buf.is_none() {
            self.buf = Some(mem.alloc(self.rx_buffer.min(mem.max_item_size()))?);
            self.filled = 0;
        }
        let filled = self.filled;
        let buf = self.buf.as_mut().expect("allocated above");
        Ok(&mut buf.full_mut()[filled..])
    }

    /// Drops whatever is buffered (the stream is being closed or abandoned: a partial frame is
    /// lost), keeping the counters and the stream offset.
    pub fn reset(&mut self) {
        self.base = self.stream_offset();
        self.buf = None;
        self.cut = None;
        self.filled = 0;
        self.need = 0;
        self.gathering = false;
    }

    /// Gives back the receive buffer if it holds no bytes (after a read found nothing), so an
    /// idle stream holds no pinned memory.
    pub fn release_if_empty(&mut self) {
        if self.filled == 0 && self.cut.is_none() {
            self.buf = None;
        }
    }

    /// For a stream with nothing more to read now: gives back an empty buffer
    /// ([`release_if_empty`](Self::release_if_empty)), and moves a partly received frame that
    /// sits in a buffer much larger than its bytes (the read buffer it arrived in) into one of
    /// about twice its bytes (at least [`SETTLE_MIN`], or the whole frame when smaller). Best
    /// effort: without a pinned buffer for the move the frame stays where it is.
    pub fn settle(&mut self, mem: &PinnedMemory) {
        self.release_if_empty();
        let have = self.partial_bytes();
        if have == 0 {
            return;
        }
        let want = self
            .need()
            .min((2 * have).max(SETTLE_MIN))
            .max(have)
            .min(mem.max_item_size());
        if self.cut.is_some() || size_class(want) < self.held_capacity() {
            let _ = self.move_partial(mem, want);
        }
    }

    /// Bytes the partial frame needs in all: header and message once its header is here, else
    /// a header.
    fn need(&self) -> usize {
        self.need.max(HEADER_LEN)
    }

    /// The buffer size for a partial frame of `have` bytes with `waiting` more known to have
    /// arrived: a read buffer for a frame that fits one (it and the frames after it are read
    /// together; [`settle`](Self::settle) shrinks it if the stream goes idle), else
    /// `have + waiting`, at least twice `have` and at most the whole frame.
    fn target(&self, have: usize, waiting: usize) -> usize {
        let need = self.need();
        if need <= self.rx_buffer {
            return self.rx_buffer.max(have + 1);
        }
        let lower = need.min(2 * have).max(have + 1);
        have.saturating_add(waiting).clamp(lower, need.max(lower))
    }

    /// Moves the partial frame's bytes into a new buffer of `want` bytes (at least the bytes).
    fn move_partial(&mut self, mem: &PinnedMemory, want: usize) -> Result<(), AllocError> {
        let have = self.partial_bytes();
        let mut next = mem.alloc(want.max(have))?;
        match self.cut.take() {
            Some((b, start, end)) => next.full_mut()[..have].copy_from_slice(&b[start..end]),
            None => {
                let b = self.buf.as_mut().expect("a partial frame's buffer");
                next.full_mut()[..have].copy_from_slice(&b.full_mut()[..have]);
            }
        }
        self.stats.gathered_bytes += have as u64;
        self.gathering = true;
        self.filled = have;
        self.buf = Some(next);
        Ok(())
    }

    /// Records that the last read put `n` bytes into [`space_for`](Self::space_for), and
    /// appends every frame now complete to `out`. Allocates nothing: the bytes of a frame cut
    /// by the end of the read stay in the read buffer until the next `space_for` or
    /// [`settle`](Self::settle). On an error the stream is unusable (close it); the frames
    /// before the bad header were delivered.
    pub fn filled(
        &mut self,
        n: usize,
        mem: &PinnedMemory,
        out: &mut Vec<(Msg, RcBuf)>,
    ) -> Result<(), DeframeError> {
        debug_assert!(self.cut.is_none(), "filled without space_for");
        let Some(mut buf) = self.buf.take() else {
            return Ok(());
        };
        let max = self
            .max_message_len
            .min(mem.max_item_size().saturating_sub(HEADER_LEN));
        let end = (self.filled + n).min(buf.capacity());
        // No complete frame yet: keep filling this buffer (moved to a larger one by the next
        // `space_for` when it is full).
        if end < HEADER_LEN {
            self.filled = end;
            self.need = 0;
            self.buf = Some(buf);
            return Ok(());
        }
        let (_, len) = parse_header(&buf.full_mut()[..HEADER_LEN], self.base, max)
            .map_err(DeframeError::Frame)?;
        if end < HEADER_LEN + len {
            self.filled = end;
            self.need = HEADER_LEN + len;
            self.buf = Some(buf);
            return Ok(());
        }
        buf.set_len(end);
        let buf = buf.freeze();
        let mut at = 0usize;
        self.need = 0;
        loop {
            let rest = end - at;
            if rest < HEADER_LEN {
                break;
            }
            let (msg, len) = parse_header(&buf[at..at + HEADER_LEN], self.base + at as u64, max)
                .map_err(DeframeError::Frame)?;
            if rest < HEADER_LEN + len {
                self.need = HEADER_LEN + len;
                break;
            }
            // In bounds (checked above), so only a saturated reference count fails.
            let Some(data) = buf
                .try_slice(at + HEADER_LEN, len)
                .map_err(|_| DeframeError::RefCount)?
            else {
                return Err(DeframeError::RefCount);
            };
            if at == 0 && self.gathering {
                self.stats.gathered += 1;
            }
            self.stats.messages += 1;
            out.push((msg, data));
            at += HEADER_LEN + len;
        }
        self.base += at as u64;
        self.filled = 0;
        self.gathering = false;
        if end > at {
            // A frame cut by the end of the data (its header, when complete, was checked by
            // the loop above): its bytes wait in this buffer.
            self.cut = Some((buf, at, end));
        }
        Ok(())
    }
}

/// The capacity the pool gives a request of `n` bytes (a power of two, at least 64).
fn size_class(n: usize) -> usize {
    n.max(64).next_power_of_two()
}

/// Why [`Deframer::filled`] failed.
#[derive(Debug)]
pub enum DeframeError {
    /// The stream is not valid framing.
    Frame(FrameError),
    /// No pinned buffer for the rest of a frame cut by a read.
    Alloc(AllocError),
    /// The receive buffer's reference count is saturated (more than 2^31 views alive).
    RefCount,
}

impl fmt::Display for DeframeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeframeError::Frame(e) => e.fmt(f),
            DeframeError::Alloc(e) => {
                write!(f, "no pinned buffer for a partly received frame: {e}")
            }
            DeframeError::RefCount => write!(f, "receive buffer reference count saturated"),
        }
    }
}

impl std::error::Error for DeframeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeframeError::Frame(e) => Some(e),
            DeframeError::Alloc(e) => Some(e),
            DeframeError::RefCount => None,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use cornflakes_mem::MemoryConfig;

    fn memory() -> PinnedMemory {
        PinnedMemory::new(MemoryConfig {
            max_item_size: 64 << 10,
            ..MemoryConfig::default()
        })
        .unwrap()
    }

    /// A stream of frames of these lengths (message `i` filled with `i + 1`), and the messages.
    fn stream(lens: &[usize]) -> (Vec<u8>, Vec<(Msg, Vec<u8>)>) {
        let mut s = Vec::new();
        let mut msgs = Vec::new();
        for (i, &n) in lens.iter().enumerate() {
            let msg = Msg::new(i as u32 * 7, i as u16).with_incarnation(0xabc0 + i as u64);
            let mut h = [0u8; HEADER_LEN];
            write_header(&mut h, msg, n as u32);
            s.extend_from_slice(&h);
            let body = vec![i as u8 + 1; n];
            s.extend_from_slice(&body);
            msgs.push((msg, body));
        }
        (s, msgs)
    }

    /// Feeds `chunks` as successive reads (each as large as the buffer allows).
    fn feed(
        d: &mut Deframer,
        mem: &PinnedMemory,
        chunks: &[&[u8]],
    ) -> Result<Vec<(Msg, RcBuf)>, DeframeError> {
        let mut out = Vec::new();
        for mut c in chunks.iter().copied() {
            while !c.is_empty() {
                let space = d.space(mem).unwrap();
                assert!(!space.is_empty());
                let k = space.len().min(c.len());
                space[..k].copy_from_slice(&c[..k]);
                d.filled(k, mem, &mut out)?;
                c = &c[k..];
            }
        }
        Ok(out)
    }

    fn check(got: &[(Msg, RcBuf)], want: &[(Msg, Vec<u8>)]) {
        assert_eq!(got.len(), want.len());
        for ((gm, gd), (wm, wd)) in got.iter().zip(want) {
            assert_eq!(gm, wm);
            assert_eq!(&gd[..], &wd[..], "message {wm:?}");
        }
    }

    #[test]
    fn round_trips_at_every_split_point() {
        let mem = memory();
        // Empty, small, one larger than the receive buffer, and one exactly filling it.
        let (s, want) = stream(&[0, 5, 300, 0, 2000, 1, 1024 - HEADER_LEN]);
        for split in 0..=s.len() {
            let mut d = Deframer::new(4096, 1024);
            let got = feed(&mut d, &mem, &[&s[..split], &s[split..]]).unwrap();
            check(&got, &want);
            assert_eq!(d.partial_bytes(), 0, "split {split}");
            assert_eq!(
                d.held_capacity(),
                0,
                "split {split}: a buffer held after the stream"
            );
            assert_eq!(d.stream_offset(), s.len() as u64);
        }
        // Two split points, every pair over a shorter stream.
        let (s, want) = stream(&[3, 0, 40, 17]);
        for a in 0..=s.len() {
            for b in a..=s.len() {
                let mut d = Deframer::new(4096, 64);
                let got = feed(&mut d, &mem, &[&s[..a], &s[a..b], &s[b..]]).unwrap();
                check(&got, &want);
            }
        }
    }

    #[test]
    fn byte_at_a_time_and_random_chunks_deliver_the_same() {
        use rand::{Rng, SeedableRng};
        let mem = memory();
        let (s, want) = stream(&[9, 4000, 0, 70, 12000, 3]);
        let mut d = Deframer::new(16000, 512);
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        check(&feed(&mut d, &mem, &bytes).unwrap(), &want);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(27);
        for round in 0..200 {
            let mut chunks = Vec::new();
            let mut at = 0;
            while at < s.len() {
                let k = rng.gen_range(1..=(s.len() - at).min(5000));
                chunks.push(&s[at..at + k]);
                at += k;
            }
            let mut d = Deframer::new(16000, 512);
            // Half the rounds settle after every chunk (the stream went idle), telling the
            // deframer how much of the chunk is still to come, and check the memory bound.
            if round % 2 == 0 {
                check(&feed(&mut d, &mem, &chunks).unwrap(), &want);
                continue;
            }
            let mut out = Vec::new();
            for c in chunks {
                let mut c = c;
                while !c.is_empty() {
                    let space = d.space_for(&mem, c.len()).unwrap();
                    let k = space.len().min(c.len());
                    space[..k].copy_from_slice(&c[..k]);
                    d.filled(k, &mem, &mut out).unwrap();
                    c = &c[k..];
                }
                d.settle(&mem);
                let p = d.partial_bytes();
                assert!(p == 0 || d.held_capacity() <= settled_bound(p).max(512));
                assert!(p > 0 || d.held_capacity() == 0);
            }
            check(&out, &want);
        }
    }

    #[test]
    fn a_frame_inside_one_read_is_a_view_of_the_receive_buffer() {
        let mem = memory();
        let (s, want) = stream(&[100, 200, 300]);
        let mut d = Deframer::new(4096, 4096);
        let got = feed(&mut d, &mem, &[&s]).unwrap();
        check(&got, &want);
        // All three are views of one item: same item, consecutive offsets, nothing gathered.
        let base = got[0].1.as_ptr() as usize - got[0].1.item_offset();
        for (_, b) in &got {
            assert_eq!(b.as_ptr() as usize - b.item_offset(), base);
        }
        assert_eq!(d.stats().gathered, 0);
        assert_eq!(d.stats().gathered_bytes, 0);
        assert_eq!(d.stats().messages, 3);
    }

    /// Feeds `data` in reads of at most `read` bytes, each told how many bytes wait after it
    /// (as a socket's `FIONREAD` would).
    fn feed_waiting(
        d: &mut Deframer,
        mem: &PinnedMemory,
        data: &[u8],
        read: usize,
    ) -> Vec<(Msg, RcBuf)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let space = d.space_for(mem, data.len() - at).unwrap();
            let k = space.len().min(read).min(data.len() - at);
            space[..k].copy_from_slice(&data[at..at + k]);
            d.filled(k, mem, &mut out).unwrap();
            at += k;
        }
        out
    }

    #[test]
    fn a_frame_cut_by_a_read_with_the_rest_waiting_is_gathered_once_into_one_item() {
        let mem = memory();
        let (s, want) = stream(&[50, 30000]);
        let mut d = Deframer::new(40000, 1024);
        // First read: the small frame and the start of the large one; the rest waits.
        let mut got = Vec::new();
        let space = d.space_for(&mem, 0).unwrap();
        space[..200].copy_from_slice(&s[..200]);
        d.filled(200, &mem, &mut got).unwrap();
        check(&got, &want[..1]);
        assert!(d.needs_buffer());
        assert_eq!(
            d.growth(&mem, s.len() - 200),
            (HEADER_LEN + 30000).next_power_of_two()
        );
        // The next reads fill one buffer sized for the frame, without further copies.
        let got = feed_waiting(&mut d, &mem, &s[200..], 700);
        check(&got, &want[1..]);
        let st = d.stats();
        assert_eq!(st.gathered, 1);
        assert_eq!(st.gathered_bytes, (200 - HEADER_LEN - 50) as u64);
        assert_eq!(d.held_capacity(), 0);
    }

    /// The bound a settled partial frame's buffer keeps: about twice its bytes, at least
    /// [`SETTLE_MIN`] (or the frame), rounded up to a size class.
    fn settled_bound(partial: usize) -> usize {
        size_class((2 * partial).max(SETTLE_MIN))
    }

    #[test]
    fn a_partial_frame_holds_memory_for_the_bytes_that_arrived_not_for_its_announced_length() {
        let mem = memory();
        let (s, want) = stream(&[60000]);
        let mut d = Deframer::new(64000, 8192);
        let mut got = Vec::new();
        // A slow sender: 100 bytes, then nothing waiting.
        let space = d.space_for(&mem, 0).unwrap();
        space[..100].copy_from_slice(&s[..100]);
        d.filled(100, &mem, &mut got).unwrap();
        assert_eq!(d.held_capacity(), 8192, "the read buffer it arrived in");
        d.settle(&mem);
        assert_eq!(d.held_capacity(), SETTLE_MIN, "compacted, not 60 KB");
        assert_eq!(d.partial_bytes(), 100);
        // Byte dribbles, each read alone: the buffer doubles as they arrive, never more.
        let mut at = 100;
        while at < 30000 {
            let k = 1 + at / 3;
            let k = k.min(30000 - at);
            let mut left = k;
            while left > 0 {
                let space = d.space_for(&mem, left).unwrap();
                let n = space.len().min(left);
                space[..n].copy_from_slice(&s[at..at + n]);
                d.filled(n, &mem, &mut got).unwrap();
                at += n;
                left -= n;
            }
            d.settle(&mem);
            assert!(
                d.held_capacity() <= settled_bound(at),
                "{} bytes held for {at} received",
                d.held_capacity()
            );
        }
        assert!(got.is_empty());
        // The rest at once: one buffer for the frame, delivered whole and right.
        let got = feed_waiting(&mut d, &mem, &s[at..], usize::MAX);
        check(&got, &want);
        assert_eq!(d.held_capacity(), 0);
    }

    #[test]
    fn the_header_is_the_28_byte_version_2_framing_header() {
        let msg = Msg::new(0x0102_0304, 0x0506).with_incarnation(0x1122_3344_5566_7788);
        let mut h = [0u8; HEADER_LEN];
        write_header(&mut h, msg, 9);
        assert_eq!(HEADER_LEN, 28);
        assert_eq!(
            h,
            [
                2, 0, 6, 5, 4, 3, 2, 1, 0, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0, // v1's fields
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // incarnation
            ]
        );
        assert_eq!(parse_header(&h, 0, 9), Ok((msg, 9)));
        // A version-1 stream (20-byte headers) is refused at its first header, whatever follows.
        let mut v1 = h;
        v1[0] = 1;
        assert_eq!(
            parse_header(&v1, 5, 100),
            Err(FrameError::BadHeader { at: 5 })
        );
        assert_eq!(
            parse_header(&h[..HEADER_LEN - 1], 0, 100),
            Err(FrameError::BadHeader { at: 0 })
        );
    }

    #[test]
    fn bad_headers_and_oversized_lengths_are_errors_with_their_offset() {
        let mem = memory();
        let (mut s, _) = stream(&[10, 10]);
        s[HEADER_LEN + 10] = 1; // the second header's version: a version-1 sender's
        let mut d = Deframer::new(100, 256);
        let mut out = Vec::new();
        let space = d.space(&mem).unwrap();
        space[..s.len()].copy_from_slice(&s);
        let e = d.filled(s.len(), &mem, &mut out).unwrap_err();
        assert_eq!(out.len(), 1, "the frame before the bad one is delivered");
        match e {
            DeframeError::Frame(FrameError::BadHeader { at }) => assert_eq!(at, 38),
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("offset 38"), "{e}");
        assert!(e.to_string().contains("version-2"), "{e}");

        for (field, value) in [(1usize, 1u8), (10, 2), (8, 1), (16, 1)] {
            let (mut s, _) = stream(&[10]);
            s[field] = value; // flags, segment count, index, offset
            let mut d = Deframer::new(100, 256);
            assert!(matches!(
                feed(&mut d, &mem, &[&s]),
                Err(DeframeError::Frame(FrameError::BadHeader { at: 0 }))
            ));
        }

        // A length prefix above the limit is refused as soon as the header is complete,
        // before any of its bytes are buffered.
        let mut h = [0u8; HEADER_LEN];
        write_header(&mut h, Msg::new(1, 1), 101);
        let mut d = Deframer::new(100, 256);
        let e = feed(&mut d, &mem, &[&h]).unwrap_err();
        assert!(matches!(
            e,
            DeframeError::Frame(FrameError::TooLong {
                at: 0,
                len: 101,
                max: 100
            })
        ));
        assert!(e.to_string().contains("above the limit of 100"), "{e}");
        // The pinned item bounds the length too, whatever the configured limit.
        write_header(&mut h, Msg::new(1, 1), u32::MAX);
        let mut d = Deframer::new(usize::MAX, 256);
        assert!(matches!(
            feed(&mut d, &mem, &[&h]),
            Err(DeframeError::Frame(FrameError::TooLong { .. }))
        ));
    }
}
