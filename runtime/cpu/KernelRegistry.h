// CPU kernels are looked up by the plan's kernel name. Each entry checks its
// step (arity, dtypes, shapes, attributes) against the bound buffers and
// returns a closure; nothing unchecked reaches the inner loops.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/Backend.h"

namespace ds::rt::cpu {

struct KernelContext {
  const plan::Step &step;
  const std::vector<TensorView> &in;
  const std::vector<TensorView> &out;

  /// An InvalidArgument error that names the kernel and the step's location.
  absl::Status error(const std::string &msg) const;
  absl::Status expectArity(size_t minIn, size_t maxIn, size_t nOut) const;
  absl::Status expectDType(const TensorView &t, DType want, const char *what) const;
  absl::Status expectShape(const TensorView &t, const std::vector<int64_t> &want,
                           const char *what) const;
  bool hasAttr(const std::string &name) const { return step.attrs().count(name) != 0; }
  absl::StatusOr<int64_t> intAttr(const std::string &name) const;
  /// An integer attribute read as a flag: absent or 0 is false.
  absl::StatusOr<bool> flagAttr(const std::string &name) const;
  absl::StatusOr<double> floatAttr(const std::string &name) const;
  absl::StatusOr<std::string> stringAttr(const std::string &name) const;
  absl::StatusOr<std::vector<int64_t>> intsAttr(const std::string &name) const;
  /// Normalizes an axis attribute against `rank` (negative counts from the end).
  absl::StatusOr<int64_t> axisAttr(const std::string &name, int64_t rank) const;
};

using KernelPrepareFn = absl::StatusOr<PreparedStep> (*)(const KernelContext &);

class KernelRegistry {
public:
  void add(const std::string &name, KernelPrepareFn fn) { table_[name] = fn; }
  KernelPrepareFn find(const std::string &name) const {
    auto it = table_.find(name);
    return it == table_.end() ? nullptr : it->second;
  }
  std::vector<std::string> names() const;

private:
  std::map<std::string, KernelPrepareFn> table_;
};

/// The kernels compiled for one instruction set (Isa.h), each registering
/// all of them.
namespace generic {
void registerKernels(KernelRegistry &r);
}
namespace avx512 {
void registerKernels(KernelRegistry &r);
}

/// The instruction set of the kernels cpuKernels() uses on this CPU:
/// "avx512" (x86-64-v4) when the CPU has it and the build has that variant,
/// else "generic"; DS_CPU_ISA=generic in the environment forces the latter.
const char *cpuKernelIsa();

/// The registry with every CPU kernel.
const KernelRegistry &cpuKernels();

/// Row-major single-threaded f32 GEMM, C = alpha op(A) op(B) + beta C, on
/// the build's GEMM library (LinalgKernels.cpp).
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
           int64_t ldc);

/// True for bf16 and f16 tensors.
inline bool isHalf(DType t) { return t == plan::BF16 || t == plan::F16; }
/// Runs an f32 kernel on a step whose bf16/f16 operands and results are
/// widened to f32 scratch (exact), the result rounded back to nearest even
/// once: fp32 computation with 16-bit storage, the portable path for
/// kernels without a native 16-bit form (convolutions, the GEMM fallback).
absl::StatusOr<PreparedStep> prepareWidened(const KernelContext &c, KernelPrepareFn f32Kernel);

/// Calls f(T{}) with the C++ element type of `t` for the types that compute
/// natively (not f16/bf16 or bool); anything else is an error naming it.
template <typename F>
absl::StatusOr<PreparedStep> dispatchNative(const KernelContext &c, DType t, F &&f) {
  switch (t) {
  case plan::F32: return f(float{});
  case plan::F64: return f(double{});
  case plan::I8: return f(int8_t{});
  case plan::I16: return f(int16_t{});
  case plan::I32: return f(int32_t{});
  case plan::I64: return f(int64_t{});
  case plan::U8: return f(uint8_t{});
  case plan::U16: return f(uint16_t{});
  case plan::U32: return f(uint32_t{});
  case plan::U64: return f(uint64_t{});
  default: return c.error("does not support element type " + dtypeName(t));
  }
}

/// Product of dims [from, to) of `s` (1 when empty).
inline int64_t product(const std::vector<int64_t> &s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

/// Runs f(begin, end) over [0, n) in chunks of at least `grain` on the
/// backend's threads (OpenMP).
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &f);

/// Numpy broadcasting of `inputs` to `out`, with dimensions collapsed so the
/// innermost loop is as long as possible. Strides are in elements.
struct BroadcastIndexer {
  std::vector<int64_t> dims;                 // collapsed output dims (>= 1 dim)
  std::vector<std::vector<int64_t>> strides; // per input, per collapsed dim

  int64_t inner() const { return dims.back(); }
  int64_t rows() const;
  /// Element offsets of each input at the start of output row `row`.
  void rowOffsets(int64_t row, int64_t *offsets) const;
};
/// Fails when an input does not broadcast to `out`.
absl::StatusOr<BroadcastIndexer>
makeBroadcastIndexer(const std::vector<int64_t> &out,
                     const std::vector<std::vector<int64_t>> &inputs);
/// The numpy broadcast of two shapes, or nullopt when incompatible.
std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b);

} // namespace ds::rt::cpu
