//===- StridedViews.h - the checks a strided operand view must pass -------===//
//
// Fused kernels (attention, fused_matmul) read operands through strided
// views instead of copies of transposes, and fused_matmul may write its
// result through one. The compiler's verifier and the CPU kernels (which
// must not trust a plan) apply the same rules, from here. Header-only and
// free of MLIR, so that both sides include it.
//
//===----------------------------------------------------------------------===//
#ifndef DS_RUNTIME_PLAN_STRIDEDVIEWS_H
#define DS_RUNTIME_PLAN_STRIDEDVIEWS_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ds::plan {

/// Why the view (`rank` sizes and element strides, from element `offset`)
/// of a tensor of `numel` elements is invalid, or nullptr: sizes >= 1,
/// strides >= 0, and the furthest element it reaches inside the tensor
/// (computed without overflow).
inline const char *viewProblem(const int64_t *shape, const int64_t *strides, size_t rank,
                               int64_t numel, int64_t offset = 0) {
  if (offset < 0 || offset >= numel) return "view offset is outside its operand";
  int64_t last = offset;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 1 || strides[i] < 0) return "view sizes must be >= 1 and strides >= 0";
    if (numel < 1 || (strides[i] > 0 && shape[i] - 1 > (numel - 1 - last) / strides[i]))
      return "view reaches past its operand";
    last += (shape[i] - 1) * strides[i];
  }
  return nullptr;
}

/// A matrix view (the last two of `rank` >= 2 dimensions) a GEMM reads:
/// unit steps along rows or along columns, and the other dimension's steps
/// clear of them (BLAS's leading dimension).
inline bool gemmReadable(const int64_t *shape, const int64_t *strides, size_t rank) {
  int64_t rows = shape[rank - 2], cols = shape[rank - 1];
  int64_t sr = strides[rank - 2], sc = strides[rank - 1];
  bool rowMajor = (cols == 1 || sc == 1) && (rows == 1 || sr >= cols);
  bool colMajor = (rows == 1 || sr == 1) && (cols == 1 || sc >= rows);
  return rowMajor || colMajor;
}

/// The view visits the product of its sizes elements once each: sorted by
/// stride, its dimensions (of size > 1) step like a row-major tensor's.
inline bool denseView(const int64_t *shape, const int64_t *strides, size_t rank) {
  std::vector<std::pair<int64_t, int64_t>> dims; // (stride, size)
  for (size_t i = 0; i < rank; ++i)
    if (shape[i] > 1) dims.push_back({strides[i], shape[i]});
  std::sort(dims.begin(), dims.end());
  int64_t next = 1;
  for (auto [stride, size] : dims) {
    if (stride != next) return false;
    next *= size;
  }
  return true;
}

} // namespace ds::plan

#endif // DS_RUNTIME_PLAN_STRIDEDVIEWS_H
