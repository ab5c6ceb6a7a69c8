//! The benchmark matrix of `cargo bench -p benches` and of the `count` command: Cornflakes
//! (hybrid, only-copy, only-scatter-gather) against prost, capnp and flatbuffers (crate
//! `baselines`), prost called directly (`prost-direct`, no `Codec` in between) and rkyv (zero-copy deserialization), on the paper's shapes, serializing and deserializing, with hot or cold values.
//!
//! - **serialize**: build the message from values in a [`Store`] and write it into a reused
//!   transmit buffer. Cornflakes builds as the KV store builds its replies, from the stored
//!   values' handles (`LeafList::append_rcbuf_ref`, `CFBytes::from_rcbuf_ref`: no pointer
//!   recovery; [`Build::Handles`]); [`library_built`] with [`Build::Slices`] builds from slices
//!   of them instead (`LeafList::append_ref`, `CFBytes::new_ref`: pointer recovery). Either
//!   way the store outlives the message, so a short value is borrowed and copied once, at
//!   send time, and no count is taken. For Cornflakes this is serialize-and-send up to the descriptors: sizes,
//!   header + copy area after a 42-byte packet header, one descriptor (address, length, a new
//!   reference) per zero-copy value; then the references are released (as the completion of
//!   the send does) and the object is dropped. The arena reset happens outside (once per
//!   message here; a server does it once per batch).
//! - **deserialize**: decode a received buffer (a pinned buffer, as a datapath delivers it)
//!   and read every field (each value's bytes as a slice, and the id); drop what was decoded.
//! - **hot**: the same few values every time; **cold**: values at random places in a store of
//!   [`COLD_BYTES`], much larger than the last-level cache, and as many distinct received
//!   buffers.

use std::fmt;
use std::hint::black_box;

use baselines::{CapnpCodec, Codec, EchoMsg, FlatbuffersCodec, ProstCodec, Shape as BShape};
use cornflakes::mem::MemoryConfig;
use cornflakes::wire::Demote;
use cornflakes::{Arena, CFBytes, CornflakesObj, DecodeObj, PinnedMemory, RcBuf};

/// The Cornflakes objects generated from `schemas/echo.proto`.
#[allow(missing_docs, clippy::all)]
pub mod schema {
    cornflakes::include_schema!("echo");
}

mod pd;
mod rk;
mod view;
pub use pd::ProstDirect;
pub use rk::Rkyv;
pub use view::CfView;

use schema::{List, Tree1, Tree2, Tree3, Tree4, Tree5};

/// Bytes of values in a cold store (4 × the 32 MiB last-level cache of the development
/// machine).
pub const COLD_BYTES: usize = 128 << 20;

/// Messages of a hot workload with random sizes (the Google distribution): a few, cycled.
const HOT_MESSAGES: usize = 64;

/// Packet header in front of the Cornflakes header area in the transmit buffer.
const PACKET_HEADER: usize = 42;

/// Transmit buffer size (the largest only-copy message: 16 values of up to 16 KiB).
const TX_BYTES: usize = 1 << 20;

/// A message shape of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A list of `count` values of `size` bytes.
    List {
        /// Values.
        count: usize,
        /// Bytes per value.
        size: usize,
    },
    /// A list of 1–16 values whose sizes follow the Google bytes-field distribution.
    Google,
    /// A full binary tree of this depth (1..=5) with `2^depth` leaves of `size` bytes.
    Tree {
        /// Depth.
        depth: u8,
        /// Bytes per leaf.
        size: usize,
    },
}

impl Shape {
    /// The matrix: the paper's list shapes, the Google distribution and trees of depth 1–5
    /// (64-byte leaves).
    pub fn all() -> Vec<Shape> {
        let mut v: Vec<Shape> = [(1, 64), (8, 64), (2, 2048), (1, 4096), (4, 1024)]
            .into_iter()
            .map(|(count, size)| Shape::List { count, size })
            .collect();
        v.push(Shape::Google);
        v.extend((1..=5).map(|depth| Shape::Tree { depth, size: 64 }));
        v
    }

