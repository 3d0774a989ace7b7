#!/usr/bin/env bash
# Bounded libFuzzer run of the chat-template parser + renderer under ASan + UBSan
# (`make fuzz-template FUZZ_SECONDS=N`).
#   scripts/fuzz-template.sh [SECONDS]     (default 60; see scripts/fuzz.sh)
exec "$(dirname "${BASH_SOURCE[0]}")/fuzz.sh" chat_template "${1:-60}"
