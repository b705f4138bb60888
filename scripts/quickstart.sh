#!/usr/bin/env bash
# Installs, builds and runs the main job: a search for a better dispatch heuristic than
# FlashAttention-3's on paper-safety-160 (search/configs/quickstart.json), on the first
# GPU or, without one, on the calibrated H100 SXM simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${BUILD_DIR:-build}/evodispatch" search --config quickstart "$@"
