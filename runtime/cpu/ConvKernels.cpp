// Convolution and pooling, N-D over [N, C, spatial...], with the gradients
// training needs. f32 convolutions of 1 to 3 spatial dimensions run on
// oneDNN's convolution primitives where the build has oneDNN (blocked
// layouts, direct and depthwise JIT kernels: ~10x the im2col path on
// ResNet/MobileNet); everything else, and any shape oneDNN declines, on
// im2col + GEMM per sample and group.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>

#include "runtime/cpu/KernelFamilies.h"

#include <atomic>

#ifdef DS_GEMM_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/ConvGeometry.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {
using namespace conv;

/// col[(c * K + k), p] = x[c, window position] (0 in the padding).
void im2col(const Window &w, const float *x, int64_t channels, float *col) {
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      float *row = col + (ch * w.kernelSize + k) * w.outSize;
      const float *xc = x + ch * w.inSize;
      for (int64_t p = 0; p < w.outSize; ++p) {
        int64_t off = w.inputOffset(p, k);
        row[p] = off < 0 ? 0.0f : xc[off];
      }
    }
}

void col2imAdd(const Window &w, const float *col, int64_t channels, float *dx) {
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      const float *row = col + (ch * w.kernelSize + k) * w.outSize;
      float *xc = dx + ch * w.inSize;
      for (int64_t p = 0; p < w.outSize; ++p) {
        int64_t off = w.inputOffset(p, k);
        if (off >= 0) xc[off] += row[p];
      }
    }
}

