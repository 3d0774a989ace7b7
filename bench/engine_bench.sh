#!/usr/bin/env bash
# Engine benchmarks (issue 4), one table at the end. Not part of `make test`.
#   bash bench/engine_bench.sh [REPS]
# 1. Throughput: 64 concurrent requests on wp-11m (prompt 128, output 128, greedy) through
#    `tarmac bench offline`, against llama.cpp (node-llama-cpp 3.21.1) serving the same load on
#    64 context sequences of one context, same run; each at 1 and 2 threads, best vs best. The
#    same requests one at a time give the batching gain. Roofline: OpenBLAS sgemm GFLOP/s
#    (2048x2048, better of 1 and 2 threads) / (2 * parameters) tokens/s.
# 2. Prefix cache: 1024-token shared prefix + 32 unique tokens on a 135M make-random model
#    (context 2048), TTFT with the cache on vs off (requests one at a time so TTFT is prefill);
#    and 384 + 32 on wp-11m.
# 3. KV waste at 64 mixed-length requests; int8 vs f16 KV: requests running at once under the
#    same --kv-memory, and whole requests that fit in the blocks of a larger budget.
# Medians of REPS runs (default 3; the prefix pairs at least 5). Machines are shared: compare
# ratios taken in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BIN=${TARMAC_BIN:-build/bin/tarmac}
WP=models/wp-11m-f16.gguf
CACHE=/tmp/tarmac-bench
mkdir -p "$CACHE"
SMOL=$CACHE/smollm-135m-f16.gguf
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
[[ -f $SMOL ]] || $BIN gguf make-random --shape smollm-135m --type f16 "$SMOL" >/dev/null
if [[ ! -d bench/llamacpp/node_modules ]]; then (cd bench/llamacpp && npm ci --silent); fi
OUT=$(mktemp -d)

