#pragma once
// Small RAII wrappers over the CUDA runtime for the GPU runner. Every failed call throws
// CudaError; the runner turns it into a failed row and, when the error is sticky (the
// context is gone: illegal address, launch failure, ...), marks itself unusable.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace evodispatch::gpu {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what);
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// Throws CudaError "what: <cudaGetErrorName>: <cudaGetErrorString>" unless e is cudaSuccess.
void check(cudaError_t e, const char* what);

// Errors after which the context cannot be used again (every later call fails).
bool is_sticky(cudaError_t);

// Device memory; moves, frees on destruction (errors there are ignored: a broken context
// cannot free anything and the process is about to be replaced).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }
  std::size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// Device memory that outlives the cases measured in it. Each case's buffers start at the
// same address (the allocation's start plus `offset`), so what was allocated and freed
// before a case cannot change where its tensors lie. On an H100 that placement alone moved
// a decode call by up to 16% (docs/measuring.md, "Where the buffers lie").
class DeviceArena {
 public:
  explicit DeviceArena(std::size_t offset = 0) : offset_(offset) {}
  // `bytes` at the arena's start (+ offset). A first or larger request allocates
  // max(bytes, at_least) anew; the memory of earlier views is then gone.
  char* take(std::size_t bytes, std::size_t at_least);
  // Bytes a request gets without a new allocation.
  std::size_t capacity() const { return buf_.size() > offset_ ? buf_.size() - offset_ : 0; }

 private:
  DeviceBuffer buf_;
  std::size_t offset_;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const;

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Milliseconds between two recorded (and completed) events.
float elapsed_ms(const Event& start, const Event& stop);

// An instantiated graph captured from a stream.
class GraphExec {
 public:
  GraphExec() = default;
  explicit GraphExec(cudaGraph_t graph);  // instantiates; the caller keeps `graph`
  GraphExec(GraphExec&& o) noexcept;
  GraphExec& operator=(GraphExec&& o) noexcept;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec();
  void launch(cudaStream_t s) const;
  explicit operator bool() const { return exec_ != nullptr; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// Captures everything `record` enqueues on `s` into a graph and instantiates it. A
// failure inside `record` ends the capture before the error propagates.
template <class F>
GraphExec capture(const Stream& s, F&& record) {
  check(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    record();
  } catch (...) {
    cudaStreamEndCapture(s.get(), &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(s.get(), &graph), "cudaStreamEndCapture");
  struct Destroy {
    cudaGraph_t g;
    ~Destroy() { cudaGraphDestroy(g); }
  } destroy{graph};
  return GraphExec(graph);
}

}  // namespace evodispatch::gpu
