// quantized_matmul: f32 activations times an int8 or int4 weight [N, K]
// (per-channel or group-wise scales, optional zero points), then
// fused_matmul's epilogue.
//
// Three paths, one arithmetic (the op's: x' x dequantized W):
//  - few rows (a decode step's): the skinny kernel streams the weight,
//    repacked once into panels, dequantizing as it reads; a memory-bound
//    product reads a quarter (int8) or an eighth (int4) of the f32 bytes;
//  - many rows with quantized activations (int8 dynamic per row, or
//    onnxruntime's uint8 per tensor), per-channel weights without zero
//    points: oneDNN's int8 matmul (VNNI or AMX dot products; exact int32
//    sums), the activation scales applied to its f32 output;
//  - anything else (weight-only, group-wise): the weight dequantized a
//    block of columns at a time into a thread's scratch and multiplied by
//    the f32 GEMM.
// Quantized activations are the op's x' = q * scale; the float paths
// compute with x' as floats, so they differ from the int8 path only in
// rounding order.
#ifdef DS_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include <atomic>
#include <cmath>
#include <map>
#include <unordered_map>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/kernels/ElementMath.h"

#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/SoftmaxRows.h"
#include "runtime/cpu/MatmulEpilogue.h"
#include "runtime/cpu/SkinnyGemm.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

enum class ActQuant { None, PerRow, PerTensor, Static };

/// Activations rounded to uint8 with one scale and zero point: the data's
/// (dynamic per tensor) or fixed at compile time (static).
bool perTensor(ActQuant aq) { return aq == ActQuant::PerTensor || aq == ActQuant::Static; }

/// ONNX DynamicQuantizeLinear's scale and zero point for [lo, hi] widened
/// to include 0.
void dynamicRange(float lo, float hi, float &scale, uint8_t &zero) {
  lo = std::min(lo, 0.0f), hi = std::max(hi, 0.0f);
  scale = (hi - lo) / 255.0f;
  if (scale == 0.0f) {
    zero = 0;
    return;
  }
  const float z = std::nearbyint(0.0f - lo / scale);
  zero = static_cast<uint8_t>(std::min(std::max(z, 0.0f), 255.0f));
}


/// The activations the op multiplies: x itself, or x quantized and
/// dequantized (x' = q * scale, per row or per tensor). `rowScale`, if
/// given, gets each row's scale (per tensor: the tensor's), `q` the
/// quantized values (s8 per row, u8 per tensor), `zero` the tensor's zero
/// point. Static quantization reads its scale and zero point from
/// `rowScale[0]` and `*zero`.
void quantizeRows(ActQuant aq, const float *x, int64_t rows, int64_t k, float *dequant,
                  float *rowScale, void *q, uint8_t *zero) {
  if (aq == ActQuant::Static) {
    const float s = rowScale[0];
    const uint8_t z = *zero;
    parallelFor(rows * k, 1 << 14, [&](int64_t i0, int64_t i1) {
      roundToUint8(x + i0, i1 - i0, s, z, q ? static_cast<uint8_t *>(q) + i0 : nullptr,
                   dequant ? dequant + i0 : nullptr);
    });
    std::fill(rowScale, rowScale + rows, s);
    return;
  }
  if (aq == ActQuant::PerTensor) {
    const int64_t total = rows * k;
    // The range in parallel chunks, then one scale for all.
    constexpr int64_t kChunk = 16384;
    const int64_t chunks = (total + kChunk - 1) / kChunk;
    std::vector<float> los(static_cast<size_t>(chunks), 0.0f), his(static_cast<size_t>(chunks), 0.0f);
    parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const float *xc = x + ch * kChunk;
        const int64_t len = std::min(kChunk, total - ch * kChunk);
        // Lanes of running minima and maxima (RowMath.h's form: GCC
        // leaves a single running min scalar).
        float lo[kLanes] = {}, hi[kLanes] = {};
        int64_t i = 0;
        for (; i + kLanes <= len; i += kLanes)
#pragma omp simd
          for (int64_t l = 0; l < kLanes; ++l) {
            const float v = xc[i + l];
            lo[l] = v < lo[l] ? v : lo[l];
            hi[l] = v > hi[l] ? v : hi[l];
          }
        for (; i < len; ++i) lo[0] = std::min(lo[0], xc[i]), hi[0] = std::max(hi[0], xc[i]);
        los[ch] = *std::min_element(lo, lo + kLanes);
        his[ch] = *std::max_element(hi, hi + kLanes);
      }
    });
    float lo = 0, hi = 0;
    for (int64_t ch = 0; ch < chunks; ++ch) lo = std::min(lo, los[ch]), hi = std::max(hi, his[ch]);
    float s;
    uint8_t z;
    dynamicRange(lo, hi, s, z);
    parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const int64_t i0 = ch * kChunk, i1 = std::min(total, i0 + kChunk);
        roundToUint8(x + i0, i1 - i0, s, z, q ? static_cast<uint8_t *>(q) + i0 : nullptr,
                     dequant ? dequant + i0 : nullptr);
      }
    });
    if (s == 0.0f) { // an all-zero operand: every value its zero point
      if (q) std::fill_n(static_cast<uint8_t *>(q), total, z);
      if (dequant) std::fill_n(dequant, total, 0.0f);
    }
    if (rowScale) std::fill(rowScale, rowScale + rows, s);
    if (zero) *zero = z;
    return;
  }
  parallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * k;
      float amax = 0;
