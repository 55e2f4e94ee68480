//===- GradientBuilder.cpp - building blocks of gradient rules ------------===//
#include "dialects/ds/GradientBuilder.h"

#include "dialects/ds/DSOps.h"

using namespace mlir;
using namespace mlir::ds;

static RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value GradientBuilder::scalar(Type elem, double v) {
  auto t = RankedTensorType::get({}, elem);
  return ConstantOp::create(b_, loc_, DenseElementsAttr::get(t, b_.getFloatAttr(elem, v)));
}
Value GradientBuilder::zeros(RankedTensorType t) {
  return FillOp::create(b_, loc_, t, b_.getF64FloatAttr(0.0));
}
Value GradientBuilder::add(Value a, Value c) { return AddOp::create(b_, loc_, a, c); }
Value GradientBuilder::sub(Value a, Value c) { return SubOp::create(b_, loc_, a, c); }
Value GradientBuilder::mul(Value a, Value c) { return MulOp::create(b_, loc_, a, c); }
Value GradientBuilder::div(Value a, Value c) { return DivOp::create(b_, loc_, a, c); }
Value GradientBuilder::neg(Value a) { return NegOp::create(b_, loc_, a.getType(), a); }
Value GradientBuilder::mulScalar(Value a, double s) {
  return mul(a, scalar(typeOf(a).getElementType(), s));
}
Value GradientBuilder::where(Value c, Value t, Value f) { return WhereOp::create(b_, loc_, c, t, f); }

Value GradientBuilder::reshape(Value v, ArrayRef<int64_t> shape) {
  auto t = RankedTensorType::get(shape, typeOf(v).getElementType());
  if (t == v.getType()) return v;
  return ReshapeOp::create(b_, loc_, t, v);
}

Value GradientBuilder::transpose(Value v, ArrayRef<int64_t> perm) {
  return TransposeOp::create(b_, loc_, ValueRange{v},
                             {b_.getNamedAttr("permutation", b_.getDenseI64ArrayAttr(perm))});
}

Value GradientBuilder::swapLast2(Value v) {
  int64_t r = typeOf(v).getRank();
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  return transpose(v, perm);
}

Value GradientBuilder::reduceSum(Value v, ArrayRef<int64_t> axes, bool keepdims) {
  if (axes.empty()) return v;
  return ReduceSumOp::create(b_, loc_, ValueRange{v},
                             {b_.getNamedAttr("axes", b_.getDenseI64ArrayAttr(axes)),
                              b_.getNamedAttr("keepdims", b_.getBoolAttr(keepdims))});
}

Value GradientBuilder::expand(Value v, RankedTensorType t) {
  if (v.getType() == t) return v;
  return ExpandOp::create(b_, loc_, t, v);
}

Value GradientBuilder::unbroadcast(Value g, RankedTensorType target) {
  ArrayRef<int64_t> gs = typeOf(g).getShape(), ts = target.getShape();
  if (gs == ts) return g;
  int64_t lead = static_cast<int64_t>(gs.size()) - static_cast<int64_t>(ts.size());
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < static_cast<int64_t>(gs.size()); ++d) {
    if (d < lead) axes.push_back(d);
    else if (ts[d - lead] == 1 && gs[d] != 1) axes.push_back(d);
  }
  Value r = reduceSum(g, axes, /*keepdims=*/true);
  return reshape(r, ts);
}
