// quantized_conv: a convolution of activations quantized to uint8 with a
// fixed scale and zero point (a QDQ model's QuantizeLinear, QLinearConv's
// input) and an int8 weight with one scale per output channel, then
// ds.conv's epilogue (bias, residual, clamp, hard-swish).
//
// The activations are rounded to uint8 channels-last (transposing a
// channels-first input as they are rounded) and oneDNN's int8 convolution
// (VNNI or AMX dot products) sums q x w exactly in int32. A channels-last
// convolution has oneDNN write the f32 result itself, scales, bias,
// residual and clamp applied as it stores (a nonzero zero point comes off
// with the bias: the input is rounded into a buffer padded with the zero
// point, so every window sums all its taps); otherwise one pass over the
// int32 sums applies the zero point, the scales and the epilogue while
// writing the plan's layout. The zero point comes out of the sums as
//   sum (q - z) w = sum q w - z * corr[p, m],
// corr[p, m] the sum of the weight taps of output position p that land
// inside the input (the padding is of real zeros), counted once at load
// (one row for the interior, one per border position).
// Without oneDNN (where it declines, or for a weight that is not the
// plan's own) a direct integer loop sums (q - z) x w itself.
#ifdef DS_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif
#include <atomic>
#include <cmath>
#include <unordered_map>

#include "runtime/cpu/KernelFamilies.h"

#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/ConvGeometry.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {
using namespace conv;

struct QuantizedConv {
  ConvGeometry g;
  bool channelsLast = false;
  const float *x = nullptr, *scale = nullptr, *bias = nullptr, *addend = nullptr;
  const uint8_t *xq = nullptr; // a uint8 input: the rounded values themselves
  const int8_t *weight = nullptr;
  float *out = nullptr; // the f32 result (staged, for a uint8 result)
  float inputScale = 1;
  uint8_t inputZero = 0;
  // A uint8 result: the f32 one rounded with these as it is stored.
  uint8_t *outQ = nullptr;
  float outputScale = 1;
  uint8_t outputZero = 0;
  std::vector<float> staged;
  Clamp clamp;
  // The taps' sums for the zero point: rows of M, corrRow[p] the row of
  // output position p; empty when the zero point is 0.
  std::vector<int32_t> corr, corrRow;
  // [M]: input_scale * scale and the bias (or 0), made at each run (M
  // values; the scales are a plan buffer, read where the step runs).
  mutable std::vector<float> mult, biasOrZero;
#ifdef DS_GEMM_ONEDNN
  struct OneDnn {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    dnnl::convolution_forward conv;
    dnnl::memory src, weights, dst, scratchpad, bias, addend;
    // Writes the f32 result itself (scales, bias and epilogue as post-ops)
    // rather than int32 sums for finish().
    bool direct = false;
    // bias / (input_scale * scale) - z * sum(w): oneDNN 2 adds the bias
    // before scaling, and the zero point's share comes off with it.
    std::vector<float> scaledBias;
    std::vector<int32_t> weightSums; // [M]: every tap of each output channel
    // A nonzero zero point on the direct path: the input rounded into a
    // buffer padded with the zero point (a real zero), so every window
    // sums all its taps and sum (q - z) w = sum q w - z * weightSums.
    std::vector<int64_t> paddedIn, padBegin; // spatial extents, pads
    std::vector<uint8_t> padded;
  };
  std::shared_ptr<OneDnn> dnn;
#endif

  int64_t spatialIn() const { return g.w.inSize; }
  int64_t spatialOut() const { return g.w.outSize; }

  /// Input elements [i, i + len) of the plan's buffer rounded to uint8
  /// (copied, for a uint8 input) into `to`.
  void store(int64_t i, int64_t len, uint8_t *to) const {
    if (xq) std::memcpy(to, xq + i, static_cast<size_t>(len));
    else roundToUint8(x + i, len, inputScale, inputZero, to, nullptr);
  }

