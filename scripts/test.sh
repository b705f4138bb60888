#!/usr/bin/env bash
# Installs, builds and runs the whole test suite. Tests labelled "gpu" skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
