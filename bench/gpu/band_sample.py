#!/usr/bin/env python3
"""Fresh shapes in bands of work items, to check a kernel rule on shapes it was not fitted
to: from the shapes of a domain draw (`evodispatch decide --json` over it, one JSON object
per line), each distinct shape once, those of --head-dim with at most --max-rows packed query
rows per KV head, --max-keys keys and --min-gb to --max-gb of K/V cache, and not in any --exclude
workload; then --per-band of them at random (--seed) in each band of 16-row work items at
one split (requests x KV heads x m tiles), as a workload on standard output, fewest items
first.

    band_sample.py decisions.jsonl --head-dim 128 --bands 133-264,265-396 [--per-band 8]
        [--seed 1] [--max-rows 16] [--max-keys N] [--min-gb G] [--max-gb G] [--page-size P]
        [--exclude W.json ...] [--name NAME]

One random stream serves the bands in the order given, so a draw is reproducible from its
arguments. --page-size gives every shape that page size (0: contiguous, as drawn).
"""
import argparse
import json
import random
import sys

from fp8_sample import read_shapes
from shapes import kv_bytes

KEY_FIELDS = ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "q_dtype")


def key(shape):
    return tuple(shape.get(f) for f in KEY_FIELDS)


def rows_per_group(shape):
    return shape["h_q"] // shape["h_kv"] * shape.get("seqlen_q", 1)


def items(shape):
    return shape["batch"] * shape["h_kv"] * -(-rows_per_group(shape) // 16)


def parse_bands(text):
    bands = []
    for part in text.split(","):
        try:
            lo, hi = (int(x) for x in part.split("-"))
        except ValueError:
            sys.exit("band_sample: --bands: \"%s\" is not LOW-HIGH (items, e.g. 133-264)" % part)
        if lo < 1 or hi < lo:
            sys.exit("band_sample: --bands: \"%s\" is empty or below 1 item" % part)
        bands.append((lo, hi))
    return bands


def excluded_keys(paths):
    keys = set()
    for path in paths:
        try:
            with open(path) as f:
                keys |= {key(s) for s in json.load(f)["shapes"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit("band_sample: --exclude %s: not a workload with \"shapes\" (%s)" % (path, e))
    return keys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("decisions")
    ap.add_argument("--head-dim", type=int, required=True)
    ap.add_argument("--bands", required=True)
    ap.add_argument("--per-band", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-rows", type=int, default=16)
    ap.add_argument("--max-keys", type=int)
    ap.add_argument("--min-gb", type=float)
    ap.add_argument("--max-gb", type=float)
    ap.add_argument("--page-size", type=int, default=0)
    ap.add_argument("--exclude", nargs="*", default=[])
    ap.add_argument("--name", default="band-sample")
    args = ap.parse_args()
    bands = parse_bands(args.bands)
    skip = excluded_keys(args.exclude)
    pool, seen = [], set()
    for s in read_shapes(args.decisions):
        k = key(s)
        if k in seen or k in skip:
            continue
        seen.add(k)
        if s["head_dim"] != args.head_dim or rows_per_group(s) > args.max_rows:
            continue
        if args.max_keys is not None and s["seqlen_k"] > args.max_keys:
            continue
        if args.min_gb is not None and kv_bytes(s) < args.min_gb * 1e9:
            continue
        if args.max_gb is not None and kv_bytes(s) > args.max_gb * 1e9:
            continue
        pool.append(s)
    rng = random.Random(args.seed)
    picked = []
    for lo, hi in bands:
        inside = [s for s in pool if lo <= items(s) <= hi]
        if not inside:
            sys.exit("band_sample: %s: no shape of D = %d in the band of %d-%d items" %
                     (args.decisions, args.head_dim, lo, hi))
        rng.shuffle(inside)
        picked += inside[:args.per_band]
    picked.sort(key=items)
    for s in picked:
        s["page_size"] = args.page_size
    json.dump({"name": args.name,
               "description": "%d shapes of D = %d, at most %d query rows per KV head, %d at random (seed %d) in "
                              "each band of %s 16-row items at one split, from %s (band_sample.py)" %
                              (len(picked), args.head_dim, args.max_rows, args.per_band, args.seed, args.bands,
                               args.decisions.split("/")[-1]),
               "shapes": picked}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
