#!/usr/bin/env bash
# Model families against llama.cpp (node-llama-cpp 3.21.1, same GGUF, same run): for each
# family a random-weight file made by `tarmac gguf make-random --arch ...`, through both:
# greedy continuations (64 tokens, 4 prompts from War and Peace's last 50,000 bytes, equal up
# to near-ties), prompt log-probabilities and perplexity on a 512-token slice (within 0.5%).
# Sliding windows are shorter than the sequences, so they matter.
#
# Usage: bench/compare_arch.sh [--write-goldens] [--quick]
#   default:         the real-vocabulary models (Llama-2 SentencePiece and Llama-3.2 BPE from
#                    ../shared) in f16 and q8_0, then the golden models (synthetic vocabulary,
#                    f32), one JSON line each and a table.
#   --write-goldens: also rewrite tests/data/arch/*.golden.json from the golden models (what
#                    tests/model/arch_golden_test.cc regenerates with make-random and checks).
#   --quick:         the golden models only.
#   TARMAC_BIN (default build/bin/tarmac), ARCH_CHECK (default build/bin/arch_check).
# Needs ../shared/data/war-and-peace.txt; the real-vocabulary models need ../shared/models.
set -euo pipefail
cd "$(dirname "$0")/.."
WRITE=0
QUICK=0
for a in "$@"; do
  case "$a" in
    --write-goldens) WRITE=1 ;;
    --quick) QUICK=1 ;;
    *) echo "unknown argument $a" >&2; exit 2 ;;
  esac
done
BIN=${TARMAC_BIN:-build/bin/tarmac}
CHECK=${ARCH_CHECK:-build/bin/arch_check}
SHARED=../shared
TEXT=$SHARED/data/war-and-peace.txt
[[ -x $BIN && -x $CHECK ]] || cmake --build build -j 2 --target tarmac arch_check >/dev/null
[[ -f $TEXT ]] || { echo "needs $TEXT" >&2; exit 2; }
if [[ ! -d bench/llamacpp/node_modules/node-llama-cpp ]]; then
  (cd bench/llamacpp && npm ci --no-audit --no-fund >/dev/null)
fi
OUT=/tmp/tarmac-arch
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: > "$RESULTS"

# Golden models: name arch shape (synthetic 512-token vocabulary, f32, seed 26, norm jitter 0.2).
# tests/model/arch_golden_test.cc has the same list. With random weights of stddev 0.02 the
# attention scores and logits are small: gemma2-caps caps them hard enough (0.03, 0.5) that
# capping changes them; its head dim 64 takes the decode fast path (AVX-512). phi3-partial
# rotates 24 of 32 head dims. The MoE models route 2 (3) of 8 experts per token;
# qwen3moe-ties shares router rows in pairs, so every token's choice of its third expert is a
# tie that llama.cpp breaks (by the lower index). gpt-oss: attention sinks, windows of 20 on
# even layers, YaRN x32 over 64 positions, biased experts with the clamped SwiGLU.
GOLDEN=(
  "llama llama dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512"
  "qwen2 qwen2 dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512"
  "qwen3 qwen3 dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=48"
  "gemma2 gemma2 dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=32,window=20,tied=1"
  "gemma2-caps gemma2 dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=64,window=20,tied=1,attn_softcap=0.03,final_softcap=0.5"
  "gemma3 gemma3 dim=128,layers=6,heads=4,kv_heads=1,ffn=256,vocab=512,head_dim=32,window=20,swa_pattern=3,rope_base=1000000,rope_base_swa=10000,final_softcap=20"
  "gemma3-swa gemma3 dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=32,window=24,swa_pattern=0"
  "phi3 phi3 dim=128,layers=4,heads=4,kv_heads=4,ffn=256,vocab=512,ctx=1024,orig_ctx=256"
  "phi3-partial phi3 dim=128,layers=4,heads=4,kv_heads=4,ffn=256,vocab=512,rot=24"
  "qwen3moe qwen3moe dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=48,experts=8,experts_used=2,expert_ffn=96"
  "mixtral llama dim=128,layers=4,heads=4,kv_heads=2,ffn=128,vocab=512,experts=8,experts_used=2"
  "gpt-oss gpt-oss dim=128,layers=4,heads=4,kv_heads=2,ffn=128,vocab=512,head_dim=32,window=20,experts=8,experts_used=2,expert_ffn=96,yarn=32,orig_ctx=64,ctx=2048"
  "qwen3moe-ties qwen3moe dim=128,layers=4,heads=4,kv_heads=2,ffn=256,vocab=512,head_dim=32,experts=8,experts_used=3,expert_ffn=64,router_ties=2"
)
# Real-vocabulary models: name arch shape vocab-file.
L2=$SHARED/models/llama-2-tiny-random.gguf
L3=$SHARED/models/llama3.2-vocab-random.gguf
REAL=(
  "llama llama dim=256,layers=4,heads=8,kv_heads=4,ffn=768,vocab=32000 $L2"
  "qwen3 qwen3 dim=256,layers=4,heads=8,kv_heads=4,ffn=768,vocab=128256,head_dim=64,tied=1 $L3"
  "gemma2 gemma2 dim=256,layers=4,heads=8,kv_heads=4,ffn=768,vocab=32000,head_dim=64,window=48,tied=1 $L2"
  "gemma3 gemma3 dim=256,layers=6,heads=8,kv_heads=2,ffn=768,vocab=32000,head_dim=64,window=48,swa_pattern=3,rope_base=1000000,tied=1 $L2"
  "phi3 phi3 dim=256,layers=4,heads=8,kv_heads=8,ffn=768,vocab=32000,ctx=4096,orig_ctx=256 $L2"
)