  /// The input rounded to uint8, [N, spatial, C] (or into the interior of
  /// a zero-point padded [N, padded spatial, C] when `paddedIn` is given).
  void quantize(uint8_t *q, const std::vector<int64_t> *paddedIn = nullptr,
                const std::vector<int64_t> *padBegin = nullptr) const {
    const int64_t n = g.w.n, c = g.w.c, sp = spatialIn();
    const float s = inputScale, z = inputZero;
    auto round = [s, z](float v) {
      return static_cast<uint8_t>(
          static_cast<int32_t>(std::min(std::max(std::nearbyint(v / s) + z, 0.0f), 255.0f)));
    };
    if (channelsLast && paddedIn) {
      // Row by row: position p of image b to its place inside the padding.
      const std::vector<int64_t> &in = g.w.in;
      int64_t psp = 1;
      for (int64_t e : *paddedIn) psp *= e;
      parallelFor(n * sp, 64, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          int64_t p = t % sp, off = 0, stride = 1;
          for (size_t d = in.size(); d-- > 0;) {
            off += (p % in[d] + (*padBegin)[d]) * stride;
            p /= in[d];
            stride *= (*paddedIn)[d];
          }
          store(t * c, c, q + ((t / sp) * psp + off) * c);
        }
      });
      return;
    }
    if (channelsLast) {
      parallelFor(n * sp * c, 1 << 14,
                  [&](int64_t lo, int64_t hi) { store(lo, hi - lo, q + lo); });
      return;
    }
    // Channels-first: blocks of positions, each channel's run read
    // contiguously and scattered across the block's rows.
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (sp + kBlock - 1) / kBlock;
    parallelFor(n * blocks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t b = t / blocks, p0 = (t % blocks) * kBlock, p1 = std::min(sp, p0 + kBlock);
        for (int64_t ch = 0; ch < c; ++ch) {
          uint8_t *qc = q + b * sp * c + ch;
          if (xq) {
            const uint8_t *xc = xq + (b * c + ch) * sp;
            for (int64_t p = p0; p < p1; ++p) qc[p * c] = xc[p];
          } else {
            const float *xc = x + (b * c + ch) * sp;
            for (int64_t p = p0; p < p1; ++p) qc[p * c] = round(xc[p]);
          }
        }
      }
    });
  }

  /// The integer sums of (q - z) x w (padding skipped), [N, out spatial,
  /// M], by direct loops: the path of a weight that is not the plan's own
  /// (read as it is at each run) and of a build without oneDNN.
  void directSums(const uint8_t *q, int32_t *acc) const {
    const Window &w = g.w;
    const int64_t sp = spatialOut(), c = w.c;
    parallelFor(w.n * sp, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t b = t / sp, p = t % sp;
        int32_t *row = acc + t * g.m;
        for (int64_t m = 0; m < g.m; ++m) {
          const int64_t grp = m / g.mg;
          int32_t sum = 0;
          const int32_t z = inputZero;
          for (int64_t k = 0; k < w.kernelSize; ++k) {
            const int64_t off = w.inputOffset(p, k);
            if (off < 0) continue;
            const uint8_t *qp = q + (b * spatialIn() + off) * c + grp * g.cg;
            const int8_t *wp = weight + m * g.ck + k;
            for (int64_t ci = 0; ci < g.cg; ++ci) sum += (qp[ci] - z) * wp[ci * w.kernelSize];
          }
          row[m] = sum;
        }
      }
    });
  }

  absl::Status run() const {
    thread_local std::vector<uint8_t> q;
    thread_local std::vector<int32_t> acc;
    q.resize(static_cast<size_t>(g.w.n * spatialIn() * g.w.c));
    acc.resize(static_cast<size_t>(g.w.n * spatialOut() * g.m));
    mult.resize(static_cast<size_t>(g.m));
    biasOrZero.assign(static_cast<size_t>(g.m), 0.0f);
    for (int64_t ch = 0; ch < g.m; ++ch) {
      mult[ch] = inputScale * scale[ch];
      if (bias) biasOrZero[ch] = bias[ch];
    }
#ifdef DS_GEMM_ONEDNN
    if (dnn && dnn->direct) {
      // The rounded input: the zero-point padded copy, a uint8 input as it
      // is, or rounded here.
      const uint8_t *src = xq;
      if (!dnn->padded.empty()) {
        quantize(dnn->padded.data(), &dnn->paddedIn, &dnn->padBegin);
        src = dnn->padded.data();
      } else if (!xq) {
        quantize(q.data());
        src = q.data();
      }
      try {
        // A uint8 result is the f32 one over output_scale plus its zero
        // point: oneDNN's scales are mult / output_scale, and the zero
        // point rides on the bias.
        const float shift = outQ ? outputZero * outputScale : 0.0f;
        for (int64_t ch = 0; ch < g.m; ++ch)
          dnn->scaledBias[ch] = (biasOrZero[ch] + shift) / mult[ch] -
                                static_cast<float>(inputZero) * static_cast<float>(dnn->weightSums[ch]);
        dnn->src.set_data_handle(const_cast<uint8_t *>(src));
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnn->src},
                                                   {DNNL_ARG_WEIGHTS, dnn->weights},
                                                   {DNNL_ARG_BIAS, dnn->bias},
                                                   {DNNL_ARG_DST, dnn->dst},
                                                   {DNNL_ARG_SCRATCHPAD, dnn->scratchpad}};
        if (addend) args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, dnn->addend});
        dnn->conv.execute(dnn->stream, args);
        dnn->stream.wait();
      } catch (const dnnl::error &e) {
        return absl::InternalError(std::string("oneDNN int8 convolution failed: ") + e.what());
      }
      return absl::OkStatus();
    }
    const uint8_t *src = xq && channelsLast ? xq : q.data();
    if (src != xq) quantize(q.data());
    if (dnn) {
      try {
        dnn->src.set_data_handle(const_cast<uint8_t *>(src));
        dnn->dst.set_data_handle(acc.data());
        dnn->conv.execute(dnn->stream, {{DNNL_ARG_SRC, dnn->src},
                                        {DNNL_ARG_WEIGHTS, dnn->weights},
                                        {DNNL_ARG_DST, dnn->dst},
                                        {DNNL_ARG_SCRATCHPAD, dnn->scratchpad}});
        dnn->stream.wait();
      } catch (const dnnl::error &e) {
        return absl::InternalError(std::string("oneDNN int8 convolution failed: ") + e.what());
      }
    } else