#ifdef DS_GEMM_ONEDNN
/// A oneDNN forward convolution bound to the step's buffers. oneDNN picks
/// its layouts (format `any`); the plan's buffers (NC... or, for
/// `channels_last`, N...C, which is what oneDNN's f32 kernels pick on
/// AVX-512) are reordered in and out around it when they differ. Weights the compiler marks constant
/// (`constant_weight`: an inference plan's parameter) are reordered once
/// here, at plan load, instead of at every run.
class OneDnnConv {
public:
  static std::shared_ptr<OneDnnConv> create(const ConvGeometry &g, const KernelContext &c,
                                            const std::vector<int64_t> &padEnd,
                                            const Clamp &clamp, const float *addend,
                                            bool constantWeight, bool channelsLast,
                                            bool winograd = false) {
    using namespace dnnl;
    using dims = memory::dims;
    const Window &w = g.w;
    size_t k = w.in.size();
    if (k < 1 || k > 3) return nullptr;
    try {
      auto self = std::make_shared<OneDnnConv>();
      dims src{w.n, w.c}, dst{w.n, g.m}, strides, dilates, padL, padR;
      for (size_t d = 0; d < k; ++d) {
        src.push_back(w.in[d]);
        dst.push_back(w.out[d]);
        strides.push_back(w.strides[d]);
        dilates.push_back(w.dilations[d] - 1); // oneDNN counts the gaps
        padL.push_back(w.padBegin[d]);
        padR.push_back(padEnd[d]);
        // oneDNN's output extent must be ours (ONNX rounds down too).
        int64_t span = (w.kernel[d] - 1) * w.dilations[d] + 1;
        if ((w.in[d] + w.padBegin[d] + padEnd[d] - span) / w.strides[d] + 1 != w.out[d])
          return nullptr;
      }
      dims wdims = g.group > 1 ? dims{g.group, g.mg, g.cg} : dims{g.m, g.cg};
      for (size_t d = 0; d < k; ++d) wdims.push_back(w.kernel[d]);
      using tag = memory::format_tag;
      tag plain = channelsLast ? (k == 1 ? tag::nwc : k == 2 ? tag::nhwc : tag::ndhwc)
                               : (k == 1 ? tag::ncw : k == 2 ? tag::nchw : tag::ncdhw);
      tag wplain = g.group > 1 ? (k == 1 ? tag::goiw : k == 2 ? tag::goihw : tag::goidhw)
                               : (k == 1 ? tag::oiw : k == 2 ? tag::oihw : tag::oidhw);
      auto f32 = memory::data_type::f32;
      engine &eng = self->engine_;
      bool bias = c.in.size() == 3;
      algorithm alg = winograd ? algorithm::convolution_winograd : algorithm::convolution_direct;
      auto describe = [&](tag activations) {
        memory::desc srcAny(src, f32, activations), wAny(wdims, f32, tag::any),
            dstAny(dst, f32, activations);
        return bias ? convolution_forward::desc(prop_kind::forward_inference, alg, srcAny, wAny,
                                                memory::desc({g.m}, f32, tag::a), dstAny,
                                                strides, dilates, padL, padR)
                    : convolution_forward::desc(prop_kind::forward_inference, alg, srcAny,
                                                wAny, dstAny, strides, dilates, padL, padR);
      };
      // A fused residual add and activation are post-ops (a binary add of
      // the addend in the result's own layout, then an eltwise), applied as
      // the result is written. Winograd writes a blocked layout of its
      // own: the addend is reordered into the result first and summed.
      primitive_attr attr;
      memory::desc dstPlain(dst, f32, plain);
      if (clamp.active() || addend) {
        post_ops ops;
        if (addend && winograd) ops.append_sum(1.0f);
        else if (addend) ops.append_binary(algorithm::binary_add, dstPlain);
        if (clamp.lo == 0.0f && clamp.hi == INFINITY)
          ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
        else if (clamp.bounded())
          ops.append_eltwise(1.0f, algorithm::eltwise_clip, clamp.lo, clamp.hi);
        if (clamp.hardSwish) ops.append_eltwise(1.0f, algorithm::eltwise_hardswish, 0.0f, 0.0f);
        attr.set_post_ops(ops);
      }
      // oneDNN's choice of layout (`any`) for a grouped convolution is
      // blocked by 16 channels, which costs a reorder of the activations in
      // and out around it; its kernels compute channels-last as fast, so
      // those take the plan's layout (RegNet: 2.6 -> 2.3 ms). Depthwise
      // ones measured slower in it (EfficientNet's 5x5: 3.9 -> 5.4 ms), and
      // a reference or GEMM kernel is never taken for a layout's sake.
      std::optional<convolution_forward::primitive_desc> chosen;
      if (channelsLast && g.group > 1 && g.cg > 1 && !winograd) {
        try {
          convolution_forward::primitive_desc direct(describe(plain), attr, eng);
          std::string impl = direct.impl_info_str();
          if (impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos)
            chosen = direct;
        } catch (const dnnl::error &) {
        }
      }
      convolution_forward::primitive_desc pd =
          chosen ? *chosen : convolution_forward::primitive_desc(describe(tag::any), attr, eng);
      // The addend is read in the result's layout: only where oneDNN
      // writes the plan's buffer as it is.
      if (addend && !winograd && pd.dst_desc() != dstPlain) return nullptr;
      self->conv_ = convolution_forward(pd);
      if (addend)
        self->addend_ = memory(dstPlain, eng, const_cast<float *>(addend));
      self->sumAddend_ = addend && winograd;
      auto bind = [&](const memory::desc &user, const memory::desc &want, void *ptr,
                      memory &userMem, memory &mem) {
        userMem = memory(user, eng, ptr);
        mem = user == want ? userMem : memory(want, eng);
      };
      bind(memory::desc(src, f32, plain), pd.src_desc(), c.in[0].data, self->srcUser_,
           self->src_);
      bind(memory::desc(wdims, f32, wplain), pd.weights_desc(), c.in[1].data, self->wUser_,
           self->w_);
      bind(memory::desc(dst, f32, plain), pd.dst_desc(), c.out[0].data, self->dstUser_,
           self->dst_);
      if (bias) self->bias_ = memory(pd.bias_desc(), eng, c.in[2].data);
      self->hasBias_ = bias;
      self->packWeightsEachRun_ = !constantWeight;
      if (constantWeight) self->packWeights();
      return self;
    } catch (const dnnl::error &) {
      return nullptr; // a configuration oneDNN does not implement: im2col
    }
  }

  absl::Status run() {
    try {
      using namespace dnnl;
      if (src_ != srcUser_) reorder(srcUser_, src_).execute(stream_, srcUser_, src_);
      if (packWeightsEachRun_) packWeights();
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, dst_}};
      if (hasBias_) args.insert({DNNL_ARG_BIAS, bias_});
      if (sumAddend_) {
        // The sum post-op adds what the result buffer holds.
        if (dst_ != addend_) reorder(addend_, dst_).execute(stream_, addend_, dst_);
      } else if (addend_) {
        args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, addend_});
      }
      conv_.execute(stream_, args);
      if (dst_ != dstUser_) reorder(dst_, dstUser_).execute(stream_, dst_, dstUser_);
      stream_.wait();
      return absl::OkStatus();
    } catch (const dnnl::error &e) {
      return absl::InternalError(std::string("oneDNN convolution failed: ") + e.what());
    }
  }

private:
  void packWeights() {
    if (w_ != wUser_) dnnl::reorder(wUser_, w_).execute(stream_, wUser_, w_);
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::convolution_forward conv_;
  dnnl::memory srcUser_, src_, wUser_, w_, dstUser_, dst_, bias_, addend_;
  bool hasBias_ = false, packWeightsEachRun_ = true, sumAddend_ = false;
};

