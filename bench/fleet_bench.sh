#!/usr/bin/env bash
# The fleet benchmark (issue 22): 3 `tarmac serve` replicas of wp-11m on loopback, one compute
# thread each, publishing KV events and vLLM-named metrics, driven by build/bin/bench_fleet with
# a shared-system-prompt workload (16 system prompts of 384 tokens, Zipf, a 32-120-token suffix,
# Poisson arrivals) under two policies: round robin, and the stand-in for llm-d's endpoint
# picker (bench/fleet/picker.h: precise prefix scorer on the replicas' real KV events + queue
# and KV-utilisation scorers). Fresh replicas for every run (cold caches), the policies
# alternating, REPS runs each; then the same requests on one replica with an unbounded cache
# (the prefix-hit reference) and the hot-prefix case (prompt 0 at 80% of the traffic).
#   bash bench/fleet_bench.sh [REPS]
# Env: TARMAC_BIN, BENCH_FLEET (binaries), RATE (req/s, 6), REQUESTS (240), KV_BLOCKS (per
# replica, 160), MAX_RUNNING (4), W_PREFIX/W_QUEUE/W_KV (the picker's weights); HOT_RATE (the
# hot-prefix runs' rate, RATE by default); PARTS ("main hot": the policy comparison with its
# single-replica reference, and the hot-prefix case; either alone).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BIN=${TARMAC_BIN:-build/bin/tarmac}
FLEET=${BENCH_FLEET:-build/bin/bench_fleet}
CORPUS=${CORPUS:-../shared/data/war-and-peace.txt}
RATE=${RATE:-6}
REQUESTS=${REQUESTS:-240}
KV_BLOCKS=${KV_BLOCKS:-160}
MAX_RUNNING=${MAX_RUNNING:-4}
HOT_RATE=${HOT_RATE:-$RATE}
PARTS=${PARTS:-main hot}
WEIGHTS=(--w-prefix "${W_PREFIX:-3}" --w-queue "${W_QUEUE:-2}" --w-kv "${W_KV:-2}")
WP=models/wp-11m-f16.gguf
[[ -x $BIN && -x $FLEET ]] || { echo "build first: cmake --build build --target tarmac bench_fleet" >&2; exit 2; }
[[ -f $CORPUS ]] || { echo "no corpus at $CORPUS" >&2; exit 2; }
OUT=$(mktemp -d)
PIDS=()
REPLICAS=()

# start_replicas N KV_BLOCKS: fills REPLICAS with "PORT,EVENTS,REPLAY" per replica.
start_replicas() {
  local n=$1 blocks=$2
  PIDS=()
  REPLICAS=()
  for i in $(seq "$n"); do
    $BIN serve -m $WP --port 0 -t 1 --max-running "$MAX_RUNNING" --kv-blocks "$blocks" --block-size 16 \
      --kv-events 'tcp://127.0.0.1:*' --kv-events-replay 'tcp://127.0.0.1:*' --metrics-names vllm \
      >"$OUT/replica$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in $(seq "$n"); do
    local log="$OUT/replica$i.log" port="" ev="" rp=""
    for _ in $(seq 300); do
      grep -q "ready" "$log" && break
      sleep 0.1
    done
    port=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$log" | grep -oE '[0-9]+$')
    ev=$(grep -oE 'KV events on tcp://[0-9.]+:[0-9]+' "$log" | grep -oE 'tcp://.*')
    rp=$(grep -oE 'replay on tcp://[0-9.]+:[0-9]+' "$log" | grep -oE 'tcp://.*')
    [[ -n $port && -n $ev && -n $rp ]] || { echo "replica $i did not start" >&2; cat "$log" >&2; exit 1; }
    REPLICAS+=(--replica "$port,$ev,$rp")
  done
}

stop_replicas() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_replicas EXIT

run() {  # run NAME POLICY RATE [extra bench_fleet flags]
  local name=$1 policy=$2 rate=$3
  shift 3
  $FLEET "${REPLICAS[@]}" --policy "$policy" --rate "$rate" --requests "$REQUESTS" --corpus "$CORPUS" \
    "${WEIGHTS[@]}" "$@" >"$OUT/$name.json"
}