#else
    const uint8_t *src = xq && channelsLast ? xq : q.data();
    if (src != xq) quantize(q.data());
#endif
      directSums(src, acc.data());
    finish(acc.data());
    if (outQ)
      parallelFor(outNumel(), 1 << 14, [&](int64_t lo, int64_t hi) {
        roundToUint8(out + lo, hi - lo, outputScale, outputZero, outQ + lo, nullptr);
      });
    return absl::OkStatus();
  }

  int64_t outNumel() const { return g.w.n * spatialOut() * g.m; }

  /// y = clamp(input_scale * scale[m] * (acc - z corr) + bias + addend),
  /// written in the plan's layout.
  void finish(const int32_t *acc) const {
    const int64_t sp = spatialOut(), m = g.m, n = g.w.n;
    // One position's channels: y[ch] = mult[ch] * (a[ch] - z cr[ch]) + bias[ch].
    auto row = [&](int64_t p, const int32_t *__restrict a, float *__restrict y) {
      const float *__restrict mu = mult.data(), *__restrict bs = biasOrZero.data();
      if (!corr.empty()) {
        const int32_t *__restrict cr = corr.data() + corrRow[p] * m;
        const int32_t z = inputZero;
#pragma omp simd
        for (int64_t ch = 0; ch < m; ++ch)
          y[ch] = mu[ch] * static_cast<float>(a[ch] - z * cr[ch]) + bs[ch];
      } else {
#pragma omp simd
        for (int64_t ch = 0; ch < m; ++ch) y[ch] = mu[ch] * static_cast<float>(a[ch]) + bs[ch];
      }
    };
    // The residual and the clamp over a contiguous run.
    auto epilogue = [&](float *__restrict y, const float *__restrict add, int64_t len) {
      if (add)
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) y[i] += add[i];
      if (clamp.bounded()) {
        const float lo = clamp.lo, hi = clamp.hi;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) y[i] = std::min(std::max(y[i], lo), hi);
      }
      if (clamp.hardSwish)
        for (int64_t i = 0; i < len; ++i)
          y[i] *= std::min(std::max(y[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    };
    if (channelsLast) {
      parallelFor(n * sp, 16, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) row(t % sp, acc + t * m, out + t * m);
        epilogue(out + lo * m, addend ? addend + lo * m : nullptr, (hi - lo) * m);
      });
      return;
    }
    // Channels-first: a tile of positions computed channels-last, then
    // written transposed.
    constexpr int64_t kTile = 64;
    const int64_t tiles = (sp + kTile - 1) / kTile;
    parallelFor(n * tiles, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> tile(static_cast<size_t>(kTile * m));
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t b = t / tiles, p0 = (t % tiles) * kTile, len = std::min(kTile, sp - p0);
        for (int64_t p = p0; p < p0 + len; ++p)
          row(p, acc + (b * sp + p) * m, tile.data() + (p - p0) * m);
        for (int64_t ch = 0; ch < m; ++ch) {
          float *y = out + (b * m + ch) * sp + p0;
          for (int64_t i = 0; i < len; ++i) y[i] = tile[i * m + ch];
          epilogue(y, addend ? addend + (b * m + ch) * sp + p0 : nullptr, len);
        }
      }
    });
  }

  /// corr[p, m]: the weight taps of output position p inside the input.
  /// Positions whose window lies wholly inside share one row (every tap);
  /// only border positions get their own.
  void countCorrections() {
    const Window &w = g.w;
    const int64_t sp = spatialOut();
    // Each tap's weight summed over the group's input channels.
    std::vector<int32_t> tap(static_cast<size_t>(g.m * w.kernelSize), 0);
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t ci = 0; ci < g.cg; ++ci)
        for (int64_t k = 0; k < w.kernelSize; ++k)
          tap[m * w.kernelSize + k] += weight[m * g.ck + ci * w.kernelSize + k];
    corr.assign(static_cast<size_t>(g.m), 0); // row 0: every tap
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t k = 0; k < w.kernelSize; ++k) corr[m] += tap[m * w.kernelSize + k];
    corrRow.assign(static_cast<size_t>(sp), 0);
    for (int64_t p = 0; p < sp; ++p) {
      bool inside = true;
      for (int64_t k = 0; k < w.kernelSize && inside; ++k) inside = w.inputOffset(p, k) >= 0;
      if (inside) continue;
      corrRow[p] = static_cast<int32_t>(corr.size() / g.m);
      corr.resize(corr.size() + g.m, 0);
      int32_t *row = corr.data() + corrRow[p] * g.m;
      for (int64_t k = 0; k < w.kernelSize; ++k) {
        if (w.inputOffset(p, k) < 0) continue;
        for (int64_t m = 0; m < g.m; ++m) row[m] += tap[m * w.kernelSize + k];
      }
    }
  }

