#!/usr/bin/env bash
# Bounded libFuzzer run of the GGUF reader under ASan + UBSan (`make fuzz FUZZ_SECONDS=N`).
#   scripts/fuzz-gguf.sh [SECONDS]     (default 60; see scripts/fuzz.sh)
exec "$(dirname "${BASH_SOURCE[0]}")/fuzz.sh" gguf_reader "${1:-60}"
