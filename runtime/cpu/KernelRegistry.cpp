#include "runtime/cpu/KernelRegistry.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <omp.h>
#ifdef DS_GEMM_ONEDNN
#include <dnnl.h>
#else
#include <cblas.h>
#endif

#include <cstdlib>
#include <string>

#include <memory>

#include "absl/strings/str_join.h"
#include "runtime/kernels/ElementMath.h"

namespace ds::rt::cpu {

absl::Status KernelContext::error(const std::string &msg) const {
  return absl::InvalidArgumentError(absl::StrCat(
      "kernel '", step.kernel(), "'",
      step.location().empty() ? "" : absl::StrCat(" at ", step.location()), ": ",
      msg));
}

absl::Status KernelContext::expectArity(size_t minIn, size_t maxIn,
                                        size_t nOut) const {
  if (in.size() < minIn || in.size() > maxIn)
    return error(absl::StrCat("takes ", minIn == maxIn ? absl::StrCat(minIn)
                                                        : absl::StrCat(minIn, "-", maxIn),
                              " inputs, got ", in.size()));
  if (out.size() != nOut)
    return error(absl::StrCat("produces ", nOut, " outputs, got ", out.size()));
  return absl::OkStatus();
}

absl::Status KernelContext::expectDType(const TensorView &t, DType want,
                                        const char *what) const {
  if (t.dtype != want)
    return error(absl::StrCat(what, " must be ", dtypeName(want), ", got ",
                              dtypeName(t.dtype)));
  return absl::OkStatus();
}

absl::Status KernelContext::expectShape(const TensorView &t,
                                        const std::vector<int64_t> &want,
                                        const char *what) const {
  if (t.shape != want)
    return error(absl::StrCat(what, " must have shape [", shapeToString(want),
                              "], got [", shapeToString(t.shape), "]"));
  return absl::OkStatus();
}

namespace {
const plan::Attribute *findAttr(const plan::Step &s, const std::string &n) {
  auto it = s.attrs().find(n);
  return it == s.attrs().end() ? nullptr : &it->second;
}
} // namespace

absl::StatusOr<bool> KernelContext::flagAttr(const std::string &name) const {
  if (!hasAttr(name)) return false;
  DS_ASSIGN_OR_RETURN(int64_t v, intAttr(name));
  return v != 0;
}

absl::StatusOr<int64_t> KernelContext::intAttr(const std::string &name) const {
  const auto *a = findAttr(step, name);
  if (!a || a->value_case() != plan::Attribute::kI)
    return error(absl::StrCat("needs an integer attribute '", name, "'"));
  return a->i();
}
absl::StatusOr<double> KernelContext::floatAttr(const std::string &name) const {
  const auto *a = findAttr(step, name);
  if (!a || a->value_case() != plan::Attribute::kF)
    return error(absl::StrCat("needs a float attribute '", name, "'"));
  return a->f();
}
absl::StatusOr<std::string> KernelContext::stringAttr(const std::string &name) const {
  const auto *a = findAttr(step, name);
  if (!a || a->value_case() != plan::Attribute::kS)
    return error(absl::StrCat("needs a string attribute '", name, "'"));
  return a->s();
}
absl::StatusOr<std::vector<int64_t>>
KernelContext::intsAttr(const std::string &name) const {
  const auto *a = findAttr(step, name);
  if (!a || a->value_case() != plan::Attribute::kInts)
    return error(absl::StrCat("needs an integer-list attribute '", name, "'"));
  return std::vector<int64_t>(a->ints().values().begin(), a->ints().values().end());
}
absl::StatusOr<int64_t> KernelContext::axisAttr(const std::string &name,
                                                int64_t rank) const {
  DS_ASSIGN_OR_RETURN(int64_t axis, intAttr(name));
  if (axis < -rank || axis >= rank)
    return error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::string> KernelRegistry::names() const {
  std::vector<std::string> n;
  for (auto &kv : table_) n.push_back(kv.first);
  return n;
}

const char *cpuKernelIsa() {
  static const char *isa = [] {
#ifdef DS_CPU_AVX512_VARIANT
    // DS_CPU_ISA=generic forces the portable kernels (to test them here).
    const char *forced = std::getenv("DS_CPU_ISA");
    if (forced && std::string(forced) == "generic") return "generic";
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
      return "avx512";
#endif
    return "generic";
  }();
  return isa;
}

const KernelRegistry &cpuKernels() {
  static const KernelRegistry *registry = [] {
    auto *r = new KernelRegistry();
#ifdef DS_CPU_AVX512_VARIANT
    if (std::string(cpuKernelIsa()) == "avx512") {
      avx512::registerKernels(*r);
      return r;
    }
#endif
    generic::registerKernels(*r);
    return r;
  }();
  return *registry;
}

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
           int64_t ldc) {
#ifdef DS_GEMM_ONEDNN
  dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}


void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &f) {
  if (n <= 0)
    return;
  int threads = omp_get_max_threads();
  if (grain < 1)
    grain = 1;
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks <= 1) {
    f(0, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    f(begin, end);
  }
}

