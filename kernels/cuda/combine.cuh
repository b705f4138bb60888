#pragma once
// Merges the num_splits fp32 partials of every query row (DESIGN.md §2):
//   lse = log(sum_s exp(lse_s)),  out = sum_s exp(lse_s - lse) * O_s
// A split whose LSE is -inf (empty, or every key masked for that row) contributes nothing
// and its O is never read (the decode kernel does not write it for empty splits).
//
// A row is L = combine_split_lanes(S, D) split lanes of D / 8 threads, each thread 8
// floats (two 16-byte loads) per split; lane j merges splits j, j + L, ... with a running
// maximum, and the lanes meet in shared memory. The loads are the cost here (a few bytes of
// math per byte read), so a lane issues the LSE and O loads of kCombineSplitsPerLoad
// splits before it waits on any: one memory round trip per kCombineSplitsPerLoad x L
// splits (a loop of dependent loads took 11 us at 11 splits on an H100). A grid of any
// size >= 1 walks the rows with a static stride, so the host can cap it at SMs - sm_margin.
//
// Before it waits for the decode grid, each thread asks L2 for the line its first row's
// output goes to (prefetch.global.L2: a hint, no L1 line). The waiting CTAs are resident
// early (programmatic dependent launch), so the translation and the line are warm when the
// merge stores: 2-3% off split calls of 7-9 us (B=1 Lk=1595 Hq=24 Hkv=1: 7.41 -> 7.22 us on
// an H100). Prefetching the partials as well saved 0.15 us more there, but it reads the
// old partials from DRAM while the decode streams: B=8 Lk=4096 Hq=64 Hkv=1 took 4% longer.
#include "common.cuh"

