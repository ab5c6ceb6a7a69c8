#!/usr/bin/env bash
# Builds the C API (static library), compiles tests/c/test_capi.c against it with `cc`, and runs
# it twice: plain, and with the C side under AddressSanitizer (-fsanitize=address; the Rust
# library itself is checked under ASan by scripts/test.sh's nightly run of its Rust tests).
# Then tests/c/test_emu.c, plain and under ASan: a C server on the emulated ConnectX
# (cf_dp_emu_new) answering 10 000 requests, and a lying one whose wrong replies the device
# catches (needs two CPUs, else SKIPPED).
# Then the kernel-bypass datapaths from C (tests/c/test_dp.c, plain and under ASan): the library
# built with `--features emu,xdp,ice`, an AF_XDP and a DPDK (net_af_packet) server datapath each on
# one end of a veth pair between two network namespaces made here, a socket datapath in the
# other. Those need root, `ip`, `ethtool`, AF_XDP in the kernel and the features' system
# packages (crates/datapath-xdp/APT_PACKAGES, crates/datapath-ice/APT_PACKAGES); without them
# each prints `SKIPPED <test>: <why>` and lists it in target/skipped.txt by crates/test-skip's
# rule (scripts/skip.sh; a failure under CORNFLAKES_REQUIRE_ALL=1, or CORNFLAKES_REQUIRE_XDP /
# _ICE=1).
# ConnectX (mlx5) needs the NIC: tests/datapaths.rs.
# Usage: crates/cornflakes-c/tests/c/run.sh   (from anywhere; called by scripts/test.sh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
# With the emulated ConnectX (feature emu, no system libraries) for test_emu.c.
cargo build -q -p cornflakes-c --features emu
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

# shellcheck source=../../../../scripts/skip.sh
. "$root/scripts/skip.sh"

# --- the emulated ConnectX (cf_dp_emu_new), plain and under ASan: needs two CPUs -------------
cc "${cflags[@]}" -o "$out/test_emu" "$here/test_emu.c" "${libs[@]}"
cc "${cflags[@]}" "${asan[@]}" -o "$out/test_emu_asan" "$here/test_emu.c" "${libs[@]}"
if [ "$(nproc)" -lt 2 ]; then
  skip "test_emu.c" "the emulated ConnectX needs two CPUs (server and device); this has $(nproc)"
else
  "$out/test_emu"
  ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$out/test_emu_asan"
fi

# --- the kernel-bypass datapaths ----------------------------------------------------------------
# shellcheck source=netns.sh
. "$here/netns.sh"
why=$(cf_xdp_why)
if [ -z "$why" ] && ! pkg-config --exists libdpdk 2>/dev/null; then
  why="libdpdk-dev is missing (crates/datapath-ice/APT_PACKAGES)"
fi
if [ -n "$why" ]; then
  skip "test_dp.c xdp" "$why" CORNFLAKES_REQUIRE_XDP
  skip "test_dp.c ice" "$why" CORNFLAKES_REQUIRE_ICE
  exit 0
fi

# The library with the datapaths, and the system libraries it needs when linked statically.
native=$(cargo rustc -q -p cornflakes-c --features emu,xdp,ice --crate-type staticlib -- \
  --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)
[ -n "$native" ] || { echo "no native-static-libs line from cargo rustc" >&2; exit 1; }
# shellcheck disable=SC2206
dplibs=("$lib" -Wl,--no-as-needed $native)
cc "${cflags[@]}" -o "$out/test_dp" "$here/test_dp.c" "${dplibs[@]}"
cc "${cflags[@]}" "${asan[@]}" -o "$out/test_dp_asan" "$here/test_dp.c" "${dplibs[@]}"

trap cf_veth_cleanup EXIT
run_dp() { # KIND SPEC PEER: plain, then under ASan, each on a fresh pair
  local kind=$1 spec=$2 peer=$3 n=1 exe
  for exe in test_dp test_dp_asan; do
    cf_veth_pair "${kind:0:1}$n" "$n"
    local s=${spec//@IF@/$IF_A} p=${peer//@PEER@/$IP_B=$MAC_B}
    echo "$exe $kind: $s in $NS_A, socket peer in $NS_B"
    ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
      ip netns exec "$NS_A" "$out/$exe" "$root/schemas" "$kind" "$s" "$NS_B" "$IP_A" "$IP_B" "$p"
    n=$((n + 1))
  done
}
run_dp xdp "@IF@" "@PEER@"
run_dp ice "--vdev net_af_packet0,iface=@IF@" "-"