#pragma omp simd reduction(max : amax)
      for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(xr[i]));
      const float s = amax > 0 ? amax / 127.0f : 1.0f, inv = 1.0f / s;
      if (rowScale) rowScale[r] = s;
      // Separate loops, each vectorized: |x * inv| <= 127 needs no clamp.
      if (q) {
        int8_t *__restrict qr = static_cast<int8_t *>(q) + r * k;
        const float *__restrict xv = xr;
        const float iv = inv;
#pragma omp simd
        for (int64_t i = 0; i < k; ++i)
          qr[i] = static_cast<int8_t>(static_cast<int32_t>(std::nearbyint(xv[i] * iv)));
      }
      if (dequant) {
        float *dr = dequant + r * k;
#pragma omp simd
        for (int64_t i = 0; i < k; ++i) dr[i] = std::nearbyint(xr[i] * inv) * s;
      }
    }
  });
}

struct QuantizedMatmul {
  const float *x = nullptr;
  int64_t rows = 0, k = 0, n = 0;
  int bits = 8;
  int64_t group = 0; // K values per scale (k: per channel)
  const uint8_t *weight = nullptr, *zero = nullptr;
  const float *scale = nullptr;
  ActQuant aq = ActQuant::None;
  float inputScale = 0;    // static: the activations' scale
  uint8_t inputZero = 0;   // and zero point
  float roundScale = 0, roundZero = 0; // the result's uint8 grid (0: none)
  float *out = nullptr;
  std::shared_ptr<const Epilogue> e;
  bool aliasedAddend = false; // the addend shares the result's bytes
  SkinnyQuantWeight skinny;   // few rows
  SkinnyVnniWeight vnni;      // few rows, int8 activations, a CPU with VNNI
#ifdef DS_GEMM_ONEDNN
  // Many rows, int8 activations: oneDNN's int8 matmul.
  struct Int8 {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    dnnl::matmul matmul;
    dnnl::memory src, weights, dst, scratchpad;
    std::vector<int32_t> columnSums; // per tensor: sum_k W[n, k], for the zero point
    int64_t blockRows = 0; // rows per execution: their int32 sums stay in cache for the epilogue
  };
  std::shared_ptr<Int8> int8;
#endif

  /// W[n, k] as a float.
  float at(int64_t row, int64_t col) const {
    const int64_t g = col / group, groups = k / group;
    const float s = scale[row * groups + g];
    if (bits == 8) {
      const float z = zero ? static_cast<int8_t>(zero[row * groups + g]) : 0;
      return (static_cast<int8_t>(weight[row * k + col]) - z) * s;
    }
    const uint8_t byte = weight[row * (k / 2) + col / 2];
    const float z = zero ? zero[row * groups + g] : 8;
    return ((col % 2 ? byte >> 4 : byte & 0xF) - z) * s;
  }

  /// The epilogue over columns [c0, c1) of the product `p` into `out`.
  void finish(const float *p, int64_t c0, int64_t c1) const {
    if (e) e->apply(p, out, e->addend, n, 0, rows, c0, c1);
    round(0, rows, c0, c1);
  }

