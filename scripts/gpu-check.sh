#!/usr/bin/env bash
# The GPU check: runs ON a GPU machine over a tree that carries the binaries built here
# by scripts/build-gpu.sh (static Lua/SQLite, static cudart; the GPU machine has no Lua,
# SQLite or JSON headers and builds nothing). It needs build-gpu/evodispatch,
# build-gpu/tests/test_evaluator_gpu and, to spend no time in NVRTC there,
# build-gpu/cubin-cache filled here beforehand:
#
#   bash scripts/build-gpu.sh && bash scripts/gpu-check.sh --precompile     # here, no GPU needed
#   bash scripts/gpu-check.sh                                                # there
#
# Writes into $OUT (default ./gpu-check-out), flat, seven files: nvidia-smi.txt, env.txt,
# gpu-tests.log, gpu-tests.json (GoogleTest's report), bench.log,
# bench-paper-table1.json (`evodispatch bench --json`) and evodispatch.db (the results).
# The GPU tests run as the test binary itself rather than through `ctest -L gpu`: the
# carried CTest files name this machine's paths. Exit status: 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
gpu_paths
cache="$root/$build/cubin-cache"
tests="$root/$build/tests/test_evaluator_gpu"

if [ "${1:-}" = "--precompile" ]; then
  # Compiles every unit the runner may need into the cache that travels with the build.
  # The target defaults to Hopper (the H100 / H200 the device machines have).
  EVODISPATCH_CACHE_DIR="$cache" EVODISPATCH_PRECOMPILE_ARCH="${ARCH:-sm_90a}" \
    "$tests" --gtest_filter='GpuPrecompile.*' || exit 1
  rm -f "$cache"/*.lock
  du -sh "$cache"
  exit 0
fi

gpu_env check "$tests"
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"

status=0
step() { echo; echo "=== $*"; }

step nvidia-smi
nvidia-smi 2>&1 | tee "$out/nvidia-smi.txt" || status=1

step evodispatch env
"$bin" env 2>&1 | tee "$out/env.txt" || status=1

step "GPU tests (precompile check first, then everything)"
{
  "$tests" --gtest_filter='GpuPrecompile.*' &&
    "$tests" --gtest_filter='-GpuPrecompile.*' --gtest_output="json:$out/gpu-tests.json"
} 2>&1 | tee "$out/gpu-tests.log" |
  awk '/Failure/ { n = 6 } n > 0 { print; n--; next } /^\[(timing|precompile)\]|FAILED|PASSED|SKIPPED \]|tests? ran/'
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "bench fa3 on paper-table1 on cuda:0"
"$bin" bench --device cuda:0 --workload paper-table1 --policy fa3 --json --db "$db" \
  >"$out/bench-paper-table1.json" 2> >(tee "$out/bench.log" >&2) || status=1
# The same again as a table: every row is reused from the database, nothing is measured.
"$bin" bench --device cuda:0 --workload paper-table1 --policy fa3 --db "$db" 2>>"$out/bench.log" || status=1
cp "$db" "$out/evodispatch.db" 2>/dev/null || true

rm -rf "$work_cache"
step "gpu-check: $([ $status -eq 0 ] && echo passed || echo FAILED) (logs in $out)"
exit $status
