#pragma once
// Shared by the GPU tests: one CudaEvaluator for the whole binary (a CUDA context and
// the loaded kernels are worth keeping), and a terse shape builder.
#include <gtest/gtest.h>


#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/evaluator/gpu_runner.hpp>

namespace evodispatch::gputest {

// The runner on cuda:0, or nullptr when this machine has no GPU.
// Never destroyed: the CUDA runtime tears itself down at exit before static destructors
// would free device memory through it.
inline CudaEvaluator* gpu() {
  static CudaEvaluator* const ev = probe_gpus().empty() ? nullptr : new CudaEvaluator(0);
  return ev;
}

#define EVO_REQUIRE_GPU()                                                   \
  if (::evodispatch::gputest::gpu() == nullptr) GTEST_SKIP() << "no GPU"; \
  else                                                                      \
    (void)0

struct S {
  Shape s;
  S() {
    s.batch = 3;
    s.seqlen_q = 1;
    s.seqlen_k = 97;
    s.h_q = 8;
    s.h_kv = 2;
    s.head_dim = 128;
    s.dtype = Dtype::bf16;
    s.page_size = 0;
    s.causal = true;
  }
  S& b(int v) { s.batch = v; return *this; }
  S& lq(int v) { s.seqlen_q = v; return *this; }
  S& lk(int v) { s.seqlen_k = v; return *this; }
  S& heads(int hq, int hkv) { s.h_q = hq; s.h_kv = hkv; return *this; }
  S& d(int v) { s.head_dim = v; return *this; }
  S& fp16() { s.dtype = Dtype::fp16; return *this; }
  // An fp8 e4m3 KV cache under bf16 (or fp16) queries and outputs.
  S& fp8(Dtype q = Dtype::bf16) { s.dtype = Dtype::fp8; s.q_dtype = q; return *this; }
  S& page(int v) { s.page_size = v; return *this; }
  S& noncausal() { s.causal = false; return *this; }
  operator Shape() const { return s; }
};

// Check only: no timing (TimingOptions::replays = 0).
inline TimingOptions check_only() {
  TimingOptions t;
  t.replays = 0;
  return t;
}

}  // namespace evodispatch::gputest
