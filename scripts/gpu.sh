#!/usr/bin/env bash
# GPU test/bench driver for the CUDA decode path. Two halves:
#   scripts/gpu.sh pack            # HERE (no GPU needed): build $BUILD/, copy the GPU test
#                                  # binaries, kernel benches and `gossamer` into .gpu-carry/
#                                  # and .gpu-carry.tgz (carry the tarball: 64 MiB limit)
#   scripts/gpu.sh run [SECTIONS]  # ON THE GPU MACHINE: run everything from .gpu-carry/, logs
#                                  # under $OUT (default ./gpu-out), summary table printed last
# SECTIONS (comma list, default info,ceil,test,sanitize,kbench,bench):
#   info,ceil,test,sanitize,kbench,bench,batch,profile,serve,api,original
# (bench: BENCH_ARGS, BENCH_MODELS="20b 120b"; sanitize: SANITIZE_FILTER)
# Through the device tool: run(command="scripts/gpu.sh run", carry=[".gpu-carry.tgz"]).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu-carry
BUILD=${GPU_BUILD_DIR:-build-cuda}  # any CUDA-enabled build dir (e.g. build/ from setup.sh)
mode=${1:-run}

if [[ $mode == pack ]]; then
  set -e
  export PATH="/usr/local/cuda/bin:$PATH"
  [[ -f $BUILD/build.ninja || -f $BUILD/Makefile ]] ||
    cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  # (Ninja's target help does not list the CLI executable `gossamer`: named explicitly, so that
  # its bench metadata carries the sha of this build.)
  targets="$(cmake --build $BUILD --target help | grep -oE '(gossamer_kernel_[a-z0-9_]+_test|[a-z0-9_]+_bench|gossamer_cuda_test)\b' | sort -u) gossamer"
  cmake --build $BUILD -j"$(nproc)" --target $targets
  rm -rf $CARRY && mkdir -p $CARRY/tests $CARRY/bench
  find $BUILD/src -type f -perm -u+x \( -name 'gossamer_kernel_*_test' -o -name 'gossamer_cuda_test' \) |
    xargs -r cp -t $CARRY/tests
  [[ -d $BUILD/bench ]] && cp $BUILD/bench/*_bench $CARRY/bench/ 2>/dev/null || true
  cp $BUILD/gossamer $CARRY/ 2>/dev/null || true
  strip $CARRY/tests/* $CARRY/bench/* $CARRY/gossamer 2>/dev/null || true
  # Shared libraries the GPU image lacks (pcre2, httplib, ssl, brotli ...): carried along.
  mkdir -p $CARRY/lib
  ldd $CARRY/gossamer $CARRY/tests/* | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcublas[^/]*)\.so' |
    xargs -r cp -L -t $CARRY/lib  # cuBLASLt (540 MB) is not carried: the GPU image has it
  tok=../shared/tokenizer/tokenizer.json
  [[ -f $tok ]] && gzip -c $tok > $CARRY/tokenizer.json.gz  # for the serve section
  git rev-parse --short HEAD > $CARRY/git_sha 2>/dev/null || true
  # The device tool carries at most 64 MiB: the tree (~140 MB stripped) goes as a tarball,
  # which `run` unpacks when .gpu-carry/ is absent.
  tar -czf $CARRY.tgz $CARRY
  du -sh $CARRY $CARRY.tgz
  exit 0
fi
[[ -d $CARRY || ! -f $CARRY.tgz ]] || tar -xzf $CARRY.tgz

SECTIONS=${2:-info,ceil,test,sanitize,kbench,bench}
# libcublasLt.so.13 (prefill GEMMs) from the image's CUDA toolkit (or wherever it is installed).
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublasLt.so.13' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$PWD/$CARRY/lib:$CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
has() { [[ ",$SECTIONS," == *",$1,"* ]]; }
summary=()
add() { summary+=("$1"); }

if has info; then
  { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total \
      --format=csv; nvcc --version | tail -2; uname -a; } > "$OUT/info.txt" 2>&1
  add "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null)"
fi

if has ceil; then
  python3 - > "$OUT/ceilings.txt" 2>&1 <<'PY'
import torch, json
d = torch.device("cuda")
p = torch.cuda.get_device_properties(d)
print("device", p.name, "SMs", p.multi_processor_count, "L2 MB", p.L2_cache_size / 1e6)
def timed(fn, it=20, wu=3):
    for _ in range(wu): fn()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(it): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / it / 1e3
a = torch.empty(2 << 30, dtype=torch.uint8, device=d); b = torch.empty_like(a)
t = timed(lambda: b.copy_(a))
print(json.dumps({"copy_GBps_read_plus_write": 2 * a.numel() / t / 1e9}))
del a, b
n = 8192
x = torch.randn(n, n, device=d, dtype=torch.bfloat16); y = torch.randn(n, n, device=d, dtype=torch.bfloat16)
t = timed(lambda: x @ y, 10)
print(json.dumps({"bf16_gemm_TFLOPs_8192": 2 * n**3 / t / 1e12}))
PY
  add "ceilings: $(grep -h '^{' "$OUT/ceilings.txt" | tr '\n' ' ')"
fi

if has test; then
  : > "$OUT/tests.log"
  for t in $CARRY/tests/*_test; do
    [[ -x $t ]] || continue
    if "$t" --gtest_brief=1 >> "$OUT/tests.log" 2>&1; then add "test PASS $(basename "$t")"
    else add "test FAIL $(basename "$t")"; fi
  done
fi

if has sanitize; then
  : > "$OUT/sanitizer.log"
  for t in $CARRY/tests/*_test; do
    [[ -x $t ]] || continue
    for tool in memcheck racecheck; do
      # GOSSAMER_TEST_SMALL: the attention / flash_attn suites skip their large cases (racecheck
      # of the full attention suite runs past 100 s; docs/attention.md).
      if GOSSAMER_TEST_SMALL=1 compute-sanitizer --tool $tool --error-exitcode 9 "$t" --gtest_brief=1 \
          --gtest_filter="${SANITIZE_FILTER:-*:-KernelProfileGpu.*}" >> "$OUT/sanitizer.log" 2>&1; then
        add "sanitize $tool clean $(basename "$t")"
      else add "sanitize $tool FAIL $(basename "$t")"; fi
    done
  done
fi

if has kbench; then
  : > "$OUT/kbench.log"
  for b in $CARRY/bench/*_bench; do
    [[ -x $b ]] && "$b" >> "$OUT/kbench.log" 2>&1
  done
  add "kernel benches: $(grep -c '^|' "$OUT/kbench.log") lines in kbench.log"
fi

if has bench && [[ -x $CARRY/gossamer ]]; then
  : > "$OUT/bench.md"
  for m in ${BENCH_MODELS:-20b 120b}; do
    $CARRY/gossamer bench --synthetic $m ${BENCH_ARGS:--p 512 -n 128 -d 0,16384 -r 3} \
      --json "$OUT/bench-$m.json" >> "$OUT/bench.md" 2>&1 || add "bench $m FAILED"
  done
fi

# batch: decode throughput of batches of sequences (tg32, depth 0), both models.
if has batch && [[ -x $CARRY/gossamer ]]; then
  : > "$OUT/batch.md"
  for m in 20b 120b; do
    for pmr in ${BATCH_PMR:-8}; do  # --prefill-min-rows: where decode batches take GEMMs
      for b in ${BATCHES:-1 4 8 16 32 64}; do
        $CARRY/gossamer bench --synthetic $m -p 0 -n 32 -b $b -r 1 --prefill-min-rows $pmr \
          >> "$OUT/batch.log" 2>&1 || add "batch $m b$b FAILED"
        echo "$(grep -h "tg32" "$OUT/batch.log" | tail -1) prefill-min-rows $pmr" >> "$OUT/batch.md"
      done
    done
  done
fi

# profile: per-kernel time of the real decode step / prefill forward (CUPTI, docs/kernel-profile.md)
if has profile && [[ -x $CARRY/gossamer ]]; then
  : > "$OUT/profile.md"
  for m in 20b 120b; do
    $CARRY/gossamer bench --synthetic $m ${PROFILE_ARGS:--p 2048 -n 128 -r 1} --kernel-profile \
      --json "$OUT/profile-$m.json" >> "$OUT/profile.md" 2>&1 || add "profile $m FAILED"
  done
fi

# serve: `gossamer serve --backend cuda` on the built-in demo model, then a synthetic checkpoint
# of the real 20b shapes, driven by the loopback benchmark client (concurrency 1, 8, 64).
if has serve && [[ -x $CARRY/gossamer && -f $CARRY/tokenizer.json.gz ]]; then
  : > "$OUT/serve.md"
  gunzip -c $CARRY/tokenizer.json.gz > /tmp/tokenizer.json
  for m in ${SERVE_MODELS:-demo 20b}; do
    if [[ $m == demo ]]; then  # the built-in demo model (no --model), synthesised on first use
      margs="--backend cuda"  # serve_bench passes --tokenizer itself
    else
      $CARRY/gossamer synth --preset $m --out /tmp/synth-$m --tokenizer /tmp/tokenizer.json \
        --quiet >> "$OUT/serve.log" 2>&1 || { add "serve $m: synth FAILED"; continue; }
      margs="--model /tmp/synth-$m --backend cuda"
    fi
    echo "### serve --backend cuda, $m" >> "$OUT/serve.md"
    if python3 bench/serve_bench.py --bin $CARRY/gossamer --tokenizer /tmp/tokenizer.json \
        --serve-args "$margs" --requests-per-level 64 \
        --max-tokens 64 >> "$OUT/serve.md" 2>> "$OUT/serve.log"; then add "serve $m: ok"
    else add "serve $m: FAILED (serve.log)"; fi
    rm -rf /tmp/synth-$m
  done
fi

# api: structured output, logit_bias and echo + prompt logprobs through `gossamer serve --backend
# cuda` (demo model): constrained rows sampled on the host beside device-sampled ones, every
# logits row of a scored prompt (scripts/api_smoke.py, standard library only).
if has api && [[ -x $CARRY/gossamer && -f $CARRY/tokenizer.json.gz ]]; then
  gunzip -c $CARRY/tokenizer.json.gz > /tmp/tokenizer.json
  if python3 scripts/api_smoke.py --bin $CARRY/gossamer --tokenizer /tmp/tokenizer.json \
      --serve-args "--backend cuda" > "$OUT/api.log" 2>&1; then add "api: ok"
  else add "api: FAILED (api.log)"; fi
  grep -E '^(ok|FAIL|info)' "$OUT/api.log"
fi

# original: a synthetic model in OpenAI's original/ layout (converted by the pytest converter,
# which needs torch + safetensors) served with --backend cuda: same greedy text and logprobs as
# its Hugging Face layout (scripts/original_layout_check.py).
if has original && [[ -x $CARRY/gossamer && -f $CARRY/tokenizer.json.gz ]]; then
  gunzip -c $CARRY/tokenizer.json.gz > /tmp/tokenizer.json
  if python3 scripts/original_layout_check.py --bin $CARRY/gossamer --tokenizer /tmp/tokenizer.json \
      --backend cuda > "$OUT/original.log" 2>&1; then add "original layout: ok"
  else add "original layout: FAILED (original.log)"; fi
  tail -1 "$OUT/original.log"
fi

echo "================ summary ================"
[[ -f $OUT/kbench.log ]] && grep -h '^|\|ceiling' "$OUT/kbench.log"
[[ -f $OUT/bench.md ]] && cat "$OUT/bench.md"
[[ -f $OUT/batch.md ]] && cat "$OUT/batch.md"
[[ -f $OUT/serve.md ]] && cat "$OUT/serve.md"
printf '%s\n' "${summary[@]}"
