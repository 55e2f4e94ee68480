// The CUDA backend's entry point. Built only when the CUDA toolkit is found
// (DS_ENABLE_CUDA); its kernels reuse runtime/kernels/ElementMath.h.
#pragma once

#include <memory>

#include "runtime/backend/Backend.h"

namespace ds::rt::cuda {

/// Probes the driver and devices; a machine without either gets a clear
/// error telling the user to run with --backend=cpu.
absl::StatusOr<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions &opts);

} // namespace ds::rt::cuda
