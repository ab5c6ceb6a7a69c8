#!/usr/bin/env bash
# Reruns one experiment whose result docs/performance.md quotes, with the command that made the
# kept result, into the ignored results/ folder, then says which files under docs/results/ the
# new ones replace.
#
#   scripts/reproduce.sh --list                      the experiments and what each runs
#   scripts/reproduce.sh EXPERIMENT [FLAG ...]       build, run, report; FLAGs go to every bench
#                                                    command (e.g. --array-mib 320, --rates ...)
#   scripts/reproduce.sh --dry-run EXPERIMENT [...]  print the commands, run nothing
#   scripts/reproduce.sh --check                     every file under docs/results/ (but its
#                                                    README) is one an experiment replaces
#
# Timing matters for every experiment here: run on a quiet machine (nothing else building or
# running), and read docs/performance.md, "Method", before comparing a run with the kept one.
set -euo pipefail
cd "$(dirname "$0")/.."

EXPERIMENTS="echo kv-twitter kv-cdn kv-google kv-ycsb cores calibrate calibrate-emu-1llc
calibrate-socket calibrate-xdp tcp-fig9 tcp-zc-cost redis kv-socket-peers kv-xdp"

# plan NAME: sets WHAT (one line), BUILD (a command), RUNS (bench commands, each given the extra
# flags), KEEP ("results/... docs/results/..." pairs: what a run writes and the kept file it
# replaces) and NOTE (what to know about the kept result). Returns 1 for an unknown name.
plan() {
  WHAT="" BUILD="" NOTE="" RUNS=() KEEP=()
  local R=target/release
  case "$1" in
    echo)
      WHAT="echo, List { id; 2 x 2048 B }, every mode, server core against the emulated ConnectX, the whole search 3 times (4-6 min, 2+ CPUs)"
      BUILD="cargo build --release -p echo"
      RUNS=("$R/echo bench --datapath emu --repeat 3 --out results/echo")
      KEEP=("results/echo/table.md docs/results/echo/table.md")
      NOTE="--repeat 3: each ratio is the median of three searches, with their spread (a single search moves a ratio by up to 30 % here)."
      ;;
    kv-twitter | kv-cdn)
      local w=${1#kv-}
      WHAT="KV store, the ${w} workload, every serialization, emulated ConnectX, the whole search 3 times (about 6 min, 2+ CPUs)"
      BUILD="cargo build --release -p kv-store --bin kv"
      RUNS=("$R/kv bench --datapath emu --workload $w --repeat 3 --out results/kv-$w")
      KEEP=("results/kv-$w/tables.md docs/results/kv-$w/tables.md")
      ;;
    kv-google)
      WHAT="KV store, Google's bytes sizes with lists of 1, 1-4, 1-8 and 1-16 values, emulated ConnectX, each search 3 times (about 20 min, 2+ CPUs)"
      BUILD="cargo build --release -p kv-store --bin kv"
      for l in 1 1-4 1-8 1-16; do
        RUNS+=("$R/kv bench --datapath emu --workload google --list-lens $l --repeat 3 --out results/kv-google-$l")
        KEEP+=("results/kv-google-$l/tables.md docs/results/kv-google-$l/tables.md")
      done
      ;;
    kv-ycsb)
      WHAT="KV store, YCSB-C getm of 4 x 1024 B, emulated ConnectX, bisection to 2 %, the whole search 3 times (about 7 min, 2+ CPUs)"
      BUILD="cargo build --release -p kv-store --bin kv"
      RUNS=("$R/kv bench --datapath emu --workload ycsb --shape 4x1024 --resolution 0.02 --repeat 3 --out results/kv-ycsb")
      KEEP=("results/kv-ycsb/tables.md docs/results/kv-ycsb/tables.md")
      NOTE="--resolution 0.02: at the default 5 % cornflakes and cornflakes-no-ssend fell into one bracket."
      ;;
    cores)
      WHAT="1 and 2 server cores on kernel UDP sockets: KV YCSB 1x4096 and 4x1024, echo list-2x512 (about 6 min)"
      BUILD="cargo build --release -p echo -p kv-store"
      for n in 1 2; do
        for s in 1x4096 4x1024; do
          RUNS+=("$R/kv bench --datapath socket --cores $n --serializations cornflakes,protobuf --workload ycsb --keys 100000 --shape $s --rates 50000,100000,150000,200000,250000,300000,400000 --out results/cores/kv-ycsb-$s-$n")
          KEEP+=("results/cores/kv-ycsb-$s-$n/tables.md docs/results/cores/kv-ycsb-$s-$n/tables.md")
        done
        RUNS+=("$R/echo bench --datapath socket --cores $n --modes raw,cornflakes,protobuf --shape list-2x512 --rates 100000,200000,300000,400000,500000,600000,800000,1000000,1200000 --out results/cores/echo-list-2x512-$n")
        KEEP+=("results/cores/echo-list-2x512-$n/table.md docs/results/cores/echo-list-2x512-$n/table.md")
      done
      NOTE="On a 2-CPU machine two spinning server cores take both CPUs from the clients: correctness and cost, not scaling (docs/cores.md)."
      ;;
    calibrate)
      WHAT="the copy-threshold calibration on the emulated ConnectX, array 10 x the last-level cache (3-6 min, 2+ CPUs)"
      BUILD="cargo build --release -p calibrate"
      RUNS=("$R/calibrate run --datapath emu --out results/calibrate-emu")
      KEEP=("results/calibrate-emu/heatmap.svg docs/results/calibrate-emu/heatmap.svg")
      NOTE="The kept run passed --array-mib 320 (its VM reported a 480 MiB cache); pass --array-mib when the machine misreports its cache (docs/calibration.md, \"Budget\")."
      ;;
    calibrate-emu-1llc)
      WHAT="the calibration on the emulated ConnectX with a 32 MiB array (segments mostly in cache; 2-3 min, 2+ CPUs)"
      BUILD="cargo build --release -p calibrate"
      RUNS=("$R/calibrate run --datapath emu --array-mib 32 --out results/calibrate-emu-1llc")
      KEEP=("results/calibrate-emu-1llc/heatmap.svg docs/results/calibrate-emu-1llc/heatmap.svg")
      ;;
    calibrate-socket)
      WHAT="the calibration over kernel UDP sockets on 127.0.0.1 (4-5 min)"
      BUILD="cargo build --release -p calibrate"
      RUNS=("$R/calibrate run --out results/calibrate-socket")
      KEEP=("results/calibrate-socket/heatmap.svg docs/results/calibrate-socket/heatmap.svg")
      ;;
    calibrate-xdp)
      WHAT="the calibration over AF_XDP on a veth pair in a network namespace (4-5 min, root)"
      BUILD="cargo build --release -p calibrate --features xdp"
      RUNS=("$R/calibrate run --datapath xdp --out results/calibrate-xdp")
      KEEP=("results/calibrate-xdp/heatmap.svg docs/results/calibrate-xdp/heatmap.svg")
      ;;
    tcp-fig9)
      WHAT="the paper's Figure 9 over loopback TCP, 1024 B, at 175 000 and at 50 000 req/s (about 1 min)"
      BUILD="cargo build --release -p tcp-echo"
      RUNS=("$R/tcp-echo fig9 --rate 175000 --out results/tcp-fig9" "$R/tcp-echo fig9 --rate 50000 --out results/tcp-fig9-50k")
      KEEP=("results/tcp-fig9/fig9.json docs/results/tcp-fig9/fig9.json"
        "results/tcp-fig9/fig9.png docs/results/tcp-fig9/fig9.png"
        "results/tcp-fig9-50k/fig9.json docs/results/tcp-fig9-50k/fig9.json"
        "results/tcp-fig9-50k/fig9.png docs/results/tcp-fig9-50k/fig9.png")
      ;;
    tcp-zc-cost)
      WHAT="CPU per send of a copy, MSG_ZEROCOPY and io_uring SENDMSG_ZC over loopback TCP (about 1 min)"
      BUILD="cargo build --release -p datapath-tcp --example zc_cost"
      RUNS=("mkdir -p results/tcp-zc-cost && $R/examples/zc_cost > results/tcp-zc-cost/zc_cost.tsv")
      KEEP=("results/tcp-zc-cost/zc_cost.tsv docs/results/tcp-zc-cost/zc_cost.tsv")
      ;;
    redis)
      WHAT="Redis with Cornflakes (Table 3 and Figure 8, Twitter) on the emulated ConnectX with 2+ CPUs (kernel sockets with one), against the stock redis-server (builds Redis on first use)"
      BUILD="cargo build --release -p redis-cornflakes --bin redis-cf-bench"
      RUNS=("$R/redis-cf-bench --repeat 3 --out results/redis")
      KEEP=("results/redis/tables.md docs/results/redis/tables.md"
        "results/redis/redis.png docs/results/redis/redis.png"
        "results/redis/redis-latency-twitter.png docs/results/redis/redis-latency-twitter.png")
      ;;
    kv-socket-peers)
      WHAT="KV store on kernel UDP sockets beside redis-server and memcached (TCP), Twitter (about 4 min; apt: redis-server memcached)"
      BUILD="cargo build --release -p kv-store --bin kv"
      RUNS=("$R/kv bench --datapath socket --workload twitter --peers redis,memcached --rates 25000,50000,75000,100000,125000,150000,200000,250000,300000,400000 --duration 2 --warmup 0.3 --requests 200000 --out results/kv-socket-peers-twitter")
      KEEP=("results/kv-socket-peers-twitter/peers.md docs/results/kv-socket-peers-twitter/peers.md"
        "results/kv-socket-peers-twitter/tables.md docs/results/kv-socket-peers-twitter/tables.md")
      ;;
    kv-xdp)
      WHAT="KV store over AF_XDP on a veth pair, Google 1-4 (about 1.5 min, root)"
      BUILD="cargo build --release -p kv-store --features xdp --bin kv"
      RUNS=("$R/kv bench --datapath xdp --workload google --list-lens 1-4 --duration 1 --warmup 0.2 --rates 50000,100000,150000,200000,250000,300000,400000,500000,600000 --memory-limit 268435456 --out results/kv-xdp-google")
      KEEP=("results/kv-xdp-google/tables.md docs/results/kv-xdp-google/tables.md")
      ;;
    *) return 1 ;;
  esac
}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# --check: each recorded result has the command that regenerates it, and each experiment's
# recorded files exist.
check() {
  local want have e k bad=0
  want=$(for e in $EXPERIMENTS; do
    plan "$e"
    for k in "${KEEP[@]}"; do echo "${k#* }"; done
  done | sort -u)
  have=$(git ls-files docs/results | grep -v '^docs/results/README.md$' | sort -u)
  for k in $(comm -13 <(echo "$want") <(echo "$have")); do
    echo "reproduce.sh: $k is recorded but no experiment regenerates it" >&2
    bad=1
  done
  for k in $(comm -23 <(echo "$want") <(echo "$have")); do
    echo "reproduce.sh: an experiment replaces $k, which is not recorded" >&2
    bad=1
  done
  [ $bad = 0 ] && echo "reproduce.sh: each of the $(echo "$have" | wc -l) recorded files has its experiment"
  return $bad
}

