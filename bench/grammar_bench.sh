#!/usr/bin/env bash
# Constrained vs free decoding through the engine (issue 25), via `tarmac bench offline`; not a
# test. Not in `make test`.
#   flock /tmp/tarmac-bench.lock bash bench/grammar_bench.sh [REPS]
# wp-11m, prompts from ../shared/data/war-and-peace.txt (random ids when absent), greedy,
# 128 output tokens at most, at batch 1 (8 requests one at a time) and 16 concurrent (64
# requests): free decoding, then `--constrain json_object` and `--constrain
# schema:bench/schemas/person.json`, alternating A/B within each repetition. A constrained
# request ends when its grammar is complete, so beside output tokens/s the decode phase's mean
# TPOT (time per output token after the first) is compared: ratio = free TPOT / constrained
# TPOT (>= 0.95 is the issue's goal; 1 = no cost), and the same for the median inter-token
# latency (ITL p50: robust to other jobs' stalls on a shared machine). Then the compile time
# of a 50-property schema (bench/schemas/fifty_properties.json) through the engine's
# GrammarCache, the vocabulary's TokenTable built beforehand. Between the two, a same-run
# comparison at batch 1: constrained and free requests alternating in one process. Medians
# of REPS (default 5).
# Run it under the bench lock, as the other scripts are (the machine's cores are shared; a
# lock taken per run let other scripts in between the A/B pairs).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
BIN=${TARMAC_BIN:-build/bin/tarmac}
WP=models/wp-11m-f16.gguf
TEXT=../shared/data/war-and-peace.txt
T=${THREADS:-2}
CACHE=/tmp/tarmac-bench
mkdir -p "$CACHE"
WORK=(--workload random)
[[ -f $TEXT ]] && WORK=(--workload text --prompt-file $TEXT)

# one [--output-len N] ARGS...: a run's JSON line (128 output tokens unless given first)
one() {
  local out=128
  if [[ $1 == --output-len ]]; then out=$2; shift 2; fi
  $BIN bench offline --json -t $T -m $WP --prompt-len 64 --output-len $out "${WORK[@]}" "$@" 2>/dev/null
}

declare -A shape=([1]="--requests 8 --concurrency 1" [16]="--requests 64 --concurrency 16")
for conc in 1 16; do
  : > $CACHE/grammar_free_$conc.jsonl
  : > $CACHE/grammar_object_$conc.jsonl
  : > $CACHE/grammar_schema_$conc.jsonl
  for _ in $(seq "$REPS"); do
    one ${shape[$conc]} >> $CACHE/grammar_free_$conc.jsonl
    one ${shape[$conc]} --constrain json_object >> $CACHE/grammar_object_$conc.jsonl
    one ${shape[$conc]} --constrain schema:bench/schemas/person.json >> $CACHE/grammar_schema_$conc.jsonl
  done
done
# Same run, batch 1: requests alternate constrained / free in one process (--constrain-every
# 2), so both see the same machine; their per-bucket TPOTs are compared within each run.
for name in object schema; do : > $CACHE/grammar_alt_$name.jsonl; done
for _ in $(seq "$REPS"); do
  one --requests 16 --concurrency 1 --constrain json_object --constrain-every 2 >> $CACHE/grammar_alt_object.jsonl
  one --requests 16 --concurrency 1 --constrain schema:bench/schemas/person.json --constrain-every 2 >> $CACHE/grammar_alt_schema.jsonl
done
: > $CACHE/grammar_compile.jsonl
for _ in $(seq "$REPS"); do
  one --output-len 4 --requests 1 --concurrency 1 --constrain schema:bench/schemas/fifty_properties.json >> $CACHE/grammar_compile.jsonl
done

python3 - "$CACHE" "$REPS" <<'PY'
import json, statistics as st, sys
cache, reps = sys.argv[1], int(sys.argv[2])
def load(name): return [json.loads(l) for l in open(f"{cache}/{name}.jsonl") if l.strip()]
print(f"wp-11m, greedy, output <= 128, medians of {reps} runs (A/B alternating)")
print(f"{'batch':>5} {'grammar':<12} {'out tok/s':>10} {'TPOT ms':>8} {'ITL p50':>8} {'tokens/req':>10} {'TPOT ratio':>10} {'ITL ratio':>9} {'tok/s ratio':>11}")
for conc in (1, 16):
    free = load(f"grammar_free_{conc}")
    for name, label in (("free", "none"), ("object", "json_object"), ("schema", "person.json")):
        runs = load(f"grammar_{name}_{conc}")
        tps = st.median(r["output_tokens_per_s"] for r in runs)
        tpot = st.median(r["tpot_ms"]["mean"] for r in runs)
        per_req = st.median(r["output_tokens"] / r["requests"] for r in runs)
        # ratios within each A/B pair, then the median
        tr = st.median(f["tpot_ms"]["mean"] / r["tpot_ms"]["mean"] for f, r in zip(free, runs))
        sr = st.median(r["output_tokens_per_s"] / f["output_tokens_per_s"] for f, r in zip(free, runs))
        # the median inter-token latency: the per-step cost, robust to the stalls other jobs
        # on the machine cause (which move the mean TPOT by tens of percent)
        itl = st.median(r["itl_ms"]["p50"] for r in runs)
        ir = st.median(f["itl_ms"]["p50"] / r["itl_ms"]["p50"] for f, r in zip(free, runs))
        print(f"{conc:>5} {label:<12} {tps:>10.1f} {tpot:>8.3f} {itl:>8.3f} {per_req:>10.1f} {tr:>10.3f} {ir:>9.3f} {sr:>11.3f}")
print("same run, batch 1, constrained and free requests alternating (8 + 8 a run): TPOT of each kind's median request")
print(f"{'grammar':<12} {'free TPOT':>9} {'constr. TPOT':>12} {'ratio':>6} {'ratio min-max':>14}")
for name, label in (("object", "json_object"), ("schema", "person.json")):
    runs = load(f"grammar_alt_{name}")
    def tpot(r, constrained):
        b = [v for k, v in r["buckets"].items() if ("-constrained " in k) == constrained]
        return b[0]["tpot_ms"]["p50"]
    ratios = [tpot(r, False) / tpot(r, True) for r in runs]
    print(f"{label:<12} {st.median(tpot(r, False) for r in runs):>9.3f} {st.median(tpot(r, True) for r in runs):>12.3f} "
          f"{st.median(ratios):>6.3f} {min(ratios):>6.3f}-{max(ratios):.3f}")
comp = [r["grammar_compile_ms"] for r in load("grammar_compile")]
print(f"50-property schema compile (GrammarCache, wp-11m vocabulary): median {st.median(comp):.1f} ms "
      f"(min {min(comp):.1f}, max {max(comp):.1f})")
PY
