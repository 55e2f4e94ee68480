// The skinny GEMM (SkinnyGemm.h): few rows times a packed constant weight.
//
// The inner loop is written with GCC's vector extension (16 floats, one
// AVX-512 register; split into SSE registers in the generic build), so one
// source serves both instruction sets. Sums stay in registers for the whole
// of K: M rows x P panels of 16 columns, P chosen so M x P accumulators and
// P weight vectors fit the 32 registers; the weight is read exactly once
// per pass over the rows (rows past 8 take another pass).
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#if defined(DS_CPU_ISA_AVX512)
#include <immintrin.h>
#endif

// The vector helpers are internal and inlined: no ABI crosses a call.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "runtime/cpu/KernelFamilies.h"

#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/SkinnyGemm.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

typedef float v16 __attribute__((vector_size(64)));
constexpr int64_t kPanel = SkinnyWeight::kPanel;
constexpr int kMaxBlockRows = 8;

inline v16 load(const float *p) {
  v16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline v16 splat(float x) { return v16{} + x; }

/// Panels per block for M rows: M x P sums and P weight vectors in
/// registers; at most 8 streams.
constexpr int panelsFor(int m) { return m <= 3 ? 8 : m == 4 ? 6 : m <= 6 ? 4 : 3; }

/// Rows [0, M) of A times panels [p0, p0 + np) (np <= P) into C.
template <int M, int P>
void block(const float *a, int64_t lda, const SkinnyWeight &w, int64_t p0, int np, float *c,
           int64_t ldc, float alpha) {
  const int64_t k = w.k;
  const float *bp[P];
  for (int p = 0; p < P; ++p) bp[p] = w.data.get() + (p0 + (p < np ? p : 0)) * k * kPanel;
  v16 acc[M][P];
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < P; ++p) acc[m][p] = v16{};
  for (int64_t kk = 0; kk < k; ++kk) {
    v16 b[P];
    for (int p = 0; p < P; ++p) b[p] = load(bp[p] + kk * kPanel);
    for (int m = 0; m < M; ++m) {
#if defined(DS_CPU_ISA_AVX512)
      // A broadcast folded into each FMA's memory operand ({1to16}): no
      // shuffle competing with the FMAs for their port.
      for (int p = 0; p < P; ++p)
        acc[m][p] = (v16)_mm512_fmadd_ps(_mm512_set1_ps(a[m * lda + kk]), (__m512)b[p],
                                         (__m512)acc[m][p]);
#else
      const v16 am = splat(a[m * lda + kk]);
      for (int p = 0; p < P; ++p) acc[m][p] += am * b[p];
#endif
    }
  }
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < np; ++p) {
      const int64_t col = (p0 + p) * kPanel;
      const int64_t cols = std::min<int64_t>(kPanel, w.n - col);
      float out[kPanel];
      const v16 v = acc[m][p] * alpha;
      std::memcpy(out, &v, sizeof(out));
      std::copy_n(out, cols, c + m * ldc + col);
    }
}

template <int M>
void rows(const float *a, int64_t lda, const SkinnyWeight &w, int64_t p0, int np, float *c,
          int64_t ldc, float alpha) {
  constexpr int P = panelsFor(M);
  block<M, P>(a, lda, w, p0, np, c, ldc, alpha);
}

using RowsFn = void (*)(const float *, int64_t, const SkinnyWeight &, int64_t, int, float *,
                        int64_t, float);
constexpr RowsFn kRows[kMaxBlockRows + 1] = {nullptr, rows<1>, rows<2>, rows<3>, rows<4>,
                                             rows<5>, rows<6>, rows<7>, rows<8>};

} // namespace

static SkinnyWeight packSkinnyCopy(const float *b, int64_t k, int64_t n, bool transposed) {
  SkinnyWeight w;
  w.k = k, w.n = n, w.panels = (n + kPanel - 1) / kPanel;
  const size_t bytes = static_cast<size_t>(w.panels * k * kPanel) * sizeof(float);
  float *p = static_cast<float *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  w.data.reset(p, [](float *q) { std::free(q); });
  parallelFor(w.panels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t pi = lo; pi < hi; ++pi) {
      float *dst = p + pi * k * kPanel;
      const int64_t c0 = pi * kPanel, cols = std::min<int64_t>(kPanel, n - c0);
      for (int64_t kk = 0; kk < k; ++kk) {
        float *row = dst + kk * kPanel;
        for (int64_t j = 0; j < cols; ++j)
          row[j] = transposed ? b[(c0 + j) * k + kk] : b[kk * n + c0 + j];
        std::fill(row + cols, row + kPanel, 0.0f);
      }
    }
  });
  return w;
}

