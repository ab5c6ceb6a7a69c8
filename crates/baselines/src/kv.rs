//! The key-value store's messages in protobuf, Cap'n Proto and FlatBuffers (apps/kv-store,
//! paper §6.2), from `schemas/kv.{proto,capnp,fbs}`: one request and one response message for
//! every operation (`op` is the KV store's message type).
//!
//! - [`KvCodec::with_request`] decodes a request and shows it to the caller as a
//!   [`KvRequestView`] (borrowing the decoded message or the input).
//! - [`KvCodec::encode_response`] serializes a response straight into the caller's transmit
//!   buffer (a pinned buffer in the KV server), so the only copies are the library's own.
//! - [`KvCodec::encode_request`] and [`KvCodec::decode_response`] are the client's side.
//!
//! **Per request, a server path allocates only what the library forces** (checked by
//! `tests/alloc.rs` with a counting allocator, per library and operation): the request
//! view's key and value lists are recycled between requests ([`recycle`]); Cap'n Proto
//! reads in place and builds its response in reused scratch words; FlatBuffers verifies
//! in place and reuses its builder and offset list; prost decodes into a reused message and
//! encodes from reused value buffers — but its decoded message owns a `String` per key and a
//! `Bytes` per value (prost 0.14 decodes a `bytes` field from a `&[u8]` through
//! `Buf::copy_to_bytes`; the request's values are generated as `bytes::Bytes`, so that copy
//! is the only one, where a `Vec<u8>` field would copy it again): one allocation per key and
//! one per value (the library's owned types force them); a Cap'n Proto `Builder` allocates
//! its segment table once per message.
//!
//! Malformed input is an error, never a panic (FlatBuffers input is verified; Cap'n Proto is
//! read with a traversal limit proportional to the input).

use crate::shape::CodecError;
use crate::Library;

/// A decoded request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KvRequestView<'a> {
    /// Request id.
    pub id: u32,
    /// The operation (the KV store's message type).
    pub op: u16,
    /// Keys, in order.
    pub keys: Vec<&'a str>,
    /// Values, in order.
    pub vals: Vec<&'a [u8]>,
    /// List index (`get_from_list`).
    pub index: u32,
}

/// A response to serialize.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KvResponseView<'a> {
    /// Request id.
    pub id: u32,
    /// Status number (`schemas/kv.proto`).
    pub status: i32,
    /// Values returned.
    pub vals: Vec<&'a [u8]>,
    /// `getm`: one status per key.
    pub statuses: Vec<i32>,
}

/// A decoded response, owned (the client keeps it).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KvResponse {
    /// Request id.
    pub id: u32,
    /// Status number.
    pub status: i32,
    /// Values returned.
    pub vals: Vec<Vec<u8>>,
    /// `getm`: one status per key.
    pub statuses: Vec<i32>,
}

