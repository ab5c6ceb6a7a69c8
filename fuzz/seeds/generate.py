#!/usr/bin/env python3
"""Regenerates the committed seed corpora of the fuzz targets (docs/fuzzing.md).

Objects are encoded from the JSON samples below by the `cornflakes` command (dynamic codec);
the spec's worked examples come from crates/cornflakes/tests/vectors/*.hex; frames are valid
traffic as the stack's sender writes it. Run from anywhere:

    python3 fuzz/seeds/generate.py [path/to/cornflakes]   # default: target/debug/cornflakes
"""
import base64, json, os, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CLI = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "debug", "cornflakes")
PROTOS = os.path.join(ROOT, "crates/cornflakes-codegen/gen-tests/protos")
SCHEMAS = os.path.join(ROOT, "schemas")

# The order of `MESSAGES` in fuzz/src/lib.rs: the first byte of an object input selects it.
MESSAGES = [
    "kv.GetReq", "kv.GetResp", "kv.PutReq", "kv.PutResp", "kv.GetMReq", "kv.GetMResp",
    "kv.PutMReq", "kv.PutMResp", "kv.GetListReq", "kv.GetListResp", "kv.AppendReq",
    "kv.AppendResp", "echo.Single", "echo.List", "echo.Tree1", "echo.Tree2", "echo.Tree3",
    "echo.Tree4", "echo.Tree5", "features.Everything", "features.Everything.Nested",
    "features.Everything.Nested.Deeper", "features.Sparse", "features.Far", "features.Empty",
    "features.Envelope", "features.Tree", "legacy.Record", "examples.GetM", "examples.Outer",
    "kv.GetFromListReq", "kv.GetFromListResp", "kv.DeleteReq", "kv.DeleteResp",
]
FILES = {"kv": (SCHEMAS, "kv.proto"), "echo": (SCHEMAS, "echo.proto"),
         "features": (PROTOS, "features.proto"), "legacy": (PROTOS, "legacy.proto"),
         "examples": (PROTOS, "examples.proto")}

def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()

def tree(d):
    if d == 1:
        return {"left": b64("l" * 3), "right": b64("r" * 40)}
    return {"left": tree(d - 1), "right": tree(d - 1)}

NESTED = {"leaf": b64("leaf"), "deeper": {"notes": ["a", "ü"], "kind": "KIND_LARGE"}}
SAMPLES = {
    "kv.GetReq": [{"id": 1, "key": "user:42"}, {}],
    "kv.GetResp": [{"id": 1, "val": b64("x" * 600)}, {"id": 2}],
    "kv.PutReq": [{"id": 3, "key": "k", "val": b64("value")}],
    "kv.PutResp": [{"id": 3}],
    "kv.GetMReq": [{"id": 4, "keys": ["a", "bb", ""]}],
    "kv.GetMResp": [{"id": 4, "vals": [b64("1"), b64(""), b64("333")]}],
    "kv.PutMReq": [{"id": 5, "keys": ["a", "b"], "vals": [b64("x"), b64("y" * 100)]}],
    "kv.PutMResp": [{"id": 5}],
    "kv.GetListReq": [{"id": 6, "key": "list"}],
    "kv.GetListResp": [{"id": 6, "vals": [b64("one"), b64("two")]}],
    "kv.AppendReq": [{"id": 7, "key": "list", "val": b64("three")}],
    "kv.AppendResp": [{"id": 7}],
    "echo.Single": [{"val": b64("hello")}],
    "echo.List": [{"id": 9, "vals": [b64("a"), b64("b" * 64)]}],
    "echo.Tree1": [tree(1)], "echo.Tree2": [tree(2)], "echo.Tree3": [tree(3)],
    "echo.Tree4": [tree(4)], "echo.Tree5": [tree(5)],
    "features.Everything": [
        {"i32": -1, "i64": "-9000000000", "u32": 4000000000, "u64": "18446744073709551615",
         "s32": -5, "s64": "-6", "f32": 7, "f64": "8", "sf32": -9, "sf64": "-10", "fl": 1.5,
         "db": -2.25, "flag": True, "text": "héllo", "data": b64("\x00\x01\x02"),
         "kind": "KIND_NEGATIVE", "color": "COLOR_BLUE", "nested": NESTED,
         "point": {"x": -3, "y": 4}, "maybe": 0,
         "r_i32": [1, -2], "r_i64": ["3", "-4"], "r_u32": [5], "r_u64": ["6"], "r_s32": [-7],
         "r_s64": ["-8"], "r_f32": [9], "r_f64": ["10"], "r_sf32": [-11], "r_sf64": ["-12"],
         "r_fl": [0.5, "NaN"], "r_db": ["Infinity", -0.0], "r_flag": [True, False, True],
         "r_text": ["x", ""], "r_data": [b64("y")], "r_kind": ["KIND_SMALL", 2],
         "r_nested": [NESTED, {}], "name": "choice",
         "counts": {"a": "1", "b": "-2"}, "by_id": {"7": NESTED},
         "child": {"u32": 1, "number": "12"}, "children": [{"sub": NESTED}, {}]},
        {"sub": {"leaf": b64("z" * 300)}},
        {},
    ],
    "features.Everything.Nested": [NESTED],
    "features.Everything.Nested.Deeper": [NESTED["deeper"]],
    "features.Sparse": [{"first": 1, "mid": b64("m"), "far": True, "large": ["1", "2"]}],
    "features.Far": [{"near": 5}],
    "features.Empty": [{}],
    "features.Envelope": [{"one": {"n": 3}}, {"text": "t"}],
    "features.Tree": [{"val": b64("root"), "left": {"val": b64("l"), "right": {"val": b64("lr")}}}],
    "legacy.Record": [{"id": 1, "name": "n", "score": -3, "ratio": 0.25, "on": False,
                       "level": "LOW", "stamps": ["-1", "2"], "parent": {"id": 2},
                       "temp": "-Infinity", "big": "1"}, {"id": 0}],
    "examples.GetM": [], "examples.Outer": [],
    "kv.GetFromListReq": [{"id": 8, "key": "obj", "index": 3}],
    "kv.GetFromListResp": [{"id": 8, "val": b64("p" * 700)}],
    "kv.DeleteReq": [{"id": 9, "key": "gone"}],
    "kv.DeleteResp": [{"id": 9}],
}

