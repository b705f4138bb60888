#!/usr/bin/env bash
# The GPU benchmarks of issue 3, run ON a GPU machine over a tree that carries build-gpu/
# (see scripts/gpu-check.sh for how it is built and precompiled here). Builds nothing.
#
#   bash scripts/gpu-bench.sh            # writes into $OUT (default ./gpu-bench-out)
#
# 1. bench --policy oracle on bench/gpu/perf-shapes.json (splits 1..64, pack on/off) and
#    on cliff-8k (splits 1..32, packed: unpacked reads the KV 8 times): the best decision
#    per shape, measured;
# 2. bench/gpu/sdpa_compare.py: PyTorch SDPA (cuDNN and flash backends) on the same shapes,
#    same GPU, same protocol, printed side by side with the targets (report.md, report.json);
# 3. sweep batch on cliff-8k under fa3 and the U-curve of paper-table1's MQA row;
# 4. calibration data: bench --policy oracle on paper-safety-160 over a coarse decision
#    space, for `evodispatch calibrate` (stops after $CALIB_SECONDS, default 240, keeping
#    every row measured so far; 0 skips it: scripts/gpu-search.sh measures the same space).
# Everything lands in $OUT/evodispatch.db too.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
gpu_env bench
out=${OUT:-$root/gpu-bench-out}
mkdir -p "$out"
# DB: an earlier run's database, to reuse its measurements (copied, never written in place).
[ -n "${DB:-}" ] && cp "$DB" "$db"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }
evo() { "$bin" "$@" --device cuda:0 --db "$db"; }

step "oracle on the performance shapes"
evo bench --workload bench/gpu/perf-shapes.json --policy oracle --oracle-splits 1..64 --json \
  >"$out/oracle-perf.json" 2>"$out/oracle-perf.log" || status=1
step "oracle on cliff-8k"
evo bench --workload cliff-8k --policy oracle --oracle-splits 1..32 --oracle-pack on --json \
  >"$out/oracle-cliff-8k.json" 2>"$out/oracle-cliff-8k.log" || status=1

step "PyTorch SDPA on the same shapes"
python3 bench/gpu/sdpa_compare.py --ours "$out/oracle-perf.json" --ours "$out/oracle-cliff-8k.json" \
  --out "$out/report.json" 2>"$out/sdpa.log" | tee "$out/report.md" || status=1

step "sweep batch cliff-8k under fa3; sweep splits on paper-table1's MQA row"
evo sweep batch --workload cliff-8k --policy fa3 >"$out/sweep-batch-cliff-8k.txt" 2>&1 || status=1
evo sweep splits --shape batch=1,seqlen_k=512,h_q=64,h_kv=1 --splits 1..32 >"$out/sweep-splits-table1.txt" 2>&1 || status=1
tail -n 20 "$out/sweep-splits-table1.txt"

if [ "${CALIB_SECONDS:-240}" -gt 0 ]; then
  step "calibration data: oracle on paper-safety-160 (at most ${CALIB_SECONDS:-240} s)"
  # SIGINT: the CLI commits what it measured and exits 130.
  timeout -s INT "${CALIB_SECONDS:-240}" "$bin" bench --device cuda:0 --db "$db" --workload paper-safety-160 \
    --policy oracle --oracle-splits 1,2,3,4,6,8,12,16,24,32 --json >"$out/oracle-safety-160.json" 2>"$out/oracle-safety-160.log"
  echo "exit $? (130: stopped by the time limit, rows so far kept)"
  "$bin" bench --device cuda:0 --db "$db" --workload paper-safety-160 --policy fa3 --json \
    >"$out/fa3-safety-160.json" 2>"$out/fa3-safety-160.log" || status=1
fi

cp "$db" "$out/evodispatch.db" 2>/dev/null || true
rm -rf "$work_cache"
step "gpu-bench: $([ $status -eq 0 ] && echo passed || echo FAILED) (results in $out)"
exit $status
