//===- ConstantOps.cpp - ONNX ops that produce constants ------------------===//
//
// Constant, ConstantOfShape, Range, EyeLike and the Hann, Hamming and
// Blackman windows: their values are known at import, so each becomes one
// ds.constant (Range and the windows are computed here, bounded by the
// fold limit where the size comes from the model).
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class ConstantImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult constantNode(const onnx::NodeProto &n);
  LogicalResult constantOfShape(const onnx::NodeProto &n);
  LogicalResult range(const onnx::NodeProto &n);
  LogicalResult eyeLike(const onnx::NodeProto &n);
  LogicalResult window(const onnx::NodeProto &n);
  LogicalResult melWeightMatrix(const onnx::NodeProto &n);
};

LogicalResult ConstantImporter::constantNode(const onnx::NodeProto &n) {
  if (n.attribute_size() != 1)
    return nodeError(n) << "needs exactly one value attribute";
  const auto &a = n.attribute(0);
  const std::string &name = a.name();
  if (name == "value") {
    if (a.type() != onnx::AttributeProto_AttributeType_TENSOR)
      return nodeError(n) << "attribute 'value' must be a tensor";
    FailureOr<TypedAttr> v = tensorAttr(a.t(), loc_);
    if (failed(v)) return failure();
    setOutput(n, 0, ConstantOp::create(b_, loc_, *v).getResult());
    return success();
  }
  if (name == "value_float" && a.type() == onnx::AttributeProto_AttributeType_FLOAT) {
    setOutput(n, 0, scalar(b_.getF32Type(), a.f()));
    return success();
  }
  if (name == "value_int" && a.type() == onnx::AttributeProto_AttributeType_INT) {
    setOutput(n, 0, scalar(b_.getI64Type(), static_cast<double>(a.i())));
    if (a.i() != static_cast<int64_t>(static_cast<double>(a.i())))
      setOutput(n, 0, constant(DenseElementsAttr::get(
                          RankedTensorType::get({}, b_.getI64Type()), APInt(64, a.i()))));
    return success();
  }
  if (name == "value_floats" && a.type() == onnx::AttributeProto_AttributeType_FLOATS) {
    SmallVector<float> v(a.floats().begin(), a.floats().end());
    auto t = RankedTensorType::get({static_cast<int64_t>(v.size())}, b_.getF32Type());
    setOutput(n, 0, constant(DenseElementsAttr::get(t, ArrayRef<float>(v))));
    return success();
  }
  if (name == "value_ints" && a.type() == onnx::AttributeProto_AttributeType_INTS) {
    SmallVector<int64_t> v(a.ints().begin(), a.ints().end());
    setOutput(n, 0, i64Tensor(v));
    return success();
  }
  return nodeError(n) << "attribute '" << name << "' of this type is not supported";
}

LogicalResult ConstantImporter::constantOfShape(const onnx::NodeProto &n) {
  DS_TRY(spec, constantInts(n, 0, "input"));
  SmallVector<__int128> wide(spec.begin(), spec.end());
  SmallVector<int64_t> checked;
  if (failed(checkedShape(n, wide, checked, "shape"))) return failure();
  Attribute fill = b_.getF32FloatAttr(0.0f);
  Type elem = b_.getF32Type();
  if (const auto *a = findAttr(n, "value")) {
    if (a->type() != onnx::AttributeProto_AttributeType_TENSOR)
      return nodeError(n) << "attribute 'value' must be a tensor";
    FailureOr<TypedAttr> v = tensorAttr(a->t(), loc_);
    if (failed(v)) return failure();
    auto dense = dyn_cast<DenseElementsAttr>(*v);
    if (!dense || dense.getNumElements() != 1)
      return nodeError(n) << "attribute 'value' must hold one element";
    elem = dense.getElementType();
    fill = dense.getSplatValue<Attribute>();
  }
  auto t = RankedTensorType::get(spec, elem);
  setOutput(n, 0, constant(DenseElementsAttr::get(t, fill)));
  return success();
}

