#!/usr/bin/env bash
# Builds redis-cornflakes (scripts/redis-cornflakes.sh) and tests it: the functional test over
# the Cornflakes port in both formats (test/functional.c, against the C API), a short
# redis-cf-bench run on the emulated ConnectX (tests/emu_smoke.rs), then Redis's own
# test units for the commands the patch touches (type/string, type/list), run with the
# Cornflakes port on so every long SET value and list element lives in pinned memory. Called by
# scripts/test.sh.
# Usage: apps/redis-cornflakes/test/run.sh [--no-redis-units]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
# A step that cannot run here is reported by crates/test-skip's rule: listed in the skip list,
# and a failure under CORNFLAKES_REQUIRE_ALL=1.
# shellcheck source=../../../scripts/skip.sh
. "$root/scripts/skip.sh"
# The source comes from Debian's source package: without root (to add the deb-src entry) or
# without the archive, say so instead of failing or passing silently.
if ! fetch_log=$(scripts/redis-cornflakes.sh fetch 2>&1); then
  echo "$fetch_log" | tail -5
  skip "redis-cornflakes tests" "the Redis source could not be fetched ($(echo "$fetch_log" | tail -1))"
  exit 0
fi
scripts/redis-cornflakes.sh build >/dev/null
src="$target/redis-cornflakes/src"
server="$src/src/redis-server"
out="$target/redis-cornflakes/test"
mkdir -p "$out"
cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -g -I crates/cornflakes-c/include \
  -o "$out/functional" "$here/functional.c" "$target/release/libcornflakes_c.a" -lpthread -ldl -lm

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# Ports from this process id, so parallel runs do not collide.
base=$((20000 + ($$ % 2000) * 4))
for fmt in resp cornflakes; do
  tcp=$base; udp=$((base + 1)); base=$((base + 2))
  "$server" --port "$tcp" --bind 127.0.0.1 --save '' --appendonly no --cornflakes-port "$udp" \
    --cornflakes-format "$fmt" --cornflakes-schema "$root/schemas/kv.proto" \
    --logfile "$out/redis-$fmt.log" &
  pids+=($!)
  for _ in $(seq 50); do "$src/src/redis-cli" -p "$tcp" ping >/dev/null 2>&1 && break; sleep 0.1; done
  if [ "$fmt" = cornflakes ]; then
    # The list functional.c reads with LRANGE: two elements over the threshold, one under.
    "$src/src/redis-cli" -p "$tcp" rpush cf:biglist "$(head -c 600 /dev/zero | tr '\0' a)" \
      "$(head -c 2000 /dev/zero | tr '\0' b)" small >/dev/null
  fi
  echo "==> functional test, $fmt format"
  "$out/functional" "$fmt" "$udp" "$root/schemas"
  "$src/src/redis-cli" -p "$tcp" info cornflakes | grep -E "malformed|pinned_values|pinned_list_elements|zero_copy"
done

