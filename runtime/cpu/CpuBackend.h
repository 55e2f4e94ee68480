// The CPU backend: host memory, kernels from the CPU registry, OpenMP
// threads for kernels and OpenBLAS threads for GEMM.
#pragma once

#include <mutex>
#include <unordered_map>

#include "runtime/backend/Backend.h"

namespace ds::rt::cpu {

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(const BackendOptions &opts);
  std::string name() const override { return "cpu"; }
  bool sharesHostMemory() const override { return true; }
  absl::StatusOr<void *> allocate(uint64_t bytes, plan::MemorySpace space) override;
  void release(void *ptr, plan::MemorySpace space) override;
  MemoryUsage memoryUsage(plan::MemorySpace space) const override;
  absl::Status copyFromHost(void *dst, const void *src, uint64_t bytes) override;
  absl::Status copyToHost(void *dst, const void *src, uint64_t bytes) override;
  absl::StatusOr<PreparedStep> prepare(const plan::Step &step,
                                       const std::vector<TensorView> &inputs,
                                       const std::vector<TensorView> &outputs) override;
  absl::Status synchronize() override { return absl::OkStatus(); }
  std::vector<std::string> kernelNames() const override;

private:
  uint64_t deviceLimit_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<void *, uint64_t> sizes_;
  MemoryUsage usage_[4]; // by plan::MemorySpace
};

/// Registers "cpu" with the backend registry (runtime/backend/AllBackends.cpp
/// calls it).
absl::Status registerCpuBackend();

/// Denormal floats are zero from here on, in this thread and the threads it
/// starts (see CpuBackend.cpp for why); the CPU backend calls it.
void flushDenormals();

} // namespace ds::rt::cpu