/// Whether every element of x[0, n) is finite: the largest exponent field
/// is not all ones (an integer max, which vectorizes; a float sum would
/// be one long dependency chain), in chunks on the backend's threads.
bool allFinite(const float *x, int64_t n) {
  std::atomic<bool> finite{true};
  parallelFor(n, 1 << 15, [&](int64_t lo, int64_t hi) {
    using Bits = uint32_t __attribute__((may_alias)); // read as integers, legally
    const auto *bits = reinterpret_cast<const Bits *>(x);
    uint32_t top = 0;
    for (int64_t i = lo; i < hi; ++i) top = std::max(top, bits[i] & 0x7f800000u);
    if (top == 0x7f800000u) finite = false;
  });
  return finite;
}

/// Winograd F(2x2, 3x3) does 2.25x fewer multiplies than the direct
/// convolution; oneDNN's kernel for it (with its weights transformed once,
/// so only for constant weights) measured 25-35% faster than the direct one
/// on ResNet's 3x3 stride-1 layers down to 14x14 outputs, reorders in and
/// out included, and no faster at 7x7 (bench: docs/performance.md). With
/// few output channels (DenseNet's 128 -> 32) the transforms dominate:
/// the direct kernel measured 1.2-1.7x faster there, so Winograd needs 64.
bool preferWinograd(const ConvGeometry &g, bool constantWeight) {
  const Window &w = g.w;
  if (!constantWeight || g.group != 1 || w.in.size() != 2 || g.cg < 16 || g.m < 64) return false;
  for (size_t d = 0; d < 2; ++d)
    if (w.kernel[d] != 3 || w.strides[d] != 1 || w.dilations[d] != 1) return false;
  return w.outSize >= 14 * 14;
}
#endif

/// What a convolution adds to its result after the bias and before its
/// clamp (ds.conv's `addend`: a residual folded in by ds-fuse-epilogues),
/// and the clamp.
struct ConvEpilogue {
  const float *addend = nullptr; // the result's shape and layout
  Clamp clamp;
  /// y = clamp(y + addend) over [lo, hi) of a result.
  void apply(float *y, int64_t lo, int64_t hi) const {
    for (int64_t i = lo; i < hi; ++i) {
      y[i] = clamp(addend ? y[i] + addend[i] : y[i]);
    }
  }
};

absl::StatusOr<PreparedStep> prepareConvChannelsFirst(const KernelContext &c, bool channelsLast,
                                                      const ConvEpilogue &e);

absl::StatusOr<PreparedStep> prepareConv(const KernelContext &c) {
  // 16-bit convolutions (mixed precision) compute in f32 on widened copies.
  if (!c.in.empty() && isHalf(c.in[0].dtype)) return prepareWidened(c, prepareConv);
  bool channelsLast = false, hasAddend = false;
  for (auto [name, flag] : {std::pair<const char *, bool *>{"channels_last", &channelsLast},
                            {"addend", &hasAddend}})
    if (c.hasAttr(name)) {
      DS_ASSIGN_OR_RETURN(int64_t v, c.intAttr(name));
      *flag = v != 0;
    }
  // The addend (last operand) is not a convolution operand: set it aside.
  ConvEpilogue e;
  DS_ASSIGN_OR_RETURN(e.clamp, Clamp::fromStep(c));
  std::vector<TensorView> operands = c.in;
  if (hasAddend) {
    DS_RETURN_IF_ERROR(c.expectArity(3, 4, 1));
    const TensorView &a = operands.back();
    DS_RETURN_IF_ERROR(c.expectDType(a, plan::F32, "addend"));
    DS_RETURN_IF_ERROR(c.expectShape(a, c.out[0].shape, "addend"));
    e.addend = a.as<float>();
    operands.pop_back();
  }
  KernelContext conv{c.step, operands, c.out};
  if (!channelsLast) return prepareConvChannelsFirst(conv, false, e);
  DS_RETURN_IF_ERROR(conv.expectArity(2, 3, 1));
  if (c.in[0].rank() < 3 || c.out[0].rank() != c.in[0].rank())
    return c.error("a channels_last input must be [N, spatial..., C]");
  // The same convolution read channels-first: oneDNN takes the buffers as
  // they are (prepareConvChannelsFirst passes channelsLast on); the im2col
  // path gets copies transposed in and out, and the epilogue after that.
  std::vector<TensorView> in = operands, out = c.out;
  in[0].shape = channelsFirstShape(in[0].shape);
  out[0].shape = channelsFirstShape(out[0].shape);
  KernelContext first{c.step, in, out};
  DS_ASSIGN_OR_RETURN(PreparedStep direct, prepareConvChannelsFirst(first, true, e));
  if (direct) return direct;
  auto xs = std::make_shared<std::vector<float>>(c.in[0].numel);
  auto ys = std::make_shared<std::vector<float>>(c.out[0].numel);
  in[0].data = xs->data();
  out[0].data = ys->data();
  DS_ASSIGN_OR_RETURN(PreparedStep viaIm2col, prepareConvChannelsFirst(first, false, ConvEpilogue{}));
  const int64_t n = in[0].shape[0], ci = in[0].shape[1], co = out[0].shape[1];
  const int64_t si = c.in[0].numel / std::max<int64_t>(1, n * ci),
                so = c.out[0].numel / std::max<int64_t>(1, n * co);
  const float *x = c.in[0].as<float>();
  float *y = c.out[0].as<float>();
  const int64_t total = c.out[0].numel;
  return PreparedStep([=]() -> absl::Status {
    toChannelsFirst(x, xs->data(), n, si, ci);
    DS_RETURN_IF_ERROR(viaIm2col());
    toChannelsLast(ys->data(), y, n, so, co);
    if (e.addend || e.clamp.active())
      parallelFor(total, 1 << 14, [&](int64_t lo, int64_t hi) { e.apply(y, lo, hi); });
    return absl::OkStatus();
  });
}

