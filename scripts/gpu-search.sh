#!/usr/bin/env bash
# The search of issue 4 and the regression matrix of issue 5 on a real GPU, run ON a GPU
# machine over a tree that carries build-gpu/ (see scripts/gpu-check.sh for how it is
# built and precompiled here). Builds nothing.
#
#   bash scripts/gpu-search.sh search            # search --config gpu-safety-160 on cuda:0
#   CONFIG=gpu-models-decode bash scripts/gpu-search.sh search   # another shipped config (or a file)
#   RESUME=1 bash scripts/gpu-search.sh search   # continue the newest unfinished search
#   SEED=2 DB=earlier.db bash scripts/gpu-search.sh search   # another run seed over the stored measurements
#   bash scripts/gpu-search.sh regress DIR       # regress DIR/heuristic.json against fa3
#
# DB=earlier.db starts from an earlier database (copied, never written in place): its
# measurements are reused and, with RESUME=1, its interrupted search goes on. The search is
# stopped with SIGINT after $SECONDS_LIMIT (default 540): it commits what it has and exits
# 130, and a later call with RESUME=1 continues it with nothing lost. Writes into $OUT
# (default ./gpu-search-out): the verb's output and log, and evodispatch.db.xz (the whole
# database, compressed so that it fits what a device call returns; .gz without xz).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
gpu_env search
out=${OUT:-$root/gpu-search-out}
mode=${1:-search}
mkdir -p "$out"
[ -n "${DB:-}" ] && cp "$DB" "$db"

case "$mode" in
  search)
    if [ "${RESUME:-0}" = 1 ]; then args=(--resume); else args=(--config "${CONFIG:-gpu-safety-160}"); fi
    [ -n "${SEED:-}" ] && [ "${RESUME:-0}" != 1 ] && args+=(--seed "$SEED")
    # A fresh search reports its setup (the fa3 baseline and the oracle's decision space,
    # measured once and stored) and its progress on stderr; the summary goes to stdout.
    timeout -s INT "${SECONDS_LIMIT:-540}" "$bin" search "${args[@]}" --device cuda:0 --db "$db" \
      >"$out/search.txt" 2>"$out/search.log"
    status=$?
    tail -n 5 "$out/search.log"
    cat "$out/search.txt"
    echo "search exit $status (130: stopped by the time limit, resumable with RESUME=1)"
    ;;
  regress)
    dir=${2:?usage: gpu-search.sh regress DIR}
    "$bin" regress --heuristic "$dir/heuristic.json" --baseline fa3 --workload paper-safety-160 --device cuda:0 \
      --db "$db" --out "$out/regress.json" >"$out/regress.txt" 2>"$out/regress.log"
    status=$?
    cat "$out/regress.txt"
    tail -n 5 "$out/regress.log"
    echo "regress exit $status (1: a shape confirmed under the floor)"
    ;;
  *)
    echo "gpu-search: unknown mode $mode (search or regress)" >&2
    exit 2
    ;;
esac

if command -v xz >/dev/null; then xz -T0 -c "$db" >"$out/evodispatch.db.xz"; else gzip -c "$db" >"$out/evodispatch.db.gz"; fi
ls -l "$out"/evodispatch.db.*
rm -rf "$work_cache"
exit $status
