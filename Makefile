# tarmac: all set-up goes through these targets (see README).
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
MODEL ?= models/wp-11m-f16.gguf
CMAKE_FLAGS ?=

.PHONY: all deps build serve test test-asan test-tsan bench fuzz fuzz-template fuzz-all test-ci clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

serve: build
	$(BUILD_DIR)/bin/tarmac serve -m $(MODEL) --host 127.0.0.1 --port 8080

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer. Builds only the unit test
# binaries (every tests/*/*_test.cc that is not an _itest or _slowtest), not the app. One test is
# left out for time (4 minutes under ASan, longer than the rest of the leg on one core): schema
# sampling over Llama 3's 128k vocabulary; the same paths run with wp-11m's vocabulary.
ASAN_EXCLUDE := ^GrammarSchemaSampling\.Llama3Vocabulary$$
UNIT_TEST_BINS := $(shell ls tests/*/*_test.cc | grep -v -e '_itest\.cc$$' -e '_slowtest\.cc$$' | sed -E 's|tests/([^/]+)/([^/]+)\.cc|\1_\2|')
test-asan: deps
	@cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTARMAC_SANITIZE=ON -DTARMAC_BENCH=OFF >/dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target $(UNIT_TEST_BINS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit -E '$(ASAN_EXCLUDE)' --timeout 900

# The multi-threaded pieces under ThreadSanitizer: the thread pool, the bounded work queue, the scheduler, the engine
# thread with its client, knobs, events and hooks, the speculative engine's randomised
# integrity runs, the engine target, matchers sharing one compiled grammar across threads, and the
# generation flow over real engines (engine threads posting wake-ups to the flow's thread).
# Left out (the same threads as the engine tests, minutes under TSan): the grammar-engine and
# sliding-window output-equality tests and SpecEngineTest's greedy-output comparisons. Builds only
# the binaries that hold these tests.
TSAN_TEST_BINS := base_thread_pool_test base_cpu_affinity_test base_work_queue_test sched_scheduler_test sched_scheduler_window_test engine_engine_test \
  engine_engine_seams_test engine_spec_engine_test router_target_test grammar_matcher_test server_generation_flow_test
TSAN_TESTS := ^(ThreadPoolTest|CpuAffinity|WorkQueueTest|SchedulerTest|SchedulerWindowTest|SchedulerSessions|EngineCoreTest|EngineClientTest|EngineKnobsTest|EngineEventsTest|EngineHookTest|EngineBucketsTest|EngineTarget)\.|/EngineTest\.|^SpecEngineTest\.(Random|DraftCatchUp)|^GrammarMatcherTest\.OneCompiledGrammar|^GenerationFlow\.
test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTARMAC_TSAN=ON -DTARMAC_BENCH=OFF >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target $(TSAN_TEST_BINS)
	cd $(TSAN_DIR) && TSAN_OPTIONS=halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit -R '$(TSAN_TESTS)' --timeout 900

# What CI runs (.ci/run): everything, then the sanitizer legs (README: CI).
test-ci: test test-asan test-tsan

# Kernel benchmarks (needs ~5 GiB free memory): interleaved repetitions and one summary table.
bench: build
	bash bench/run_kernel_bench.sh

# Bounded libFuzzer run of the GGUF reader under ASan/UBSan: make fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 60
fuzz: deps
	bash scripts/fuzz-gguf.sh $(FUZZ_SECONDS)

# Bounded libFuzzer run of the chat-template parser + renderer: make fuzz-template FUZZ_SECONDS=300
fuzz-template: deps
	bash scripts/fuzz-template.sh $(FUZZ_SECONDS)

# Every fuzz target in turn, each for FUZZ_SECONDS (scripts/fuzz.sh; one at a time: the machine
# has 2 cores): make fuzz-all FUZZ_SECONDS=600. FUZZ_TARGETS picks a subset. Fails at the end
# if any target crashed, naming them.
FUZZ_TARGETS ?= openai_request http_framing serve_config grammar chat_render chat_template gguf_reader
fuzz-all: deps
	@failed=""; for t in $(FUZZ_TARGETS); do bash scripts/fuzz.sh $$t $(FUZZ_SECONDS) || failed="$$failed $$t"; done; \
	  if [ -n "$$failed" ]; then echo "fuzz-all: crashes in:$$failed" >&2; exit 1; fi; echo "fuzz-all: no crashes"

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
