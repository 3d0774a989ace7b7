#!/usr/bin/env bash
# The router's numbers (issue 19), on wp-1m (small) and wp-11m (large), one thread per model:
#  1. `bench route`: the cascade's RouteLLM metrics (PGR, APGR with bootstrap CIs against random,
#     the oracle's APGR, CPT(50%)/CPT(80%), the point within one SE of always-large, escalated
#     TTFT ratio) on PROMPTS held-out prompts of 128 tokens, 32 greedy tokens, at k = 8 (and 16, 32);
#  2. `bench route --online ONLINE`: the argmin learning online, the large model ~3x slower in the
#     middle third (busy threads on its CPU); regret against the best fixed policy, convergence;
#  3. logprob capture cost: `bench offline --logprobs 0` vs `--logprobs 2` (what a cascade asks
#     for), alternated REPS times, decode tokens/s at batch 1 and 16, medians;
#  4. bench_router: routing decision latency per policy (Google Benchmark, p99 per decision).
#   bash bench/route_bench.sh [PROMPTS] [ONLINE] [REPS]   TARMAC_BIN: the binary (build/bin/tarmac)
# Not under `chrt -f`: the online phase's busy threads would then never yield the large model's
# CPU (same real-time priority), and it would crawl.
set -euo pipefail
cd "$(dirname "$0")/.."
PROMPTS=${1:-500}
ONLINE=${2:-5000}
REPS=${3:-5}
BIN=${TARMAC_BIN:-build/bin/tarmac}
BENCH_ROUTER=${BENCH_ROUTER:-$(dirname "$BIN")/bench_router}
SMALL=models/wp-1m-f16.gguf
LARGE=models/wp-11m-f16.gguf
TEXT=../shared/data/war-and-peace.txt
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
[[ -f $TEXT ]] || { echo "needs $TEXT" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
echo "outputs in $OUT"

for k in 8 16 32; do
  $BIN bench route --small $SMALL --large $LARGE --text $TEXT --prompts "$PROMPTS" --k $k --json \
    > "$OUT/route_k$k.json"
done
$BIN bench route --small $SMALL --large $LARGE --text $TEXT --online "$ONLINE" --json > "$OUT/online.json"

for r in $(seq "$REPS"); do
  for lp in 0 2; do
    for c in 1 16; do
      $BIN bench offline -m $LARGE -t 1 --requests $((c * 4)) --concurrency $c --prompt-len 128 \
        --output-len 128 --logprobs $lp --json > "$OUT/lp${lp}_c${c}_r$r.json"
    done
  done
done
if [[ -x $BENCH_ROUTER ]]; then
  $BENCH_ROUTER --benchmark_format=json > "$OUT/bench_router.json"
fi

python3 - "$OUT" "$REPS" <<'PY'
import json, os, sys, statistics as st
out, reps = sys.argv[1], int(sys.argv[2])
for k in (8, 16, 32):
    d = json.load(open(f"{out}/route_k{k}.json"))
    print(f"cascade k={k}: " + ", ".join(f"{key} {d[key]}" for key in d if not isinstance(d[key], (list, dict))))
o = json.load(open(f"{out}/online.json"))
print("online: " + ", ".join(f"{key} {o[key]}" for key in o if not isinstance(o[key], (list, dict))))
for c in (1, 16):
    base = [json.load(open(f"{out}/lp0_c{c}_r{r}.json"))["output_tokens_per_s"] for r in range(1, reps + 1)]
    lp = [json.load(open(f"{out}/lp2_c{c}_r{r}.json"))["output_tokens_per_s"] for r in range(1, reps + 1)]
    ratios = [b / a for a, b in zip(base, lp)]
    print(f"logprobs=2 vs 0, wp-11m f16 1 thread batch {c}: {st.median(lp):.0f} vs {st.median(base):.0f} tok/s, "
          f"per-pair ratio median {st.median(ratios):.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f})")
p = f"{out}/bench_router.json"
if os.path.exists(p):
    for b in json.load(open(p))["benchmarks"]:
        extra = {k: v for k, v in b.items() if k.endswith("_us")}
        print(f"{b['name']}: {b['real_time']:.2f} {b['time_unit']} mean; " +
              ", ".join(f"{k} {v:.2f}" for k, v in extra.items()))
PY
