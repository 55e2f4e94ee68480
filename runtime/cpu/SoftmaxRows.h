// Softmax rows (masked or not) and their gradient, for the softmax kernels
// (NormalizationKernels.cpp) and fused_matmul's row epilogues
// (LinalgKernels.cpp). Defined once, out of line, in
// NormalizationKernels.cpp: both kernels run the same instructions and so
// give the same bits (LinalgKernels.cpp is compiled without FMA
// contraction, the normalization kernels with it). Kernel code: included
// inside a kernel file's instruction-set region (after IsaBegin.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#ifndef DS_CPU_ISA_REGION
#error "include SoftmaxRows.h after runtime/cpu/IsaBegin.h"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {

/// A mask broadcast to a [rows..., n] operand, read row by row: element
/// offsets of each operand dimension in the mask (0 where it broadcasts).
struct MaskRows {
  std::vector<int64_t> rowShape, rowStrides; // the operand's leading dims
  int64_t step = 0;                          // along a row: 0 or 1
  static absl::StatusOr<MaskRows> make(const KernelContext &c, const TensorView &mask,
                                       const std::vector<int64_t> &shape) {
    if (mask.rank() > static_cast<int64_t>(shape.size()))
      return c.error("mask [" + shapeToString(mask.shape) + "] has a higher rank than [" +
                     shapeToString(shape) + "]");
    std::vector<int64_t> padded(shape.size() - mask.rank(), 1);
    padded.insert(padded.end(), mask.shape.begin(), mask.shape.end());
    std::vector<int64_t> strides(shape.size());
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      if (padded[i] != shape[i] && padded[i] != 1)
        return c.error("mask [" + shapeToString(mask.shape) + "] does not broadcast to [" +
                       shapeToString(shape) + "]");
      strides[i] = padded[i] == 1 ? 0 : stride;
      stride *= padded[i];
    }
    MaskRows m;
    m.step = strides.back();
    m.rowShape.assign(shape.begin(), shape.end() - 1);
    m.rowStrides.assign(strides.begin(), strides.end() - 1);
    // Only the row dimensions the mask does not broadcast move it: a causal
    // [1, 1, T, T] mask over [B, H, T, T] is one division per row.
    int64_t inner = 1;
    for (size_t d = m.rowShape.size(); d-- > 0;) {
      if (m.rowStrides[d] != 0 && m.rowShape[d] > 1)
        m.terms.push_back({inner, m.rowShape[d], m.rowStrides[d]});
      inner *= m.rowShape[d];
    }
    return m;
  }
  /// The mask's element offset at the start of row `row`.
  int64_t offset(int64_t row) const {
    int64_t off = 0;
    for (const Term &t : terms) off += (row / t.inner) % t.size * t.stride;
    return off;
  }
  struct Term {
    int64_t inner, size, stride; // rows per step of the dimension, its size, its mask stride
  };
  std::vector<Term> terms;
};

/// Softmax over rows of n elements, after an optional mask: an i1 mask
/// selecting `fill` (masked_fill), or an f32 mask added (an additive mask).
struct SoftmaxRows {
  const void *mask = nullptr; // null: plain softmax
  bool selects = false;       // i1 mask with `fill`, else f32 added
  float fill = 0.0f;
  MaskRows rows; // where row o's mask starts

  /// py = softmax(mask(alpha * px)) for row `o` (py may be px).
  void row(const float *px, float *py, int64_t o, int64_t n, float alpha = 1.0f) const;
  /// pd = py * (pg - sum(py * pg)) for row `o` of a softmax's result py and
  /// its output gradient pg, 0 where an (i1) mask is set (pd may be pg).
  void gradRow(const float *py, const float *pg, float *pd, int64_t o, int64_t n) const;
};

} // namespace ds::rt::cpu::DS_CPU_ISA