namespace evodispatch {
namespace dev {

// Running softmax merge state of one thread: max LSE, sum of weights, 8 weighted floats.
struct CombineState {
  float m, l, acc[8];
};

// Folds (mo, lo, ao) into s; -inf maxima carry no weight (never a NaN from -inf - -inf).
__device__ __forceinline__ void combine_merge(CombineState& s, float mo, float lo, const float* ao) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float mn = fmaxf(s.m, mo);
  if (mn == neg_inf()) return;
  const float a = s.m == neg_inf() ? 0.f : fast_exp2((s.m - mn) * kLog2e);
  const float b = mo == neg_inf() ? 0.f : fast_exp2((mo - mn) * kLog2e);
  s.l = s.l * a + lo * b;
#pragma unroll
  for (int k = 0; k < 8; ++k) s.acc[k] = s.acc[k] * a + ao[k] * b;
  s.m = mn;
}

template <int D, int DT>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ DecodeParams p) {
  constexpr int kChannels = D / 8;  // threads of one split lane
  constexpr int kBatch = kCombineSplitsPerLoad;
  constexpr float kLog2e = 1.4426950408889634f;
  static_assert(kCombineThreads % kChannels == 0, "whole lanes per CTA");
  using E = Elem<DT>;
  // Every thread's (m, l, acc) for the lanes' merge; [field][thread] keeps it conflict-free.
  __shared__ float part[10][kCombineThreads];

  const int S = p.num_splits;
  const int L = combine_split_lanes(S, D);  // a power of two: lanes and rows by mask and shift
  const int lanes_log2 = __ffs(L) - 1;
  const int rows_per_cta = (kCombineThreads / kChannels) >> lanes_log2;
  const int total_rows = p.batch * p.seqlen_q * p.h_q;  // row = (b * Lq + i) * Hq + h
  const i64 split_rows = total_rows;                      // o_partial rows per split
  const i64 lse_split_stride = total_rows;                // lse_partial entries per split
  const int tid = threadIdx.x;
  const int ch = tid % kChannels, lane = (tid / kChannels) & (L - 1), local_row = (tid / kChannels) >> lanes_log2;
  // Row r's request b, query i and head h, where its split 0 LSE and this thread's O columns
  // are, and where its 8 output elements go.
  struct Row {
    int b, i, h;
    const float* lse_s;
    const float* o_s;
    char* out;
  };
  auto row_at = [&](int r) {
    Row x;
    int n = r;
    x.h = take_mod(n, p.h_q_div);
    x.i = take_mod(n, p.seqlen_q_div);
    x.b = n;
    x.lse_s = p.lse_partial + (static_cast<i64>(x.b) * p.h_q + x.h) * p.seqlen_q + x.i;
    x.o_s = p.o_partial + static_cast<i64>(r) * D + ch * 8;
    x.out = static_cast<char*>(p.out) +
            2 * (x.b * p.out_batch_stride + x.i * p.out_row_stride + x.h * p.out_head_stride + ch * 8);
    return x;
  };
  if (const int first = blockIdx.x * rows_per_cta + local_row; first < total_rows) prefetch_l2(row_at(first).out);
  wait_for_prerequisite_grids();  // the decode kernel's partials (see common.cuh)

  // The row loop's trip count is the same for every thread of the CTA (the barriers below).
  for (int base = blockIdx.x * rows_per_cta; base < total_rows; base += gridDim.x * rows_per_cta) {
    const int row = base + local_row;
    const bool valid = row < total_rows;  // a short last tile: its threads still join the merge
    const Row at = row_at(valid ? row : total_rows - 1);
    const float* const lse_s = at.lse_s;
    const float* const o_s = at.o_s;

    CombineState st{neg_inf(), 0.f, {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}};
    for (int s0 = lane; s0 < S; s0 += L * kBatch) {
      float ls[kBatch];
      float4 u[kBatch], v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int s = s0 + j * L;
        ls[j] = s < S ? lse_s[s * lse_split_stride] : neg_inf();
        // An empty split's O is never written: whatever is there is read and then
        // discarded by a branch (never multiplied by a zero weight: it may be NaN).
        if (s < S) {
          const float* src = o_s + s * split_rows * D;
          u[j] = *reinterpret_cast<const float4*>(src);
          v[j] = *reinterpret_cast<const float4*>(src + 4);
        }
      }
      float mb = neg_inf();
#pragma unroll
      for (int j = 0; j < kBatch; ++j) mb = fmaxf(mb, ls[j]);
      float lb = 0.f, ab[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (ls[j] == neg_inf()) continue;  // empty split, or every key masked for this row
        const float w = fast_exp2((ls[j] - mb) * kLog2e);
        lb += w;
        ab[0] += w * u[j].x, ab[1] += w * u[j].y, ab[2] += w * u[j].z, ab[3] += w * u[j].w;
        ab[4] += w * v[j].x, ab[5] += w * v[j].y, ab[6] += w * v[j].z, ab[7] += w * v[j].w;
      }
      combine_merge(st, mb, lb, ab);
    }

    if (L > 1) {  // the same L for the whole grid: every thread takes this branch or none
      part[0][tid] = st.m;
      part[1][tid] = st.l;
#pragma unroll
      for (int k = 0; k < 8; ++k) part[2 + k][tid] = st.acc[k];
      __syncthreads();
      if (lane == 0)
        for (int o = 1; o < L; ++o) {
          const int t = tid + o * kChannels;
          float ao[8];
#pragma unroll
          for (int k = 0; k < 8; ++k) ao[k] = part[2 + k][t];
          combine_merge(st, part[0][t], part[1][t], ao);
        }
      __syncthreads();  // `part` is rewritten by the next row
    }
    if (!valid || lane != 0) continue;
    const float inv = st.l > 0.f ? 1.f / st.l : 0.f;
    const float* a = st.acc;
    store_16(at.out, E::pack(a[0] * inv, a[1] * inv), E::pack(a[2] * inv, a[3] * inv),
             E::pack(a[4] * inv, a[5] * inv), E::pack(a[6] * inv, a[7] * inv));
    if (p.lse && ch == 0)
      p.lse[at.b * p.lse_batch_stride + at.h * p.lse_head_stride + at.i] =
          st.l > 0.f ? st.m + fast_log2(st.l) / kLog2e : neg_inf();
  }
}

}  // namespace dev
}  // namespace evodispatch
