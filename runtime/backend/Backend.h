// The hardware layer: everything the executor needs from a device, and
// nothing more. Implementations live in their own folders and register a
// factory by name (BackendRegistry.h), like IREE's HAL drivers; this header
// knows none of them. Every registered backend runs the same conformance
// suite, test/backend-cts/ (ctest -R BackendConformance).
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
  /// Bytes the backend may allocate in DEVICE memory (0: what the device
  /// has). The CPU backend plays a device with a bounded pool this way, so
  /// that offloading to its HOST pool is real and measurable.
  uint64_t deviceMemoryLimit = 0;
};

/// Bytes allocated in one memory space, now and at the most.
struct MemoryUsage {
  uint64_t current = 0, peak = 0;
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
  /// What allocate() has handed out in `space` (backends that do not
  /// count report zeros).
  virtual MemoryUsage memoryUsage(plan::MemorySpace space) const {
    (void)space;
    return {};
  }
  /// Host <-> backend copies (memcpy where host memory is shared).
  virtual absl::Status copyFromHost(void *dst, const void *src, uint64_t bytes) = 0;
  virtual absl::Status copyToHost(void *dst, const void *src, uint64_t bytes) = 0;

  /// Looks up `step.kernel`, checks dtypes, shapes and attributes against the
  /// bound views, and returns the runnable step. Errors name the step.
  virtual absl::StatusOr<PreparedStep>
  prepare(const plan::Step &step, const std::vector<TensorView> &inputs,
          const std::vector<TensorView> &outputs) = 0;

  /// Waits for all launched work (no-op on synchronous backends).
  virtual absl::Status synchronize() = 0;

  /// The kernel names prepare() accepts, sorted. The conformance suite
  /// checks that each has a test.
  virtual std::vector<std::string> kernelNames() const = 0;
};

} // namespace ds::rt
