#include "runtime/backend/Backend.h"

#include "runtime/cpu/CpuBackend.h"
#ifdef DS_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

namespace ds::rt {

absl::StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                       const BackendOptions &opts) {
  if (name == "cpu")
    return std::unique_ptr<Backend>(new cpu::CpuBackend(opts));
  if (name == "cuda") {
#ifdef DS_HAVE_CUDA
    return cuda::createCudaBackend(opts);
#else
    return absl::UnavailableError(
        "this ds-run was built without CUDA; rebuild with the CUDA toolkit or use --backend=cpu");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", name, "' (expected cpu or cuda)"));
}

} // namespace ds::rt
