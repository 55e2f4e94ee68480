//===- DSOps.h - ops of the ds dialect --------------------------*- C++ -*-===//
#ifndef DS_DIALECTS_DS_DSOPS_H
#define DS_DIALECTS_DS_DSOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpImplementation.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/ds/DSAttributes.h"
#include "dialects/ds/DSInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/ds/DSOps.h.inc"

namespace mlir::ds {
/// Numpy broadcast of static shapes; failure when incompatible.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes);
/// The value every element of `v` has when `v` is known before the run: a
/// splat float ds.constant, or a one-element ds.parameter (PyTorch 2's
/// exporter writes literals as initializers; a parameter still in the IR
/// after ds-build-train-step is not trained). NaN and anything else: none.
std::optional<double> knownFloatSplat(Value v);
/// Whether every element of `v` is already on the uint8 grid (scale,
/// zeroPoint): v is a ds.fake_quantize, or a quantized product rounded as
/// it stores (round_scale), with those parameters, seen through ops that
/// move values without changing them (reshape, transpose, slice, expand).
/// Rounding such a value to the same grid again changes nothing.
bool isOnUint8Grid(Value v, double scale, int64_t zeroPoint);
/// Keys per tile of ds.cached_attention's key cache ([Bc, Hkv, M / 16, D, 16]).
constexpr int64_t kCachedKeyTile = 16;
/// An optimizer's update of one parameter: operands (param, grad, its
/// states..., scalars), results (param, states...).
inline bool isOptimizerUpdate(Operation *op) {
  return isa<AdamUpdateOp, LambUpdateOp, SgdUpdateOp, LionUpdateOp, AdagradUpdateOp,
             MuonUpdateOp>(op);
}
/// The per-parameter states an update reads after its gradient (Adam's and
/// LAMB's two moments; SGD's momentum buffer, Lion's moment, Adagrad's sum: one).
inline unsigned optimizerStateCount(Operation *op) {
  return isa<AdamUpdateOp, LambUpdateOp>(op) ? 2 : 1;
}
} // namespace mlir::ds

#endif // DS_DIALECTS_DS_DSOPS_H
