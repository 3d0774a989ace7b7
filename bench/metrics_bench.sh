#!/usr/bin/env bash
# /metrics under load (issue 18): `tarmac serve` on wp-11m with 2 compute threads, 64 streaming
# requests decoding at once (`bench serve --concurrency 64`), and a scraper that GETs /metrics
# every 50 ms meanwhile (llm-d's endpoint picker scrapes that often). Prints the scrape latency
# (median, p95, p99, max over REPS runs' scrapes) and the load's throughput.
#   bash bench/metrics_bench.sh [REPS]      TARMAC_BIN: the binary (default build/bin/tarmac)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
REPS=${1:-3}
BIN=${TARMAC_BIN:-build/bin/tarmac}
WP=models/wp-11m-f16.gguf
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
OUT=$(mktemp -d)
for r in $(seq "$REPS"); do
  tarmac_serve "$OUT/log" -m $WP -t 2 --max-running 64
  pid=$SERVE_PID
  port=$SERVE_PORT
  $BIN bench serve --url http://127.0.0.1:$port --concurrency 64 --requests 384 --max-tokens 96 \
    --workload short-chat --scrape-metrics 50 --json > "$OUT/run$r.json"
  kill -TERM $pid; wait $pid || true
done
python3 - "$OUT" "$REPS" <<'PY'
import json, sys, statistics as st
runs = [json.load(open(f"{sys.argv[1]}/run{r}.json")) for r in range(1, int(sys.argv[2]) + 1)]
m = [r["metrics_scrape_ms"] for r in runs]
print(f"wp-11m f16, 2 threads, 64 concurrent streaming requests (short-chat, 96 tokens), {len(runs)} runs")
for r, x in zip(runs, m):
    print(f"  run: {x['n']} scrapes, /metrics median {x['median']:.2f} ms, p95 {x['p95']:.2f}, p99 {x['p99']:.2f}, "
          f"max {x['max']:.2f}; failures {x['failures']}; load {r['output_throughput']:.0f} tok/s")
print(f"  median of runs: /metrics p99 {st.median(x['p99'] for x in m):.2f} ms, "
      f"median {st.median(x['median'] for x in m):.2f} ms; output {st.median(r['output_throughput'] for r in runs):.0f} tok/s")
PY