LogicalResult ConstantImporter::range(const onnx::NodeProto &n) {
  SmallVector<DenseElementsAttr> c;
  for (int i = 0; i < 3; ++i) {
    DenseElementsAttr a = literalOf(input(n, i));
    if (!a || a.getNumElements() != 1)
      return nodeError(n) << "start, limit and delta must be scalars known at compile time";
    c.push_back(a);
  }
  Type elem = c[0].getElementType();
  if (c[1].getElementType() != elem || c[2].getElementType() != elem)
    return nodeError(n) << "start, limit and delta must have one element type, got " << elem
                        << ", " << c[1].getElementType() << " and " << c[2].getElementType();
  auto t = [&](int64_t count) { return RankedTensorType::get({count}, elem); };
  if (isa<FloatType>(elem)) {
    double s = c[0].getSplatValue<APFloat>().convertToDouble(),
           l = c[1].getSplatValue<APFloat>().convertToDouble(),
           d = c[2].getSplatValue<APFloat>().convertToDouble();
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      return nodeError(n) << "delta must be non-zero and the bounds finite";
    double cnt = std::max(std::ceil((l - s) / d), 0.0);
    if (cnt > opts_.foldLimit) return nodeError(n) << "range of " << cnt << " elements is too long";
    // Opset 27's stash_type: 16-bit ranges accumulate in float (1, the
    // default) or, asked for, in their own type, rounding at every step.
    DS_TRY(stash, intAttr(n, "stash_type", 1));
    bool accumulateInOwnType = elem.getIntOrFloatBitWidth() == 16 && stash != 1;
    auto &sem = cast<FloatType>(elem).getFloatSemantics();
    APFloat acc(s);
    bool lost;
    acc.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    APFloat step(d);
    step.convert(sem, APFloat::rmNearestTiesToEven, &lost);
    SmallVector<Attribute> v;
    for (int64_t i = 0; i < static_cast<int64_t>(cnt); ++i) {
      if (accumulateInOwnType) {
        v.push_back(b_.getFloatAttr(elem, acc));
        acc.add(step, APFloat::rmNearestTiesToEven);
      } else {
        v.push_back(b_.getFloatAttr(elem, s + i * d));
      }
    }
    setOutput(n, 0, constant(DenseElementsAttr::get(t(v.size()), v)));
    return success();
  }
  int64_t s = c[0].getSplatValue<APInt>().getSExtValue(),
          l = c[1].getSplatValue<APInt>().getSExtValue(),
          d = c[2].getSplatValue<APInt>().getSExtValue();
  if (d == 0) return nodeError(n) << "delta must be non-zero";
  __int128 span = static_cast<__int128>(l) - s;
  __int128 cnt = span / d + ((span % d) != 0 && ((span > 0) == (d > 0)) ? 1 : 0);
  if (cnt < 0) cnt = 0;
  if (cnt > opts_.foldLimit) return nodeError(n) << "range is too long to fold";
  SmallVector<Attribute> v;
  for (int64_t i = 0; i < static_cast<int64_t>(cnt); ++i)
    v.push_back(b_.getIntegerAttr(elem, s + i * d));
  setOutput(n, 0, constant(DenseElementsAttr::get(t(v.size()), v)));
  return success();
}

// EyeLike: a constant; only the input's shape matters.
LogicalResult ConstantImporter::eyeLike(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  if (typeOf(x).getRank() != 2) return nodeError(n) << "needs a 2-D input";
  DS_TRY(k, intAttr(n, "k", 0));
  Type elem = typeOf(x).getElementType();
  if (findAttr(n, "dtype")) {
    DS_TRY(dt, intAttr(n, "dtype"));
    FailureOr<Type> e = elementType(static_cast<int32_t>(dt));
    if (failed(e)) return nodeError(n) << "dtype " << onnxTypeName(static_cast<int32_t>(dt)) << " is not supported";
    elem = *e;
  }
  int64_t rows = typeOf(x).getDimSize(0), cols = typeOf(x).getDimSize(1);
  auto t = RankedTensorType::get({rows, cols}, elem);
  Attribute one = isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, 1.0))
                                       : Attribute(b_.getIntegerAttr(elem, 1));
  Attribute zero = b_.getZeroAttr(elem);
  SmallVector<Attribute> values;
  values.reserve(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) values.push_back(c - r == k ? one : zero);
  setOutput(n, 0, constant(DenseElementsAttr::get(t, values)));
  return success();
}

