#!/bin/bash
# The KV server's instructions per request: `Kv::handle` inclusive under callgrind, only its calls
# collected (--toggle-collect), the total over the server's received count.
#
#   scripts/kv-handle-instructions.sh KV_BINARY LIST_LENS SERIALIZATION [WORKLOAD]
#   e.g. scripts/kv-handle-instructions.sh target/release/kv 1-4 cornflakes
#
# Prints "WORKLOAD LIST_LENS SERIALIZATION REQUESTS INSTRUCTIONS_PER_REQUEST". Needs valgrind.
# memcpy/memset stay on their vector loops (the glibc tunables below), not `rep movsb`, which
# callgrind counts one per byte.
set -euo pipefail
B=$1; L=$2; S=$3; W=${4:-google}
export GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
valgrind --tool=callgrind --fair-sched=yes --separate-threads=yes \
  --toggle-collect='<kv_store::server::Kv as *Handler>::handle*' \
  --callgrind-out-file="$D/cg.out" "$B" bench --datapath emu --workload "$W" --list-lens "$L" \
  --serializations "$S" --rates 2000 --duration 0.5 --warmup 0.02 --trials 1 --out "$D/o" \
  > "$D/log" 2>&1
n=$(grep -o 'received=[0-9]*' "$D/log" | head -1 | cut -d= -f2)
ir=$(for f in "$D"/cg.out-*; do grep -E '^summary:|^totals:' "$f" | head -1 | awk '{print $2}'; done |
  awk '{s+=$1} END {print s}')
if [ -z "$n" ] || [ "$n" = 0 ] || [ -z "$ir" ] || [ "$ir" = 0 ]; then
  echo "no requests or no Kv::handle counted (log: see below)" >&2; tail -5 "$D/log" >&2; exit 1
fi
python3 -c "print('$W $L $S', $n, round($ir/$n, 1))"
