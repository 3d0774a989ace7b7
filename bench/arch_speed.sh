#!/usr/bin/env bash
# Speed of each model family against the llama family at the same shape, parameter count and
# dtype: 1B-class random models (the llama-3.2-1b shape: dim 2048, 16 blocks, 32 heads / 8 KV
# heads, FFN 8192, 128256-token vocabulary, tied) written by make-random --arch; prefill of a
# 512-token prompt and batch-1 decode at T threads. The host is shared and its load drifts
# more between runs minutes apart than the differences measured here (bench/NOTES.md), so
# bench/arch_pair runs llama and one family in turns in one process (R rounds, measured as
# `tarmac bench model` does) under flock /tmp/tarmac-bench.lock; the figure is the median over
# rounds of the back-to-back ratio.
#
# Usage: bench/arch_speed.sh [--type q8_0] [--threads 2] [--rounds 7] [--decode 64]
#                            [--families "qwen3 gemma2 gemma3 phi3 mistral"]
#   TARMAC_BIN, ARCH_PAIR (defaults build/bin/tarmac, build/bin/arch_pair). Models are cached
#   in /tmp/tarmac-bench.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPE=q8_0
THREADS=2
ROUNDS=7
DECODE=64
FAMILIES="qwen3 gemma2 gemma3 phi3 mistral"
while (($#)); do
  case "$1" in
    --type) TYPE="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --decode) DECODE="$2"; shift 2 ;;
    --families) FAMILIES="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=${TARMAC_BIN:-build/bin/tarmac}
PAIR=${ARCH_PAIR:-build/bin/arch_pair}
[[ -x $BIN && -x $PAIR ]] || cmake --build build -j 2 --target tarmac arch_pair >/dev/null
DIR=/tmp/tarmac-bench
mkdir -p "$DIR"
SHAPE=dim=2048,layers=16,heads=32,kv_heads=8,ffn=8192,vocab=128256,ctx=131072,rope_base=500000,tied=1
# The family's arch and shape extras (windows and LongRoPE as the real families have them).
declare -A ARCH=([llama]=llama [qwen3]=qwen3 [gemma2]=gemma2 [gemma3]=gemma3 [phi3]=phi3
                 [mistral]=llama)
declare -A EXTRA=([llama]="" [qwen3]="" [gemma2]=",window=4096" [gemma3]=",window=512"
                  [phi3]=",orig_ctx=4096" [mistral]=",window=4096")
model() { echo "$DIR/arch-$1-1b-$TYPE.gguf"; }
for name in llama $FAMILIES; do
  [[ -n ${ARCH[$name]:-} ]] || { echo "unknown family $name" >&2; exit 2; }
  f=$(model "$name")
  [[ -f $f ]] || "$BIN" gguf make-random --arch "${ARCH[$name]}" --shape "$SHAPE${EXTRA[$name]}" \
                   --type "$TYPE" --seed 1 "$f" >/dev/null 2>&1
done
RAW=$DIR/arch-speed-$TYPE-t$THREADS.jsonl
: > "$RAW"
for name in $FAMILIES; do
  flock /tmp/tarmac-bench.lock "$PAIR" --base "$(model llama)" "$(model "$name")" \
    --threads "$THREADS" --prompt-tokens 512 --decode "$DECODE" --rounds "$ROUNDS" >> "$RAW"
done
python3 - "$RAW" "$TYPE" "$THREADS" "$ROUNDS" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"dtype {sys.argv[2]}, {sys.argv[3]} threads, {sys.argv[4]} back-to-back rounds per family "
      f"(medians; ratio = median of per-round family/llama)")
print(f"{'family':<9} {'prefill tok/s':>14} {'llama':>8} {'ratio':>6}   {'decode tok/s':>12} "
      f"{'llama':>7} {'ratio':>6}")
for r in rows:
    name = os.path.basename(r["model"]).split("-")[1]
    print(f"{name:<9} {r['prefill_tok_s']:>14.1f} {r['base_prefill_tok_s']:>8.1f} "
          f"{r['prefill_ratio']:>6.3f}   {r['decode_tok_s']:>12.2f} {r['base_decode_tok_s']:>7.2f} "
          f"{r['decode_ratio']:>6.3f}")
PY
