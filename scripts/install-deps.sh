#!/usr/bin/env bash
# Installs the Debian packages tarmac needs to build, test and benchmark, if missing.
# Idempotent and quiet when everything is there. Runs apt-get update once per invocation,
# only when something must be installed. Uses sudo when not root.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  clang libclang-rt-14-dev            # libFuzzer + sanitizer runtimes for the fuzz targets
  libgtest-dev libgmock-dev libbenchmark-dev
  libhwy-dev                          # Highway: portable SIMD with runtime dispatch
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libpcre2-dev libssl-dev libboost-dev libyaml-cpp-dev
  libxxhash-dev                       # xxHash: chained block hashes of the prefix cache
  libopenblas-dev                     # benchmark reference only (sgemm)
  python3 python3-jinja2              # python3-jinja2: reference renderings for the chat-template tests
  python3-jsonschema                  # the independent validator of the grammar tests
  chromium                            # the dashboard's browser test (headless, driven by puppeteer-core)
  gnuplot-nox                         # bench serve/offline --plot: PNG figures
  libhiredis-dev redis-server         # the scoped caches' shared tier (tests start their own redis-server)
)
# node and npm: the dashboard embeds uPlot from the npm registry at build time, and the npm
# clients of the tests. Debian's packages unless some node with npm is already installed.
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
