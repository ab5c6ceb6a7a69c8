#!/bin/bash
# A server's whole path per request under callgrind: `Server::poll` inclusive (receive,
# dispatch, the handler's work, the reply built and posted, flush, completions), only its
# calls collected (--toggle-collect), over the requests the server received. The driver (an
# example of the app) sends bursts that one poll each receives whole, so no empty poll is in
# the count.
#
#   scripts/path-instructions.sh kv WORKLOAD LIST_LENS SERIALIZATION [REQUESTS]
#   scripts/path-instructions.sh echo MODE SHAPE [REQUESTS]
#   e.g. scripts/path-instructions.sh kv google 1-4 cornflakes
#        scripts/path-instructions.sh echo cornflakes list-8x512
#
# Builds the driver (`cargo build --release --example kv_path` or `echo_path`) unless
# PATH_DRIVER names a binary. Prints "ARGS REQUESTS INSTRUCTIONS_PER_REQUEST". Needs valgrind.
# memcpy/memset stay on their vector loops (the glibc tunables below), not `rep movsb`, which
# callgrind counts one per byte.
set -euo pipefail
app=$1
shift
case "$app" in
  kv) pkg=kv-store ex=kv_path ;;
  echo) pkg=echo ex=echo_path ;;
  *) echo "app: kv or echo" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
B=${PATH_DRIVER:-}
if [ -z "$B" ]; then
  cargo build --release -q -p "$pkg" --example "$ex"
  B=target/release/examples/$ex
fi
export GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=1073741824:glibc.cpu.x86_rep_movsb_threshold=1073741824
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
valgrind --tool=callgrind --toggle-collect='*::Server<*>::poll' \
  --callgrind-out-file="$D/cg.out" "$B" "$@" > "$D/log" 2>&1 || {
  echo "the driver failed:" >&2; tail -5 "$D/log" >&2; exit 1; }
n=$(grep -o 'received=[0-9]*' "$D/log" | head -1 | cut -d= -f2)
ir=$(grep -E '^summary:|^totals:' "$D/cg.out" | head -1 | awk '{print $2}')
if [ -z "$n" ] || [ "$n" = 0 ] || [ -z "$ir" ] || [ "$ir" = 0 ]; then
  echo "no requests or no Server::poll counted:" >&2; tail -5 "$D/log" >&2; exit 1
fi
python3 -c "print('$app $*', $n, round($ir/$n, 1))"
