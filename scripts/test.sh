#!/usr/bin/env bash
# The whole CPU test suite: unit + end-to-end tests (ctest, label "cpu"), the same under
# ASan+UBSan, and the Python oracle tests (pytest: transformers, tokenizers/tiktoken,
# openai-harmony, the openai SDK). GPU tests (label "gpu") run on the GPU machine through
# scripts/gpu.sh instead.
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
echo "== ctest (build/) =="
ctest --test-dir build -L cpu --output-on-failure -j"$(nproc)" || fail=1
echo "== ctest (build-asan/, ASan+UBSan) =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L cpu --output-on-failure -j"$(nproc)" || fail=1
echo "== pytest (tests/python) =="
GOSSAMER_BIN="$PWD/build/gossamer" .venv/bin/python -m pytest -q tests/python || fail=1
echo "== fuzz smoke (libFuzzer, FUZZ_SECONDS per target) =="
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" scripts/fuzz.sh || fail=1
exit $fail