SkinnyWeight packSkinny(const float *b, int64_t k, int64_t n, bool transposed) {
  // One packed copy per weight, however many steps read it: a recurrent
  // net's 32 time steps read one matrix, and 32 copies would each come from
  // memory instead of one staying in cache. Keyed by the constant's
  // address, alive while a step holds it.
  static std::mutex mu;
  static std::map<std::tuple<const float *, int64_t, int64_t, bool>, std::weak_ptr<float>> packed;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(b, k, n, transposed);
  if (auto it = packed.find(key); it != packed.end())
    if (std::shared_ptr<float> data = it->second.lock())
      return SkinnyWeight{k, n, (n + kPanel - 1) / kPanel, std::move(data)};
  for (auto it = packed.begin(); it != packed.end();)
    it = it->second.expired() ? packed.erase(it) : std::next(it);
  SkinnyWeight w = packSkinnyCopy(b, k, n, transposed);
  packed[key] = w.data;
  return w;
}

void skinnyGemm(int64_t m, const float *a, int64_t lda, const SkinnyWeight &w, float *c,
                int64_t ldc, float alpha, const std::function<void(int64_t, int64_t)> &finish) {
  // Blocks of panels as wide as the widest row pass uses; each task runs
  // every row pass of its columns, so the epilogue sees whole columns.
  const int firstRows = static_cast<int>(std::min<int64_t>(m, kMaxBlockRows));
  const int64_t width = panelsFor(firstRows);
  const int64_t blocks = (w.panels + width - 1) / width;
  parallelFor(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t p0 = blk * width;
      const int np = static_cast<int>(std::min<int64_t>(width, w.panels - p0));
      for (int64_t r0 = 0; r0 < m; r0 += kMaxBlockRows) {
        const int rowsHere = static_cast<int>(std::min<int64_t>(kMaxBlockRows, m - r0));
        const int cap = panelsFor(rowsHere);
        // A pass of fewer rows than the first may use fewer panels at once.
        for (int q = 0; q < np; q += cap)
          kRows[rowsHere](a + r0 * lda, lda, w, p0 + q, std::min(cap, np - q), c + r0 * ldc, ldc,
                          alpha);
      }
      if (finish) finish(p0 * kPanel, std::min<int64_t>(w.n, (p0 + np) * kPanel));
    }
  });
}

namespace {

typedef int8_t v16i8 __attribute__((vector_size(16)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));

typedef int32_t v16i32 __attribute__((vector_size(64)));

inline v16 dequant8(const uint8_t *p, v16 scale, v16 offset) {
#if defined(DS_CPU_ISA_AVX512)
  // vpmovsxbd and vcvtdq2ps: GCC scalarizes the generic conversion.
  const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))));
  return (v16)_mm512_fmadd_ps(f, (__m512)scale, (__m512)offset);
#else
  v16i8 q;
  std::memcpy(&q, p, sizeof(q));
  return __builtin_convertvector(__builtin_convertvector(q, v16i32), v16) * scale + offset;
#endif
}
/// The two rows of 16 channels one 16-byte row of int4 nibbles holds.
inline void dequant4(const uint8_t *p, v16 scale, v16 offset, v16 &lo, v16 &hi) {
#if defined(DS_CPU_ISA_AVX512)
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  const __m512 l = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF)));
  const __m512 h = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
  lo = (v16)_mm512_fmadd_ps(l, (__m512)scale, (__m512)offset);
  hi = (v16)_mm512_fmadd_ps(h, (__m512)scale, (__m512)offset);
#else
  v16u8 b;
  std::memcpy(&b, p, sizeof(b));
  const v16i32 w = __builtin_convertvector(b, v16i32);
  lo = __builtin_convertvector(w & 0xF, v16) * scale + offset;
  hi = __builtin_convertvector(w >> 4, v16) * scale + offset;
#endif
}

