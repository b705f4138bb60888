"""Facts about a workload shape (a JSON object of the evodispatch contract) that the bench/gpu
scripts share; no dependency beyond the standard library, so the scripts that run without a
GPU can import it too."""


def kv_bytes(s):
    """Bytes of K and V one call reads: e4m3 is one byte an element, bf16 and fp16 two."""
    elem = 1 if s["dtype"] == "fp8" else 2
    return 2 * s["batch"] * s["seqlen_k"] * s["h_kv"] * s["head_dim"] * elem


def describe(s):
    """A shape as the tables print it: B, Lq when above 1, Lk, heads, D, then a cache dtype
    other than bf16 and the page size of a paged cache."""
    return "B=%d%s Lk=%d Hq=%d Hkv=%d D=%d%s%s" % (
        s["batch"], " Lq=%d" % s["seqlen_q"] if s.get("seqlen_q", 1) > 1 else "", s["seqlen_k"], s["h_q"], s["h_kv"],
        s["head_dim"], "" if s["dtype"] == "bf16" else " " + s["dtype"],
        " pages of %d" % s["page_size"] if s.get("page_size", 0) else "")