    fn baseline(self) -> BShape {
        match self {
            Shape::Tree { depth, .. } => BShape::Tree(depth),
            _ => BShape::List,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::List { count, size } => write!(f, "{count}x{size}"),
            Shape::Google => write!(f, "google"),
            Shape::Tree { depth, size } => write!(f, "tree{depth}x{size}"),
        }
    }
}

impl std::str::FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Shape, String> {
        Shape::all()
            .into_iter()
            .find(|x| x.to_string() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Shape::all().iter().map(|x| x.to_string()).collect();
                format!("unknown shape {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// Hot or cold values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temp {
    /// The same few values (in cache).
    Hot,
    /// Random values of a store much larger than the last-level cache.
    Cold,
}

impl fmt::Display for Temp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Temp::Hot => "hot",
            Temp::Cold => "cold",
        })
    }
}

/// A small deterministic generator (xorshift64*), so every run draws the same workload.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

/// The Google fleet's bytes-field sizes (paper §2.1): `(share in percent, smallest, largest)`
/// per bucket; uniform within a bucket. The last bucket (> 4096) is capped at 16 KiB, the
/// largest pinned item.
pub const GOOGLE_BUCKETS: [(f64, usize, usize); 9] = [
    (33.8, 1, 8),
    (15.3, 9, 16),
    (7.6, 17, 22),
    (13.5, 23, 32),
    (10.6, 33, 64),
    (6.1, 65, 128),
    (8.0, 129, 512),
    (3.7, 513, 4096),
    (1.36, 4097, 16384),
];

/// One value size drawn from [`GOOGLE_BUCKETS`].
pub fn google_size(rng: &mut Rng) -> usize {
    let total: f64 = GOOGLE_BUCKETS.iter().map(|b| b.0).sum();
    let mut x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
    for (share, lo, hi) in GOOGLE_BUCKETS {
        if x < share {
            return rng.range(lo, hi);
        }
        x -= share;
    }
    let (_, lo, hi) = GOOGLE_BUCKETS[GOOGLE_BUCKETS.len() - 1];
    rng.range(lo, hi)
}

/// Values in pinned memory and the messages to build from them (lists of value indices).
pub struct Store {
    /// The pinned memory the values (and received buffers) live in.
    pub mem: PinnedMemory,
    /// The values.
    pub vals: Vec<RcBuf>,
    /// Each message's values, by index into `vals`.
    pub msgs: Vec<Vec<u32>>,
    /// The shape.
    pub shape: Shape,
}

fn pinned(bytes: usize) -> PinnedMemory {
    let config = MemoryConfig {
        // A received only-copy Google message holds up to 16 values of 16 KiB.
        max_item_size: 512 << 10,
        // Values round up to their size class (a 1-byte value takes 64), and the received
        // buffers of a cold run come on top.
        max_bytes: bytes.saturating_mul(8).max(256 << 20),
        ..MemoryConfig::default()
    };
    PinnedMemory::new(config).expect("pinned memory for the benchmark store")
}

