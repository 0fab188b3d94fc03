#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/CMakeLists.txt, clang, ASan+UBSan) in build-fuzz/ and runs
# each one for a bounded time over its kept corpus fuzz/corpus/<target>/ (new inputs go to
# build-fuzz/corpus-new/<target>/, so the committed corpus only changes on purpose).
#   scripts/fuzz.sh                  # all targets, FUZZ_SECONDS (default 30) each
#   FUZZ_SECONDS=300 scripts/fuzz.sh tokenizer_fuzz
# Exit status is non-zero if a build fails or a target finds a crash (the reproducer is left
# in build-fuzz/artifacts/<target>/).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-30}"
CXX="${FUZZ_CXX:-$(command -v clang++ || command -v clang++-14)}"
cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  mapfile -t targets < <(sed -n 's/^gossamer_fuzz_target(\([A-Za-z0-9_]*\).*/\1/p' fuzz/CMakeLists.txt)
fi
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"
fail=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "build-fuzz/corpus-new/$t" "build-fuzz/artifacts/$t"
  echo "== fuzz $t (${SECONDS_EACH}s) =="
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "build-fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
      -max_len=4096 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t/" \
      "build-fuzz/corpus-new/$t" "fuzz/corpus/$t"; then
    echo "fuzz: $t FAILED (see build-fuzz/artifacts/$t/)"
    fail=1
  fi
done
exit $fail