if [ $# = 0 ]; then usage; fi
if [ "$1" = --check ]; then
  check
  exit
fi
if [ "$1" = --list ]; then
  for e in $EXPERIMENTS; do
    plan "$e"
    printf '%-19s %s\n' "$e" "$WHAT"
    for r in "${RUNS[@]}"; do printf '%-19s   %s\n' "" "$r"; done
  done
  exit 0
fi
dry=0
if [ "$1" = --dry-run ]; then
  dry=1
  shift
  [ $# -gt 0 ] || usage
fi
name=$1
shift
if ! plan "$name"; then
  echo "reproduce.sh: unknown experiment '$name'; --list lists them" >&2
  exit 2
fi
extra=""
if [ $# -gt 0 ]; then extra=" $(printf '%q ' "$@")"; extra=${extra% }; fi

echo "==> $name: $WHAT"
[ -z "$NOTE" ] || echo "    $NOTE"
echo "    $BUILD"
[ $dry = 1 ] || eval "$BUILD"
for r in "${RUNS[@]}"; do
  # The extra flags go to the bench, before any redirection.
  case "$r" in
    *" > "*) cmd="${r%% > *}$extra > ${r#* > }" ;;
    *) cmd="$r$extra" ;;
  esac
  echo "    $cmd"
  [ $dry = 1 ] || eval "$cmd"
done

echo "==> to record this run, replace the kept files:"
for k in "${KEEP[@]}"; do
  src=${k% *} dst=${k#* }
  if [ $dry = 1 ] || [ -f "$src" ]; then
    echo "    cp $src $dst"
  else
    echo "    (missing: $src was not written; keep $dst)"
  fi
done
echo "    then update the numbers quoted in docs/performance.md and the run's line in docs/results/README.md"
