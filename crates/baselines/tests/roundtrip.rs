//! Every library round-trips every shape; bad input is an error, not a panic.

use baselines::generated::fb::echo_fb;
use baselines::{Codec, CodecError, EchoMsg, Library, Shape, ShapeError};

const SIZES: [usize; 6] = [0, 1, 7, 64, 2048, 8192];

/// Deterministic value `i` of length `len`, different for every (i, len).
fn value(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(97) ^ len) as u8)
        .collect()
}

fn shapes() -> Vec<(Shape, usize)> {
    let mut v = vec![
        (Shape::Single, 1),
        (Shape::List, 0),
        (Shape::List, 1),
        (Shape::List, 2),
        (Shape::List, 5),
    ];
    v.extend((1..=5).map(|d| (Shape::Tree(d), 1usize << d)));
    v
}

fn decode_all(
    codec: &mut dyn Codec,
    shape: Shape,
    input: &[u8],
) -> Result<(u32, Vec<Vec<u8>>), CodecError> {
    let mut got = Vec::new();
    let id = codec.decode(shape, input, &mut |v| got.push(v.to_vec()))?;
    Ok((id, got))
}

#[test]
fn every_library_round_trips_every_shape_and_size() {
    for lib in Library::ALL {
        let mut codec = lib.codec();
        for (shape, count) in shapes() {
            for &size in &SIZES {
                let owned: Vec<Vec<u8>> = (0..count).map(|i| value(i, size)).collect();
                let vals: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                let id = 0xC0FF_EE00 ^ (size as u32) ^ count as u32;
                let msg = EchoMsg {
                    id,
                    shape,
                    vals: &vals,
                };
                // Stale bytes in a reused transmit buffer must not matter.
                let mut tx = vec![0xA5u8; 64 + count * (size + 64) * 2];
                let what = format!("{lib} {shape} x{count} {size}B");
                let n = codec
                    .encode(&msg, &mut tx)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let (got_id, got) = decode_all(codec.as_mut(), shape, &tx[..n])
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got_id, id, "{what}");
                assert_eq!(got, owned, "{what}");

                // The echo server's path yields the same message again.
                let mut echoed = vec![0x5Au8; tx.len()];
                let m = codec
                    .echo(shape, &tx[..n], &mut echoed)
                    .unwrap_or_else(|e| panic!("{what} echo: {e}"));
                let (echo_id, echo_vals) = decode_all(codec.as_mut(), shape, &echoed[..m])
                    .unwrap_or_else(|e| panic!("{what} echo decode: {e}"));
                assert_eq!((echo_id, echo_vals), (id, owned.clone()), "{what} echo");
            }
        }
    }
}

#[test]
fn reused_codecs_do_not_leak_state_between_messages() {
    for lib in Library::ALL {
        let mut codec = lib.codec();
        let big: Vec<Vec<u8>> = (0..6).map(|i| value(i, 300)).collect();
        let big_refs: Vec<&[u8]> = big.iter().map(Vec::as_slice).collect();
        let small: [&[u8]; 2] = [b"x", b""];
        let mut tx = vec![0u8; 4096];
        for (vals, id) in [(&big_refs[..], 1), (&small[..], 2), (&big_refs[..2], 3)] {
            let msg = EchoMsg {
                id,
                shape: Shape::List,
                vals,
            };
            let n = codec.encode(&msg, &mut tx).unwrap();
            let (got_id, got) = decode_all(codec.as_mut(), Shape::List, &tx[..n]).unwrap();
            assert_eq!(got_id, id, "{lib}");
            assert_eq!(
                got,
                vals.iter().map(|v| v.to_vec()).collect::<Vec<_>>(),
                "{lib}"
            );
        }
        // Tree after a deeper tree: no leftover nodes.
        for depth in [4u8, 2] {
            let leaves: Vec<Vec<u8>> = (0..1 << depth).map(|i| value(i, 5)).collect();
            let refs: Vec<&[u8]> = leaves.iter().map(Vec::as_slice).collect();
            let msg = EchoMsg {
                id: 9,
                shape: Shape::Tree(depth),
                vals: &refs,
            };
            let n = codec.encode(&msg, &mut tx).unwrap();
            let (_, got) = decode_all(codec.as_mut(), Shape::Tree(depth), &tx[..n]).unwrap();
            assert_eq!(got, leaves, "{lib} depth {depth}");
        }
    }
}

