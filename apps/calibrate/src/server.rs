//! The copy-threshold microbenchmark's server and client (paper §5; docs/calibration.md).
//!
//! The server holds a large array of pinned memory (default 10 × the last-level cache, so
//! segments are cold in cache as a key-value store's values would be) cut into
//! [`ARRAY_ITEM`]-byte pinned buffers. A request names a policy and K segments of S bytes by
//! their offsets in the array; the server answers with one Cornflakes `List` object holding the
//! K segments, built through the ordinary runtime API (`CFBytes::new` on a slice of pinned
//! memory) in an arena whose threshold is `usize::MAX` (**copy**: every segment copied into the
//! one transmit buffer) or `0` (**scatter-gather**: every segment recovered as a reference and
//! posted as its own descriptor). So the two policies differ only in the threshold, as the
//! paper's two configurations do.
//!
//! Request (little-endian): `k: u16, policy: u8, 0: u8, s: u32, k × offset: u64`. Offsets are
//! byte positions in the array; a segment must not cross an item boundary. Anything else is
//! counted as malformed and dropped. The reply has the same message type and id.

use std::io;
use std::net::SocketAddrV4;

use app_server::{AppCounters, Handler, Unanswered};
use cornflakes::{Arena, CFBytes, ConnId, Datapath, Msg, PinnedMemory, RcBuf, RxMsg};
use loadgen::{split_request_id, ClientTransport, Response, SeededRng};

use crate::schema::List;

/// Bytes per pinned buffer of the array (the runtime's default largest size class).
pub const ARRAY_ITEM: usize = 16 * 1024;
/// Segment offsets are multiples of this (a cache line, as an allocator would place values).
pub const SEGMENT_ALIGN: usize = 64;
/// Most segments one request may name.
pub const MAX_SEGMENTS: usize = 64;
/// Framing-header message type of calibration requests (echo shapes use 1..=15).
pub const CALIB_MSG_TYPE: u16 = 40;
/// Request header bytes before the offsets.
pub const REQUEST_HEADER: usize = 8;

/// How the server answers: copy every segment, or scatter-gather every segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Threshold `usize::MAX`: the segments are copied into one transmit buffer.
    Copy,
    /// Threshold 0: each segment is its own scatter-gather entry.
    ScatterGather,
}

impl Policy {
    /// Both, in the order they are measured.
    pub const BOTH: [Policy; 2] = [Policy::Copy, Policy::ScatterGather];

    /// The name in results (`copy` / `sg`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Copy => "copy",
            Policy::ScatterGather => "sg",
        }
    }

    fn code(self) -> u8 {
        match self {
            Policy::Copy => 0,
            Policy::ScatterGather => 1,
        }
    }

    fn from_code(c: u8) -> Option<Policy> {
        match c {
            0 => Some(Policy::Copy),
            1 => Some(Policy::ScatterGather),
            _ => None,
        }
    }

    /// The arena threshold that makes the runtime apply this policy.
    pub fn threshold(self) -> usize {
        match self {
            Policy::Copy => usize::MAX,
            Policy::ScatterGather => 0,
        }
    }
}

/// The array's byte at global offset `at`: a 251-periodic pattern, so any segment can be
/// checked against [`pattern`] with one comparison.
#[inline]
pub fn pattern_byte(at: usize) -> u8 {
    (at % 251) as u8
}

/// The bytes a segment of `len` bytes at `at` must hold.
pub fn pattern(at: usize, len: usize) -> Vec<u8> {
    (at..at + len).map(pattern_byte).collect()
}

/// One calibration cell: K segments of S bytes, answered by `policy`, from an array of
/// `items` buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// Segment size S in bytes.
    pub size: usize,
    /// Segments per request K.
    pub count: usize,
    /// The server's policy.
    pub policy: Policy,
    /// Buffers of [`ARRAY_ITEM`] bytes in the server's array.
    pub items: usize,
}

impl Cell {
    /// The offsets of request `id`: derived from the id alone, so the checker can recompute
    /// them. Each segment lies inside one item, at a multiple of [`SEGMENT_ALIGN`].
    pub fn offsets(&self, id: u64, out: &mut Vec<u64>) {
        let mut rng = SeededRng::new(id ^ 0x5eed_ca11_b4a7_e000);
        let slots = ((ARRAY_ITEM - self.size.min(ARRAY_ITEM)) / SEGMENT_ALIGN + 1) as u64;
        out.clear();
        for _ in 0..self.count {
            let item = rng.next_u64() % self.items.max(1) as u64;
            let slot = rng.next_u64() % slots;
            out.push(item * ARRAY_ITEM as u64 + slot * SEGMENT_ALIGN as u64);
        }
    }

