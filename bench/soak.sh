#!/usr/bin/env bash
# The soak (issue 28): one tarmac server (wp-11m f16, 2 threads, speculative decoding with the
# wp-1m draft, the prefix cache and the response cache, three tenants by API key, and
# --check-integrity: the engine checks its KV, scheduler and draft pool after every step and
# aborts on the first inconsistency) under a long open-loop load:
#   1. capacity: a closed loop of CAPACITY_CLIENTS clients for CAPACITY_S seconds with the mix
#      (bench/soak_load.py) without cancellations: completed requests/s;
#   2. the soak: Poisson arrivals at 70% of that for --minutes, the whole mix (chat and
#      completions, streamed and not, cancelled mid-stream, speculative and opted out, cached
#      and prefix-sharing), sampling the server's RSS, open fds and threads every 5 s.
# Then capacity once more on the server as the soak left it: it must be at least 85% of the first
# (a server whose state slows it with time fails here; the host's own drift moves both).
# Checks: 0 unexpected errors (anything but a complete 200, cancellations aside); RSS drift
# under 1% after warm-up (the mean of the last minute against the first minute after the
# warm-up, which is the first WARMUP_FRAC of the run); open fds and threads once idle after the
# load no more than once idle before it; the server still alive with 0 requests running or
# waiting and no KV blocks held by requests; then SIGTERM: a clean exit (0), no integrity
# failure in its log. Prints one verdict line (SOAK PASS|FAIL ...) and plots RSS and p99
# latency over time (OUT/soak.png, gnuplot).
#   bash bench/soak.sh [--minutes N]      (default 30; not part of `make test`)
# Environment: TARMAC_BIN (default build/bin/tarmac), OUT (default a new temp dir),
#   CAPACITY_S (60), CAPACITY_CLIENTS (16), LOAD_FRAC (0.7), WARMUP_FRAC (0.2), THREADS (2).
# Run it under the bench lock: flock /tmp/tarmac-bench.lock bash bench/soak.sh --minutes 10
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
MINUTES=30
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) MINUTES=$2; shift 2 ;;
    *) echo "usage: bench/soak.sh [--minutes N]" >&2; exit 2 ;;
  esac
done
BIN=${TARMAC_BIN:-build/bin/tarmac}
CAPACITY_S=${CAPACITY_S:-60}
CAPACITY_CLIENTS=${CAPACITY_CLIENTS:-16}
LOAD_FRAC=${LOAD_FRAC:-0.7}
WARMUP_FRAC=${WARMUP_FRAC:-0.2}
THREADS=${THREADS:-2}
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "soak: outputs in $OUT"
trap '[[ -n ${SERVE_PID:-} ]] && kill "$SERVE_PID" 2>/dev/null || true' EXIT

printf 'key-acme acme\nkey-beta beta\nkey-gamma gamma\n' > "$OUT/keys.txt"
KEYS=key-acme,key-beta,key-gamma
printf 'models:\n  - {path: models/wp-11m-f16.gguf, name: wp-11m}\napi_key_file: %s\n' "$OUT/keys.txt" > "$OUT/serve.yaml"
tarmac_serve "$OUT/serve.log" --config "$OUT/serve.yaml" -t "$THREADS" --spec draft \
  --draft-model models/wp-1m-f16.gguf --check-integrity --max-queue 4096
URL="http://127.0.0.1:$SERVE_PORT"
# The sum of a metric's series (-1 when the server does not export it: the check then fails).
metric() { curl -s -H "Authorization: Bearer key-acme" "$URL/metrics" | awk -v m="$1" 'index($1, m) == 1 {s += $2; n++} END {print n ? s : -1}'; }
idle_fds_threads() { echo "$(ls /proc/$SERVE_PID/fd | wc -l) $(awk '/^Threads:/ {print $2}' /proc/$SERVE_PID/status)"; }

python3 bench/soak_load.py capacity --url "$URL" --keys "$KEYS" --seconds "$CAPACITY_S" \
  --concurrency "$CAPACITY_CLIENTS" --out "$OUT" > "$OUT/capacity.json"
CAP=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["requests_per_s"], 2))' "$OUT/capacity.json")
RATE=$(python3 -c "print(round($CAP * $LOAD_FRAC, 3))")
echo "soak: capacity $CAP requests/s ($(cat "$OUT/capacity.json")); soak at $RATE requests/s for $MINUTES min"
sleep 2
read -r FDS0 THR0 < <(idle_fds_threads)

python3 bench/soak_load.py soak --url "$URL" --keys "$KEYS" --seconds "$((MINUTES * 60))" --rate "$RATE" \
  --pid "$SERVE_PID" --out "$OUT" > "$OUT/soak.json"
sleep 3
read -r FDS1 THR1 < <(idle_fds_threads)
RUNNING=$(metric 'tarmac:num_requests_running')
WAITING=$(metric 'tarmac:num_requests_waiting')
REQ_BLOCKS=$(metric 'tarmac:kv_cache_request_blocks')
curl -s -H "Authorization: Bearer key-acme" "$URL/metrics" > "$OUT/metrics-end.txt"
# Capacity again, on the server as the soak left it (caches full, every pool and window warm):
# a server that slowed down with time shows here; the host's own drift shows in both.
python3 bench/soak_load.py capacity --url "$URL" --keys "$KEYS" --seconds "$CAPACITY_S" \
  --concurrency "$CAPACITY_CLIENTS" --out "$OUT" > "$OUT/capacity-after.json"
