#!/usr/bin/env bash
# The kernel benchmarks of issue 18 (the kernels against cuDNN, and the fp8 KV cache), run
# ON a GPU machine over a tree that carries build-gpu/ (see scripts/gpu-check.sh for how
# it is built and precompiled here). Builds nothing. One or more steps:
#
#   bash scripts/gpu-kernels.sh tests      # the GPU tests (every knob and fp8 against the reference)
#   bash scripts/gpu-kernels.sh fp8        # $FP8_WORKLOAD (bench/gpu/fp8-shapes.json): fp8 against 16-bit caches
#   bash scripts/gpu-kernels.sh fp8-edge   # bench/gpu/fp8-edge.json at $EDGE_SPLITS (8 12) splits: fixed cost and rate
#   bash scripts/gpu-kernels.sh tilings    # $TILINGS_WORKLOAD (bench/gpu/weak-shapes.json) under each tiling of $TILINGS
#   bash scripts/gpu-kernels.sh cudnn      # paper-safety-160 and cliff-8k against cuDNN
#   bash scripts/gpu-kernels.sh weak       # bench/gpu/{weak-shapes,packed-groups,long-requests,d64-shapes,many-items}.json against cuDNN
#   bash scripts/gpu-kernels.sh domain     # a fresh $DOMAIN sample ($SAMPLES, seed $SEED) against cuDNN
#                                            (DOMAIN: models-decode, models-paged or models-spec)
#   bash scripts/gpu-kernels.sh fp8-domain # $FP8_SAMPLES models-decode fp8 caches of 256 MB-3 GB (seed $SEED) against 16-bit
#   bash scripts/gpu-kernels.sh order      # that sample's fa3 times in its order and reversed: does one depend on the last?
#   bash scripts/gpu-kernels.sh grid       # $GRID_WORKLOAD (bench/gpu/grid-shapes.json): the grid rule against the strided grid
#   bash scripts/gpu-kernels.sh ab         # $AB_WORKLOAD ($AB_ROUNDS runs) under this build and $BASE_BIN, another
#                                            build's evodispatch (absolute, or from the repository root), interleaved;
#                                            $AB_NEW_ENV / $AB_BASE_ENV (VAR=value ...) set one arm's environment
#
# Every other step measures the oracle's best decision per shape (splits $SPLITS, pack $PACK:
# both) and times SDPA's cuDNN on the same shapes in the same run (bench/gpu/sdpa_compare.py). Writes
# into $OUT (default ./gpu-kernels-out): each step's bench JSON, its report (.md, .json) and
# evodispatch.db.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
gpu_paths
gpu_env kernels "$root/$build/tests/test_evaluator_gpu"
out=${OUT:-$root/gpu-kernels-out}
mkdir -p "$out"
[ -n "${DB:-}" ] && cp "$DB" "$db"
splits=${SPLITS:-1,2,3,4,6,8,12,16,24,32}
domain=${DOMAIN:-models-decode}
status=0
step() { echo; echo "=== $* ($(date +%T))"; }
oracle() {  # oracle WORKLOAD NAME [env...]: the best decision per shape, as JSON
  local workload=$1 name=$2
  shift 2
  env "$@" "$bin" bench --workload "$workload" --policy oracle --oracle-splits "$splits" --oracle-pack "${PACK:-both}" \
    --device cuda:0 --db "$db" --json >"$out/$name.json" 2>"$out/$name.log" || status=1
  tail -n 2 "$out/$name.log"
}
compare() {  # compare NAME JSON...: cuDNN beside the oracle, with issue 18's summary
  local name=$1
  shift
  local args=()
  for j in "$@"; do args+=(--ours "$j"); done
  python3 bench/gpu/sdpa_compare.py "${args[@]}" --backends cudnn --out "$out/$name.json" \
    2>"$out/$name.log" >"$out/$name.md" || status=1
  sed -n '/^| workload/,$p' "$out/$name.md"
}

domain_sample() {  # domain_sample FILE [SAMPLES DTYPE]: $domain, SAMPLES ($SAMPLES) shapes drawn with seed $SEED
  python3 - "${2:-${SAMPLES:-120}}" "${SEED:-18}" "${3:-bf16}" "$domain" >"$1" <<'EOF'
import json, sys
w = json.load(open("evaluator/workloads/%s.json" % sys.argv[4]))
w["name"] = sys.argv[4] + "-sample"
w["domain"]["samples"], w["domain"]["seed"], w["domain"]["dtype"] = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
json.dump(w, sys.stdout)
EOF
}