    /// Encodes the request for `offsets`.
    pub fn encode(&self, offsets: &[u64], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
        out.push(self.policy.code());
        out.push(0);
        out.extend_from_slice(&(self.size as u32).to_le_bytes());
        for o in offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
    }

    /// Whether `payload` is the right answer to request `id`: a `List` with the id and the K
    /// segments' bytes.
    pub fn check(&self, id: u64, payload: &[u8], arena: &Arena, offsets: &mut Vec<u64>) -> bool {
        self.check_with_id(id, Some(id as u32), payload, arena, offsets)
    }

    /// [`Self::check`] for the segments of request `id`, and the `List` id when `want_id` is
    /// given (the emulated NIC rewrites message ids, so its replies are checked without).
    pub fn check_with_id(
        &self,
        id: u64,
        want_id: Option<u32>,
        payload: &[u8],
        arena: &Arena,
        offsets: &mut Vec<u64>,
    ) -> bool {
        let Ok(m) = List::deserialize(payload, arena) else {
            return false;
        };
        self.offsets(id, offsets);
        let vals = m.get_vals();
        want_id.is_none_or(|w| m.get_id() == w)
            && vals.len() == offsets.len()
            && vals.iter().zip(offsets.iter()).all(|(v, &o)| {
                let v = v.as_bytes();
                v.len() == self.size
                    && v.iter()
                        .enumerate()
                        .all(|(i, &b)| b == pattern_byte(o as usize + i))
            })
    }
}

/// A parsed request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The policy to answer with.
    pub policy: Policy,
    /// Segment size.
    pub size: usize,
    /// Where the segments are: (item, offset in the item).
    pub segments: Vec<(usize, usize)>,
}

/// Parses a request against an array of `items` buffers; `None` when it is malformed.
pub fn parse_request(data: &[u8], items: usize) -> Option<Request> {
    let mut segments = Vec::new();
    let (policy, size) = parse_into(data, items, &mut segments)?;
    Some(Request {
        policy,
        size,
        segments,
    })
}

fn parse_into(
    data: &[u8],
    items: usize,
    segments: &mut Vec<(usize, usize)>,
) -> Option<(Policy, usize)> {
    let head = data.get(..REQUEST_HEADER)?;
    let k = usize::from(u16::from_le_bytes([head[0], head[1]]));
    let policy = Policy::from_code(head[2])?;
    let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if k == 0 || k > MAX_SEGMENTS || size == 0 || size > ARRAY_ITEM {
        return None;
    }
    if data.len() != REQUEST_HEADER + 8 * k {
        return None;
    }
    segments.clear();
    for c in data[REQUEST_HEADER..].chunks_exact(8) {
        let off = u64::from_le_bytes(c.try_into().ok()?);
        let off = usize::try_from(off).ok()?;
        let (item, at) = (off / ARRAY_ITEM, off % ARRAY_ITEM);
        if item >= items || at + size > ARRAY_ITEM {
            return None;
        }
        segments.push((item, at));
    }
    Some((policy, size))
}

/// The [`ARRAY_ITEM`] buffers of an array of at least `array_bytes` (at least one).
pub fn items_for(array_bytes: usize) -> usize {
    array_bytes.div_ceil(ARRAY_ITEM).max(1)
}

/// Allocates the array — at least `array_bytes`, in whole [`ARRAY_ITEM`] buffers — from `mem`
/// and fills it with the [`pattern_byte`]s.
pub fn fill_array(mem: &PinnedMemory, array_bytes: usize) -> Result<Vec<RcBuf>, String> {
    let items = items_for(array_bytes);
    if mem.max_item_size() < ARRAY_ITEM {
        return Err(format!(
            "the datapath's largest pinned buffer is {} B; the array needs {ARRAY_ITEM} B items",
            mem.max_item_size()
        ));
    }
    // The pattern is 251-periodic: every item is a window of one table (memcpy speed).
    let table: Vec<u8> = (0..ARRAY_ITEM + 251).map(pattern_byte).collect();
    let mut array = Vec::with_capacity(items);
    for i in 0..items {
        let mut b = mem.alloc(ARRAY_ITEM).map_err(|e| {
            format!(
                "allocating the {} MiB array in pinned memory (item {i} of {items}): {e}",
                (items * ARRAY_ITEM) >> 20
            )
        })?;
        b.set_len(ARRAY_ITEM);
        let start = (i * ARRAY_ITEM) % 251;
        b.full_mut()[..ARRAY_ITEM].copy_from_slice(&table[start..start + ARRAY_ITEM]);
        array.push(b.freeze());
    }
    Ok(array)
}