impl Store {
    /// The values and messages of `shape` at `temp`.
    pub fn new(shape: Shape, temp: Temp) -> Store {
        let mut rng = Rng::new(0x5eed ^ shape.to_string().len() as u64);
        let mem = pinned(if temp == Temp::Cold { COLD_BYTES } else { 0 });
        let fill = |mem: &PinnedMemory, i: usize, len: usize| {
            let bytes: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            mem.alloc_copy(&bytes).expect("pinned value")
        };
        let mut vals = Vec::new();
        let mut msgs = Vec::new();
        match (shape, temp) {
            (Shape::Google, Temp::Hot) => {
                for _ in 0..HOT_MESSAGES {
                    let k = rng.range(1, 16);
                    let mut m = Vec::with_capacity(k);
                    for _ in 0..k {
                        m.push(vals.len() as u32);
                        vals.push(fill(&mem, vals.len(), google_size(&mut rng)));
                    }
                    msgs.push(m);
                }
            }
            (Shape::Google, Temp::Cold) => {
                let mut bytes = 0;
                while bytes < COLD_BYTES {
                    let len = google_size(&mut rng);
                    bytes += len.max(64);
                    vals.push(fill(&mem, vals.len(), len));
                }
                for _ in 0..4096 {
                    let k = rng.range(1, 16);
                    msgs.push(
                        (0..k)
                            .map(|_| rng.range(0, vals.len() - 1) as u32)
                            .collect(),
                    );
                }
            }
            (_, temp) => {
                let (count, size) = match shape {
                    Shape::List { count, size } => (count, size),
                    Shape::Tree { depth, size } => (1usize << depth, size),
                    Shape::Google => unreachable!("handled above"),
                };
                let n = match temp {
                    Temp::Hot => count,
                    Temp::Cold => (COLD_BYTES / size.max(64)).max(count),
                };
                vals = (0..n).map(|i| fill(&mem, i, size)).collect();
                msgs = match temp {
                    Temp::Hot => vec![(0..count as u32).collect()],
                    Temp::Cold => (0..4096)
                        .map(|_| (0..count).map(|_| rng.range(0, n - 1) as u32).collect())
                        .collect(),
                };
            }
        }
        Store {
            mem,
            vals,
            msgs,
            shape,
        }
    }

    /// The values of message `i` (cycled).
    pub fn msg(&self, i: usize) -> &[u32] {
        &self.msgs[i % self.msgs.len()]
    }
}

/// A library (or Cornflakes mode) under test.
pub trait Lib {
    /// Name in tables.
    fn name(&self) -> &'static str;

    /// Builds message `idx` of `store` and writes it into `tx`; returns the bytes (and, for
    /// Cornflakes, the descriptors) produced. Measured.
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize;

    /// Decodes `rx` (a message of `shape` in this library's format) and reads every field.
    /// Measured.
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize;

    /// Per-message housekeeping outside the measurement (the Cornflakes arena reset).
    fn after(&mut self) {}

    /// Serializes message `idx` contiguously at the start of `out` (for building received
    /// buffers); returns its length.
    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize;
}

/// How the Cornflakes libraries build a message from the store's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// From the values' handles (`&RcBuf`), as the KV store builds its replies: the
    /// threshold decides, no pointer recovery. The matrix's default.
    Handles,
    /// From slices of the values (`&[u8]`): the threshold, then pointer recovery for a value
    /// at least the threshold long (what an application holding only bytes pays).
    Slices,
}

/// Every library of the matrix, in table order (Cornflakes building from handles).
pub fn libraries(mem: &PinnedMemory) -> Vec<Box<dyn Lib>> {
    libraries_built(mem, Build::Handles)
}

/// Every library of the matrix, in table order, the Cornflakes ones building as `build` says
/// (the others have one way).
pub fn libraries_built(mem: &PinnedMemory, build: Build) -> Vec<Box<dyn Lib>> {
    vec![
        Box::new(Cf::new(mem, CfMode::Hybrid, build)),
        Box::new(Cf::new(mem, CfMode::Copy, build)),
        Box::new(Cf::new(mem, CfMode::Sg, build)),
        Box::new(CfView::new(mem, build)),
        Box::new(Baseline::new("prost", ProstCodec::new())),
        Box::new(ProstDirect::new()),
        Box::new(Baseline::new("capnp", CapnpCodec::new())),
        Box::new(Baseline::new("flatbuffers", FlatbuffersCodec::new())),
        Box::new(Rkyv),
    ]
}

/// Library names accepted by [`library`].
pub const LIBRARY_NAMES: [&str; 9] = [
    "cf-hybrid",
    "cf-copy",
    "cf-sg",
    "cf-view",
    "prost",
    "prost-direct",
    "capnp",
    "flatbuffers",
    "rkyv",
];

/// One library by name (Cornflakes building from handles).
pub fn library(name: &str, mem: &PinnedMemory) -> Option<Box<dyn Lib>> {
    library_built(name, mem, Build::Handles)
}