int64_t BroadcastIndexer::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) r *= dims[i];
  return r;
}

void BroadcastIndexer::rowOffsets(int64_t row, int64_t *offsets) const {
  for (size_t k = 0; k < strides.size(); ++k) offsets[k] = 0;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0 && row > 0; --d) {
    int64_t idx = row % dims[d];
    row /= dims[d];
    for (size_t k = 0; k < strides.size(); ++k) offsets[k] += idx * strides[k][d];
  }
}

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<BroadcastIndexer>
makeBroadcastIndexer(const std::vector<int64_t> &out,
                     const std::vector<std::vector<int64_t>> &inputs) {
  const size_t r = out.size();
  const size_t n = inputs.size();
  // Full-rank strides per input (0 along broadcast dims).
  std::vector<std::vector<int64_t>> full(n, std::vector<int64_t>(r, 0));
  for (size_t k = 0; k < n; ++k) {
    const auto &s = inputs[k];
    if (s.size() > r)
      return absl::InvalidArgumentError(absl::StrCat(
          "input of shape [", shapeToString(s), "] has higher rank than the output [",
          shapeToString(out), "]"));
    int64_t stride = 1;
    for (size_t j = s.size(); j-- > 0;) {
      size_t d = j + (r - s.size());
      if (s[j] == out[d]) {
        full[k][d] = out[d] == 1 ? 0 : stride;
      } else if (s[j] == 1) {
        full[k][d] = 0;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape [", shapeToString(s), "] does not broadcast to [",
            shapeToString(out), "]"));
      }
      stride *= s[j];
    }
  }
  // Drop size-1 dims, then merge neighbours every input steps through alike.
  BroadcastIndexer ix;
  ix.strides.assign(n, {});
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !ix.dims.empty();
    for (size_t k = 0; merge && k < n; ++k) {
      int64_t prev = ix.strides[k].back();
      int64_t cur = full[k][d];
      merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * out[d]);
    }
    if (merge) {
      ix.dims.back() *= out[d];
      for (size_t k = 0; k < n; ++k) ix.strides[k].back() = full[k][d];
    } else {
      ix.dims.push_back(out[d]);
      for (size_t k = 0; k < n; ++k) ix.strides[k].push_back(full[k][d]);
    }
  }
  if (ix.dims.empty()) {
    ix.dims.push_back(1);
    for (size_t k = 0; k < n; ++k) ix.strides[k].push_back(0);
  }
  return ix;
}

} // namespace ds::rt::cpu

