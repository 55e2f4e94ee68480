// Skeleton of the CUDA backend: device discovery, memory, copies and one
// stream. Kernels arrive with the GPU issue; until then prepare() says which
// kernel is missing rather than pretending.
#include "runtime/cuda/CudaBackend.h"

#include "runtime/backend/BackendRegistry.h"

#include <cuda_runtime.h>

namespace ds::rt::cuda {
namespace {

absl::Status cudaStatus(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device) : device_(device) {}
  ~CudaBackend() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  absl::Status init() {
    DS_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    return cudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                      "cudaStreamCreate");
  }
  std::string name() const override { return "cuda"; }
  bool sharesHostMemory() const override { return false; }
  absl::StatusOr<void *> allocate(uint64_t bytes, plan::MemorySpace space) override {
    void *p = nullptr;
    cudaError_t err = space == plan::DEVICE ? cudaMalloc(&p, bytes ? bytes : 64)
                                            : cudaMallocHost(&p, bytes ? bytes : 64);
    DS_RETURN_IF_ERROR(cudaStatus(err, "allocating memory"));
    return p;
  }
  void release(void *ptr, plan::MemorySpace space) override {
    if (space == plan::DEVICE) cudaFree(ptr);
    else cudaFreeHost(ptr);
  }
  absl::Status copyFromHost(void *dst, const void *src, uint64_t bytes) override {
    return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
                      "host-to-device copy");
  }
  absl::Status copyToHost(void *dst, const void *src, uint64_t bytes) override {
    return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
                      "device-to-host copy");
  }
  absl::StatusOr<PreparedStep> prepare(const plan::Step &step,
                                       const std::vector<TensorView> &,
                                       const std::vector<TensorView> &) override {
    return absl::UnimplementedError(absl::StrCat(
        "the cuda backend has no kernel '", step.kernel(), "' yet; run with --backend=cpu"));
  }
  absl::Status synchronize() override {
    return cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  std::vector<std::string> kernelNames() const override { return {}; }

private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

/// OK when the driver reports a device; else the error ds-run prints.
absl::Status probeCuda() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return absl::UnavailableError(absl::StrCat(
        "no usable CUDA device (", err == cudaSuccess ? "none found" : cudaGetErrorString(err),
        "); run with --backend=cpu"));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions &) {
  DS_RETURN_IF_ERROR(probeCuda());
  auto b = std::make_unique<CudaBackend>(0);
  DS_RETURN_IF_ERROR(b->init());
  return std::unique_ptr<Backend>(std::move(b));
}

absl::Status registerCudaBackend() {
  return registerBackend({"cuda",
                          "NVIDIA GPU (skeleton: device, memory, copies, a stream; no kernels yet)",
                          createCudaBackend, probeCuda});
}

} // namespace ds::rt::cuda
