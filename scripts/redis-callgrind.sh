#!/usr/bin/env bash
# Counts the instructions of Redis's reply path per request, RESP against Cornflakes objects,
# under callgrind (load-independent, so it can run on a busy machine): redis-cf-bench drives the
# patched redis-server on the emulated ConnectX (--no-pin: the device and Redis share the CPUs,
# no speed canary), each server runs under valgrind with collection on only inside serveResp /
# serveObject (one call per request: parse or decode, the lookup, the reply built and sent on the
# mlx5 driver), and each format's total is divided by its calls. glibc's rep-movsb/stosb paths
# are turned off so copies count as the instructions they execute. Docs: docs/performance.md,
# "Redis".
# Usage: scripts/redis-callgrind.sh [EXPERIMENTS]   (default get,mget2,lrange2; output in
#        target/redis-callgrind/)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-$root/target}"
out="$target/redis-callgrind"
server="$target/redis-cornflakes/src/src/redis-server"
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[ -x "$server" ] || scripts/redis-cornflakes.sh build >/dev/null
cargo build -q --release -p redis-cornflakes --bin redis-cf-bench
rm -rf "$out"
mkdir -p "$out"
cat > "$out/redis-server" <<WRAP
#!/bin/sh
exec env GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824 \\
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.%p" \\
  --toggle-collect=serveResp --toggle-collect=serveObject "$server" "\$@"
WRAP
chmod +x "$out/redis-server"
"$target/release/redis-cf-bench" --redis-server "$out/redis-server" --datapath emu --no-pin \
  --experiments "${1:-get,mget2,lrange2}" --rates 500 --duration 2 --warmup 0.2 --trials 1 \
  --slowed-retries 0 --no-stock --out "$out/bench" >"$out/bench.log" 2>&1 \
  || { tail -20 "$out/bench.log"; exit 1; }
python3 - "$out"/callgrind.* <<'PY'
import re, sys
print("| experiment | format | instructions per request (reply path) | requests |")
print("|---|---|---:|---:|")
for path in sorted(sys.argv[1:], key=lambda p: int(p.rsplit(".", 1)[1])):
    names, calls, total, cmd, cfn = {}, 0, 0, "", None
    lines = open(path).read().splitlines()
    for i, l in enumerate(lines):
        if l.startswith("cmd:"):
            cmd = l
        elif l.startswith(("totals:", "summary:")):
            total = int(l.split()[1])
        m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", l)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            cfn = names.get(m.group(2)) if m.group(1) == "cfn" else cfn
        elif l.startswith("calls=") and cfn:
            if cfn in ("serveResp", "serveObject"):
                calls += int(l.split("=")[1].split()[0])
            cfn = None
    exp = re.search(r"emu-([a-z0-9]+)-(Resp|Cornflakes)/", cmd)
    name = (exp.group(1), exp.group(2)) if exp else ("?", "?")
    print(f"| {name[0]} | {name[1]} | {total / max(calls, 1):.0f} | {calls} |")
PY
echo "callgrind files: $out/callgrind.* (callgrind_annotate --inclusive=yes FILE: where it goes)"