/// One library by name, a Cornflakes one building as `build` says.
pub fn library_built(name: &str, mem: &PinnedMemory, build: Build) -> Option<Box<dyn Lib>> {
    libraries_built(mem, build)
        .into_iter()
        .find(|l| l.name() == name)
}

/// Received buffers: `store`'s messages encoded by `lib`, each in its own pinned buffer.
pub fn received(lib: &mut dyn Lib, store: &Store, temp: Temp) -> Vec<RcBuf> {
    let mut scratch = tx_buffer();
    let n = match temp {
        Temp::Hot => store.msgs.len(),
        Temp::Cold => {
            // Enough messages of the average encoded length to fill COLD_BYTES.
            let sample = store.msgs.len().min(64);
            let bytes: usize = (0..sample)
                .map(|i| lib.encode(store, store.msg(i), &mut scratch).max(64))
                .sum();
            (COLD_BYTES * sample / bytes.max(1)).clamp(store.msgs.len().min(4096), 1 << 19)
        }
    };
    (0..n)
        .map(|i| {
            let len = lib.encode(store, store.msg(i), &mut scratch);
            store
                .mem
                .alloc_copy(&scratch[..len])
                .expect("pinned receive buffer")
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The copying libraries, through crate `baselines`.

/// prost, capnp or flatbuffers through their [`Codec`].
pub struct Baseline<C> {
    name: &'static str,
    codec: C,
}

impl<C: Codec> Baseline<C> {
    fn new(name: &'static str, codec: C) -> Self {
        Baseline { name, codec }
    }
}

/// At most this many values per message (a depth-5 tree).
const MAX_VALUES: usize = 32;

fn slices<'s>(store: &'s Store, idx: &[u32], out: &mut [&'s [u8]; MAX_VALUES]) -> usize {
    for (o, &i) in out.iter_mut().zip(idx) {
        *o = &store.vals[i as usize][..];
    }
    idx.len()
}

impl<C: Codec> Lib for Baseline<C> {
    fn name(&self) -> &'static str {
        self.name
    }

    #[inline(never)]
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize {
        let mut vals: [&[u8]; MAX_VALUES] = [&[]; MAX_VALUES];
        let n = slices(store, idx, &mut vals);
        let msg = EchoMsg {
            id: 42,
            shape: store.shape.baseline(),
            vals: &vals[..n],
        };
        self.codec.encode(&msg, tx).expect("message fits")
    }

    #[inline(never)]
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize {
        let mut n = 0;
        let id = self
            .codec
            .decode(shape.baseline(), rx, &mut |v| {
                n += black_box(v).len();
            })
            .expect("valid message");
        n + id as usize
    }

    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        self.serialize(store, idx, out)
    }
}

// ---------------------------------------------------------------------------------------------
// Cornflakes.

/// The Cornflakes ablations: which values go by reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfMode {
    /// Values of at least 512 bytes by reference, smaller ones copied (the default).
    Hybrid,
    /// Everything copied.
    Copy,
    /// Every pinned value by reference.
    Sg,
}

/// A transmit descriptor: address, length and the reference kept until completion.
struct Desc {
    addr: u64,
    len: u32,
    buf: Option<RcBuf>,
}

/// The descriptor ring: the head's descriptor, then one per zero-copy value. A fixed array, so
/// its length is a constant rather than a value the send keeps live (measured: 1 × 4096 B
/// 207 → 199, 4 × 1024 B 459 → 448 instructions per message when it was made).
type Ring = [Desc; MAX_VALUES + 1];

/// Cornflakes in one mode: an arena and a reused descriptor ring. It builds its messages from
/// the store's handles, or from slices of them ([`Build`]): one test per message chooses the
/// build, and one send follows either (two monomorphized sends would each be a call site of
/// the object's head writer, which LLVM then stops inlining: 1 × 64 B 227 instead of 168).
pub struct Cf {
    mode: CfMode,
    build: Build,
    arena: Arena,
    ring: Box<Ring>,
}

