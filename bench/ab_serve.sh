#!/usr/bin/env bash
# HTTP overhead per streamed token of two builds, alternating A, B, A, B… in one run: each rep
# runs, per build, `bench offline` (the engine alone) and `bench serve` against `tarmac serve`
# (64 concurrent streamed short-chat requests, greedy) on wp-11m f16 with 2 threads. The
# overhead per token is 1/serve - 1/offline output throughput (µs per token: what HTTP, the
# request flow and SSE add to each token). Prints each build's medians and the per-rep ratio B/A.
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
  $bin bench offline -m $WP --requests 128 --concurrency 64 --prompt-len 32 --output-len 64 -t 2 --json \
    >"$OUT/$tag.off.$rep.json"
  tarmac_serve "$OUT/$tag.serve.$rep.log" -m $WP -t 2 --host 127.0.0.1
  $bin bench serve --url "http://127.0.0.1:$SERVE_PORT" --concurrency 64 --requests 128 --max-tokens 64 \
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
def load(tag, kind, rep):
    return json.load(open(f"{out}/{tag}.{kind}.{rep}.json"))
rows = {}
for tag in "AB":
    r = []
    for rep in range(1, reps + 1):
        off = load(tag, "off", rep)["output_tokens_per_s"]
        http = load(tag, "http", rep)
        assert http["failed_requests"] == 0, http.get("first_error")
        serve = http["output_throughput"]
        r.append((off, serve, 1e6 * (1 / serve - 1 / off)))
    rows[tag] = r
for tag in "AB":
    off, serve, over = zip(*rows[tag])
    print(f"{tag}: offline {statistics.median(off):8.1f} tok/s  serve {statistics.median(serve):8.1f} tok/s  "
          f"overhead {statistics.median(over):7.1f} us/token  (per rep: {', '.join(f'{o:.1f}' for o in over)})")
ratios = [b[1] / a[1] for a, b in zip(rows["A"], rows["B"])]
print(f"serve throughput B/A per rep: {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}")
EOF