# median of a JSON field over REPS runs of a command: med FIELD CMD...
med() {
  local field=$1; shift
  for _ in $(seq "$REPS"); do "$@" 2>/dev/null; done |
    python3 -c "import sys,json,statistics as s; v=[eval('j'+sys.argv[1],{'j':json.loads(l)}) for l in sys.stdin if l.strip()]; print(s.median(v))" "$field"
}
off() { $BIN bench offline --json "$@"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" | tee "$OUT/table"
# 1. throughput
for t in 1 2; do
  med "['output_tokens_per_s']" off -m $WP --requests 64 --concurrency 64 --prompt-len 128 --output-len 128 -t $t > "$OUT/tar$t"
done
SEQ=$(med "['output_tokens_per_s']" off -m $WP --requests 16 --concurrency 1 --prompt-len 128 --output-len 128 -t 1)
LC1=$(med "['output_tokens_per_s']" node bench/llamacpp/bench_parallel.mjs $WP --threads 1 --requests 64 --concurrency 64 --prompt-len 128 --output-len 128)
# llama.cpp with 2 threads under node is ~25x slower on this model: a shorter output keeps the run short.
LC2=$(REPS=1 med "['output_tokens_per_s']" node bench/llamacpp/bench_parallel.mjs $WP --threads 2 --requests 64 --concurrency 64 --prompt-len 128 --output-len 16)
# The machine's sgemm: the better of 1 and 2 threads.
SGEMM=$(build/bin/bench_kernels --benchmark_filter='BM_Sgemm/openblas/2048/2048/' --benchmark_format=json 2>/dev/null |
  python3 -c "import sys,json; print(max(b['GFLOP/s'] for b in json.load(sys.stdin)['benchmarks']))" || echo 0)
PARAMS=$($BIN gguf inspect --json $WP | python3 -c "import sys,json; j=json.load(sys.stdin); print(sum(t['elements'] for t in j['tensors']))")
python3 - "$(cat $OUT/tar1)" "$(cat $OUT/tar2)" "$SEQ" "$LC1" "$LC2" "$SGEMM" "$PARAMS" <<'PY' | tee -a "$OUT/table"
import sys
t1, t2, seq, l1, l2, sg, params = map(float, sys.argv[1:])
best, lbest = max(t1, t2), max(l1, l2)
roof = sg * 1e9 / (2 * params) if sg > 0 else float('nan')
print(f"wp-11m f16, 64 concurrent (prompt 128, output 128): output tok/s")
print(f"  tarmac   1 thread {t1:8.1f}   2 threads {t2:8.1f}")
print(f"  llama.cpp 1 thread {l1:7.1f}   2 threads {l2:8.1f} (64 seqs, output 16)")
print(f"  best vs best: {best / lbest:.2f}x llama.cpp; one at a time {seq:.1f} tok/s -> batching gain {best / seq:.2f}x")
print(f"  compute roofline: sgemm {sg:.1f} GFLOP/s / (2 x {params/1e6:.1f}M params) = {roof:.0f} tok/s; tarmac at {100 * best / roof:.0f}%")
PY

# 2. prefix cache TTFT: on and off alternate within each rep (the host's speed drifts over
# minutes), 24 requests each: p50 over 23 hits, past the first few, which run while the
# weights' cache lines are still being promoted (the first hits after a miss are 20-50%
# slower on wp-11m; with 8 requests the p50 lands on them). At least 5 pairs: one pair's
# ratio moves by +-10% with the host's load (a 1.8 ms step), more than any other figure here.
PFX_REQS=24
PFX_REPS=$(( REPS > 5 ? REPS : 5 ))
for spec in "$SMOL 1024" "$WP 384"; do
  set -- $spec
  for _ in $(seq "$PFX_REPS"); do
    for mode in on off; do
      flag=""; [[ $mode == off ]] && flag=--no-prefix-cache
      echo "$mode $(off -m $1 --requests $PFX_REQS --concurrency 1 --shared-prefix $2 --prompt-len 32 --output-len 4 -t 2 $flag 2>/dev/null | tr -d '\n')"
    done
  done > "$OUT/pfx"
  python3 - "$OUT/pfx" "$1" "$2" <<'PY' | tee -a "$OUT/table"
import sys, json, statistics as st
on, off, pairs, saved = [], [], [], ""
for line in open(sys.argv[1]):
    mode, js = line.split(" ", 1)
    j = json.loads(js)
    (on if mode == "on" else off).append(j["ttft_ms"]["p50"])
    if mode == "on": saved = f"{j['prefill_tokens_saved']} of {j['prompt_tokens']}"
    if mode == "off": pairs.append(off[-1] / on[-1])
name = sys.argv[2].split("/")[-1]
print(f"prefix {sys.argv[3]}+32 on {name}: TTFT p50 {st.median(off):.1f} ms off, {st.median(on):.2f} ms on: "
      f"{st.median(off) / st.median(on):.1f}x lower (pairs: {', '.join(f'{r:.1f}' for r in pairs)}); "
      f"prefill tokens saved {saved}")
PY
done

# 3. KV waste and int8 capacity
waste=$(med "['kv_waste']" off -m $WP --requests 64 --concurrency 64 --prompt-len 192 --output-len 128 --length-spread 0.5 -t 2)
f16=$(med "['max_concurrent_running']" off -m $WP --requests 128 --concurrency 128 --prompt-len 192 --output-len 128 -t 2 --kv-memory 0.02)
i8=$(med "['max_concurrent_running']" off -m $WP --requests 128 --concurrency 128 --prompt-len 192 --output-len 128 -t 2 --kv-memory 0.02 --kv-dtype int8)
# Capacity: whole 320-token requests (20 blocks of 16) that fit in the blocks of a larger
# budget (0.08 GiB: ~1750 f16 blocks, so rounding to whole requests costs < 1%); the running
# count above also depends on how far the admitted requests have grown when the pool fills.
blk16=$(off -m $WP --requests 1 --concurrency 1 --prompt-len 16 --output-len 1 -t 2 --kv-memory 0.08 2>/dev/null | python3 -c "import sys,json; print(json.load(sys.stdin)['kv_blocks'])")
blk8=$(off -m $WP --requests 1 --concurrency 1 --prompt-len 16 --output-len 1 -t 2 --kv-memory 0.08 --kv-dtype int8 2>/dev/null | python3 -c "import sys,json; print(json.load(sys.stdin)['kv_blocks'])")
python3 -c "import sys; w,a,b,c,d=map(float,sys.argv[1:]); print(f'KV waste, 64 mixed-length requests (prompt 96-288, output 64-192): {100*w:.2f}%'); print(f'--kv-memory 0.02 GiB, 128 requests of prompt 192 + output 128: {a:.0f} running at once with f16 KV, {b:.0f} with int8 ({b/a:.2f}x)'); print(f'--kv-memory 0.08 GiB: {c:.0f} f16 blocks, {d:.0f} int8 blocks ({d/c:.3f}x); whole 320-token requests that fit: {c//20:.0f} vs {d//20:.0f} ({(d//20)/(c//20):.2f}x)')" "$waste" "$f16" "$i8" "$blk16" "$blk8" | tee -a "$OUT/table"
echo
cat "$OUT/table"