/// The calibration server on one datapath queue.
pub type CalibServer<D> = app_server::Server<D, Calib>;

/// The calibration server's own counters: none; its replies are reported as `echoed=` (as
/// when it was part of the echo app, so its output reads as before).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replies;

impl AppCounters for Replies {
    const REPLIED: &'static str = "echoed";
    fn add(&mut self, _: &Replies) {}
    fn write(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Ok(())
    }
}

/// What the calibration server has seen ([`app_server::ServerStats`]).
pub type ServerStats = app_server::ServerStats<Replies>;

/// Calibration server cores over the socket datapath.
pub type ServerHandle = app_server::ServerHandle<Replies>;

/// A calibration server on `dp` holding an array of at least `array_bytes` (whole
/// [`ARRAY_ITEM`]s) allocated from the datapath's pinned memory and filled with the
/// [`pattern_byte`]s.
pub fn new<D: Datapath>(dp: D, array_bytes: usize) -> Result<CalibServer<D>, String> {
    let calib = Calib::new(dp.memory(), array_bytes)?;
    Ok(CalibServer::new(dp, calib))
}

/// A calibration server on `dp` over an array already made by [`fill_array`] from `dp`'s
/// memory (so it can be filled before the datapath starts receiving).
pub fn with_array<D: Datapath>(dp: D, array: Vec<RcBuf>) -> CalibServer<D> {
    let calib = Calib::with_array(dp.memory(), array);
    CalibServer::new(dp, calib)
}

/// How the calibration server answers: the array and one arena per policy. Every request is
/// timed (`work` is the time to build and queue each reply).
pub struct Calib {
    array: Vec<RcBuf>,
    copy_arena: Arena,
    sg_arena: Arena,
    segments: Vec<(usize, usize)>,
}

impl Calib {
    /// A handler holding an array of at least `array_bytes` from `mem` ([`fill_array`]).
    pub fn new(mem: &PinnedMemory, array_bytes: usize) -> Result<Self, String> {
        Ok(Self::with_array(mem, fill_array(mem, array_bytes)?))
    }

    /// A handler over an array already made by [`fill_array`] from `mem`.
    pub fn with_array(mem: &PinnedMemory, array: Vec<RcBuf>) -> Self {
        let copy_arena = Arena::with_memory(mem).with_threshold(Policy::Copy.threshold());
        let sg_arena = Arena::with_memory(mem).with_threshold(Policy::ScatterGather.threshold());
        Calib {
            array,
            copy_arena,
            sg_arena,
            segments: Vec::with_capacity(MAX_SEGMENTS),
        }
    }

    /// Buffers in the array.
    pub fn items(&self) -> usize {
        self.array.len()
    }
}

impl Handler for Calib {
    type Counters = Replies;

    fn label(&self) -> String {
        "calibrate".to_owned()
    }

    fn counters(&self) -> Replies {
        Replies
    }

    fn work_sample_every(&self) -> u64 {
        1
    }

    fn handle<D: Datapath>(&mut self, dp: &mut D, m: &RxMsg) -> Result<(), Unanswered> {
        if m.msg.ty != CALIB_MSG_TYPE {
            return Err(Unanswered::Malformed(format!(
                "message type {} is not a calibration request",
                m.msg.ty
            )));
        }
        let (policy, size) = parse_into(&m.data, self.array.len(), &mut self.segments)
            .ok_or_else(|| Unanswered::Malformed("bad calibration request".to_owned()))?;
        let arena = match policy {
            Policy::Copy => &mut self.copy_arena,
            Policy::ScatterGather => &mut self.sg_arena,
        };
        arena.reset();
        let arena = &*arena;
        let mut resp = List::new_in(arena);
        resp.set_id(m.msg.id);
        resp.init_vals(self.segments.len());
        for &(item, at) in &self.segments {
            // The ordinary API: a slice of pinned memory; the arena's threshold decides.
            let seg = &self.array[item].as_slice()[at..at + size];
            resp.get_mut_vals().append(CFBytes::new(seg, arena));
        }
        // The reply carries the request's type (the emulated NIC's clients check it).
        let reply = Msg {
            ty: CALIB_MSG_TYPE,
            ..m.msg
        };
        Ok(dp.send_object(m.conn, reply, &resp)?)
    }
}

