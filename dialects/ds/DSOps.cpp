//===- DSOps.cpp - ops of the ds dialect ----------------------------------===//
//
// The core ops' type inference, verifiers and folders (constants,
// parameters, random_mask) and the helpers DSOps.h declares; each op
// family's live in dialects/ds/ops/<Family>Ops.cpp. Each verifier checks
// exactly the **Constraints:** list of its op's description.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "dialects/ds/ops/Verifiers.h"

#include "runtime/plan/StridedViews.h"
#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::verifiers;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
mlir::ds::broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (auto s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> out(rank, 1);
  for (auto s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1)
        continue;
      if (o != 1)
        return failure();
      o = d;
    }
  }
  return out;
}

// (A one-element parameter marked ds.trained, which ONNX training_info
// names for training, is not known: it changes as it trains.)
std::optional<double> mlir::ds::knownFloatSplat(Value v) {
  Attribute attr;
  if (auto c = v.getDefiningOp<ConstantOp>()) attr = c.getValue();
  else if (auto p = v.getDefiningOp<ParameterOp>();
           p && cast<RankedTensorType>(p.getType()).getNumElements() == 1 &&
           !p->hasAttr("ds.trained"))
    attr = p.getValue();
  auto value = dyn_cast_or_null<DenseFPElementsAttr>(attr);
  if (!value || !value.isSplat()) return std::nullopt;
  double x = value.getSplatValue<APFloat>().convertToDouble();
  if (std::isnan(x)) return std::nullopt;
  return x;
}


//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ParameterOp::verify() {
  if (getSymName().empty())
    return emitOpError("needs a non-empty name");
  return success();
}

LogicalResult RandomMaskOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0)) return emitOpError("ratio must be in [0, 1), got ") << r;
  return success();
}

LogicalResult RandomOp::verify() {
  double a = getA().convertToDouble(), b = getB().convertToDouble();
  if (!std::isfinite(a) || !std::isfinite(b))
    return emitOpError("needs finite parameters, got ") << a << " and " << b;
  if (getDistribution() == Distribution::Uniform && a > b)
    return emitOpError("needs low <= high, got ") << a << " and " << b;
  if (getDistribution() == Distribution::Normal && b < 0)
    return emitOpError("needs a non-negative scale, got ") << b;
  return success();
}


#define GET_OP_CLASSES
#include "dialects/ds/DSOps.cpp.inc"
