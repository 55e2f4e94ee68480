//===- IndexingOps.cpp - ONNX gather, scatter and selection ---------------===//
//
// Gather, GatherElements, GatherND, ScatterElements (Scatter), ScatterND,
// OneHot and TopK. The N-D forms become the element forms over linear
// indices (linearIndex), which have kernels and gradient rules.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"
#include "runtime/kernels/ElementMath.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class IndexingImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult gather(const onnx::NodeProto &n);
  LogicalResult gatherElements(const onnx::NodeProto &n);
  LogicalResult gatherND(const onnx::NodeProto &n);
  LogicalResult scatterElements(const onnx::NodeProto &n);
  LogicalResult scatterND(const onnx::NodeProto &n);
  LogicalResult oneHot(const onnx::NodeProto &n);
  LogicalResult topK(const onnx::NodeProto &n);
  LogicalResult reverseSequence(const onnx::NodeProto &n);
  LogicalResult maxUnpool(const onnx::NodeProto &n);
  LogicalResult compress(const onnx::NodeProto &n);
  LogicalResult col2Im(const onnx::NodeProto &n);

private:
  FailureOr<Value> linearIndex(const onnx::NodeProto &n, Value idx, ArrayRef<int64_t> dims);
};

LogicalResult IndexingImporter::gather(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(axis, intAttr(n, "axis", 0));
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  if (failed(checkConstantIndices(n, 1, {typeOf(data).getDimSize(axis)},
                                  "axis " + std::to_string(axis))))
    return failure();
  SmallVector<NamedAttribute> attrs = {i64Attr("axis", axis)};
  // An embedding with a padding row: no gradient for that row (training).
  if (std::optional<int64_t> padding = torchPaddingIndex(n); padding && axis == 0)
    attrs.push_back(i64Attr("padding_idx", *padding));
  DS_TRY(y, build<GatherOp>({data, idx}, attrs));
  setOutput(n, 0, y);
  return success();
}

