//===- ReductionOps.cpp - ONNX reductions ---------------------------------===//
//
// Reduce*, ArgMax/ArgMin, CumSum and CumProd. The reduction axes moved from an
// attribute to an input at opset 13 (ReduceSum) and 18 (the rest);
// reductionAxes reads either, so the IR has one spelling.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class ReductionImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  template <typename OpTy> LogicalResult reduce(const onnx::NodeProto &n);
  LogicalResult reduceComposite(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult argReduce(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult cumulative(const onnx::NodeProto &n);

private:
  FailureOr<SmallVector<int64_t>> reductionAxes(const onnx::NodeProto &n, int64_t rank,
                                                bool isSum);
};

/// Axes of a Reduce* node: an attribute before opset 18 (13 for
/// ReduceSum), then an input; none means all unless noop_with_empty_axes.
FailureOr<SmallVector<int64_t>> ReductionImporter::reductionAxes(const onnx::NodeProto &n,
                                                                 int64_t rank, bool isSum) {
  DS_TRY(noop, intAttr(n, "noop_with_empty_axes", 0));
  bool axesAsInput = (isSum && opset_ >= 13) || opset_ >= 18;
  FailureOr<std::optional<SmallVector<int64_t>>> axesOr =
      axesAsInput ? axesOf(n, 1) : intsAttr(n, "axes");
  if (failed(axesOr)) return failure();
  SmallVector<int64_t> axes;
  if (*axesOr && !(*axesOr)->empty()) {
    axes = **axesOr;
    if (failed(normalizeAxes(n, axes, rank))) return failure();
  } else if (!noop) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  return axes;
}

template <typename OpTy> LogicalResult ReductionImporter::reduce(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(axes, reductionAxes(n, typeOf(x).getRank(), std::is_same_v<OpTy, ReduceSumOp>));
  // Booleans (ReduceMax is any, ReduceMin all) reduce as bytes.
  constexpr bool kMinMax = std::is_same_v<OpTy, ReduceMaxOp> || std::is_same_v<OpTy, ReduceMinOp>;
  if (kMinMax && typeOf(x).getElementType().isInteger(1)) {
    DS_TRY(bytes, castTo(x, b_.getIntegerType(8, false)));
    DS_TRY(r, reduceWith<OpTy>(bytes, axes, keepdims != 0));
    DS_TRY(y, castTo(r, b_.getI1Type()));
    setOutput(n, 0, y);
    return success();
  }
  DS_TRY(y, reduceWith<OpTy>(x, axes, keepdims != 0));
  setOutput(n, 0, y);
  return success();
}

/// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp as
/// compositions of ds ops (log-sum-exp subtracts the maximum first).
LogicalResult ReductionImporter::reduceComposite(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(axes, reductionAxes(n, typeOf(x).getRank(), false));
  const std::string &op = n.op_type();
  Value y;
  if (op == "ReduceL1") {
    DS_TRY(a, buildTyped<AbsOp>(x.getType(), x));
    DS_TRY(r, reduceWith<ReduceSumOp>(a, axes, keepdims));
    y = r;
  } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
    DS_TRY(sq, build<MulOp>({x, x}));
    DS_TRY(r, reduceWith<ReduceSumOp>(sq, axes, keepdims));
    y = r;
    if (op == "ReduceL2") {
      // sqrt(s) where s > 0, else 0, with sqrt reading 1 where s is 0: the
      // same values, and at an all-zero slice the gradient is 0 (PyTorch's
      // vector_norm) instead of 0 * (1 / sqrt(0)) = NaN.
      Type elem = typeOf(r).getElementType();
      DS_TRY(isZero, build<EqualOp>({r, scalar(elem, 0.0)}));
      DS_TRY(safe, build<WhereOp>({isZero, scalar(elem, 1.0), r}));
      DS_TRY(s, buildTyped<SqrtOp>(r.getType(), safe));
      DS_TRY(norm, build<WhereOp>({isZero, scalar(elem, 0.0), s}));
      y = norm;
    }
  } else if (op == "ReduceLogSum") {
    DS_TRY(r, reduceWith<ReduceSumOp>(x, axes, keepdims));
    DS_TRY(l, buildTyped<LogOp>(r.getType(), r));
    y = l;
  } else { // ReduceLogSumExp
    // The maximum is subtracted for range; where it is infinite (a row of
    // -inf, or one holding +inf) 0 is subtracted instead, so the result is
    // -inf or +inf as numpy and PyTorch give, not inf - inf = NaN.
    DS_TRY(m0, reduceWith<ReduceMaxOp>(x, axes, true));
    Type elem = typeOf(m0).getElementType();
    DS_TRY(inf, buildTyped<IsInfOp>(RankedTensorType::get(typeOf(m0).getShape(), b_.getI1Type()),
                                    m0));
    DS_TRY(m, build<WhereOp>({inf, scalar(elem, 0.0), m0}));
    DS_TRY(d, build<SubOp>({x, m}));
    DS_TRY(e, buildTyped<ExpOp>(d.getType(), d));
    DS_TRY(r, reduceWith<ReduceSumOp>(e, axes, keepdims));
    DS_TRY(l, buildTyped<LogOp>(r.getType(), r));
    DS_TRY(mk, reshape(m, typeOf(l).getShape()));
    DS_TRY(sum, build<AddOp>({l, mk}));
    y = sum;
  }
  setOutput(n, 0, y);
  return success();
}