impl Cf {
    fn new(mem: &PinnedMemory, mode: CfMode, build: Build) -> Self {
        let threshold = match mode {
            CfMode::Hybrid => cornflakes::DEFAULT_THRESHOLD,
            CfMode::Copy => usize::MAX,
            CfMode::Sg => 0,
        };
        Cf {
            mode,
            build,
            arena: Arena::with_memory(mem).with_threshold(threshold),
            ring: Box::new(std::array::from_fn(|_| Desc {
                addr: 0,
                len: 0,
                buf: None,
            })),
        }
    }
}

/// Serialize-and-send of `m` up to the descriptors, then the completion releasing them. Each
/// zero-copy value is posted as its slot is written ([`CornflakesObj::write_head_and_leaves`]),
/// its descriptor taking a counted reference ([`cornflakes::PinnedRef::to_rcbuf`]), as a
/// datapath's send does: the object borrows its values and holds none.
#[inline(always)]
fn send<O: CornflakesObj>(m: O, tx: &mut [u8], ring: &mut Ring) -> usize {
    let s = m.sizes();
    ring[0].addr = tx.as_ptr() as u64;
    if s.zero_copy_count == 0 {
        // One descriptor: the head alone (no walk handing out leaves).
        let head = m
            .write_header_and_copy(&s, &mut tx[PACKET_HEADER..], Demote::NONE, 0)
            .expect("the transmit buffer holds the header and copy areas");
        ring[0].len = (PACKET_HEADER + head) as u32;
        return PACKET_HEADER + head;
    }
    let mut slot = 1;
    let head = m
        .write_head_and_leaves(
            &s,
            &mut tx[PACKET_HEADER..],
            Demote::NONE,
            0,
            &mut |b: cornflakes::PinnedRef<'_>| {
                let d = &mut ring[slot];
                d.addr = b.as_ptr() as u64;
                d.len = b.len() as u32;
                // The completion below emptied the slot (checked in debug builds), so the old
                // value is not tested for a reference to release; the new one is held until
                // the completion. A ring that assigns `Some` (mlx5's `slots[idx] = Some(buf)`)
                // pays that test, a few instructions a value.
                let old = d.buf.replace(b.to_rcbuf());
                debug_assert!(old.is_none(), "a descriptor slot still held a reference");
                std::mem::forget(old);
                slot += 1;
            },
        )
        .expect("the transmit buffer holds the header and copy areas");
    ring[0].len = (PACKET_HEADER + head) as u32;
    // Completion: the device is done, the references go.
    for d in &mut ring[1..slot] {
        d.buf = None;
    }
    PACKET_HEADER + head + s.zero_copy_len
}

/// A generated tree built from, and read into, its leaves in order.
trait TreeObj<'a>: CornflakesObj + DecodeObj<'a> {
    fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self;
    fn read(&self) -> usize;
}

impl<'a> TreeObj<'a> for Tree1<'a> {
    fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self {
        let mut t = Tree1::new_in(arena);
        t.set_left(next());
        t.set_right(next());
        t
    }

    fn read(&self) -> usize {
        black_box(self.get_left().as_bytes()).len() + black_box(self.get_right().as_bytes()).len()
    }
}

macro_rules! tree_node {
    ($t:ident, $child:ident) => {
        impl<'a> TreeObj<'a> for $t<'a> {
            fn build(arena: &'a Arena, next: &mut dyn FnMut() -> CFBytes<'a>) -> Self {
                let mut t = $t::new_in(arena);
                t.set_left($child::build(arena, next));
                t.set_right($child::build(arena, next));
                t
            }

            fn read(&self) -> usize {
                self.get_left().map_or(0, |l| l.read()) + self.get_right().map_or(0, |r| r.read())
            }
        }
    };
}

tree_node!(Tree2, Tree1);
tree_node!(Tree3, Tree2);
tree_node!(Tree4, Tree3);
tree_node!(Tree5, Tree4);

