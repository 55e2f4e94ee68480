//===- TensorOps.cpp - ONNX shape and layout ops --------------------------===//
//
// Ops that move or reshape data without computing on it: Reshape, Flatten,
// Squeeze/Unsqueeze, Expand, Tile, Transpose, DepthToSpace/SpaceToDepth,
// Concat, Split, Slice, Pad and Trilu, and Shape/Size, which are constants
// since every shape is static. Shape arguments (Reshape's shape, Slice's
// starts, ...) must be constants at import; folding makes most of them so.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <limits>

#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class TensorImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult reshapeNode(const onnx::NodeProto &n);
  LogicalResult flatten(const onnx::NodeProto &n);
  LogicalResult squeeze(const onnx::NodeProto &n);
  LogicalResult unsqueeze(const onnx::NodeProto &n);
  LogicalResult expand(const onnx::NodeProto &n);
  LogicalResult tile(const onnx::NodeProto &n);
  LogicalResult transpose(const onnx::NodeProto &n);
  LogicalResult depthSpace(const onnx::NodeProto &n);
  LogicalResult concat(const onnx::NodeProto &n);
  LogicalResult centerCropPad(const onnx::NodeProto &n);
  LogicalResult split(const onnx::NodeProto &n);
  LogicalResult slice(const onnx::NodeProto &n);
  LogicalResult pad(const onnx::NodeProto &n);
  LogicalResult trilu(const onnx::NodeProto &n);
  LogicalResult shape(const onnx::NodeProto &n);
  LogicalResult size(const onnx::NodeProto &n);
};

