#!/bin/bash
# The generated client's own instructions per open-loop request under callgrind: its
# `send_<method>` + `flush` and `poll` (crates/cornflakes-codegen/gen-tests/examples/
# client_cost.rs), with collection toggled off inside every datapath call (`harness::fenced`),
# over the requests answered.
#
#   scripts/client-instructions.sh [REQUESTS]
#
# Prints "REQUESTS INSTRUCTIONS_PER_REQUEST". Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p cornflakes-codegen-tests --example client_cost
export GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
valgrind --tool=callgrind --toggle-collect='client_cost::send_burst*' \
  --toggle-collect='client_cost::poll_once*' \
  --toggle-collect='cornflakes_codegen_tests::harness::fenced*' \
  --callgrind-out-file="$D/cg.out" target/release/examples/client_cost "${1:-32768}" \
  > "$D/log" 2>&1 || { echo "the driver failed:" >&2; tail -5 "$D/log" >&2; exit 1; }
n=$(grep -o 'answered=[0-9]*' "$D/log" | cut -d= -f2)
ir=$(grep -E '^summary:|^totals:' "$D/cg.out" | head -1 | awk '{print $2}')
if [ -z "$n" ] || [ "$n" = 0 ] || [ -z "$ir" ]; then
  echo "nothing counted:" >&2; tail -5 "$D/log" >&2; exit 1
fi
python3 -c "print($n, round($ir/$n, 1))"