cli=("$src/src/redis-cli" -p "$tcp")
# List elements (the object server above): cf:biglist's 600-, 2000- and 3000-byte elements are
# pinned, and the object test's LRANGEs sent 2 + 3 of them by reference (plus its first GET of a
# pinned string: 6 values in all). LSET replaces a pinned element with a new one, LPOP and DEL
# release them, and a list freed by a background thread (UNLINK of 100 long elements) is
# released on the main thread's timer.
info() { "${cli[@]}" info cornflakes | sed -n "s/^cornflakes_$1:\([0-9]*\).*/\1/p"; }
"${cli[@]}" rpush cf:biglist "$(head -c 700 /dev/zero | tr '\0' c)" >/dev/null
[ "$(info pinned_list_elements)" = 4 ] || { echo "FAILED: $(info pinned_list_elements) pinned list elements, not 4"; exit 1; }
[ "$(info zero_copy_values_sent)" = 6 ] || { echo "FAILED: $(info zero_copy_values_sent) values sent by reference, not 6"; exit 1; }
"${cli[@]}" lset cf:biglist 0 "$(head -c 800 /dev/zero | tr '\0' d)" >/dev/null
[ "$(info pinned_list_elements)" = 4 ] || { echo "FAILED: LSET leaked or lost a pinned element"; exit 1; }
[ "$("${cli[@]}" lindex cf:biglist 0)" = "$(head -c 800 /dev/zero | tr '\0' d)" ] || { echo "FAILED: LSET"; exit 1; }
"${cli[@]}" lpop cf:biglist >/dev/null
[ "$(info pinned_list_elements)" = 3 ] || { echo "FAILED: LPOP did not release a pinned element"; exit 1; }
[ "$("${cli[@]}" llen cf:biglist)" = 4 ] || { echo "FAILED: the list lost elements"; exit 1; }
"${cli[@]}" memory usage cf:biglist >/dev/null
"${cli[@]}" del cf:biglist >/dev/null
[ "$(info pinned_list_elements)" = 0 ] || { echo "FAILED: DEL did not release pinned elements"; exit 1; }
for i in $(seq 100); do echo "RPUSH cf:lazy $(head -c 600 /dev/zero | tr '\0' e)$i"; done | "${cli[@]}" >/dev/null
[ "$(info pinned_list_elements)" = 100 ] || { echo "FAILED: RPUSH did not pin 100 elements"; exit 1; }
"${cli[@]}" unlink cf:lazy >/dev/null
sleep 0.5
[ "$(info pinned_list_elements)" = 0 ] || { echo "FAILED: a list freed in the background left $(info pinned_list_elements) pinned elements"; exit 1; }
[ "$(info pinned_list_element_bytes)" = 0 ] || { echo "FAILED: pinned element bytes not back to 0"; exit 1; }
echo "pinned list elements: RPUSH pins, LRANGE references, LSET replaces, LPOP/DEL/UNLINK release: ok"

# A long value set over TCP is pinned; APPEND copies it to the heap; a value freed by a
# background thread (FLUSHALL ASYNC) is released on the main thread's timer.
pinned() { "${cli[@]}" info cornflakes | sed -n 's/^cornflakes_pinned_values:\([0-9]*\).*/\1/p'; }
"${cli[@]}" set cf:pin "$(head -c 1000 /dev/zero | tr '\0' x)" >/dev/null
[ "$(pinned)" = 1 ] || { echo "FAILED: a 1000-byte SET was not pinned"; exit 1; }
"${cli[@]}" append cf:pin yy >/dev/null
[ "$(pinned)" = 0 ] || { echo "FAILED: APPEND did not copy the pinned value"; exit 1; }
[ "$("${cli[@]}" strlen cf:pin)" = 1002 ] || { echo "FAILED: APPEND lost bytes"; exit 1; }
"${cli[@]}" set cf:pin "$(head -c 1000 /dev/zero | tr '\0' y)" >/dev/null
"${cli[@]}" flushall async >/dev/null
sleep 0.5
[ "$(pinned)" = 0 ] || { echo "FAILED: FLUSHALL ASYNC left a pinned value unreleased"; exit 1; }
echo "pinned values: SET pins, APPEND copies, FLUSHALL ASYNC releases: ok"

# redis-cf-bench on the emulated ConnectX (cornflakes-datapath emu), short: GET, LRANGE and
# Twitter's GETs and SETs in both formats at one load, every reply checked by the device
# (tests/emu_smoke.rs; two CPUs, else SKIPPED). About 20 s.
echo "==> redis-cf-bench --datapath emu, a short functional run"
cargo test -q -p redis-cornflakes --test emu_smoke -- --ignored

# The same server on the kernel-bypass datapaths: AF_XDP (cornflakes-datapath xdp) and DPDK on its
# net_af_packet virtual device (cornflakes-datapath ice), the C library rebuilt with those
# features, redis-server in network namespace A serving on its end of a veth pair (polling, no
# descriptor), functional.c's object test from namespace B over the kernel. Needs root, `ip`,
# `ethtool`, AF_XDP, libbpf and DPDK (crates/datapath-xdp/APT_PACKAGES,
# crates/datapath-ice/APT_PACKAGES); else SKIPPED. The default build is restored afterwards.
# shellcheck source=../../../crates/cornflakes-c/tests/c/netns.sh
. "$root/crates/cornflakes-c/tests/c/netns.sh"
bypass_why=$(cf_xdp_why)
if [ -z "$bypass_why" ] && ! pkg-config --exists libdpdk 2>/dev/null; then
  bypass_why="libdpdk-dev is missing (crates/datapath-ice/APT_PACKAGES)"
