// The CUDA backend's entry points. Built only when the CUDA toolkit is found
// (DS_ENABLE_CUDA). A skeleton: device discovery, memory, copies and one
// stream; it has no kernels yet, so prepare() refuses every step.
#pragma once

#include <memory>

#include "runtime/backend/Backend.h"

namespace ds::rt::cuda {

/// Probes the driver and devices; a machine without either gets a clear
/// error telling the user to run with --backend=cpu.
absl::StatusOr<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions &opts);

/// Registers "cuda" with the backend registry (runtime/backend/AllBackends.cpp
/// calls it).
absl::Status registerCudaBackend();

} // namespace ds::rt::cuda
