#!/usr/bin/env bash
# One command for a fresh Debian 12 machine: system packages, the Python venv with the test
# oracles (transformers, tokenizers, tiktoken, openai-harmony, openai), configure and build.
#   scripts/setup.sh            # everything
#   SKIP_APT=1 scripts/setup.sh # when the packages are already there
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${SKIP_APT:-0}" != 1 ]]; then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config git python3-venv \
    nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libcli11-dev \
    libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
# --no-cache-dir: torch and its CUDA wheels are ~3 GB; a cached copy would double that on disk.
.venv/bin/pip install -q --no-cache-dir --upgrade pip
.venv/bin/pip install -q --no-cache-dir -r scripts/requirements-test.txt

# Release-ish build (CUDA included when nvcc is found) and an ASan+UBSan build of the CPU code.
export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGOSSAMER_SANITIZE=ON -DGOSSAMER_CUDA=OFF >/dev/null
cmake --build build-asan -j"$(nproc)"
echo "setup: done (build/, build-asan/, .venv/)"