/// A convolution over [N, C, spatial...] buffers; with `oneDnnChannelsLast`
/// the buffers are really [N, spatial..., C] and only oneDNN may run it
/// (an empty step otherwise, for prepareConv to go through im2col).
absl::StatusOr<PreparedStep> prepareConvChannelsFirst(const KernelContext &c,
                                                      bool oneDnnChannelsLast,
                                                      const ConvEpilogue &e) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 3, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_ASSIGN_OR_RETURN(ConvGeometry g, convGeometry(c, c.in[0], c.in[1], c.out[0]));
  if (c.in.size() == 3) DS_RETURN_IF_ERROR(c.expectShape(c.in[2], {g.m}, "bias"));
  const Clamp clamp = e.clamp;
#ifdef DS_GEMM_ONEDNN
  bool constantWeight = false;
  if (c.hasAttr("constant_weight")) {
    DS_ASSIGN_OR_RETURN(int64_t cw, c.intAttr("constant_weight"));
    constantWeight = cw != 0;
  }
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
  std::vector<int64_t> padEnd(pads.begin() + g.w.in.size(), pads.end());
  if (g.w.n > 0 && g.w.outSize > 0 && c.in[0].numel > 0) {
    // (Weights with an inf or NaN take the direct kernel: the Winograd
    // transform of the weights would mix them into NaN too.)
    if (preferWinograd(g, constantWeight) && allFinite(c.in[1].as<float>(), c.in[1].numel))
      if (auto conv = OneDnnConv::create(g, c, padEnd, clamp, e.addend, constantWeight,
                                         oneDnnChannelsLast, /*winograd=*/true)) {
        // Winograd's transforms subtract neighbouring inputs: one inf
        // becomes inf - inf = NaN in outputs a direct convolution gives as
        // +-inf. An input that is not all finite runs the direct kernel
        // (made, and its weights packed, the first time one comes).
        const float *x = c.in[0].as<float>();
        const int64_t n = c.in[0].numel;
        const plan::Step *step = &c.step;
        std::vector<TensorView> in = c.in, out = c.out;
        auto direct = std::make_shared<std::shared_ptr<OneDnnConv>>();
        const float *addend = e.addend;
        return PreparedStep([=]() -> absl::Status {
          if (allFinite(x, n)) return conv->run();
          if (!*direct) {
            KernelContext again{*step, in, out};
            *direct = OneDnnConv::create(g, again, padEnd, clamp, addend, constantWeight,
                                         oneDnnChannelsLast);
            if (!*direct)
              return again.error("the direct convolution for a non-finite input could not be "
                                 "made");
          }
          return (*direct)->run();
        });
      }
    if (auto conv = OneDnnConv::create(g, c, padEnd, clamp, e.addend, constantWeight,
                                       oneDnnChannelsLast))
      return PreparedStep([conv] { return conv->run(); });
    // oneDNN writes another layout than the addend's: the epilogue after.
    if (e.addend)
      if (auto conv = OneDnnConv::create(g, c, padEnd, Clamp{}, nullptr, constantWeight,
                                         oneDnnChannelsLast)) {
        float *y = c.out[0].as<float>();
        const int64_t total = c.out[0].numel;
        return PreparedStep([conv, e, y, total]() -> absl::Status {
          DS_RETURN_IF_ERROR(conv->run());
          parallelFor(total, 1 << 14, [&](int64_t lo, int64_t hi) { e.apply(y, lo, hi); });
          return absl::OkStatus();
        });
      }
  }