/// Rows [0, M) of A times quantized panels [p0, p0 + np) into C.
template <int M, int P>
void quantBlock(const float *a, int64_t lda, const SkinnyQuantWeight &w, int64_t p0, int np,
                float *c, int64_t ldc, float alpha) {
  const int64_t k = w.k, groups = k / w.group;
  const int64_t rowBytes = kPanel; // bytes per k (int8) or per two k (int4)
  const int64_t panelBytes = (w.bits == 8 ? k : k / 2) * rowBytes;
  int64_t pi[P];
  for (int p = 0; p < P; ++p) pi[p] = p0 + (p < np ? p : 0);
  v16 acc[M][P];
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < P; ++p) acc[m][p] = v16{};
  for (int64_t g = 0; g < groups; ++g) {
    v16 sc[P], of[P];
    for (int p = 0; p < P; ++p) {
      sc[p] = load(w.scale.get() + (pi[p] * groups + g) * kPanel);
      of[p] = load(w.offset.get() + (pi[p] * groups + g) * kPanel);
    }
    const int64_t k0 = g * w.group, k1 = k0 + w.group;
    if (w.bits == 8) {
      for (int64_t kk = k0; kk < k1; ++kk) {
        v16 b[P];
        for (int p = 0; p < P; ++p)
          b[p] = dequant8(w.data.get() + pi[p] * panelBytes + kk * rowBytes, sc[p], of[p]);
        for (int m = 0; m < M; ++m) {
          const v16 am = splat(a[m * lda + kk]);
          for (int p = 0; p < P; ++p) acc[m][p] += am * b[p];
        }
      }
    } else {
      for (int64_t kk = k0; kk < k1; kk += 2) {
        v16 lo[P], hi[P];
        for (int p = 0; p < P; ++p)
          dequant4(w.data.get() + pi[p] * panelBytes + kk / 2 * rowBytes, sc[p], of[p], lo[p], hi[p]);
        for (int m = 0; m < M; ++m) {
          const v16 a0 = splat(a[m * lda + kk]), a1 = splat(a[m * lda + kk + 1]);
          for (int p = 0; p < P; ++p) acc[m][p] += a0 * lo[p] + a1 * hi[p];
        }
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < np; ++p) {
      const int64_t col = (p0 + p) * kPanel;
      const int64_t cols = std::min<int64_t>(kPanel, w.n - col);
      float out[kPanel];
      const v16 v = acc[m][p] * alpha;
      std::memcpy(out, &v, sizeof(out));
      std::copy_n(out, cols, c + m * ldc + col);
    }
}

/// Fewer panels a block than the f32 kernel: the dequantized weight
/// vectors and their scales take registers too.
constexpr int quantPanelsFor(int m) { return m <= 2 ? 6 : m <= 4 ? 4 : m <= 6 ? 3 : 2; }

template <int M>
void quantRows(const float *a, int64_t lda, const SkinnyQuantWeight &w, int64_t p0, int np,
               float *c, int64_t ldc, float alpha) {
  quantBlock<M, quantPanelsFor(M)>(a, lda, w, p0, np, c, ldc, alpha);
}

using QuantRowsFn = void (*)(const float *, int64_t, const SkinnyQuantWeight &, int64_t, int,
                             float *, int64_t, float);
constexpr QuantRowsFn kQuantRows[kMaxBlockRows + 1] = {
    nullptr, quantRows<1>, quantRows<2>, quantRows<3>, quantRows<4>,
    quantRows<5>, quantRows<6>, quantRows<7>, quantRows<8>};

template <typename T> std::shared_ptr<T> alignedArray(int64_t count) {
  const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
  T *p = static_cast<T *>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
  return std::shared_ptr<T>(p, [](T *q) { std::free(q); });
}

} // namespace

SkinnyQuantWeight packSkinnyQuant(const uint8_t *weight, int64_t n, int64_t k, int bits,
                                  int64_t group, const float *scale, const uint8_t *zero) {
  SkinnyQuantWeight w;
  w.k = k, w.n = n, w.bits = bits, w.group = group ? group : k;
  w.panels = (n + kPanel - 1) / kPanel;
  const int64_t groups = k / w.group;
  const int64_t rows = bits == 8 ? k : k / 2; // byte rows of a panel
  w.data = alignedArray<uint8_t>(w.panels * rows * kPanel);
  w.scale = alignedArray<float>(w.panels * groups * kPanel);
  w.offset = alignedArray<float>(w.panels * groups * kPanel);
  parallelFor(w.panels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t col = p * kPanel + j;
        const bool real = col < n;
        for (int64_t r = 0; r < rows; ++r)
          w.data.get()[(p * rows + r) * kPanel + j] = real ? weight[col * rows + r] : 0;
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t at = (p * groups + g) * kPanel + j;
          const float s = real ? scale[col * (scale ? groups : 0) + g] : 0.0f;
          float z = bits == 4 ? 8.0f : 0.0f;
          if (zero && real)
            z = bits == 8 ? static_cast<float>(static_cast<int8_t>(zero[col * groups + g]))
                          : static_cast<float>(zero[col * groups + g]);
          w.scale.get()[at] = s;
          w.offset.get()[at] = -z * s;
        }
      }
  });
  return w;
}

