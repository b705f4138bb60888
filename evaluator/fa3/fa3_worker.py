"""evodispatch's FlashAttention-3 worker: the worker protocol of
evaluator/include/evodispatch/evaluator/worker.hpp, served over FA3's own Python interface
(flash_attn_interface.flash_attn_with_kvcache and get_scheduler_metadata).

`evodispatch ... --device fa3:cuda:N` starts it (the source is compiled into the binary and
run with `python3 -c`); it can also run from the repository, for the port check:

    python3 evaluator/fa3/fa3_worker.py --port-check DECISIONS.jsonl [--index N]
    python3 evaluator/fa3/fa3_worker.py --regress DECISIONS.jsonl --stock HOPPER --patched HOPPER
        [--beside LABEL=DECISIONS.jsonl] [--pairs N] [--floor X]

where DECISIONS.jsonl is `evodispatch decide --json` output: of the fa3-kvcache policy for
the port check; of the search's winner for the regression of a patched FA3 build against
stock (scripts/gpu-fa3.sh). The patched build must be built with
`scripts/fa3-build.sh --namespace NAME` so that both load in this one process.

A decision maps onto FA3's knobs: num_splits, pack_gqa and sm_margin of
flash_attn_with_kvcache, called as vLLM calls it (a contiguous or paged KV cache with
cache_seqlens). On that path FA3 takes num_splits as an upper bound: its scheduler
(hopper/flash_prepare_scheduler.cu) splits each request into at most that many parts and
fewer when the SMs are already full. Each row's plan records the split FA3 ran.

An fp8 cache (dtype "fp8") runs FA3's e4m3 kernels, which take q, k and v all in e4m3 with
descales per (request, KV head): the worker quantizes the queries (bf16 or fp16, as the
shape's q_dtype) per KV head's group, draws K/V descales as the built-in kernels' cases do,
and checks against the reference on the dequantized inputs with a tolerance for e4m3's
rounding of q and P. FA3 builds only with `scripts/fa3-build.sh --fp8` have those kernels.

The measuring protocol is the built-in one: graph replay of back-to-back calls, input sets
rotated to keep L2 cold, outputs poisoned with NaN before the checked call, a float32
reference, interleaved A/B. FA3 allocates its own output, so poisoning fills and frees a
block of the output's size just before the call; the caching allocator hands that block
to FA3's output (the plan says whether it did).

Environment: EVODISPATCH_FA3_PATH, a directory put first on sys.path (an FA3 build's
hopper/ folder); EVODISPATCH_FA3_BACKEND, a Python file whose make_backend(index, device,
hopper) replaces the torch backend (the tests' fake FA3).
"""

import hashlib
import importlib.util
import json
import math
import os
import sys

# This worker's own measuring-protocol number (worker.hpp): bump it when how a row is
# obtained changes, so that rows stored under the old number are not reused.
MEASURING_PROTOCOL = 1
MAX_CALLS_PER_GRAPH = 4096
SET_MEMORY_FRACTION = 0.25  # of free memory, at most, for the rotated input sets
PROBE_CALLS = 8
DTYPES = ("bf16", "fp16", "fp8")


class Refused(Exception):
    """A request the worker cannot serve: an error reply, not a failed row."""


class Unusable(Exception):
    """A sticky CUDA error: the process must end after replying."""


# ---- the contract's JSON ----------------------------------------------------------------

def _int(j, name, lo, default=None):
    v = j.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise Refused("%s: an integer is required, got %r" % (name, v))
    if v < lo:
        raise Refused("%s: must be >= %d, got %d" % (name, lo, v))
    return v


def parse_shape(j):
    if not isinstance(j, dict):
        raise Refused("shape: an object is required")
    s = {
        "batch": _int(j, "batch", 1, 1),
        "seqlen_q": _int(j, "seqlen_q", 1, 1),
        "seqlen_k": _int(j, "seqlen_k", 1),
        "h_q": _int(j, "h_q", 1),
        "h_kv": _int(j, "h_kv", 1, j.get("h_q")),
        "head_dim": _int(j, "head_dim", 8, 128),
        "dtype": j.get("dtype", "bf16"),
        "page_size": _int(j, "page_size", 0, 0),
        "causal": j.get("causal", True),
    }
    if s["dtype"] not in DTYPES:
        raise Refused("shape.dtype: one of %s, got %r" % (", ".join(DTYPES), s["dtype"]))
    q_dtype = j.get("q_dtype", "bf16")
    if q_dtype not in (("bf16", "fp16") if s["dtype"] == "fp8" else ("bf16",)):
        raise Refused("shape.q_dtype: %s, got %r" % ("bf16 or fp16 for an fp8 cache" if s["dtype"] == "fp8"
                                                       else "only an fp8 cache takes one", q_dtype))
    if q_dtype != "bf16":  # as the contract writes a shape: q_dtype only where it is not bf16
        s["q_dtype"] = q_dtype
    if s["h_q"] % s["h_kv"]:
        raise Refused("shape.h_q: must be a multiple of h_kv")
    if not isinstance(s["causal"], bool):
        raise Refused("shape.causal: true or false")
    return s


def parse_decision(j, shape, num_sms):
    """The decision resolved as the contract resolves it: pack_gqa defaults to qpk > 1."""
    if not isinstance(j, dict):
        raise Refused("decision: an object is required")
    d = {"num_splits": _int(j, "num_splits", 1), "sm_margin": _int(j, "sm_margin", 0, 0)}
    if d["num_splits"] > 256:
        raise Refused("decision.num_splits: must be in [1, 256], got %d" % d["num_splits"])
    if d["sm_margin"] > num_sms - 1:
        raise Refused("decision.sm_margin: must be in [0, %d], got %d" % (num_sms - 1, d["sm_margin"]))
    pack = j.get("pack_gqa")
    if pack is not None and not isinstance(pack, bool):
        raise Refused("decision.pack_gqa: true, false or absent")
    d["pack_gqa"] = pack if pack is not None else shape["h_q"] // shape["h_kv"] > 1
    return d


