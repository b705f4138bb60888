#!/usr/bin/env python3
"""Whether a measurement depends on what was measured before it: one policy's times on the
same shapes, from two `evodispatch bench --json` runs in opposite orders (each with a fresh
database, so nothing is reused). Prints the spread of the per-shape ratio and the shapes
that moved most.

    order_check.py forward.json reversed.json [--top 8]
"""
import argparse
import json
import math
import sys


def times(path):
    with open(path) as f:
        rows = json.load(f)["rows"]
    return {json.dumps(r["shape"], sort_keys=True): r["median_us"] for r in rows if r.get("ok", True) and "median_us" in r}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("forward")
    ap.add_argument("reversed")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    a, b = times(args.forward), times(args.reversed)
    common = sorted(set(a) & set(b))
    if not common:
        sys.exit("order_check: %s and %s share no measured shape" % (args.forward, args.reversed))
    logs = [(math.log(a[k] / b[k]), k) for k in common]
    sd = math.sqrt(sum(x * x for x, _ in logs) / len(logs))
    print("| shapes | geomean forward / reversed | sd of the log ratio | over 3% | over 5% | largest |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("| %d | %.4f | %.4f | %d | %d | %.3fx |" % (
        len(logs), math.exp(sum(x for x, _ in logs) / len(logs)), sd, sum(abs(x) > math.log(1.03) for x, _ in logs),
        sum(abs(x) > math.log(1.05) for x, _ in logs), math.exp(max(abs(x) for x, _ in logs))))
    print()
    for x, k in sorted(logs, key=lambda t: -abs(t[0]))[:args.top]:
        s = json.loads(k)
        print("B=%d Lk=%d Hq=%d Hkv=%d D=%d: %.2f us forward, %.2f us reversed" % (
            s["batch"], s["seqlen_k"], s["h_q"], s["h_kv"], s["head_dim"], a[k], b[k]))


if __name__ == "__main__":
    main()
