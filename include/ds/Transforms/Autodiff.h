//===- Autodiff.h - reverse-mode differentiation of ds IR -------*- C++ -*-===//
//
// Reverse mode over one single-block function: only ops on a path from a
// differentiated value to the loss get adjoints, so masks, shape arithmetic
// and other constant subgraphs cost nothing. Each ds op has a gradient
// rule (Autodiff.cpp); an op on the path without one is an error naming it.
//
//===----------------------------------------------------------------------===//
#ifndef DS_TRANSFORMS_AUTODIFF_H
#define DS_TRANSFORMS_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::ds {

/// Emits, at the builder's insertion point, d(loss)/d(v) for every v in
/// `wrt`, with d(loss)/d(loss) = `seed` (a scalar of the loss's type). A v
/// the loss does not depend on differentiably (an attention mask buffer,
/// an unused weight) gets a null gradient. Fails with a diagnostic on an
/// op without a gradient rule.
FailureOr<SmallVector<Value>> differentiate(OpBuilder &b, Value loss, Value seed,
                                            ArrayRef<Value> wrt);

} // namespace mlir::ds

#endif // DS_TRANSFORMS_AUTODIFF_H