fn cf_tree<'a, T: TreeObj<'a>>(
    arena: &'a Arena,
    store: &'a Store,
    idx: &[u32],
    build: Build,
    tx: &mut [u8],
    ring: &mut Ring,
) -> usize {
    let mut it = idx.iter();
    let mut handles = || match it.next() {
        Some(&i) => CFBytes::from_rcbuf_ref(&store.vals[i as usize], arena),
        None => CFBytes::default(),
    };
    let mut it = idx.iter();
    let mut slices = || match it.next() {
        Some(&i) => CFBytes::new_ref(&store.vals[i as usize][..], arena),
        None => CFBytes::default(),
    };
    let next: &mut dyn FnMut() -> CFBytes<'a> = match build {
        Build::Handles => &mut handles,
        Build::Slices => &mut slices,
    };
    send(T::build(arena, next), tx, ring)
}

/// A `List` of the store's values `idx` (built where [`send`] takes it, so it is not moved):
/// from their handles (`append_rcbuf_ref`), or with `SLICES` from slices of them
/// (`append_ref`, pointer recovery).
#[inline(always)]
fn cf_list<'a, const SLICES: bool>(arena: &'a Arena, store: &'a Store, idx: &[u32]) -> List<'a> {
    let mut m = List::new_in(arena);
    m.set_id(42);
    m.init_vals(idx.len());
    let vals = m.get_mut_vals();
    for &i in idx {
        let v = &store.vals[i as usize];
        if SLICES {
            vals.append_ref(&v[..], arena);
        } else {
            vals.append_rcbuf_ref(v, arena);
        }
    }
    m
}

fn cf_read_tree<'a, T: TreeObj<'a>>(rx: &'a RcBuf, arena: &'a Arena) -> usize {
    T::deserialize_rcbuf(rx, arena)
        .expect("valid message")
        .read()
}

impl Lib for Cf {
    fn name(&self) -> &'static str {
        match self.mode {
            CfMode::Hybrid => "cf-hybrid",
            CfMode::Copy => "cf-copy",
            CfMode::Sg => "cf-sg",
        }
    }

    #[inline(never)]
    fn serialize(&mut self, store: &Store, idx: &[u32], tx: &mut [u8]) -> usize {
        let arena = &self.arena;
        let ring = &mut self.ring;
        let build = self.build;
        match store.shape {
            Shape::Tree { depth: 1, .. } => cf_tree::<Tree1>(arena, store, idx, build, tx, ring),
            Shape::Tree { depth: 2, .. } => cf_tree::<Tree2>(arena, store, idx, build, tx, ring),
            Shape::Tree { depth: 3, .. } => cf_tree::<Tree3>(arena, store, idx, build, tx, ring),
            Shape::Tree { depth: 4, .. } => cf_tree::<Tree4>(arena, store, idx, build, tx, ring),
            Shape::Tree { .. } => cf_tree::<Tree5>(arena, store, idx, build, tx, ring),
            _ => {
                let m = match build {
                    Build::Handles => cf_list::<false>(arena, store, idx),
                    Build::Slices => cf_list::<true>(arena, store, idx),
                };
                send(m, tx, ring)
            }
        }
    }

    #[inline(never)]
    fn deserialize(&mut self, shape: Shape, rx: &RcBuf) -> usize {
        let arena = &self.arena;
        match shape {
            Shape::Tree { depth: 1, .. } => cf_read_tree::<Tree1>(rx, arena),
            Shape::Tree { depth: 2, .. } => cf_read_tree::<Tree2>(rx, arena),
            Shape::Tree { depth: 3, .. } => cf_read_tree::<Tree3>(rx, arena),
            Shape::Tree { depth: 4, .. } => cf_read_tree::<Tree4>(rx, arena),
            Shape::Tree { .. } => cf_read_tree::<Tree5>(rx, arena),
            _ => {
                let m = List::deserialize_rcbuf(rx, arena).expect("valid message");
                let mut n = m.get_id() as usize;
                for v in m.get_vals().iter() {
                    n += black_box(v.as_bytes()).len();
                }
                n
            }
        }
    }

    fn after(&mut self) {
        self.arena.reset();
    }

    fn encode(&mut self, store: &Store, idx: &[u32], out: &mut [u8]) -> usize {
        let arena = Arena::new();
        let mut it = idx.iter();
        let mut next = || {
            let v = it.next().map_or(&[][..], |&i| &store.vals[i as usize][..]);
            CFBytes::new(v, &arena)
        };
        match store.shape {
            Shape::Tree { depth: 1, .. } => Tree1::build(&arena, &mut next).serialize_into(out),
            Shape::Tree { depth: 2, .. } => Tree2::build(&arena, &mut next).serialize_into(out),
            Shape::Tree { depth: 3, .. } => Tree3::build(&arena, &mut next).serialize_into(out),
            Shape::Tree { depth: 4, .. } => Tree4::build(&arena, &mut next).serialize_into(out),
            Shape::Tree { .. } => Tree5::build(&arena, &mut next).serialize_into(out),
            _ => {
                let mut m = List::new_in(&arena);
                m.set_id(42);
                m.init_vals(idx.len());
                for _ in idx {
                    m.get_mut_vals().append(next());
                }
                m.serialize_into(out)
            }
        }
        .expect("message fits the scratch buffer")
    }
}