for mode in "$@"; do
  case "$mode" in
    tests)
      step "GPU tests"
      "$root/$build/tests/test_evaluator_gpu" --gtest_filter="${GTEST_FILTER:--GpuPrecompile.*}" \
        >"$out/gpu-tests.log" 2>&1 || status=1
      grep -E "FAILED|PASSED|tests? ran" "$out/gpu-tests.log" | tail -n 30
      ;;
    fp8)
      step "fp8 against 16-bit KV caches"
      oracle "${FP8_WORKLOAD:-bench/gpu/fp8-shapes.json}" oracle-fp8
      compare report-fp8 "$out/oracle-fp8.json"
      sed -n '/^| shape | 16-bit/,/^$/p' "$out/report-fp8.md"
      ;;
    fp8-edge)
      for n in ${EDGE_SPLITS:-8 12}; do
        step "fp8 and 16-bit caches over lengths at $n splits: fixed cost and streaming rate"
        "$bin" bench --workload bench/gpu/fp8-edge.json --policy "fixed:$n" --device cuda:0 --db "$db" \
          --json >"$out/fp8-edge-s$n.json" 2>"$out/fp8-edge-s$n.log" || status=1
        python3 bench/gpu/fp8_edge.py "$out/fp8-edge-s$n.json" --out "$out/fp8-edge-s$n-fit.json" |
          tee "$out/fp8-edge-s$n.md" || status=1
      done
      ;;
    tilings)
      workload=${TILINGS_WORKLOAD:-bench/gpu/weak-shapes.json}
      step "$workload under each tiling"
      oracle "$workload" tiling-spec_for
      compare report-tilings "$out/tiling-spec_for.json"
      runs=(--run "spec_for=$out/tiling-spec_for.json")
      for t in ${TILINGS:-m128n128w8x1s3 m64n128w4x1s3 m32n128w2x2s3 m16n64w1x4s3 m16n64w1x2s2 m32n64w2x2s3}; do
        oracle "$workload" "tiling-$t" EVODISPATCH_DECODE_TILING="$t"
        runs+=(--run "$t=$out/tiling-$t.json")
      done
      python3 bench/gpu/compare_tilings.py "${runs[@]}" --cudnn "$out/report-tilings.json" --out "$out/tilings.json" |
        tee "$out/tilings.md"
      ;;
    cudnn)
      step "paper-safety-160 and cliff-8k against cuDNN"
      oracle paper-safety-160 oracle-safety-160
      oracle cliff-8k oracle-cliff-8k
      compare report-cudnn "$out/oracle-safety-160.json" "$out/oracle-cliff-8k.json"
      ;;
    weak)
      step "the weak classes' shapes against cuDNN"
      oracle bench/gpu/weak-shapes.json oracle-weak
      oracle bench/gpu/packed-groups.json oracle-packed
      oracle bench/gpu/long-requests.json oracle-long
      oracle bench/gpu/d64-shapes.json oracle-d64
      oracle bench/gpu/many-items.json oracle-many
      compare report-weak "$out/oracle-weak.json" "$out/oracle-packed.json" "$out/oracle-long.json" "$out/oracle-d64.json" \
        "$out/oracle-many.json"
      ;;
    domain)
      step "a fresh $domain sample against cuDNN"
      domain_sample "$out/$domain-sample.json"
      oracle "$out/$domain-sample.json" oracle-domain
      compare report-domain "$out/oracle-domain.json"
      ;;
    fp8-domain)
      step "a fresh sample of fp8 model caches against their 16-bit twins"
      domain_sample "$out/fp8-domain.json" 400 fp8
      "$bin" decide --policy fa3 --workload "$out/fp8-domain.json" --json >"$out/fp8-domain.jsonl" || status=1
      python3 bench/gpu/fp8_sample.py "$out/fp8-domain.jsonl" --count "${FP8_SAMPLES:-20}" --seed "${SEED:-18}" \
        >"$out/fp8-sample.json" || status=1
      oracle "$out/fp8-sample.json" oracle-fp8-sample
      compare report-fp8-sample "$out/oracle-fp8-sample.json"
      sed -n '/^| shape | 16-bit/,/^$/p' "$out/report-fp8-sample.md"
      ;;
    order)
      step "fa3's decisions on a models-decode sample, in its order and reversed (fresh databases)"
      domain_sample "$out/order-sample.json"
      "$bin" decide --policy fa3 --workload "$out/order-sample.json" --json >"$out/order-decisions.jsonl" || status=1
      python3 - "$out/order-decisions.jsonl" "$out" <<'EOF'
