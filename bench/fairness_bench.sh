#!/usr/bin/env bash
# Tenant fairness (issue 28) with many more samples than the slow test takes: the quiet
# tenant's TTFT alone and while another tenant floods, limits on and off, through
# server_tenant_fairness_slowtest with TARMAC_FAIRNESS_ROUNDS rounds of 80 samples per cell
# (default 16: 1280 samples, so p99 is not the 3rd-worst sample). Prints each run's two lines
# and the median p99 ratios. Not in `make test`; takes the bench lock per run.
#   bash bench/fairness_bench.sh [RUNS] [ROUNDS]      (defaults 3, 16)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
ROUNDS=${2:-16}
BIN=${BUILD_DIR:-build}/bin/server_tenant_fairness_slowtest
[[ -x $BIN ]] || { echo "build first: make build" >&2; exit 2; }
out=$(mktemp)
for _ in $(seq "$RUNS"); do
  TARMAC_FAIRNESS_ROUNDS=$ROUNDS flock /tmp/tarmac-bench.lock "$BIN" | grep -E "limits (on|off)" | tee -a "$out"
done
python3 - "$out" <<'PY'
import re, statistics, sys
on, off = [], []
for line in open(sys.argv[1]):
    m = re.search(r"p99 ratio ([0-9.]+)", line)
    if m: (on if "limits on" in line else off).append(float(m.group(1)))
print(f"fresh-request p99 flood/alone, median of {len(on)}: limits on {statistics.median(on):.2f} {on}; off {statistics.median(off):.2f} {off}")
PY