ALIVE=1
kill -0 "$SERVE_PID" 2>/dev/null || ALIVE=0
kill -TERM "$SERVE_PID"
set +e
wait "$SERVE_PID"
EXIT=$?
set -e
SERVE_PID=""
INTEGRITY_FAIL=$(grep -c "integrity check failed" "$OUT/serve.log" || true)

# Plot: RSS (MiB, left) and p99 latency (ms, right) per 5 s window.
cat > "$OUT/soak.gp" <<EOF
set terminal pngcairo size 1100,500
set output '$OUT/soak.png'
set title 'tarmac soak: $MINUTES min at $RATE req/s (70% of $CAP)'
set xlabel 'time (s)'
set ylabel 'RSS (MiB)'
set y2label 'p99 latency (ms)'
set y2tics
set ytics nomirror
set key right bottom
set datafile separator '\t'
set arrow from $(python3 -c "print($MINUTES * 60 * $WARMUP_FRAC)"), graph 0 to $(python3 -c "print($MINUTES * 60 * $WARMUP_FRAC)"), graph 1 nohead dt 2
set label 'end of warm-up' at $(python3 -c "print($MINUTES * 60 * $WARMUP_FRAC)"), graph 0.9 offset 1,0
plot '$OUT/samples.tsv' skip 1 using 1:(\$2/1024) with lines lw 2 title 'RSS', \
     '' skip 1 using 1:5 axes x1y2 with lines title 'p99 latency (5 s window)'
EOF
command -v gnuplot >/dev/null && gnuplot "$OUT/soak.gp" 2>"$OUT/gnuplot.err" || echo "soak: gnuplot failed or missing; no plot" >&2

python3 - "$OUT" "$WARMUP_FRAC" "$FDS0" "$THR0" "$FDS1" "$THR1" "$RUNNING" "$WAITING" "$REQ_BLOCKS" "$ALIVE" "$EXIT" \
  "$INTEGRITY_FAIL" <<'EOF'
import json, sys
out, warm = sys.argv[1], float(sys.argv[2])
fds0, thr0, fds1, thr1, running, waiting, req_blocks, alive, exit_code, integ = map(float, sys.argv[3:])
s = json.load(open(f"{out}/soak.json"))
cap0 = json.load(open(f"{out}/capacity.json"))["requests_per_s"]
cap1 = json.load(open(f"{out}/capacity-after.json"))["requests_per_s"]
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/samples.tsv")][1:]
t = [float(r[0]) for r in rows]; rss = [float(r[1]) for r in rows]; p99 = [float(r[4]) for r in rows]
t_end = t[-1]
w = warm * t_end
first = [r for ti, r in zip(t, rss) if w <= ti < w + 60] or rss[:1]
last = [r for ti, r in zip(t, rss) if ti >= t_end - 60] or rss[-1:]
drift = (sum(last) / len(last) - sum(first) / len(first)) / (sum(first) / len(first))
post = [p for ti, p in zip(t, p99) if ti >= w and p == p]
checks = {
    "errors": s["errors"] == 0,
    "rss_drift": drift < 0.01,
    "fds": fds1 <= fds0,
    "threads": thr1 <= thr0,
    "idle_at_end": alive == 1 and running == 0 and waiting == 0 and req_blocks == 0,
    "clean_exit": exit_code == 0 and integ == 0,
    "capacity_after": cap1 >= 0.85 * cap0,
}
# Latency per kind over the run (fifths), to tell the server's own slowing (some kinds) from load
# or host drift (all kinds, cached ones too): OUT/latency_by_kind.txt.
reqs = [l.rstrip("\n").split("\t") for l in open(f"{out}/requests.tsv")][1:]
span = max(float(r[0]) for r in reqs) / 5 or 1
with open(f"{out}/latency_by_kind.txt", "w") as f:
    f.write("kind\t" + "\t".join(f"p50/p99 ms, fifth {i + 1}" for i in range(5)) + "\n")
    for kind in sorted({r[1] for r in reqs}):
        cells = []
        for i in range(5):
            v = sorted(float(r[5]) for r in reqs if r[1] == kind and min(4, int(float(r[0]) / span)) == i)
            cells.append(f"{v[len(v) // 2]:.0f}/{v[min(len(v) - 1, int(0.99 * len(v)))]:.0f}" if v else "-")
        f.write(kind + "\t" + "\t".join(cells) + "\n")
verdict = "PASS" if all(checks.values()) else "FAIL"
failed = [k for k, v in checks.items() if not v]
print(f"SOAK {verdict}: {s['done']} ok + {s['cancelled']} cancelled, {s['errors']} errors in {s['seconds']:.0f} s "
      f"at {s['rate']} req/s; RSS drift {drift * 100:+.2f}% after warm-up ({sum(first)/len(first)/1024:.0f} -> "
      f"{sum(last)/len(last)/1024:.0f} MiB); fds {fds0:.0f}->{fds1:.0f}, threads {thr0:.0f}->{thr1:.0f}; "
      f"capacity {cap0:.1f} -> {cap1:.1f} req/s after ({cap1 / cap0:.2f}x); "
      f"p99 median {sorted(post)[len(post)//2] if post else float('nan'):.0f} ms, max {max(post) if post else float('nan'):.0f} ms; "
      f"end: running {running:.0f} waiting {waiting:.0f} request blocks {req_blocks:.0f}, exit {exit_code:.0f}, "
      f"integrity failures {integ:.0f}" + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"; plot {out}/soak.png")
if s["first_errors"]:
    print("first errors:", json.dumps(s["first_errors"]))
sys.exit(0 if verdict == "PASS" else 1)
EOF