#[test]
fn small_transmit_buffers_are_errors() {
    let val = value(0, 2048);
    let vals: [&[u8]; 2] = [&val, &val];
    for lib in Library::ALL {
        let mut codec = lib.codec();
        let msg = EchoMsg {
            id: 1,
            shape: Shape::List,
            vals: &vals,
        };
        for cap in [0, 100, 4096, 4100] {
            let mut tx = vec![0u8; cap];
            match codec.encode(&msg, &mut tx) {
                Err(CodecError::BufferTooSmall { needed, available }) => {
                    assert!(needed > available, "{lib}");
                    assert_eq!(available, cap);
                }
                other => panic!("{lib} cap {cap}: {other:?}"),
            }
        }
        let mut tx = vec![0u8; 8192];
        let n = codec.encode(&msg, &mut tx).unwrap();
        let mut out = vec![0u8; n - 1];
        assert!(
            matches!(
                codec.echo(Shape::List, &tx[..n], &mut out),
                Err(CodecError::BufferTooSmall { .. })
            ),
            "{lib} echo"
        );
    }
}

#[test]
fn wrong_value_counts_and_depths_are_shape_errors() {
    for lib in Library::ALL {
        let mut codec = lib.codec();
        let mut tx = vec![0u8; 1024];
        let three: [&[u8]; 3] = [b"a", b"b", b"c"];
        for (shape, vals) in [
            (Shape::Single, &three[..]),
            (Shape::Tree(2), &three[..]),
            (Shape::Tree(0), &three[..1]),
            (Shape::Tree(6), &three[..]),
        ] {
            let msg = EchoMsg { id: 1, shape, vals };
            assert!(
                matches!(codec.encode(&msg, &mut tx), Err(CodecError::Shape(_))),
                "{lib} {shape}"
            );
        }
        // A depth-3 tree is not a depth-4 or depth-2 tree.
        let leaves: Vec<&[u8]> = vec![b"leaf"; 8];
        let msg = EchoMsg {
            id: 1,
            shape: Shape::Tree(3),
            vals: &leaves,
        };
        let n = codec.encode(&msg, &mut tx).unwrap();
        let err = decode_all(codec.as_mut(), Shape::Tree(4), &tx[..n]).unwrap_err();
        assert!(
            matches!(
                err,
                CodecError::Shape(ShapeError::MissingChild { level: 3 })
            ),
            "{lib}: {err}"
        );
        let err = decode_all(codec.as_mut(), Shape::Tree(2), &tx[..n]).unwrap_err();
        assert!(
            matches!(err, CodecError::Shape(ShapeError::TooDeep)),
            "{lib}: {err}"
        );
        let mut out = vec![0u8; 1024];
        assert!(codec.echo(Shape::Tree(4), &tx[..n], &mut out).is_err());
    }
}

/// xorshift for deterministic garbage.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn malformed_input_is_an_error_not_a_panic() {
    let all_shapes = [Shape::Single, Shape::List, Shape::Tree(1), Shape::Tree(5)];
    for lib in Library::ALL {
        let mut codec = lib.codec();
        let mut out = vec![0u8; 1 << 16];
        // An empty input is a valid protobuf message (all fields default),
        // except that a tree needs its root; the other formats reject it.
        for shape in all_shapes {
            let res = decode_all(codec.as_mut(), shape, &[]);
            match (lib, shape) {
                (Library::Protobuf, Shape::Single) => assert_eq!(res.unwrap(), (0, vec![vec![]])),
                (Library::Protobuf, Shape::List) => assert_eq!(res.unwrap(), (0, vec![])),
                _ => assert!(res.is_err(), "{lib} {shape} accepted empty input"),
            }
        }
        // Obviously broken inputs are rejected by every library.
        for bad in [&[0xff; 16][..], &[0xff; 3][..]] {
            for shape in all_shapes {
                assert!(
                    decode_all(codec.as_mut(), shape, bad).is_err(),
                    "{lib} {shape} accepted {bad:?}"
                );
                assert!(codec.echo(shape, bad, &mut out).is_err(), "{lib} {shape}");
            }
        }
        // Valid messages truncated at every length, with every byte flipped,
        // and random garbage: any result but a panic is fine.
        let v = value(1, 40);
        for (shape, count) in [(Shape::List, 3), (Shape::Tree(2), 4), (Shape::Single, 1)] {
            let vals: Vec<&[u8]> = vec![&v; count];
            let mut tx = vec![0u8; 1024];
            let msg = EchoMsg {
                id: 5,
                shape,
                vals: &vals,
            };
            let n = codec.encode(&msg, &mut tx).unwrap();
            let valid = tx[..n].to_vec();
            for cut in 0..n {
                let _ = decode_all(codec.as_mut(), shape, &valid[..cut]);
                let _ = codec.echo(shape, &valid[..cut], &mut out);
            }
            for i in 0..n {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut bad = valid.clone();
                    bad[i] ^= flip;
                    let _ = decode_all(codec.as_mut(), shape, &bad);
                    let _ = codec.echo(shape, &bad, &mut out);
                }
            }
        }
        for seed in 0..300u64 {
            let bad = garbage(seed * 7919 + 1, (seed as usize * 13) % 300);
            for shape in all_shapes {
                let _ = decode_all(codec.as_mut(), shape, &bad);
                let _ = codec.echo(shape, &bad, &mut out);
            }
        }
    }
}

