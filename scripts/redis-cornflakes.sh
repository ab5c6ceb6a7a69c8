#!/usr/bin/env bash
# Fetches Redis 7.0.15 from Debian's source package (pinned version and .dsc checksum), unpacks
# it with Debian's patches (security fixes) into target/redis-cornflakes/src, applies the patches in
# apps/redis-cornflakes/patches/ (in order) and adds apps/redis-cornflakes/cornflakes.c, and
# builds redis-server with the vendored allocator and Lua (MALLOC=libc, no TLS), linked with the
# Cornflakes C library (crates/cornflakes-c, built here in release). Docs:
# apps/redis-cornflakes/README.md.
#
# Usage: scripts/redis-cornflakes.sh [fetch|build]   (default: build, which fetches first)
# The C library is built with the emulated ConnectX (feature emu). CORNFLAKES_C_FEATURES=xdp (or
# mlx5, ice, a comma list) adds those datapaths, so `cornflakes-datapath` can name them, and links
# their system libraries.
# Needs: apt deb-src access to Debian bookworm (added here as root when missing), dpkg-dev
# (dpkg-source), make and cc (apps/redis-cornflakes/APT_PACKAGES).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

VERSION="5:7.0.15-1~deb12u10"
DSC="redis_7.0.15-1~deb12u10.dsc"
DSC_SHA256="6416560d9f6e692a524867d8a437d97c9310c374a70d0bac1fee9259bf5e9463"
work="${CARGO_TARGET_DIR:-$root/target}/redis-cornflakes"
src="$work/src"

say() { printf '\n==> %s\n' "$*"; }

fetch() {
  mkdir -p "$work/dl"
  if [ ! -f "$work/dl/$DSC" ]; then
    if ! apt-cache showsrc redis 2>/dev/null | grep -q "^Version: $VERSION"; then
      [ "$(id -u)" = 0 ] || { echo "need root to add a deb-src entry (or add it yourself)" >&2; exit 1; }
      say "adding deb-src entries for bookworm (+ security) and updating"
      cat > /etc/apt/sources.list.d/cornflakes-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
      apt-get update -qq
    fi
    say "apt-get source redis=$VERSION"
    (cd "$work/dl" && apt-get source --download-only "redis=$VERSION")
  fi
  echo "$DSC_SHA256  $work/dl/$DSC" | sha256sum -c --quiet
  # dpkg-source checks the tarballs against the .dsc's checksums and applies Debian's patch
  # series (its configuration defaults and the security fixes of this version). The plain
  # `make` below still builds the vendored jemalloc/Lua/hiredis: Debian's switch to system
  # libraries is a flag its packaging passes, which we do not. The tree is unpacked again
  # whenever our patches change (a stamp holds their checksum).
  stamp="$(cat "$root"/apps/redis-cornflakes/patches/*.patch | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$src/src/server.c" ] || [ "$(cat "$work/patches.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$src"
    dpkg-source --no-copy -x "$work/dl/$DSC" "$src" >/dev/null
    for p in "$root"/apps/redis-cornflakes/patches/*.patch; do
      say "applying $(basename "$p")"
      patch -d "$src" -p1 --quiet < "$p"
    done
    echo "$stamp" > "$work/patches.stamp"
  fi
  # The Cornflakes side of the server is its own file, kept readable in apps/redis-cornflakes.
  cp -p "$root/apps/redis-cornflakes/cornflakes.c" "$src/src/cornflakes.c"
}

build() {
  fetch
  # The emulated ConnectX (`cornflakes-datapath "emu DIR"`, what redis-cf-bench drives) is always
  # built in: it needs no system library.
  local features="emu${CORNFLAKES_C_FEATURES:+,$CORNFLAKES_C_FEATURES}" libs=""
  if [ "$features" = emu ]; then
    say "building the C API (cargo build --release -p cornflakes-c --features emu)"
    cargo build -q --release -p cornflakes-c --features emu
  else
    say "building the C API with $features (cargo rustc --release -p cornflakes-c --features $features)"
    # The system libraries those datapaths need, as rustc names them for a static link.
    libs=$(cargo rustc -q --release -p cornflakes-c --features "$features" --crate-type staticlib \
      -- --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)
    [ -n "$libs" ] || { echo "no native-static-libs line from cargo rustc" >&2; exit 1; }
    libs="-Wl,--no-as-needed $libs"
  fi
  say "building redis-server (make -j${CARGO_BUILD_JOBS:-2}; log: $work/build.log)"
  # Linked again every time: cargo may hand back a library built earlier (with other features)
  # whose date is older than the binary, which make alone would not relink.
  rm -f "$src/src/redis-server"
  make -C "$src" -j"${CARGO_BUILD_JOBS:-2}" MALLOC=libc BUILD_TLS=no CORNFLAKES_LIBS="$libs" \
    CORNFLAKES_LIB="${CARGO_TARGET_DIR:-$root/target}/release/libcornflakes_c.a" \
    CORNFLAKES_INCLUDE="$root/crates/cornflakes-c/include" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; exit 1; }
  echo "$src/src/redis-server"
}

case "${1:-build}" in
  fetch) fetch ;;
  build) build ;;
  *) echo "usage: $0 [fetch|build]" >&2; exit 2 ;;
esac