template <typename OpTy> LogicalResult ReductionImporter::argReduce(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 0));
  DS_TRY(keepdims, intAttr(n, "keepdims", 1));
  DS_TRY(last, intAttr(n, "select_last_index", 0));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (typeOf(x).getDimSize(axis) == 0)
    return nodeError(n) << "axis " << axis << " is empty: there is no index to return";
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) shape.push_back(typeOf(x).getDimSize(d));
    else if (keepdims) shape.push_back(1);
  }
  DS_TRY(y, buildTyped<OpTy>(RankedTensorType::get(shape, b_.getI64Type()), x,
                             {i64Attr("axis", axis), attr("keepdims", b_.getBoolAttr(keepdims != 0)),
                              attr("select_last_index", b_.getBoolAttr(last != 0))}));
  setOutput(n, 0, y);
  return success();
}

template <typename OpTy> LogicalResult ReductionImporter::cumulative(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axisV, constantInts(n, 1, "axis"));
  if (axisV.size() != 1) return nodeError(n) << "axis must be a scalar";
  int64_t axis = axisV[0];
  if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  DS_TRY(exclusive, intAttr(n, "exclusive", 0));
  DS_TRY(reverse, intAttr(n, "reverse", 0));
  DS_TRY(y, buildTyped<OpTy>(x.getType(), x,
                                 {i64Attr("axis", axis),
                                  attr("exclusive", b_.getBoolAttr(exclusive != 0)),
                                  attr("reverse", b_.getBoolAttr(reverse != 0))}));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerReductionHandlers(HandlerTable &t) {
  using I = ReductionImporter;
  t.add<I, &I::reduce<ReduceMeanOp>>("ReduceMean");
  t.add<I, &I::reduce<ReduceSumOp>>("ReduceSum");
  t.add<I, &I::reduce<ReduceMaxOp>>("ReduceMax");
  t.add<I, &I::reduce<ReduceMinOp>>("ReduceMin");
  t.add<I, &I::reduce<ReduceProdOp>>("ReduceProd");
  t.add<I, &I::reduceComposite>("ReduceL1");
  t.add<I, &I::reduceComposite>("ReduceL2");
  t.add<I, &I::reduceComposite>("ReduceSumSquare");
  t.add<I, &I::reduceComposite>("ReduceLogSum");
  t.add<I, &I::reduceComposite>("ReduceLogSumExp");
  t.add<I, &I::argReduce<ArgMaxOp>>("ArgMax");
  t.add<I, &I::argReduce<ArgMinOp>>("ArgMin");
  t.add<I, &I::cumulative<CumSumOp>>("CumSum");
  t.add<I, &I::cumulative<CumProdOp>>("CumProd");
}