def encode(name, sample, threshold=None):
    pkg = name.split(".")[0]
    inc, f = FILES[pkg]
    args = [CLI, "encode", "--schema", os.path.join(inc, f), "-I", inc, "-I", PROTOS,
            "--message", name]
    if threshold is not None:
        args += ["--zero-copy-threshold", str(threshold)]
    return subprocess.run(args, input=json.dumps(sample).encode(), check=True,
                          capture_output=True).stdout

def write(sub, fname, data):
    d = os.path.join(HERE, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)

def vector(name):
    text = open(os.path.join(ROOT, "crates/cornflakes/tests/vectors", name)).read()
    return bytes.fromhex("".join(text.split()))

objects = []
for i, name in enumerate(MESSAGES):
    for j, sample in enumerate(SAMPLES[name]):
        for zc in (None, 16):
            wire = encode(name, sample, zc)
            tag = f"{name}-{j}" + ("-zc" if zc else "")
            write("objects", tag, bytes([i]) + wire)
            objects.append(wire)
        write("json", f"{name}-{j}", bytes([i]) + json.dumps(sample).encode())
# The spec's worked examples (docs/wire-format.md), as examples.GetM and examples.Outer.
write("objects", "spec-example1", bytes([MESSAGES.index("examples.GetM")]) + vector("example1.hex"))
write("objects", "spec-example2", bytes([MESSAGES.index("examples.Outer")]) + vector("example2.hex"))

# .proto sources: scripts/fuzz.sh gives proto_parse the project's schema directories
# (schemas/, the codegen test protos) as seeds where they are; only this derived variant is
# written here: features.proto made self-contained (the import is not next to a fuzz input).
feat = open(os.path.join(PROTOS, "features.proto")).read()
feat = feat.replace('import "common/types.proto";\n', "").replace("common.Color", "int32") \
           .replace("common.Point", "Nested")
write("proto", "features-self-contained.proto", feat.encode())

# Frames: valid Ethernet/IPv4/UDP + framing to the fuzz stack (fuzz/src/frames.rs).
LOCAL_MAC, LOCAL_IP, LOCAL_PORT = bytes([2, 0, 0, 0, 0, 1]), bytes([10, 0, 0, 1]), 4791

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff

def frame(peer, payload):
    mac, ip, port = bytes([2, 0, 0, 0, 1, peer]), bytes([10, 0, 1, peer]), 5000 + peer
    ulen = 8 + len(payload)
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0, ip, LOCAL_IP)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    udp = struct.pack("!HHHH", port, LOCAL_PORT, ulen, 0) + payload
    c = csum(ip + LOCAL_IP + struct.pack("!BBH", 0, 17, ulen) + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    return LOCAL_MAC + mac + b"\x08\x00" + iph + udp

def framing(mtype, mid, idx, cnt, total, off, body):
    return struct.pack("<BBHIHHII", 1, 0, mtype, mid, idx, cnt, total, off) + body

msg = objects[0]
write("frames", "single", frame(1, framing(1, 1, 0, 1, len(msg), 0, msg)))
big = objects[MESSAGES.index("kv.GetResp") * 2]  # 600-byte value
write("frames", "segment0", frame(1, framing(2, 2, 0, 2, len(big), 0, big[:400])))
write("frames", "empty", frame(2, framing(1, 3, 0, 1, 0, 0, b"")))
arp = (LOCAL_MAC and b"\xff" * 6) + bytes([2, 0, 0, 0, 1, 1]) + b"\x08\x06" + struct.pack(
    "!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, bytes([2, 0, 0, 0, 1, 1]), bytes([10, 0, 1, 1]),
    b"\0" * 6, LOCAL_IP)
write("frames", "arp-request", arp)

# Sequences (fuzz_targets/stack_sequence.rs): byte 0 = checksum mode, then steps.
def seg(peer, mid, idx, cnt, total, off, body):
    return bytes([(peer << 4) | 0]) + struct.pack("<HBHHIIH", 7, mid, idx, cnt, total, off,
                                                  len(body)) + body
def cons(peer, total, seg_len, idx, mid, fill):
    return bytes([(peer << 4) | 1]) + struct.pack("<HHHBB", total - 1, seg_len - 1, idx, mid, fill)
def tick(ms):
    return bytes([6, ms])
# A 3-segment message in order, out of order, with a duplicate; two peers interleaved; expiry.
write("sequences", "in-order", bytes([1]) + cons(1, 3000, 1200, 0, 1, 0x61)
      + cons(1, 3000, 1200, 1, 1, 0x61) + cons(1, 3000, 1200, 2, 1, 0x61))
write("sequences", "interleaved-dup-expire", bytes([0]) + cons(1, 3000, 1200, 2, 1, 1)
      + cons(2, 2500, 1000, 0, 1, 2) + cons(1, 3000, 1200, 2, 1, 1) + tick(60)
      + cons(1, 3000, 1200, 0, 1, 1) + cons(2, 2500, 1000, 1, 1, 2) + cons(2, 2500, 1000, 2, 1, 2))
write("sequences", "fuzzed-header", bytes([1]) + seg(1, 1, 0, 2, 10, 0, b"abcde")
      + seg(1, 1, 1, 2, 10, 5, b"fghij"))
print("seeds written under", HERE)

# The mlx5 target (fuzz_targets/mlx5_completions.rs): byte 0 = checksum offload, then ops
# (0/1 garbage receive/send CQE, 2 raw frame, 3 UDP frame, 4 send, 5 device runs, 6 poll send
# completions, 7 receive burst).
def send(mid, lens):
    return bytes([4, mid, len(lens)]) + b"".join(struct.pack("<H", l) for l in lens)
def cqe(which, idx, body):
    return bytes([which, idx]) + body.ljust(64, b"\0")[:64]
udp_body = framing(1, 9, 0, 1, 5, 0, b"hello")
write("mlx5", "send-receive", bytes([1]) + send(1, [10, 700]) + bytes([6, 7])
      + send(2, [2000, 2000]) + bytes([5, 6, 7, 7]))
write("mlx5", "inject-receive", bytes([0]) + bytes([3]) + struct.pack("<H", len(udp_body))
      + bytes([1]) + udp_body + bytes([7]) + bytes([2, 60, 0]) + frame(1, udp_body)[:60]
      + bytes([7]))
# A receive CQE (opcode RESP_SEND 0x2 in op_own's high nibble, owner 0) naming WQE 0 with a
# byte count larger than the buffer, then an error CQE, then garbage on the send CQ.
resp = bytearray(64)
resp[44:48] = struct.pack(">I", 0xFFFFFF)
resp[60:62] = struct.pack(">H", 0)
resp[63] = 0x20
err = bytearray(64)
err[55] = 0x04
err[63] = 0xD0
write("mlx5", "garbage-cqes", bytes([1]) + cqe(0, 0, bytes(resp)) + bytes([7])
      + cqe(0, 1, bytes(err)) + bytes([7]) + send(3, [100]) + cqe(1, 0, bytes(err)) + bytes([6, 5, 6, 7]))

# The TCP deframer (fuzz_targets/tcp_deframe.rs): byte 0 = receive buffer size / 16 - 1, bytes
# 1..9 = seed of the read lengths, then the stream (frames: one-segment framing headers).
def stream(*frames):
    return b"".join(framing(t, i, 0, 1, len(b), 0, b) for (t, i, b) in frames)
cut = bytes([3]) + struct.pack("<Q", 0x9E3779B97F4A7C15)
write("tcp", "frames", cut + stream((1, 1, b""), (2, 7, b"x" * 300), (3, 9, b"y" * 2500)))
write("tcp", "partial-tail", cut + stream((1, 1, b"abc"))
      + framing(1, 2, 0, 1, 2000, 0, b"z" * 100))
write("tcp", "too-long", cut + stream((1, 1, b"ok")) + framing(1, 2, 0, 1, 3001, 0, b""))
write("tcp", "bad-header", cut + stream((1, 1, b"ok")) + framing(1, 2, 0, 2, 5, 0, b"hello"))