#ifdef DS_GEMM_ONEDNN
  /// oneDNN's u8 x s8 -> s32 convolution, channels-last in and out, the
  /// weight reordered once; null where oneDNN declines.
  static std::shared_ptr<OneDnn> makeOneDnn(const QuantizedConv &qc,
                                            const std::vector<int64_t> &padEnd) {
    using namespace dnnl;
    using dims = memory::dims;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    const Window &w = qc.g.w;
    const size_t k = w.in.size();
    if (k < 1 || k > 3) return nullptr;
    try {
      auto r = std::make_shared<OneDnn>();
      // f32 straight into a channels-last result (the scales are the plan's
      // own, fixed in the primitive); int32 sums for finish() otherwise.
      r->direct = qc.channelsLast && !qc.clamp.hardSwish;
      bool anyPad = false;
      for (size_t d = 0; d < k; ++d) anyPad |= w.padBegin[d] || padEnd[d];
      const bool prePad = r->direct && qc.inputZero && anyPad;
      dims src{w.n, w.c}, dst{w.n, qc.g.m}, strides, dilates, padL, padR;
      for (size_t d = 0; d < k; ++d) {
        const int64_t extent = prePad ? w.in[d] + w.padBegin[d] + padEnd[d] : w.in[d];
        src.push_back(extent);
        dst.push_back(w.out[d]);
        strides.push_back(w.strides[d]);
        dilates.push_back(w.dilations[d] - 1);
        padL.push_back(prePad ? 0 : w.padBegin[d]);
        padR.push_back(prePad ? 0 : padEnd[d]);
        if (prePad) {
          r->paddedIn.push_back(extent);
          r->padBegin.push_back(w.padBegin[d]);
        }
        const int64_t span = (w.kernel[d] - 1) * w.dilations[d] + 1;
        if ((w.in[d] + w.padBegin[d] + padEnd[d] - span) / w.strides[d] + 1 != w.out[d])
          return nullptr;
      }
      if (prePad) {
        int64_t total = w.n * w.c;
        for (int64_t e : r->paddedIn) total *= e;
        r->padded.assign(static_cast<size_t>(total), qc.inputZero); // the border stays z
      }
      r->weightSums.assign(static_cast<size_t>(qc.g.m), 0);
      for (int64_t m = 0; m < qc.g.m; ++m)
        for (int64_t i = 0; i < qc.g.ck; ++i) r->weightSums[m] += qc.weight[m * qc.g.ck + i];
      const bool grouped = qc.g.group > 1;
      dims wdims = grouped ? dims{qc.g.group, qc.g.mg, qc.g.cg} : dims{qc.g.m, qc.g.cg};
      for (size_t d = 0; d < k; ++d) wdims.push_back(w.kernel[d]);
      const tag last = k == 1 ? tag::nwc : k == 2 ? tag::nhwc : tag::ndhwc;
      const tag wplain = grouped ? (k == 1 ? tag::goiw : k == 2 ? tag::goihw : tag::goidhw)
                                 : (k == 1 ? tag::oiw : k == 2 ? tag::oihw : tag::oidhw);
      const dt result = !r->direct ? dt::s32 : qc.outQ ? dt::u8 : dt::f32;
      memory::desc srcMd(src, dt::u8, last), dstMd(dst, result, last),
          wAny(wdims, dt::s8, tag::any), biasMd({qc.g.m}, dt::f32, tag::a);
      primitive_attr attr;
      attr.set_scratchpad_mode(scratchpad_mode::user);
      if (r->direct) {
        // A uint8 result is computed over output_scale, its zero point
        // added (by the bias): the clamp's bounds move with it, and the
        // store rounds half to even and saturates to [0, 255].
        const float over = qc.outQ ? 1.0f / qc.outputScale : 1.0f;
        const float shift = qc.outQ ? qc.outputZero : 0.0f;
        std::vector<float> mult(static_cast<size_t>(qc.g.m));
        for (int64_t ch = 0; ch < qc.g.m; ++ch)
          mult[ch] = qc.inputScale * qc.scale[ch] * (qc.outQ ? over : 1.0f);
        attr.set_output_scales(1 << 1, mult);
        post_ops ops;
        if (qc.addend) ops.append_binary(algorithm::binary_add, memory::desc(dst, dt::f32, last));
        if (qc.clamp.lo == 0.0f && qc.clamp.hi == INFINITY && !qc.outQ)
          ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
        else if (qc.clamp.bounded())
          ops.append_eltwise(1.0f, algorithm::eltwise_clip, qc.clamp.lo * over + shift,
                             qc.clamp.hi * over + shift);
        attr.set_post_ops(ops);
      }
      auto desc = r->direct ? convolution_forward::desc(prop_kind::forward_inference,
                                                        algorithm::convolution_direct, srcMd, wAny,
                                                        biasMd, dstMd, strides, dilates, padL, padR)
                            : convolution_forward::desc(prop_kind::forward_inference,
                                                        algorithm::convolution_direct, srcMd, wAny,
                                                        dstMd, strides, dilates, padL, padR);
      convolution_forward::primitive_desc pd(desc, attr, r->engine);
      if (std::getenv("DS_DEBUG_INT8"))
        std::fprintf(stderr, "int8 convolution (%s): %s\n", r->direct ? "f32 result" : "int32 sums",
                     pd.impl_info_str());
      r->conv = convolution_forward(pd);
      r->scratchpad = memory(pd.scratchpad_desc(), r->engine);
      memory user(memory::desc(wdims, dt::s8, wplain), r->engine,
                  const_cast<int8_t *>(qc.weight));
      r->weights = memory(pd.weights_desc(), r->engine);
      reorder(user, r->weights).execute(r->stream, user, r->weights);
      r->stream.wait();
      r->src = memory(srcMd, r->engine, DNNL_MEMORY_NONE);
      if (r->direct) {
        r->scaledBias.assign(static_cast<size_t>(qc.g.m), 0.0f);
        r->bias = memory(biasMd, r->engine, r->scaledBias.data());
        r->dst = memory(dstMd, r->engine, qc.outQ ? static_cast<void *>(qc.outQ) : qc.out);
        if (qc.addend) r->addend = memory(dstMd, r->engine, const_cast<float *>(qc.addend));
      } else {
        r->dst = memory(dstMd, r->engine, DNNL_MEMORY_NONE);
      }
      return r;
    } catch (const dnnl::error &e) {
      if (std::getenv("DS_DEBUG_INT8")) std::fprintf(stderr, "int8 conv declined: %s\n", e.what());
      return nullptr;
    }
  }