def parse_timing(j):
    j = j or {}
    t = {
        "l2": j.get("l2", "cold"),
        "min_replay_us": float(j.get("min_replay_us", 200)),
        "replays": int(j.get("replays", 30)),
        "warmup": int(j.get("warmup", 3)),
        "check": bool(j.get("check", True)),
    }
    if t["l2"] not in ("cold", "hot"):
        raise Refused('timing.l2: "cold" or "hot", got %r' % t["l2"])
    return t


def sample_stats(xs):
    """Median, p10 and p90, interpolating linearly between order statistics (as measurement.cpp)."""
    xs = sorted(xs)
    if not xs:
        return 0.0, 0.0, 0.0

    def q(p):
        pos = p * (len(xs) - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return q(0.5), q(0.1), q(0.9)


def interleaved(graphs, rounds, warmup=1):
    """Per-call times of each (graph, calls) over `rounds` rounds, after `warmup` replays of
    each; each round replays every graph once, starting from a different one each round."""
    times = [[] for _ in graphs]
    for _ in range(warmup):
        for g, n in graphs:
            g.replay()
    for r in range(rounds):
        for i in range(len(graphs)):
            k = (r + i) % len(graphs)
            g, n = graphs[k]
            times[k].append(g.replay() / n)
    return times


def output_tolerance(dtype):
    # FA3's fp8 path rounds q and P to e4m3 as well as the cache (its wgmma takes e4m3 on
    # both sides): two roundings of unit roundoff 2^-4 each, where the 16-bit dtypes round
    # P to 2^-8 (bf16) or 2^-11 (fp16).
    return {"fp16": 5e-3, "bf16": 1e-2, "fp8": 0.125}[dtype]


# ---- the worker -------------------------------------------------------------------------

class Worker:
    def __init__(self, spec, device, fingerprint, backend):
        self.spec = spec
        self.device = device
        self.fingerprint = fingerprint
        self.backend = backend
        self.kernel_build = "fa3:" + backend.build_identity()
        self.checked = {}  # (shape, decision) -> rel_error of the passed check

    def info(self):
        return {"spec": self.spec, "device": self.device, "fingerprint": self.fingerprint,
                "kernel_build": self.kernel_build, "measuring_protocol": MEASURING_PROTOCOL}

    def key(self, shape, decision, timing):
        return {"device": self.fingerprint, "kernel_build": self.kernel_build, "shape": shape,
                "decision": decision, "l2": timing["l2"], "measuring_protocol": MEASURING_PROTOCOL}

    def row(self, shape, decision, timing):
        return {"key": self.key(shape, decision, timing), "ok": False, "median_us": 0.0,
                "p10_us": 0.0, "p90_us": 0.0, "samples": 0, "plan": {}}

    def case(self, shape, seqlens, timed, timing):
        why = self.backend.unsupported(shape)
        if why:
            raise RowError("unsupported shape: " + why)
        set_bytes = self.backend.set_bytes(shape)
        free = self.backend.free_bytes()
        if set_bytes > 0.9 * free:
            raise RowError("one set of inputs needs %.2f GiB, %.2f GiB of GPU memory is free"
                           % (set_bytes / 2**30, free / 2**30))
        sets, note = 1, ""
        if timed and timing["l2"] == "cold":
            target = 2.0 * self.device["l2_bytes"]
            needed = int(math.floor(target / set_bytes)) + 1
            budget = max(1, int(SET_MEMORY_FRACTION * free / set_bytes))
            sets = min(needed, budget, MAX_CALLS_PER_GRAPH)
            if sets * set_bytes <= target:
                note = "cold L2 not reached: %d buffer sets of %d bytes" % (sets, set_bytes)
        c = self.backend.prepare(shape, seqlens, sets)
        return c, {"buffer_sets": sets, "set_bytes": set_bytes, "l2": timing["l2"],
                   "cold_l2_met": timing["l2"] == "cold" and not note, **({"note": note} if note else {})}

    def check(self, shape, decision, c, row):
        """Checks the decision once per (shape, decision); raises RowError when it fails."""
        k = json.dumps([shape, decision], sort_keys=True)
        if k in self.checked:
            row["rel_error"] = self.checked[k]
            return
        res = self.backend.check(c, knobs(decision))
        rel = res["rel_error"]
        row["rel_error"] = rel if math.isfinite(rel) else None
        row["plan"]["poisoned"] = res.get("poisoned", False)
        if res.get("bad_elements", 0):
            raise RowError("numeric check failed: %d NaN or infinite outputs (first at %d)"
                           % (res["bad_elements"], res.get("first_bad", -1)))
        if not rel < output_tolerance(shape["dtype"]):
            raise RowError("numeric check failed: rel_error %.3g >= %.3g"
                           % (rel, output_tolerance(shape["dtype"])))
        self.checked[k] = rel

    def calls_per_graph(self, c, decision, timing, sets):
        probe = self.backend.graph(c, knobs(decision), PROBE_CALLS)
        probe.replay()
        probe.replay()  # the first replays upload the graph
        one = max(0.05, sample_stats([probe.replay() for _ in range(3)])[0] / PROBE_CALLS)
        calls = int(math.ceil(timing["min_replay_us"] / one))
        if timing["l2"] == "cold":
            calls = max(calls, sets)
        return max(1, min(calls, MAX_CALLS_PER_GRAPH))

    def measure(self, req):
        shape = parse_shape(req.get("shape"))
        decision = parse_decision(req.get("decision"), shape, self.device["num_sms"])
        timing = parse_timing(req.get("timing"))
        row = self.row(shape, decision, timing)
        try:
            c, gpu = self.case(shape, req.get("seqlens"), timing["replays"] > 0, timing)
            row["plan"] = {"backend": "fa3", "fa3": knobs(decision), "fa3_splits": self.backend.splits_run(c, knobs(decision)),
                           **fa3_dtypes(shape)}
            if timing["check"]:
                self.check(shape, decision, c, row)
            if timing["replays"] > 0:
                calls = self.calls_per_graph(c, decision, timing, gpu["buffer_sets"])
                g = self.backend.graph(c, knobs(decision), calls)
                for _ in range(max(1, timing["warmup"])):
                    g.replay()
                per_call = [g.replay() / calls for _ in range(timing["replays"])]
                row["median_us"], row["p10_us"], row["p90_us"] = sample_stats(per_call)
                row["samples"] = len(per_call)
                row["plan"]["gpu"] = dict(gpu, calls_per_replay=calls)
            row["ok"] = True
        except RowError as e:
            row["error"] = str(e)
        except Unusable:
            raise
        except Exception as e:  # an FA3 refusal (RuntimeError) is a failed row
            self.backend.raise_if_sticky(e)
            row["error"] = "%s: %s" % (type(e).__name__, e)
        return row

    def compare(self, req):
        shape = parse_shape(req.get("shape"))
        ds = req.get("decisions")
        if not isinstance(ds, list) or len(ds) != 2:
            raise Refused("decisions: a list of two decisions is required")
        a, b = (parse_decision(d, shape, self.device["num_sms"]) for d in ds)
        timing = parse_timing(req.get("timing"))
        pairs = max(1, int(req.get("pairs", 30)))
        out = {"ok": False, "a": self.row(shape, a, timing), "b": self.row(shape, b, timing),
               "ratio": 0.0, "ratio_lo": 0.0, "ratio_hi": 0.0, "pairs": 0}
        try:
            c, gpu = self.case(shape, req.get("seqlens"), True, timing)
            graphs = []
            for side, d in (("a", a), ("b", b)):
                out[side]["plan"] = {"backend": "fa3", "fa3": knobs(d), "fa3_splits": self.backend.splits_run(c, knobs(d)),
                                    **fa3_dtypes(shape)}
                try:
                    if timing["check"]:
                        self.check(shape, d, c, out[side])
                except RowError as e:
                    raise RowError("%s: %s" % (side, e))
                calls = self.calls_per_graph(c, d, timing, gpu["buffer_sets"])
                graphs.append((self.backend.graph(c, knobs(d), calls), calls))
                out[side]["plan"]["gpu"] = dict(gpu, calls_per_replay=calls)
            ta, tb = interleaved(graphs, pairs, max(1, timing["warmup"]))  # A first on even pairs
            ratios = [x / y for x, y in zip(ta, tb)]
            for side, ts in (("a", ta), ("b", tb)):
                out[side]["median_us"], out[side]["p10_us"], out[side]["p90_us"] = sample_stats(ts)
                out[side]["samples"] = len(ts)
                out[side]["ok"] = True
            out["ratio"], out["ratio_lo"], out["ratio_hi"] = (sample_stats(ratios)[i] for i in (0, 1, 2))
            out["pairs"] = pairs
            out["ok"] = True
        except (RowError, Exception) as e:
            if isinstance(e, Unusable):
                raise
            if not isinstance(e, RowError):
                self.backend.raise_if_sticky(e)
            why = str(e) if isinstance(e, RowError) else "%s: %s" % (type(e).__name__, e)
            out["error"] = why
            for side in ("a", "b"):
                out[side]["ok"] = False
                out[side]["error"] = why
        return out

    def port_check(self, shape, decision, timing, pairs):
        """FA3 deciding for itself against `decision` (the fa3-kvcache policy's), interleaved,
        and the split FA3's scheduler reports for each."""
        c, _ = self.case(shape, None, True, timing)
        graphs = [(self.backend.graph(c, OWN, 64), 64), (self.backend.graph(c, knobs(decision), 64), 64)]
        own, policy = interleaved(graphs, pairs, warmup=0)
        med, lo, hi = sample_stats([x / y for x, y in zip(own, policy)])
        return {"fa3_splits": self.backend.splits_run(c, OWN),
                "policy_splits": self.backend.splits_run(c, knobs(decision)),
                "ratio_own_over_policy": med, "ratio_lo": lo, "ratio_hi": hi}


class RowError(Exception):
    """Why a measurement failed: the row carries it."""


OWN = {"num_splits": 0, "pack_gqa": None, "sm_margin": 0}  # FA3 decides for itself


def fa3_dtypes(shape):
    """What FA3 runs an fp8 cache with, for the row's plan: FA3 takes q, k and v of one dtype,
    so the queries go into e4m3 too (TorchFa3Backend.quantize_queries), and its output is bf16."""
    return {"fa3_dtypes": {"q": "e4m3", "kv": "e4m3", "out": "bf16"}} if shape["dtype"] == "fp8" else {}


def knobs(decision):
    return {"num_splits": decision["num_splits"], "pack_gqa": decision["pack_gqa"],
            "sm_margin": decision["sm_margin"]}


def serve(worker, lines, out):
    """Answers each request line in order; returns the exit status (worker.hpp)."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        rid = None
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise Refused("a request is a JSON object")
            rid = req.get("id")
            op = req.get("op")
            if op == "info":
                reply = {"id": rid, "ok": True, "info": worker.info()}
            elif op == "measure":
                reply = {"id": rid, "ok": True, "measurement": worker.measure(req)}
            elif op == "compare":
                reply = {"id": rid, "ok": True, "comparison": worker.compare(req)}
            else:
                raise Refused("unknown op %r (info, measure, compare)" % op)
        except Unusable as e:
            out.write(json.dumps({"id": rid, "ok": False, "error": str(e), "unusable": str(e)}) + "\n")
            out.flush()
            return 3
        except (Refused, RowError, ValueError, TypeError, KeyError) as e:
            reply = {"id": rid, "ok": False, "error": str(e)}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


# ---- the torch backend ------------------------------------------------------------------

class TorchFa3Backend:
    """FA3 through flash_attn_interface, with torch for buffers, graphs and the reference."""

    def __init__(self, index, hopper=None):
        import torch
        self.torch = torch
        self.hopper = hopper
        self.fa3 = import_fa3(hopper)
        self.dev = torch.device("cuda", index)
        torch.cuda.set_device(self.dev)
        self.stream = torch.cuda.Stream(self.dev)
        self.case_key = None
        self.case_data = None
        self.build_flags = fa3_build_flags(hopper)

    def build_identity(self):
        return fa3_build_identity(self.hopper)

    def unsupported(self, shape):
        return unsupported_by_build(self.build_flags, shape)

    def free_bytes(self):
        return self.torch.cuda.mem_get_info(self.dev)[0]

    def set_bytes(self, s):
        elem = 1 if s["dtype"] == "fp8" else 2  # fp8: q, k and v all in e4m3 (see prepare)
        q = s["batch"] * s["seqlen_q"] * s["h_q"] * s["head_dim"] * elem
        rows = s["batch"] * (-(-s["seqlen_k"] // s["page_size"]) * s["page_size"] if s["page_size"] else s["seqlen_k"])
        kv = 2 * rows * s["h_kv"] * s["head_dim"] * elem
        return q + kv

    def prepare(self, s, seqlens, sets):
        key = (json.dumps(s, sort_keys=True), json.dumps(seqlens), sets)
        if key == self.case_key:
            return self.case_data
        self.case_key = self.case_data = None
        self.torch.cuda.empty_cache()
        t = self.torch
        fp8 = s["dtype"] == "fp8"
        dt = t.float16 if s.get("q_dtype", s["dtype"]) == "fp16" else t.bfloat16
        g = t.Generator(device=self.dev).manual_seed(1234)
        B, Lq, Lk, Hq, Hkv, D, ps = (s["batch"], s["seqlen_q"], s["seqlen_k"], s["h_q"], s["h_kv"],
                                     s["head_dim"], s["page_size"])
        lens = seqlens if seqlens else [Lk] * B
        if len(lens) != B or any((not isinstance(x, int)) or x < 1 or x > Lk for x in lens):
            raise RowError("seqlens: %d lengths in [1, seqlen_k] are required" % B)
        cache_seqlens = t.tensor(lens, dtype=t.int32, device=self.dev)
        kv_dt = t.float8_e4m3fn if fp8 else dt
        inputs = []
        for _ in range(sets):
            q = t.randn(B, Lq, Hq, D, generator=g, device=self.dev, dtype=dt)
            if ps:
                pages = -(-Lk // ps)
                k = t.randn(B * pages, ps, Hkv, D, generator=g, device=self.dev, dtype=dt).to(kv_dt)
                v = t.randn(B * pages, ps, Hkv, D, generator=g, device=self.dev, dtype=dt).to(kv_dt)
                # Pages of a request are scattered, as a serving engine's allocator leaves them.
                table = t.randperm(B * pages, generator=g, device=self.dev).to(t.int32).view(B, pages)
            else:
                k = t.randn(B, Lk, Hkv, D, generator=g, device=self.dev, dtype=dt).to(kv_dt)
                v = t.randn(B, Lk, Hkv, D, generator=g, device=self.dev, dtype=dt).to(kv_dt)
                table = None
            descales = None
            if fp8:
                q, q_descale = self.quantize_queries(q, Hkv)
                # K and V descales per (request, KV head), as the built-in kernels' cases draw them.
                k_descale, v_descale = (t.exp2(t.rand(B, Hkv, generator=g, device=self.dev) * 2 - 1) for _ in "kv")
                descales = {"q_descale": q_descale, "k_descale": k_descale, "v_descale": v_descale}
            inputs.append((q, k, v, table, descales))
        self.case_key = key
        self.case_data = {"shape": s, "inputs": inputs, "cache_seqlens": cache_seqlens, "lens": lens, "ref": None,
                          "out_dtype": t.bfloat16 if fp8 else dt}
        return self.case_data

    def quantize_queries(self, q, h_kv):
        """FA3's fp8 path takes e4m3 queries with a descale per (request, KV head), as a serving
        engine hands them over: each KV head's query group scaled so that its largest |q| is
        e4m3's largest finite value, 448."""
        t = self.torch
        B, Lq, Hq, D = q.shape
        groups = q.float().view(B, Lq, h_kv, Hq // h_kv, D)
        amax = groups.abs().amax(dim=(1, 3, 4)).clamp_min(1e-12)  # [B, Hkv]
        descale = amax / 448.0
        q8 = (groups / descale[:, None, :, None, None]).view(B, Lq, Hq, D).to(t.float8_e4m3fn)
        return q8, descale.contiguous()

    def call(self, c, knobs, i=0):
        q, k, v, table, descales = c["inputs"][i % len(c["inputs"])]
        return self.fa3.flash_attn_with_kvcache(
            q, k, v, cache_seqlens=c["cache_seqlens"], page_table=table, causal=c["shape"]["causal"],
            num_splits=knobs["num_splits"], pack_gqa=knobs["pack_gqa"], sm_margin=knobs["sm_margin"],
            **(descales or {}))

    def reference(self, c):
        if c["ref"] is None:
            t = self.torch
            s = c["shape"]
            q, k, v, table, descales = c["inputs"][0]
            qpk = s["h_q"] // s["h_kv"]
            outs = []
            for b in range(s["batch"]):
                n = c["lens"][b]
                if table is not None:
                    kb = k[table[b].long()].flatten(0, 1)[:n]
                    vb = v[table[b].long()].flatten(0, 1)[:n]
                else:
                    kb, vb = k[b, :n], v[b, :n]
                kb, vb, qb = kb.float(), vb.float(), q[b].float()  # [n, Hkv, D], [n, Hkv, D], [Lq, Hq, D]
                if descales is not None:  # the reference runs on the dequantized inputs
                    kb = kb * descales["k_descale"][b][None, :, None]
                    vb = vb * descales["v_descale"][b][None, :, None]
                    qb = qb * descales["q_descale"][b].repeat_interleave(qpk)[None, :, None]
                kb = kb.repeat_interleave(qpk, dim=1)  # [n, Hq, D]
                vb = vb.repeat_interleave(qpk, dim=1)
                scores = t.einsum("qhd,khd->hqk", qb, kb) / math.sqrt(s["head_dim"])
                if s["causal"]:
                    pos = t.arange(s["seqlen_q"], device=self.dev) + n - s["seqlen_q"]
                    mask = t.arange(n, device=self.dev)[None, :] > pos[:, None]
                    scores.masked_fill_(mask[None], float("-inf"))
                outs.append(t.einsum("hqk,khd->qhd", t.softmax(scores, dim=-1), vb))
            c["ref"] = t.stack(outs)
        return c["ref"]

    def check(self, c, knobs):
        t = self.torch
        ref = self.reference(c)
        # FA3 allocates its output: fill a block of that size with NaN and free it, so the
        # caching allocator gives the call that block and an unwritten element stays NaN.
        poison = t.full(ref.shape, float("nan"), dtype=c["out_dtype"], device=self.dev)
        poison_ptr = poison.data_ptr()
        del poison
        out = self.call(c, knobs)
        out = out[0] if isinstance(out, (tuple, list)) else out
        t.cuda.synchronize(self.dev)
        o = out.float()
        bad = ~t.isfinite(o)
        n_bad = int(bad.sum())
        first = int(bad.flatten().nonzero()[0]) if n_bad else -1
        denom = float(t.linalg.vector_norm(ref))
        rel = float(t.linalg.vector_norm(o - ref)) / (denom if denom > 0 else 1.0)
        return {"rel_error": rel, "bad_elements": n_bad, "first_bad": first, "poisoned": out.data_ptr() == poison_ptr}

    def graph(self, c, knobs, calls):
        t = self.torch
        self.call(c, knobs)  # FA3 sets up its launch state outside the capture
        t.cuda.synchronize(self.dev)
        graph = t.cuda.CUDAGraph()
        with t.cuda.graph(graph, stream=self.stream):
            for i in range(calls):
                self.call(c, knobs, i)
        return _TorchReplay(t, graph, self.stream)

    def splits_run(self, c, knobs):
        """The split FA3's scheduler gives each request under these knobs (get_scheduler_metadata)."""
        s = c["shape"]
        table = c["inputs"][0][3]
        # FA3's max_seqlen_k is the cache's capacity: for a paged cache, the page table's.
        capacity = table.shape[1] * s["page_size"] if table is not None else s["seqlen_k"]
        try:
            md = self.fa3.get_scheduler_metadata(
                s["batch"], s["seqlen_q"], capacity, s["h_q"], s["h_kv"], s["head_dim"], c["cache_seqlens"],
                qkv_dtype=c["inputs"][0][0].dtype, page_size=s["page_size"] or None, causal=s["causal"],
                num_splits=knobs["num_splits"], pack_gqa=knobs["pack_gqa"], sm_margin=knobs["sm_margin"])
            return sorted(set(int(x) for x in md[: s["batch"]].tolist()))
        except Exception as e:  # the metadata is informative; its absence fails nothing
            return "unknown (%s)" % e

    def raise_if_sticky(self, e):
        try:
            self.torch.cuda.synchronize(self.dev)
        except Exception as sticky:
            raise Unusable("CUDA error after %s: %s" % (e, sticky))


class _TorchReplay:
    def __init__(self, torch, graph, stream):
        self.t, self.graph, self.stream = torch, graph, stream

    def replay(self):
        """One replay's time in microseconds."""
        start = self.t.cuda.Event(enable_timing=True)
        stop = self.t.cuda.Event(enable_timing=True)
        start.record(self.stream)
        with self.t.cuda.stream(self.stream):
            self.graph.replay()
        stop.record(self.stream)
        stop.synchronize()
        return 1000.0 * start.elapsed_time(stop)


def import_fa3(hopper=None):
    """FA3's Python interface: flash_attn_interface from $EVODISPATCH_FA3_PATH or the installed
    package; or, given an FA3 build's hopper/ folder, that build's interface loaded under a
    module name of its own, so that a second build (one with its own torch op namespace,
    scripts/fa3-build.sh --namespace) loads beside the first."""
    if hopper is None:
        path = os.environ.get("EVODISPATCH_FA3_PATH")
        if path:
            sys.path.insert(0, path)
        try:
            import flash_attn_interface
        except ImportError as e:
            raise SystemExit("fa3 worker: cannot import flash_attn_interface (%s); set EVODISPATCH_FA3_PATH to an "
                             "FA3 build's hopper/ folder (scripts/fa3-build.sh)" % e)
        return flash_attn_interface
    source = os.path.join(hopper, "flash_attn_interface.py")
    if not os.path.isfile(source):
        raise SystemExit("fa3 worker: %s: no flash_attn_interface.py (an FA3 build's hopper/ folder is required)" % hopper)
    namespace = build_namespace(hopper)
    if hopper not in sys.path:
        sys.path.append(hopper)  # for NAMESPACE._C and NAMESPACE_config
    spec = importlib.util.spec_from_file_location("fa3_interface_" + namespace, source)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise SystemExit("fa3 worker: cannot import %s (%s: %s)" % (source, type(e).__name__, e))
    return mod


HEAD_DIMS = (64, 96, 128, 192, 256)  # FA3's kernel head dims; a call takes the smallest built one >= its own


def unsupported_by_build(flags, shape):
    """Why the FA3 build with these switches (its flash_attn_config's build_flags) cannot run
    the shape, or "". FA3's own dispatch finds no kernel for a head dim above every built one
    and crashes the process (seen on an H100 at D = 256 in a head-dim-128 build), so the
    worker refuses such a shape before calling FA3."""
    if not flags:
        return ""  # a build without its config file: FA3 answers for itself
    built = [d for d in HEAD_DIMS if not flags.get("FLASHATTENTION_DISABLE_HDIM%d" % d, False)]
    if not any(shape["head_dim"] <= d for d in built):
        return "this FA3 build has no kernels for head dim %d (built: %s; scripts/fa3-build.sh --hdims)" % (
            shape["head_dim"], " ".join(map(str, built)) or "none")
    if shape["dtype"] == "fp8" and flags.get("FLASHATTENTION_DISABLE_FP8", False):
        return "this FA3 build has no e4m3 kernels for an fp8 cache (scripts/fa3-build.sh --fp8)"
    if shape["dtype"] == "fp16" and flags.get("FLASHATTENTION_DISABLE_FP16", False):
        return "this FA3 build has no fp16 kernels"
    return ""


def fa3_build_flags(hopper=None):
    """The build switches FA3's setup.py wrote beside its interface (flash_attn_config, or
    NAMESPACE_config for a build with its own op namespace); {} where there is none."""
    namespace = "flash_attn_3" if hopper is None else build_namespace(hopper)
    name = "flash_attn_config" if namespace == "flash_attn_3" else namespace + "_config"
    try:
        return dict(importlib.import_module(name).CONFIG.get("build_flags", {}))
    except Exception:
        return {}


def build_namespace(hopper):
    """The torch op namespace of the FA3 build at hopper/ (NAMESPACE beside it, written by
    scripts/fa3-build.sh; flash_attn_3 without it)."""
    path = os.path.join(os.path.dirname(os.path.abspath(hopper)), "NAMESPACE")
    if os.path.isfile(path):
        with open(path) as fh:
            return fh.read().strip() or "flash_attn_3"
    return "flash_attn_3"


def fa3_build_identity(hopper=None):
    """FA3's commit and build flags, as scripts/fa3-build.sh writes them (BUILD_ID beside
    hopper/). Without that file, the hash of the compiled extension: two compiles of the
    same sources differ in bytes, so such rows are never reused across rebuilds."""
    if hopper is not None:
        cand = os.path.join(os.path.dirname(os.path.abspath(hopper)), "BUILD_ID")
        if os.path.exists(cand):
            with open(cand) as fh:
                build_id = fh.read().strip()
            if build_id:
                return build_id
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None) or ""
        if f.endswith("flash_attn_interface.py"):
            cand = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(f))), "BUILD_ID")
            if os.path.exists(cand):
                with open(cand) as fh:
                    build_id = fh.read().strip()
                if build_id:
                    return build_id
    h = hashlib.sha256()
    sos = sorted({getattr(m, "__file__", "") for m in list(sys.modules.values())
                  if "flash_attn" in (getattr(m, "__name__", "") or "") and (getattr(m, "__file__", "") or "").endswith(".so")})
    for so in sos:
        with open(so, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return "unknown-build:" + (h.hexdigest()[:12] if sos else "no-extension")


# ---- entry points -----------------------------------------------------------------------

def make_backend(index, device, hopper=None):
    path = os.environ.get("EVODISPATCH_FA3_BACKEND")
    if path:
        if "evodispatch_fa3_backend" not in sys.modules:
            spec = importlib.util.spec_from_file_location("evodispatch_fa3_backend", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules["evodispatch_fa3_backend"] = mod
        return sys.modules["evodispatch_fa3_backend"].make_backend(index, device, hopper)
    return TorchFa3Backend(index, hopper)


def _args(argv):
    out = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv):
            out[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            raise SystemExit("fa3 worker: unexpected argument %r" % argv[i])
    return out


def torch_device(index):
    import torch
    p = torch.cuda.get_device_properties(index)
    clock = getattr(p, "memory_clock_rate", 0)
    bus = getattr(p, "memory_bus_width", 0)
    return {"name": p.name, "num_sms": p.multi_processor_count, "l2_bytes": p.L2_cache_size,
            "mem_bw_bytes_per_s": 2.0 * clock * 1e3 * bus / 8.0, "cc": p.major * 10 + p.minor}


def port_check_main(a):
    index = int(a.get("index", "0"))
    device = torch_device(index)
    worker = Worker("fa3:cuda:%d" % index, device, "", make_backend(index, device))
    timing = parse_timing({"l2": "cold"})
    rows = []
    with open(a["port-check"]) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            j = json.loads(line)
            shape = parse_shape({k: j[k] for k in ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim",
                                                    "dtype", "page_size", "causal") if k in j})
            decision = parse_decision({k: j[k] for k in ("num_splits", "pack_gqa", "sm_margin") if k in j},
                                      shape, device["num_sms"])
            r = worker.port_check(shape, decision, timing, int(a.get("pairs", "30")))
            r.update(shape=shape, decision=decision)
            rows.append(r)
            print(json.dumps(r), flush=True)
    agree = sum(1 for r in rows if r["fa3_splits"] == r["policy_splits"])
    ratios = [r["ratio_own_over_policy"] for r in rows]
    gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else 0
    print(json.dumps({"shapes": len(rows), "same_split": agree, "geomean_own_over_policy": gm,
                      "max": max(ratios, default=0), "min": min(ratios, default=0)}), flush=True)


def decisions_of(path):
    """(shape, knobs) per line of `evodispatch decide --json` output; errors name the line."""
    out = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                j = json.loads(line)
                shape = parse_shape({k: j[k] for k in ("batch", "seqlen_q", "seqlen_k", "h_q", "h_kv", "head_dim",
                                                        "dtype", "page_size", "causal") if k in j})
                want = {"num_splits": _int(j, "num_splits", 1), "pack_gqa": j.get("pack_gqa"),
                        "sm_margin": _int(j, "sm_margin", 0, 0)}
            except (ValueError, KeyError, Refused) as e:
                raise SystemExit("fa3 worker: %s:%d: %s" % (path, n, e))
            out.append((shape, want))
    return out


def compare_builds(stock, patched, shape, want, beside, timing, pairs):
    """Stock FA3 and patched FA3, each deciding for itself, timed against each other in
    interleaved rounds on the same inputs, beside stock FA3 told each `beside` decision.
    speedup = stock time / other time, the median over rounds."""
    row = {"shape": shape, "decision": want, "plan": {}}
    c, gpu = stock.case(shape, None, True, timing)
    patched.check(shape, OWN, c, row)
    row["poisoned"] = row.pop("plan").get("poisoned", False)
    row["patched_splits"] = patched.backend.splits_run(c, OWN)
    row["stock_splits"] = stock.backend.splits_run(c, OWN)
    row["decision_splits"] = stock.backend.splits_run(c, want)
    row["patched_runs_decision"] = row["patched_splits"] == row["decision_splits"]
    sides = [("stock", stock, OWN), ("patched", patched, OWN)]
    for label, knobs_ in beside:
        stock.check(shape, knobs_, c, {"plan": {}})
        sides.append((label, stock, knobs_))
    graphs = []
    for label, w, k in sides:
        n = w.calls_per_graph(c, k, timing, gpu["buffer_sets"])
        graphs.append((w.backend.graph(c, k, n), n))
    times = interleaved(graphs, pairs)
    for (label, w, k), ts in zip(sides, times):
        row[label + "_us"] = sample_stats(ts)[0]
    speedups = [[a / b for a, b in zip(times[0], ts)] for ts in times]
    row["speedup"], row["speedup_lo"], row["speedup_hi"] = sample_stats(speedups[1])
    row["beside"] = {label: {"speedup": sample_stats(speedups[2 + i])[0], "splits": stock.backend.splits_run(c, k)}
                     for i, (label, k) in enumerate(beside)}
    return row


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def regress_main(a):
    """The regression matrix of a patched FA3 build against stock FA3, both deciding for
    themselves (num_splits=0), timed in this one process, shape by shape over a decisions
    file (`evodispatch decide --policy PROGRAM --json`, the program the patch carries).
    Per shape: the numeric check of patched FA3, the split each build runs and the split
    stock FA3 runs when told the program's decision (get_scheduler_metadata), then both
    builds' calls interleaved; `--beside LABEL=FILE` adds stock FA3 told another policy's
    decisions (seq-aware). A shape under --floor where the two builds run different splits
    is measured again with three times the pairs: confirmed if it stays under. Prints a
    JSON line per shape and a summary line; exits 1 when a shape is confirmed under the
    floor or a sticky CUDA error stopped the run."""
    index = int(a.get("index", "0"))
    device = json.loads(a["device-json"]) if "device-json" in a else torch_device(index)
    pairs, floor = int(a.get("pairs", "30")), float(a.get("floor", "0.99"))
    for side in ("stock", "patched"):
        if side not in a:
            raise SystemExit("fa3 worker: --regress needs --stock HOPPER and --patched HOPPER")
    if build_namespace(a["stock"]) == build_namespace(a["patched"]):
        raise SystemExit("fa3 worker: both builds register torch.ops.%s, so they cannot load in one process: build "
                         "the patched one with scripts/fa3-build.sh --namespace NAME" % build_namespace(a["patched"]))
    stock = Worker("fa3:cuda:%d" % index, device, "", make_backend(index, device, a["stock"]))
    patched = Worker("fa3:cuda:%d" % index, device, "", make_backend(index, device, a["patched"]))
    wanted = decisions_of(a["regress"])
    beside_label, beside_rows = None, []
    if "beside" in a:
        beside_label, _, path = a["beside"].partition("=")
        if not beside_label or not path:
            raise SystemExit("fa3 worker: --beside LABEL=DECISIONS.jsonl")
        beside_rows = decisions_of(path)
        if [s for s, _ in beside_rows] != [s for s, _ in wanted]:
            raise SystemExit("fa3 worker: %s: its shapes are not those of %s, in the same order" % (path, a["regress"]))
    timing = parse_timing({"l2": "cold"})
    rows, status = [], 0
    for i, (shape, want) in enumerate(wanted):
        beside = [(beside_label, beside_rows[i][1])] if beside_label else []
        row = {"shape": shape, "decision": want}
        try:
            row = compare_builds(stock, patched, shape, want, beside, timing, pairs)
            if row["speedup"] < floor and row["patched_splits"] != row["stock_splits"]:
                again = compare_builds(stock, patched, shape, want, beside, timing, 3 * pairs)
                row["confirmed_speedup"] = again["speedup"]
        except RowError as e:
            row["error"] = str(e)
        except Unusable as e:
            row["error"] = str(e)
            status = 1
        except Exception as e:  # an FA3 refusal is this shape's failure
            row["error"] = "%s: %s" % (type(e).__name__, e)
            try:
                stock.backend.raise_if_sticky(e)
            except Unusable as sticky:
                row["error"], status = str(sticky), 1
        rows.append(row)
        print(json.dumps(row), flush=True)
        if status:
            break  # a sticky CUDA error: nothing more can run in this process
    ok = [r for r in rows if "speedup" in r]
    differ = [r for r in ok if r["patched_splits"] != r["stock_splits"]]
    under = [r for r in differ if r.get("confirmed_speedup", r["speedup"]) < floor]
    worst = min(ok, key=lambda r: r["speedup"], default=None)
    summary = {
        "shapes": len(rows), "failed": len(rows) - len(ok), "stock_build": stock.kernel_build,
        "patched_build": patched.kernel_build, "pairs": pairs, "floor": floor,
        "patched_runs_decision": sum(1 for r in ok if r["patched_runs_decision"]),
        "patched_differs_from_stock": len(differ),
        "geomean_speedup": geomean([r["speedup"] for r in ok]),
        "geomean_speedup_where_they_differ": geomean([r["speedup"] for r in differ]),
        "worst_speedup": worst["speedup"] if worst else 0.0, "worst_shape": worst["shape"] if worst else None,
        "under_floor_confirmed": len(under),
        "under_floor_same_splits": sum(1 for r in ok if r["speedup"] < floor and r not in differ),
    }
    if beside_label:
        b = [r["beside"][beside_label]["speedup"] for r in ok]
        summary["beside"] = {beside_label: {"geomean_speedup": geomean(b), "worst_speedup": min(b, default=0.0),
                                            "under_floor": sum(1 for x in b if x < floor)}}
    print(json.dumps(summary), flush=True)
    report(rows, differ, summary, beside_label, sys.stderr)
    return 1 if status or under else 0


def describe_shape(s):
    return "B=%d Lq=%d Lk=%d Hq=%d Hkv=%d D=%d %s%s" % (
        s["batch"], s["seqlen_q"], s["seqlen_k"], s["h_q"], s["h_kv"], s["head_dim"], s["dtype"],
        " page=%d" % s["page_size"] if s["page_size"] else "")


def report(rows, differ, summary, beside_label, out):
    """The regression matrix for a reader: the shapes whose split the patch changes, slowest
    first, the failures, and the summary in words."""
    def splits(x):
        return "/".join(str(v) for v in x) if isinstance(x, list) else str(x)
    out.write("patched FA3 (%s) against stock FA3 (%s), both deciding, %d interleaved rounds\n"
              % (summary["patched_build"], summary["stock_build"], summary["pairs"]))
    for r in sorted(differ, key=lambda r: r.get("confirmed_speedup", r["speedup"])):
        line = "  %-44s splits %s -> %s  %.3fx" % (describe_shape(r["shape"]), splits(r["stock_splits"]),
                                                  splits(r["patched_splits"]), r["speedup"])
        if "confirmed_speedup" in r:
            line += " (again: %.3fx%s)" % (r["confirmed_speedup"],
                                          ", REGRESSION" if r["confirmed_speedup"] < summary["floor"] else "")
        if beside_label:
            line += "  %s %.3fx" % (beside_label, r["beside"][beside_label]["speedup"])
        out.write(line + "\n")
    for r in rows:
        if "error" in r:
            out.write("  %-44s failed: %s\n" % (describe_shape(r["shape"]), r["error"]))
    out.write("%d shapes, %d failed; the patch changes the split on %d (%.4fx there); geomean %.4fx, worst %.3fx; "
              "%d confirmed under %.2f\n" % (summary["shapes"], summary["failed"], summary["patched_differs_from_stock"],
                                             summary["geomean_speedup_where_they_differ"], summary["geomean_speedup"],
                                             summary["worst_speedup"], summary["under_floor_confirmed"], summary["floor"]))
    if beside_label:
        b = summary["beside"][beside_label]
        out.write("%s on stock FA3: geomean %.4fx, worst %.3fx, %d under %.2f\n"
                  % (beside_label, b["geomean_speedup"], b["worst_speedup"], b["under_floor"], summary["floor"]))


def main(argv):
    a = _args(argv)
    if "port-check" in a:
        return port_check_main(a)
    if "regress" in a:
        return regress_main(a)
    index = int(a.get("index", "0"))
    device = json.loads(a["device-json"]) if "device-json" in a else torch_device(index)
    worker = Worker(a.get("spec", "fa3:cuda:%d" % index), device, a.get("fingerprint", device["name"]),
                    make_backend(index, device))
    return serve(worker, sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