/// One library's encoding of the KV messages.
pub trait KvCodec {
    /// Which library this is.
    fn library(&self) -> Library;
    /// Serializes `req` into `out` (cleared first).
    fn encode_request(&mut self, req: &KvRequestView<'_>, out: &mut Vec<u8>);
    /// Decodes `input` and calls `f` with the request.
    fn with_request(
        &mut self,
        input: &[u8],
        f: &mut dyn FnMut(&KvRequestView<'_>),
    ) -> Result<(), CodecError>;
    /// An upper bound of [`encode_response`](Self::encode_response)'s length for `resp`.
    fn response_len_bound(&self, resp: &KvResponseView<'_>) -> usize;
    /// Serializes `resp` into the start of `out`; returns the length.
    fn encode_response(
        &mut self,
        resp: &KvResponseView<'_>,
        out: &mut [u8],
    ) -> Result<usize, CodecError>;
    /// Decodes a response.
    fn decode_response(&mut self, input: &[u8]) -> Result<KvResponse, CodecError>;
}

impl Library {
    /// This library's KV codec.
    pub fn kv_codec(self) -> Box<dyn KvCodec + Send> {
        match self {
            Library::Protobuf => Box::new(prost_kv::ProstKv::default()),
            Library::Capnp => Box::new(capnp_kv::CapnpKv::default()),
            Library::Flatbuffers => Box::new(fb_kv::FbKv::default()),
        }
    }
}

/// A Cap'n Proto response built in segments from `alloc` (the server's pinned memory) and
/// returned as a scatter-gather list: the segment table, then each segment (one, sized by
/// [`KvCodec::response_len_bound`], unless `alloc` fails). The bytes equal
/// [`KvCodec::encode_response`]'s, without writing the message out a second time.
pub fn capnp_response_segments<B, F>(
    resp: &KvResponseView<'_>,
    alloc: F,
) -> Result<crate::segments::SegmentList<B>, CodecError>
where
    B: std::ops::DerefMut<Target = [u8]>,
    F: FnMut(usize) -> Option<B>,
{
    capnp_kv::response_segments(resp, alloc)
}

/// [`capnp_response_segments`] in the pinned memory `mem`, as the scatter-gather list to send.
/// The outer error is the library's, the inner one the memory's.
pub fn capnp_response_sga(
    resp: &KvResponseView<'_>,
    mem: &cornflakes::PinnedMemory,
) -> Result<Result<Vec<cornflakes::RcBuf>, cornflakes::mem::AllocError>, CodecError> {
    let words = capnp_kv::response_len_bound(resp) / 8;
    crate::segments::pinned_sga(mem, words, |m| capnp_kv::fill_response(m, resp))
}

/// [`capnp_response_sga`] into `sga` (cleared first), a list the server reuses: per response
/// only the `Builder`'s segment table is allocated.
pub fn capnp_response_sga_into(
    resp: &KvResponseView<'_>,
    mem: &cornflakes::PinnedMemory,
    sga: &mut Vec<cornflakes::RcBuf>,
) -> Result<Result<(), cornflakes::mem::AllocError>, CodecError> {
    let words = capnp_kv::response_len_bound(resp) / 8;
    crate::segments::pinned_sga_into(mem, words, |m| capnp_kv::fill_response(m, resp), sga)
}

/// `v` emptied, as a vector of references of another lifetime, keeping its allocation: how a
/// server reuses a [`KvRequestView`]'s or [`KvResponseView`]'s lists from one request to the
/// next (the borrowed input is gone, the capacity stays). The standard library collects a
/// `vec::IntoIter` of an element of the same layout in place, so nothing is allocated.
pub fn recycle<'b, T: ?Sized>(mut v: Vec<&T>) -> Vec<&'b T> {
    v.clear();
    // `filter_map` (not `filter`) because the item type changes: `&'a T` in, `&'b T` out.
    #[allow(clippy::unnecessary_filter_map)]
    v.into_iter().filter_map(|_| None).collect()
}

/// The key and value lists of the request views a codec shows, kept between requests.
#[derive(Debug, Default)]
struct ViewLists {
    keys: Vec<&'static str>,
    vals: Vec<&'static [u8]>,
}

impl ViewLists {
    /// Empty lists for a view borrowing `'a` data, with the capacity of earlier requests.
    fn take<'a>(&mut self) -> (Vec<&'a str>, Vec<&'a [u8]>) {
        (
            std::mem::take(&mut self.keys),
            std::mem::take(&mut self.vals),
        )
    }

    /// Takes the lists back from a view that was shown.
    fn keep(&mut self, view: KvRequestView<'_>) {
        self.keys = recycle(view.keys);
        self.vals = recycle(view.vals);
    }
}

fn vals_bytes(vals: &[&[u8]]) -> usize {
    vals.iter().map(|v| v.len()).sum()
}

mod prost_kv {
    use super::*;
    use crate::generated::proto::kvpb::{KvRequest, KvResponse as Resp};
    use prost::Message;

    /// prost: decoding copies every key and value into the message struct; encoding copies the
    /// values into it and then into the output.
    #[derive(Debug, Default)]
    pub(super) struct ProstKv {
        req: KvRequest,
        resp: Resp,
        lists: ViewLists,
    }

    impl KvCodec for ProstKv {
        fn library(&self) -> Library {
            Library::Protobuf
        }

        fn encode_request(&mut self, r: &KvRequestView<'_>, out: &mut Vec<u8>) {
            let m = KvRequest {
                id: r.id,
                op: u32::from(r.op),
                keys: r.keys.iter().map(|k| (*k).to_owned()).collect(),
                vals: r
                    .vals
                    .iter()
                    .map(|v| prost::bytes::Bytes::copy_from_slice(v))
                    .collect(),
                index: r.index,
            };
            out.clear();
            m.encode(out).expect("a Vec grows");
        }

        fn with_request(
            &mut self,
            input: &[u8],
            f: &mut dyn FnMut(&KvRequestView<'_>),
        ) -> Result<(), CodecError> {
            self.req.clear();
            self.req.merge(input).map_err(CodecError::Protobuf)?;
            let op = u16::try_from(self.req.op).unwrap_or(u16::MAX);
            let (mut keys, mut vals) = self.lists.take();
            keys.extend(self.req.keys.iter().map(String::as_str));
            vals.extend(self.req.vals.iter().map(|v| &v[..]));
            let view = KvRequestView {
                id: self.req.id,
                op,
                keys,
                vals,
                index: self.req.index,
            };
            f(&view);
            self.lists.keep(view);
            Ok(())
        }

        fn response_len_bound(&self, r: &KvResponseView<'_>) -> usize {
            32 + 16 * (r.vals.len() + r.statuses.len()) + vals_bytes(&r.vals)
        }

        fn encode_response(
            &mut self,
            r: &KvResponseView<'_>,
            out: &mut [u8],
        ) -> Result<usize, CodecError> {
            self.resp.id = r.id;
            self.resp.status = r.status;
            self.resp.vals.resize_with(r.vals.len(), Vec::new);
            for (dst, src) in self.resp.vals.iter_mut().zip(&r.vals) {
                dst.clear();
                dst.extend_from_slice(src);
            }
            self.resp.statuses.clear();
            self.resp.statuses.extend_from_slice(&r.statuses);
            let needed = self.resp.encoded_len();
            let available = out.len();
            let mut dst = out
                .get_mut(..needed)
                .ok_or(CodecError::BufferTooSmall { needed, available })?;
            self.resp
                .encode(&mut dst)
                .map_err(|_| CodecError::BufferTooSmall { needed, available })?;
            Ok(needed)
        }

        fn decode_response(&mut self, input: &[u8]) -> Result<KvResponse, CodecError> {
            let m = Resp::decode(input).map_err(CodecError::Protobuf)?;
            Ok(KvResponse {
                id: m.id,
                status: m.status,
                vals: m.vals,
                statuses: m.statuses,
            })
        }
    }
}

mod capnp_kv {
    use super::*;
    use crate::generated::capnp_gen::kv_capnp::{kv_request, kv_response};
    use crate::segments::{build_segments, SegmentList};
    use capnp::message::{Builder, HeapAllocator, ReaderOptions, ScratchSpaceHeapAllocator};
    use capnp::serialize;
    use std::ops::DerefMut;

    /// Cap'n Proto: reads in place (no copy on decode); a response is built in reused scratch
    /// words (one copy of each value) and written out with its segment table.
    #[derive(Default)]
    pub(super) struct CapnpKv {
        lists: ViewLists,
        /// The first segment of every response (grown to the largest bound seen).
        scratch: Vec<capnp::Word>,
    }

    impl std::fmt::Debug for CapnpKv {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("CapnpKv").finish_non_exhaustive()
        }
    }

    /// See [`KvCodec::response_len_bound`].
    pub(super) fn response_len_bound(r: &KvResponseView<'_>) -> usize {
        let words: usize = r.vals.iter().map(|v| v.len().div_ceil(8) + 1).sum();
        64 + 8 * (words + r.statuses.len())
    }

    fn opts(input: &[u8]) -> ReaderOptions {
        let mut o = ReaderOptions::new();
        o.traversal_limit_in_words(Some(256 + 4 * input.len() / 8))
            .nesting_limit(8);
        o
    }

    fn n(len: usize) -> Result<u32, CodecError> {
        u32::try_from(len).map_err(|_| {
            CodecError::Capnp(capnp::Error::failed("list longer than 2^32".to_owned()))
        })
    }

    pub(super) fn fill_response<A: capnp::message::Allocator>(
        msg: &mut Builder<A>,
        r: &KvResponseView<'_>,
    ) -> Result<(), CodecError> {
        let mut root = msg.init_root::<kv_response::Builder<'_>>();
        root.set_id(r.id);
        root.set_status(r.status);
        let mut vals = root.reborrow().init_vals(n(r.vals.len())?);
        for (i, v) in r.vals.iter().enumerate() {
            vals.set(i as u32, v);
        }
        let mut st = root.init_statuses(n(r.statuses.len())?);
        for (i, s) in r.statuses.iter().enumerate() {
            st.set(i as u32, *s);
        }
        Ok(())
    }

    /// See [`super::capnp_response_segments`].
    pub(super) fn response_segments<B, F>(
        r: &KvResponseView<'_>,
        alloc: F,
    ) -> Result<SegmentList<B>, CodecError>
    where
        B: DerefMut<Target = [u8]>,
        F: FnMut(usize) -> Option<B>,
    {
        let words = response_len_bound(r) / 8;
        build_segments(alloc, words, |m| fill_response(m, r))
    }

    impl KvCodec for CapnpKv {
        fn library(&self) -> Library {
            Library::Capnp
        }

        fn encode_request(&mut self, r: &KvRequestView<'_>, out: &mut Vec<u8>) {
            let mut msg = Builder::new(HeapAllocator::new());
            {
                let mut root = msg.init_root::<kv_request::Builder<'_>>();
                root.set_id(r.id);
                root.set_op(r.op);
                root.set_index(r.index);
                let mut keys = root.reborrow().init_keys(r.keys.len() as u32);
                for (i, k) in r.keys.iter().enumerate() {
                    keys.set(i as u32, *k);
                }
                let mut vals = root.init_vals(r.vals.len() as u32);
                for (i, v) in r.vals.iter().enumerate() {
                    vals.set(i as u32, v);
                }
            }
            out.clear();
            serialize::write_message(&mut *out, &msg).expect("a Vec grows");
        }

        fn with_request(
            &mut self,
            input: &[u8],
            f: &mut dyn FnMut(&KvRequestView<'_>),
        ) -> Result<(), CodecError> {
            let mut slice = input;
            let msg = serialize::read_message_from_flat_slice_no_alloc(&mut slice, opts(input))?;
            let root = msg.get_root::<kv_request::Reader<'_>>()?;
            let (mut ks, mut vs) = self.lists.take();
            let r = (|| {
                for k in root.get_keys()?.iter() {
                    ks.push(k?.to_str().map_err(|e| {
                        CodecError::Capnp(capnp::Error::failed(format!("key is not UTF-8: {e}")))
                    })?);
                }
                for v in root.get_vals()?.iter() {
                    vs.push(v?);
                }
                Ok::<(), CodecError>(())
            })();
            let view = KvRequestView {
                id: root.get_id(),
                op: root.get_op(),
                keys: ks,
                vals: vs,
                index: root.get_index(),
            };
            if r.is_ok() {
                f(&view);
            }
            self.lists.keep(view);
            r
        }

        fn response_len_bound(&self, r: &KvResponseView<'_>) -> usize {
            response_len_bound(r)
        }

        fn encode_response(
            &mut self,
            r: &KvResponseView<'_>,
            out: &mut [u8],
        ) -> Result<usize, CodecError> {
            let words = response_len_bound(r) / 8;
            if self.scratch.len() < words {
                self.scratch = capnp::Word::allocate_zeroed_vec(words);
            }
            let space = capnp::Word::words_to_bytes_mut(&mut self.scratch[..]);
            let mut msg = Builder::new(ScratchSpaceHeapAllocator::new(space));
            fill_response(&mut msg, r)?;
            let needed = serialize::compute_serialized_size_in_words(&msg) * 8;
            if needed > out.len() {
                return Err(CodecError::BufferTooSmall {
                    needed,
                    available: out.len(),
                });
            }
            serialize::write_message(&mut out[..needed], &msg)?;
            Ok(needed)
        }

        fn decode_response(&mut self, input: &[u8]) -> Result<KvResponse, CodecError> {
            let mut slice = input;
            let msg = serialize::read_message_from_flat_slice_no_alloc(&mut slice, opts(input))?;
            let root = msg.get_root::<kv_response::Reader<'_>>()?;
            let mut vals = Vec::new();
            for v in root.get_vals()?.iter() {
                vals.push(v?.to_vec());
            }
            Ok(KvResponse {
                id: root.get_id(),
                status: root.get_status(),
                vals,
                statuses: root.get_statuses()?.iter().collect(),
            })
        }
    }
}

mod fb_kv {
    use super::*;
    use crate::generated::fb::kv_fb::{
        KvRequest, KvRequestArgs, KvResponse as Resp, KvResponseArgs, Value, ValueArgs,
    };
    use flatbuffers::{FlatBufferBuilder, VerifierOptions, WIPOffset};

    /// FlatBuffers: reads in place after verification; a response is built back to front in
    /// the builder (one copy of each value) and copied out as one contiguous buffer.
    pub(super) struct FbKv {
        fbb: FlatBufferBuilder<'static>,
        opts: VerifierOptions,
        lists: ViewLists,
        /// The response's value tables, reused.
        offsets: Vec<WIPOffset<Value<'static>>>,
    }

    impl std::fmt::Debug for FbKv {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("FbKv").finish_non_exhaustive()
        }
    }

    impl Default for FbKv {
        fn default() -> Self {
            FbKv {
                fbb: FlatBufferBuilder::with_capacity(16 * 1024),
                opts: VerifierOptions {
                    max_depth: 8,
                    ..VerifierOptions::default()
                },
                lists: ViewLists::default(),
                offsets: Vec::new(),
            }
        }
    }

    impl KvCodec for FbKv {
        fn library(&self) -> Library {
            Library::Flatbuffers
        }

        fn encode_request(&mut self, r: &KvRequestView<'_>, out: &mut Vec<u8>) {
            let fbb = &mut self.fbb;
            fbb.reset();
            let keys: Vec<_> = r.keys.iter().map(|k| fbb.create_string(k)).collect();
            let keys = Some(fbb.create_vector(&keys));
            let vals: Vec<_> = r
                .vals
                .iter()
                .map(|v| {
                    let data = Some(fbb.create_vector(v));
                    Value::create(fbb, &ValueArgs { data })
                })
                .collect();
            let vals = Some(fbb.create_vector(&vals));
            let root = KvRequest::create(
                fbb,
                &KvRequestArgs {
                    id: r.id,
                    op: r.op,
                    keys,
                    vals,
                    index: r.index,
                },
            );
            fbb.finish_minimal(root);
            out.clear();
            out.extend_from_slice(fbb.finished_data());
        }

        fn with_request(
            &mut self,
            input: &[u8],
            f: &mut dyn FnMut(&KvRequestView<'_>),
        ) -> Result<(), CodecError> {
            let m = flatbuffers::root_with_opts::<KvRequest<'_>>(&self.opts, input)
                .map_err(CodecError::Flatbuffers)?;
            let (mut keys, mut vals) = self.lists.take();
            if let Some(k) = m.keys() {
                keys.extend(k.iter());
            }
            if let Some(v) = m.vals() {
                vals.extend(
                    v.iter()
                        .map(|x| x.data().map(|d| d.bytes()).unwrap_or_default()),
                );
            }
            let view = KvRequestView {
                id: m.id(),
                op: m.op(),
                keys,
                vals,
                index: m.index(),
            };
            f(&view);
            self.lists.keep(view);
            Ok(())
        }

        fn response_len_bound(&self, r: &KvResponseView<'_>) -> usize {
            64 + 24 * r.vals.len() + 4 * r.statuses.len() + vals_bytes(&r.vals)
        }

        fn encode_response(
            &mut self,
            r: &KvResponseView<'_>,
            out: &mut [u8],
        ) -> Result<usize, CodecError> {
            let fbb = &mut self.fbb;
            fbb.reset();
            self.offsets.clear();
            self.offsets.extend(r.vals.iter().map(|v| {
                let data = Some(fbb.create_vector(v));
                Value::create(fbb, &ValueArgs { data })
            }));
            let vals = Some(fbb.create_vector(&self.offsets));
            let statuses = Some(fbb.create_vector(&r.statuses));
            let root = Resp::create(
                fbb,
                &KvResponseArgs {
                    id: r.id,
                    status: r.status,
                    vals,
                    statuses,
                },
            );
            fbb.finish_minimal(root);
            let data = fbb.finished_data();
            let available = out.len();
            out.get_mut(..data.len())
                .ok_or(CodecError::BufferTooSmall {
                    needed: data.len(),
                    available,
                })?
                .copy_from_slice(data);
            Ok(data.len())
        }

        fn decode_response(&mut self, input: &[u8]) -> Result<KvResponse, CodecError> {
            let m = flatbuffers::root_with_opts::<Resp<'_>>(&self.opts, input)
                .map_err(CodecError::Flatbuffers)?;
            Ok(KvResponse {
                id: m.id(),
                status: m.status(),
                vals: m
                    .vals()
                    .map(|v| {
                        v.iter()
                            .map(|x| x.data().map(|d| d.bytes().to_vec()).unwrap_or_default())
                            .collect()
                    })
                    .unwrap_or_default(),
                statuses: m.statuses().map(|s| s.iter().collect()).unwrap_or_default(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_round_trips_requests_and_responses() {
        for lib in [Library::Protobuf, Library::Capnp, Library::Flatbuffers] {
            let mut c = lib.kv_codec();
            let big = vec![7u8; 3000];
            let req = KvRequestView {
                id: 9,
                op: 4,
                keys: vec!["a", "bb"],
                vals: vec![b"x", &big],
                index: 3,
            };
            let mut buf = Vec::new();
            c.encode_request(&req, &mut buf);
            let mut seen = None;
            c.with_request(&buf, &mut |r| seen = Some(format!("{r:?}")))
                .unwrap();
            assert_eq!(seen.unwrap(), format!("{req:?}"), "{lib:?}");
            let resp = KvResponseView {
                id: 9,
                status: 1,
                vals: vec![b"", &big],
                statuses: vec![0, 1],
            };
            let mut out = vec![0u8; c.response_len_bound(&resp)];
            let n = c.encode_response(&resp, &mut out).unwrap();
            let back = c.decode_response(&out[..n]).unwrap();
            assert_eq!(back.vals, vec![vec![], big.clone()], "{lib:?}");
            assert_eq!((back.id, back.status, back.statuses), (9, 1, vec![0, 1]));
            assert!(c.encode_response(&resp, &mut [0u8; 8]).is_err());
            for junk in [
                &b""[..],
                b"\xff\xff\xff\xff\xff\xff\xff\xff",
                &buf[..buf.len() / 2],
            ] {
                let _ = c.with_request(junk, &mut |_| {});
                let _ = c.decode_response(junk);
            }
        }
    }

    #[test]
    fn capnp_segments_carry_the_contiguous_bytes_in_one_given_segment() {
        let mut c = Library::Capnp.kv_codec();
        let (small, big) = (vec![1u8; 5], vec![7u8; 3001]);
        for resp in [
            KvResponseView::default(),
            KvResponseView {
                id: 4,
                status: 2,
                vals: vec![&small, b"", &big],
                statuses: vec![0, 1, 0],
            },
        ] {
            let mut out = vec![0u8; c.response_len_bound(&resp)];
            let n = c.encode_response(&resp, &mut out).unwrap();
            let l = capnp_response_segments(&resp, |len| Some(vec![0xab_u8; len])).unwrap();
            assert_eq!(l.segments.len(), 1, "sized by the bound: one segment");
            assert!(matches!(
                l.segments[0],
                crate::segments::Segment::Given { .. }
            ));
            assert_eq!(l.to_vec(), &out[..n]);
        }
    }
}
