#!/usr/bin/env python3
"""Puts side by side the oracle's best time per shape under several decode tilings: the
`evodispatch bench --policy oracle --json` outputs of one workload, each run with its own
EVODISPATCH_DECODE_TILING (or none: spec_for's choice), optionally beside cuDNN's times
from an sdpa_compare.py report of the same shapes.

    compare_tilings.py --run spec_for=a.json --run m128n128w8x1s3=b.json [--cudnn report.json] --out t.json

Prints one markdown row per shape: each run's best time and decision, the best run, and
the best over cuDNN. A tiling that cannot run a shape (another head dim, too much shared
memory) shows its failed row as "-".
"""
import argparse
import json
import sys

from shapes import describe


def key(s):
    return json.dumps({k: s[k] for k in sorted(s)})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="LABEL=bench.json")
    ap.add_argument("--cudnn", help="sdpa_compare.py report JSON")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    runs, shapes = [], {}
    for spec in args.run:
        label, _, path = spec.partition("=")
        if not path:
            sys.exit("--run %r: expected LABEL=FILE" % spec)
        with open(path) as f:
            rows = json.load(f)["rows"]
        best = {}
        for r in rows:
            shapes.setdefault(key(r["shape"]), r["shape"])
            if r.get("ok", True) and "median_us" in r:
                best[key(r["shape"])] = (r["median_us"], r["decision"])
        runs.append((label, best))
    cudnn = {}
    if args.cudnn:
        with open(args.cudnn) as f:
            for e in json.load(f)["shapes"]:
                if "us" in e.get("cudnn", {}):
                    cudnn[key(e["shape"])] = e["cudnn"]["us"]

    print("| shape | " + " | ".join(label for label, _ in runs) + " | best | cuDNN | best / cuDNN |")
    print("| --- " * (len(runs) + 4) + "|")
    table = []
    for k, s in shapes.items():
        cells, times = [], {}
        for label, best in runs:
            if k in best:
                us, d = best[k]
                times[label] = us
                cells.append("%.2f (%d%s)" % (us, d["num_splits"], "" if d.get("pack_gqa", True) else " unpacked"))
            else:
                cells.append("-")
        win = min(times, key=times.get) if times else None
        c = cudnn.get(k)
        ratio = times[win] / c if win and c else None
        print("| %s | %s | %s | %s | %s |" % (describe(s), " | ".join(cells), win or "-", "%.2f" % c if c else "-",
                                             "%.3f" % ratio if ratio else "-"))
        table.append({"shape": s, "us": times, "best": win, "cudnn_us": c})
    with open(args.out, "w") as f:
        json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
