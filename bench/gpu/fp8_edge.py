#!/usr/bin/env python3
"""Splits each dtype's time per call into a streaming rate and a fixed cost: reads an
`evodispatch bench --policy fixed:N --json` output of a workload whose shapes form families
(same batch, heads and head dim, fp8 and 16-bit, several lengths), fits time = fixed +
KV bytes / rate per family and dtype over its three largest caches (where the grid is
streaming-bound), and prints the fit beside the fp8 / 16-bit ratio at every length.

    fp8_edge.py bench.json [--out fit.json]

With equal rates the ratio is (F8 + T/2) / (F16 + T) for T the 16-bit streaming time, so it
reaches 0.55 only where T > (F8 - 0.55 F16) / 0.05: the fixed costs, not the streams, set
where an fp8 cache first takes at most 0.55x of the 16-bit kernel's time.
"""
import argparse
import json
import sys

from shapes import kv_bytes


def fit(points):
    """Least squares of (MB, us) points: (fixed us, TB/s)."""
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    den = n * sxx - sx * sx
    if n < 2 or den <= 0:
        return None
    slope = (n * sxy - sx * sy) / den
    return (sy - slope * sx) / n, 1.0 / slope if slope > 0 else float("inf")


def families(rows):
    """{(B, Hq, Hkv, D): {dtype: [(Lk, MB, us)]}} from the bench rows that ran."""
    out = {}
    for r in rows:
        if "median_us" not in r or not r.get("ok", True):
            continue
        s = r["shape"]
        dt = "fp8" if s["dtype"] == "fp8" else "16-bit"
        fam = out.setdefault((s["batch"], s["h_q"], s["h_kv"], s["head_dim"]), {})
        fam.setdefault(dt, []).append((s["seqlen_k"], kv_bytes(s) / 1e6, r["median_us"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="evodispatch bench --json output")
    ap.add_argument("--out", help="write the fits and ratios as JSON")
    args = ap.parse_args()
    with open(args.bench) as f:
        bench = json.load(f)
    report = []
    print("| family | dtype | fixed cost | streaming rate | times (Lk: us) |")
    print("| --- | --- | --- | --- | --- |")
    for (b, hq, hkv, d), by_dtype in sorted(families(bench["rows"]).items()):
        name = "B=%d Hq=%d Hkv=%d D=%d" % (b, hq, hkv, d)
        entry = {"family": name, "fits": {}, "ratios": []}
        for dt, pts in sorted(by_dtype.items()):
            pts.sort()
            f = fit([(mb, us) for _, mb, us in pts[-3:]])
            times = ", ".join("%d: %.2f" % (lk, us) for lk, _, us in pts)
            if f is None:
                print("| %s | %s | - | - | %s |" % (name, dt, times))
                continue
            entry["fits"][dt] = {"fixed_us": f[0], "tb_per_s": f[1]}
            print("| %s | %s | %.2f us | %.3f TB/s | %s |" % (name, dt, f[0], f[1], times))
        fp8 = {lk: us for lk, _, us in by_dtype.get("fp8", [])}
        for lk, mb, us in sorted(by_dtype.get("16-bit", [])):
            if lk in fp8:
                entry["ratios"].append({"seqlen_k": lk, "kv_mb_16bit": mb, "ratio": fp8[lk] / us})
        report.append(entry)
    print()
    print("| family | 16-bit cache (MB): fp8 / 16-bit |")
    print("| --- | --- |")
    for e in report:
        print("| %s | %s |" % (e["family"], ", ".join("%.0f: %.3f" % (r["kv_mb_16bit"], r["ratio"]) for r in e["ratios"])))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"policy": bench.get("policy"), "families": report}, f, indent=1)
    if not report:
        sys.exit("no family with measured rows in " + args.bench)


if __name__ == "__main__":
    main()
