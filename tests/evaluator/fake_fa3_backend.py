"""A fake FlashAttention-3 for the FA3 worker's tests (no GPU, no torch).

It stands where evaluator/fa3/fa3_worker.py's TorchFa3Backend stands, and behaves as FA3 on
the serving path would in the ways the worker must handle: num_splits is an upper bound
that its scheduler lowers when the SMs are full; time grows with the work per SM, so the
knobs reach it or the tests see it; an fp8 cache moves half the bytes and comes back with
FA3's fp8 error (q and P rounded to e4m3 too); and it fails the way FA3 fails: a head dim
outside its build raises RuntimeError, num_splits 13 writes NaN outputs (a kernel bug the
numeric check must catch), num_splits 7 on an fp8 cache is off by more than e4m3 rounds,
num_splits 99 is an illegal memory access that poisons the context.

A build directory (the worker's --stock and --patched hopper/ folders) may hold fake.json,
{"build": ID, "own_splits": {"SEQLEN_K": SPLITS}}: a patched build whose own heuristic
picks other splits at those lengths. EVODISPATCH_FAKE_FA3_FLAGS (JSON) gives the build's
switches, as FA3's flash_attn_config holds them; the worker's own unsupported_by_build
reads them, as it reads a real build's.
"""

import json
import math
import os

BUILD = "fake-fa3-0123abcd"


def make_backend(index, device, hopper=None):
    return FakeFa3(device, hopper)


class FakeFa3:
    def __init__(self, device, hopper=None):
        self.num_sms = device["num_sms"]
        self.sticky = None
        self.calls = 0  # kernel calls run, graphs included
        self.build, self.own_splits = BUILD, {}
        path = os.path.join(hopper, "fake.json") if hopper else ""
        if os.path.isfile(path):
            with open(path) as fh:
                j = json.load(fh)
            self.build = j.get("build", BUILD)
            self.own_splits = {int(k): v for k, v in j.get("own_splits", {}).items()}

    def build_identity(self):
        return self.build

    def unsupported(self, shape):
        from __main__ import unsupported_by_build  # the worker runs as __main__ (python3 -c)
        return unsupported_by_build(json.loads(os.environ.get("EVODISPATCH_FAKE_FA3_FLAGS", "{}")), shape)

    def free_bytes(self):
        return 64 << 30

    def set_bytes(self, s):
        elem = 1 if s["dtype"] == "fp8" else 2
        return elem * (2 * s["batch"] * s["seqlen_k"] * s["h_kv"] * s["head_dim"] + s["batch"] * s["h_q"] * s["head_dim"])

    def prepare(self, shape, seqlens, sets):
        return {"shape": shape, "sets": sets}

    def _run(self, s, knobs):
        if self.sticky:
            raise RuntimeError("CUDA error: " + self.sticky)
        if s["head_dim"] not in (64, 128, 256):
            raise RuntimeError("This flash attention build does not support headdim %d" % s["head_dim"])
        if knobs["num_splits"] == 99:
            self.sticky = "an illegal memory access was encountered"
            raise RuntimeError("CUDA error: " + self.sticky)

    def _splits(self, s, knobs):
        nblk = -(-s["seqlen_k"] // 128)
        sms = self.num_sms - knobs["sm_margin"]
        own = max(1, min(nblk, sms // max(1, s["batch"] * s["h_kv"])))
        if knobs["num_splits"] == 0 and s["seqlen_k"] in self.own_splits:
            return self.own_splits[s["seqlen_k"]]
        bound = knobs["num_splits"] if knobs["num_splits"] > 0 else own
        return max(1, min(bound, own, nblk))

    def _time_us(self, s, knobs):
        splits = self._splits(s, knobs)
        rows = 1 if knobs["pack_gqa"] or knobs["pack_gqa"] is None else s["h_q"] // s["h_kv"]
        ctas = s["batch"] * s["h_kv"] * splits * rows
        sms = self.num_sms - knobs["sm_margin"]
        tiles = -(-s["seqlen_k"] // 128) / splits
        per_tile = 0.2 if s["dtype"] == "fp8" else 0.4
        return 3.0 + math.ceil(ctas / sms) * tiles * per_tile + (1.5 if splits > 1 else 0.0)

    def check(self, c, knobs):
        self._run(c["shape"], knobs)
        self.calls += 1
        if knobs["num_splits"] == 13:
            return {"rel_error": float("nan"), "bad_elements": 5, "first_bad": 7, "poisoned": True}
        if c["shape"]["dtype"] == "fp8":
            return {"rel_error": 0.3 if knobs["num_splits"] == 7 else 0.04, "bad_elements": 0, "first_bad": -1,
                    "poisoned": True}
        return {"rel_error": 2e-3, "bad_elements": 0, "first_bad": -1, "poisoned": True}

    def graph(self, c, knobs, calls):
        self._run(c["shape"], knobs)
        return FakeGraph(self, self._time_us(c["shape"], knobs), calls)

    def splits_run(self, c, knobs):
        self._run(c["shape"], knobs)
        return [self._splits(c["shape"], knobs)]

    def raise_if_sticky(self, e):
        if self.sticky:
            from __main__ import Unusable  # the worker runs as __main__ (python3 -c)
            raise Unusable("CUDA error after %s: %s" % (e, self.sticky))


class FakeGraph:
    def __init__(self, fa3, per_call_us, calls):
        self.fa3, self.per_call_us, self.calls, self.n = fa3, per_call_us, calls, 0

    def replay(self):
        """A replay's time in microseconds, with a deterministic +-1% wobble."""
        self.n += 1
        self.fa3.calls += self.calls
        return self.calls * self.per_call_us * (1.0 + 0.01 * math.sin(self.n))
