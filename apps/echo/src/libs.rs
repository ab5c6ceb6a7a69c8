//! The protobuf / Cap'n Proto / FlatBuffers modes, through crate `baselines`. Protobuf and
//! FlatBuffers reserialize into one pinned buffer; the server sends Cap'n Proto's reply as its
//! segments (`baselines::capnp_echo_sga`), the path that suits its output (paper §6.1.3).

use crate::shape::{Kind, ShapeSpec, ValueChecker};
use baselines::{Codec, CodecError, EchoMsg, Library, Shape};

/// One library's codec (not shared between threads).
pub struct LibCodec {
    codec: Box<dyn Codec + Send>,
}

/// The library shape of an echo message kind.
pub(crate) fn shape(kind: Kind) -> Shape {
    match kind {
        Kind::Single => Shape::Single,
        Kind::List => Shape::List,
        Kind::Tree(d) => Shape::Tree(d),
    }
}

impl LibCodec {
    /// The codec of `lib`.
    pub fn new(lib: Library) -> LibCodec {
        LibCodec { codec: lib.codec() }
    }

    /// Encodes request `id` of `spec` with values `vals` (back to back) into `out`.
    pub fn encode_request(
        &mut self,
        id: u64,
        spec: &ShapeSpec,
        vals: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let parts: Vec<&[u8]> = (0..spec.count)
            .map(|i| &vals[i * spec.len..(i + 1) * spec.len])
            .collect();
        let msg = EchoMsg {
            id: id as u32,
            shape: shape(spec.kind),
            vals: &parts,
        };
        let mut cap = vals.len() * 2 + 64 * spec.count + 1024;
        loop {
            out.resize(cap, 0);
            match self.codec.encode(&msg, out) {
                Ok(n) => {
                    out.truncate(n);
                    return Ok(());
                }
                Err(CodecError::BufferTooSmall { .. }) if cap < 1 << 24 => cap *= 2,
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// The server's step: deserialize `input` as `kind`, reserialize into `out`; returns
    /// the length written.
    pub fn echo(&mut self, kind: Kind, input: &[u8], out: &mut [u8]) -> Result<usize, String> {
        self.codec
            .echo(shape(kind), input, out)
            .map_err(|e| e.to_string())
    }

    /// Whether `payload` decodes as request `id` of `spec`.
    pub fn check(&mut self, id: u64, spec: &ShapeSpec, payload: &[u8]) -> bool {
        let mut c = ValueChecker::new(id, spec);
        match self
            .codec
            .decode(shape(spec.kind), payload, &mut |v| c.visit(v))
        {
            Ok(got) => got == id as u32 && c.finish(),
            Err(_) => false,
        }
    }
}
