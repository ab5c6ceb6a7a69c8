#!/usr/bin/env bash
# Builds the C API (static library), compiles tests/c/test_capi.c against it with `cc`, and runs
# it twice: plain, and with the C side under AddressSanitizer (-fsanitize=address; the Rust
# library itself is checked under ASan by scripts/test.sh's nightly run of its Rust tests).
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
libs=("$lib" -lpthread -ldl -lm)
cc "${cflags[@]}" -o "$out/test_capi" "$here/test_capi.c" "${libs[@]}"
"$out/test_capi" "$root/schemas"
cc "${cflags[@]}" -fsanitize=address -fno-omit-frame-pointer -o "$out/test_capi_asan" \
  "$here/test_capi.c" "${libs[@]}"
ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$out/test_capi_asan" "$root/schemas"
