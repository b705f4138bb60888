#!/usr/bin/env bash
# FlashAttention-3 as a measured backend, run ON the GPU machine over a tree that carries
# build-gpu/evodispatch and FA3's sources (a checkout, or third_party/fa3-src.tar.xz).
#
#   FA3_SRC=PATH bash scripts/gpu-fa3.sh [STEP...]     # writes into $OUT (default ./gpu-fa3-out)
#
# build   scripts/fa3-build.sh: stock FA3 into $FA3_DIR (default /tmp/fa3-stock), bf16,
#         forward only, head dims $HDIMS (default "128"); kept when $FA3_DIR holds that build.
# gpu-tests  the GPU tests of the FA3 worker (build-gpu/tests/test_evaluator_gpu, GpuFa3.*)
#         against the stock build.
# port    the fa3-kvcache policy against FA3 deciding for itself, shape by shape on
#         $WORKLOAD (default paper-safety-160): the split FA3's scheduler reports for each
#         (get_scheduler_metadata), and FA3's own call timed against the policy's explicit
#         decision, interleaved.
# verbs   bench (fa3-kvcache against fixed:1, interleaved), sweep splits, and the oracle of
#         $ORACLE_SPLITS on $WORKLOAD against fa3-kvcache, all on --device fa3:cuda:0.
# patch   builds FA3 again with $PATCH applied (evodispatch distill --fa3-source) into
#         /tmp/fa3-patched, reusing the stock objects, under its own torch op namespace
#         (fa3-build.sh --namespace flash_attn_3_evo); then the regression matrix on
#         $WORKLOAD: patched FA3 against stock FA3, both deciding for themselves, timed in
#         one process, interleaved, with stock FA3 told seq-aware's decisions beside them.
#         Each shape also checks that patched FA3 passes the numeric check and runs
#         $PROGRAM's (the winner's Lua; default distill-patch's $OUT/distill/program.lua)
#         decision.
# patch-domain  the same regression matrix on a fresh sample of $DOMAIN (default
#         models-decode): $DOMAIN_SAMPLES shapes (default 120), seed $DOMAIN_SEED (default
#         7), of the models whose head dim the build has ($HDIMS).
# fp8     FA3's e4m3 kernels against its bf16 ones: builds FA3 with --fp8 into $FA3_FP8_DIR
#         (default /tmp/fa3-fp8), takes the best of $ORACLE_SPLITS per shape of
#         $FP8_WORKLOAD (default bench/gpu/fp8-models.json) in each dtype, and prints the fp8 /
#         16-bit table (bench/gpu/fp8_twins.py). FA3 takes the queries in e4m3 too.
# vs-ours the built-in kernels against FA3 on a fresh sample of $DOMAIN (default
#         models-decode; models-paged runs FA3's paged kernels over the same kind of scattered
#         page table): $DOMAIN_SAMPLES shapes (default 120), seed $DOMAIN_SEED (default 7), of
#         the models whose head dim the build has ($HDIMS), or on $VS_WORKLOAD (a workload
#         file) when it is set. Each side's oracle (the best of
#         $ORACLE_SPLITS; ours packed, FA3 packed or not) in one run, compared shape by shape
#         (bench/gpu/ab_times.py: ours / FA3 per group, and every shape over 1.02).
# search  search --config $CONFIG (default gpu-fa3-safety-160) on fa3:cuda:0, stopped after
#         $SEARCH_SECONDS (default 360) with SIGINT: resumable, nothing lost (RESUME=1 with
#         DB= the database it returned goes on with the newest unfinished search).
# search-domain  the same with $CONFIG (default gpu-fa3-models-decode) over a sample of
#         $DOMAIN's models whose head dim the build has: 343 shapes, seed 1.
# distill-patch  distill --run $RUN of the database into $OUT/distill, with fa3.patch
#         against the FA3 sources ($FA3_SRC); then PATCH=$OUT/distill/fa3.patch for patch.
# With no STEP: build port verbs. Everything lands in $OUT/evodispatch.db.xz too; DB=FILE
# (.db or .db.xz) starts from an earlier database, copied.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
gpu_env fa3
out=${OUT:-$root/gpu-fa3-out}
mkdir -p "$out"
fa3=${FA3_DIR:-/tmp/fa3-stock}
src=${FA3_SRC:-third_party/fa3-src.tar.xz}
workload=${WORKLOAD:-paper-safety-160}
oracle_splits=${ORACLE_SPLITS:-1,2,3,4,6,8,12,16,24,32}
status=0
step() { echo; echo "=== $* ($(date +%T))"; }
evo() { "$bin" "$@" --device fa3:cuda:0 --db "$db"; }
# DB: an earlier run's database, to reuse its measurements (copied, never written in place).
[ -n "${DB:-}" ] && { case $DB in *.xz) xz -dc "$DB" >"$db" ;; *) cp "$DB" "$db" ;; esac; }
# The database comes back whatever step stops the script.
save_db() {
  [ -f "$db" ] && { xz -T0 -c "$db" >"$out/evodispatch.db.xz" 2>/dev/null || cp "$db" "$out/evodispatch.db"; }
  rm -rf "$work_cache"
}
trap save_db EXIT
steps=("$@")
((${#steps[@]})) || steps=(build port verbs)

# A DIR that already holds this build (same sources, head dims, patch) is kept by fa3-build.sh;
# one built from another patch or other head dims is rebuilt.
build_fa3() {  # DIR [fa3-build.sh options...]
  local dir=$1
  shift
  bash scripts/fa3-build.sh "$src" "$dir" --hdims "${HDIMS:-128}" "$@" >"$out/$(basename "$dir")-build.log" 2>&1 ||
    { tail -n 40 "$out/$(basename "$dir")-build.log"; return 1; }
  tail -n 3 "$out/$(basename "$dir")-build.log"
}

# built_domain SEED SAMPLES FILE: a workload drawing SAMPLES shapes (seed SEED) of $DOMAIN's
# models whose head dim the FA3 build has ($HDIMS).
built_domain() {
  python3 - "evaluator/workloads/${DOMAIN:-models-decode}.json" "$3" "${HDIMS:-128}" "$2" "$1" <<'EOF'
import json, sys
src, dst, hdims, samples, seed = sys.argv[1:6]
w = json.load(open(src))
d = w["domain"]
d["models"] = [m for m in d["models"] if str(m["head_dim"]) in hdims.split()]
d["samples"], d["seed"] = int(samples), int(seed)
w["name"] = "%s-seed%s-d%s" % (w["name"], seed, "-".join(hdims.split()))
w["description"] = "A sample of %s (seed %s) over its models of head dim %s." % (src, seed, hdims)
w["shapes"] = []
json.dump(w, open(dst, "w"), indent=1)
EOF
}

# fa3_search CONFIG TAG: search --config CONFIG (or --resume with RESUME=1) on fa3:cuda:0,
# stopped with SIGINT after $SEARCH_SECONDS; the summary in $out/TAG.txt, progress in TAG.log.
fa3_search() {
  local config=$1 tag=$2 args
  export EVODISPATCH_FA3_PATH=$fa3/hopper
  step "search --config $config on fa3:cuda:0"
  if [ "${RESUME:-0}" = 1 ]; then args=(--resume); else args=(--config "$config"); fi
  timeout -s INT "${SEARCH_SECONDS:-360}" "$bin" search "${args[@]}" --device fa3:cuda:0 --db "$db" \
    >"$out/$tag.txt" 2>"$out/$tag.log"
  echo "search exit $? (130: stopped by the time limit, resumable with RESUME=1)"
  tail -n 3 "$out/$tag.log"
  cat "$out/$tag.txt"
}

# patch_regress WORKLOAD TAG: patched FA3 (/tmp/fa3-patched) against stock FA3 on WORKLOAD,
# both deciding, in one process; seq-aware beside; rows in $out/TAG-regress.jsonl.
patch_regress() {
  local w=$1 tag=$2
  step "patched FA3 against stock FA3 on $w, both deciding, one process (seq-aware beside)"
  local program=${PROGRAM:-$out/distill/program.lua}
  [ -f "$program" ] || { echo "gpu-fa3: no program $program: PROGRAM=winner.lua, or distill-patch first" >&2; return 1; }
  "$bin" decide --policy "$program" --workload "$w" --device cuda:0 --json \
    >"$out/$tag-decide.jsonl" || return 1
  "$bin" decide --policy seq-aware --workload "$w" --device cuda:0 --json >"$out/$tag-seq-aware.jsonl" || return 1
  python3 evaluator/fa3/fa3_worker.py --regress "$out/$tag-decide.jsonl" --stock "$fa3/hopper" \
    --patched /tmp/fa3-patched/hopper --beside "seq-aware=$out/$tag-seq-aware.jsonl" \
    >"$out/$tag-regress.jsonl" 2>"$out/$tag-regress.log"
  local rc=$?
  tail -n 1 "$out/$tag-regress.jsonl"
  tail -n 60 "$out/$tag-regress.log"  # the shapes whose split changed, failures, the summary
  return $rc
}

for s in "${steps[@]}"; do
  case $s in
    build)
      step "build stock FA3 into $fa3"
      build_fa3 "$fa3" || exit 1
      ;;
    gpu-tests)
      step "GpuFa3 tests against $fa3"
      EVODISPATCH_FA3_PATH=$fa3/hopper "$root/$build/tests/test_evaluator_gpu" --gtest_filter='GpuFa3.*' \
        >"$out/gpu-tests.txt" 2>&1 || status=1
      tail -n 4 "$out/gpu-tests.txt"
      ;;
    port)
      step "port check: fa3-kvcache against FA3 deciding, on $workload"
      export EVODISPATCH_FA3_PATH=$fa3/hopper
      "$bin" decide --policy fa3-kvcache --workload "$workload" --device cuda:0 --json >"$out/port-decisions.jsonl" || status=1
      python3 evaluator/fa3/fa3_worker.py --port-check "$out/port-decisions.jsonl" >"$out/port-check.jsonl" 2>"$out/port-check.log" || status=1
      tail -n 1 "$out/port-check.jsonl"
      ;;
    verbs)
      export EVODISPATCH_FA3_PATH=$fa3/hopper
      step "bench fa3-kvcache against fixed:1 on paper-table1"
      evo bench --workload paper-table1 --policy fa3-kvcache --baseline fixed:1 --json >"$out/bench-table1.json" 2>"$out/bench-table1.log" || status=1
      tail -n 5 "$out/bench-table1.log"
      step "sweep splits on paper-table1's MQA row"
      evo sweep splits --shape batch=1,seqlen_k=512,h_q=64,h_kv=1 --splits 1..16 >"$out/sweep-splits.txt" 2>&1 || status=1
      tail -n 20 "$out/sweep-splits.txt"
      step "oracle of $oracle_splits on $workload against fa3-kvcache"
      timeout -s INT "${ORACLE_SECONDS:-300}" "$bin" bench --device fa3:cuda:0 --db "$db" --workload "$workload" \
        --policy oracle --oracle-splits "$oracle_splits" --oracle-pack on \
        --baseline fa3-kvcache --json >"$out/oracle.json" 2>"$out/oracle.log"
      echo "exit $? (130: stopped by the time limit, rows so far kept)"
      tail -n 8 "$out/oracle.log"
      ;;
    vs-ours)
      sample=${VS_WORKLOAD:-$out/${DOMAIN:-models-decode}-vs-ours.json}
      [ -n "${VS_WORKLOAD:-}" ] || built_domain "${DOMAIN_SEED:-7}" "${DOMAIN_SAMPLES:-120}" "$sample" || exit 1
      step "the built-in kernels against FA3 on $sample, best of $oracle_splits each"
      "$bin" bench --device cuda:0 --db "$db" --workload "$sample" --policy oracle --oracle-splits "$oracle_splits" \
        --oracle-pack on --json >"$out/vs-ours-ours.json" 2>"$out/vs-ours-ours.log" || status=1
      tail -n 1 "$out/vs-ours-ours.log"
      EVODISPATCH_FA3_PATH=$fa3/hopper evo bench --workload "$sample" --policy oracle --oracle-splits "$oracle_splits" \
        --oracle-pack both --json >"$out/vs-ours-fa3.json" 2>"$out/vs-ours-fa3.log" || status=1
      tail -n 1 "$out/vs-ours-fa3.log"
      python3 bench/gpu/ab_times.py --new "$out/vs-ours-ours.json" --base "$out/vs-ours-fa3.json" --per-shape \
        --names ours,FA3 --over 0.02 | tee "$out/vs-ours.md" || status=1
      ;;
    fp8)
      fa3_fp8=${FA3_FP8_DIR:-/tmp/fa3-fp8}
      step "build FA3 with its e4m3 kernels into $fa3_fp8"
      build_fa3 "$fa3_fp8" --fp8 || exit 1
      w=${FP8_WORKLOAD:-bench/gpu/fp8-models.json}
      step "oracle of $oracle_splits on $w, fp8 and 16-bit, on FA3"
      EVODISPATCH_FA3_PATH=$fa3_fp8/hopper timeout -s INT "${ORACLE_SECONDS:-300}" "$bin" bench --device fa3:cuda:0 \
        --db "$db" --workload "$w" --policy oracle --oracle-splits "$oracle_splits" \
        --oracle-pack on --json >"$out/fa3-fp8.json" 2>"$out/fa3-fp8.log"
      echo "exit $? (130: stopped by the time limit, rows so far kept)"
      tail -n 3 "$out/fa3-fp8.log"
      python3 bench/gpu/fp8_twins.py "$out/fa3-fp8.json" --label FA3 --out "$out/fa3-fp8-twins.json" |
        tee "$out/fa3-fp8.md" || status=1
      ;;
    search)
      fa3_search "${CONFIG:-search/configs/gpu-fa3-safety-160.json}" search
      ;;
    patch)
      step "build FA3 with ${PATCH:?PATCH=fa3.patch is required} into /tmp/fa3-patched"
      build_fa3 "$fa3" || exit 1
      build_fa3 /tmp/fa3-patched --patch "$PATCH" --reuse "$fa3" --namespace flash_attn_3_evo || exit 1
      patch_regress "$workload" patch || status=1
      ;;
    search-domain)
      built_domain 1 343 "$out/search-domain-workload.json" || exit 1
      python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["workload"] = sys.argv[2]; json.dump(c, open(sys.argv[3], "w"))' \
        "${CONFIG:-search/configs/gpu-fa3-models-decode.json}" "$out/search-domain-workload.json" "$out/search-domain.json"
      fa3_search "$out/search-domain.json" search-domain
      ;;
    distill-patch)
      step "distill run ${RUN:?RUN=N, the search run} into $out/distill with an FA3 patch"
      checkout=$src
      if [ -f "$src" ]; then
        rm -rf /tmp/fa3-src && mkdir -p /tmp/fa3-src && tar -xJf "$src" -C /tmp/fa3-src || exit 1
        checkout=$(dirname "$(dirname "$(find /tmp/fa3-src -maxdepth 3 -path '*/hopper/setup.py' -print -quit)")")
      fi
      commit=()  # a git checkout names its commit; the tarball carries FA3_COMMIT
      [ -f "$checkout/FA3_COMMIT" ] && commit=(--fa3-commit "$(cat "$checkout/FA3_COMMIT")")
      "$bin" distill --db "$db" --run "$RUN" --out "$out/distill" --fa3-source "$checkout" "${commit[@]}" \
        >"$out/distill.txt" 2>&1 || { cat "$out/distill.txt"; exit 1; }
      tail -n 5 "$out/distill.txt"
      ;;
    patch-domain)
      sample="$out/${DOMAIN:-models-decode}-fresh.json"
      built_domain "${DOMAIN_SEED:-7}" "${DOMAIN_SAMPLES:-120}" "$sample" || exit 1
      patch_regress "$sample" patch-domain || status=1
      ;;
    *) echo "gpu-fa3: unknown step $s (build, gpu-tests, port, verbs, vs-ours, fp8, search, search-domain, distill-patch, patch, patch-domain)" >&2; exit 2 ;;
  esac
done

step "gpu-fa3: $([ $status -eq 0 ] && echo passed || echo FAILED) (results in $out)"
exit $status
