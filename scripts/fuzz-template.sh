#!/usr/bin/env bash
# Bounded libFuzzer run of the chat-template parser + renderer under ASan + UBSan.
#   scripts/fuzz-template.sh [SECONDS]     (default 60; `make fuzz-template FUZZ_SECONDS=N` calls this)
# Environment: FUZZ_DIR (build dir, default build-fuzz), JOBS (build parallelism, default 2),
#   FUZZ_WORKERS (parallel fuzz processes, default 1).
# Seeds: the small templates under tests/chat_template/templates plus, when present, the real
# templates in ../shared/data/chat-templates (copied into the build dir, never committed). The
# growing corpus stays in $FUZZ_DIR/fuzz-corpus/chat_template; crash inputs go to
# $FUZZ_DIR/fuzz-artifacts-template/. Exits 1 if a crash was found.
set -euo pipefail

SECS="${1:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_DIR:-$ROOT/build-fuzz}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
JOBS="${JOBS:-2}"
WORKERS="${FUZZ_WORKERS:-1}"

command -v clang++ >/dev/null || { echo "fuzz-template: clang++ not found (apt-get install clang)" >&2; exit 2; }

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTARMAC_FUZZ=ON -DTARMAC_SANITIZE=ON -DTARMAC_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target chat_template_fuzz

SEEDS="$BUILD/fuzz-seeds/chat_template"
CORPUS="$BUILD/fuzz-corpus/chat_template"
ARTIFACTS="$BUILD/fuzz-artifacts-template"
LOG="$BUILD/fuzz-template.log"
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$CORPUS" "$ARTIFACTS"
for t in "$ROOT"/tests/chat_template/templates/*.jinja "$ROOT"/../shared/data/chat-templates/*.jinja; do
  [ -f "$t" ] && cp "$t" "$SEEDS/$(basename "$(dirname "$t")")-$(basename "$t")"
done
echo "fuzz-template: $(ls "$SEEDS" | wc -l) seeds, $(ls "$CORPUS" | wc -l) corpus files, ${SECS}s"

crashes_before=$(ls "$ARTIFACTS" | wc -l)
parallel=()
[ "$WORKERS" -gt 1 ] && parallel=(-jobs="$WORKERS" -workers="$WORKERS")
cd "$BUILD"
rm -f fuzz-[0-9]*.log
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$BUILD/bin/chat_template_fuzz" -max_total_time="$SECS" -max_len=16384 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -dict="$ROOT/fuzz/chat_template.dict" "${parallel[@]}" \
  -artifact_prefix="$ARTIFACTS/" "$CORPUS" "$SEEDS" >"$LOG" 2>&1
rc=$?
set -e
cat fuzz-[0-9]*.log >>"$LOG" 2>/dev/null && rm -f fuzz-[0-9]*.log

execs=$(grep -h 'stat::number_of_executed_units' "$LOG" | awk '{s+=$2} END {print s+0}')
crashes_after=$(ls "$ARTIFACTS" | wc -l)
new=$((crashes_after - crashes_before))
echo "fuzz-template: executions=$execs new_crash_artifacts=$new exit=$rc corpus=$(ls "$CORPUS" | wc -l) log=$LOG"
if [ "$rc" -ne 0 ] || [ "$new" -ne 0 ]; then
  grep -E 'ERROR|runtime error|template fuzz|SUMMARY' "$LOG" | head -20 || true
  echo "fuzz-template: FAILED; reproduce with: $BUILD/bin/chat_template_fuzz $ARTIFACTS/<file>" >&2
  exit 1
fi
echo "fuzz-template: no crashes"
