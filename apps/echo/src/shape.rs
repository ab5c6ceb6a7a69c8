//! Message shapes (one bytes field, a list of K fields, a tree of depth 1–5) and the values a
//! request of a given id carries, so the client can check every response without keeping what
//! it sent.

use std::fmt;
use std::str::FromStr;

/// Deepest tree (`schemas/echo.proto` defines `Tree1` … `Tree5`).
pub const MAX_TREE_DEPTH: u8 = 5;

/// Most values in one message (a list's K). Every datapath we run has at least 8 scatter-gather
/// entries per frame; the zero-copy modes demote entries beyond that, so this only bounds the
/// work a forged message can ask for.
pub const MAX_VALUES: usize = 256;

/// How a message arranges its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `Single { bytes val }`: one value.
    Single,
    /// `List { uint32 id; repeated bytes vals }`: any number of values.
    List,
    /// `TreeD`: a full binary tree of depth D with `2^D` byte leaves.
    Tree(u8),
}

impl Kind {
    /// The message type carried in the framing header (so the server knows what to decode).
    pub fn msg_type(self) -> u16 {
        match self {
            Kind::Single => 1,
            Kind::List => 2,
            Kind::Tree(d) => 10 + u16::from(d),
        }
    }

    /// The kind a framing-header message type names, if any.
    pub fn from_msg_type(ty: u16) -> Option<Kind> {
        match ty {
            1 => Some(Kind::Single),
            2 => Some(Kind::List),
            11..=15 => Some(Kind::Tree((ty - 10) as u8)),
            _ => None,
        }
    }

    /// Number of values the kind requires (`None`: a list takes any number).
    pub fn required_values(self) -> Option<usize> {
        match self {
            Kind::Single => Some(1),
            Kind::List => None,
            Kind::Tree(d) => Some(1 << d),
        }
    }

    /// Whether `n` values fit this kind.
    pub fn accepts(self, n: usize) -> bool {
        n <= MAX_VALUES
            && match self.required_values() {
                Some(r) => r == n,
                None => true,
            }
    }
}

/// A concrete message shape: the kind, how many values and how long each is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeSpec {
    /// Arrangement of the values.
    pub kind: Kind,
    /// Number of values (1 for single, K for a list, `2^D` for a tree).
    pub count: usize,
    /// Bytes per value.
    pub len: usize,
}

impl ShapeSpec {
    /// One value of `len` bytes.
    pub fn single(len: usize) -> ShapeSpec {
        ShapeSpec {
            kind: Kind::Single,
            count: 1,
            len,
        }
    }

    /// A list of `count` values of `len` bytes.
    pub fn list(count: usize, len: usize) -> ShapeSpec {
        ShapeSpec {
            kind: Kind::List,
            count,
            len,
        }
    }

    /// A tree of depth `depth` (1..=5) with `len`-byte leaves.
    pub fn tree(depth: u8, len: usize) -> ShapeSpec {
        ShapeSpec {
            kind: Kind::Tree(depth),
            count: 1 << depth,
            len,
        }
    }

    /// Total value bytes.
    pub fn payload_bytes(&self) -> usize {
        self.count * self.len
    }
}

/// The default shape of the paper's headline echo comparison: 2 × 2048 B.
impl Default for ShapeSpec {
    fn default() -> Self {
        ShapeSpec::list(2, 2048)
    }
}

impl fmt::Display for ShapeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Single => write!(f, "single-{}", self.len),
            Kind::List => write!(f, "list-{}x{}", self.count, self.len),
            Kind::Tree(d) => write!(f, "tree{d}-{}", self.len),
        }
    }
}

impl FromStr for ShapeSpec {
    type Err = String;

    /// Parses `single-N`, `list-KxN` or `treeD-N` (N bytes per value).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("bad shape {s:?}: expected single-N, list-KxN or treeD-N (D in 1..=5)");
        let (kind, size) = s.split_once('-').ok_or_else(bad)?;
        let num = |t: &str| t.parse::<usize>().map_err(|_| bad());
        let spec = match kind {
            "single" => ShapeSpec::single(num(size)?),
            "list" => {
                let (k, n) = size.split_once('x').ok_or_else(bad)?;
                ShapeSpec::list(num(k)?, num(n)?)
            }
            _ => {
                let d: u8 = kind
                    .strip_prefix("tree")
                    .and_then(|d| d.parse().ok())
                    .filter(|d| (1..=MAX_TREE_DEPTH).contains(d))
                    .ok_or_else(bad)?;
                ShapeSpec::tree(d, num(size)?)
            }
        };
        if spec.count == 0 || spec.count > MAX_VALUES {
            return Err(format!("{s}: between 1 and {MAX_VALUES} values"));
        }
        Ok(spec)
    }
}

