#!/usr/bin/env bash
# Installs, builds and runs the main job: the seq-aware policy against fa3 on
# paper-safety-160, on the first GPU or, without one, on the H100 SXM simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec "${BUILD_DIR:-build}/evodispatch" bench --policy seq-aware --baseline fa3 --workload paper-safety-160 "$@"
