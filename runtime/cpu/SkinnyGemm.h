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

/// Packs `b` ([k, n] row-major, or [n, k] when `transposed`): one copy per
/// constant, shared by every step that reads it.
SkinnyWeight packSkinny(const float *b, int64_t k, int64_t n, bool transposed);

/// C[m, n] = alpha * A[m, k] x B on the backend's threads, for m <=
/// kSkinnyMaxRows (rows lda apart in A, ldc apart in C); `finish(c0, c1)`
/// is called on the thread that computed columns [c0, c1) of every row,
/// right after (an epilogue, while the block is in cache).
void skinnyGemm(int64_t m, const float *a, int64_t lda, const SkinnyWeight &b, float *c,
                int64_t ldc, float alpha, const std::function<void(int64_t, int64_t)> &finish);

} // namespace ds::rt::cpu::DS_CPU_ISA

namespace ds::rt::cpu::DS_CPU_ISA {

/// A quantized [N, K] weight (int8, or int4 two a byte) repacked in panels
/// of 16 output channels for the skinny kernel: int8 panels hold K rows of
/// 16 bytes; int4 panels K/2 rows of 16 bytes, each byte two consecutive
/// k of one channel (low nibble first). Per (panel, group, channel) the
/// scale and the offset -zero_point * scale, so a value is q * scale +
/// offset.
struct SkinnyQuantWeight {
  int64_t k = 0, n = 0, panels = 0, group = 0; // group: K values per scale
  int bits = 8;
  std::shared_ptr<uint8_t> data;
  std::shared_ptr<float> scale, offset; // panels * (k / group) * 16 each
};

/// Packs `weight` ([n, k] i8, or [n, k/2] u8 nibbles) with `scale` ([n] or
/// [n, k/group]) and zero points (`zero`, the weight's type, same shape,
/// or null: 0 for int8, 8 for int4).
SkinnyQuantWeight packSkinnyQuant(const uint8_t *weight, int64_t n, int64_t k, int bits,
                                  int64_t group, const float *scale, const uint8_t *zero);

/// skinnyGemm with a quantized weight: C = alpha * A x W^T, W dequantized
/// as it is read.
void skinnyQuantGemm(int64_t m, const float *a, int64_t lda, const SkinnyQuantWeight &b,
                     float *c, int64_t ldc, float alpha,
                     const std::function<void(int64_t, int64_t)> &finish);

} // namespace ds::rt::cpu::DS_CPU_ISA

namespace ds::rt::cpu::DS_CPU_ISA {

/// The skinny kernel on int8 dot products (AVX512-VNNI: four u8 x s8
/// products a lane and instruction) for int8 activations: the weight
/// packed so each 32-bit lane of a 64-byte row holds four consecutive k
/// of one channel (int8 shifted to u8 by +128; int4 as 0..15 nibbles, k
/// and k + 4 in one byte). Null `data` when this CPU or build has no VNNI
/// or K does not tile.
struct SkinnyVnniWeight {
  int64_t k = 0, n = 0, panels = 0, group = 0;
  int bits = 8;
  int32_t zero = 0; // what the packed values are offset by (128 for int8, 8 for int4)
  std::shared_ptr<uint8_t> data;
  std::shared_ptr<float> scale; // panels * (k / group) * 16
};

/// Packs an [n, k] weight (i8, or u8 nibbles) with its scales; no zero
/// points (quantized activations take symmetric weights).
SkinnyVnniWeight packSkinnyVnni(const uint8_t *weight, int64_t n, int64_t k, int bits,
                                int64_t group, const float *scale);

/// C[m, n] = rowScale[m] * sum_g scale[., g] * (xq . W_g) for m <= 16 rows
/// of int8 activations `xq` ([m, k]) whose per-group sums are `xsum`
/// ([m, k / group]); `finish` as skinnyGemm's.
void skinnyVnniGemm(int64_t m, const int8_t *xq, const int32_t *xsum, const float *rowScale,
                    const SkinnyVnniWeight &w, float *c, int64_t ldc,
                    const std::function<void(int64_t, int64_t)> &finish);

} // namespace ds::rt::cpu::DS_CPU_ISA
