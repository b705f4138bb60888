#!/usr/bin/env python3
"""Times PyTorch SDPA (flash and cuDNN backends) on the shapes evodispatch measured, on
the same GPU and with the same protocol (cold L2, CUDA-graph replay), and prints both
side by side with the issue-3 and issue-18 targets.

    sdpa_compare.py --ours bench-oracle-perf.json [--ours more.json ...] --out report.json
                    [--backends cudnn]

Issue 18's summary: per workload, the geomean of ours / cuDNN, the shapes where ours is
more than 2% slower, and the worst one; and for every fp8-cache row whose 16-bit twin
(the same shape with dtype = its q_dtype) was measured too, fp8 time / 16-bit time.

--ours: the JSON of `evodispatch bench --json` (one document with "rows"); every ok row
is a shape and our (best) decision's latency. 16-bit caches are timed with SDPA; fp8 ones
are reported as ours only. SDPA has no paged KV: a paged shape is timed on the contiguous
cache of the same shape (its entry says so), which costs SDPA no page-table reads. Several
query tokens (speculative decoding, Lq > 1) get the decode mask of evodispatch's contract,
aligned bottom-right: token i sees keys j <= Lk - Lq + i (torch's is_causal is top-left).

Protocol, as evodispatch's runner (DESIGN.md section 4): bf16/fp16 inputs N(0, 1); enough
input sets that their total exceeds twice the L2, each call of a captured graph reads the
next set; a graph replay lasts >= 200 us; 30 timed replays after 3 warm-up ones; the per
call time is replay time / calls, the median of the 30 is reported.

GQA goes through enable_gqa=True (K/V are not expanded). A backend that refuses a shape
is reported as such, with its reason, never replaced by another one.

SDPA writes the tensor it returns, and nothing else runs in the timed call. Reports before
the thirty-sixth session copied that tensor into a preallocated output (`o.copy_(...)`), a
second kernel per call that SDPA does not need: --copy-out times that protocol again, so
that the two can be compared in one run (docs/performance.md, "On an H200 (thirty-sixth session)").
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from fp8_twins import describe as describe_fp8
from fp8_twins import shape_key, target_checks, twin_pairs
from shapes import describe, kv_bytes

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
MIN_REPLAY_US = 200.0
REPLAYS = 30
WARMUP = 3
MAX_CALLS = 4096


def decode_mask(s):
    """The contract's causal mask for Lq query tokens at the end of Lk keys (None: no mask)."""
    Lq, Lk = s["seqlen_q"], s["seqlen_k"]
    if Lq == 1 or not s.get("causal", True):
        return None
    i = torch.arange(Lq, device="cuda").unsqueeze(1)
    j = torch.arange(Lk, device="cuda").unsqueeze(0)
    return j <= Lk - Lq + i


def time_graph(make_call, n_sets, stream):
    """Median per-call microseconds of graphs of calls rotating over n_sets input sets."""
    def capture(calls):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for i in range(calls):
                make_call(i % n_sets)
        return g

    def replay(g, n):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for a, b in zip(starts, stops):
            a.record(stream)
            g.replay()
            b.record(stream)
        torch.cuda.synchronize()
        return [1000.0 * a.elapsed_time(b) for a, b in zip(starts, stops)]

    with torch.cuda.stream(stream):
        for i in range(min(n_sets, 3)):  # eager warm-up: backend selection, workspace
            make_call(i)
        torch.cuda.synchronize()
        probe_calls = 8
        probe = capture(probe_calls)
        replay(probe, 2)
        one = max(0.05, statistics.median(replay(probe, 3)) / probe_calls)
        del probe
        calls = int(min(MAX_CALLS, max(n_sets, math.ceil(MIN_REPLAY_US / one))))
        g = capture(calls)
        replay(g, WARMUP)
        per_call = [t / calls for t in replay(g, REPLAYS)]
    return statistics.median(per_call), calls