void skinnyQuantGemm(int64_t m, const float *a, int64_t lda, const SkinnyQuantWeight &w,
                     float *c, int64_t ldc, float alpha,
                     const std::function<void(int64_t, int64_t)> &finish) {
  const int firstRows = static_cast<int>(std::min<int64_t>(m, kMaxBlockRows));
  const int64_t width = quantPanelsFor(firstRows);
  const int64_t blocks = (w.panels + width - 1) / width;
  parallelFor(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t p0 = blk * width;
      const int np = static_cast<int>(std::min<int64_t>(width, w.panels - p0));
      for (int64_t r0 = 0; r0 < m; r0 += kMaxBlockRows) {
        const int rowsHere = static_cast<int>(std::min<int64_t>(kMaxBlockRows, m - r0));
        kQuantRows[rowsHere](a + r0 * lda, lda, w, p0, np, c + r0 * ldc, ldc, alpha);
      }
      if (finish) finish(p0 * kPanel, std::min<int64_t>(w.n, (p0 + np) * kPanel));
    }
  });
}

namespace {

/// Whether this CPU runs the VNNI kernel (the build's AVX-512 set does not
/// assume it).
bool hasVnni() {
#if defined(DS_CPU_ISA_AVX512) && defined(__x86_64__)
  static const bool yes = __builtin_cpu_supports("avx512vnni");
  return yes;
#else
  return false;
#endif
}

#if defined(DS_CPU_ISA_AVX512)
/// Rows [0, M) times panels [p0, p0 + np) (np <= P) of a VNNI-packed
/// weight: int32 sums per group, scaled into float totals kept in `tot`
/// (M x P x 16, L1), then by the row scales into C.
template <int M, int P>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void
vnniBlock(const int8_t *xq, const int32_t *xsum, const float *rowScale, const SkinnyVnniWeight &w,
          int64_t p0, int np, float *c, int64_t ldc) {
  const int64_t k = w.k, groups = k / w.group;
  const int64_t step = w.bits == 8 ? 4 : 8;             // k per 64-byte row
  const int64_t panelBytes = k / step * 64;
  alignas(64) float tot[M][P][kPanel] = {};
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t g = 0; g < groups; ++g) {
    __m512i acc[M][P];
    for (int m = 0; m < M; ++m)
      for (int p = 0; p < P; ++p) acc[m][p] = _mm512_setzero_si512();
    const int64_t k0 = g * w.group, k1 = k0 + w.group;
    for (int64_t kk = k0; kk < k1; kk += step) {
      if (w.bits == 8) {
        __m512i b[P];
        for (int p = 0; p < P; ++p)
          b[p] = _mm512_loadu_si512(w.data.get() + (p0 + (p < np ? p : 0)) * panelBytes + kk / 4 * 64);
        for (int m = 0; m < M; ++m) {
          int32_t four;
          std::memcpy(&four, xq + m * k + kk, 4);
          const __m512i a = _mm512_set1_epi32(four);
          for (int p = 0; p < P; ++p) acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], b[p], a);
        }
      } else {
        __m512i lo[P], hi[P];
        for (int p = 0; p < P; ++p) {
          const __m512i raw =
              _mm512_loadu_si512(w.data.get() + (p0 + (p < np ? p : 0)) * panelBytes + kk / 8 * 64);
          lo[p] = _mm512_and_si512(raw, low);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
        }
        for (int m = 0; m < M; ++m) {
          int32_t four0, four1;
          std::memcpy(&four0, xq + m * k + kk, 4);
          std::memcpy(&four1, xq + m * k + kk + 4, 4);
          const __m512i a0 = _mm512_set1_epi32(four0), a1 = _mm512_set1_epi32(four1);
          for (int p = 0; p < P; ++p) {
            acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], lo[p], a0);
            acc[m][p] = _mm512_dpbusd_epi32(acc[m][p], hi[p], a1);
          }
        }
      }
    }
    // sum_k (q - zero) x = acc - zero * sum_k x, times the group's scale.
    for (int m = 0; m < M; ++m) {
      const __m512i corr = _mm512_set1_epi32(w.zero * xsum[m * groups + g]);
      for (int p = 0; p < P; ++p) {
        const __m512 s = _mm512_loadu_ps(w.scale.get() + ((p0 + (p < np ? p : 0)) * groups + g) * kPanel);
        const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[m][p], corr));
        _mm512_store_ps(tot[m][p], _mm512_fmadd_ps(v, s, _mm512_load_ps(tot[m][p])));
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < np; ++p) {
      const int64_t col = (p0 + p) * kPanel;
      const int64_t cols = std::min<int64_t>(kPanel, w.n - col);
      for (int64_t j = 0; j < cols; ++j) c[m * ldc + col + j] = tot[m][p][j] * rowScale[m];
    }
}