// Hann, Hamming and Blackman windows: the size is known at compile time, so
// the window is a constant (computed in double, stored in the output type).
LogicalResult ConstantImporter::window(const onnx::NodeProto &n) {
  DS_TRY(sizeV, constantInts(n, 0, "size"));
  if (sizeV.size() != 1 || sizeV[0] < 0)
    return nodeError(n) << "size must be one non-negative integer";
  DS_TRY(periodic, intAttr(n, "periodic", 1));
  DS_TRY(dt, intAttr(n, "output_datatype", onnx::TensorProto_DataType_FLOAT));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(dt));
  if (failed(elem)) return nodeError(n) << "output_datatype " << dt << " is not supported";
  int64_t size = sizeV[0];
  // The window is folded into a constant, element by element: Range's limit.
  if (size > opts_.foldLimit)
    return nodeError(n) << "a window of " << size << " elements is too long to fold (limit "
                        << opts_.foldLimit << ")";
  double denom = periodic ? size : size - 1;
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < size; ++i) {
    double a = denom > 0 ? 2 * M_PI * i / denom : 0, v;
    if (n.op_type() == "HannWindow") v = 0.5 - 0.5 * std::cos(a);
    else if (n.op_type() == "HammingWindow") v = 25.0 / 46 - (21.0 / 46) * std::cos(a);
    else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    values.push_back(isa<FloatType>(*elem) ? Attribute(b_.getFloatAttr(*elem, v))
                                           : Attribute(b_.getIntegerAttr(*elem, int64_t(v))));
  }
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({size}, *elem), values)));
  return success();
}

// MelWeightMatrix: the triangular mel filters of a spectrogram, a constant
// of the (compile-time) bin counts, sample rate and band edges, computed in
// double as ONNX's reference does.
LogicalResult ConstantImporter::melWeightMatrix(const onnx::NodeProto &n) {
  auto scalarOf = [&](int i, StringRef what) -> FailureOr<double> {
    DenseElementsAttr c = literalOf(input(n, i));
    if (!c || c.getNumElements() != 1)
      return FailureOr<double>(nodeError(n) << what << " must be a scalar known at compile time");
    if (isa<FloatType>(c.getElementType()))
      return (*c.getValues<APFloat>().begin()).convertToDouble();
    return static_cast<double>((*c.getValues<APInt>().begin()).getSExtValue());
  };
  DS_TRY(melsD, scalarOf(0, "num_mel_bins"));
  DS_TRY(dftD, scalarOf(1, "dft_length"));
  DS_TRY(rate, scalarOf(2, "sample_rate"));
  DS_TRY(lowHz, scalarOf(3, "lower_edge_hertz"));
  DS_TRY(highHz, scalarOf(4, "upper_edge_hertz"));
  DS_TRY(dt, intAttr(n, "output_datatype", onnx::TensorProto_DataType_FLOAT));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(dt));
  if (failed(elem)) return nodeError(n) << "output_datatype " << dt << " is not supported";
  int64_t mels = static_cast<int64_t>(melsD), dft = static_cast<int64_t>(dftD);
  int64_t bins = dft / 2 + 1;
  if (mels < 1 || dft < 1 || rate <= 0 || mels * bins > opts_.foldLimit)
    return nodeError(n) << "num_mel_bins, dft_length and sample_rate must be positive (and the "
                           "matrix within the fold limit)";
  double lowMel = 2595 * std::log1p(lowHz / 700) / std::log(10.0),
         highMel = 2595 * std::log1p(highHz / 700) / std::log(10.0);
  double step = (highMel - lowMel) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(mels + 2);
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700 * std::expm1((i * step + lowMel) / 2595 * std::log(10.0));
    edge[i] = static_cast<int64_t>(std::floor((dft + 1) * hz / rate));
  }
  std::vector<double> w(bins * mels, 0.0);
  auto at = [&](int64_t j, int64_t i) -> double * {
    return j >= 0 && j < bins ? &w[j * mels + i] : nullptr;
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t lo = edge[i], center = edge[i + 1], hi = edge[i + 2];
    if (center == lo) {
      if (double *v = at(center, i)) *v = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        if (double *v = at(j, i)) *v = double(j - lo) / double(center - lo);
    }
    if (hi > center)
      for (int64_t j = center; j < hi; ++j)
        if (double *v = at(j, i)) *v = double(hi - j) / double(hi - center);
  }
  SmallVector<Attribute> vals;
  for (double v : w)
    vals.push_back(isa<FloatType>(*elem) ? Attribute(b_.getFloatAttr(*elem, v))
                                         : Attribute(b_.getIntegerAttr(*elem, int64_t(v))));
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({bins, mels}, *elem), vals)));
  return success();
}

} // namespace

void mlir::ds::importer::registerConstantHandlers(HandlerTable &t) {
  using I = ConstantImporter;
  t.add<I, &I::constantNode>("Constant");
  t.add<I, &I::constantOfShape>("ConstantOfShape");
  t.add<I, &I::range>("Range");
  t.add<I, &I::eyeLike>("EyeLike");
  t.add<I, &I::window>("HannWindow");
  t.add<I, &I::window>("HammingWindow");
  t.add<I, &I::window>("BlackmanWindow");
  t.add<I, &I::melWeightMatrix>("MelWeightMatrix");
}
