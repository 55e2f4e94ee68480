//===- Scales.h - which scalar multiplies a pass may move past a product --===//
//
// (c x) y = c (x y) holds in real arithmetic, not at the ends of f32's
// range: with c = 1e20 and x = 1e-20 the scaled operand is ordinary while
// x y underflows (and the other way round for overflow). Passes that move
// a scalar into a product's alpha or attention's scale (ds-fuse-matmul-
// epilogues, ds-fuse-attention) move only moderate ones, so that results
// change by rounding alone for any values the product itself does not
// overflow or underflow on.
//
//===----------------------------------------------------------------------===//
#ifndef DS_TRANSFORMS_SCALES_H
#define DS_TRANSFORMS_SCALES_H

#include <cmath>

namespace mlir::ds {

/// A scale a pass may move past a product: finite, non-zero, and within
/// [2^-8, 2^8] (attention's 1/sqrt(d) up to d = 65536).
inline bool movableScale(double c) {
  return std::isfinite(c) && c != 0.0 && std::fabs(c) >= 0x1p-8 && std::fabs(c) <= 0x1p8;
}

} // namespace mlir::ds

#endif // DS_TRANSFORMS_SCALES_H
