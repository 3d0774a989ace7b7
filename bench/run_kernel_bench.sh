#!/usr/bin/env bash
# Builds bench_kernels (Release) and prints one table of medians: STREAM-like triad GB/s,
# matvec GB/s per weight dtype and its % of the triad at the same thread count, matmul
# GFLOP/s (f32/f16/q8_0/q4_0 weights, 512 tokens) against OpenBLAS sgemm, for 1 and 2 threads,
# and the int8 (q8_0/q4_0) matmul at 4..512 tokens per call.
#
# Usage: bench/run_kernel_bench.sh [extra benchmark flags...]
#   BUILD_DIR (default build), REPS (default 5), OUT (JSON, default $BUILD_DIR/bench_kernels.json)
# Needs ~4.5 GiB of free memory (1 GiB triad arrays ×3, then one 1.5 GiB weight matrix).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
REPS=${REPS:-5}
OUT=${OUT:-$BUILD_DIR/bench_kernels.json}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_kernels >/dev/null

"$BUILD_DIR/bin/bench_kernels" --benchmark_repetitions="$REPS" --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT" \
  --benchmark_out_format=json "$@" >&2

python3 - "$OUT" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
ctx = data["context"]
med = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
if not med:  # a single repetition has no aggregates
    med = [b for b in data["benchmarks"] if b.get("run_type") == "iteration"]
reps = max([b.get("repetitions", 1) for b in data["benchmarks"]] + [1])
triad, readbw, matvec, matmul, blas, mm_tokens = {}, {}, {}, {}, {}, {}
for b in med:
    parts = b["run_name"].split("/")
    t = int(b.get("threads", 0))
    if parts[0] == "BM_Triad":
        triad[t] = b["GB"]
    elif parts[0] == "BM_ReadBW":
        readbw[t] = b["GB"]
    elif parts[0] == "BM_MatVec":
        matvec[(parts[1], t)] = b["GB"]
    elif parts[0] == "BM_MatMul":
        matmul[(parts[1], int(parts[3]), int(parts[4]), t)] = b["GFLOP/s"]
    elif parts[0] == "BM_MatMulTokens":
        mm_tokens[(parts[1], int(parts[3]))] = b["GFLOP/s"]
    elif parts[0] == "BM_Sgemm":
        blas[(int(parts[2]), int(parts[3]), t)] = b["GFLOP/s"]
print(f"\nmachine: {ctx.get('num_cpus')} CPUs @ {ctx.get('mhz_per_cpu')} MHz, "
      f"load avg {[round(x, 1) for x in ctx.get('load_avg', [])]}; medians of {reps} runs\n")
threads = sorted(triad) or sorted({k[1] for k in matvec})
print("triad (a = b + s*c, 3 x 1 GiB f32, 12 B/elem):")
for t in threads:
    print(f"  threads={t}: {triad.get(t, float('nan')):7.2f} GB/s"
          f"   (read-only u64 sum: {readbw.get(t, float('nan')):6.2f} GB/s)")
if matvec:
    print("\nmatvec (weights >= 1.5 GiB, cols 4096; GB/s of weight bytes, % of triad, % of read-only):")
    print(f"  {'dtype':6}" + "".join(f" | {'t=' + str(t) + ' GB/s':>11} {'%triad':>7} {'%read':>6}" for t in threads))
    order = ["q8_0", "q4_0", "q4_K", "q6_K", "f16", "bf16", "f32"]
    present = set(k[0] for k in matvec)
    for dt in [t for t in order if t in present] + sorted(present - set(order)):
        row = f"  {dt:6}"
        for t in threads:
            g = matvec.get((dt, t))
            tr = triad.get(t)
            rb = readbw.get(t)
            pct = f"{100 * g / tr:6.0f}%" if g and tr else "    n/a"
            pctr = f"{100 * g / rb:5.0f}%" if g and rb else "   n/a"
            row += f" | {g if g else float('nan'):11.2f} {pct:>7} {pctr:>6}"
        print(row)
if matmul:
    order = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q6_K"]
    present = set(k[0] for k in matmul)
    types = [t for t in order if t in present] + sorted(present - set(order))
    print("\nmatmul (512 tokens; GFLOP/s; x/blas = ours with x weights / OpenBLAS sgemm on f32):")
    print(f"  {'rows x cols':12} {'thr':>3} |" + "".join(f" {t:>7}" for t in types) +
          f" {'openblas':>8} |" + "".join(f" {t + '/blas':>10}" for t in types))
    for (r, c, t) in sorted({(k[1], k[2], k[3]) for k in matmul}, key=lambda x: (x[2], x[0] * x[1])):
        ob = blas.get((r, c, t), float("nan"))
        vals = [matmul.get((ty, r, c, t)) for ty in types]
        print(f"  {str(r) + 'x' + str(c):12} {t:>3} |" +
              "".join(f" {v:7.1f}" if v else f" {'-':>7}" for v in vals) + f" {ob:8.1f} |" +
              "".join(f" {v / ob:10.2f}" if v else f" {'-':>10}" for v in vals))
if mm_tokens:
    print("\nint8 matmul by tokens per call (2048x2048, 1 thread; GFLOP/s):")
    toks = sorted({k[1] for k in mm_tokens})
    print(f"  {'dtype':6} |" + "".join(f" {'T=' + str(t):>8}" for t in toks))
    for dt in sorted({k[0] for k in mm_tokens}):
        print(f"  {dt:6} |" + "".join(f" {mm_tokens.get((dt, t), float('nan')):8.1f}" for t in toks))
PY
