#!/usr/bin/env bash
# Bounded libFuzzer run of the GGUF reader under ASan + UBSan.
#   scripts/fuzz-gguf.sh [SECONDS]        (default 60; `make fuzz FUZZ_SECONDS=N` calls this)
# Environment: FUZZ_DIR (build dir, default build-fuzz), JOBS (build parallelism, default 2),
#   FUZZ_WORKERS (parallel fuzz processes, default 1).
# Builds with clang in $FUZZ_DIR, writes a seed corpus (small generated files plus shrunken
# copies of the models in models/ and ../shared/models, which are never committed), keeps the
# growing corpus in $FUZZ_DIR/fuzz-corpus/gguf between runs, and puts crash inputs in
# $FUZZ_DIR/fuzz-artifacts/. Exits 1 if a crash was found.
set -euo pipefail

SECS="${1:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_DIR:-$ROOT/build-fuzz}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
JOBS="${JOBS:-2}"
WORKERS="${FUZZ_WORKERS:-1}"

command -v clang++ >/dev/null || { echo "fuzz-gguf: clang++ not found (apt-get install clang)" >&2; exit 2; }

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTARMAC_FUZZ=ON -DTARMAC_SANITIZE=ON -DTARMAC_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target gguf_reader_fuzz gguf_fuzz_seeds

SEEDS="$BUILD/fuzz-seeds/gguf"
CORPUS="$BUILD/fuzz-corpus/gguf"
ARTIFACTS="$BUILD/fuzz-artifacts"
LOG="$BUILD/fuzz-gguf.log"
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$CORPUS" "$ARTIFACTS"
models=()
for m in "$ROOT"/models/*.gguf "$ROOT"/../shared/models/*.gguf; do
  [ -f "$m" ] && models+=("$m")
done
ASAN_OPTIONS=detect_leaks=0 "$BUILD/bin/gguf_fuzz_seeds" "$SEEDS" "${models[@]}"
echo "fuzz-gguf: $(ls "$SEEDS" | wc -l) seeds, $(ls "$CORPUS" | wc -l) corpus files, ${SECS}s"

crashes_before=$(ls "$ARTIFACTS" | wc -l)
parallel=()
# With -jobs libFuzzer runs workers that log to fuzz-N.log in the current directory.
[ "$WORKERS" -gt 1 ] && parallel=(-jobs="$WORKERS" -workers="$WORKERS")
cd "$BUILD"
rm -f fuzz-[0-9]*.log
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$BUILD/bin/gguf_reader_fuzz" -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 "${parallel[@]}" \
  -artifact_prefix="$ARTIFACTS/" "$CORPUS" "$SEEDS" >"$LOG" 2>&1
rc=$?
set -e
cat fuzz-[0-9]*.log >>"$LOG" 2>/dev/null && rm -f fuzz-[0-9]*.log

execs=$(grep -h 'stat::number_of_executed_units' "$LOG" | awk '{s+=$2} END {print s+0}')
crashes_after=$(ls "$ARTIFACTS" | wc -l)
new=$((crashes_after - crashes_before))
echo "fuzz-gguf: executions=$execs new_crash_artifacts=$new exit=$rc corpus=$(ls "$CORPUS" | wc -l) log=$LOG"
if [ "$rc" -ne 0 ] || [ "$new" -ne 0 ]; then
  grep -E 'ERROR|runtime error|invariant violated|SUMMARY' "$LOG" | head -20 || true
  echo "fuzz-gguf: FAILED; reproduce with: $BUILD/bin/gguf_reader_fuzz $ARTIFACTS/<file>" >&2
  exit 1
fi
echo "fuzz-gguf: no crashes"