  /// The stored result's rows [r0, r1) x columns [c0, c1) rounded to the
  /// uint8 grid of round_scale and back (a QDQ model's QuantizeLinear /
  /// DequantizeLinear after the product), when the step asks.
  void round(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    if (roundScale == 0) return;
    for (int64_t r = r0; r < r1; ++r)
      roundToUint8(out + r * n + c0, c1 - c0, roundScale, roundZero, nullptr, out + r * n + c0);
  }

  absl::Status run() const {
    // x' (and for oneDNN the int8 values and row scales). Scratch of the
    // calling thread, reached by the workers through pointers (a
    // thread_local named inside their lambdas would be their own).
    thread_local std::vector<float> xs, rowScaleStore, product;
    thread_local std::vector<uint8_t> xq;
    const float *a = x;
    const bool viaInt8 =
#ifdef DS_GEMM_ONEDNN
        int8 != nullptr;
#else
        false;
#endif
    uint8_t zp = 0;
    const float *rowScales = nullptr;
    if (vnni.data) {
      // On int8 dot products (a few rows: decode; or group-wise weights,
      // which oneDNN's int8 product does not take): the rows' int8 values,
      // their scales and their sums per group.
      thread_local std::vector<int8_t> xi;
      thread_local std::vector<float> rs;
      thread_local std::vector<int32_t> sums;
      const int64_t groups = k / group;
      xi.resize(static_cast<size_t>(rows * k));
      rs.resize(static_cast<size_t>(rows));
      sums.assign(static_cast<size_t>(rows * groups), 0);
      quantizeRows(ActQuant::PerRow, x, rows, k, nullptr, rs.data(), xi.data(), nullptr);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          int32_t sum = 0;
          for (int64_t kk = g * group; kk < (g + 1) * group; ++kk) sum += xi[r * k + kk];
          sums[r * groups + g] = sum;
        }
      float *p = out;
      if (e && aliasedAddend) {
        product.resize(static_cast<size_t>(rows * n));
        p = product.data();
      }
      skinnyVnniGemm(rows, xi.data(), sums.data(), rs.data(), vnni, p, n,
                     [&](int64_t c0, int64_t c1) { finish(p, c0, c1); });
      return absl::OkStatus();
    }
    if (aq != ActQuant::None) {
      if (!viaInt8) xs.resize(static_cast<size_t>(rows * k));
      rowScaleStore.resize(static_cast<size_t>(std::max<int64_t>(rows, 1)));
      rowScaleStore[0] = inputScale;
      zp = inputZero;
      if (viaInt8) xq.resize(static_cast<size_t>(rows * k));
      quantizeRows(aq, x, rows, k, viaInt8 ? nullptr : xs.data(), rowScaleStore.data(),
                   viaInt8 ? xq.data() : nullptr, &zp);
      if (!viaInt8) a = xs.data();
      rowScales = rowScaleStore.data();
    }
    // The product goes to the result, or to scratch when the epilogue
    // reads the result's bytes (an addend in place) or needs p and y apart.
    float *p = out;
    if (e && aliasedAddend) {
      product.resize(static_cast<size_t>(rows * n));
      p = product.data();
    }
#ifdef DS_GEMM_ONEDNN
    if (viaInt8) {
      // The exact int32 sums of q x W; the scales and the zero point
      // (sum_k (q - z) w = sum_k q w - z sum_k w) after.
      thread_local std::vector<int32_t> acc;
      Int8 &q = *int8;
      acc.resize(static_cast<size_t>(q.blockRows * n));
      const int32_t *colSums = q.columnSums.data();
      const int32_t z = perTensor(aq) ? zp : 0;
      for (int64_t b0 = 0; b0 < rows; b0 += q.blockRows) {
        q.src.set_data_handle(xq.data() + b0 * k);
        q.dst.set_data_handle(acc.data());
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, q.src},
                                                   {DNNL_ARG_WEIGHTS, q.weights},
                                                   {DNNL_ARG_DST, q.dst},
                                                   {DNNL_ARG_SCRATCHPAD, q.scratchpad}};
        try {
          q.matmul.execute(q.stream, args);
          q.stream.wait();
        } catch (const dnnl::error &err) {
          return absl::InternalError(std::string("oneDNN int8 matmul failed: ") + err.what());
        }
        // Each row's scale (per tensor: the tensor's) times each column's,
        // then the epilogue and the rounding, a row at a time while the
        // block's sums are in cache.
        const int32_t *block = acc.data(); // (acc named in a worker would be the worker's)
        parallelFor(q.blockRows, 8, [&](int64_t i0, int64_t i1) {
          for (int64_t r = b0 + i0; r < b0 + i1; ++r) {
            float *pr = p + r * n;
            const int32_t *ar = block + (r - b0) * n;
            const float s = rowScales[r];
            if (z) {
#pragma omp simd
              for (int64_t c = 0; c < n; ++c)
                pr[c] = s * scale[c] * static_cast<float>(ar[c] - z * colSums[c]);
            } else {
#pragma omp simd
              for (int64_t c = 0; c < n; ++c) pr[c] = s * scale[c] * static_cast<float>(ar[c]);
            }
            if (e) e->apply(p, out, e->addend, n, r, r + 1, 0, n);
            round(r, r + 1, 0, n);
          }
        });
      }
      return absl::OkStatus();
    }
