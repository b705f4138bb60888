#!/usr/bin/env python3
"""A fresh sample of fp8 caches for issue 18's fp8 target: from the shapes of a domain drawn
with dtype "fp8" (`evodispatch decide --json` over it, one JSON object per line), those whose
16-bit cache is between --min-mb and --max-mb, --count of them at random (--seed), each
followed by its 16-bit twin, as a workload on standard output.

    fp8_sample.py decisions.jsonl [--count 20] [--seed 1] [--min-mb 256] [--max-mb 3000]

The twins are what fp8_twins.py pairs (the query dtype as the cache's), so a bench over the
workload gives the fp8 / 16-bit ratio of every shape.
"""
import argparse
import json
import os
import random
import sys

from fp8_twins import twin_of
from shapes import kv_bytes

SHAPE_FIELDS = ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim", "dtype", "page_size", "causal",
                "q_dtype")


def read_shapes(path):
    shapes = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                shape = {k: d[k] for k in SHAPE_FIELDS if k in d}
                kv_bytes(shape)
            except KeyError as e:
                sys.exit("%s:%d: not a shape of `evodispatch decide --json` (no field %s)" % (path, n, e))
            except (ValueError, TypeError) as e:
                sys.exit("%s:%d: not a shape of `evodispatch decide --json` (%s)" % (path, n, e))
            shapes.append(shape)
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("decisions")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-mb", type=float, default=256)
    ap.add_argument("--max-mb", type=float, default=3000)
    args = ap.parse_args()
    fp8 = [s for s in read_shapes(args.decisions) if s["dtype"] == "fp8"]
    inside = [s for s in fp8 if args.min_mb * 1e6 < kv_bytes(twin_of(s)) <= args.max_mb * 1e6]
    if not inside:
        sys.exit("%s: none of its %d fp8 shapes has a 16-bit cache of %g to %g MB" %
                 (args.decisions, len(fp8), args.min_mb, args.max_mb))
    picked = random.Random(args.seed).sample(inside, min(args.count, len(inside)))
    shapes = []
    for s in sorted(picked, key=lambda s: kv_bytes(s)):
        shapes += [s, twin_of(s)]
    json.dump({"name": "fp8-sample",
               "description": "%d fp8 caches of %g to %g MB in 16-bit drawn at random (seed %d) among %d of %s, "
                              "each followed by its 16-bit twin" %
                              (len(picked), args.min_mb, args.max_mb, args.seed, len(inside), os.path.basename(args.decisions)),
               "shapes": shapes}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
