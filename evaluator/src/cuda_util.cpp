#include "cuda_util.hpp"

#include <algorithm>
#include <utility>

namespace evodispatch::gpu {

CudaError::CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  throw CudaError(e, std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    ptr_ = nullptr;
    cudaGetLastError();  // out of memory is not sticky; clear it for the next call
    throw CudaError(e, "cudaMalloc(" + std::to_string(bytes) + " bytes): " + cudaGetErrorName(e) + ": " +
                           cudaGetErrorString(e));
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

char* DeviceArena::take(std::size_t bytes, std::size_t at_least) {
  if (bytes > capacity()) {
    buf_ = DeviceBuffer();  // freed before the larger one is allocated
    buf_ = DeviceBuffer(offset_ + std::max(bytes, at_least));
  }
  return buf_.bytes() + offset_;
}

Stream::Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}
void Stream::sync() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

Event::Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

float elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
  return ms;
}

GraphExec::GraphExec(cudaGraph_t graph) {
  check(cudaGraphInstantiate(&exec_, graph, 0), "cudaGraphInstantiate");
}
GraphExec::GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
GraphExec& GraphExec::operator=(GraphExec&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}
GraphExec::~GraphExec() {
  if (exec_) cudaGraphExecDestroy(exec_);
}
void GraphExec::launch(cudaStream_t s) const { check(cudaGraphLaunch(exec_, s), "cudaGraphLaunch"); }

}  // namespace evodispatch::gpu