def time_sdpa(s, backend, l2_bytes, stream, copy_out=False):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[s["dtype"]]
    B, Lq, Lk, Hq, Hkv, D = s["batch"], s["seqlen_q"], s["seqlen_k"], s["h_q"], s["h_kv"], s["head_dim"]
    set_bytes = 2 * (2 * B * Lq * Hq * D) + kv_bytes(s)
    free, _ = torch.cuda.mem_get_info()
    n_sets = int(min(MAX_CALLS, max(1, math.floor(2 * l2_bytes / set_bytes) + 1), max(1, 0.25 * free // set_bytes)))
    gen = torch.Generator(device="cuda").manual_seed(1234)
    sets = []
    for _ in range(n_sets):
        q = torch.randn(B, Hq, Lq, D, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(B, Hkv, Lk, D, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(B, Hkv, Lk, D, device="cuda", dtype=dtype, generator=gen)
        sets.append((q, k, v, torch.empty_like(q) if copy_out else None))
    gqa = Hq != Hkv
    mask = decode_mask(s)

    def call(i):
        q, k, v, o = sets[i]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        if copy_out:
            o.copy_(out)

    try:
        with sdpa_kernel([BACKENDS[backend]]):
            us, calls = time_graph(call, n_sets, stream)
        out = {"us": us, "calls_per_replay": calls, "sets": n_sets}
        if s.get("page_size", 0):
            out["layout"] = "contiguous"
        return out
    except Exception as e:  # a backend that refuses the shape: say why
        return {"error": str(e).splitlines()[0][:200] if str(e) else type(e).__name__}
    finally:
        del sets
        torch.cuda.empty_cache()


def cliff_steps(rows):
    """Consecutive batch sizes of otherwise equal shapes: the step beyond the batch's growth."""
    by_family = {}
    for r in rows:
        s = r["shape"]
        fam = (s["seqlen_q"], s["seqlen_k"], s["h_q"], s["h_kv"], s["head_dim"], s["dtype"])
        by_family.setdefault(fam, {})[s["batch"]] = r
    out = []
    for fam, by_b in by_family.items():
        for b in sorted(by_b):
            if b + 1 in by_b:
                t0, t1 = by_b[b]["median_us"], by_b[b + 1]["median_us"]
                out.append({"family": list(fam), "batch": b, "us": t0, "next_us": t1,
                            "step": (t1 / t0) / ((b + 1) / b) - 1.0})
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def cudnn_summary(report):
    """Issue 18: ours / cuDNN per workload and overall; prints the table, returns checks."""
    by_workload = {}
    for e in report["shapes"]:
        if "us" in e.get("cudnn", {}):
            by_workload.setdefault(e["workload"], []).append((e["ours_us"] / e["cudnn"]["us"], e))
    if not by_workload:
        return []
    print()
    print("| workload | shapes | ours / cuDNN (geomean) | > 1.02x | worst |")
    print("| --- | --- | --- | --- | --- |")
    everything = []
    for w, pairs in sorted(by_workload.items(), key=lambda kv: str(kv[0])):
        everything += pairs
        worst = max(pairs, key=lambda p: p[0])
        slow = [p for p in pairs if p[0] > 1.02]
        print("| %s | %d | %.3f | %d | %.3f (%s) |" % (w, len(pairs), geomean([p[0] for p in pairs]), len(slow),
                                                     worst[0], describe(worst[1]["shape"])))
        for r, e in sorted(slow, key=lambda p: -p[0]):
            print("|  | | | %.3f | %s: %.2f us, cuDNN %.2f us |" % (r, describe(e["shape"]), e["ours_us"], e["cudnn"]["us"]))
    g = geomean([p[0] for p in everything])
    slow = sum(1 for p in everything if p[0] > 1.02)
    report["cudnn_summary"] = {"geomean": g, "shapes": len(everything), "over_1_02": slow}
    return [("every shape compared: best decision no more than 2% slower than cuDNN", "%d of %d over" % (slow, len(everything)),
             slow == 0),
            ("geomean ours / cuDNN <= 0.85", "%.3f" % g, g <= 0.85)]


def fp8_summary(report):
    """fp8-cache rows against their 16-bit twins; prints the table, returns checks."""
    pairs = twin_pairs(report["shapes"], lambda e: e["ours_us"])
    if pairs:
        print()
        print("| shape | 16-bit KV | fp8 KV | fp8 TB/s | fp8 / 16-bit |")
        print("| --- | --- | --- | --- | --- |")
        for e, t, r in pairs:
            print("| %s | %.2f us | %.2f us | %.2f | %.3f |" % (describe_fp8(e["shape"]), t["ours_us"], e["ours_us"],
                                                              e["ours_tbps"], r))
    return target_checks(pairs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours", action="append", required=True, help="evodispatch bench --json output")
    ap.add_argument("--out", required=True, help="report JSON")
    ap.add_argument("--cliff-workload", default="cliff-8k", help="workload whose batch steps are checked")
    ap.add_argument("--backends", default="cudnn,flash", help="SDPA backends to time (cudnn, flash)")
    ap.add_argument("--copy-out", action="store_true",
                    help="copy SDPA's output into a preallocated tensor in each call (the protocol before session 36)")
    args = ap.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in BACKENDS:
            sys.exit("--backends: unknown backend %r (cudnn, flash)" % b)

    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 1024 * 1024)
    stream = torch.cuda.Stream()
    report = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "l2_bytes": l2, "sdpa_output": "copied" if args.copy_out else "own",
              "shapes": [], "cliff": []}
    seen = set()
    for path in args.ours:
        with open(path) as f:
            doc = json.load(f)
        rows = [r for r in doc["rows"] if "median_us" in r and r.get("ok", True)]
        if doc.get("workload") == args.cliff_workload:
            report["cliff"] = cliff_steps(rows)
            for step in report["cliff"]:
                step["workload"] = doc["workload"]
        for r in rows:
            s = r["shape"]
            if shape_key(s) in seen:
                continue
            seen.add(shape_key(s))
            entry = {"workload": doc.get("workload"), "shape": s, "decision": r["decision"], "ours_us": r["median_us"],
                     "kv_bytes": kv_bytes(s), "ours_tbps": kv_bytes(s) / (r["median_us"] * 1e-6) / 1e12}
            if s["dtype"] in ("bf16", "fp16"):
                for name in backends:
                    entry[name] = time_sdpa(s, name, l2, stream, args.copy_out)
            report["shapes"].append(entry)
            print("timed", describe(s), file=sys.stderr, flush=True)

    # The table (markdown, so it can go in the README as printed).
    print("device: %s (%d SMs), torch %s, cuDNN %s, cold L2, CUDA-graph replay, per call, SDPA's output %s" %
          (report["device"], report["sms"], report["torch"], report["cudnn"], report["sdpa_output"]))
    print()
    print("| shape | KV | evodispatch best (splits, pack) | evodispatch | KV TB/s | cuDNN | FA2 (SDPA) | ours / cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for e in report["shapes"]:
        d = e["decision"]
        def cell(name):
            x = e.get(name)
            if x is None:
                return "-"
            return "%.2f us" % x["us"] if "us" in x else "refused"
        ratio = "%.3f" % (e["ours_us"] / e["cudnn"]["us"]) if "us" in e.get("cudnn", {}) else "-"
        print("| %s | %.1f MB | %d, %s | %.2f us | %.2f | %s | %s | %s |" %
              (describe(e["shape"]), e["kv_bytes"] / 1e6, d["num_splits"], "on" if d.get("pack_gqa") else "off",
               e["ours_us"], e["ours_tbps"], cell("cudnn"), cell("flash"), ratio))
    # Targets of issue 3.
    checks = []
    for e in report["shapes"]:
        s = e["shape"]
        if (s["batch"], s["seqlen_k"], s["h_q"], s["h_kv"], s["seqlen_q"]) == (1, 512, 64, 1, 1) and "us" in e.get("cudnn", {}):
            r = e["ours_us"] / e["cudnn"]["us"]
            checks.append(("paper-table1 B=1 Lk=512 Hq=64 Hkv=1: ours / cuDNN <= 0.80", "%.3f" % r, r <= 0.80))
        if e["kv_bytes"] > 256 * 1024 * 1024:
            checks.append(("%s (KV %.0f MB): >= 2.95 TB/s" % (describe(s), e["kv_bytes"] / 1e6),
                           "%.2f TB/s" % e["ours_tbps"], e["ours_tbps"] >= 2.95))
    if report["cliff"]:
        worst = max(report["cliff"], key=lambda c: c["step"])
        checks.append(("%s: largest step beyond batch growth <= 5%%" % worst["workload"],
                       "%.1f%% at B=%d -> %d (%.1f -> %.1f us)" % (100 * worst["step"], worst["batch"], worst["batch"] + 1,
                                                                  worst["us"], worst["next_us"]),
                       worst["step"] <= 0.05))
    checks += cudnn_summary(report) + fp8_summary(report)
    print()
    print("| target | measured | met |")
    print("| --- | --- | --- |")
    for name, value, ok in checks:
        print("| %s | %s | %s |" % (name, value, "yes" if ok else "NO"))
    report["targets"] = [{"target": n, "measured": v, "met": ok} for n, v, ok in checks]
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