/// One load-generator thread's connection to the calibration server: to one server core, or
/// spread round-robin over N cores (request `seq` to core `seq mod N`; each core holds its own
/// shard of the array, of the same number of items).
pub struct CalibClient<D: Datapath> {
    dp: D,
    conns: Vec<ConnId>,
    thread: usize,
    cell: Cell,
    offsets: Vec<u64>,
    buf: Vec<u8>,
    rx: Vec<RxMsg>,
}

impl<D: Datapath> CalibClient<D> {
    /// A client of `server` for `cell`, as load-generator thread `thread`.
    pub fn new(dp: D, server: SocketAddrV4, thread: usize, cell: Cell) -> io::Result<Self> {
        Self::spread(dp, &[server], thread, cell)
    }

    /// A client of the server cores at `cores`, request `seq` going to core `seq mod N`.
    pub fn spread(
        mut dp: D,
        cores: &[SocketAddrV4],
        thread: usize,
        cell: Cell,
    ) -> io::Result<Self> {
        let conns = cornflakes::datapath::Connect::connect_all(&mut dp, cores)?;
        Ok(CalibClient {
            dp,
            conns,
            thread,
            cell,
            offsets: Vec::new(),
            buf: Vec::new(),
            rx: Vec::with_capacity(64),
        })
    }
}

impl<D: Datapath + cornflakes::datapath::Connect> ClientTransport for CalibClient<D> {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        self.cell.offsets(id, &mut self.offsets);
        self.cell.encode(&self.offsets, &mut self.buf);
        let (_, seq) = split_request_id(id);
        let msg = Msg::new(seq as u32, CALIB_MSG_TYPE);
        let conn = self.conns[(seq % self.conns.len() as u64) as usize];
        let buf = &self.buf;
        bench_client::send_or_flush(&mut self.dp, |dp| dp.send_copy(conn, msg, buf))
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        bench_client::poll_replies(&mut self.dp, &mut self.rx, self.thread, on_response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(size: usize, count: usize) -> Cell {
        Cell {
            size,
            count,
            policy: Policy::ScatterGather,
            items: 8,
        }
    }

    #[test]
    fn requests_round_trip_and_stay_inside_items() {
        let c = cell(4096, 5);
        let (mut offs, mut buf) = (Vec::new(), Vec::new());
        for id in 0..200 {
            c.offsets(id, &mut offs);
            c.encode(&offs, &mut buf);
            let r = parse_request(&buf, 8).unwrap();
            assert_eq!(
                (r.policy, r.size, r.segments.len()),
                (Policy::ScatterGather, 4096, 5)
            );
            for (item, at) in r.segments {
                assert!(item < 8 && at + 4096 <= ARRAY_ITEM && at % SEGMENT_ALIGN == 0);
            }
        }
    }

    #[test]
    fn malformed_requests_are_rejected() {
        let c = cell(64, 2);
        let mut buf = Vec::new();
        c.encode(&[0, 64], &mut buf);
        assert!(parse_request(&buf, 8).is_some());
        assert!(parse_request(&buf[..buf.len() - 1], 8).is_none(), "short");
        assert!(parse_request(&buf[..4], 8).is_none(), "no header");
        let mut bad = buf.clone();
        bad[2] = 7;
        assert!(parse_request(&bad, 8).is_none(), "unknown policy");
        c.encode(&[8 * ARRAY_ITEM as u64, 0], &mut bad);
        assert!(parse_request(&bad, 8).is_none(), "past the array");
        c.encode(&[ARRAY_ITEM as u64 - 32, 0], &mut bad);
        assert!(parse_request(&bad, 8).is_none(), "crosses an item");
        c.encode(&[], &mut bad);
        assert!(parse_request(&bad, 8).is_none(), "no segments");
        c.encode(&[u64::MAX, 0], &mut bad);
        assert!(parse_request(&bad, 8).is_none(), "huge offset");
    }
}
