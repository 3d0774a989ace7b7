#!/usr/bin/env bash
# Two builds on the engine and speculation benchmarks' loads, alternating A, B, A, B… in one run
# so that the host's drift hits both alike (the serving-seams issue asks "before and after, in the
# same run"). Each load is one `bench offline --json` with flags both builds accept; prints each
# load's median of A and of B and the median of the per-pair ratios B/A.
#   bash bench/ab_bench.sh BIN_A BIN_B [REPS]      (default 5 pairs)
# Loads: engine_bench's 64 concurrent (prompt 128, output 128, 2 threads) and one at a time
# (1 thread); its wp-11m prefix pair (384 shared + 32, TTFT with the cache); spec_bench's batch 1
# at T=0 with the wp-1m draft at k=3 on the padded target, and --spec auto at batch 32 on wp-11m.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?BIN_A}
B=${2:?BIN_B}
REPS=${3:-5}
WP=models/wp-11m-f16.gguf
DRAFT=models/wp-1m-f16.gguf
TEXT=../shared/data/war-and-peace.txt
CACHE=/tmp/tarmac-bench
mkdir -p "$CACHE"
PAD=$CACHE/wp-11m-padded-f16.gguf
[[ -f $PAD ]] || $A gguf pad $WP $PAD --layers 24 --ffn 16384 >/dev/null
OUT=$(mktemp -d)
echo "outputs in $OUT"

declare -A LOADS=(
  [batch64]="-m $WP --requests 64 --concurrency 64 --prompt-len 128 --output-len 128 -t 2|output_tokens_per_s"
  [batch1]="-m $WP --requests 16 --concurrency 1 --prompt-len 128 --output-len 128 -t 1|output_tokens_per_s"
  [prefix384]="-m $WP --requests 12 --concurrency 1 --shared-prefix 384 --prompt-len 32 --output-len 4 -t 2|ttft_ms.p50"
  [spec_k3_pad]="-m $PAD --requests 3 --concurrency 1 --prompt-len 64 --output-len 48 --workload text --prompt-file $TEXT --spec draft --draft-model $DRAFT --spec-k 3 -t 2|output_tokens_per_s"
  [spec_auto_b32]="-m $WP --requests 64 --concurrency 32 --prompt-len 64 --output-len 64 --workload text --prompt-file $TEXT --spec auto --draft-model $DRAFT -t 2|output_tokens_per_s"
)
ORDER=(batch64 batch1 prefix384 spec_k3_pad spec_auto_b32)
for r in $(seq "$REPS"); do
  for name in "${ORDER[@]}"; do
    args=${LOADS[$name]%|*}
    for side in A B; do
      bin=$A
      [[ $side == B ]] && bin=$B
      # shellcheck disable=SC2086
      $bin bench offline --json $args 2>/dev/null | tr -d '\n' > "$OUT/$name-$side-$r.json"
    done
  done
done
for name in "${ORDER[@]}"; do
  python3 - "$OUT" "$name" "${LOADS[$name]#*|}" "$REPS" <<'PY'
import json, statistics as st, sys
out, name, field, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def get(side, r):
    v = json.load(open(f"{out}/{name}-{side}-{r}.json"))
    for k in field.split("."):
        v = v[k]
    return float(v)
a = [get("A", r) for r in range(1, reps + 1)]
b = [get("B", r) for r in range(1, reps + 1)]
ratios = [y / x for x, y in zip(a, b)]
print(f"{name:14s} {field:20s} A {st.median(a):10.2f}  B {st.median(b):10.2f}  B/A per pair: median {st.median(ratios):.3f} "
      f"(pairs {', '.join(f'{x:.3f}' for x in ratios)})")
PY
done
