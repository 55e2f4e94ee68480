// Products with few rows and a constant right operand: a decode step's
// projections (one row per sequence). They are memory-bound: each weight
// is read once and used by every row, so the kernel streams the weight at
// the memory's speed and keeps all rows' sums of a block of columns in
// registers. The weight is packed once, when the step is prepared, into
// panels of 16 columns, each panel's K rows contiguous: a block of columns
// reads a few sequential streams.
//
// Included by kernel files after IsaBegin.h (declared per instruction set).
#pragma once

#ifndef DS_CPU_ISA_REGION
#error "include SkinnyGemm.h after runtime/cpu/IsaBegin.h"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {

/// A [K, N] weight in panels of kSkinnyPanel columns (the last one zero
/// padded): panel p holds columns [16p, 16p + 16) of every row, row-major.
struct SkinnyWeight {
  static constexpr int64_t kPanel = 16;
  int64_t k = 0, n = 0, panels = 0;
  std::shared_ptr<float> data; // panels * k * kPanel floats, 64-byte aligned
};

/// Rows at most this many take the skinny kernel.
constexpr int64_t kSkinnyMaxRows = 16;

/// Packs `b` ([k, n] row-major, or [n, k] when `transposed`).
SkinnyWeight packSkinny(const float *b, int64_t k, int64_t n, bool transposed);

/// C[m, n] = alpha * A[m, k] x B on the backend's threads, for m <=
/// kSkinnyMaxRows (rows lda apart in A, ldc apart in C); `finish(c0, c1)`
/// is called on the thread that computed columns [c0, c1) of every row,
/// right after (an epilogue, while the block is in cache).
void skinnyGemm(int64_t m, const float *a, int64_t lda, const SkinnyWeight &b, float *c,
                int64_t ldc, float alpha, const std::function<void(int64_t, int64_t)> &finish);

} // namespace ds::rt::cpu::DS_CPU_ISA
