#!/usr/bin/env bash
# Mixture-of-experts speed against llama.cpp (issue 52), one table per part. Not part of
# `make test`. Random-weight files of Qwen3-30B-A3B's shape at reduced depth (make-random,
# cached in /tmp/tarmac-bench/moe): 24 of 48 layers in Q4_0 (~8.3 GiB) and in the Q4_K_M mix,
# 12 layers in Q8_0. Both engines read the same file in the same run, one after the other.
#   1. batch-1 decode and 512-token prefill, 1 and 2 threads, best vs best, with the share of
#      the read bandwidth decode reaches over the bytes a step reads (bench/compare_llamacpp.sh);
#   2. 16 concurrent sequences (prompt 128, output 128): tarmac `bench offline` against
#      llama.cpp serving 16 context sequences of one context (bench_parallel.mjs), output tok/s;
#   3. one MoE layer against the dense layer reading the same bytes (build/bin/bench_moe).
# Usage: bench/moe_bench.sh [--reps R] [--only q4_0|q4_k_m|q8_0] [--parts single,concurrent,kernels]
# Part 2 runs both engines at 2 threads (each one's best for every model measured here).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3
ONLY=""
PARTS=single,concurrent,kernels
while (($#)); do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --parts) PARTS="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=${TARMAC_BIN:-build/bin/tarmac}
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
if [[ ! -d bench/llamacpp/node_modules/node-llama-cpp ]]; then
  (cd bench/llamacpp && npm ci --no-audit --no-fund >/dev/null)
fi
DIR=/tmp/tarmac-bench/moe
mkdir -p "$DIR"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
# name shape type
FILES=(
  "q3m-l24-q4_0 qwen3-30b-a3b,layers=24 q4_0"
  "q3m-l24-q4_k_m qwen3-30b-a3b,layers=24 q4_k_m"
  "q3m-l12-q8_0 qwen3-30b-a3b,layers=12 q8_0"
)
med() {  # median of a JSON field over REPS runs of a command: med FIELD CMD...
  local field=$1; shift
  for _ in $(seq "$REPS"); do "$@" 2>/dev/null; done |
    python3 -c "import sys,json,statistics as s; print(s.median([json.loads(l)[sys.argv[1]] for l in sys.stdin if l.strip()]))" "$field"
}
for spec in "${FILES[@]}"; do
  read -r name shape type <<<"$spec"
  [[ -n $ONLY && $type != "$ONLY" ]] && continue
  f=$DIR/$name.gguf
  [[ -f $f ]] || $BIN gguf make-random --shape "$shape" --type "$type" --seed 1 "$f" >/dev/null
  echo "== $name ($(du -h "$f" | cut -f1))"
  [[ $PARTS == *single* ]] && bench/compare_llamacpp.sh --reps "$REPS" --decode 64 "$f" | tail -6
  if [[ $PARTS == *concurrent* ]]; then
    t=$(med output_tokens_per_s $BIN bench offline --json -m "$f" -t 2 --requests 16 --concurrency 16 --prompt-len 128 --output-len 128)
    l=$(med output_tokens_per_s node bench/llamacpp/bench_parallel.mjs "$(realpath "$f")" --threads 2 --requests 16 --concurrency 16 --prompt-len 128 --output-len 128)
    python3 -c "print(f'  16 concurrent (prompt 128, output 128), 2 thr: tarmac {$t:.1f}, llama.cpp {$l:.1f} output tok/s: {$t / $l:.2f}x')"
  fi
done
if [[ $PARTS == *kernels* ]]; then
  echo "== one Qwen3-30B-A3B MoE layer vs the dense layer reading the same bytes"
  build/bin/bench_moe --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true 2>/dev/null |
    grep -E "median" || true
fi
