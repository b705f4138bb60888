#pragma once
// Kernels of the GPU runner besides the decode family (DESIGN.md §4), compiled by NVRTC
// like them: seeded normal inputs, and the float32 reference that every (shape, decision)
// is checked against. The reference is written to be obviously right, not fast: one CTA
// per query row, scores recomputed rather than stored, plain fp32 math with accurate
// expf/logf, and the CTA's statistics merged by one thread in a fixed order.
#include "support_params.h"

namespace evodispatch {
namespace support {

typedef unsigned short u16;
typedef unsigned long long u64;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float to_float(u16 bits, int dtype) {
  if (dtype == 1) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
  }
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}

__device__ __forceinline__ u16 from_float(float f, int dtype) {
  u16 r;
  if (dtype == 1) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

// An fp8 e4m3 value, decoded from its fields (not with the cvt the decode kernels use):
// s eeee mmm, bias 7, subnormals at exponent 0, S.1111.111 NaN, no infinity.
__device__ __forceinline__ float e4m3_to_float(unsigned char x) {
  const int e = (x >> 3) & 15, m = x & 7;
  float v;
  if (e == 15 && m == 7) v = __int_as_float(0x7fc00000);
  else if (e == 0) v = ldexpf(static_cast<float>(m), -9);
  else v = ldexpf(static_cast<float>(8 + m), e - 10);
  return (x & 0x80) ? -v : v;
}

// SplitMix64's finaliser: a counter-based generator, so element i's value depends on
// (seed, i) alone, whatever the grid.
__device__ __forceinline__ u64 mix64(u64 x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Element i's standard normal value (Box-Muller on two 24-bit uniforms of (seed, i)).
__device__ __forceinline__ float normal_at(unsigned long long seed, long long i) {
  const u64 h = mix64(seed + mix64(static_cast<u64>(i) + 0x9e3779b97f4a7c15ull));
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = static_cast<float>((h >> 16) & 0xffffffull) * (1.0f / 16777216.0f);  // [0, 1)
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

}  // namespace support
}  // namespace evodispatch

// Standard normal values rounded to the dtype.
extern "C" __global__ void evo_fill_normal(unsigned short* dst, long long n, unsigned long long seed, int dtype) {
  using namespace evodispatch::support;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = from_float(normal_at(seed, i), dtype);
}

// Standard normal values rounded to fp8 e4m3 (one byte each).
extern "C" __global__ void evo_fill_normal_e4m3(unsigned char* dst, long long n, unsigned long long seed) {
  using namespace evodispatch::support;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned short two;  // the upper operand goes to the upper byte
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(0.0f), "f"(normal_at(seed, i)));
    dst[i] = static_cast<unsigned char>(two & 0xff);
  }
}

extern "C" __global__ void __launch_bounds__(evodispatch::kReferenceThreads)
    evo_reference_attention(const evodispatch::ReferenceParams p) {
  using namespace evodispatch::support;
  constexpr int T = evodispatch::kReferenceThreads;
  constexpr int kAcc = evodispatch::kReferenceMaxHeadDim / T;
  __shared__ float q_s[evodispatch::kReferenceMaxHeadDim];
  __shared__ float p_s[T];
  __shared__ float red_m[T], red_l[T];
  __shared__ float row_m, row_l;

  const int tid = threadIdx.x;
  const int r = blockIdx.x;  // (b * Lq + i) * Hq + h, the row order of q and out
  const int h = r % p.h_q, i = (r / p.h_q) % p.seqlen_q, b = r / (p.h_q * p.seqlen_q);
  const int D = p.head_dim;
  const int kvh = h / (p.h_q / p.h_kv);
  const u16* const q = static_cast<const u16*>(p.q) + static_cast<long long>(r) * D;
  for (int d = tid; d < D; d += T) q_s[d] = to_float(q[d], p.dtype);
  __syncthreads();

  const int len = p.seqlens[b];
  int visible = p.causal ? min(len, len - p.seqlen_q + i + 1) : len;
  visible = max(visible, 0);

  // Element index of key j's row of this KV head, and the true (dequantized) values in it.
  auto kv_row = [&](int j) {
    long long slot;
    if (p.page_size > 0) {
      const int page = p.page_table[static_cast<long long>(b) * p.max_pages + j / p.page_size];
      slot = static_cast<long long>(page) * p.page_size + j % p.page_size;
    } else {
      slot = static_cast<long long>(b) * p.seqlen_k_max + j;
    }
    return (slot * p.h_kv + kvh) * D;
  };
  const long long descale_at = b * p.descale_batch_stride + kvh * p.descale_head_stride;
  const float k_descale = p.kv_fp8 ? p.k_descale[descale_at] : 1.f;
  const float v_descale = p.kv_fp8 ? p.v_descale[descale_at] : 1.f;
  auto kv_value = [&](const void* base, long long at, float descale) {
    if (p.kv_fp8) return e4m3_to_float(static_cast<const unsigned char*>(base)[at]) * descale;
    return to_float(static_cast<const u16*>(base)[at], p.dtype);
  };
  auto score = [&](int j) {
    const long long k = kv_row(j);
    float s = 0.f;
    for (int d = 0; d < D; ++d) s = fmaf(q_s[d], kv_value(p.k, k + d, k_descale), s);
    return s * p.scale;
  };

  // Pass 1: each thread's running max and sum over its keys, merged by thread 0.
  float m = neg_inf(), l = 0.f;
  for (int j = tid; j < visible; j += T) {
    const float s = score(j);
    if (s > m) {
      l = l * expf(m - s) + 1.f;
      m = s;
    } else {
      l += expf(s - m);
    }
  }
  red_m[tid] = m;
  red_l[tid] = l;
  __syncthreads();
  if (tid == 0) {
    float mx = neg_inf();
    for (int t = 0; t < T; ++t) mx = fmaxf(mx, red_m[t]);
    float sum = 0.f;
    for (int t = 0; t < T; ++t)
      if (red_m[t] != neg_inf()) sum += red_l[t] * expf(red_m[t] - mx);
    row_m = mx;
    row_l = sum;
  }
  __syncthreads();
  const float M = row_m, L = row_l;

  // Pass 2: out[d] = sum_j exp(s_j - M) v_j[d] / L, keys in chunks of T.
  float acc[kAcc];
#pragma unroll
  for (int e = 0; e < kAcc; ++e) acc[e] = 0.f;
  for (int j0 = 0; j0 < visible; j0 += T) {
    const int j = j0 + tid;
    p_s[tid] = j < visible ? expf(score(j) - M) : 0.f;
    __syncthreads();
    const int n = min(T, visible - j0);
    for (int jj = 0; jj < n; ++jj) {
      const long long v = kv_row(j0 + jj);
#pragma unroll
      for (int e = 0; e < kAcc; ++e) {
        const int d = tid + e * T;
        if (d < D) acc[e] = fmaf(p_s[jj], kv_value(p.v, v + d, v_descale), acc[e]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int e = 0; e < kAcc; ++e) {
    const int d = tid + e * T;
    if (d < D) p.out[static_cast<long long>(r) * D + d] = visible > 0 ? acc[e] / L : 0.f;
  }
  if (tid == 0) p.lse[(static_cast<long long>(b) * p.h_q + h) * p.seqlen_q + i] = visible > 0 ? M + logf(L) : neg_inf();
}
