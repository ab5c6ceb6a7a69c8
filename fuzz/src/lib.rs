//! Shared pieces of the fuzz targets in `fuzz_targets/` (see docs/fuzzing.md): the table of
//! generated message types with their round-trip and differential oracles, the schema the
//! dynamic codec uses, a byte cursor for structure-aware inputs and a frame builder.
//!
//! Every oracle here panics (a finding) only when a property the project promises is broken:
//! a decoder or encoder panics, a value does not survive re-encoding, the generated and the
//! dynamic codec disagree, or a memory bound is exceeded. Rejected input is never a finding.

use std::path::PathBuf;
use std::sync::OnceLock;

use cornflakes::{Arena, CornflakesObj, PinnedMemory};
use cornflakes_codegen::dynamic::DynMessage;
use cornflakes_codegen::Schema;

pub mod frames;

/// Reads fuzzer bytes as a sequence of small fields; past the end everything reads as zero.
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (b, rest) = self.data.split_at(n);
        self.data = rest;
        b
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// Pinned memory shared by the iterations of one fuzzing process (mapping it is the slow part).
pub fn memory() -> &'static PinnedMemory {
    thread_local! {
        static MEM: &'static PinnedMemory =
            Box::leak(Box::new(PinnedMemory::with_defaults().expect("pinned memory")));
    }
    MEM.with(|m| *m)
}

/// The repository root (the fuzz crate lives in `<root>/fuzz`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The schemas of every generated type in [`MESSAGES`], loaded once for the dynamic codec.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let root = repo_root();
        let protos = root.join("crates/cornflakes-codegen/gen-tests/protos");
        let schemas = root.join("schemas");
        Schema::load(
            &[
                protos.join("features.proto"),
                protos.join("legacy.proto"),
                protos.join("examples.proto"),
                schemas.join("echo.proto"),
                schemas.join("kv.proto"),
            ],
            &[protos, schemas],
        )
        .expect("the fuzz schemas load")
    })
}

/// One generated message type and its oracles.
pub struct Gen {
    /// Full protobuf name (`kv.GetReq`).
    pub name: &'static str,
    /// Decodes `bytes` and, when they decode, checks the round trip (see [`roundtrip!`]);
    /// returns the canonical re-encoding, or `None` when the bytes were rejected.
    pub roundtrip: fn(&[u8]) -> Option<Vec<u8>>,
    /// Views `bytes` and reads every field through the view (see [`view!`]).
    pub view: fn(&[u8]),
}

/// The view oracle of one generated type `$ty` (lifetime elided): `M::view` of any bytes, and
/// every field read through the view's getters (`to_object_in`), never panics; whenever
/// `deserialize` accepts the bytes the view accepts them too and reads the same values (the
/// two objects encode to the same bytes). A view may accept what decode refuses (trailing
/// bytes, the budget, a malformed field it is not asked to read): not a finding.
#[macro_export]
macro_rules! view {
    ($ty:ty) => {
        |bytes: &[u8]| {
            use cornflakes::CornflakesObj as _;
            let arena = cornflakes::Arena::new();
            let decoded = <$ty>::deserialize(bytes, &arena);
            let viewed = <$ty>::view(bytes).and_then(|v| v.to_object_in(&arena));
            match (decoded, viewed) {
                (Ok(d), Ok(v)) => assert_eq!(
                    v.serialize_to_vec(),
                    d.serialize_to_vec(),
                    "{} read through a view differs from its decode",
                    stringify!($ty)
                ),
                (Ok(d), Err(e)) => panic!(
                    "{} decodes ({d:?}) but its view refuses it: {e}",
                    stringify!($ty)
                ),
                (Err(_), Ok(_)) => {}
                (Err(_), Err(e)) => assert!(!e.to_string().is_empty()),
            };
        }
    };
}

