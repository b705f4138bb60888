#!/usr/bin/env python3
"""Compares two arms of `evodispatch bench --json` runs over the same shapes and decisions
(each arm's runs interleaved with the other's): the best time per (shape, decision) over an
arm's runs, new / base, geomean per group (dtype, head dim, paged), then the shapes that
moved most. With --per-shape, the best time per shape over its decisions: two builds' oracle
runs, whose best decisions may differ, or the built-in kernels against FA3 (--names ours,FA3).
With --over F, every shape whose ratio is over 1 + F is listed too, and counted.

    ab_times.py --new a1.json a2.json --base b1.json b2.json [--per-shape] [--names NEW,BASE] [--over F]
"""
import argparse
import json
import math
import sys

from shapes import describe


def best_times(paths, per_shape):
    best = {}
    for path in paths:
        try:
            with open(path) as f:
                rows = json.load(f)["rows"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit("ab_times: %s: not the JSON of `evodispatch bench --json` (%s); see the run's log" % (path, e))
        for r in rows:
            if "median_us" not in r:
                continue
            k = json.dumps({"shape": r["shape"], "decision": None if per_shape else r.get("decision")}, sort_keys=True)
            best[k] = min(best.get(k, math.inf), r["median_us"])
    return best


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--show", type=int, default=8, help="shapes shown at each end")
    ap.add_argument("--per-shape", action="store_true", help="the best time per shape over its decisions")
    ap.add_argument("--names", default="new,base", help="the two arms' names in the tables: NEW,BASE")
    ap.add_argument("--over", type=float, help="list and count the shapes whose ratio is over 1 + OVER")
    args = ap.parse_args()
    names = args.names.split(",")
    if len(names) != 2 or not all(names):
        sys.exit("ab_times: --names %r: expected two names, NEW,BASE" % args.names)
    ratio_name = "%s / %s" % tuple(names)
    new, base = best_times(args.new, args.per_shape), best_times(args.base, args.per_shape)
    both = [k for k in new if k in base]
    if not both:
        sys.exit("ab_times: no %s measured in both arms" % ("shape" if args.per_shape else "(shape, decision)"))
    groups, moved = {}, []
    for k in both:
        s = json.loads(k)["shape"]
        ratio = new[k] / base[k]
        g = "%s D=%d%s" % (s["dtype"], s["head_dim"], " paged" if s.get("page_size", 0) else "")
        groups.setdefault(g, []).append(ratio)
        moved.append((ratio, describe(s), new[k], base[k]))
    print("| group | shapes | %s, geomean | min | max |\n| --- | --- | --- | --- | --- |" % ratio_name)
    for g in sorted(groups):
        v = groups[g]
        print("| %s | %d | %.3f | %.3f | %.3f |" % (g, len(v), geomean(v), min(v), max(v)))
    print("| all | %d | %.3f | | |" % (len(both), geomean([m[0] for m in moved])))
    moved.sort()
    shown = moved if len(moved) <= 2 * args.show else moved[:args.show] + moved[-args.show:]
    if args.over is not None:
        over = [m for m in moved if m[0] > 1 + args.over]
        print("| %s over %g | %d of %d | | |" % (ratio_name, 1 + args.over, len(over), len(moved)))
        shown = sorted(set(shown) | set(over))
    print("\n| shape | %s | %s µs | %s µs |\n| --- | --- | --- | --- |" % (ratio_name, names[0], names[1]))
    for ratio, d, n, b in shown:
        print("| %s | %.3f | %.2f | %.2f |" % (d, ratio, n, b))


if __name__ == "__main__":
    main()