/// A transmit buffer for [`Lib::serialize`].
pub fn tx_buffer() -> Vec<u8> {
    vec![0u8; TX_BYTES]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_round_trips_every_shape() {
        for shape in Shape::all() {
            let store = Store::new(shape, Temp::Hot);
            let mut tx = tx_buffer();
            for mut lib in libraries(&store.mem) {
                let rx = received(lib.as_mut(), &store, Temp::Hot);
                for (i, r) in rx.iter().enumerate().take(4) {
                    let want: usize = store
                        .msg(i)
                        .iter()
                        .map(|&v| store.vals[v as usize].len())
                        .sum();
                    let got = lib.deserialize(shape, r);
                    lib.after();
                    // Reads add the id (42); the Cornflakes and rkyv trees have none.
                    let no_id = lib.name().starts_with("cf") || lib.name() == "rkyv";
                    let id = if matches!(shape, Shape::Tree { .. }) && no_id {
                        0
                    } else {
                        42
                    };
                    assert_eq!(got, want + id, "{} {shape} message {i}", lib.name());
                    assert!(lib.serialize(&store, store.msg(i), &mut tx) >= want.min(1));
                    lib.after();
                }
            }
        }
    }

    #[test]
    fn lists_built_from_handles_or_slices_serialize_every_value() {
        // The serialize path builds its lists with `LeafList::append_rcbuf_ref` (handles) or
        // `append_ref` (slices, pointer recovery): each value is borrowed or referenced by its
        // length, the two paths build the same list (same kinds, same bytes in place, same
        // sizes), and the message (header and copy area, then the zero-copy values) decodes to
        // the store's values.
        for shape in Shape::all() {
            if matches!(shape, Shape::Tree { .. }) {
                continue;
            }
            let store = Store::new(shape, Temp::Hot);
            for threshold in [0, cornflakes::DEFAULT_THRESHOLD, usize::MAX] {
                let arena = Arena::with_memory(&store.mem).with_threshold(threshold);
                for i in 0..4 {
                    let idx = store.msg(i);
                    let m = cf_list::<false>(&arena, &store, idx);
                    let by_slices = cf_list::<true>(&arena, &store, idx);
                    assert_eq!(m.sizes(), by_slices.sizes(), "{shape} {threshold}");
                    let zero_copy = idx
                        .iter()
                        .filter(|&&v| store.vals[v as usize].len() >= threshold.max(1))
                        .count();
                    assert_eq!(m.sizes().zero_copy_count, zero_copy, "{shape} {threshold}");
                    let pairs = m.get_vals().iter().zip(by_slices.get_vals().iter());
                    for (&v, (got, other)) in idx.iter().zip(pairs) {
                        let want = &store.vals[v as usize];
                        assert_eq!(got.ptr().is_zero_copy(), want.len() >= threshold.max(1));
                        assert_eq!(got.ptr().is_zero_copy(), other.ptr().is_zero_copy());
                        // Referenced or borrowed in place, never copied into the arena.
                        assert_eq!(got.as_bytes().as_ptr(), want.as_ptr());
                        assert_eq!(other.as_bytes().as_ptr(), want.as_ptr());
                        // The object takes no count.
                        assert_eq!(want.ref_count(), 1);
                    }
                    let wire = m.serialize_to_vec();
                    assert_eq!(wire, by_slices.serialize_to_vec(), "{shape} {threshold}");
                    let back = List::deserialize_bytes(&wire, &arena).expect("decodes");
                    assert_eq!(back.get_id(), 42);
                    assert_eq!(back.get_vals().len(), idx.len());
                    for (&v, got) in idx.iter().zip(back.get_vals().iter()) {
                        assert_eq!(got.as_bytes(), &store.vals[v as usize][..], "{shape}");
                        assert_eq!(store.vals[v as usize].ref_count(), 1, "released");
                    }
                }
            }
        }
    }

    #[test]
    fn both_builds_send_the_same_bytes_and_descriptors() {
        // `Build::Handles` and `Build::Slices` write the same head and post the same
        // descriptors (address and length) for every shape and mode, and every reference a
        // descriptor took is released at the completion.
        for shape in Shape::all() {
            let store = Store::new(shape, Temp::Hot);
            for mode in [CfMode::Hybrid, CfMode::Copy, CfMode::Sg] {
                let mut a = Cf::new(&store.mem, mode, Build::Handles);
                let mut b = Cf::new(&store.mem, mode, Build::Slices);
                let (mut ta, mut tb) = (tx_buffer(), tx_buffer());
                for i in 0..4 {
                    let idx = store.msg(i);
                    let n = a.serialize(&store, idx, &mut ta);
                    assert_eq!(n, b.serialize(&store, idx, &mut tb), "{mode:?} {shape} {i}");
                    let head = a.ring[0].len as usize;
                    assert_eq!(head, b.ring[0].len as usize);
                    assert_eq!(ta[..head], tb[..head], "{mode:?} {shape} {i}");
                    let posted = idx.len() + 1;
                    let da = a.ring[..posted]
                        .iter()
                        .map(|d| (d.addr, d.len, d.buf.is_some()));
                    let db = b.ring[..posted]
                        .iter()
                        .map(|d| (d.addr, d.len, d.buf.is_some()));
                    // The head's descriptor points into each one's own transmit buffer.
                    assert!(da.skip(1).eq(db.skip(1)), "{mode:?} {shape} {i}");
                    if mode == CfMode::Sg {
                        // Every value is posted: the comparison is of real descriptors.
                        assert!(a.ring[1..posted].iter().all(|d| d.len > 0 && d.addr != 0));
                    }
                    a.after();
                    b.after();
                    assert!(store.vals.iter().all(|v| v.ref_count() == 1));
                }
            }
        }
    }

    #[test]
    fn google_sizes_follow_the_buckets() {
        let mut rng = Rng::new(7);
        let n = 100_000;
        let small = (0..n).filter(|_| google_size(&mut rng) <= 8).count();
        let share = small as f64 / n as f64;
        assert!((0.32..0.36).contains(&share), "{share}");
        let mut rng = Rng::new(9);
        assert!((0..n)
            .map(|_| google_size(&mut rng))
            .all(|s| (1..=16384).contains(&s)));
    }

    #[test]
    fn the_largest_message_fits_a_receive_buffer() {
        let store = Store::new(Shape::Google, Temp::Hot);
        let largest = vec![7u8; 16 * 16384 + 4096];
        assert!(store.mem.alloc_copy(&largest).is_ok());
    }

    #[test]
    fn shapes_parse_and_print() {
        for s in Shape::all() {
            assert_eq!(s.to_string().parse::<Shape>(), Ok(s));
        }
        assert!("3x3".parse::<Shape>().is_err());
    }
}
