#!/usr/bin/env bash
# Bounded libFuzzer run of one fuzz target under ASan + UBSan.
#   scripts/fuzz.sh TARGET [SECONDS]      (default 60)
# TARGET: gguf_reader | chat_template | openai_request | http_framing | serve_config | grammar |
#   chat_render (fuzz/TARGET_fuzz.cc says what each feeds and checks). `make fuzz-all` runs them all.
# Environment: FUZZ_DIR (build dir, default build-fuzz), JOBS (build parallelism, default 2),
#   FUZZ_WORKERS (parallel fuzz processes, default 1), FUZZ_NICE (nice level, default 10),
#   FUZZ_TIMEOUT (seconds one input may take before it counts as a hang, default 30: libFuzzer
#   measures wall time, and a machine shared with builds stretches it).
# Builds the target with clang in $FUZZ_DIR and writes its seed corpus from the tests
# (scripts/fuzz_seeds.py; the GGUF seeds from gguf_fuzz_seeds, the template seeds from the
# test templates and ../shared's; nothing generated is committed), keeps the growing corpus in
# $FUZZ_DIR/fuzz-corpus/TARGET between runs and puts crash inputs in
# $FUZZ_DIR/fuzz-artifacts/TARGET/. Prints one summary line (executions, coverage, corpus).
# Exits 1 if a crash was found.
set -euo pipefail

TARGET="${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}"
SECS="${2:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_DIR:-$ROOT/build-fuzz}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
JOBS="${JOBS:-2}"
WORKERS="${FUZZ_WORKERS:-1}"
NICE="${FUZZ_NICE:-10}"
T="$ROOT/tests"
S="$ROOT/src"

command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (apt-get install clang)" >&2; exit 2; }

SEEDS="$BUILD/fuzz-seeds/$TARGET"
DICT=""
MAX_LEN=16384
extra_targets=()
case "$TARGET" in
  gguf_reader) MAX_LEN=65536; extra_targets=(gguf_fuzz_seeds) ;;
  chat_template) DICT="$ROOT/fuzz/chat_template.dict" ;;
  openai_request|chat_render) ;;
  http_framing) MAX_LEN=8192; DICT="$ROOT/fuzz/http.dict" ;;
  serve_config) MAX_LEN=8192 ;;
  grammar) MAX_LEN=4096 ;;
  *) echo "fuzz: unknown target '$TARGET'" >&2; exit 2 ;;
esac

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTARMAC_FUZZ=ON -DTARMAC_SANITIZE=ON -DTARMAC_BENCH=OFF >/dev/null
nice -n "$NICE" cmake --build "$BUILD" -j "$JOBS" --target "${TARGET}_fuzz" "${extra_targets[@]}"

rm -rf "$SEEDS"
mkdir -p "$SEEDS"
seeds() { python3 "$ROOT/scripts/fuzz_seeds.py" "$SEEDS" "$@" >/dev/null; }
dict() { DICT="$BUILD/fuzz-seeds/$TARGET.dict"; python3 "$ROOT/scripts/fuzz_seeds.py" "$DICT" dict "$@" >/dev/null; }
case "$TARGET" in
  gguf_reader)
    models=()
    for m in "$ROOT"/models/*.gguf "$ROOT"/../shared/models/*.gguf; do [ -f "$m" ] && models+=("$m"); done
    ASAN_OPTIONS=detect_leaks=0 "$BUILD/bin/gguf_fuzz_seeds" "$SEEDS" "${models[@]}" ;;
  chat_template)
    for t in "$T"/chat_template/templates/*.jinja "$ROOT"/../shared/data/chat-templates/*.jinja; do
      [ -f "$t" ] && cp "$t" "$SEEDS/$(basename "$(dirname "$t")")-$(basename "$t")"
    done ;;
  openai_request|chat_render)
    seeds json "$T"/server/openai_request_test.cc "$T"/server/openai_structured_test.cc \
      "$T"/server/openai_render_test.cc "$T"/server/structured_itest.cc "$T"/router/*.cc
    dict "$S"/server/openai_request.cc "$S"/server/openai_messages.cc "$S"/server/openai_tools.cc \
      "$S"/server/openai_structured.cc "$S"/server/json_fields.cc "$ROOT/fuzz/chat_render_fuzz.cc" ;;
  http_framing)
    cp "$ROOT"/fuzz/seeds/http/* "$SEEDS/"
    seeds http "$T"/server/*.cc "$T"/server/*.h ;;
  serve_config)
    seeds yaml "$T"/config/serve_config_test.cc
    dict "$S"/config/*.cc ;;
  grammar)
    seeds grammar "$T"/grammar/*.cc "$T"/server/openai_structured_test.cc
    dict "$S"/grammar/gbnf_parser.cc "$S"/grammar/json_schema.cc "$S"/grammar/json_schema_types.cc \
      "$S"/grammar/regex_parser.cc ;;
esac

CORPUS="$BUILD/fuzz-corpus/$TARGET"
ARTIFACTS="$BUILD/fuzz-artifacts/$TARGET"
LOG="$BUILD/fuzz-$TARGET.log"
mkdir -p "$CORPUS" "$ARTIFACTS"
echo "fuzz $TARGET: $(ls "$SEEDS" | wc -l) seeds, $(ls "$CORPUS" | wc -l) corpus files, ${SECS}s"

# Crash, leak, timeout and out-of-memory inputs count; slow-unit-* files (kept for a look) do not.
failures() { find "$ARTIFACTS" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l; }
crashes_before=$(failures)
opts=()
[ -n "$DICT" ] && opts+=(-dict="$DICT")
# With -jobs libFuzzer runs workers that log to fuzz-N.log in the current directory.
[ "$WORKERS" -gt 1 ] && opts+=(-jobs="$WORKERS" -workers="$WORKERS")
WORK="$BUILD/fuzz-work/$TARGET"
mkdir -p "$WORK"
cd "$WORK"
rm -f fuzz-[0-9]*.log
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  nice -n "$NICE" "$BUILD/bin/${TARGET}_fuzz" -max_total_time="$SECS" -max_len="$MAX_LEN" -rss_limit_mb=2048 \
  -timeout="${FUZZ_TIMEOUT:-30}" -print_final_stats=1 "${opts[@]}" \
  -artifact_prefix="$ARTIFACTS/" "$CORPUS" "$SEEDS" >"$LOG" 2>&1
rc=$?
set -e
cat fuzz-[0-9]*.log >>"$LOG" 2>/dev/null && rm -f fuzz-[0-9]*.log

execs=$(grep -h 'stat::number_of_executed_units' "$LOG" | awk '{s+=$2} END {print s+0}')
cov=$(grep -ho 'cov: [0-9]*' "$LOG" | tail -1 | awk '{print $2}')
ft=$(grep -ho 'ft: [0-9]*' "$LOG" | tail -1 | awk '{print $2}')
crashes_after=$(failures)
new=$((crashes_after - crashes_before))
echo "fuzz $TARGET: seconds=$SECS executions=$execs cov=${cov:-?} ft=${ft:-?} corpus=$(ls "$CORPUS" | wc -l)" \
     "new_crash_artifacts=$new exit=$rc log=$LOG"
if [ "$rc" -ne 0 ] || [ "$new" -ne 0 ]; then
  grep -E 'ERROR|runtime error|fuzz:|SUMMARY|Test unit written' "$LOG" | head -20 || true
  echo "fuzz $TARGET: FAILED; reproduce with: $BUILD/bin/${TARGET}_fuzz $ARTIFACTS/<file>" >&2
  exit 1
fi
echo "fuzz $TARGET: no crashes"
