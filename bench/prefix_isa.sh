#!/usr/bin/env bash
# The prefix cache's TTFT benefit on wp-11m (384 shared + 32 new tokens, 24 requests one at a
# time, 2 threads) at each kernel level: cache on and off alternate within each rep, the ratio
# is median(off p50) / median(on p50). Also the wp-11m figure the issue tracks on AVX2 machines
# (TARMAC_ISA=avx2 forces those kernels on a CPU with AVX-512/AMX).
#   bash bench/prefix_isa.sh [REPS=5] [LEVELS=native,avx2]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
LEVELS=${2:-native,avx2}
BIN=${TARMAC_BIN:-build/bin/tarmac}
WP=models/wp-11m-f16.gguf
IFS=, read -r -a LV <<< "$LEVELS"
OUT=$(mktemp)
for _ in $(seq "$REPS"); do
  for isa in "${LV[@]}"; do
    env_isa=()
    [[ $isa != native ]] && env_isa=(TARMAC_ISA="$isa")
    for mode in on off; do
      flag=""; [[ $mode == off ]] && flag=--no-prefix-cache
      echo "$isa $mode $(env "${env_isa[@]}" $BIN bench offline --json -m $WP --requests 24 --concurrency 1 \
        --shared-prefix 384 --prompt-len 32 --output-len 4 -t 2 $flag 2>/dev/null | tr -d '\n')"
    done
  done
done > "$OUT"
python3 - "$OUT" <<'PY'
import sys, json, statistics as st
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    isa, mode, js = line.split(" ", 2)
    v[(isa, mode)].append(json.loads(js)["ttft_ms"]["p50"])
for isa in dict.fromkeys(k[0] for k in v):
    on, off = v[(isa, "on")], v[(isa, "off")]
    print(f"wp-11m prefix 384+32 [{isa}]: TTFT p50 {st.median(off):.2f} ms off, {st.median(on):.2f} ms on: "
          f"{st.median(off) / st.median(on):.1f}x (pairs {', '.join(f'{a / b:.1f}' for a, b in zip(off, on))})")
PY