/// The round-trip oracle of one generated type `$ty` (lifetime elided):
///
/// 1. decode `bytes` from plain memory; rejection ends the check (but the error must format);
/// 2. read every field (`Debug` walks them all; strings also through `CFString::as_str`, which
///    must agree with a fresh UTF-8 check) and re-encode: `sizes()` must predict the length;
/// 3. the re-encoding must decode, to a value with the same fields (`Debug`) that re-encodes to
///    the same bytes (a fixpoint);
/// 4. the same bytes decoded zero-copy from a pinned packet (`deserialize_rcbuf`, with a small
///    threshold so long values reference the packet) must be accepted alike and hold the same
///    value (its encoding, with those values now in the zero-copy area, decodes to it).
#[macro_export]
macro_rules! roundtrip {
    ($ty:ty) => {
        $crate::roundtrip!(
            $ty,
            |_: &$ty, _: &mut dyn FnMut(&cornflakes::CFString<'_>)| {}
        )
    };
    ($ty:ty, $strings:expr) => {
        |bytes: &[u8]| -> Option<Vec<u8>> {
            use cornflakes::CornflakesObj as _;
            let strings = $strings;
            // `as_str` (validated once, then `from_utf8_unchecked`) agrees with a fresh check,
            // on first use and from its cache.
            let mut check = |s: &cornflakes::CFString<'_>| {
                let want = std::str::from_utf8(s.as_bytes()).ok();
                assert_eq!(s.as_str().ok(), want, "CFString::as_str");
                assert_eq!(s.as_str().ok(), want, "CFString::as_str, cached");
            };
            let arena = cornflakes::Arena::new();
            let first = <$ty>::deserialize(bytes, &arena);
            let pkt = $crate::memory().alloc_copy(bytes).ok();
            let zarena = cornflakes::Arena::with_memory($crate::memory()).with_threshold(4);
            let zc = pkt.as_ref().map(|p| <$ty>::deserialize_rcbuf(p, &zarena));
            let m = match first {
                Ok(m) => m,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    if let Some(Ok(z)) = zc {
                        panic!(
                            "{} rejected as bytes ({e}) but accepted from a packet: {z:?}",
                            stringify!($ty)
                        );
                    }
                    return None;
                }
            };
            strings(&m, &mut check);
            let shown = format!("{m:?}");
            let once = m.serialize_to_vec();
            assert_eq!(
                m.sizes().total(),
                once.len(),
                "sizes() of {} disagree with its encoding",
                stringify!($ty)
            );
            {
                let arena2 = cornflakes::Arena::new();
                let again = <$ty>::deserialize(&once, &arena2).unwrap_or_else(|e| {
                    panic!(
                        "{} re-encoded from {shown} does not decode: {e}",
                        stringify!($ty)
                    )
                });
                assert_eq!(format!("{again:?}"), shown, "value changed by a round trip");
                assert_eq!(
                    again.serialize_to_vec(),
                    once,
                    "re-encoding is not a fixpoint"
                );
            }
            if let Some(zc) = zc {
                let z = zc.unwrap_or_else(|e| {
                    panic!(
                        "{} accepted as bytes but rejected from a packet: {e}",
                        stringify!($ty)
                    )
                });
                strings(&z, &mut check);
                assert!(!format!("{z:?}").is_empty());
                // Long values now sit in the ZERO-COPY AREA, so the bytes differ; the value
                // must not: read back from plain bytes it encodes canonically as before.
                let zbytes = z.serialize_to_vec();
                assert_eq!(z.sizes().total(), zbytes.len());
                let arena3 = cornflakes::Arena::new();
                let plain = <$ty>::deserialize(&zbytes, &arena3).unwrap_or_else(|e| {
                    panic!(
                        "{} decoded from a packet re-encodes to bytes that do not decode: {e}",
                        stringify!($ty)
                    )
                });
                assert_eq!(
                    plain.serialize_to_vec(),
                    once,
                    "zero-copy decode of {} changed the value",
                    stringify!($ty)
                );
            }
            Some(once)
        }
    };
}

/// `"pkg.Name" => Type` and, for types with string fields, `[m, f => ...]`: an expression
/// calling `f` on every string of `m`, which the oracle then reads as `&str`.
macro_rules! messages {
    ($($name:literal => $ty:ty $([$m:ident, $f:ident => $body:expr])?),* $(,)?) => {
        /// Every generated message type the decoder targets exercise.
        pub const MESSAGES: &[Gen] = &[$(Gen {
            name: $name,
            view: view!($ty),
            roundtrip: roundtrip!(
                $ty
                $(, |$m: &$ty, $f: &mut dyn FnMut(&cornflakes::CFString<'_>)| {
                    $body;
                })?
            ),
        }),*];
    };
}

use cornflakes_codegen_tests::{echo, examples, features, kv, legacy};

