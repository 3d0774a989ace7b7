#!/usr/bin/env bash
# Validates `tarmac plan` (issue 21): its predicted batch-1 decode TPOT and its predicted
# output throughput at 16 concurrent requests against `bench offline` measuring the same
# workload in the same run, on wp-11m (f16) and on a random-weight Llama-3.2-1B shape
# (`gguf make-random --type q8_0`). Per repetition, alternating: `plan --measure` (its probe
# and its queueing simulation), then bench offline at concurrency 1 and at 16. Prints each
# run, then the medians, predicted / measured of the medians and the median of the runs' own
# ratios (each run's prediction and measurements are minutes apart at most; on a shared
# machine the load can change between runs, which the per-run ratio cancels).
#   bash bench/plan_bench.sh [REPS]     TARMAC_BIN: the binary (default build/bin/tarmac)
#   THREADS (default 2), MODEL_1B (default /tmp/tarmac-llama-3.2-1b-q8_0.gguf, made if absent)
# Timings: run it under `flock /tmp/tarmac-bench.lock` on shared machines.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BIN=${TARMAC_BIN:-build/bin/tarmac}
THREADS=${THREADS:-2}
M1B=${MODEL_1B:-/tmp/tarmac-llama-3.2-1b-q8_0.gguf}
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
[[ -f $M1B ]] || $BIN gguf make-random --shape llama-3.2-1b --type q8_0 "$M1B" >&2
OUT=$(mktemp -d)
# model, requests, prompt, output (the 1B run is shorter: ~0.1 s a step on two cores)
CASES=("models/wp-11m-f16.gguf 64 128 128" "$M1B 32 128 64")
for r in $(seq "$REPS"); do
  for c in "${CASES[@]}"; do
    read -r model n p o <<<"$c"
    tag=$(basename "$model" .gguf)
    $BIN plan -m "$model" -t "$THREADS" --concurrency 16 --requests "$n" --prompt-len "$p" --output-len "$o" \
      --measure --json > "$OUT/$tag.plan.$r.json"
    $BIN bench offline -m "$model" -t "$THREADS" --requests 4 --concurrency 1 --prompt-len "$p" --output-len "$o" \
      --json > "$OUT/$tag.c1.$r.json"
    $BIN bench offline -m "$model" -t "$THREADS" --requests "$n" --concurrency 16 --prompt-len "$p" --output-len "$o" \
      --json > "$OUT/$tag.c16.$r.json"
  done
done
python3 - "$OUT" "$REPS" "$THREADS" "$(basename "$M1B" .gguf)" <<'PY'
import json, sys, statistics as st
out, reps, threads, m1b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(tag, kind, r): return json.load(open(f"{out}/{tag}.{kind}.{r}.json"))
print(f"tarmac plan vs bench offline, {threads} threads, {reps} repetitions (alternating), median")
for tag, dtype in (("wp-11m-f16", "f16"), (m1b, "q8_0")):
    rows = []
    for r in range(1, reps + 1):
        p, c1, c16 = load(tag, "plan", r), load(tag, "c1", r), load(tag, "c16", r)
        rows.append(dict(pt=p["predicted"]["batch1_decode_tpot_ms"], mt=c1["tpot_ms"]["p50"],
                         pq=p["predicted"]["output_tokens_per_s"], mq=c16["output_tokens_per_s"],
                         bw=p["decode"]["bandwidth_bytes_per_s"] / 1e9, lb=p["decode"]["tpot_lower_bound_ms"],
                         probe=p["probe"]["seconds"], bstar=p["decode"].get("compute_bound_from_batch")))
        x = rows[-1]
        print(f"  {tag} run {r}: TPOT@1 predicted {x['pt']:.3f} ms measured {x['mt']:.3f}; 16-concurrent predicted "
              f"{x['pq']:.0f} tok/s measured {x['mq']:.0f}; bandwidth {x['bw']:.1f} GB/s (TPOT >= {x['lb']:.3f} ms); "
              f"probe {x['probe']:.1f} s")
    med = {k: st.median(x[k] for x in rows) for k in ("pt", "mt", "pq", "mq", "bw", "lb", "probe")}
    rt = st.median(x["pt"] / x["mt"] for x in rows)
    rq = st.median(x["pq"] / x["mq"] for x in rows)
    print(f"  {tag} ({dtype}): batch-1 TPOT predicted {med['pt']:.3f} ms / measured {med['mt']:.3f} ms = "
          f"{med['pt'] / med['mt']:.3f}; 16-concurrent output predicted {med['pq']:.0f} / measured {med['mq']:.0f} tok/s = "
          f"{med['pq'] / med['mq']:.3f}; bandwidth {med['bw']:.1f} GB/s, TPOT lower bound {med['lb']:.3f} ms; "
          f"probe {med['probe']:.1f} s; median of per-run ratios: TPOT {rt:.3f}, throughput {rq:.3f}")
PY
