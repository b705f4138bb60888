# Sourced by the GPU scripts (gpu-check.sh, gpu-bench.sh, gpu-search.sh) from the
# repository root of a tree that carries the build made by scripts/build-gpu.sh.

# root, build (BUILD_DIR, default build-gpu) and bin, the evodispatch binary in it.
gpu_paths() {
  root=$PWD
  build=${BUILD_DIR:-build-gpu}
  bin="$root/$build/evodispatch"
}

# gpu_env NAME [FILE...]: on the GPU machine, checks that bin and the FILEs are there,
# exports a writable copy of the carried cubin cache (the carried one may be read-only
# and the runner writes lock files beside its entries), the worker binary and CUDA's
# libraries, and sets db to a fresh scratch database /tmp/evo-gpu-NAME.db and
# work_cache to the cache copy (remove it when done). NAME also prefixes the messages.
gpu_env() {
  local name=$1 f
  shift
  gpu_paths
  for f in "$bin" "$@"; do
    [ -x "$f" ] || { echo "gpu-$name: $f is missing: run scripts/build-gpu.sh here first and carry $build" >&2; exit 1; }
  done
  work_cache=$(mktemp -d /tmp/evo-cubin-XXXXXX)
  [ -d "$root/$build/cubin-cache" ] && cp -r "$root/$build/cubin-cache"/. "$work_cache"/
  export EVODISPATCH_CACHE_DIR="$work_cache"
  export EVODISPATCH_WORKER_BINARY="$bin"
  export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  db=/tmp/evo-gpu-$name.db
  rm -f "$db" "$db-wal" "$db-shm"
}
