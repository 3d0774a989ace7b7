# tarmac: all set-up goes through these targets (see README).
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
JOBS ?= $(shell nproc)
MODEL ?= models/wp-11m-f16.gguf
CMAKE_FLAGS ?=

.PHONY: all deps build serve test test-asan test-tsan bench fuzz fuzz-template clean

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

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	@cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTARMAC_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit

# The multi-threaded pieces (thread pool, engine thread and client, request streams, the
# speculative engine, a compiled grammar shared by matchers on several threads) under
# ThreadSanitizer.
test-tsan: deps
	@cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTARMAC_TSAN=ON -DTARMAC_BENCH=OFF >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS)
	cd $(TSAN_DIR) && TSAN_OPTIONS=halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit -R 'ThreadPool|Engine|SpecEngine|Scheduler|GrammarMatcherTest.OneCompiledGrammar'

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

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR)
