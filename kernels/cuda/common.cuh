#pragma once
// Device helpers of the decode and combine kernels. Host-free: NVRTC compiles this with no
// include path (no cuda_bf16.h either); the few bf16/fp16 operations the kernels need are
// written as inline PTX for sm_80 and later.
#include "decode_params.hpp"

namespace evodispatch {
namespace dev {

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// 2^x on the special-function unit; ex2(-inf) = +0, which the masking relies on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// f(x) for x = tid, tid + T, ... below N, T the CTA's threads, unrolled up to UNROLL times.
// A loop bounded by tid has a trip count the compiler cannot know: it compiled into an
// unrolled body, a remainder loop and their branches, and a short call's CTA stalled on
// fetching that code (ncu on an H200: 13-16% of its warps' samples waited for
// instructions). This one's trip count is a constant.
template <int N, int T, int UNROLL = 4, class F>
__device__ __forceinline__ void for_strided(int tid, F&& f) {
  constexpr int kTrips = (N + T - 1) / T;
#pragma unroll(UNROLL)
  for (int k = 0; k < kTrips; ++k)
    if (N % T == 0 || tid + k * T < N) f(tid + k * T);
}

// ---------------------------------------------------------------------------------------
// Asynchronous global -> shared copies (sm_80 cp.async). `valid` false zero-fills the 16
// bytes without reading global memory, so rows past a request's length cost no traffic
// and can never inject NaN from uninitialised cache slots into P x V.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---------------------------------------------------------------------------------------
// Tensor-core fragments (mma.sync m16n8k16, fp32 accumulate). Lane l = 4 * g + t holds
//   A 16x16: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8 : b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C 16x8 : c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)
__device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// The element type: its mma flavour and its float conversions.
template <int DT>
struct Elem;

template <>
struct Elem<kDtypeBf16> {
  // Two floats to one register, `lo` in the low half (the lower column index).
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
    return r;
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Elem<kDtypeFp16> {
  static __device__ __forceinline__ u32 pack(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
    return r;
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Two fp8 e4m3 values (the lower byte is the lower element) as two fp16 values, exactly:
// every e4m3 value, subnormals included, is an fp16 value (sm_89 and later).
__device__ __forceinline__ u32 e4m3x2_to_f16x2(unsigned short two) {
  u32 r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(two));
  return r;
}

// Four e4m3 values (one 32-bit word, lowest byte first) as two packed pairs of the
// element type: exact in both (bf16 holds every fp16 value an e4m3 one becomes).
template <int DT>
__device__ __forceinline__ void widen_e4m3x4(u32 w, u32& lo, u32& hi) {
  lo = e4m3x2_to_f16x2(static_cast<unsigned short>(w & 0xffffu));
  hi = e4m3x2_to_f16x2(static_cast<unsigned short>(w >> 16));
  if constexpr (DT == kDtypeBf16) {
    auto to_bf16x2 = [](u32 h2) {
      float a, b;
      asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
          : "=f"(a), "=f"(b)
          : "r"(h2));
      return Elem<kDtypeBf16>::pack(a, b);
    };
    lo = to_bf16x2(lo);
    hi = to_bf16x2(hi);
  }
}

// bf16 queries over an fp8 cache run the fp16 MMA, so that e4m3 widens in one conversion
// per pair (cvt.rn.f16x2.e4m3x2) instead of four (through f32 into bf16). A row's bf16
// values go into fp16 scaled by 2^e, e chosen per row so that its largest |q| lands in
// [2^14, 2^15): every element down to 2^-29 of that maximum keeps its 8 significant bits
// (fp16 has 11), smaller ones round to fp16's subnormals (an absolute error under 2^-39 of
// the maximum), and nothing overflows. The scores come out times 2^e, which the row's
// softmax scale takes back. A row whose maximum is 0 gets e = 0.
__device__ __forceinline__ int f16_row_exponent(float max_abs) {
  if (!(max_abs > 0.f)) return 0;
  const int biased = static_cast<int>((__float_as_uint(max_abs) >> 23) & 0xffu);  // 0: subnormal
  return min(126, 127 + 14 - biased);
}
__device__ __forceinline__ float pow2(int e) { return __uint_as_float(static_cast<u32>(127 + e) << 23); }
// Two bf16 (one register, lower column in the low half) as two fp16 times `scale`.
__device__ __forceinline__ u32 bf16x2_to_f16x2(u32 w, float scale) {
  return Elem<kDtypeFp16>::pack(__uint_as_float(w << 16) * scale, __uint_as_float(w & 0xffff0000u) * scale);
}
__device__ __forceinline__ float bf16x2_max_abs(u32 w) {
  return fmaxf(fabsf(__uint_as_float(w << 16)), fabsf(__uint_as_float(w & 0xffff0000u)));
}

// A 4-byte shared-memory load by address (the query's fragments in the fp8 column order).
__device__ __forceinline__ u32 lds_4(u32 addr) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// Reductions over the 4 lanes (t = 0..3) that hold one accumulator row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Programmatic dependent launch (sm_90 and later): the host launches the combine kernel
// while the decode kernel still runs, so its launch latency hides behind the decode's
// tail. The decode grid lets it start; the combine waits for the decode grid to finish
// and its writes to be visible. Both are no-ops for a grid launched without the
// dependency, and compile to nothing before sm_90.
__device__ __forceinline__ void launch_dependent_grids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Thread-block clusters (sm_90 and later): the CTAs of a cluster read one another's
// shared memory. A barrier with release / acquire semantics orders every CTA's shared
// stores before any CTA's reads after it (and subsumes __syncthreads).
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
// The address of shared-memory address `addr` of this CTA in the CTA of cluster rank `rank`.
__device__ __forceinline__ u32 cluster_map(u32 addr, int rank) {
  u32 r = addr;
#if __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
#endif
  return r;
}
__device__ __forceinline__ float ld_cluster_f32(u32 addr) {
  float v = 0.f;
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
#endif
  return v;
}
__device__ __forceinline__ float4 ld_cluster_f32x4(u32 addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#endif
  return v;
}

// Asks L2 for the line holding `p` (a hint: no register, no L1 line, never a fault).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// The SM this thread runs on.
__device__ __forceinline__ int sm_id() {
  int id;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
  return id;
}

// 16-byte vector of 8 elements, stored as 4 packed pairs.
__device__ __forceinline__ void store_16(void* p, u32 a, u32 b, u32 c, u32 d) {
  *reinterpret_cast<uint4*>(p) = make_uint4(a, b, c, d);
}

}  // namespace dev
}  // namespace evodispatch
