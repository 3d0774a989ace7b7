#!/usr/bin/env bash
# Builds bench_kernels (Release) and prints one table of medians: STREAM-like triad GB/s,
# matvec GB/s per weight dtype and its % of the triad at the same thread count, and matmul
# GFLOP/s (f32/f16 weights, 512 tokens) against OpenBLAS sgemm, for 1 and 2 threads.
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
triad, readbw, matvec, matmul, blas = {}, {}, {}, {}, {}
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
    for dt in dict.fromkeys(k[0] for k in matvec):
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
    print("\nmatmul (512 tokens; GFLOP/s; ratio = ours / OpenBLAS sgemm on f32 weights):")
    print(f"  {'rows x cols':12} {'thr':>3} | {'f32':>7} {'f16':>7} {'openblas':>8} | {'f32/blas':>8} {'f16/blas':>8}")
    for (r, c, t) in sorted({(k[1], k[2], k[3]) for k in matmul}, key=lambda x: (x[2], x[0] * x[1])):
        f32 = matmul.get(("f32", r, c, t), float("nan"))
        f16 = matmul.get(("f16", r, c, t), float("nan"))
        ob = blas.get((r, c, t), float("nan"))
        print(f"  {str(r) + 'x' + str(c):12} {t:>3} | {f32:7.1f} {f16:7.1f} {ob:8.1f} | {f32 / ob:8.2f} {f16 / ob:8.2f}")
PY
