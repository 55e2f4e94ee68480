// The hardware layer: everything the executor needs from a device, and
// nothing more. One implementation per folder (cpu/, cuda/), like IREE's HAL
// drivers; all run the same conformance tests (test/runtime).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/Tensor.h"
#include "runtime/plan/Status.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

/// A step bound to its buffers and checked: calling it runs the kernel. It
/// may still fail on data-dependent errors (an index out of range).
using PreparedStep = std::function<absl::Status()>;

struct BackendOptions {
  int threads = 0; // 0: the backend's default (all cores)
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// True when kernels can read host memory directly (weights stay mapped).
  virtual bool sharesHostMemory() const = 0;

  /// Memory in a given space; freed with release(). Alignment >= 64 bytes.
  virtual absl::StatusOr<void *> allocate(uint64_t bytes,
                                          plan::MemorySpace space) = 0;
  virtual void release(void *ptr, plan::MemorySpace space) = 0;
  /// Host <-> backend copies (the CPU backend's are memcpy).
  virtual absl::Status copyFromHost(void *dst, const void *src, uint64_t bytes) = 0;
  virtual absl::Status copyToHost(void *dst, const void *src, uint64_t bytes) = 0;

  /// Looks up `step.kernel`, checks dtypes, shapes and attributes against the
  /// bound views, and returns the runnable step. Errors name the step.
  virtual absl::StatusOr<PreparedStep>
  prepare(const plan::Step &step, const std::vector<TensorView> &inputs,
          const std::vector<TensorView> &outputs) = 0;

  /// Waits for all launched work (no-op on the synchronous CPU backend).
  virtual absl::Status synchronize() = 0;
};

/// Creates a backend by name ("cpu", "cuda"). "cuda" fails with a clear
/// message when ds was built without CUDA or no device/driver is present.
absl::StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                       const BackendOptions &opts);

} // namespace ds::rt