#[test]
fn flatbuffers_verifier_rejects_out_of_bounds_offsets() {
    let mut codec = Library::Flatbuffers.codec();
    let vals: [&[u8]; 1] = [b"payload"];
    let mut tx = vec![0u8; 256];
    let msg = EchoMsg {
        id: 1,
        shape: Shape::Single,
        vals: &vals,
    };
    let n = codec.encode(&msg, &mut tx).unwrap();
    // The first 4 bytes are the root table offset: point it past the end.
    let mut bad = tx[..n].to_vec();
    bad[..4].copy_from_slice(&(n as u32 + 64).to_le_bytes());
    let err = decode_all(codec.as_mut(), Shape::Single, &bad).unwrap_err();
    assert!(matches!(err, CodecError::Flatbuffers(_)), "{err}");
    // A table nested deeper than the verifier allows.
    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let mut node = echo_fb::Node::create(&mut fbb, &echo_fb::NodeArgs::default());
    for _ in 0..40 {
        node = echo_fb::Node::create(
            &mut fbb,
            &echo_fb::NodeArgs {
                left: Some(node),
                right: Some(node),
                val: None,
            },
        );
    }
    let root = echo_fb::Tree::create(
        &mut fbb,
        &echo_fb::TreeArgs {
            id: 1,
            root: Some(node),
        },
    );
    fbb.finish_minimal(root);
    let err = decode_all(codec.as_mut(), Shape::Tree(5), fbb.finished_data()).unwrap_err();
    assert!(matches!(err, CodecError::Flatbuffers(_)), "{err}");
}

/// A hand-made Cap'n Proto `ListMsg` whose `n` list elements all point at the
/// same `blob_words`-word Data blob: small on the wire, huge to traverse.
fn capnp_amplified_list(n: u64, blob_words: u64) -> Vec<u8> {
    let struct_ptr =
        |offset: u64, data: u64, ptrs: u64| (offset << 2) | (data << 32) | (ptrs << 48);
    let list_ptr = |offset: u64, elem_size: u64, count: u64| {
        1 | (offset << 2) | (elem_size << 32) | (count << 35)
    };
    let blob_at = 3 + n;
    let mut words = vec![
        struct_ptr(0, 1, 1), // root: 1 data word, 1 pointer, right after
        7,                   // id = 7
        list_ptr(0, 6, n),   // vals: n pointers, starting at word 3
    ];
    for i in 0..n {
        // Element i sits at word 3 + i; every one points at the blob.
        words.push(list_ptr(blob_at - (3 + i + 1), 2, blob_words * 8));
    }
    words.extend((0..blob_words).map(|w| w * 0x0101_0101));
    let mut bytes = Vec::with_capacity(8 + words.len() * 8);
    bytes.extend_from_slice(&0u32.to_le_bytes()); // one segment
    bytes.extend_from_slice(&(words.len() as u32).to_le_bytes());
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    bytes
}

#[test]
fn capnp_reader_limits_stop_amplification_and_lying_segment_tables() {
    let mut codec = Library::Capnp.codec();
    // Sanity: the hand-made encoding is valid when it is not amplified.
    let (id, vals) = decode_all(codec.as_mut(), Shape::List, &capnp_amplified_list(2, 4)).unwrap();
    assert_eq!(id, 7);
    assert_eq!(vals.len(), 2);
    assert_eq!(vals[0], vals[1]);
    assert_eq!(vals[0].len(), 32);

    // 1000 references to an 8 KiB blob: ~16 KiB of input, 8 MiB to traverse.
    let amplified = capnp_amplified_list(1000, 1024);
    let err = decode_all(codec.as_mut(), Shape::List, &amplified).unwrap_err();
    assert!(matches!(err, CodecError::Capnp(_)), "{err}");
    let mut out = vec![0u8; 1 << 20];
    assert!(codec.echo(Shape::List, &amplified, &mut out).is_err());

    // A segment table announcing far more words than the input holds.
    let mut lying = vec![0u8; 16];
    lying[4..8].copy_from_slice(&1_000_000u32.to_le_bytes());
    let err = decode_all(codec.as_mut(), Shape::List, &lying).unwrap_err();
    assert!(matches!(err, CodecError::Capnp(_)), "{err}");
}
