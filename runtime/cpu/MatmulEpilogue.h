// What fused_matmul (and quantized_matmul) do to each element of a product
// before storing it: the epilogue, applied block by block by the GEMM
// paths. Included by kernel files after IsaBegin.h and SoftmaxRows.h
// (and runtime/kernels/ElementMath.h before IsaBegin.h, as its functions
// keep the default target).
#pragma once

#ifndef DS_CPU_ISA_REGION
#error "include MatmulEpilogue.h after runtime/cpu/IsaBegin.h"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {

/// What fused_matmul does to each element of the product before storing
/// it: y = act(alpha * p + bias[col]), then y + addend, y * addend or
/// y * gelu'(addend). Applied block by block right after the GEMM wrote
/// the block, while it is in cache. Row epilogues (a softmax of
/// alpha * p, or a softmax gradient with the addend as the softmax's
/// result) need whole rows: blocks are never split by columns then.
struct Epilogue {
  enum class Act { None, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh };
  enum class Combine { Add, Mul, GeluGrad, GeluTanhGrad, SoftmaxGrad };
  float alpha = 1.0f;
  const float *bias = nullptr;   // [n]
  const float *addend = nullptr; // the result's shape
  Act act = Act::None;
  Combine combine = Combine::Add;
  bool softmax = false;
  SoftmaxRows rowOp;    // the softmax's (or its gradient's) mask
  float *pre = nullptr; // the activation's input, stored too (pre_activation), laid out like y

  /// Only `alpha * p + addend`: a GEMM with beta = 1 over the addend.
  bool accumulateOnly() const {
    return addend && !bias && act == Act::None && combine == Combine::Add;
  }
  bool wholeRows() const { return softmax || combine == Combine::SoftmaxGrad; }

  /// Rows [r0, r1) x columns [c0, c1) of one [., ld] product `p`, written
  /// to `y` (which may be `p`); `add` is that product's addend. `rowBase`
  /// is the product's row 0 among all the result's rows (where masks are
  /// read).
  void apply(const float *p, float *y, const float *add, int64_t ld, int64_t r0, int64_t r1,
             int64_t c0, int64_t c1, int64_t rowBase = 0) const {
    if (wholeRows()) return rowsOf(p, y, add, ld, r0, r1, c1, rowBase);
    switch (act) {
    case Act::None: return run(p, y, add, ld, r0, r1, c0, c1, [](float v) { return v; });
    case Act::Relu: return run(p, y, add, ld, r0, r1, c0, c1, math::Relu());
    case Act::Gelu: return run(p, y, add, ld, r0, r1, c0, c1, math::Gelu());
    case Act::GeluTanh: return run(p, y, add, ld, r0, r1, c0, c1, math::GeluTanh());
    case Act::Sigmoid: return run(p, y, add, ld, r0, r1, c0, c1, math::Sigmoid());
    case Act::Tanh: return run(p, y, add, ld, r0, r1, c0, c1, math::Tanh());
    case Act::Silu:
      return run(p, y, add, ld, r0, r1, c0, c1, [](float v) { return v * math::Sigmoid()(v); });
    }
  }

private:
  /// Whole rows of n: softmax(alpha * p), or softmax_grad(add, alpha * p).
  void rowsOf(const float *p, float *y, const float *add, int64_t ld, int64_t r0, int64_t r1,
              int64_t n, int64_t rowBase) const {
    const float al = alpha;
    // A gradient written from scratch (p != y) may be written over its
    // addend: the scaled product goes to a row of its own then.
    std::vector<float> scaled(!softmax && p != y && al != 1.0f ? n : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const float *pr = p + r * ld;
      float *yr = y + r * ld;
      if (softmax) { // scaled as it is masked (the unfused product's values)
        rowOp.row(pr, yr, rowBase + r, n, al);
        continue;
      }
      if (al != 1.0f) { // the scaled product, as the unfused product stored it
        float *to = scaled.empty() ? yr : scaled.data();
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) to[j] = al * pr[j];
        pr = to;
      }
      rowOp.gradRow(add + r * ld, pr, yr, rowBase + r, n);
    }
  }

  template <class F>
  void run(const float *p, float *y, const float *add, int64_t ld, int64_t r0, int64_t r1,
           int64_t c0, int64_t c1, F act) const {
    const float al = alpha, *bi = bias;
    for (int64_t r = r0; r < r1; ++r) {
      const float *pr = p + r * ld, *ar = add ? add + r * ld : nullptr;
      float *yr = y + r * ld;
      const bool multiply = combine == Combine::Mul;
      if (float *qr = pre ? pre + r * ld : nullptr) { // (no addend with it)
        if (bi) {
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) {
            const float v = al * pr[j] + bi[j];
            qr[j] = v;
            yr[j] = act(v);
          }
        } else {
#pragma omp simd
          for (int64_t j = c0; j < c1; ++j) {
            const float v = al * pr[j];
            qr[j] = v;
            yr[j] = act(v);
          }
        }
        continue;
      }
      // One loop per form, so each vectorizes without branches.
      if (ar && combine == Combine::GeluGrad) {
        gradRow(pr, yr, ar, bi, c0, c1, act, math::GeluDeriv());
      } else if (ar && combine == Combine::GeluTanhGrad) {
        gradRow(pr, yr, ar, bi, c0, c1, act, math::GeluTanhDeriv());
      } else if (bi && ar && multiply) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j] + bi[j]) * ar[j];
      } else if (bi && ar) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j] + bi[j]) + ar[j];
      } else if (bi) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j] + bi[j]);
      } else if (ar && multiply) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j]) * ar[j];
      } else if (ar) {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j]) + ar[j];
      } else {
#pragma omp simd
        for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j]);
      }
    }
  }
  /// y = act(alpha * p + bias) * deriv(x) over one row (a GELU's backward:
  /// the product is the gradient of its output, x its input).
  template <class F, class D>
  void gradRow(const float *pr, float *yr, const float *xr, const float *bi, int64_t c0,
               int64_t c1, F act, D deriv) const {
    const float al = alpha;
    if (bi) {
#pragma omp simd
      for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j] + bi[j]) * deriv(xr[j]);
    } else {
#pragma omp simd
      for (int64_t j = c0; j < c1; ++j) yr[j] = act(al * pr[j]) * deriv(xr[j]);
    }
  }
};


