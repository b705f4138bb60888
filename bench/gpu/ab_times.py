#!/usr/bin/env python3
"""Compares two arms of `evodispatch bench --json` runs over the same shapes and decisions
(each arm's runs interleaved with the other's): the best time per (shape, decision) over an
arm's runs, new / base, geomean per group (dtype, head dim, paged), then the shapes that
moved most.

    ab_times.py --new a1.json a2.json --base b1.json b2.json [--label new=items --label base=strided]
"""
import argparse
import json
import math
import sys

from shapes import describe


def best_times(paths):
    best = {}
    for path in paths:
        with open(path) as f:
            rows = json.load(f)["rows"]
        for r in rows:
            if "median_us" not in r:
                continue
            k = json.dumps({"shape": r["shape"], "decision": r.get("decision")}, sort_keys=True)
            best[k] = min(best.get(k, math.inf), r["median_us"])
    return best


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--show", type=int, default=8, help="shapes shown at each end")
    args = ap.parse_args()
    new, base = best_times(args.new), best_times(args.base)
    both = [k for k in new if k in base]
    if not both:
        sys.exit("ab_times: no (shape, decision) measured in both arms")
    groups, moved = {}, []
    for k in both:
        s = json.loads(k)["shape"]
        ratio = new[k] / base[k]
        g = "%s D=%d%s" % (s["dtype"], s["head_dim"], " paged" if s.get("page_size", 0) else "")
        groups.setdefault(g, []).append(ratio)
        moved.append((ratio, describe(s), new[k], base[k]))
    print("| group | shapes | new / base, geomean | min | max |\n| --- | --- | --- | --- | --- |")
    for g in sorted(groups):
        v = groups[g]
        print("| %s | %d | %.3f | %.3f | %.3f |" % (g, len(v), geomean(v), min(v), max(v)))
    print("| all | %d | %.3f | | |" % (len(both), geomean([m[0] for m in moved])))
    moved.sort()
    ends = moved if len(moved) <= 2 * args.show else moved[:args.show] + moved[-args.show:]
    print("\n| shape | new / base | new µs | base µs |\n| --- | --- | --- | --- |")
    for ratio, d, n, b in ends:
        print("| %s | %.3f | %.2f | %.2f |" % (d, ratio, n, b))


if __name__ == "__main__":
    main()
