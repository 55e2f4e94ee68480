#include "runtime/cpu/CpuBackend.h"

#include <algorithm>
#ifndef DS_GEMM_ONEDNN
#include <cblas.h>
#endif
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <sys/mman.h>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/backend/BackendRegistry.h"
#include "runtime/cpu/KernelRegistry.h"

namespace ds::rt::cpu {

void flushDenormals() {
#if defined(__SSE__) || defined(__x86_64__)
  // FTZ (bit 15) and DAZ (bit 6): results and operands below FLT_MIN count
  // as zero. x86 computes on denormals in microcode, ~100x slower: a
  // training step whose softmax gradients underflow (p ~ 1e-39 for
  // confidently wrong logits) spent most of its GEMM time there. Threads
  // started later (the OpenMP pool) inherit the setting; the compiler's
  // constant folding runs on this backend too, so folding agrees.
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

/// The size of a transparent huge page on x86-64 and AArch64 (4K granule).
constexpr uint64_t kHugePage = uint64_t(2) << 20;

CpuBackend::CpuBackend(const BackendOptions &opts) : deviceLimit_(opts.deviceMemoryLimit) {
  flushDenormals();
  if (opts.threads > 0)
    omp_set_num_threads(opts.threads);
#ifndef DS_GEMM_ONEDNN
  // Kernels parallelize on OpenMP, GEMM included (LinalgKernels.cpp splits
  // it); BLAS's own pthreads would spin against OpenMP's for the cores.
  openblas_set_num_threads(1);
#endif
}

absl::StatusOr<void *> CpuBackend::allocate(uint64_t bytes, plan::MemorySpace space) {
  // Whole cache lines; a zero-byte request still gets a valid, distinct
  // pointer.
  if (bytes > (uint64_t(1) << 62))
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes (more than 2^62)"));
  uint64_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  std::lock_guard<std::mutex> lock(mu_);
  MemoryUsage &u = usage_[space & 3];
  if (space == plan::DEVICE && deviceLimit_ && u.current + bytes > deviceLimit_)
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory budget of ", deviceLimit_, " bytes exceeded: allocating ", bytes,
        " bytes with ", u.current, " in use"));
  // Big buffers (the arena, weights, optimizer state) go on 2 MiB pages:
  // GEMMs pack panels from rows 4+ KiB apart, and with 4 KiB pages every
  // row was a TLB miss (transparent huge pages are often opt-in, "madvise").
  // Aligned to a huge page but not rounded up to one: the kernel backs the
  // whole 2 MiB pages inside the buffer and the tail with small pages, so
  // resident memory grows by nothing.
  const bool huge = rounded >= kHugePage;
  void *p = nullptr;
  if (::posix_memalign(&p, huge ? kHugePage : 64, rounded) != 0) p = nullptr;
#ifdef MADV_HUGEPAGE
  if (p && huge) ::madvise(p, rounded, MADV_HUGEPAGE); // advice only: failure is harmless
#endif
  if (!p)
    return absl::ResourceExhaustedError(
        absl::StrCat("out of host memory allocating ", bytes, " bytes"));
  sizes_[p] = bytes;
  u.current += bytes;
  u.peak = std::max(u.peak, u.current);
  return p;
}

void CpuBackend::release(void *ptr, plan::MemorySpace space) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) {
      usage_[space & 3].current -= it->second;
      sizes_.erase(it);
    }
  }
  std::free(ptr);
}

MemoryUsage CpuBackend::memoryUsage(plan::MemorySpace space) const {
  std::lock_guard<std::mutex> lock(mu_);
  return usage_[space & 3];
}

absl::Status CpuBackend::copyFromHost(void *dst, const void *src, uint64_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::copyToHost(void *dst, const void *src, uint64_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::StatusOr<PreparedStep>
CpuBackend::prepare(const plan::Step &step, const std::vector<TensorView> &inputs,
                    const std::vector<TensorView> &outputs) {
  KernelPrepareFn fn = cpuKernels().find(step.kernel());
  if (!fn)
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown kernel '", step.kernel(), "'",
        step.location().empty() ? "" : absl::StrCat(" at ", step.location()),
        "; the cpu backend has: ", absl::StrJoin(cpuKernels().names(), ", ")));
  KernelContext ctx{step, inputs, outputs};
  return fn(ctx);
}

std::vector<std::string> CpuBackend::kernelNames() const { return cpuKernels().names(); }

absl::Status registerCpuBackend() {
  return registerBackend(
      {"cpu",
       absl::StrCat("host CPU: OpenMP kernels for ", cpuKernelIsa(), " (DS_CPU_ISA=generic ",
                    "forces the portable ones), oneDNN/BLAS GEMM"),
       [](const BackendOptions &opts) -> absl::StatusOr<std::unique_ptr<Backend>> {
         return std::unique_ptr<Backend>(new CpuBackend(opts));
       },
       nullptr});
}

} // namespace ds::rt::cpu
