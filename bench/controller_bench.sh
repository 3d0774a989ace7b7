#!/usr/bin/env bash
# The degradation controller under the three fault-injection scenarios of
# tests/control/controller_faults_itest.cc, run longer than the tests (TARMAC_FAULT_SECONDS of
# load, default 30) with the controller on and off alternating, REPS times each: a
# temperature-1.5 flood beside greedy Q&A with n-gram speculation (Q&A TPOT, acceptance, drafts
# the creative bucket spent), the same flood with the wp-1m draft at k = 8 (the Q&A tier's p99
# TPOT over the control window before the controller's first action and at the end, against
# its 6 ms target), a busy thread stealing one of the two cores (the top tier's TTFT
# and SLO attainment, lowest-tier 429s), KV squeezed to 40 blocks (preemptions, latencies).
# Prints every run's figures and the medians per scenario and mode. The figures are the
# server's own (GET /v1/slo, since start), as the tests print them.
#   bash bench/controller_bench.sh [REPS]   BUILD: the build directory (default build)
# Timings: run it under `flock /tmp/tarmac-bench.lock` on shared machines.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BUILD=${BUILD:-build}
T=$BUILD/bin/control_controller_faults_itest
[[ -x $T ]] || { echo "build first: make build" >&2; exit 2; }
export TARMAC_FAULT_SECONDS=${TARMAC_FAULT_SECONDS:-30}
OUT=$(mktemp)
for r in $(seq "$REPS"); do
  for f in 'LowAcceptanceFloodControllerOn*' 'LowAcceptanceFloodControllerOff' 'DraftFloodControllerOn*' \
           'DraftFloodControllerOff' 'StolenCoreControllerOn*' \
           'StolenCoreControllerOff' 'SqueezedKvControllerOn*' 'SqueezedKvControllerOff'; do
    "$T" --gtest_filter="ControllerFaultsTest.$f" | tee -a "$OUT" | grep -E '^\[fault\]|FAILED' || true
  done
done
python3 - "$OUT" "$TARMAC_FAULT_SECONDS" <<'PY'
import re, sys, statistics as st
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith("[fault] "): continue
    f = line.split()[1:]
    scen, kv = f[0], dict(x.split("=", 1) for x in f[1:])
    runs[(scen, kv.pop("controller"))].append({k: float(v) for k, v in kv.items()})
print(f"medians over runs, {sys.argv[2]} s of load each (wp-11m f16, 2 threads, 2 cores)")
for (scen, mode), rs in sorted(runs.items()):
    keys = rs[0].keys()
    print(f"  {scen} controller={mode} ({len(rs)} runs): " + " ".join(f"{k}={st.median(r[k] for r in rs):.3g}" for k in keys))
PY