constexpr int vnniPanelsFor(int m) { return m <= 2 ? 8 : m <= 4 ? 4 : m <= 6 ? 3 : 2; }

template <int M>
void vnniRows(const int8_t *xq, const int32_t *xsum, const float *rs, const SkinnyVnniWeight &w,
              int64_t p0, int np, float *c, int64_t ldc) {
  vnniBlock<M, vnniPanelsFor(M)>(xq, xsum, rs, w, p0, np, c, ldc);
}

using VnniRowsFn = void (*)(const int8_t *, const int32_t *, const float *,
                            const SkinnyVnniWeight &, int64_t, int, float *, int64_t);
constexpr VnniRowsFn kVnniRows[kMaxBlockRows + 1] = {
    nullptr, vnniRows<1>, vnniRows<2>, vnniRows<3>, vnniRows<4>,
    vnniRows<5>, vnniRows<6>, vnniRows<7>, vnniRows<8>};
#endif

} // namespace

SkinnyVnniWeight packSkinnyVnni(const uint8_t *weight, int64_t n, int64_t k, int bits,
                                int64_t group, const float *scale) {
  SkinnyVnniWeight w;
  const int64_t step = bits == 8 ? 4 : 8;
  const int64_t g = group ? group : k;
  if (!hasVnni() || k % step || g % step) return w; // data stays null
  w.k = k, w.n = n, w.bits = bits, w.group = g, w.zero = bits == 8 ? 128 : 8;
  w.panels = (n + kPanel - 1) / kPanel;
  const int64_t groups = k / g, panelBytes = k / step * 64;
  w.data = alignedArray<uint8_t>(w.panels * panelBytes);
  w.scale = alignedArray<float>(w.panels * groups * kPanel);
  parallelFor(w.panels, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t col = p * kPanel + j;
        const bool real = col < n;
        auto q = [&](int64_t kk) -> int { // the value as stored, 0..255 or 0..15
          if (!real) return bits == 8 ? 128 : 8;
          if (bits == 8) return static_cast<int8_t>(weight[col * k + kk]) + 128;
          const uint8_t byte = weight[col * (k / 2) + kk / 2];
          return kk % 2 ? byte >> 4 : byte & 0xF;
        };
        for (int64_t kb = 0; kb < k / step; ++kb)
          for (int64_t b = 0; b < 4; ++b) {
            const int64_t kk = kb * step + b;
            w.data.get()[p * panelBytes + kb * 64 + j * 4 + b] =
                bits == 8 ? static_cast<uint8_t>(q(kk))
                          : static_cast<uint8_t>(q(kk) | (q(kk + 4) << 4));
          }
        for (int64_t gi = 0; gi < groups; ++gi)
          w.scale.get()[(p * groups + gi) * kPanel + j] = real ? scale[col * groups + gi] : 0.0f;
      }
  });
  return w;
}

void skinnyVnniGemm(int64_t m, const int8_t *xq, const int32_t *xsum, const float *rowScale,
                    const SkinnyVnniWeight &w, float *c, int64_t ldc,
                    const std::function<void(int64_t, int64_t)> &finish) {
#if defined(DS_CPU_ISA_AVX512)
  const int firstRows = static_cast<int>(std::min<int64_t>(m, kMaxBlockRows));
  const int64_t width = vnniPanelsFor(firstRows), groups = w.k / w.group;
  const int64_t blocks = (w.panels + width - 1) / width;
  parallelFor(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t p0 = blk * width;
      const int np = static_cast<int>(std::min<int64_t>(width, w.panels - p0));
      for (int64_t r0 = 0; r0 < m; r0 += kMaxBlockRows) {
        const int rowsHere = static_cast<int>(std::min<int64_t>(kMaxBlockRows, m - r0));
        kVnniRows[rowsHere](xq + r0 * w.k, xsum + r0 * groups, rowScale + r0, w, p0, np,
                            c + r0 * ldc, ldc);
      }
      if (finish) finish(p0 * kPanel, std::min<int64_t>(w.n, (p0 + np) * kPanel));
    }
  });
#else
  (void)m, (void)xq, (void)xsum, (void)rowScale, (void)w, (void)c, (void)ldc, (void)finish;
#endif
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