/// The 8-byte word value `index` of request `id` repeats. Every value of every request differs,
/// so a response echoing another request's (or another field's) bytes is caught.
#[inline]
fn word(id: u64, index: usize) -> [u8; 8] {
    (id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (index as u64 + 1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
    .to_le_bytes()
}

/// Writes value `index` of request `id` into `out` (its length is the value's length).
pub fn fill_value(id: u64, index: usize, out: &mut [u8]) {
    let w = word(id, index);
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&w);
    }
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&w[..n]);
}

/// Whether `got` is exactly value `index` of request `id` with `len` bytes.
pub fn check_value(id: u64, index: usize, len: usize, got: &[u8]) -> bool {
    if got.len() != len {
        return false;
    }
    let w = word(id, index);
    let mut chunks = got.chunks_exact(8);
    let body = chunks.all(|c| c == w);
    let rest = chunks.remainder();
    body && rest == &w[..rest.len()]
}

/// All values of request `id`, back to back, into `out` (resized); value `i` is at
/// `i * spec.len`.
pub fn fill_values(id: u64, spec: &ShapeSpec, out: &mut Vec<u8>) {
    out.resize(spec.payload_bytes(), 0);
    if spec.len == 0 {
        return;
    }
    for (i, chunk) in out.chunks_exact_mut(spec.len).enumerate() {
        fill_value(id, i, chunk);
    }
}

/// Checks the values of one response as they are visited in order.
#[derive(Debug)]
pub struct ValueChecker<'s> {
    id: u64,
    spec: &'s ShapeSpec,
    seen: usize,
    ok: bool,
}

impl<'s> ValueChecker<'s> {
    /// A checker for the values of request `id`.
    pub fn new(id: u64, spec: &'s ShapeSpec) -> Self {
        ValueChecker {
            id,
            spec,
            seen: 0,
            ok: true,
        }
    }

    /// Checks the next value.
    pub fn visit(&mut self, v: &[u8]) {
        self.ok &= self.seen < self.spec.count && check_value(self.id, self.seen, self.spec.len, v);
        self.seen += 1;
    }

    /// Whether every value was right and none was missing.
    pub fn finish(&self) -> bool {
        self.ok && self.seen == self.spec.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_print() {
        for s in [
            "single-2048",
            "list-2x2048",
            "tree1-64",
            "tree5-100",
            "list-1x0",
        ] {
            assert_eq!(s.parse::<ShapeSpec>().unwrap().to_string(), s);
        }
        for s in [
            "tree6-8",
            "tree0-8",
            "list-2",
            "list-0x8",
            "single",
            "pair-8",
            "list-300x8",
        ] {
            assert!(s.parse::<ShapeSpec>().is_err(), "{s}");
        }
        assert_eq!("tree3-9".parse::<ShapeSpec>().unwrap().count, 8);
    }

    #[test]
    fn message_types_round_trip() {
        for k in [Kind::Single, Kind::List, Kind::Tree(1), Kind::Tree(5)] {
            assert_eq!(Kind::from_msg_type(k.msg_type()), Some(k));
        }
        assert_eq!(Kind::from_msg_type(0), None);
        assert_eq!(Kind::from_msg_type(16), None);
    }

    #[test]
    fn values_differ_by_id_and_index_and_check() {
        let mut a = vec![0; 13];
        fill_value(7, 0, &mut a);
        assert!(check_value(7, 0, 13, &a));
        assert!(!check_value(8, 0, 13, &a));
        assert!(!check_value(7, 1, 13, &a));
        assert!(!check_value(7, 0, 13, &a[..12]));
        assert!(check_value(7, 0, 12, &a[..12]));
        a[12] ^= 1;
        assert!(!check_value(7, 0, 13, &a));
    }

    #[test]
    fn value_checker_wants_every_value_once() {
        let spec = ShapeSpec::list(2, 10);
        let mut buf = Vec::new();
        fill_values(3, &spec, &mut buf);
        let mut c = ValueChecker::new(3, &spec);
        c.visit(&buf[..10]);
        assert!(!c.finish());
        c.visit(&buf[10..]);
        assert!(c.finish());
        c.visit(&buf[10..]);
        assert!(!c.finish());
    }
}