#endif
    if (skinny.data) {
      skinnyQuantGemm(rows, a, k, skinny, p, n, 1.0f,
                      [&](int64_t c0, int64_t c1) { finish(p, c0, c1); });
      return absl::OkStatus();
    }
    // The weight dequantized a block of columns at a time, transposed to
    // [K, cols], times x' by the f32 GEMM.
    constexpr int64_t kCols = 256; // wide blocks: the GEMM's own blocking does the rest
    const int64_t blocks = (n + kCols - 1) / kCols;
    parallelFor(blocks, 1, [&](int64_t lo, int64_t hi) {
      thread_local std::vector<float> wb;
      wb.resize(static_cast<size_t>(k * kCols));
      for (int64_t blk = lo; blk < hi; ++blk) {
        const int64_t c0 = blk * kCols, cols = std::min(kCols, n - c0);
        for (int64_t j = 0; j < cols; ++j)
          for (int64_t kk = 0; kk < k; ++kk) wb[kk * cols + j] = at(c0 + j, kk);
        sgemm(false, false, rows, cols, k, 1.0f, a, k, wb.data(), cols, 0.0f, p + c0, n);
        finish(p, c0, c0 + cols);
      }
    });
    return absl::OkStatus();
  }
};

#ifdef DS_GEMM_ONEDNN
/// oneDNN's int8 product of the quantized rows ([rows, k], s8 per row or
/// u8 per tensor) and the s8 weight, exact int32 sums (no scales or zero
/// points: those keep oneDNN 2.6 off its AMX / VNNI brgemm kernels); null
/// where oneDNN declines.
std::shared_ptr<QuantizedMatmul::Int8> makeInt8(const QuantizedMatmul &q) {
  using namespace dnnl;
  using dt = memory::data_type;
  try {
    auto r = std::make_shared<QuantizedMatmul::Int8>();
    // Blocks of rows whose int32 sums fit in 512 KB (L2): a [512 x 4096]
    // product's 8 MB of sums would otherwise go to memory and back before
    // the epilogue. A divisor of the rows, at least an AMX tile's 16, so
    // one primitive serves every block; else all rows at once.
    r->blockRows = q.rows;
    const int64_t fit = (int64_t(512) << 10) / (4 * q.n);
    for (int64_t b = std::min(fit, q.rows); b >= 16; --b)
      if (q.rows % b == 0) {
        r->blockRows = b;
        break;
      }
    const memory::dims src{r->blockRows, q.k}, wdims{q.k, q.n}, dst{r->blockRows, q.n};
    memory::desc srcMd(src, perTensor(q.aq) ? dt::u8 : dt::s8, memory::format_tag::ab);
    // The weight [N, K] row-major is [K, N] column-major ("ba").
    memory::desc wUser(wdims, dt::s8, memory::format_tag::ba);
    memory::desc wAny(wdims, dt::s8, memory::format_tag::any);
    memory::desc dstMd(dst, dt::s32, memory::format_tag::ab);
    // Its scratchpad is ours, allocated once (oneDNN's own is allocated
    // and page-faulted in on every run).
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    matmul::primitive_desc pd(matmul::desc(srcMd, wAny, dstMd), attr, r->engine);
    r->scratchpad = memory(pd.scratchpad_desc(), r->engine);
    r->matmul = matmul(pd);
    memory user(wUser, r->engine, const_cast<uint8_t *>(q.weight));
    r->weights = memory(pd.weights_desc(), r->engine);
    reorder(user, r->weights).execute(r->stream, user, r->weights);
    r->stream.wait();
    if (perTensor(q.aq)) {
      r->columnSums.assign(static_cast<size_t>(q.n), 0);
      for (int64_t c = 0; c < q.n; ++c)
        for (int64_t kk = 0; kk < q.k; ++kk)
          r->columnSums[c] += static_cast<int8_t>(q.weight[c * q.k + kk]);
    }
    r->src = memory(srcMd, r->engine, DNNL_MEMORY_NONE);
    r->dst = memory(dstMd, r->engine, DNNL_MEMORY_NONE);
    return r;
  } catch (const dnnl::error &err) {
    if (std::getenv("DS_DEBUG_INT8")) std::fprintf(stderr, "int8 declined: %s\n", err.what());
    return nullptr;
  }
}
#endif