import json, sys
keys = ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "page_size", "causal")
shapes = [{k: d[k] for k in keys if k in d} for d in map(json.loads, filter(str.strip, open(sys.argv[1])))]
for name, order in (("forward", shapes), ("reversed", shapes[::-1])):
    json.dump({"name": "order-" + name, "shapes": order}, open("%s/order-%s.json" % (sys.argv[2], name), "w"))
EOF
      for dir in forward reversed; do
        rm -f "$db-$dir"
        "$bin" bench --workload "$out/order-$dir.json" --policy fa3 --device cuda:0 --db "$db-$dir" --json \
          >"$out/fa3-$dir.json" 2>"$out/fa3-$dir.log" || status=1
      done
      python3 bench/gpu/order_check.py "$out/fa3-forward.json" "$out/fa3-reversed.json" | tee "$out/order.md"
      ;;
    grid)
      step "the decode grid of spec_for's rule against EVODISPATCH_DECODE_GRID=strided (fa3 decisions, interleaved)"
      workload=${GRID_WORKLOAD:-bench/gpu/grid-shapes.json}
      for round in 1 2; do
        for arm in rule strided; do
          grid=""; [ $arm = strided ] && grid=strided
          EVODISPATCH_DECODE_GRID=$grid "$bin" bench --workload "$workload" --policy fa3 --device cuda:0 --db "$db" \
            --remeasure --json >"$out/grid-$arm-$round.json" 2>"$out/grid-$arm-$round.log" || status=1
        done
      done
      python3 bench/gpu/ab_times.py --new "$out"/grid-rule-*.json --base "$out"/grid-strided-*.json | tee "$out/grid.md"
      ;;
    ab)
      # Each arm's binary serves its own measurements (EVODISPATCH_WORKER_BINARY) and
      # remeasures, so neither reads the other's rows nor an earlier round's.
      # AB_NEW_ENV / AB_BASE_ENV: VAR=value words for one arm (a forced knob); with either,
      # BASE_BIN defaults to this build.
      [ -n "${AB_NEW_ENV:-}${AB_BASE_ENV:-}" ] && BASE_BIN=${BASE_BIN:-$bin}
      [ -x "${BASE_BIN:-}" ] || { echo "gpu-kernels: ab needs BASE_BIN, an evodispatch binary of the build to compare with" >&2; exit 2; }
      [ -f "${AB_WORKLOAD:-}" ] || { echo "gpu-kernels: ab needs AB_WORKLOAD, a workload file" >&2; exit 2; }
      step "$AB_WORKLOAD: this build against $BASE_BIN, the oracle's best per shape, interleaved"
      for round in $(seq 1 "${AB_ROUNDS:-2}"); do
        for arm in new base; do
          arm_bin=$bin; arm_env=${AB_NEW_ENV:-}
          [ $arm = base ] && arm_bin=$(realpath "$BASE_BIN") && arm_env=${AB_BASE_ENV:-}
          # shellcheck disable=SC2086  # arm_env is VAR=value words
          env $arm_env EVODISPATCH_WORKER_BINARY=$arm_bin "$arm_bin" bench --workload "$AB_WORKLOAD" --policy oracle \
            --oracle-splits "$splits" --oracle-pack "${PACK:-both}" --device cuda:0 --db "${db%.db}-ab-$arm.db" --remeasure \
            --json >"$out/ab-$arm-$round.json" 2>"$out/ab-$arm-$round.log" || status=1
        done
      done
      rm -f "${db%.db}"-ab-{new,base}.db
      python3 bench/gpu/ab_times.py --per-shape --new "$out"/ab-new-*.json --base "$out"/ab-base-*.json | tee "$out/ab.md"
      ;;
    *) echo "gpu-kernels: unknown step $mode (tests, fp8, fp8-edge, tilings, cudnn, weak, domain, fp8-domain, order, grid, ab)" >&2; exit 2 ;;
  esac
done

[ -f "$db" ] && { xz -T0 -c "$db" >"$out/evodispatch.db.xz" 2>/dev/null || gzip -c "$db" >"$out/evodispatch.db.gz"; }
rm -rf "$work_cache"
step "gpu-kernels: $([ $status -eq 0 ] && echo passed || echo FAILED) (results in $out)"
exit $status
