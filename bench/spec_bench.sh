#!/usr/bin/env bash
# Speculative decoding benchmarks (issues 6 and 27), through `tarmac bench offline`. Not in `make test`.
#   bash bench/spec_bench.sh [REPS] [trees|chains|all]   (default all)
# 0. (trees, issue 27; bench/spec_trees.py) the distilled draft and token trees: padded target
#    batch 1 T=0 / 0.8 and wp-11m batch 1 on held-out prompts (the book's last 50,000 bytes),
#    off vs chains (wp-1m, distilled) vs fixed trees vs --spec auto; wp-11m batch 32/64 auto vs
#    off; mean accepted tokens per verification of each. Each run under the bench lock,
#    batch-1 runs under chrt -f 10, configurations alternating per round.
# Targets: wp-11m padded to ~0.58B parameters (24 zero-output blocks, FFN 16384: exactly
# wp-11m's function at a large model's memory cost; made with `tarmac gguf pad`) and wp-11m
# itself; draft wp-1m (quantized to Q8_0 at load, the default --draft-type). Prompts are slices
# of ../shared/data/war-and-peace.txt.
# 1. batch 1, T=0 and T=0.8: draft k=2, k=3 and --spec auto vs off, padded and unpadded;
# 2. n-gram on a copy-heavy workload, padded target: `--workload quote`, prompt = passage P +
#    the model's own greedy continuation C + P again (the answer is in the prompt, as in RAG;
#    the small models do not copy text on their own, so `copy` gets only ~11% acceptance),
#    k=4, k=8 and --spec auto (the policy picks k) vs off;
# 3. batch 32 and 64 on wp-11m: --spec auto (policy) vs off;
# 4. mixed workload (greedy 'qa' + temperature-1.5 'creative'), 24 requests at batch 8 and at
#    batch 2, padded target: per-bucket p50/p99 TPOT with --spec auto vs off (long enough for
#    the policy to learn both buckets' acceptance and the step costs).
# Medians of REPS runs (default 3); ratios are taken within this run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
WHAT=${2:-all}
BIN=${TARMAC_BIN:-build/bin/tarmac}
WP=models/wp-11m-f16.gguf
DRAFT=models/wp-1m-f16.gguf
TEXT=../shared/data/war-and-peace.txt
CACHE=/tmp/tarmac-bench
PAD=$CACHE/wp-11m-pad24.gguf
T=${THREADS:-2}
mkdir -p "$CACHE"
[[ -f $TEXT ]] || { echo "needs $TEXT" >&2; exit 2; }
[[ -f $PAD ]] || $BIN gguf pad $WP $PAD --layers 24 --ffn 16384 >/dev/null
if [[ $WHAT != chains ]]; then
  tail -c 50000 $TEXT > $CACHE/heldout.txt
  python3 bench/spec_trees.py --bin $BIN --pad $PAD --wp $WP --text $CACHE/heldout.txt --reps $REPS \
    --threads $T --json $CACHE/spec_trees.json ${SPEC_SECTIONS:+--sections $SPEC_SECTIONS}
  [[ $WHAT == trees ]] && exit 0
fi

# runs: REPS runs of `bench offline --json ARGS`, one JSON object per line on stdout
runs() { for _ in $(seq "$REPS"); do $BIN bench offline --json -t $T "$@" 2>/dev/null; done; }
# medt < runs: median of the mean TPOT (the decode phase alone, without prefill)
medt() { python3 -c "import sys,json,statistics as s; v=[json.loads(l)['tpot_ms']['mean'] for l in sys.stdin if l.strip()]; print(s.median(v))"; }
# med FIELD < runs: median of a field
med() { python3 -c "import sys,json,statistics as s; v=[json.loads(l)[sys.argv[1]] for l in sys.stdin if l.strip()]; print(s.median(v))" "$1"; }
# batch 1: 3 requests of 48 tokens on the padded target; 6 of 100 on wp-11m (its steps take
# 0.5 ms, so shorter runs are mostly noise and prefill)
b1() {
  local n=3 len=48
  [[ $1 == "$WP" ]] && n=6 len=100
  runs -m $1 --requests $n --concurrency 1 --prompt-len 64 --output-len $len --workload text --prompt-file $TEXT "${@:2}"
}