fi
if [ -n "$bypass_why" ]; then
  skip "redis-cornflakes on AF_XDP" "$bypass_why" CORNFLAKES_REQUIRE_XDP
  skip "redis-cornflakes on DPDK net_af_packet" "$bypass_why" CORNFLAKES_REQUIRE_ICE
else
  CORNFLAKES_C_FEATURES=xdp,ice scripts/redis-cornflakes.sh build >/dev/null
  trap 'cleanup; cf_veth_cleanup' EXIT
  n=1
  for kind in xdp ice; do
    echo "==> functional test on $kind (cornflakes-datapath $kind), objects"
    cf_veth_pair "r$n" "$n"
    case $kind in
      xdp) spec="xdp $IF_A $IP_B=$MAC_B" ;;
      ice) spec="ice --vdev net_af_packet0,iface=$IF_A" ;;
    esac
    tcp=$((base + n)) udp=7200
    ip netns exec "$NS_A" "$server" --port "$tcp" --bind 127.0.0.1 --save '' --appendonly no \
      --cornflakes-port "$udp" --cornflakes-bind "$IP_A" --cornflakes-datapath "$spec" \
      --cornflakes-format cornflakes --cornflakes-schema "$root/schemas/kv.proto" \
      --logfile "$out/redis-$kind.log" &
    pids+=($!)
    xcli=(ip netns exec "$NS_A" "$src/src/redis-cli" -p "$tcp")
    for _ in $(seq 100); do "${xcli[@]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
    "${xcli[@]}" rpush cf:biglist "$(head -c 600 /dev/zero | tr '\0' a)" \
      "$(head -c 2000 /dev/zero | tr '\0' b)" small >/dev/null
    ip netns exec "$NS_B" "$out/functional" cornflakes "$udp" "$root/schemas" "$IP_A" "$IP_B"
    "${xcli[@]}" info cornflakes | grep -E "datapath|malformed|pinned_list_elements|zero_copy"
    "${xcli[@]}" info cornflakes | grep -q "^cornflakes_datapath:$kind" || { echo "FAILED: not on $kind"; exit 1; }
    [ "$("${xcli[@]}" info cornflakes | sed -n 's/^cornflakes_zero_copy_values_sent:\([0-9]*\).*/\1/p')" = 6 ] \
      || { echo "FAILED: values sent by reference on $kind"; exit 1; }
    "${xcli[@]}" shutdown nosave >/dev/null 2>&1 || true
    n=$((n + 1))
  done
  cf_veth_cleanup
  scripts/redis-cornflakes.sh build >/dev/null
fi

if [ "${1:-}" != "--no-redis-units" ]; then
  if command -v tclsh >/dev/null; then
    echo "==> Redis's own tests: unit/type/string, unit/type/list (Cornflakes port on, values and list elements >= 512 B pinned)"
    (cd "$src" && ./runtest --single unit/type/string --single unit/type/list --clients 2 \
      --config cornflakes-port -1 --config cornflakes-schema "$root/schemas/kv.proto" \
      --config cornflakes-format resp) 2>&1 | tee "$out/runtest.log" | grep -E "\[(ok|err|exception)\]|All tests passed|\[TIMEOUT\]" | grep -v "\[ok\]" || true
    grep -q "All tests passed without errors" "$out/runtest.log"
    # Its list elements are mostly 500 B or shorter: again with a 100-byte threshold, so those
    # (compressed plain nodes, LINSERT, LSET, LTRIM of them) are pinned too.
    echo "==> Redis's own tests: unit/type/list again, list elements >= 100 B pinned"
    (cd "$src" && ./runtest --single unit/type/list --clients 2 \
      --config cornflakes-port -1 --config cornflakes-schema "$root/schemas/kv.proto" \
      --config cornflakes-format resp --config cornflakes-threshold 100) 2>&1 \
      | tee "$out/runtest-100.log" | grep -E "\[(err|exception)\]|All tests passed|\[TIMEOUT\]" || true
    grep -q "All tests passed without errors" "$out/runtest-100.log"
  else
    skip "redis runtest" "tclsh is not installed (apps/redis-cornflakes/APT_PACKAGES lists tcl)"
  fi
fi
