#!/usr/bin/env bash
# The HTTP path of two builds, alternating A, B, A, B… in one run: each rep starts `tarmac serve`
# (wp-11m f16, 2 threads) per build and runs `bench serve` against it: 64 concurrent streamed
# short-chat requests, greedy, 64 output tokens at most. Prints each build's medians of output
# throughput and of TPOT (what a streamed token costs, HTTP, the request flow and SSE
# included), and the per-rep ratios B/A.
#   bash bench/ab_serve.sh BIN_A BIN_B [REPS]      (default 5 reps)
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?BIN_A}
B=${2:?BIN_B}
REPS=${3:-5}
WP=models/wp-11m-f16.gguf
OUT=$(mktemp -d)
echo "outputs in $OUT"
source bench/lib.sh

one() {  # one BIN TAG REP
  local bin=$1 tag=$2 rep=$3
  BIN=$bin
  tarmac_serve "$OUT/$tag.serve.$rep.log" -m $WP -t 2 --host 127.0.0.1
  $bin bench serve --url "http://127.0.0.1:$SERVE_PORT" --concurrency 64 --requests 192 --max-tokens 64 \
    --temperature 0 --workload short-chat --json >"$OUT/$tag.http.$rep.json"
  kill "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
}

for rep in $(seq "$REPS"); do
  one "$A" A "$rep"
  one "$B" B "$rep"
done

python3 - "$OUT" "$REPS" <<'EOF'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for tag in "AB":
    r = []
    for rep in range(1, reps + 1):
        j = json.load(open(f"{out}/{tag}.http.{rep}.json"))
        assert j["failed_requests"] == 0, j.get("first_error")
        r.append((j["output_throughput"], j["tpot_ms"]["median"]))
    rows[tag] = r
for tag in "AB":
    tput, tpot = zip(*rows[tag])
    print(f"{tag}: output {statistics.median(tput):8.1f} tok/s  TPOT p50 {statistics.median(tpot):6.2f} ms  "
          f"(per rep: {', '.join(f'{t:.1f}' for t in tput)} tok/s)")
for i, name in ((0, "output throughput"), (1, "TPOT p50")):
    ratios = [b[i] / a[i] for a, b in zip(rows["A"], rows["B"])]
    print(f"{name} B/A per rep: {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}")
EOF
