# A step of a shell script that cannot run here, reported by the one rule every test follows
# (crates/test-skip, through its `test-skip` program). Sourced by scripts/test.sh,
# crates/cornflakes-c/tests/c/run.sh (through netns.sh) and apps/redis-cornflakes/test/run.sh.
#
#   skip TEST WHY [REQUIRE_VAR]   `SKIPPED TEST: WHY` on stderr and in the skip list
#                                 ($CORNFLAKES_SKIP_LOG, else the target directory's
#                                 skipped.txt, as the Rust tests); when CORNFLAKES_REQUIRE_ALL or
#                                 REQUIRE_VAR is 1 it says why instead and exits the calling
#                                 script with status 1.
#   skip_ready                    builds the program now (what `skip` does on first use), so a
#                                 script can report skips before anything else is built.
#
# The program is built into its own target directory, target/tools, which no step of
# scripts/test.sh prunes: a skip can be reported before the first build and after the other
# build trees are deleted. It has no dependencies; building it takes a second, and a fresh
# build is a no-op.

_cf_skip_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_cf_skip_bin=""

skip_ready() {
  if [ -z "$_cf_skip_bin" ]; then
    (cd "$_cf_skip_root" &&
      CARGO_TARGET_DIR="$_cf_skip_root/target/tools" cargo build -q -p test-skip --bin test-skip)
    _cf_skip_bin="$_cf_skip_root/target/tools/debug/test-skip"
  fi
}

skip() {
  skip_ready
  local log="${CORNFLAKES_SKIP_LOG:-${CARGO_TARGET_DIR:-$_cf_skip_root/target}/skipped.txt}"
  local require=()
  if [ -n "${3:-}" ]; then require=(--require "$3"); fi
  CORNFLAKES_SKIP_LOG="$log" "$_cf_skip_bin" "${require[@]}" "$1" "$2" || exit 1
}
