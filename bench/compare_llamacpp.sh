#!/usr/bin/env bash
# Prefill (512-token prompt) and batch-1 decode speed of tarmac vs llama.cpp (node-llama-cpp
# 3.21.1, same GGUF, same run), at 1 and 2 threads, one table. Each side's figure is the median
# of --reps runs; ratios compare best thread count against best thread count.
#
# Usage: bench/compare_llamacpp.sh [--reps R] [--decode N] [MODEL.gguf ...]
#   TARMAC_BIN (default build/bin/tarmac): the tarmac binary to measure.
# Default models: models/wp-11m-f16.gguf, and 1B-class random models in q8_0 and q4_0
# (made with `tarmac gguf make-random --shape llama-3.2-1b`, cached in /tmp/tarmac-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3
DECODE=128
MODELS=()
while (($#)); do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --decode) DECODE="$2"; shift 2 ;;
    *) MODELS+=("$1"); shift ;;
  esac
done
BIN=${TARMAC_BIN:-build/bin/tarmac}
[[ -x $BIN ]] || make build >/dev/null
if [[ ! -d bench/llamacpp/node_modules/node-llama-cpp ]]; then
  (cd bench/llamacpp && npm ci --no-audit --no-fund >/dev/null)
fi
if ((${#MODELS[@]} == 0)); then
  mkdir -p /tmp/tarmac-bench
  MODELS=(models/wp-11m-f16.gguf)
  for t in q8_0 q4_0; do
    f=/tmp/tarmac-bench/llama-3.2-1b-$t.gguf
    [[ -f $f ]] || $BIN gguf make-random --shape llama-3.2-1b --type $t --seed 1 "$f" >&2
    MODELS+=("$f")
  done
fi

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

printf "%-28s %-8s %3s %12s %12s %12s %12s\n" model metric thr tarmac llama.cpp ratio best/best
for m in "${MODELS[@]}"; do
  declare -A T=() L=()
  for th in 1 2; do
    o=$($BIN bench model -m "$m" -t $th --prompt-tokens 512 --decode "$DECODE" --reps "$REPS" --json)
    T[prefill,$th]=$(field "$o" prefill_tok_s); T[decode,$th]=$(field "$o" decode_tok_s)
    WB=$(field "$o" weight_bytes)
    o=$(node bench/llamacpp/bench_llamacpp.mjs "$m" --threads $th --prompt-tokens 512 --decode "$DECODE" --reps "$REPS")
    L[prefill,$th]=$(field "$o" prefill_tok_s); L[decode,$th]=$(field "$o" decode_tok_s)
  done
  for metric in prefill decode; do
    bt=$(python3 -c "print(max(${T[$metric,1]}, ${T[$metric,2]}))")
    bl=$(python3 -c "print(max(${L[$metric,1]}, ${L[$metric,2]}))")
    for th in 1 2; do
      printf "%-28s %-8s %3s %12.1f %12.1f %12.2f %12s\n" "$(basename "$m")" "$metric" $th \
        "${T[$metric,$th]}" "${L[$metric,$th]}" \
        "$(python3 -c "print(${T[$metric,$th]} / ${L[$metric,$th]})")" \
        "$([[ $th == 2 ]] && python3 -c "print(f'{$bt / $bl:.2f}')" || echo)"
    done
  done
  # Roofline: weight bytes read per decoded token at the best tarmac decode rate.
  python3 -c "print(f'  {\"$(basename "$m")\"}: tarmac best decode reads {$WB * max(${T[decode,1]}, ${T[decode,2]}) / 1e9:.2f} GB/s of weights')"
  unset T L
done