#endif
  if (oneDnnChannelsLast) return PreparedStep();
  const float *x = c.in[0].as<float>(), *wt = c.in[1].as<float>();
  const float *bias = c.in.size() == 3 ? c.in[2].as<float>() : nullptr;
  float *y = c.out[0].as<float>();
  return PreparedStep([=] {
    const Window &w = g.w;
    parallelFor(w.n * g.group, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> col(static_cast<size_t>(g.ck * w.outSize));
      for (int64_t t = lo; t < hi; ++t) {
        int64_t n = t / g.group, gi = t % g.group;
        im2col(w, x + (n * w.c + gi * g.cg) * w.inSize, g.cg, col.data());
        float *yo = y + (n * g.m + gi * g.mg) * w.outSize;
        sgemm(false, false, g.mg, w.outSize, g.ck, 1.0f, wt + gi * g.mg * g.ck, g.ck, col.data(),
              w.outSize, 0.0f, yo, w.outSize);
        if (bias)
          for (int64_t o = 0; o < g.mg; ++o)
            for (int64_t p = 0; p < w.outSize; ++p) yo[o * w.outSize + p] += bias[gi * g.mg + o];
        if (e.addend || clamp.active()) {
          // The addend in this (channels-first) result's layout.
          const int64_t at = yo - y;
          ConvEpilogue here{e.addend ? e.addend + at : nullptr, clamp};
          here.apply(yo, 0, g.mg * w.outSize);
        }
      }
    });
    return absl::OkStatus();
  });
}