namespace ds::rt::cpu {

#if defined(__x86_64__)
// F16C converts 8 halves per instruction, rounding to nearest even with
// NaN kept: used when the CPU has it (any AVX2 CPU), else the scalar math.
__attribute__((target("avx2,f16c"))) static void widenF16C(const uint16_t *in, float *out,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))));
  for (; i < n; ++i) out[i] = math::halfToFloat(in[i]);
}
__attribute__((target("avx2,f16c"))) static void narrowF16C(const float *in, uint16_t *out,
                                                              int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = math::floatToHalf(in[i]);
}
static bool haveF16C() {
  // Every AVX2 CPU has F16C (it came one generation earlier), and clang's
  // __builtin_cpu_supports does not know "f16c".
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

/// 16-bit -> f32 and back for the widened kernels: one branch-free loop
/// per type (the compiler vectorizes bf16's shifts), F16C for f16.
static void widenHalf(const uint16_t *in, float *out, int64_t n, bool bf16) {
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = math::bf16ToFloat(in[i]);
    return;
  }
#if defined(__x86_64__)
  if (haveF16C()) return widenF16C(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = math::halfToFloat(in[i]);
}
static void narrowHalf(const float *in, uint16_t *out, int64_t n, bool bf16) {
  if (bf16) {
    for (int64_t i = 0; i < n; ++i) out[i] = math::floatToBf16(in[i]);
    return;
  }
#if defined(__x86_64__)
  if (haveF16C()) return narrowF16C(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = math::floatToHalf(in[i]);
}

absl::StatusOr<PreparedStep> prepareWidened(const KernelContext &c, KernelPrepareFn f32Kernel) {
  // The f32 copies live in one buffer per thread that grows to the largest
  // step's need, not in every step: a 16-bit plan must not hold an f32
  // shadow of all its tensors. Kernels are prepared against a placeholder
  // region and re-prepared when the buffer moves.
  struct Wide {
    DType dtype;
    uint16_t *half;
    int64_t numel;
    bool input;
  };
  std::vector<Wide> wide;
  int64_t total = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const TensorView &v : pass == 0 ? c.in : c.out)
      if (isHalf(v.dtype)) {
        wide.push_back({v.dtype, v.as<uint16_t>(), v.numel, pass == 0});
        total += v.numel;
      }
  auto step = std::make_shared<plan::Step>(c.step);
  // The f32 copies are filled per run, so nothing may be packed from them
  // when the step is prepared.
  step->mutable_attrs()->erase("constant_weight");
  auto in = std::make_shared<std::vector<TensorView>>(c.in);
  auto out = std::make_shared<std::vector<TensorView>>(c.out);
  // Prepares the f32 kernel with its widened tensors at `base`.
  auto prepareAt = [=](float *base) -> absl::StatusOr<PreparedStep> {
    std::vector<TensorView> wi = *in, wo = *out;
    int64_t off = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (TensorView &v : pass == 0 ? wi : wo)
        if (isHalf(v.dtype)) {
          v.dtype = plan::F32;
          v.data = base + off;
          off += v.numel;
        }
    KernelContext wideContext{*step, wi, wo};
    return f32Kernel(wideContext);
  };
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < total) scratch.resize(total);
  DS_ASSIGN_OR_RETURN(PreparedStep first, prepareAt(scratch.data()));
  auto kernel = std::make_shared<PreparedStep>(std::move(first));
  auto preparedFor = std::make_shared<float *>(scratch.data());
  return PreparedStep([=]() -> absl::Status {
    if (static_cast<int64_t>(scratch.size()) < total) scratch.resize(total);
    if (*preparedFor != scratch.data()) {
      DS_ASSIGN_OR_RETURN(*kernel, prepareAt(scratch.data()));
      *preparedFor = scratch.data();
    }
    float *base = scratch.data();
    for (const Wide &w : wide) {
      if (w.input)
        parallelFor(w.numel, 1 << 15, [&](int64_t lo, int64_t hi) {
          widenHalf(w.half + lo, base + lo, hi - lo, w.dtype == plan::BF16);
        });
      base += w.numel;
    }
    DS_RETURN_IF_ERROR((*kernel)());
    base = scratch.data();
    for (const Wide &w : wide) {
      if (!w.input)
        parallelFor(w.numel, 1 << 15, [&](int64_t lo, int64_t hi) {
          narrowHalf(base + lo, w.half + lo, hi - lo, w.dtype == plan::BF16);
        });
      base += w.numel;
    }
    return absl::OkStatus();
  });
}

} // namespace ds::rt::cpu