#endif
};

absl::StatusOr<PreparedStep> prepareQuantizedConv(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(bool hasBias, c.flagAttr("bias"));
  DS_ASSIGN_OR_RETURN(bool hasAddend, c.flagAttr("addend"));
  DS_ASSIGN_OR_RETURN(bool channelsLast, c.flagAttr("channels_last"));
  const size_t arity = 3 + hasBias + hasAddend;
  DS_RETURN_IF_ERROR(c.expectArity(arity, arity, 1));
  const TensorView &x = c.in[0], &w = c.in[1], &s = c.in[2], &y = c.out[0];
  if (x.dtype != plan::U8) DS_RETURN_IF_ERROR(c.expectDType(x, plan::F32, "input"));
  DS_RETURN_IF_ERROR(c.expectDType(w, plan::I8, "weight"));
  DS_RETURN_IF_ERROR(c.expectDType(s, plan::F32, "scale"));
  if (y.dtype != plan::U8) DS_RETURN_IF_ERROR(c.expectDType(y, plan::F32, "result"));
  if (x.rank() < 3 || y.rank() != x.rank())
    return c.error("input and result must be [N, C, spatial...] (or channels-last)");
  // The geometry read channels-first.
  TensorView xf = x, yf = y;
  if (channelsLast) {
    xf.shape = channelsFirstShape(x.shape);
    yf.shape = channelsFirstShape(y.shape);
  }
  auto q = std::make_shared<QuantizedConv>();
  DS_ASSIGN_OR_RETURN(q->g, convGeometry(c, xf, w, yf));
  DS_RETURN_IF_ERROR(c.expectShape(s, {q->g.m}, "scale"));
  size_t next = 3;
  if (hasBias) {
    const TensorView &b = c.in[next++];
    DS_RETURN_IF_ERROR(c.expectDType(b, plan::F32, "bias"));
    DS_RETURN_IF_ERROR(c.expectShape(b, {q->g.m}, "bias"));
    q->bias = b.as<float>();
  }
  if (hasAddend) {
    const TensorView &a = c.in[next++];
    DS_RETURN_IF_ERROR(c.expectDType(a, plan::F32, "addend"));
    DS_RETURN_IF_ERROR(c.expectShape(a, y.shape, "addend"));
    q->addend = a.as<float>();
  }
  DS_ASSIGN_OR_RETURN(double inScale, c.floatAttr("input_scale"));
  DS_ASSIGN_OR_RETURN(int64_t inZero, c.intAttr("input_zero_point"));
  if (!(inScale > 0) || !std::isfinite(static_cast<float>(inScale)) || inZero < 0 || inZero > 255)
    return c.error("input_scale must be positive and finite and input_zero_point in [0, 255]");
  DS_ASSIGN_OR_RETURN(q->clamp, Clamp::fromStep(c));
  q->channelsLast = channelsLast;
  if (x.dtype == plan::U8) q->xq = x.as<uint8_t>();
  else q->x = x.as<float>();
  if (y.dtype == plan::U8) {
    DS_ASSIGN_OR_RETURN(double os, c.floatAttr("output_scale"));
    DS_ASSIGN_OR_RETURN(int64_t oz, c.intAttr("output_zero_point"));
    if (!(os > 0) || !std::isfinite(static_cast<float>(os)) || oz < 0 || oz > 255 || hasAddend ||
        c.hasAttr("activation"))
      return c.error("a uint8 result needs a positive finite output_scale, an output_zero_point "
                     "in [0, 255], and no addend or activation");
    q->outQ = y.as<uint8_t>();
    q->outputScale = static_cast<float>(os);
    q->outputZero = static_cast<uint8_t>(oz);
  }
  q->weight = w.as<int8_t>();
  q->scale = s.as<float>();
  if (!q->outQ) q->out = y.as<float>();
  q->inputScale = static_cast<float>(inScale);
  q->inputZero = static_cast<uint8_t>(inZero);
  // The addend is read where the result is written: an in-place addend
  // (the same bytes) is read before its element is overwritten; any other
  // overlap is not something the planner makes.
#ifdef DS_GEMM_ONEDNN
  // oneDNN's packed weight and the zero point's sums are made here, once:
  // only of a weight no run changes.
  DS_ASSIGN_OR_RETURN(bool constant, c.flagAttr("constant_weight"));
  if (constant) {
    DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
    std::vector<int64_t> padEnd(pads.begin() + static_cast<long>(pads.size() / 2), pads.end());
    q->dnn = QuantizedConv::makeOneDnn(*q, padEnd);
    if (q->dnn && !q->dnn->direct && q->inputZero) q->countCorrections();
  }
#endif
  // A uint8 result not stored by oneDNN: the f32 result staged, then rounded.
  if (q->outQ
#ifdef DS_GEMM_ONEDNN
      && !(q->dnn && q->dnn->direct)
#endif
  ) {
    q->staged.resize(static_cast<size_t>(y.numel));
    q->out = q->staged.data();
  }
  return PreparedStep([q] { return q->run(); });
}

} // namespace

void registerQuantizedConvKernel(KernelRegistry &r) { r.add("quantized_conv", prepareQuantizedConv); }

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
