#!/usr/bin/env bash
# Builds, on this machine, the binaries that run on a GPU machine without Lua, SQLite
# or JSON installed: Lua and SQLite linked statically, cudart static, NVRTC from the
# CUDA toolkit there. Output: build-gpu/ (git-ignored; carry it to the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DEVO_STATIC_DEPS=ON -DEVO_BUILD_BENCH=OFF >/dev/null
cmake --build build-gpu -j "$(nproc)"
# Google Benchmark ships only as a shared library in Debian, so micro-benchmarks stay here.
du -sh build-gpu | sed 's/^/build-gpu: /'