LogicalResult IndexingImporter::gatherElements(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(axis, intAttr(n, "axis", 0));
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  if (failed(checkConstantIndices(n, 1, {typeOf(data).getDimSize(axis)},
                                  "axis " + std::to_string(axis))))
    return failure();
  auto t = RankedTensorType::get(typeOf(idx).getShape(), typeOf(data).getElementType());
  DS_TRY(y, buildTyped<GatherElementsOp>(t, ValueRange{data, idx}, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

/// Index rows [..., k] (possibly negative) into `dims` -> one i64 linear
/// row-major index per row, shape [...].
FailureOr<Value> IndexingImporter::linearIndex(const onnx::NodeProto &n, Value idx0,
                                               ArrayRef<int64_t> dims) {
  ArrayRef<int64_t> is = typeOf(idx0).getShape();
  int64_t k = dims.size();
  SmallVector<int64_t> strides(k, 1);
  for (int64_t i = k - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  DS_TRY(idx, castTo(idx0, b_.getI64Type()));
  DS_TRY(neg, build<LessOp>({idx, scalar(b_.getI64Type(), 0)}));
  DS_TRY(shifted, build<AddOp>({idx, i64Tensor(dims)}));
  DS_TRY(wrapped, build<WhereOp>({neg, shifted, idx}));
  DS_TRY(scaled, build<MulOp>({wrapped, i64Tensor(strides)}));
  int64_t last = static_cast<int64_t>(is.size()) - 1;
  DS_TRY(linear, reduceWith<ReduceSumOp>(scaled, {last}, false));
  // Each component must be inside its own dimension (ONNX): [0, 5] into
  // [4, 3] is an error, not element 5. A row with a component out of
  // range gets an index no Gather or Scatter accepts, so the kernel's
  // range check reports it.
  DS_TRY(low, build<LessOp>({wrapped, scalar(b_.getI64Type(), 0)}));
  DS_TRY(high, build<GreaterEqualOp>({wrapped, i64Tensor(dims)}));
  DS_TRY(outside, build<OrOp>({low, high}));
  DS_TRY(count, castTo(outside, b_.getI64Type()));
  DS_TRY(anyOutside, reduceWith<ReduceMaxOp>(count, {last}, false));
  DS_TRY(isBad, build<GreaterOp>({anyOutside, scalar(b_.getI64Type(), 0)}));
  Value sentinel = scalar(b_.getI64Type(), static_cast<double>(::ds::math::kIndexRowOutOfRange));
  return build<WhereOp>({isBad, sentinel, linear});
}

// GatherND: each index row becomes one linear index into the data's
// flattened indexed axes (plus its batch's offset with batch_dims), then an
// ordinary Gather, which has a kernel and a gradient rule.
LogicalResult IndexingImporter::gatherND(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(b, intAttr(n, "batch_dims", 0));
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  if (is.empty() || !isa<IntegerType>(typeOf(idx).getElementType()))
    return nodeError(n) << "indices must be an integer tensor of rank >= 1";
  int64_t k = is.back(), rank = ds.size();
  if (b < 0 || b >= static_cast<int64_t>(is.size()) || b >= rank)
    return nodeError(n) << "batch_dims " << b << " must be below the ranks of data and indices";
  for (int64_t d = 0; d < b; ++d)
    if (ds[d] != is[d])
      return nodeError(n) << "batch dimension " << d << " is " << ds[d] << " in data but "
                          << is[d] << " in indices";
  if (k < 1 || b + k > rank)
    return nodeError(n) << "index rows of length " << k << " do not fit data of rank " << rank
                        << " with batch_dims " << b;
  ArrayRef<int64_t> dims = ds.slice(b, k);
  if (failed(checkConstantIndices(n, 1, dims, "data dimension", b))) return failure();
  DS_TRY(linear0, linearIndex(n, idx, dims));
  Value linear = linear0;
  int64_t block = 1, batch = 1;
  for (int64_t d : dims) block *= d;
  for (int64_t d : ds.take_front(b)) batch *= d;
  if (b > 0) {
    // Batch i's rows index block i of the flattened data.
    SmallVector<int64_t> offShape(is.drop_back());
    std::fill(offShape.begin() + b, offShape.end(), 1);
    SmallVector<int64_t> offsets;
    for (int64_t i = 0; i < batch; ++i) offsets.push_back(i * block);
    auto t = RankedTensorType::get(offShape, b_.getI64Type());
    DS_TRY(shifted, build<AddOp>({linear, constant(DenseElementsAttr::get(t, ArrayRef(offsets)))}));
    linear = shifted;
  }
  SmallVector<int64_t> flatShape{batch * block};
  llvm::append_range(flatShape, ds.drop_front(b + k));
  DS_TRY(flat, reshape(data, flatShape));
  DS_TRY(y, build<GatherOp>({flat, linear}, {i64Attr("axis", 0)}));
  setOutput(n, 0, y);
  return success();
}

// ScatterElements (and its opset 9-10 name, Scatter): one ds op.
LogicalResult IndexingImporter::scatterElements(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(upd, required(n, 2));
  DS_TRY(axis, intAttr(n, "axis", 0));
  DS_TRY(reduction, stringAttr(n, "reduction", "none"));
  auto red = symbolizeScatterReduction(reduction);
  if (!red)
    return nodeError(n) << "reduction '" << reduction << "' is not none, add, mul, max or min";
  if (failed(normalizeAxis(n, axis, typeOf(data).getRank()))) return failure();
  if (failed(checkConstantIndices(n, 1, {typeOf(data).getDimSize(axis)},
                                  "axis " + std::to_string(axis))))
    return failure();
  DS_TRY(y, buildTyped<ScatterElementsOp>(
                typeOf(data), ValueRange{data, idx, upd},
                {i64Attr("axis", axis), attr("reduction", ScatterReductionAttr::get(ctx_, *red))}));
  setOutput(n, 0, y);
  return success();
}

// ScatterND: data viewed as [rows, slice], each index row a linear row
// number, then scatter_elements along axis 0 with the index repeated
// across the slice.
LogicalResult IndexingImporter::scatterND(const onnx::NodeProto &n) {
  DS_TRY(data, required(n, 0));
  DS_TRY(idx, required(n, 1));
  DS_TRY(upd, required(n, 2));
  DS_TRY(reduction, stringAttr(n, "reduction", "none"));
  auto red = symbolizeScatterReduction(reduction);
  if (!red)
    return nodeError(n) << "reduction '" << reduction << "' is not none, add, mul, max or min";
  ArrayRef<int64_t> ds = typeOf(data).getShape(), is = typeOf(idx).getShape();
  if (is.empty() || !isa<IntegerType>(typeOf(idx).getElementType()))
    return nodeError(n) << "indices must be an integer tensor of rank >= 1";
  int64_t k = is.back(), rank = ds.size();
  if (k < 1 || k > rank)
    return nodeError(n) << "index rows of length " << k << " do not fit data of rank " << rank;
  if (failed(checkConstantIndices(n, 1, ds.take_front(k), "data dimension", 0))) return failure();
  SmallVector<int64_t> updShape(is.drop_back());
  llvm::append_range(updShape, ds.drop_front(k));
  if (typeOf(upd).getShape() != ArrayRef<int64_t>(updShape)) {
    std::string want;
    llvm::raw_string_ostream os(want);
    llvm::interleave(updShape, os, "x");
    return nodeError(n) << "updates must have shape " << want;
  }
  int64_t rows = 1, slice = 1, count = 1;
  for (int64_t d : ds.take_front(k)) rows *= d;
  for (int64_t d : ds.drop_front(k)) slice *= d;
  for (int64_t d : is.drop_back()) count *= d;
  DS_TRY(linear, linearIndex(n, idx, ds.take_front(k)));
  DS_TRY(column, reshape(linear, {count, 1}));
  DS_TRY(spread, buildTyped<ExpandOp>(RankedTensorType::get({count, slice}, b_.getI64Type()),
                                      column));
  DS_TRY(data2, reshape(data, {rows, slice}));
  DS_TRY(upd2, reshape(upd, {count, slice}));
  DS_TRY(s, buildTyped<ScatterElementsOp>(
                typeOf(data2), ValueRange{data2, spread, upd2},
                {i64Attr("axis", 0), attr("reduction", ScatterReductionAttr::get(ctx_, *red))}));
  DS_TRY(y, reshape(s, ds));
  setOutput(n, 0, y);
  return success();
}

LogicalResult IndexingImporter::oneHot(const onnx::NodeProto &n) {
  DS_TRY(idx, required(n, 0));
  // depth may be of any numeric type (ONNX allows float depths).
  DenseElementsAttr depthAttr = literalOf(input(n, 1));
  if (!depthAttr || depthAttr.getNumElements() != 1)
    return nodeError(n) << "depth must be a scalar known at compile time";
  SmallVector<int64_t> depthV{
      isa<FloatType>(depthAttr.getElementType())
          ? static_cast<int64_t>((*depthAttr.getValues<APFloat>().begin()).convertToDouble())
          : (*depthAttr.getValues<APInt>().begin()).getSExtValue()};
  DS_TRY(values, required(n, 2));
  if (depthV[0] <= 0) return nodeError(n) << "depth must be positive";
  if (typeOf(values).getNumElements() != 2) return nodeError(n) << "values must hold [off, on]";
  int64_t depth = depthV[0];
  if (static_cast<__int128>(typeOf(idx).getNumElements()) * depth > opts_.maxElements)
    return nodeError(n) << "depth " << depth << " gives a result of more than "
                        << opts_.maxElements << " elements (ds-opt --max-elements raises the limit)";
  int64_t outRank = typeOf(idx).getRank() + 1;
  DS_TRY(axis, intAttr(n, "axis", -1));
  if (axis < -outRank || axis >= outRank) return nodeError(n) << "axis " << axis << " is out of range";
  if (axis < 0) axis += outRank;
  // Integer indices, negatives counting from the end.
  Value i64 = idx;
  if (typeOf(idx).getElementType() != b_.getI64Type()) {
    DS_TRY(c, buildTyped<CastOp>(RankedTensorType::get(typeOf(idx).getShape(), b_.getI64Type()), idx));
    i64 = c;
  }
  Value zero = scalar(b_.getI64Type(), 0), dep = scalar(b_.getI64Type(), static_cast<double>(depth));
  DS_TRY(isNeg, build<LessOp>({i64, zero}));
  DS_TRY(wrapped, build<AddOp>({i64, dep}));
  DS_TRY(norm, build<WhereOp>({isNeg, wrapped, i64}));
  DS_TRY(u, build<UnsqueezeOp>({norm}, {arrAttr("axes", {axis})}));
  DS_TRY(eq, build<EqualOp>({u, iota(depth, axis, outRank, b_.getI64Type())}));
  Type vt = typeOf(values).getElementType();
  DS_TRY(off, buildTyped<SliceOp>(RankedTensorType::get({1}, vt), values,
                                  {arrAttr("starts", {0}), arrAttr("steps", {1})}));
  DS_TRY(on, buildTyped<SliceOp>(RankedTensorType::get({1}, vt), values,
                                 {arrAttr("starts", {1}), arrAttr("steps", {1})}));
  DS_TRY(off0, reshape(off, {}));
  DS_TRY(on0, reshape(on, {}));
  DS_TRY(y, build<WhereOp>({eq, on0, off0}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult IndexingImporter::topK(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(largest, intAttr(n, "largest", 1));
  int64_t k;
  if (opset_ < 10) {
    DS_TRY(kAttr, intAttr(n, "k"));
    k = kAttr;
  } else {
    DS_TRY(kv, constantInts(n, 1, "K"));
    if (kv.size() != 1) return nodeError(n) << "K must hold one value";
    k = kv[0];
  }
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (k < 0 || k > typeOf(x).getDimSize(axis))
    return nodeError(n) << "K = " << k << " is outside [0, " << typeOf(x).getDimSize(axis)
                        << "] for axis " << axis;
  SmallVector<int64_t> shape(typeOf(x).getShape());
  shape[axis] = k;
  Type types[] = {RankedTensorType::get(shape, typeOf(x).getElementType()),
                  RankedTensorType::get(shape, b_.getI64Type())};
  DS_TRY(r, buildAll<TopKOp>(types, x,
                             {i64Attr("k", k), i64Attr("axis", axis),
                              attr("largest", b_.getBoolAttr(largest != 0))}));
  setOutput(n, 0, r[0]);
  setOutput(n, 1, r[1]);
  return success();
}

// ReverseSequence: each batch entry's first sequence_lens[b] steps reversed
// along the time axis (the rest kept): one GatherElements whose index,
// t < len ? len - 1 - t : t, the plan computes from the lengths.
LogicalResult IndexingImporter::reverseSequence(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(lens0, required(n, 1));
  DS_TRY(timeAxis, intAttr(n, "time_axis", 0));
  DS_TRY(batchAxis, intAttr(n, "batch_axis", 1));
  int64_t rank = typeOf(x).getRank();
  if (rank < 2 || (timeAxis != 0 && timeAxis != 1) || batchAxis != 1 - timeAxis)
    return nodeError(n) << "time_axis and batch_axis must be 0 and 1 (either way round) of a "
                           "tensor of rank >= 2";
  int64_t steps = typeOf(x).getDimSize(timeAxis), batch = typeOf(x).getDimSize(batchAxis);
  if (typeOf(lens0).getNumElements() != batch)
    return nodeError(n) << "sequence_lens needs one length per batch entry (" << batch << ")";
  Type i64 = b_.getI64Type();
  DS_TRY(lens1, castTo(lens0, i64));
  SmallVector<int64_t> lshape(rank, 1);
  lshape[batchAxis] = batch;
  DS_TRY(lens, reshape(lens1, lshape));
  Value t = iota(steps, timeAxis, rank, i64);
  DS_TRY(inside, build<LessOp>({t, lens}));
  DS_TRY(lm1, build<SubOp>({lens, scalar(i64, 1)}));
  DS_TRY(rev, build<SubOp>({lm1, t}));
  DS_TRY(idx, build<WhereOp>({inside, rev, t}));
  DS_TRY(full, buildTyped<ExpandOp>(RankedTensorType::get(typeOf(x).getShape(), i64), idx));
  DS_TRY(y, buildTyped<GatherElementsOp>(typeOf(x), ValueRange{x, full},
                                         {i64Attr("axis", timeAxis)}));
  setOutput(n, 0, y);
  return success();
}

// MaxUnpool: MaxPool's values scattered back to the flat positions its
// indices name, into zeros of the unpooled shape (output_shape, or the
// shape the kernel, strides and pads give).
LogicalResult IndexingImporter::maxUnpool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(indices, required(n, 1));
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank(), k = rank - 2;
  if (k < 1 || typeOf(indices).getShape() != xt.getShape())
    return nodeError(n) << "X must be [N, C, spatial...] and I of X's shape";
  // Indices are flat positions in the shape the kernel, strides and pads
  // give; a larger output_shape places that block at its origin.
  SmallVector<int64_t> shape(xt.getShape());
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  DS_TRY(st, intsAttr(n, "strides"));
  DS_TRY(pd, intsAttr(n, "pads"));
  if (!ks || static_cast<int64_t>(ks->size()) != k)
    return nodeError(n) << "kernel_shape needs one entry per spatial dimension";
  for (int64_t d = 0; d < k; ++d) {
    int64_t stride = st ? (*st)[d] : 1, lo = pd ? (*pd)[d] : 0, hi = pd ? (*pd)[d + k] : 0;
    shape[d + 2] = (xt.getDimSize(d + 2) - 1) * stride - lo - hi + (*ks)[d];
    if (shape[d + 2] <= 0) return nodeError(n) << "the unpooled shape is empty";
  }
  SmallVector<int64_t> outShape(shape);
  if (input(n, 2)) {
    DS_TRY(given, constantInts(n, 2, "output_shape"));
    if (static_cast<int64_t>(given.size()) != rank)
      return nodeError(n) << "output_shape needs " << rank << " values";
    for (int64_t d = 0; d < rank; ++d)
      if (given[d] < shape[d])
        return nodeError(n) << "output_shape is smaller than the unpooled shape at axis " << d;
    outShape.assign(given.begin(), given.end());
  }
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total > opts_.maxElements) return nodeError(n) << "the unpooled output is too large";
  Type elem = xt.getElementType();
  Value zeros = constant(DenseElementsAttr::get(RankedTensorType::get({total}, elem),
                                                b_.getZeroAttr(elem)));
  DS_TRY(flatX, reshape(x, {xt.getNumElements()}));
  DS_TRY(flatI, reshape(indices, {xt.getNumElements()}));
  DS_TRY(scattered, buildTyped<ScatterElementsOp>(zeros.getType(), ValueRange{zeros, flatI, flatX},
                                                  {i64Attr("axis", 0)}));
  DS_TRY(block, reshape(scattered, shape));
  Value y = block;
  if (outShape != shape) {
    SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
    for (int64_t d = 0; d < rank; ++d) hi[d] = outShape[d] - shape[d];
    DS_TRY(padded, padWith(n, block, lo, hi, "constant", b_.getZeroAttr(elem)));
    y = padded;
  }
  setOutput(n, 0, y);
  return success();
}

// Compress with a condition known at compile time: a gather of the
// selected positions (of the flattened input without an axis).
LogicalResult IndexingImporter::compress(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(cond, required(n, 1));
  DenseElementsAttr c = constantOf(cond);
  if (!c)
    return nodeError(n) << "the condition must be known at compile time (the output's size "
                           "depends on it; give it with --bind-input)";
  DS_TRY(axisOpt, [&]() -> FailureOr<std::optional<int64_t>> {
    if (!findAttr(n, "axis")) return std::optional<int64_t>();
    DS_TRY(a, intAttr(n, "axis"));
    return std::optional<int64_t>(a);
  }());
  Value data = x;
  int64_t axis = 0;
  if (axisOpt) {
    axis = *axisOpt;
    if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  } else {
    DS_TRY(flat, reshape(x, {typeOf(x).getNumElements()}));
    data = flat;
  }
  int64_t extent = typeOf(data).getDimSize(axis);
  SmallVector<int64_t> picked;
  int64_t i = 0;
  for (const APInt &v : c.getValues<APInt>()) {
    if (i >= extent) break; // entries past the axis select nothing
    if (!v.isZero()) picked.push_back(i);
    ++i;
  }
  DS_TRY(y, build<GatherOp>({data, i64Tensor(picked)}, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

// Col2Im: blocks summed back into the image: a ScatterElements with add
// whose (compile-time) indices place each block element; elements that
// fall in the padding go to one extra slot, dropped after.
LogicalResult IndexingImporter::col2Im(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(image, constantInts(n, 1, "image_shape"));
  DS_TRY(block, constantInts(n, 2, "block_shape"));
  int64_t k = static_cast<int64_t>(image.size());
  RankedTensorType xt = typeOf(x);
  if (xt.getRank() != 3 || static_cast<int64_t>(block.size()) != k || k < 1)
    return nodeError(n) << "input must be [N, C * prod(block), L] with image_shape and "
                           "block_shape of one length";
  auto list = [&](StringRef name, int64_t count, int64_t dflt) -> FailureOr<SmallVector<int64_t>> {
    DS_TRY(v, intsAttr(n, name));
    SmallVector<int64_t> out = v ? *v : SmallVector<int64_t>(count, dflt);
    if (static_cast<int64_t>(out.size()) != count)
      return FailureOr<SmallVector<int64_t>>(nodeError(n) << name << " needs " << count << " values");
    return out;
  };
  DS_TRY(dil, list("dilations", k, 1));
  DS_TRY(pads, list("pads", 2 * k, 0));
  DS_TRY(strides, list("strides", k, 1));
  int64_t kernel = 1, blocks = 1, pixels = 1;
  SmallVector<int64_t> counts(k);
  for (int64_t d = 0; d < k; ++d) {
    if (block[d] < 1 || image[d] < 1 || dil[d] < 1 || strides[d] < 1)
      return nodeError(n) << "image, block, dilations and strides must be positive";
    kernel *= block[d];
    pixels *= image[d];
    counts[d] = (image[d] + pads[d] + pads[d + k] - dil[d] * (block[d] - 1) - 1) / strides[d] + 1;
    if (counts[d] < 1) return nodeError(n) << "no block fits axis " << d;
    blocks *= counts[d];
  }
  int64_t batch = xt.getDimSize(0), rows = xt.getDimSize(1);
  if (rows % kernel || xt.getDimSize(2) != blocks)
    return nodeError(n) << "input is [" << batch << ", " << rows << ", " << xt.getDimSize(2)
                        << "]; expected a multiple of " << kernel << " rows and " << blocks
                        << " blocks";
  int64_t channels = rows / kernel, slots = channels * pixels + 1;
  if (batch * rows * blocks > opts_.foldLimit)
    return nodeError(n) << "too many block elements to index at compile time";
  std::vector<int64_t> idx;
  idx.reserve(rows * blocks);
  SmallVector<int64_t> ko(k), bo(k);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = r / kernel, rem = r % kernel;
    for (int64_t d = k - 1; d >= 0; --d) ko[d] = rem % block[d], rem /= block[d];
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t br = b, flat = 0;
      bool inside = true;
      for (int64_t d = k - 1; d >= 0; --d) bo[d] = br % counts[d], br /= counts[d];
      for (int64_t d = 0; d < k; ++d) {
        int64_t p = bo[d] * strides[d] - pads[d] + ko[d] * dil[d];
        inside &= p >= 0 && p < image[d];
        flat = flat * image[d] + p;
      }
      idx.push_back(inside ? c * pixels + flat : slots - 1);
    }
  }
  Type elem = xt.getElementType();
  auto it = RankedTensorType::get({1, rows * blocks}, b_.getI64Type());
  DS_TRY(index, buildTyped<ExpandOp>(RankedTensorType::get({batch, rows * blocks}, b_.getI64Type()),
                                     constant(DenseElementsAttr::get(it, ArrayRef<int64_t>(idx)))));
  DS_TRY(upd, reshape(x, {batch, rows * blocks}));
  Value zeros = constant(DenseElementsAttr::get(RankedTensorType::get({batch, slots}, elem),
                                                b_.getZeroAttr(elem)));
  DS_TRY(sum, buildTyped<ScatterElementsOp>(
                  zeros.getType(), ValueRange{zeros, index, upd},
                  {i64Attr("axis", 1),
                   attr("reduction", ScatterReductionAttr::get(ctx_, ScatterReduction::Add))}));
  DS_TRY(kept, sliceAxis(sum, 1, 0, 1, slots - 1));
  SmallVector<int64_t> outShape{batch, channels};
  outShape.append(image.begin(), image.end());
  DS_TRY(y, reshape(kept, outShape));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerIndexingHandlers(HandlerTable &t) {
  using I = IndexingImporter;
  t.add<I, &I::gather>("Gather");
  t.add<I, &I::gatherElements>("GatherElements");
  t.add<I, &I::gatherND>("GatherND");
  t.add<I, &I::scatterElements>("ScatterElements");
  t.add<I, &I::scatterElements>("Scatter");
  t.add<I, &I::scatterND>("ScatterND");
  t.add<I, &I::oneHot>("OneHot");
  t.add<I, &I::topK>("TopK");
  t.add<I, &I::reverseSequence>("ReverseSequence");
  t.add<I, &I::maxUnpool>("MaxUnpool");
  t.add<I, &I::compress>("Compress");
  t.add<I, &I::col2Im>("Col2Im");
}
