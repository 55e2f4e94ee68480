// The one place that knows which backends this build has.
//
// Why explicit calls and not self-registering static objects: ds_cpu and
// ds_cuda are static libraries, and the linker only pulls an object file out
// of one when something references it. A registrar object in CpuBackend.cpp
// that nothing names would be dropped from ds-run without a word, and the
// fixes (--whole-archive, -force_load, /WHOLEARCHIVE) are per-linker and drag
// in every object of the archive. Calling registerCpuBackend() from here is
// a real reference: the linker keeps the backend, and a reader sees the list.
#include "runtime/backend/AllBackends.h"

#include <mutex>

#include "runtime/backend/BackendRegistry.h"
#include "runtime/cpu/CpuBackend.h"
#ifdef DS_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

namespace ds::rt {
namespace {

#ifndef DS_HAVE_CUDA
// Keeps "cuda" a known name in every build, so --backend=cuda says it was
// not built in rather than that no such backend exists.
absl::Status cudaNotBuiltIn() {
  return absl::UnavailableError(
      "this ds-run was built without CUDA; rebuild with the CUDA toolkit or use --backend=cpu");
}
absl::Status registerCudaNotBuiltIn() {
  return registerBackend({"cuda", "NVIDIA GPU (not built in: the CUDA toolkit was not found)",
                          [](const BackendOptions &) -> absl::StatusOr<std::unique_ptr<Backend>> {
                            return cudaNotBuiltIn();
                          },
                          cudaNotBuiltIn});
}
#endif

} // namespace

absl::Status registerAllBackends() {
  static std::once_flag once;
  static absl::Status result;
  std::call_once(once, [] {
    result = cpu::registerCpuBackend();
#ifdef DS_HAVE_CUDA
    if (result.ok()) result = cuda::registerCudaBackend();
#else
    if (result.ok()) result = registerCudaNotBuiltIn();
#endif
  });
  return result;
}

} // namespace ds::rt