absl::StatusOr<PreparedStep> prepareQuantizedMatmul(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(bool hasZero, c.flagAttr("zero_point"));
  DS_ASSIGN_OR_RETURN(bool hasBias, c.flagAttr("bias"));
  DS_ASSIGN_OR_RETURN(bool hasAddend, c.flagAttr("addend"));
  const size_t arity = 3 + hasZero + hasBias + hasAddend;
  DS_RETURN_IF_ERROR(c.expectArity(arity, arity, 1));
  const TensorView &x = c.in[0], &w = c.in[1], &s = c.in[2];
  DS_RETURN_IF_ERROR(c.expectDType(x, plan::F32, "lhs"));
  DS_RETURN_IF_ERROR(c.expectDType(s, plan::F32, "scale"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  auto q = std::make_shared<QuantizedMatmul>();
  q->bits = 8;
  if (c.hasAttr("bits")) {
    DS_ASSIGN_OR_RETURN(int64_t b, c.intAttr("bits"));
    q->bits = static_cast<int>(b);
  }
  if (q->bits != 8 && q->bits != 4) return c.error("bits must be 8 or 4");
  if (x.rank() < 1 || w.rank() != 2) return c.error("lhs must have rank >= 1 and the weight rank 2");
  q->k = x.shape.back(), q->n = w.shape[0];
  q->rows = q->k ? x.numel / q->k : 0;
  DS_RETURN_IF_ERROR(c.expectDType(w, q->bits == 8 ? plan::I8 : plan::U8, "weight"));
  if (q->bits == 8 ? w.shape[1] != q->k : (q->k % 2 || w.shape[1] * 2 != q->k))
    return c.error("the weight must be [N, K] (int8) or [N, K / 2] (int4) for K = " +
                   std::to_string(q->k) + ", got [" + shapeToString(w.shape) + "]");
  int64_t group = 0;
  if (c.hasAttr("group_size")) {
    DS_ASSIGN_OR_RETURN(group, c.intAttr("group_size"));
  }
  if (group < 0 || (group && (q->k % group || (q->bits == 4 && group % 2))))
    return c.error("group_size must be 0 or divide K (and be even for int4)");
  q->group = group ? group : q->k;
  const std::vector<int64_t> scaleShape =
      group ? std::vector<int64_t>{q->n, q->k / group} : std::vector<int64_t>{q->n};
  DS_RETURN_IF_ERROR(c.expectShape(s, scaleShape, "scale"));
  std::string aq = "none";
  if (c.hasAttr("activation_quant")) {
    DS_ASSIGN_OR_RETURN(aq, c.stringAttr("activation_quant"));
  }
  if (aq == "dynamic_per_row") q->aq = ActQuant::PerRow;
  else if (aq == "dynamic_per_tensor") q->aq = ActQuant::PerTensor;
  else if (aq == "static_per_tensor") q->aq = ActQuant::Static;
  else if (aq != "none")
    return c.error("activation_quant must be none, dynamic_per_row, dynamic_per_tensor or "
                   "static_per_tensor, got '" + aq + "'");
  if (q->aq == ActQuant::Static) {
    DS_ASSIGN_OR_RETURN(double inScale, c.floatAttr("input_scale"));
    DS_ASSIGN_OR_RETURN(int64_t inZero, c.intAttr("input_zero_point"));
    if (!(inScale > 0) || !std::isfinite(static_cast<float>(inScale)) || inZero < 0 || inZero > 255)
      return c.error("static_per_tensor needs a positive finite input_scale and an "
                     "input_zero_point in [0, 255]");
    q->inputScale = static_cast<float>(inScale);
    q->inputZero = static_cast<uint8_t>(inZero);
  }
  size_t next = 3;
  if (hasZero) {
    const TensorView &z = c.in[next++];
    DS_RETURN_IF_ERROR(c.expectDType(z, w.dtype, "zero_point"));
    DS_RETURN_IF_ERROR(c.expectShape(z, scaleShape, "zero_point"));
    if (q->aq != ActQuant::None)
      return c.error("quantized activations take a weight without zero points");
    q->zero = static_cast<const uint8_t *>(z.data);
  }
  std::vector<int64_t> rs = x.shape;
  rs.back() = q->n;
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], rs, "result"));
  auto e = std::make_shared<Epilogue>();
  const TensorView *bias = hasBias ? &c.in[next++] : nullptr;
  const TensorView *addend = hasAddend ? &c.in[next++] : nullptr;
  DS_RETURN_IF_ERROR(readEpilogue(c, q->n, bias, addend, *e));
  if (e->combine != Epilogue::Combine::Add && e->combine != Epilogue::Combine::Mul)
    return c.error("combine must be add or mul");
  q->x = x.as<float>();
  q->weight = static_cast<const uint8_t *>(w.data);
  q->scale = s.as<float>();
  q->out = c.out[0].as<float>();
  const int64_t numel = c.out[0].numel;
  q->aliasedAddend = e->addend && e->addend < q->out + numel && q->out < e->addend + numel;
  const bool plain = e->alpha == 1.0f && !e->bias && !e->addend && e->act == Epilogue::Act::None;
  if (!plain) q->e = e;
  if (c.hasAttr("round_scale")) {
    DS_ASSIGN_OR_RETURN(double rs, c.floatAttr("round_scale"));
    DS_ASSIGN_OR_RETURN(int64_t rz, c.intAttr("round_zero_point"));
    if (!(rs > 0) || !std::isfinite(static_cast<float>(rs)) || rz < 0 || rz > 255)
      return c.error("round_scale must be positive and finite and round_zero_point in [0, 255]");
    q->roundScale = static_cast<float>(rs);
    q->roundZero = static_cast<float>(rz);
  }
  // Int8 activations per row on int8 dot products where the CPU has them:
  // the streaming kernel for a few rows, and for many when the weight is
  // group-wise or int4 (oneDNN's int8 product takes per-channel int8 only).
  // Repacked copies are made once, here: only of a weight no run changes
  // (a weight fetched from host memory each run is read as it is).
  DS_ASSIGN_OR_RETURN(bool constant, c.flagAttr("constant_weight"));
  const bool oneDnnInt8 = q->bits == 8 && group == 0 && !q->zero;
  if (constant) {
    if (q->aq == ActQuant::PerRow && (q->rows <= kSkinnyMaxRows || !oneDnnInt8))
      q->vnni = packSkinnyVnni(q->weight, q->n, q->k, q->bits, group, q->scale);
    if (q->rows <= kSkinnyMaxRows && !q->vnni.data) {
      q->skinny = packSkinnyQuant(q->weight, q->n, q->k, q->bits, group, q->scale, q->zero);
    }
#ifdef DS_GEMM_ONEDNN
    else if (!q->vnni.data && q->rows > kSkinnyMaxRows && q->aq != ActQuant::None && oneDnnInt8) {
      q->int8 = makeInt8(*q);
    }
#endif
  }
  return PreparedStep([q] { return q->run(); });
}

/// dynamic_quantize: ONNX DynamicQuantizeLinear, the arithmetic
/// quantized_matmul's dynamic_per_tensor activations use.
absl::StatusOr<PreparedStep> prepareDynamicQuantize(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 3));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::U8, "y"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "y"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[1], plan::F32, "scale"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], {}, "scale"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[2], plan::U8, "zero_point"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[2], {}, "zero_point"));
  const float *x = c.in[0].as<float>();
  const int64_t n = c.in[0].numel;
  uint8_t *y = static_cast<uint8_t *>(c.out[0].data);
  float *scale = c.out[1].as<float>();
  uint8_t *zero = static_cast<uint8_t *>(c.out[2].data);
  return PreparedStep([=] {
    float s = 0;
    quantizeRows(ActQuant::PerTensor, x, 1, n, nullptr, &s, y, zero);
    *scale = s;
    return absl::OkStatus();
  });
}

} // namespace

void registerQuantizedMatmulKernel(KernelRegistry &r) {
  r.add("quantized_matmul", prepareQuantizedMatmul);
  r.add("dynamic_quantize", prepareDynamicQuantize);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
