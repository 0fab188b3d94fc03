#!/usr/bin/env bash
# The whole CPU test suite: unit + end-to-end tests (ctest, label "cpu"), the same under
# ASan+UBSan, the Python oracle tests (pytest: transformers, tokenizers/tiktoken,
# openai-harmony, the openai SDK) and a bounded libFuzzer smoke run. GPU tests (label "gpu")
# run on the GPU machine through scripts/gpu.sh instead.
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=$(mktemp -d)
fail=0
passed=0
failed=0

# ctest_counts LOG: adds "N tests failed out of M" to the totals.
ctest_counts() {
  local line
  line=$(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$1" | tail -1)
  if [[ -n "$line" ]]; then
    local f t
    f=$(awk '{print $1}' <<<"$line"); t=$(awk '{print $6}' <<<"$line")
    passed=$((passed + t - f)); failed=$((failed + f))
  fi
}

echo "== ctest (build/) =="
ctest --test-dir build -L cpu --output-on-failure -j"$(nproc)" 2>&1 | tee "$logdir/ctest.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1
ctest_counts "$logdir/ctest.log"

echo "== ctest (build-asan/, ASan+UBSan) =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L cpu --output-on-failure -j"$(nproc)" 2>&1 | tee "$logdir/asan.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1
ctest_counts "$logdir/asan.log"

echo "== pytest (tests/python) =="
GOSSAMER_BIN="$PWD/build/gossamer" .venv/bin/python -m pytest -q tests/python 2>&1 | tee "$logdir/pytest.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail=1
p=$(grep -Eo '[0-9]+ passed' "$logdir/pytest.log" | tail -1 | awk '{print $1}')
f=$(grep -Eo '[0-9]+ (failed|error)' "$logdir/pytest.log" | awk '{s+=$1} END {print s+0}')
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))

echo "== fuzz smoke (libFuzzer, FUZZ_SECONDS per target) =="
if FUZZ_SECONDS="${FUZZ_SECONDS:-20}" scripts/fuzz.sh; then passed=$((passed + 1)); else fail=1; failed=$((failed + 1)); fi

[[ $fail -eq 0 || $failed -gt 0 ]] || failed=1
echo
echo "gossamer: $passed passed, $failed failed"
exit $fail
