#!/usr/bin/env bash
# Times the decode and combine kernels of single decisions apart, under Nsight Compute, on
# the GPU machine (builds nothing; carries the build of scripts/build-gpu.sh like the other
# gpu-*.sh scripts). A bench measures the whole call; this says where its time goes: each
# kernel's duration, grid, registers and DRAM bytes (cold L2: ncu flushes the caches
# before every profiled launch, and clocks are left as they are).
#
#   bash scripts/gpu-profile.sh B:LK:HQ:HKV:SPLITS[,SPLITS...] ...
#   e.g. bash scripts/gpu-profile.sh 9:8192:64:8:1,4,11 16:8192:64:8:1,2,8,32
#
# bf16, D = 128, Lq = 1, contiguous KV, pack_gqa at its default (DIM, DTYPE, PAGE override).
# Writes $OUT/profile/<B>x<LK>_h<HQ>-<HKV>_s<SPLITS>.csv (ncu's raw rows) and
# $OUT/profile/summary.json, and prints a table; `gpu-profile.sh --summarize DIR` prints
# the table again from such a folder (here, no GPU needed). sm_active_*: the SMs' busy
# cycles (least busy, mean, busiest) over the kernel's elapsed cycles. With SASS=1, also
# where the decode kernel's warps waited, per SASS instruction (ncu's SourceCounters):
# <tag>.sass.csv, and bench/gpu/sass_stalls.py's summary of it in <tag>.stalls.md.
set -euo pipefail
cd "$(dirname "$0")/.."
summarize() {
  python3 - "$@" <<'EOF'
import csv, glob, io, json, os, sys
out, write_json = sys.argv[1], len(sys.argv) > 2
scale = {"ns": 1e-3, "us": 1, "ms": 1e3, "nsecond": 1e-3, "usecond": 1, "msecond": 1e3, "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3}
renamed = {"gpu__time_duration.sum": "us", "dram__bytes_read.sum": "read_MB", "dram__bytes_write.sum": "write_MB",
           "launch__grid_size": "grid", "launch__registers_per_thread": "regs",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_%"}
rows = []
for path in sorted(glob.glob(os.path.join(out, "*.csv"))):
    # ncu's rows are the quoted lines; the program's own output and ncu's notes are not.
    lines = [l for l in open(path) if l.startswith('"')]
    if not lines or not lines[0].startswith('"ID"'):
        continue
    kernels = {}
    for r in csv.DictReader(io.StringIO("".join(lines))):
        k = kernels.setdefault(r["ID"], {"case": os.path.basename(path)[:-4],
                                         "kernel": r["Kernel Name"].removeprefix("void ").split("(")[0].replace(" ", "")})
        name = renamed.get(r["Metric Name"], r["Metric Name"])
        try:
            k[name] = round(float(r["Metric Value"].replace(",", "")) * scale.get(r["Metric Unit"], 1), 3)
        except ValueError:  # a metric ncu could not collect ("n/a"): shown as it came
            k[name] = r["Metric Value"]
    for k in kernels.values():
        if isinstance(k.get("us"), float) and k["us"] > 0 and isinstance(k.get("read_MB", 0), float):
            k["read_TB/s"] = round(k.get("read_MB", 0) / k["us"], 3)  # MB per us
        for m in ("min", "avg", "max"):
            key = "sm__cycles_active." + m
            if isinstance(k.get(key), float) and isinstance(k.get("sm__cycles_elapsed.max"), float) and k["sm__cycles_elapsed.max"] > 0:
                k["sm_active_" + m + "_%"] = round(100 * k.pop(key) / k["sm__cycles_elapsed.max"], 1)
        k.pop("sm__cycles_elapsed.max", None)
        for c in ("grid", "regs"):
            if isinstance(k.get(c), float):
                k[c] = int(k[c])
        rows.append(k)
if write_json:
    json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=1)
cols = ["case", "kernel"] + sorted({c for r in rows for c in r} - {"case", "kernel"})
print("| " + " | ".join(cols) + " |")
print("|" + " --- |" * len(cols))
for r in rows:
    print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
EOF
}
if [ "${1:-}" = "--summarize" ]; then
  [ -d "${2:-}" ] || { echo "gpu-profile: --summarize needs a folder of ncu .csv files" >&2; exit 2; }
  summarize "$2"
  exit
fi
[ $# -gt 0 ] || { echo "usage: gpu-profile.sh B:LK:HQ:HKV:SPLITS[,SPLITS...] ... | --summarize DIR" >&2; exit 2; }
for spec in "$@"; do
  [[ $spec =~ ^[1-9][0-9]*:[1-9][0-9]*:[1-9][0-9]*:[1-9][0-9]*:[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    { echo "gpu-profile: '$spec' is not B:LK:HQ:HKV:SPLITS[,SPLITS...] (positive integers)" >&2; exit 2; }
done
. scripts/gpu-env.sh
gpu_env profile
out=${OUT:-/tmp/evo-out}/profile
mkdir -p "$out"
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[ -n "$ncu_bin" ] || { echo "gpu-profile: ncu (Nsight Compute) is not installed here" >&2; exit 1; }

metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__registers_per_thread
# How evenly the SMs are busy (min against max: a tail) and how busy DRAM is over the kernel.
metrics+=,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed${EXTRA_METRICS:+,$EXTRA_METRICS}
for spec in "$@"; do
  IFS=: read -r b lk hq hkv splits <<<"$spec"
  wl=$(mktemp /tmp/evo-profile-XXXXXX.json)
  cat >"$wl" <<EOF
{"name": "profile", "shapes": [{"batch": $b, "seqlen_q": 1, "seqlen_k": $lk, "h_q": $hq, "h_kv": $hkv,
  "head_dim": ${DIM:-128}, "dtype": "${DTYPE:-bf16}", "page_size": ${PAGE:-0}}]}
EOF
  for s in ${splits//,/ }; do
    tag="${b}x${lk}_h${hq}-${hkv}_s${s}"
    # The first decode (and combine) launches are the numeric check's, outside any graph.
    "$ncu_bin" --clock-control none --cache-control all --target-processes all --csv \
      -k regex:'decode_kernel|combine_kernel' -c 2 --metrics "$metrics" \
      "$bin" bench --device cuda:0 --workload "$wl" --policy "fixed:$s" --db "$db" --remeasure \
      >"$out/$tag.csv" 2>"$out/$tag.log" || echo "gpu-profile: $tag failed (see $tag.log)"
    if [ "${SASS:-0}" = 1 ]; then
      # A launch of the timing loop (-s 2: after the numeric check's), sampled every 32 cycles.
      "$ncu_bin" --clock-control none --cache-control all --target-processes all -k regex:decode_kernel -s 2 -c 1 \
        --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 -o "$out/$tag" -f \
        "$bin" bench --device cuda:0 --workload "$wl" --policy "fixed:$s" --db "$db" --remeasure \
        >"$out/$tag.sass.log" 2>&1 &&
        "$ncu_bin" --import "$out/$tag.ncu-rep" --page source --csv --print-source sass >"$out/$tag.sass.csv" &&
        python3 bench/gpu/sass_stalls.py "$out/$tag.sass.csv" >"$out/$tag.stalls.md" ||
        echo "gpu-profile: $tag's SASS profile failed (see $tag.sass.log)"
      rm -f "$out/$tag.ncu-rep"
    fi
  done
  rm -f "$wl"
done
rm -rf "$work_cache"
summarize "$out" --json
if [ "${SASS:-0}" = 1 ]; then cat "$out"/*.stalls.md 2>/dev/null; fi