for r in $(seq "$REPS"); do
  if [[ " $PARTS " == *" main "* ]]; then
    order=(precise round-robin)
    ((r % 2 == 0)) && order=(round-robin precise)
    for policy in "${order[@]}"; do
      start_replicas 3 "$KV_BLOCKS"
      run "$policy-$r" "$policy" "$RATE" --seed "$r"
      stop_replicas
    done
    # The prefix-hit reference: the same requests on one replica whose cache holds everything,
    # at a third of the rate (one replica's share).
    start_replicas 1 4096
    run "single-$r" round-robin "$(python3 -c "print($RATE / 3)")" --seed "$r"
    stop_replicas
  fi
  if [[ " $PARTS " == *" hot "* ]]; then
    # The hot-prefix case, with round robin on the same requests as the balanced reference.
    order=(precise round-robin)
    ((r % 2 == 0)) && order=(round-robin precise)
    for policy in "${order[@]}"; do
      start_replicas 3 "$KV_BLOCKS"
      run "hot-$policy-$r" "$policy" "$HOT_RATE" --seed "$r" --hot 0.8
      stop_replicas
    done
  fi
done
uptime >"$OUT/load"
echo "raw JSON in $OUT"

python3 - "$OUT" "$REPS" "$RATE" "$REQUESTS" "$KV_BLOCKS" "$MAX_RUNNING" "$HOT_RATE" "$PARTS" <<'PY'
import json, sys, statistics as st
out, reps, rate, n, kv, mr, hot_rate, parts = sys.argv[1], int(sys.argv[2]), *sys.argv[3:9]
load = lambda name: [json.load(open(f"{out}/{name}-{r}.json")) for r in range(1, reps + 1)]
print(f"wp-11m f16, 3 replicas x 1 thread (max-running {mr}, {kv} KV blocks of 16 each), {n} requests Poisson, "
      f"16 system prompts x 384 tokens Zipf(1), suffix 32-120, 8 output tokens; {reps} runs each, "
      f"policies alternating; {open(out + '/load').read().strip()}")
if "main" in parts.split():
    pp, rr, single = load("precise"), load("round-robin"), load("single")
    print(f"policy comparison at {rate}/s:")
    for name, runs in (("picker", pp), ("round robin", rr)):
        for x in runs:
            print(f"  {name:12s} TTFT p50 {x['ttft_ms']['p50']:7.1f} ms  p90 {x['ttft_ms']['p90']:7.1f}  p99 {x['ttft_ms']['p99']:7.1f}"
                  f"  hit {x['prefix_hit_rate']:.3f}  per replica {x['requests_per_replica']}  failed {x['failed']}")
    p50 = lambda runs: st.median(x["ttft_ms"]["p50"] for x in runs)
    hit = lambda runs: st.median(x["prefix_hit_rate"] for x in runs)
    ratios = [b["ttft_ms"]["p50"] / a["ttft_ms"]["p50"] for a, b in zip(pp, rr)]  # per rep, side by side
    print(f"  median TTFT p50: picker {p50(pp):.1f} ms, round robin {p50(rr):.1f} ms; round robin / picker per rep "
          f"{[round(v, 2) for v in ratios]}, median {st.median(ratios):.2f}x (goal >= 2)")
    print(f"  median prefix-hit: picker {hit(pp):.3f}, round robin {hit(rr):.3f}, one replica with an unbounded cache "
          f"{hit(single):.3f} -> fleet/single {hit(pp) / hit(single):.2f} (goal >= 0.85)")
    print(f"  single replica, unbounded cache: hit {[round(x['prefix_hit_rate'], 3) for x in single]}")
if "hot" in parts.split():
    hot, hotrr = load("hot-precise"), load("hot-round-robin")
    # With 3 replicas max/mean cannot exceed 3 (max <= sum), so the goal is stated with the
    # balanced reference beside it: round robin on the same hot requests.
    for name, runs in (("picker", hot), ("round robin", hotrr)):
        ratios = [x["max_over_mean_outstanding"] for x in runs]
        print(f"  hot prefix (80%) at {hot_rate}/s, {name}: max/mean time-averaged outstanding requests per replica "
              f"{[round(v, 2) for v in ratios]}, median {st.median(ratios):.2f} (goal <= 3); busiest replica's share of "
              f"requests median {st.median(x['busiest_replica_share'] for x in runs):.2f}; TTFT p50 median "
              f"{st.median(x['ttft_ms']['p50'] for x in runs):.1f} ms, p90 {st.median(x['ttft_ms']['p90'] for x in runs):.1f}; "
              f"hit {st.median(x['prefix_hit_rate'] for x in runs):.3f}; per replica {[x['requests_per_replica'] for x in runs]}; "
              f"engine queue (vllm:num_requests_waiting) mean per replica {[[round(v, 2) for v in x.get('mean_waiting', [])] for x in runs]}, "
              f"max {[x.get('max_waiting', []) for x in runs]}")
PY
