#!/usr/bin/env bash
# Builds the C API (static library), compiles tests/c/test_capi.c against it with `cc`, and runs
# it twice: plain, and with the C side under AddressSanitizer (-fsanitize=address; the Rust
# library itself is checked under ASan by scripts/test.sh's nightly run of its Rust tests).
# Then the kernel-bypass datapaths from C (tests/c/test_dp.c, plain and under ASan): the library
# built with `--features xdp,ice`, an AF_XDP and a DPDK (net_af_packet) server datapath each on
# one end of a veth pair between two network namespaces made here, a socket datapath in the
# other. Those need root, `ip`, `ethtool`, AF_XDP in the kernel and the features' system
# packages (crates/datapath-xdp/APT_PACKAGES, crates/datapath-ice/APT_PACKAGES); without them
# each prints `SKIPPED <test>: <why>` and lists it in target/skipped.txt, as crates/test-skip
# does (a failure under CORNFLAKES_REQUIRE_ALL=1, or CORNFLAKES_REQUIRE_XDP / _ICE=1).
# ConnectX (mlx5) needs the NIC: tests/datapaths.rs.
# Usage: crates/cornflakes-c/tests/c/run.sh   (from anywhere; called by scripts/test.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build -q -p cornflakes-c
lib="$target/debug/libcornflakes_c.a"
out="$target/c-api-test"
mkdir -p "$out"
cflags=(-std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -g -I "$root/crates/cornflakes-c/include")
asan=(-fsanitize=address -fno-omit-frame-pointer)
libs=("$lib" -lpthread -ldl -lm)
cc "${cflags[@]}" -o "$out/test_capi" "$here/test_capi.c" "${libs[@]}"
"$out/test_capi" "$root/schemas"
cc "${cflags[@]}" "${asan[@]}" -o "$out/test_capi_asan" "$here/test_capi.c" "${libs[@]}"
ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$out/test_capi_asan" "$root/schemas"

# --- the kernel-bypass datapaths ----------------------------------------------------------------
skip() { # TEST WHY REQUIRE_VAR: crates/test-skip's line, list and failure switches
  local line="SKIPPED $1: $2"
  if [ "${CORNFLAKES_REQUIRE_ALL:-}" = 1 ] || [ "${!3:-}" = 1 ]; then
    echo "$1: cannot run ($2) but CORNFLAKES_REQUIRE_ALL or $3 is 1" >&2
    exit 1
  fi
  echo "$line" >&2
  echo "$line" >>"${CORNFLAKES_SKIP_LOG:-$target/skipped.txt}"
}
why=""
if [ "$(id -u)" != 0 ]; then
  why="not running as root (network namespaces, veth and AF_XDP need it)"
elif ! ip -V >/dev/null 2>&1; then
  why="the \`ip\` command (iproute2) is missing"
elif ! ethtool --version >/dev/null 2>&1; then
  why="the \`ethtool\` command is missing"
elif ! pkg-config --exists libbpf libdpdk 2>/dev/null || ! command -v clang >/dev/null; then
  why="libbpf-dev, libdpdk-dev or clang is missing (crates/datapath-xdp/APT_PACKAGES, crates/datapath-ice/APT_PACKAGES)"
fi
if [ -n "$why" ]; then
  skip "test_dp.c xdp" "$why" CORNFLAKES_REQUIRE_XDP
  skip "test_dp.c ice" "$why" CORNFLAKES_REQUIRE_ICE
  exit 0
fi

# The library with the datapaths, and the system libraries it needs when linked statically.
native=$(cargo rustc -q -p cornflakes-c --features xdp,ice --crate-type staticlib -- \
  --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)
[ -n "$native" ] || { echo "no native-static-libs line from cargo rustc" >&2; exit 1; }
# shellcheck disable=SC2206
dplibs=("$lib" -Wl,--no-as-needed $native)
cc "${cflags[@]}" -o "$out/test_dp" "$here/test_dp.c" "${dplibs[@]}"
cc "${cflags[@]}" "${asan[@]}" -o "$out/test_dp_asan" "$here/test_dp.c" "${dplibs[@]}"

pairs=()
cleanup() {
  for ns in "${pairs[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
# Two namespaces joined by a veth pair: A's end (the datapath's) has no kernel address, B's is
# 10.83.N.2/24 with software checksums (veth would pass the kernel's partial ones on). Sets
# NS_A NS_B IF_A IP_A IP_B MAC_B.
make_pair() { # TAG N
  NS_A="cfcapi-$$-$1-a" NS_B="cfcapi-$$-$1-b" IF_A="cc$$$1a" IF_B="cc$$$1b"
  IP_A="10.83.$2.1" IP_B="10.83.$2.2"
  pairs+=("$NS_A" "$NS_B")
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$IF_A" netns "$NS_A" type veth peer name "$IF_B" netns "$NS_B"
  for side in "$NS_A $IF_A" "$NS_B $IF_B"; do
    set -- $side
    ip -n "$1" link set lo up
    ip -n "$1" link set "$2" mtu 1500 up
  done
  ip -n "$NS_B" addr add "$IP_B/24" dev "$IF_B"
  ip netns exec "$NS_B" ethtool -K "$IF_B" tx off >/dev/null
  MAC_B=$(ip -n "$NS_B" -o link show "$IF_B" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
}
run_dp() { # KIND SPEC PEER: plain, then under ASan, each on a fresh pair
  local kind=$1 spec=$2 peer=$3 n=1
  for exe in test_dp test_dp_asan; do
    make_pair "${kind:0:1}$n" "$n"
    local s=${spec//@IF@/$IF_A} p=${peer//@PEER@/$IP_B=$MAC_B}
    echo "$exe $kind: $s in $NS_A, socket peer in $NS_B"
    ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
      ip netns exec "$NS_A" "$out/$exe" "$root/schemas" "$kind" "$s" "$NS_B" "$IP_A" "$IP_B" "$p"
    n=$((n + 1))
  done
}
# shellcheck disable=SC2016
if ! python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW)' 2>/dev/null; then
  skip "test_dp.c xdp" "the kernel refuses an AF_XDP socket" CORNFLAKES_REQUIRE_XDP
else
  run_dp xdp "@IF@" "@PEER@"
fi
run_dp ice "--vdev net_af_packet0,iface=@IF@" "-"