out=$(mktemp)
for target in $PAD $WP; do
  name=$(basename $target .gguf)
  for temp in 0 0.8; do
    b1 $target --temp $temp > $CACHE/spec_off.jsonl
    off=$(med output_tokens_per_s < $CACHE/spec_off.jsonl)
    offt=$(medt < $CACHE/spec_off.jsonl)
    for k in 2 3 auto; do
      if [[ $k == auto ]]; then
        b1 $target --temp $temp --spec auto --draft-model $DRAFT > $CACHE/spec_runs.jsonl
      else
        b1 $target --temp $temp --spec draft --draft-model $DRAFT --spec-k $k > $CACHE/spec_runs.jsonl
      fi
      on=$(med output_tokens_per_s < $CACHE/spec_runs.jsonl)
      ont=$(medt < $CACHE/spec_runs.jsonl)
      acc=$(med acceptance_rate < $CACHE/spec_runs.jsonl)
      mal=$(med mean_accepted_length < $CACHE/spec_runs.jsonl)
      python3 -c "import sys; a,b,c,d,e,f=map(float,sys.argv[1:7]); print(f'{sys.argv[7]:14s} T={sys.argv[8]:3s} draft k={sys.argv[9]:4s}: {b:7.2f} tok/s vs off {a:7.2f} = {b/a:.2f}x (decode phase, mean TPOT {f:.1f} vs {e:.1f} ms: {e/f:.2f}x); acceptance {100*c:.1f}%, mean accepted {d:.2f}')" "$off" "$on" "$acc" "$mal" "$offt" "$ont" "$name" "$temp" "$k" | tee -a $out
    done
  done
done
# 2. n-gram, copy-heavy (P + C + P + output = 96 + 48 + 96 + 48 = 288 <= context 512)
quote() { runs -m $PAD --requests 3 --concurrency 1 --prompt-len 96 --output-len 48 --workload quote --prompt-file $TEXT "$@"; }
quote > $CACHE/spec_off.jsonl
off=$(med output_tokens_per_s < $CACHE/spec_off.jsonl)
offt=$(medt < $CACHE/spec_off.jsonl)
for spec in "ngram --spec-k 4" "ngram --spec-k 8" "auto"; do
  quote --spec $spec > $CACHE/spec_runs.jsonl
  on=$(med output_tokens_per_s < $CACHE/spec_runs.jsonl)
  ont=$(medt < $CACHE/spec_runs.jsonl)
  acc=$(med acceptance_rate < $CACHE/spec_runs.jsonl)
  mal=$(med mean_accepted_length < $CACHE/spec_runs.jsonl)
  python3 -c "import sys; a,b,c,d,e,f=map(float,sys.argv[1:7]); print(f'{sys.argv[7]:16s} quote workload (padded): {b:.2f} tok/s vs off {a:.2f} = {b/a:.2f}x end to end (prompt 240 tokens); decode phase, mean TPOT {f:.1f} vs {e:.1f} ms: {e/f:.2f}x; acceptance {100*c:.1f}%, mean accepted {d:.2f}')" "$off" "$on" "$acc" "$mal" "$offt" "$ont" "${spec/--spec-k /k=}" | tee -a $out
done
# 3. large batches with the policy
for c in 32 64; do
  big() { runs -m $WP --requests $c --concurrency $c --prompt-len 64 --output-len 64 --workload text --prompt-file $TEXT "$@"; }
  off=$(big | med output_tokens_per_s)
  on=$(big --spec auto --draft-model $DRAFT | med output_tokens_per_s)
  python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'wp-11m batch {sys.argv[3]}: spec auto {b:.1f} tok/s vs off {a:.1f} = {b/a:.3f}x')" "$off" "$on" "$c" | tee -a $out
done
# 4. mixed buckets, at 8 and at 2 concurrent
for conc in 8 2; do
for mode in off auto; do
  $BIN bench offline --json -t $T -m $PAD --requests 24 --concurrency $conc --prompt-len 64 --output-len 64 \
    --workload mixed --prompt-file $TEXT --spec $mode --draft-model $DRAFT 2>/dev/null > $CACHE/mixed_${conc}_$mode.json
done
python3 - $CACHE/mixed_${conc}_off.json $CACHE/mixed_${conc}_auto.json $conc <<'PY' | tee -a $out
import json, sys
off, on = (json.load(open(p)) for p in sys.argv[1:3])
c = sys.argv[3]
print(f"mixed (padded, 24 requests at batch {c}): {on['output_tokens_per_s']:.2f} tok/s with auto (max slowdown {on.get('spec_max_slowdown')}) vs {off['output_tokens_per_s']:.2f} off = {on['output_tokens_per_s']/off['output_tokens_per_s']:.2f}x")
for key in sorted(off['buckets']):
    task = off['buckets'][key]['labels']['task']
    a, b = off['buckets'][key]['tpot_ms'], on['buckets'][key]['tpot_ms']
    print(f"mixed (padded, 24 requests at batch {c}) bucket {task:9s}: TPOT p50 {a['p50']:.1f} -> {b['p50']:.1f} ms ({b['p50']/a['p50']:.2f}x), p99 {a['p99']:.1f} -> {b['p99']:.1f} ms ({b['p99']/a['p99']:.2f}x)")
for key, e in on['buckets'].items():
    st = e.get('spec')
    if st and st['decisions'] > 1:
        print(f"  bucket {key}: acceptance {100*st['acceptance_rate']:.1f}%, mean accepted {st['mean_accepted_length']:.2f}, fallbacks {st['fallbacks']}/{st['decisions']}")
PY
done
echo; cat $out
