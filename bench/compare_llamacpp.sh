#!/usr/bin/env bash
# Prefill (512-token prompt) and batch-1 decode speed of tarmac vs llama.cpp (node-llama-cpp
# 3.21.1, same GGUF, same run), at 1 and 2 threads, one table. Each side's figure is the median
# of --reps runs; ratios compare best thread count against best thread count.
#
# Usage: bench/compare_llamacpp.sh [--reps R] [--decode N] [--isa L1,L2] [--llama-variant V1,V2]
#                                  [MODEL.gguf ...]
#   TARMAC_BIN (default build/bin/tarmac): the tarmac binary to measure.
#   --isa: measure tarmac at each of these kernel levels (TARMAC_ISA: native, amx, avx512,
#   avx2-vnni, avx2, scalar); default native only. On a CPU with AVX-512 this is how
#   AVX2-machine figures are approximated.
#   --llama-variant: measure llama.cpp with each of these CPU backends of node-llama-cpp's
#   prebuilt set (GGML_BACKEND_DL: libggml-cpu-<variant>.so; haswell = AVX2+FMA+F16C,
#   alderlake = that + AVX-VNNI, skylakex / icelake / sapphirerapids = AVX-512 levels) or
#   native (the loader's pick for this CPU, the default). A variant runs from a copy of
#   node_modules (hard links) under /tmp/tarmac-bench/llamacpp-<variant> that holds only its
#   CPU library, so the loader cannot pick another. Every tarmac level is compared with every
#   variant: e.g. --isa avx2,native --llama-variant haswell,native.
# Default models: models/wp-11m-f16.gguf, and 1B-class random models in q8_0 and q4_0
# (made with `tarmac gguf make-random --shape llama-3.2-1b`, cached in /tmp/tarmac-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=3
DECODE=128
MODELS=()
ISAS=native
VARIANTS=native
while (($#)); do
  case "$1" in
    --reps) REPS="$2"; shift 2 ;;
    --decode) DECODE="$2"; shift 2 ;;
    --isa) ISAS="$2"; shift 2 ;;
    --llama-variant) VARIANTS="$2"; shift 2 ;;
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

# The directory bench_llamacpp.mjs runs from for a llama.cpp CPU variant (see --llama-variant).
BINS=bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
llama_dir() {
  local v=$1
  if [[ $v == native ]]; then echo bench/llamacpp; return; fi
  if [[ ! -f $BINS/libggml-cpu-$v.so ]]; then
    echo "compare_llamacpp.sh: no llama.cpp CPU variant '$v'; known: native $(cd $BINS && ls libggml-cpu-*.so | sed 's/libggml-cpu-//; s/\.so//' | tr '\n' ' ')" >&2
    exit 2
  fi
  local dir=/tmp/tarmac-bench/llamacpp-$v
  if [[ ! -f $dir/.complete ]]; then
    rm -rf "$dir"; mkdir -p "$dir"
    cp -al bench/llamacpp/node_modules "$dir/node_modules" 2>/dev/null || cp -a bench/llamacpp/node_modules "$dir/node_modules"
    local f
    for f in "$dir/${BINS#bench/llamacpp/}"/libggml-cpu-*.so; do
      [[ $(basename "$f") == libggml-cpu-$v.so ]] || rm "$f"
    done
    touch "$dir/.complete"
  fi
  cp bench/llamacpp/bench_llamacpp.mjs bench/llamacpp/package.json "$dir/"
  echo "$dir"
}

field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

IFS=, read -r -a ISA_LIST <<< "$ISAS"
IFS=, read -r -a VARIANT_LIST <<< "$VARIANTS"
declare -A LDIR=()
for v in "${VARIANT_LIST[@]}"; do LDIR[$v]=$(llama_dir "$v"); done
printf "%-28s %-9s %-14s %-8s %3s %12s %12s %12s %12s\n" model isa llama.cpp metric thr tarmac llama.cpp ratio best/best
for m in "${MODELS[@]}"; do
  declare -A T=() L=()
  for th in 1 2; do
    for isa in "${ISA_LIST[@]}"; do
      env_isa=()
      [[ $isa != native ]] && env_isa=(TARMAC_ISA="$isa")
      o=$(env "${env_isa[@]}" $BIN bench model -m "$m" -t $th --prompt-tokens 512 --decode "$DECODE" --reps "$REPS" --json --read-bandwidth)
      T[$isa,prefill,$th]=$(field "$o" prefill_tok_s); T[$isa,decode,$th]=$(field "$o" decode_tok_s)
      WB=$(field "$o" active_weight_bytes)
      T[$isa,bw,$th]=$(field "$o" read_bytes_per_s); T[$isa,frac,$th]=$(field "$o" decode_read_fraction)
    done
    for v in "${VARIANT_LIST[@]}"; do
      o=$(node "${LDIR[$v]}/bench_llamacpp.mjs" "$(realpath "$m")" --threads $th --prompt-tokens 512 --decode "$DECODE" --reps "$REPS")
      L[$v,prefill,$th]=$(field "$o" prefill_tok_s); L[$v,decode,$th]=$(field "$o" decode_tok_s)
    done
  done
  for isa in "${ISA_LIST[@]}"; do
    for v in "${VARIANT_LIST[@]}"; do
      for metric in prefill decode; do
        bt=$(python3 -c "print(max(${T[$isa,$metric,1]}, ${T[$isa,$metric,2]}))")
        bl=$(python3 -c "print(max(${L[$v,$metric,1]}, ${L[$v,$metric,2]}))")
        for th in 1 2; do
          printf "%-28s %-9s %-14s %-8s %3s %12.1f %12.1f %12.2f %12s\n" "$(basename "$m")" "$isa" "$v" "$metric" $th \
            "${T[$isa,$metric,$th]}" "${L[$v,$metric,$th]}" \
            "$(python3 -c "print(${T[$isa,$metric,$th]} / ${L[$v,$metric,$th]})")" \
            "$([[ $th == 2 ]] && python3 -c "print(f'{$bt / $bl:.2f}')" || echo)"
        done
      done
    done
    # Roofline: weight bytes read per decoded token at the best tarmac decode rate, against
    # the read bandwidth the same threads measured in the same process after each repetition
    # (the fraction is the median of the repetitions' own ratios).
    python3 -c "
d1, d2, b1, b2 = ${T[$isa,decode,1]}, ${T[$isa,decode,2]}, ${T[$isa,bw,1]}, ${T[$isa,bw,2]}
f1, f2 = ${T[$isa,frac,1]}, ${T[$isa,frac,2]}
th, d, b, f = (1, d1, b1, f1) if d1 >= d2 else (2, d2, b2, f2)
print(f'  $(basename "$m") [$isa]: best decode ({th} thr) reads {$WB * d / 1e9:.2f} GB/s of weights, {100 * f:.0f}% of the read bandwidth (median of per-repetition ratios; probe median {b / 1e9:.2f} GB/s)')"
  done
  unset T L
done