messages! {
    // schemas/kv.proto
    "kv.GetReq" => kv::GetReq<'_> [m, f => f(m.get_key())],
    "kv.GetResp" => kv::GetResp<'_>,
    "kv.PutReq" => kv::PutReq<'_> [m, f => f(m.get_key())],
    "kv.PutResp" => kv::PutResp<'_>,
    "kv.GetMReq" => kv::GetMReq<'_> [m, f => m.get_keys().iter().for_each(f)],
    "kv.GetMResp" => kv::GetMResp<'_>,
    "kv.PutMReq" => kv::PutMReq<'_> [m, f => m.get_keys().iter().for_each(f)],
    "kv.PutMResp" => kv::PutMResp<'_>,
    "kv.GetListReq" => kv::GetListReq<'_> [m, f => f(m.get_key())],
    "kv.GetListResp" => kv::GetListResp<'_>,
    "kv.AppendReq" => kv::AppendReq<'_> [m, f => f(m.get_key())],
    "kv.AppendResp" => kv::AppendResp<'_>,
    // schemas/echo.proto
    "echo.Single" => echo::Single<'_>,
    "echo.List" => echo::List<'_>,
    "echo.Tree1" => echo::Tree1<'_>,
    "echo.Tree2" => echo::Tree2<'_>,
    "echo.Tree3" => echo::Tree3<'_>,
    "echo.Tree4" => echo::Tree4<'_>,
    "echo.Tree5" => echo::Tree5<'_>,
    // The rich schema: every scalar, > 32 fields, packed lists, oneofs, maps, nesting and
    // recursion (Everything), sparse and huge field numbers (Sparse, Far), empty messages.
    "features.Everything" => features::Everything<'_> [m, f => {
        f(m.get_text());
        f(m.get_name());
        m.get_r_text().iter().for_each(f)
    }],
    "features.Everything.Nested" => features::everything::Nested<'_>,
    "features.Everything.Nested.Deeper" => features::everything::nested::Deeper<'_>
        [m, f => m.get_notes().iter().for_each(f)],
    "features.Sparse" => features::Sparse<'_>,
    "features.Far" => features::Far<'_>,
    "features.Empty" => features::Empty<'_>,
    "features.Envelope" => features::Envelope<'_> [m, f => f(m.get_text())],
    "features.Tree" => features::Tree<'_>,
    // proto2 (defaults, required/optional) and the spec's worked examples.
    "legacy.Record" => legacy::Record<'_> [m, f => f(m.get_name())],
    "examples.GetM" => examples::GetM<'_>,
    "examples.Outer" => examples::Outer<'_>,
    // schemas/kv.proto, messages added after the first seeds (appended: a seed's first byte
    // keeps naming the same type)
    "kv.GetFromListReq" => kv::GetFromListReq<'_> [m, f => f(m.get_key())],
    "kv.GetFromListResp" => kv::GetFromListResp<'_>,
    "kv.DeleteReq" => kv::DeleteReq<'_> [m, f => f(m.get_key())],
    "kv.DeleteResp" => kv::DeleteResp<'_>,
}

/// Picks a message type from the first byte; the rest is the object.
pub fn split(data: &[u8]) -> Option<(&'static Gen, &[u8])> {
    let (&sel, bytes) = data.split_first()?;
    Some((&MESSAGES[sel as usize % MESSAGES.len()], bytes))
}

/// What the dynamic codec made of some bytes.
pub struct DynView {
    /// Its canonical encoding.
    pub bytes: Vec<u8>,
    /// Its JSON form, or why it has none (e.g. a string that is not UTF-8).
    pub json: Result<String, String>,
}

/// The dynamic codec's view of `bytes` as message `name`, or its decode error. When it
/// decodes, its own re-encoding must decode to the same value (JSON) and re-encode to the
/// same bytes.
pub fn dynamic(name: &str, bytes: &[u8]) -> Result<DynView, String> {
    let schema = schema();
    let id = schema
        .message(name)
        .unwrap_or_else(|| panic!("{name} is not in the fuzz schema"));
    let arena = Arena::new();
    let m = DynMessage::decode(schema, id, bytes, &arena).map_err(|e| e.to_string())?;
    let json = m.to_json().map_err(|e| e.to_string());
    let once = m.serialize_to_vec();
    assert_eq!(m.sizes().total(), once.len(), "dynamic sizes() of {name}");
    {
        let arena2 = Arena::new();
        let again = DynMessage::decode(schema, id, &once, &arena2)
            .unwrap_or_else(|e| panic!("dynamic re-encoding of {name} does not decode: {e}"));
        assert_eq!(
            again.to_json().map_err(|e| e.to_string()),
            json,
            "dynamic value of {name} changed by a round trip"
        );
        assert_eq!(
            again.serialize_to_vec(),
            once,
            "dynamic re-encoding is not a fixpoint"
        );
    }
    Ok(DynView { bytes: once, json })
}
