#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of fuzz/ (docs/fuzzing.md), without cargo-fuzz: the
# flags below are the ones `cargo fuzz build` passes (SanitizerCoverage + AddressSanitizer,
# debug assertions and overflow checks on, `--cfg fuzzing`), so a clean machine needs only the
# nightly toolchain. `cargo fuzz run <target>` in the repository root works too, if installed.
#
#   scripts/fuzz.sh build [TARGET...]            build (all targets by default)
#   scripts/fuzz.sh run SECONDS [TARGET...]      fuzz each target SECONDS, growing fuzz/corpus/TARGET
#                                                (seeded from the committed fuzz/seeds/)
#   scripts/fuzz.sh ci [SECONDS]                 build, then fuzz each target SECONDS (default 15)
#                                                from the seeds only, keeping nothing; CI's mode
#   scripts/fuzz.sh replay [TARGET...]           run every seed and corpus input once (regressions)
#   scripts/fuzz.sh list                         the targets
#
# A crash, a failed oracle, a leak, an input slower than 10 s or above 2 GiB RSS fails the
# run: the input is saved in fuzz/artifacts/TARGET/ and the script exits non-zero.
# FUZZ_JOBS=N runs N fuzzing processes per target in `run` mode (libFuzzer -fork=N).
set -euo pipefail
cd "$(dirname "$0")/.."

triple=x86_64-unknown-linux-gnu
bin_dir=fuzz/target/$triple/release
targets_all=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^cornflakes-fuzz$')

say() { printf '\n==> %s\n' "$*"; }

build() {
  local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
  flags="$flags -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
  flags="$flags -Cllvm-args=-sanitizer-coverage-pc-table"
  flags="$flags -Cllvm-args=-sanitizer-coverage-trace-compares"
  flags="$flags --cfg fuzzing -Zsanitizer=address -Cdebug-assertions -Coverflow-checks"
  local bins=""
  for t in "$@"; do bins="$bins --bin $t"; done
  say "building fuzz targets:" "$@"
  # --target keeps build scripts and proc macros uninstrumented, as cargo-fuzz does.
  # shellcheck disable=SC2086
  RUSTFLAGS="$flags" cargo +nightly build --release --manifest-path fuzz/Cargo.toml \
    --target "$triple" $bins
}

# run TARGET SECONDS CORPUS_DIR...: the first directory receives new inputs.
run_one() {
  local t=$1 secs=$2
  shift 2
  mkdir -p "fuzz/artifacts/$t" "$@"
  local extra=()
  if [ -n "${FUZZ_JOBS:-}" ]; then extra+=("-fork=$FUZZ_JOBS"); fi
  say "fuzzing $t for ${secs}s"
  local stamp
  stamp=$(mktemp)
  set +e
  ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$bin_dir/$t" "$@" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" "${extra[@]}" 2>&1 |
    # The line after "panicked at" is the panic's message: keep it.
    awk -v keep='^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==|SUMMARY|Test unit|Done|INFO: (Loaded|seed corpus)|thread|panicked|.*assert|  (left|right):)' \
      'after { print; after = 0; next } /panicked at/ { after = 1 } $0 ~ keep { print }'
  local status=${PIPESTATUS[0]}
  set -e
  if [ "$status" != 0 ]; then
    echo "FAILED: fuzz target $t (exit $status); input saved in fuzz/artifacts/$t/" >&2
    echo "  reproduce: $bin_dir/$t fuzz/artifacts/$t/<file>" >&2
    # CI keeps no files: print the inputs of this run (up to 8 KiB each) so the log alone
    # reproduces the finding (base64 -d > input).
    find "fuzz/artifacts/$t" -type f -newer "$stamp" | while read -r f; do
      echo "  $f ($(wc -c <"$f") bytes), base64 of its first 8 KiB:" >&2
      head -c 8192 "$f" | base64 -w 0 >&2
      echo >&2
    done
  fi
  rm -f "$stamp"
  return "$status"
}

# The committed seeds of a target (fuzz/seeds/generate.py writes them), and the inputs of
# its past findings (fuzz/regressions/TARGET), which every run replays first.
seeds() {
  if [ -d "fuzz/regressions/$1" ]; then echo "fuzz/regressions/$1"; fi
  case $1 in
    decode_generated | view_generated | decode_dynamic | differential) echo fuzz/seeds/objects ;;
    json_encode) echo fuzz/seeds/json ;;
    # The project's own .proto files where they live (no copies), plus derived variants.
    proto_parse) echo schemas crates/cornflakes-codegen/gen-tests/protos fuzz/seeds/proto ;;
    stack_frame) echo fuzz/seeds/frames ;;
    stack_sequence) echo fuzz/seeds/sequences ;;
    mlx5_completions) echo fuzz/seeds/mlx5 ;;
    tcp_deframe) echo fuzz/seeds/tcp ;;
    *) echo "fuzz/seeds/$1" ;;
  esac
}

max_len() {
  case $1 in
    stack_* | tcp_deframe) echo 65536 ;;
    proto_parse | json_encode) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

cmd=${1:-}
shift || true
case $cmd in
  build)
    # shellcheck disable=SC2086
    build ${*:-$targets_all}
    ;;
  run)
    secs=${1:?seconds}
    shift
    ts=${*:-$targets_all}
    # shellcheck disable=SC2086
    build $ts
    for t in $ts; do
      # shellcheck disable=SC2046
      run_one "$t" "$secs" "fuzz/corpus/$t" $(seeds "$t")
    done
    ;;
  ci)
    secs=${1:-15}
    # shellcheck disable=SC2086
    build $targets_all
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for t in $targets_all; do
      # shellcheck disable=SC2046
      run_one "$t" "$secs" "$tmp/$t" $(seeds "$t")
    done
    ;;
  replay)
    ts=${*:-$targets_all}
    # shellcheck disable=SC2086
    build $ts
    for t in $ts; do
      # shellcheck disable=SC2207
      dirs=($(seeds "$t"))
      [ -d "fuzz/corpus/$t" ] && dirs+=("fuzz/corpus/$t")
      say "replaying ${dirs[*]}"
      ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" "$bin_dir/$t" -runs=0 "${dirs[@]}" 2>&1 |
        tail -3
      [ "${PIPESTATUS[0]}" = 0 ] || exit 1
    done
    ;;
  list) echo "$targets_all" ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