// conv_grad(x, w, dy) -> (dx, dw)
absl::StatusOr<PreparedStep> prepareConvGrad(const KernelContext &c) {
  if (!c.in.empty() && isHalf(c.in[0].dtype)) return prepareWidened(c, prepareConvGrad);
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, 2));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_ASSIGN_OR_RETURN(ConvGeometry g, convGeometry(c, c.in[0], c.in[1], c.in[2]));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "d_input"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], c.in[1].shape, "d_weight"));
  const float *x = c.in[0].as<float>(), *wt = c.in[1].as<float>(), *dy = c.in[2].as<float>();
  float *dx = c.out[0].as<float>(), *dw = c.out[1].as<float>();
  int64_t dxSize = c.out[0].numel, dwSize = c.out[1].numel;
  return PreparedStep([=] {
    const Window &w = g.w;
    std::fill(dx, dx + dxSize, 0.0f);
    std::fill(dw, dw + dwSize, 0.0f);
    // Groups write disjoint slices of dw; samples accumulate into them, so
    // the parallel loop runs over groups, samples in order inside.
    parallelFor(g.group, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> col(static_cast<size_t>(g.ck * w.outSize));
      for (int64_t gi = lo; gi < hi; ++gi)
        for (int64_t n = 0; n < w.n; ++n) {
          const float *dyo = dy + (n * g.m + gi * g.mg) * w.outSize;
          im2col(w, x + (n * w.c + gi * g.cg) * w.inSize, g.cg, col.data());
          sgemm(false, true, g.mg, g.ck, w.outSize, 1.0f, dyo, w.outSize, col.data(), w.outSize,
                1.0f, dw + gi * g.mg * g.ck, g.ck);
          sgemm(true, false, g.ck, w.outSize, g.mg, 1.0f, wt + gi * g.mg * g.ck, g.ck, dyo,
                w.outSize, 0.0f, col.data(), w.outSize);
          col2imAdd(w, col.data(), g.cg, dx + (n * w.c + gi * g.cg) * w.inSize);
        }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<Window> poolWindow(const KernelContext &c, const TensorView &x, const TensorView &y) {
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, c.intsAttr("kernel"));
  DS_ASSIGN_OR_RETURN(Window w, window(c, x, kernel, y));
  if (y.shape[0] != w.n || y.shape[1] != w.c) return c.error("result must keep N and C");
  return w;
}

/// Visits the in-bounds offsets of window p, in the kernel's row-major tap
/// order (the first maximum wins), only over the taps that land inside.
template <typename F> void forWindow(const Window &w, int64_t p, F f) {
  const size_t k = w.in.size();
  // Per dimension: the first in-bounds coordinate, its step, and how many.
  int64_t first[8], step[8], count[8], idx[8], stride[8];
  std::vector<int64_t> big; // more than 8 spatial dimensions: rare
  int64_t *fst = first, *stp = step, *cnt = count, *ix = idx, *str = stride;
  if (k > 8) {
    big.resize(5 * k);
    fst = big.data(), stp = fst + k, cnt = stp + k, ix = cnt + k, str = ix + k;
  }
  int64_t st = 1;
  for (size_t d = k; d-- > 0;) {
    const int64_t pd = p % w.out[d];
    p /= w.out[d];
    const int64_t base = pd * w.strides[d] - w.padBegin[d];
    auto [lo, hi] = tapRange(base, w.dilations[d], w.kernel[d], w.in[d]);
    if (lo == hi) return;
    fst[d] = base + lo * w.dilations[d];
    stp[d] = w.dilations[d];
    cnt[d] = hi - lo;
    ix[d] = 0;
    str[d] = st;
    st *= w.in[d];
  }
  while (true) {
    int64_t off = 0;
    for (size_t d = 0; d < k; ++d) off += (fst[d] + ix[d] * stp[d]) * str[d];
    f(off);
    size_t d = k;
    while (d-- > 0) {
      if (++ix[d] < cnt[d]) break;
      ix[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

/// The padded window size ONNX divides by with count_include_pad: the part
/// of the window inside [-padBegin, in + padEnd), not past the end padding.
int64_t paddedCount(const Window &w, int64_t p, const std::vector<int64_t> &padEnd) {
  int64_t count = 1;
  for (size_t d = w.in.size(); d-- > 0;) {
    int64_t pd = p % w.out[d];
    p /= w.out[d];
    auto [lo, hi] = tapRange(pd * w.strides[d], w.dilations[d], w.kernel[d],
                             w.in[d] + w.padBegin[d] + padEnd[d]);
    count *= hi - lo;
  }
  return count;
}

/// The first maximum of window p in one channel plane: its offset, or -1
/// when the window lies wholly in the padding. NaN wins, as in PyTorch.
template <typename T> int64_t windowArgMax(const Window &w, const T *xc, int64_t p) {
  T best{};
  int64_t at = -1;
  forWindow(w, p, [&](int64_t off) {
    if (at < 0 || xc[off] > best || (xc[off] != xc[off] && best == best)) {
      best = xc[off];
      at = off;
    }
  });
  return at;
}

/// 2-D max pooling's forward, the CNN case: per output row, each kernel
/// tap updates the row's running maxima over the columns where that tap is
/// inside the input (a branch-free loop the compiler vectorizes), instead of
/// per-element offset arithmetic. Same results as windowArgMax: the first
/// NaN wins, an all-padding window gives the lowest value.
template <typename T> void maxPool2d(const Window &w, const T *xc, T *yc) {
  const int64_t ih = w.in[0], iw = w.in[1], oh = w.out[0], ow = w.out[1];
  const int64_t sy = w.strides[0], sx = w.strides[1], py0 = w.padBegin[0], px0 = w.padBegin[1];
  const T empty = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
  // Taps that land in some column of the input, for any output column.
  auto [kxLo, kxHi] =
      tapRange((ow - 1) * sx - px0, w.dilations[1], w.kernel[1], iw + (ow - 1) * sx);
  for (int64_t py = 0; py < oh; ++py) {
    T *yrow = yc + py * ow;
    std::fill(yrow, yrow + ow, empty);
    auto [kyLo, kyHi] = tapRange(py * sy - py0, w.dilations[0], w.kernel[0], ih);
    for (int64_t ky = kyLo; ky < kyHi; ++ky) {
      int64_t y = py * sy - py0 + ky * w.dilations[0];
      const T *row = xc + y * iw;
      for (int64_t kx = kxLo; kx < kxHi; ++kx) {
        int64_t off = kx * w.dilations[1] - px0; // input column of output column px: px*sx + off
        int64_t lo = std::max<int64_t>(0, ceilDiv(-off, sx));
        int64_t hi = std::min<int64_t>(ow - 1, floorDiv(iw - 1 - off, sx));
        for (int64_t px = lo; px <= hi; ++px) {
          T v = row[px * sx + off], b = yrow[px];
          yrow[px] = (v > b || (v != v && b == b)) ? v : b;
        }
      }
    }
  }
}

/// Row-major spatial offset -> the same point's column-major offset.
int64_t columnMajor(const Window &w, int64_t off) {
  int64_t r = 0, stride = 1;
  std::vector<int64_t> coord(w.in.size());
  for (size_t d = w.in.size(); d-- > 0;) {
    coord[d] = off % w.in[d];
    off /= w.in[d];
  }
  for (size_t d = 0; d < w.in.size(); ++d) {
    r += coord[d] * stride;
    stride *= w.in[d];
  }
  return r;
}

/// Max pooling of any native element type (kIndices: the flat index of each
/// window's maximum in the whole input instead, MaxPool's Indices output).
template <typename T, bool kIndices>
PreparedStep makeMaxPool(const Window &w, const T *xp, void *outp, bool colMajor) {
  return [=]() -> absl::Status {
    parallelFor(w.n * w.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const T *xc = xp + nc * w.inSize;
        if constexpr (!kIndices) {
          if (w.in.size() == 2) {
            maxPool2d(w, xc, static_cast<T *>(outp) + nc * w.outSize);
            continue;
          }
        }
        for (int64_t p = 0; p < w.outSize; ++p) {
          int64_t at = windowArgMax(w, xc, p), idx = nc * w.outSize + p;
          if constexpr (kIndices)
            static_cast<int64_t *>(outp)[idx] =
                at < 0 ? -1 : nc * w.inSize + (colMajor ? columnMajor(w, at) : at);
          else
            static_cast<T *>(outp)[idx] =
                at >= 0 ? xc[at]
                        : (std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::lowest());
        }
      }
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareMaxPoolIndices(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::I64, "result"));
  DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, c.in[0], c.out[0]));
  DS_ASSIGN_OR_RETURN(int64_t colMajor, c.intAttr("column_major"));
  const TensorView x = c.in[0];
  void *out = c.out[0].data;
  return dispatchNative(c, x.dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    using T = decltype(tag);
    return makeMaxPool<T, true>(w, x.as<T>(), out, colMajor != 0);
  });
}

/// f32 pooling over [N, d..., C]: each window position reduces whole rows
/// of C contiguous channels (vectorized across channels), with the
/// channels-first kernel's semantics (first NaN wins a max, padding never
/// does; averages in double).
/// y = max(y, x) elementwise, NaN winning (ONNX MaxPool propagates NaN):
/// written as a select so the compiler vectorizes it (a conditional store
/// it would not).
inline void maxInto(float *__restrict y, const float *__restrict x, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const float a = x[k], b = y[k];
    y[k] = (a > b || (a != a && b == b)) ? a : b;
  }
}

absl::StatusOr<PreparedStep> preparePoolChannelsLast(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "channels_last input"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  if (c.in[0].rank() < 3 || c.out[0].rank() != c.in[0].rank())
    return c.error("a channels_last input must be [N, spatial..., C]");
  std::vector<TensorView> in = c.in, out = c.out;
  in[0].shape = channelsFirstShape(in[0].shape);
  out[0].shape = channelsFirstShape(out[0].shape);
  KernelContext first{c.step, in, out};
  DS_ASSIGN_OR_RETURN(Window w, poolWindow(first, in[0], out[0]));
  DS_ASSIGN_OR_RETURN(std::string kind, c.stringAttr("kind"));
  if (kind != "max" && kind != "avg") return c.error("kind must be max or avg");
  const bool isMax = kind == "max";
  int64_t includePad = 0;
  if (c.hasAttr("count_include_pad")) {
    DS_ASSIGN_OR_RETURN(includePad, c.intAttr("count_include_pad"));
  }
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
  std::vector<int64_t> padEnd(pads.begin() + w.in.size(), pads.end());
  const float *xp = c.in[0].as<float>();
  float *yp = c.out[0].as<float>();
  if (isMax && w.in.size() == 2) {
    // The CNN stem's max pool: per output pixel, the in-bounds taps of its
    // window by row and column, each a contiguous channel row.
    return PreparedStep([=] {
      const int64_t ch = w.c, ih = w.in[0], iw = w.in[1], oh = w.out[0], ow = w.out[1];
      parallelFor(w.n * oh, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t nr = lo; nr < hi; ++nr) {
          const int64_t n = nr / oh, r = nr % oh;
          const float *xn = xp + n * ih * iw * ch;
          for (int64_t q = 0; q < ow; ++q) {
            float *y = yp + ((n * oh + r) * ow + q) * ch;
            std::fill(y, y + ch, -std::numeric_limits<float>::infinity());
            bool first = true;
            auto [aLo, aHi] = tapRange(r * w.strides[0] - w.padBegin[0], w.dilations[0],
                                       w.kernel[0], ih);
            auto [bLo, bHi] = tapRange(q * w.strides[1] - w.padBegin[1], w.dilations[1],
                                       w.kernel[1], iw);
            for (int64_t a = aLo; a < aHi; ++a) {
              const int64_t yy = r * w.strides[0] - w.padBegin[0] + a * w.dilations[0];
              for (int64_t b = bLo; b < bHi; ++b) {
                const int64_t xx = q * w.strides[1] - w.padBegin[1] + b * w.dilations[1];
                const float *x = xn + (yy * iw + xx) * ch;
                if (first) {
                  std::copy(x, x + ch, y);
                  first = false;
                  continue;
                }
                maxInto(y, x, ch);
              }
            }
          }
        }
      });
      return absl::OkStatus();
    });
  }
  return PreparedStep([=] {
    const int64_t ch = w.c;
    parallelFor(w.n * w.outSize, 1, [&](int64_t lo, int64_t hi) {
      std::vector<double> sum(isMax ? 0 : ch);
      for (int64_t np = lo; np < hi; ++np) {
        const int64_t n = np / w.outSize, p = np % w.outSize;
        const float *xn = xp + n * w.inSize * ch;
        float *y = yp + np * ch;
        int64_t inside = 0;
        if (isMax) {
          std::fill(y, y + ch, -std::numeric_limits<float>::infinity());
          forWindow(w, p, [&](int64_t off) {
            const float *x = xn + off * ch;
            if (inside++ == 0) {
              std::copy(x, x + ch, y);
              return;
            }
            maxInto(y, x, ch);
          });
        } else {
          std::fill(sum.begin(), sum.end(), 0.0);
          forWindow(w, p, [&](int64_t off) {
            const float *x = xn + off * ch;
            for (int64_t k = 0; k < ch; ++k) sum[k] += x[k];
            ++inside;
          });
          int64_t div = includePad ? paddedCount(w, p, padEnd) : inside;
          for (int64_t k = 0; k < ch; ++k) y[k] = div ? static_cast<float>(sum[k] / div) : 0.0f;
        }
      }
    });
    return absl::OkStatus();
  });
}

