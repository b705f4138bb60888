"""Facts about a workload shape (a JSON object of the evodispatch contract) that the bench/gpu
scripts share; no dependency beyond the standard library, so the scripts that run without a
GPU can import it too."""


def kv_bytes(s):
    """Bytes of K and V one call reads: e4m3 is one byte an element, bf16 and fp16 two."""
    elem = 1 if s["dtype"] == "fp8" else 2
    return 2 * s["batch"] * s["seqlen_k"] * s["h_kv"] * s["head_dim"] * elem
