#!/usr/bin/env bash
# Installs the Debian packages evodispatch builds against, and nothing else.
# Idempotent and quiet: prints nothing when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  liblua5.4-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3  # distill checks its Python export against the C++; the FA3 worker (tests too)
  chromium  # the report's browser test renders it headless
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit (NVRTC, static cudart) is not a Debian 12 package of the right
# version; it must already be installed (the CUDA 13 .run or NVIDIA's repository).
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: the CUDA toolkit (nvcc, NVRTC, cudart) was not found; install CUDA 12.4+ under /usr/local/cuda" >&2
  exit 1
fi
