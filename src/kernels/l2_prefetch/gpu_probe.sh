#!/usr/bin/env bash
# One device call for the L2-prefetch probe (docs/decode-overhead.md, section 3): the probe bench,
# the l2_prefetch tests, memcheck on the prefetch test.
#   pack (here):  src/kernels/l2_prefetch/gpu_probe.sh pack build-l2 .gpu-l2
#   run (device): src/kernels/l2_prefetch/gpu_probe.sh run .gpu-l2      (carry [".gpu-l2"])
# Logs go to $OUT (default ./l2-probe-out). About 3-4 minutes.
set -u
cmd=${1:-}
if [[ $cmd == pack ]]; then
  build=$2 dir=$3
  mkdir -p "$dir"
  cp "$build"/bench/l2_prefetch_bench "$build"/src/kernels/l2_prefetch/gossamer_kernel_l2_prefetch_test \
    "$dir"/ && strip "$dir"/*
  du -sh "$dir"
  exit 0
fi
if [[ $cmd != run ]]; then
  echo "usage: $0 pack BUILD DIR | run DIR" >&2
  exit 2
fi
dir=$2
out=${OUT:-l2-probe-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
cd "$dir" || exit 1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$out/smi.txt" 2>&1
timeout 50 ./l2_prefetch_bench 30 >"$out/probe.log" 2>&1
timeout 30 ./gossamer_kernel_l2_prefetch_test >"$out/l2test.log" 2>&1
timeout 40 compute-sanitizer --tool memcheck ./gossamer_kernel_l2_prefetch_test \
  --gtest_filter='L2Prefetch.*' >"$out/memcheck.log" 2>&1
tail -n 3 "$out/memcheck.log"
cat "$out/probe.log"
grep -hE "OK \]|FAILED|PASSED|rel_err|differ" "$out"/l2test.log | tail -40