template <bool kGrad>
absl::StatusOr<PreparedStep> preparePool(const KernelContext &c) {
  if (!kGrad && c.hasAttr("channels_last")) {
    DS_ASSIGN_OR_RETURN(int64_t cl, c.intAttr("channels_last"));
    if (cl) return preparePoolChannelsLast(c);
  }
  if (!kGrad && c.stringAttr("kind").value_or("") == "max") {
    // Max pooling of any native type; average pooling and gradients are f32.
    DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
    DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
    DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, c.in[0], c.out[0]));
    const TensorView x = c.in[0];
    void *out = c.out[0].data;
    return dispatchNative(c, x.dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
      using T = decltype(tag);
      return makeMaxPool<T, false>(w, x.as<T>(), out, false);
    });
  }
  DS_RETURN_IF_ERROR(c.expectArity(kGrad ? 2 : 1, kGrad ? 2 : 1, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  const TensorView &x = c.in[0];
  const TensorView &y = kGrad ? c.in[1] : c.out[0];
  if (kGrad) DS_RETURN_IF_ERROR(c.expectShape(c.out[0], x.shape, "result"));
  DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, x, y));
  DS_ASSIGN_OR_RETURN(std::string kind, c.stringAttr("kind"));
  if (kind != "max" && kind != "avg") return c.error("kind must be max or avg");
  bool isMax = kind == "max";
  int64_t includePad = 0;
  if (c.hasAttr("count_include_pad")) {
    DS_ASSIGN_OR_RETURN(includePad, c.intAttr("count_include_pad"));
  }
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
  std::vector<int64_t> padEnd(pads.begin() + w.in.size(), pads.end());
  const float *xp = x.as<float>(), *yp = y.as<float>();
  float *out = c.out[0].as<float>();
  int64_t outNumel = c.out[0].numel;
  return PreparedStep([=] {
    if (kGrad) std::fill(out, out + outNumel, 0.0f);
    parallelFor(w.n * w.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const float *xc = xp + nc * w.inSize;
        for (int64_t p = 0; p < w.outSize; ++p) {
          int64_t idx = nc * w.outSize + p;
          if (isMax) { // only the gradient: the forward max is makeMaxPool
            int64_t at = windowArgMax(w, xc, p);
            if (at >= 0) out[nc * w.inSize + at] += yp[idx];
          } else {
            double sum = 0;
            int64_t inside = 0;
            forWindow(w, p, [&](int64_t off) {
              sum += xc[off];
              ++inside;
            });
            int64_t div = includePad ? paddedCount(w, p, padEnd) : inside;
            if (kGrad) {
              float share = div ? yp[idx] / static_cast<float>(div) : 0.0f;
              forWindow(w, p, [&](int64_t off) { out[nc * w.inSize + off] += share; });
            } else {
              out[idx] = div ? static_cast<float>(sum / div) : 0.0f;
            }
          }
        }
      }
    });
    return absl::OkStatus();
  });
}

} // namespace

void registerConvKernels(KernelRegistry &r) {
  r.add("conv", prepareConv);
  r.add("conv_grad", prepareConvGrad);
  r.add("pool", preparePool<false>);
  r.add("pool_grad", preparePool<true>);
  r.add("max_pool_indices", prepareMaxPoolIndices);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