compare() {  # file [extra node args...]
  node bench/llamacpp/compare_arch.mjs --tarmac "$CHECK" --text "$TEXT" "$@" | tee -a "$RESULTS"
}

status=0
if ((QUICK == 0)); then
  for spec in "${REAL[@]}"; do
    read -r name arch shape vocab <<<"$spec"
    [[ -f $vocab ]] || { echo "skip $name: $vocab absent" >&2; continue; }
    for t in f16 q8_0; do
      f=$OUT/$name-real-$t.gguf
      "$BIN" gguf make-random --arch "$arch" --shape "$shape" --type $t --seed 26 \
        --norm-jitter 0.2 --vocab-from "$vocab" "$f" 2>/dev/null
      compare "$f" || status=1
    done
  done
fi
for spec in "${GOLDEN[@]}"; do
  read -r name arch shape <<<"$spec"
  f=$OUT/$name-golden.gguf
  "$BIN" gguf make-random --arch "$arch" --shape "$shape" --type f32 --seed 26 --norm-jitter 0.2 \
    "$f" 2>/dev/null
  args=("$f" --ppl-tokens 256)
  if ((WRITE)); then
    mkdir -p tests/data/arch
    args+=(--golden "tests/data/arch/$name.golden.json" --make-random
           "{\"arch\":\"$arch\",\"shape\":\"$shape\",\"type\":\"f32\",\"seed\":26,\"norm_jitter\":0.2}")
  fi
  compare "${args[@]}" || status=1
done

python3 - "$RESULTS" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\n{'model':<28} {'arch':<7} {'steps':>5} {'agree':>5} {'ties':>4} {'diff':>4} "
      f"{'free':>4} {'max|dlogp|':>10} {'ppl llama.cpp':>13} {'ppl tarmac':>11} {'delta %':>8}")
for r in rows:
    print(f"{os.path.basename(r['file']):<28} {r['arch']:<7} {r['steps']:>5} {r['agree']:>5} "
          f"{r['near_ties']:>4} {r['disagree']:>4} {r['free_running_identical']:>4} "
          f"{r['max_prompt_logprob_diff']:>10.2e} {r['ppl_llama']:>13.3f} {r['ppl_tarmac']:>11.3f} "
          f"{r['ppl_delta_pct']:>8.4f}")
EOF
exit $status
