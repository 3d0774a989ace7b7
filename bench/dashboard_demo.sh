#!/usr/bin/env bash
# The dashboard and the benchmark figures on wp-11m (issue 24's closing pictures): serves wp-11m
# with the wp-1m draft (--spec draft), takes dashboard screenshots while `bench serve` runs 16 concurrent
# requests, then runs a load sweep with --plot. Output in ${OUT:-/tmp/tarmac-dashboard-demo}.
# Run under the benchmark lock: flock /tmp/tarmac-bench.lock bash bench/dashboard_demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tarmac-dashboard-demo}
SWEEP=${SWEEP:-1,2,4,8,16,32,64}
REQUESTS=${REQUESTS:-64}
THREADS=${THREADS:-2}
PORT=${PORT:-18471}
BIN=build/bin/tarmac
mkdir -p "$OUT"
(cd tests/server/dashboard && flock .npm-install.lock sh -c 'test -f node_modules/.tarmac-installed || (npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.tarmac-installed)')
"$BIN" serve -m models/wp-11m-f16.gguf --port "$PORT" --threads "$THREADS" --spec draft > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
URL="http://127.0.0.1:$PORT"
# 16 concurrent: screenshots 6 s and 12 s in.
"$BIN" bench serve --url "$URL" --concurrency 16 --requests 256 --workload long-document > "$OUT/bench_c16.txt" 2>&1 &
BENCH=$!
node tests/server/dashboard/screenshot.mjs "$URL" "$OUT/dashboard-c16.png" "" 6 2
wait $BENCH
cat "$OUT/bench_c16.txt"
"$BIN" bench serve --url "$URL" --workload long-document --sweep "$SWEEP" --requests "$REQUESTS" \
  --slo-ttft-ms 1000 --slo-tpot-ms 50 --plot "$OUT/plots" | tee "$OUT/sweep.txt"
ls -l "$OUT" "$OUT/plots"