/// The step's element-wise epilogue: `alpha`, the [n] `bias` and the
/// `addend` (the result's shape) when given, `combine`, `activation`.
inline absl::Status readEpilogue(const KernelContext &c, int64_t n, const TensorView *bias,
                                 const TensorView *addend, Epilogue &e) {
  if (c.hasAttr("alpha")) {
    DS_ASSIGN_OR_RETURN(double alpha, c.floatAttr("alpha"));
    if (!std::isfinite(static_cast<float>(alpha))) return c.error("alpha must be finite as an f32");
    e.alpha = static_cast<float>(alpha);
  }
  if (bias) {
    DS_RETURN_IF_ERROR(c.expectShape(*bias, {n}, "bias"));
    e.bias = bias->as<float>();
  }
  if (addend) {
    DS_RETURN_IF_ERROR(c.expectShape(*addend, c.out[0].shape, "addend"));
    e.addend = addend->as<float>();
    std::string combine = "add";
    if (c.hasAttr("combine")) {
      DS_ASSIGN_OR_RETURN(combine, c.stringAttr("combine"));
    }
    static const std::map<std::string, Epilogue::Combine> combines = {
        {"add", Epilogue::Combine::Add},
        {"mul", Epilogue::Combine::Mul},
        {"gelu_grad", Epilogue::Combine::GeluGrad},
        {"gelu_tanh_grad", Epilogue::Combine::GeluTanhGrad},
        {"softmax_grad", Epilogue::Combine::SoftmaxGrad}};
    auto it = combines.find(combine);
    if (it == combines.end())
      return c.error("combine must be add, mul, gelu_grad, gelu_tanh_grad or softmax_grad, got '" +
                     combine + "'");
    e.combine = it->second;
  }
  if (c.hasAttr("activation")) {
    static const std::map<std::string, Epilogue::Act> acts = {
        {"none", Epilogue::Act::None},         {"relu", Epilogue::Act::Relu},
        {"gelu", Epilogue::Act::Gelu},         {"gelu_tanh", Epilogue::Act::GeluTanh},
        {"silu", Epilogue::Act::Silu},         {"sigmoid", Epilogue::Act::Sigmoid},
        {"tanh", Epilogue::Act::Tanh}};
    DS_ASSIGN_OR_RETURN(std::string name, c.stringAttr("activation"));
    auto it = acts.find(name);
    if (it == acts.end()) return c.error("unknown activation '" + name + "'");
    e.act = it->second;
  }
  return absl::OkStatus();
}

} // namespace ds::rt::cpu::DS_CPU_ISA