LogicalResult TensorImporter::reshapeNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(spec, constantInts(n, 1, "shape"));
  DS_TRY(allowzero, intAttr(n, "allowzero", 0));
  ArrayRef<int64_t> in = typeOf(x).getShape();
  SmallVector<int64_t> shape;
  int64_t inferAt = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(spec)) {
    if (d == 0 && !allowzero) {
      if (i >= in.size()) return nodeError(n) << "shape copies dimension " << i << ", which the input lacks";
      d = in[i];
    }
    if (d == -1) {
      if (inferAt >= 0) return nodeError(n) << "shape has more than one -1";
      inferAt = static_cast<int64_t>(i);
      shape.push_back(1);
      continue;
    }
    if (d < 0) return nodeError(n) << "shape has a negative dimension " << d;
    shape.push_back(d);
    if (d != 0 && known > std::numeric_limits<int64_t>::max() / d)
      return nodeError(n) << "shape overflows";
    known *= d;
  }
  int64_t total = typeOf(x).getNumElements();
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return nodeError(n) << "cannot infer the -1 dimension of " << total << " elements";
    shape[inferAt] = total / known;
  }
  DS_TRY(y, reshape(x, shape));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::flatten(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 1));
  int64_t rank = typeOf(x).getRank();
  if (axis < -rank || axis > rank) return nodeError(n) << "axis " << axis << " is out of range";
  if (axis < 0) axis += rank;
  ArrayRef<int64_t> s = typeOf(x).getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= s[d];
  DS_TRY(y, reshape(x, {outer, inner}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::squeeze(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, axesOf(n, 1));
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> axes;
  if (axesOpt) {
    axes = *axesOpt;
    if (failed(normalizeAxes(n, axes, rank))) return failure();
  } else {
    for (int64_t d = 0; d < rank; ++d)
      if (typeOf(x).getDimSize(d) == 1) axes.push_back(d);
  }
  DS_TRY(y, build<SqueezeOp>({x}, {arrAttr("axes", axes)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::unsqueeze(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, axesOf(n, 1));
  if (!axesOpt) return nodeError(n) << "needs axes";
  SmallVector<int64_t> axes = *axesOpt;
  if (failed(normalizeAxes(n, axes, typeOf(x).getRank() + static_cast<int64_t>(axes.size()))))
    return failure();
  DS_TRY(y, build<UnsqueezeOp>({x}, {arrAttr("axes", axes)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::expand(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(spec, constantInts(n, 1, "shape"));
  for (int64_t d : spec)
    if (d < 0) return nodeError(n) << "shape has a negative dimension";
  // ONNX Expand broadcasts both ways: the result is broadcast(x, shape).
  auto shape = broadcastShapes({typeOf(x).getShape(), spec});
  if (failed(shape)) return nodeError(n) << "input does not broadcast to the given shape";
  DS_TRY(y, buildTyped<ExpandOp>(RankedTensorType::get(*shape, typeOf(x).getElementType()), x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::tile(const onnx::NodeProto &n) {
  // tile = reshape(expand(reshape(x, [1, d0, 1, d1, ...]), [r0, d0, r1, d1, ...]))
  DS_TRY(x, required(n, 0));
  DS_TRY(reps, constantInts(n, 1, "repeats"));
  ArrayRef<int64_t> s = typeOf(x).getShape();
  if (reps.size() != s.size()) return nodeError(n) << "repeats must have one entry per dimension";
  SmallVector<int64_t> inter, expanded, out;
  SmallVector<__int128> wide;
  for (size_t d = 0; d < s.size(); ++d) {
    if (reps[d] < 0) return nodeError(n) << "repeats must be non-negative";
    inter.append({1, s[d]});
    expanded.append({reps[d], s[d]});
    wide.push_back(static_cast<__int128>(reps[d]) * s[d]);
  }
  if (failed(checkedShape(n, wide, out, "the tiled result"))) return failure();
  DS_TRY(a, reshape(x, inter));
  DS_TRY(e, buildTyped<ExpandOp>(RankedTensorType::get(expanded, typeOf(x).getElementType()), a));
  DS_TRY(y, reshape(e, out));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::transpose(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(permOpt, intsAttr(n, "perm"));
  SmallVector<int64_t> perm;
  if (permOpt) perm = *permOpt;
  else
    for (int64_t d = typeOf(x).getRank() - 1; d >= 0; --d) perm.push_back(d);
  DS_TRY(y, build<TransposeOp>({x}, {arrAttr("permutation", perm)}));
  setOutput(n, 0, y);
  return success();
}

// DepthToSpace / SpaceToDepth: a reshape, a transpose, a reshape.
LogicalResult TensorImporter::depthSpace(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(bs, intAttr(n, "blocksize"));
  if (typeOf(x).getRank() != 4) return nodeError(n) << "needs a 4-D [N, C, H, W] input";
  ArrayRef<int64_t> in = typeOf(x).getShape();
  int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  SmallVector<int64_t> split, perm, out;
  if (n.op_type() == "DepthToSpace") {
    DS_TRY(mode, stringAttr(n, "mode", "DCR"));
    if (bs <= 0 || C % (bs * bs))
      return nodeError(n) << "blocksize " << bs << " squared must divide the " << C << " channels";
    int64_t c = C / (bs * bs);
    if (mode == "DCR") {
      split = {N, bs, bs, c, H, W};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      split = {N, c, bs, bs, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      return nodeError(n) << "mode '" << mode << "' is not DCR or CRD";
    }
    out = {N, c, H * bs, W * bs};
  } else {
    if (bs <= 0 || H % bs || W % bs)
      return nodeError(n) << "blocksize " << bs << " must divide height " << H << " and width " << W;
    // Opset 28 gave SpaceToDepth DepthToSpace's `mode`: the inverse orders.
    DS_TRY(mode, stringAttr(n, "mode", "DCR"));
    split = {N, C, H / bs, bs, W / bs, bs};
    if (mode == "DCR") perm = {0, 3, 5, 1, 2, 4};
    else if (mode == "CRD") perm = {0, 1, 3, 5, 2, 4};
    else return nodeError(n) << "mode '" << mode << "' is not DCR or CRD";
    out = {N, C * bs * bs, H / bs, W / bs};
  }
  DS_TRY(r, reshape(x, split));
  DS_TRY(t, build<TransposeOp>({r}, {arrAttr("permutation", perm)}));
  DS_TRY(y, reshape(t, out));
  setOutput(n, 0, y);
  return success();
}

// CenterCropPad: each listed axis cropped or zero-padded to its size about
// the centre (the odd element goes to the end): a pad with negative pads.
LogicalResult TensorImporter::centerCropPad(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(sizes, constantInts(n, 1, "shape"));
  int64_t rank = typeOf(x).getRank();
  DS_TRY(axesOpt, intsAttr(n, "axes"));
  SmallVector<int64_t> axes;
  if (axesOpt) {
    axes = *axesOpt;
    for (int64_t &a : axes)
      if (failed(normalizeAxis(n, a, rank))) return failure();
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (sizes.size() != axes.size())
    return nodeError(n) << "shape has " << sizes.size() << " values for " << axes.size()
                        << " axes";
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t dim = typeOf(x).getDimSize(axes[i]), want = sizes[i];
    if (want < 0) return nodeError(n) << "shape value " << want << " is negative";
    int64_t diff = want - dim; // > 0 pads, < 0 crops
    int64_t half = (diff >= 0 ? diff : -diff) / 2, rest = (diff >= 0 ? diff : -diff) - half;
    lo[axes[i]] = diff >= 0 ? half : -half;
    hi[axes[i]] = diff >= 0 ? rest : -rest;
  }
  DS_TRY(y, padWith(n, x, lo, hi, "constant", b_.getZeroAttr(typeOf(x).getElementType())));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::concat(const onnx::NodeProto &n) {
  SmallVector<Value> inputs;
  for (int i = 0; i < n.input_size(); ++i) {
    DS_TRY(v, required(n, i));
    inputs.push_back(v);
  }
  if (inputs.empty()) return nodeError(n) << "needs at least one input";
  DS_TRY(axis, intAttr(n, "axis"));
  if (failed(normalizeAxis(n, axis, typeOf(inputs[0]).getRank()))) return failure();
  // An input empty along the axis adds nothing (a language model's past
  // keys when --generate gives it no past): left out, so a concatenation
  // of one input is that input.
  auto empty = [&](Value v) {
    RankedTensorType t = typeOf(v), first = typeOf(inputs[0]);
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType() ||
        t.getDimSize(axis) != 0)
      return false;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d)) return false;
    return true;
  };
  SmallVector<Value> kept;
  for (Value v : inputs)
    if (!empty(v)) kept.push_back(v);
  if (!kept.empty() && kept.size() < inputs.size()) inputs = kept;
  if (inputs.size() == 1) {
    setOutput(n, 0, inputs[0]);
    return success();
  }
  DS_TRY(y, build<ConcatOp>(inputs, {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::split(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", 0));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  int64_t dim = typeOf(x).getDimSize(axis);
  int64_t outputs = n.output_size();
  SmallVector<int64_t> sizes;
  if (input(n, 1)) {
    DS_TRY(s, constantInts(n, 1, "split"));
    sizes = s;
  } else if (findAttr(n, "split")) {
    DS_TRY(s, intsAttr(n, "split"));
    sizes = *s;
  } else {
    DS_TRY(num, intAttr(n, "num_outputs", outputs));
    if (num <= 0 || num != outputs) return nodeError(n) << "num_outputs disagrees with the outputs";
    // Before opset 18 the parts are equal; from 18 the last may be
    // smaller, but none is empty.
    int64_t chunk = (dim + num - 1) / num;
    if (opset_ < 18 ? dim % num != 0 : (num - 1) * chunk >= dim && dim > 0)
      return nodeError(n) << "axis " << axis << " of " << dim << " elements is not evenly "
                          << "splittable into " << num << " parts";
    for (int64_t i = 0; i < num; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    return nodeError(n) << "split gives " << sizes.size() << " sizes for " << outputs << " outputs";
  int64_t total = 0;
  for (int64_t sz : sizes) {
    if (sz < 0) return nodeError(n) << "split size " << sz << " is negative";
    total += std::min<int64_t>(sz, int64_t(1) << 62);
  }
  if (total != dim)
    return nodeError(n) << "split sizes add up to " << total << ", not the " << dim
                        << " elements of axis " << axis;
  SmallVector<Type> types;
  for (int64_t sz : sizes) {
    SmallVector<int64_t> shape(typeOf(x).getShape());
    shape[axis] = sz;
    types.push_back(RankedTensorType::get(shape, typeOf(x).getElementType()));
  }
  auto op = SplitOp::create(b_, loc_, types, x, b_.getI64IntegerAttr(axis));
  if (failed(mlir::verify(op))) {
    op->erase();
    return failure();
  }
  SmallVector<Value> results(op->getResults());
  if (auto folded = tryFoldWithKernels(op, opts_.foldLimit)) results = *folded;
  for (int64_t i = 0; i < outputs; ++i) setOutput(n, i, results[i]);
  return success();
}

LogicalResult TensorImporter::slice(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  ArrayRef<int64_t> in = typeOf(x).getShape();
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (opset_ < 10) {
    // Slice-1: starts/ends/axes are attributes, steps are 1.
    DS_TRY(st, intsAttr(n, "starts"));
    DS_TRY(en, intsAttr(n, "ends"));
    DS_TRY(ax, intsAttr(n, "axes"));
    if (!st || !en) return nodeError(n) << "needs attributes 'starts' and 'ends'";
    starts = *st;
    ends = *en;
    if (ax) axes = *ax;
    else
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    steps.assign(starts.size(), 1);
  } else {
    DS_TRY(st, constantInts(n, 1, "starts"));
    DS_TRY(en, constantInts(n, 2, "ends"));
    starts = st;
    ends = en;
    if (input(n, 3)) {
      DS_TRY(a, constantInts(n, 3, "axes"));
      axes = a;
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (input(n, 4)) {
      DS_TRY(sp, constantInts(n, 4, "steps"));
      steps = sp;
    } else {
      steps.assign(starts.size(), 1);
    }
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return nodeError(n) << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> outStarts(rank, 0), outSteps(rank, 1), shape(in);
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes[i];
    if (failed(normalizeAxis(n, axis, rank))) return failure();
    if (!seen.insert(axis).second) return nodeError(n) << "axis " << axis << " repeats";
    int64_t dim = in[axis];
    if (steps[i] == 0) return nodeError(n) << "step is zero";
    // ONNX clamping, done in a width that cannot overflow (-INT64_MIN
    // included).
    __int128 s = starts[i], e = ends[i], step = steps[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (step > 0) {
      s = std::clamp<__int128>(s, 0, dim);
      e = std::clamp<__int128>(e, 0, dim);
      count = e > s ? static_cast<int64_t>((e - s + step - 1) / step) : 0;
    } else {
      s = std::clamp<__int128>(s, 0, dim - 1);
      e = std::clamp<__int128>(e, -1, dim - 1);
      count = s > e ? static_cast<int64_t>((s - e + (-step) - 1) / (-step)) : 0;
    }
    outStarts[axis] = count > 0 ? static_cast<int64_t>(s) : 0;
    // With at most one element the step is never taken: 1, so no kernel
    // meets a step whose negation or product overflows.
    outSteps[axis] = count > 1 ? steps[i] : 1;
    shape[axis] = count;
  }
  auto t = RankedTensorType::get(shape, typeOf(x).getElementType());
  DS_TRY(y, buildTyped<SliceOp>(t, x, {arrAttr("starts", outStarts), arrAttr("steps", outSteps)}));
  setOutput(n, 0, y);
  return success();
}

// Pad is lowered axis by axis to slices and concatenations: a constant fill
// is a constant block, `edge` repeats the border slice, `reflect` reads a
// reversed slice, `wrap` gathers the axis periodically, negative pads crop. These ops already have kernels and
// gradient rules, so Pad trains with no kernel of its own.
LogicalResult TensorImporter::pad(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank();
  DS_TRY(mode, stringAttr(n, "mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    return nodeError(n) << "mode '" << mode << "' is not constant, edge, reflect or wrap";
  SmallVector<int64_t> given, axes;
  Attribute fill = b_.getZeroAttr(xt.getElementType());
  if (opset_ < 11) {
    DS_TRY(p, intsAttr(n, "pads"));
    if (!p) return nodeError(n) << "needs attribute 'pads'";
    given = *p;
    DS_TRY(v, floatAttr(n, "value", 0.0f));
    if (!isa<FloatType>(xt.getElementType()))
      return nodeError(n) << "Pad before opset 11 pads float tensors only";
    fill = FloatAttr::get(xt.getElementType(), v);
  } else {
    DS_TRY(p, constantInts(n, 1, "pads"));
    given = p;
    if (input(n, 2)) {
      DenseElementsAttr c = literalOf(input(n, 2));
      if (!c || c.getNumElements() != 1 || c.getElementType() != xt.getElementType())
        return nodeError(n) << "constant_value must be one element of the data's type, known "
                               "at compile time";
      fill = *c.getValues<Attribute>().begin();
    }
    if (input(n, 3)) {
      DS_TRY(a, constantInts(n, 3, "axes"));
      axes = a;
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (given.size() != 2 * axes.size())
    return nodeError(n) << "pads has " << given.size() << " entries for " << axes.size()
                        << " axes; it needs two per axis";
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  llvm::SmallSet<int64_t, 8> seen;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (failed(normalizeAxis(n, a, rank))) return failure();
    if (!seen.insert(a).second) return nodeError(n) << "axis " << a << " repeats";
    lo[a] = given[i];
    hi[a] = given[i + axes.size()];
  }
  DS_TRY(y, padWith(n, x, lo, hi, mode, fill));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::trilu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(upper, intAttr(n, "upper", 1));
  int64_t k = 0;
  if (input(n, 1)) {
    DS_TRY(kv, constantInts(n, 1, "k"));
    if (kv.size() != 1) return nodeError(n) << "k must be a scalar";
    k = kv[0];
  }
  DS_TRY(y, buildTyped<TriluOp>(x.getType(), x,
                                {attr("upper", b_.getBoolAttr(upper != 0)), i64Attr("k", k)}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult TensorImporter::shape(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  ArrayRef<int64_t> s = typeOf(x).getShape();
  int64_t rank = static_cast<int64_t>(s.size());
  DS_TRY(start, intAttr(n, "start", 0));
  DS_TRY(end, intAttr(n, "end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  setOutput(n, 0, i64Tensor(end > start ? s.slice(start, end - start) : ArrayRef<int64_t>()));
  return success();
}

LogicalResult TensorImporter::size(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  setOutput(n, 0, constant(DenseElementsAttr::get(RankedTensorType::get({}, b_.getI64Type()),
                                                  APInt(64, typeOf(x).getNumElements()))));
  return success();
}

} // namespace

void mlir::ds::importer::registerTensorHandlers(HandlerTable &t) {
  using I = TensorImporter;
  t.add<I, &I::reshapeNode>("Reshape");
  t.add<I, &I::flatten>("Flatten");
  t.add<I, &I::squeeze>("Squeeze");
  t.add<I, &I::unsqueeze>("Unsqueeze");
  t.add<I, &I::expand>("Expand");
  t.add<I, &I::tile>("Tile");
  t.add<I, &I::transpose>("Transpose");
  t.add<I, &I::depthSpace>("DepthToSpace");
  t.add<I, &I::depthSpace>("SpaceToDepth");
  t.add<I, &I::centerCropPad>("CenterCropPad");
  t.add<I, &I::concat>("Concat");
  t.add<I, &I::split>("Split");
  t.add<I, &I::slice>("Slice");
  t.add<I, &I::pad>("Pad");
  t.add<I, &I::trilu>("Trilu");
  t.add<I, &I::shape>("Shape");
  t.add<I, &I::size>("Size");
}
