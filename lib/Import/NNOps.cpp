//===- NNOps.cpp - ONNX neural-network layers -----------------------------===//
//
// Convolutions and pooling, normalizations (batch, instance, layer,
// mean-variance), Softmax-like ops and Dropout (training-mode masks or the
// identity). ConvTranspose,
// InstanceNormalization and MeanVarianceNormalization are compositions of
// existing ops, so they run and differentiate with no kernel of their own.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ImporterCore.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class NNImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult conv(const onnx::NodeProto &n);
  LogicalResult convTranspose(const onnx::NodeProto &n);
  LogicalResult deformConv(const onnx::NodeProto &n);
  LogicalResult pool(const onnx::NodeProto &n);
  LogicalResult lpPool(const onnx::NodeProto &n);
  LogicalResult lpNormalization(const onnx::NodeProto &n);
  LogicalResult groupNorm(const onnx::NodeProto &n);
  LogicalResult lrn(const onnx::NodeProto &n);
  LogicalResult globalPool(const onnx::NodeProto &n);
  LogicalResult batchNorm(const onnx::NodeProto &n);
  LogicalResult instanceNorm(const onnx::NodeProto &n);
  LogicalResult layerNorm(const onnx::NodeProto &n);
  LogicalResult meanVarianceNorm(const onnx::NodeProto &n);
  template <typename OpTy> LogicalResult softmax(const onnx::NodeProto &n);
  LogicalResult hardmax(const onnx::NodeProto &n);
  LogicalResult dropout(const onnx::NodeProto &n);
  LogicalResult dropoutIdentity(const onnx::NodeProto &n, Value x);
  LogicalResult random(const onnx::NodeProto &n);
  LogicalResult bernoulli(const onnx::NodeProto &n);
  Value rngKey();

private:
  FailureOr<Value> randomKey(const onnx::NodeProto &n);
  FailureOr<Value> perChannel(const onnx::NodeProto &n, Value v, Value x);
  /// A pooling window's geometry: attributes, pads and the output shape.
  struct Window {
    SmallVector<int64_t> kernel, strides, dilations, pads, shape;
  };
  FailureOr<Window> poolWindow(const onnx::NodeProto &n, Value x);
};

LogicalResult NNImporter::conv(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  DS_TRY(y, convolution(n, x, w, input(n, 2)));
  setOutput(n, 0, y);
  return success();
}

// DeformConv (2-D): each kernel tap samples X bilinearly at its place in
// the window moved by the tap's offset (zero outside X), times the mask;
// the samples of all taps are the columns of an im2col, so the convolution
// is one batched product with the weight. Offsets and masks are data, so
// the taps' positions, weights and indices are computed in the graph (as
// GridSample's are) and the gathers, products and their gradients are
// ds's own.
LogicalResult NNImporter::deformConv(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  DS_TRY(offset, required(n, 2));
  Value bias = input(n, 3), mask = input(n, 4);
  RankedTensorType xt = typeOf(x), wt = typeOf(w), ot = typeOf(offset);
  if (xt.getRank() != 4 || wt.getRank() != 4 || ot.getRank() != 4 ||
      !isa<FloatType>(xt.getElementType()))
    return nodeError(n) << "supports 2-D inputs: X [N, C, H, W] (float), W [oC, C/group, kH, "
                           "kW] and offset [N, offset_group * kH * kW * 2, oH, oW]";
  DS_TRY(group, intAttr(n, "group", 1));
  DS_TRY(offsetGroup, intAttr(n, "offset_group", 1));
  DS_TRY(padsA, intsAttr(n, "pads"));
  DS_TRY(stridesA, intsAttr(n, "strides"));
  DS_TRY(dilationsA, intsAttr(n, "dilations"));
  const int64_t batch = xt.getDimSize(0), channels = xt.getDimSize(1), height = xt.getDimSize(2),
                width = xt.getDimSize(3), outC = wt.getDimSize(0), kh = wt.getDimSize(2),
                kw = wt.getDimSize(3), oh = ot.getDimSize(2), ow = ot.getDimSize(3);
  SmallVector<int64_t> pads = padsA ? *padsA : SmallVector<int64_t>{0, 0, 0, 0};
  SmallVector<int64_t> strides = stridesA ? *stridesA : SmallVector<int64_t>{1, 1};
  SmallVector<int64_t> dil = dilationsA ? *dilationsA : SmallVector<int64_t>{1, 1};
  if (pads.size() != 4 || strides.size() != 2 || dil.size() != 2)
    return nodeError(n) << "pads needs 4 values, strides and dilations 2";
  if (group < 1 || offsetGroup < 1 || channels % group || outC % group ||
      wt.getDimSize(1) * group != channels || channels % offsetGroup)
    return nodeError(n) << "channels (" << channels << "), group (" << group
                        << ") and offset_group (" << offsetGroup << ") do not divide, or W "
                        << wt << " does not take C / group channels";
  if (ot.getDimSize(0) != batch || ot.getDimSize(1) != offsetGroup * kh * kw * 2)
    return nodeError(n) << "offset must be [N, offset_group * kH * kW * 2, oH, oW], got " << ot;
  if (oh != (height + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) / strides[0] + 1 ||
      ow != (width + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) / strides[1] + 1)
    return nodeError(n) << "offset's spatial size " << oh << "x" << ow
                        << " is not the output size the pads, strides and dilations give";
  if (mask && typeOf(mask) != RankedTensorType::get({batch, offsetGroup * kh * kw, oh, ow},
                                                     ot.getElementType()))
    return nodeError(n) << "mask must be [N, offset_group * kH * kW, oH, oW], got "
                        << typeOf(mask);
  Type f = b_.getF32Type(), i64 = b_.getI64Type();
  auto c = [&](double v) { return scalar(f, v); };
  const int64_t g = offsetGroup, taps = kh * kw, points = taps * oh * ow, cg = channels / g;
  DS_TRY(off32, castTo(offset, f));
  DS_TRY(off, reshape(off32, {batch, g, kh, kw, 2, oh, ow}));
  // The window's tap positions before the offsets: [kh, 1, oh, 1] and [1, kw, 1, ow].
  SmallVector<float> baseH, baseW;
  for (int64_t a = 0; a < kh; ++a)
    for (int64_t i = 0; i < oh; ++i) baseH.push_back(float(-pads[0] + strides[0] * i + dil[0] * a));
  for (int64_t b = 0; b < kw; ++b)
    for (int64_t j = 0; j < ow; ++j) baseW.push_back(float(-pads[1] + strides[1] * j + dil[1] * b));
  Value bh = constant(DenseElementsAttr::get(RankedTensorType::get({kh, 1, oh, 1}, f),
                                             ArrayRef<float>(baseH)));
  Value bw = constant(DenseElementsAttr::get(RankedTensorType::get({1, kw, 1, ow}, f),
                                             ArrayRef<float>(baseW)));
  // Per axis: the two taps' clamped indices and weights (0 outside X).
  struct Tap { Value index, weight; };
  auto axisTaps = [&](int64_t comp, Value base, int64_t size) -> FailureOr<SmallVector<Tap>> {
    DS_TRY(o1, sliceAxis(off, 4, comp, 1, 1));
    DS_TRY(o, reshape(o1, {batch, g, kh, kw, oh, ow}));
    DS_TRY(pos, build<AddOp>({o, base}));
    DS_TRY(lo, buildTyped<FloorOp>(typeOf(pos), pos));
    DS_TRY(frac, build<SubOp>({pos, lo}));
    DS_TRY(hi, build<AddOp>({lo, c(1)}));
    DS_TRY(wLo, build<SubOp>({c(1), frac}));
    SmallVector<Tap> out;
    for (auto [p, wgt] : {std::pair<Value, Value>{lo, wLo}, std::pair<Value, Value>{hi, frac}}) {
      DS_TRY(ge, build<GreaterEqualOp>({p, c(0)}));
      DS_TRY(lt, build<LessOp>({p, c(double(size))}));
      DS_TRY(in, build<AndOp>({ge, lt}));
      DS_TRY(wz, build<WhereOp>({in, wgt, c(0)}));
      DS_TRY(pc0, build<MaxOp>({p, c(0)}));
      DS_TRY(pc, build<MinOp>({pc0, c(size - 1.0)}));
      DS_TRY(idx, castTo(pc, i64));
      out.push_back({idx, wz});
    }
    return out;
  };
  DS_TRY(tapsH, axisTaps(0, bh, height));
  DS_TRY(tapsW, axisTaps(1, bw, width));
  Value m;
  if (mask) {
    DS_TRY(m32, castTo(mask, f));
    DS_TRY(mr, reshape(m32, {batch, g, kh, kw, oh, ow}));
    m = mr;
  }
  DS_TRY(x32, castTo(x, f));
  DS_TRY(flat, reshape(x32, {batch, g, cg, height * width}));
  Value cols;
  for (const Tap &th : tapsH)
    for (const Tap &tw : tapsW) {
      DS_TRY(row, build<MulOp>({th.index, scalar(i64, double(width))}));
      DS_TRY(idx, build<AddOp>({row, tw.index}));
      DS_TRY(weight, build<MulOp>({th.weight, tw.weight}));
      if (m) {
        DS_TRY(wm, build<MulOp>({weight, m}));
        weight = wm;
      }
      DS_TRY(i4, reshape(idx, {batch, g, 1, points}));
      DS_TRY(iAll, buildTyped<ExpandOp>(RankedTensorType::get({batch, g, cg, points}, i64), i4));
      DS_TRY(vals, buildTyped<GatherElementsOp>(RankedTensorType::get({batch, g, cg, points}, f),
                                                ValueRange{flat, iAll}, {i64Attr("axis", 3)}));
      DS_TRY(w4, reshape(weight, {batch, g, 1, points}));
      DS_TRY(term, build<MulOp>({vals, w4}));
      if (!cols) {
        cols = term;
      } else {
        DS_TRY(sum, build<AddOp>({cols, term}));
        cols = sum;
      }
    }
  // Columns [N, group, C/group * kH * kW, oH * oW] against W [group, oC/group, C/group * kH * kW].
  const int64_t k = channels / group * taps, ocg = outC / group;
  DS_TRY(colsG, reshape(cols, {batch, group, k, oh * ow}));
  DS_TRY(w32, castTo(w, f));
  DS_TRY(wg, reshape(w32, {group, ocg, k}));
  DS_TRY(prod, build<MatmulOp>({wg, colsG}));
  DS_TRY(y4, reshape(prod, {batch, outC, oh, ow}));
  Value y = y4;
  if (bias) {
    if (typeOf(bias).getRank() != 1 || typeOf(bias).getDimSize(0) != outC)
      return nodeError(n) << "B must be [oC], got " << typeOf(bias);
    DS_TRY(b32, castTo(bias, f));
    DS_TRY(b4, reshape(b32, {1, outC, 1, 1}));
    DS_TRY(yb, build<AddOp>({y, b4}));
    y = yb;
  }
  DS_TRY(out, castTo(y, xt.getElementType()));
  setOutput(n, 0, out);
  return success();
}

// ConvTranspose as the equivalent direct convolution: zeros inserted
// between input elements (stride), the input padded by d(k-1) minus the
// pads (negative amounts crop, output_padding adds at the end), and the
// weight flipped spatially with its channel axes swapped per group. Every
// piece is an op with a kernel and a gradient rule, so it also trains.
LogicalResult NNImporter::convTranspose(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  Value bias = input(n, 2);
  int64_t rank = typeOf(x).getRank();
  Type elem = typeOf(x).getElementType();
  if (rank < 3 || typeOf(w).getRank() != rank || !isa<FloatType>(elem))
    return nodeError(n) << "input and weight must be float [N, C, spatial...] and "
                           "[C, M/group, k...]";
  size_t k = rank - 2;
  ArrayRef<int64_t> in = typeOf(x).getShape().drop_front(2);
  ArrayRef<int64_t> kernel = typeOf(w).getShape().drop_front(2);
  DS_TRY(group, intAttr(n, "group", 1));
  int64_t cin = typeOf(x).getDimSize(1);
  if (group <= 0 || cin % group || typeOf(w).getDimSize(0) != cin)
    return nodeError(n) << "weight must have the input's " << cin
                        << " channels first, divisible by group " << group;
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  if (ks && ArrayRef<int64_t>(*ks) != kernel)
    return nodeError(n) << "kernel_shape " << extents(*ks) << " disagrees with the weight's kernel "
                        << extents(kernel);
  auto perDim = [&](StringRef name, int64_t dflt) -> FailureOr<SmallVector<int64_t>> {
    DS_TRY(v, intsAttr(n, name));
    if (!v) return SmallVector<int64_t>(k, dflt);
    if (v->size() != k)
      return FailureOr<SmallVector<int64_t>>(nodeError(n) << name << " needs one entry per "
                                                             "spatial dimension");
    return *v;
  };
  DS_TRY(strides, perDim("strides", 1));
  DS_TRY(dilations, perDim("dilations", 1));
  DS_TRY(outPad, perDim("output_padding", 0));
  DS_TRY(autoPad, stringAttr(n, "auto_pad", "NOTSET"));
  DS_TRY(padsAttr, intsAttr(n, "pads"));
  DS_TRY(outShape, intsAttr(n, "output_shape"));
  for (size_t d = 0; d < k; ++d)
    if (strides[d] <= 0 || dilations[d] <= 0 || outPad[d] < 0)
      return nodeError(n) << "strides and dilations must be positive, output_padding "
                             "non-negative";
  SmallVector<int64_t> pads(2 * k, 0);
  if (padsAttr) {
    if (padsAttr->size() != 2 * k) return nodeError(n) << "pads needs two entries per spatial dimension";
    pads = *padsAttr;
  }
  if (outShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // The pads are chosen so the output has the requested shape.
    ArrayRef<int64_t> want;
    SmallVector<int64_t> same;
    if (outShape) {
      want = *outShape;
      if (want.size() == k + 2) want = want.drop_front(2);
    } else {
      for (size_t d = 0; d < k; ++d) same.push_back(in[d] * strides[d]);
      want = same;
    }
    if (want.size() != k) return nodeError(n) << "output_shape needs one entry per spatial dimension";
    for (size_t d = 0; d < k; ++d) {
      int64_t total = strides[d] * (in[d] - 1) + outPad[d] + (kernel[d] - 1) * dilations[d] + 1 -
                      want[d];
      if (total < 0) total = 0;  // output_shape larger than the full output: padded at the end
      bool upper = autoPad == "SAME_UPPER";
      pads[d] = upper ? total / 2 : total - total / 2;
      pads[d + k] = total - pads[d];
      if (outShape) outPad[d] += std::max<int64_t>(0, want[d] - (strides[d] * (in[d] - 1) +
                                 outPad[d] + (kernel[d] - 1) * dilations[d] + 1));
    }
  } else if (autoPad != "NOTSET" && autoPad != "VALID") {
    return nodeError(n) << "auto_pad '" << autoPad << "' is not one of NOTSET, SAME_UPPER, "
                           "SAME_LOWER, VALID";
  }
  // Zeros between input elements: [.., L, ..] -> [.., L, 1, ..] ++ zeros
  // [.., L, s-1, ..] -> [.., L*s, ..], keeping the first (L-1)s+1.
  Value z = x;
  for (size_t d = 0; d < k; ++d) {
    int64_t s = strides[d], a = d + 2, len = typeOf(z).getDimSize(a);
    if (s == 1 || len == 0) continue;
    SmallVector<int64_t> split(typeOf(z).getShape());
    split.insert(split.begin() + a + 1, 1);
    DS_TRY(col, reshape(z, split));
    split[a + 1] = s - 1;
    Value zeros = constant(DenseElementsAttr::get(RankedTensorType::get(split, elem),
                                                  b_.getZeroAttr(elem)));
    DS_TRY(wide, build<ConcatOp>({col, zeros}, {i64Attr("axis", a + 1)}));
    SmallVector<int64_t> merged(typeOf(z).getShape());
    merged[a] = len * s;
    DS_TRY(flat, reshape(wide, merged));
    DS_TRY(cut, sliceAxis(flat, a, 0, 1, (len - 1) * s + 1));
    z = cut;
  }
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  for (size_t d = 0; d < k; ++d) {
    int64_t span = dilations[d] * (kernel[d] - 1);
    lo[d + 2] = span - pads[d];
    hi[d + 2] = span - pads[d + k] + outPad[d];
  }
  DS_TRY(padded, padWith(n, z, lo, hi, "constant", b_.getZeroAttr(elem)));
  // Weight [C, M/g, k..] -> flipped -> [g, C/g, M/g, k..] -> [g, M/g, C/g, k..] -> [M, C/g, k..].
  Value wf = w;
  for (size_t d = 0; d < k; ++d) {
    DS_TRY(f, sliceAxis(wf, d + 2, kernel[d] - 1, -1, kernel[d]));
    wf = f;
  }
  int64_t mg = typeOf(w).getDimSize(1);
  SmallVector<int64_t> grouped{group, cin / group, mg};
  llvm::append_range(grouped, kernel);
  DS_TRY(wg, reshape(wf, grouped));
  SmallVector<int64_t> perm{0, 2, 1};
  for (size_t d = 0; d < k; ++d) perm.push_back(3 + d);
  DS_TRY(wt, build<TransposeOp>({wg}, {arrAttr("permutation", perm)}));
  SmallVector<int64_t> convW{group * mg, cin / group};
  llvm::append_range(convW, kernel);
  DS_TRY(wc, reshape(wt, convW));
  SmallVector<int64_t> shape{typeOf(x).getDimSize(0), group * mg};
  for (size_t d = 0; d < k; ++d) {
    int64_t o = typeOf(padded).getDimSize(d + 2) - dilations[d] * (kernel[d] - 1);
    if (o <= 0) return nodeError(n) << "pads leave no output along spatial dimension " << d;
    shape.push_back(o);
  }
  SmallVector<Value> operands{padded, wc};
  if (bias) operands.push_back(bias);
  DS_TRY(y, buildTyped<ConvOp>(RankedTensorType::get(shape, elem), operands,
                               {arrAttr("strides", SmallVector<int64_t>(k, 1)),
                                arrAttr("dilations", dilations),
                                arrAttr("pads", SmallVector<int64_t>(2 * k, 0)),
                                i64Attr("group", group), convSegments(bias != nullptr)}));
  setOutput(n, 0, y);
  return success();
}

FailureOr<NNImporter::Window> NNImporter::poolWindow(const onnx::NodeProto &n, Value x) {
  int64_t rank = typeOf(x).getRank();
  if (rank < 3) return FailureOr<Window>(nodeError(n) << "input must be [N, C, spatial...]");
  size_t k = rank - 2;
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  if (!ks || ks->size() != k)
    return FailureOr<Window>(nodeError(n) << "kernel_shape needs one entry per spatial dimension");
  DS_TRY(st, intsAttr(n, "strides"));
  DS_TRY(dl, intsAttr(n, "dilations"));
  DS_TRY(ceil, intAttr(n, "ceil_mode", 0));
  Window w;
  w.kernel = *ks;
  w.strides = st ? *st : SmallVector<int64_t>(k, 1);
  w.dilations = dl ? *dl : SmallVector<int64_t>(k, 1);
  if (w.strides.size() != k || w.dilations.size() != k)
    return FailureOr<Window>(nodeError(n) << "strides and dilations need one entry per spatial "
                                             "dimension");
  ArrayRef<int64_t> in = typeOf(x).getShape().drop_front(2);
  DS_TRY(pads, windowPads(n, in, w.kernel, w.strides, w.dilations));
  w.pads = pads;
  w.shape = {typeOf(x).getDimSize(0), typeOf(x).getDimSize(1)};
  for (size_t d = 0; d < k; ++d) {
    int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
    int64_t room = in[d] + pads[d] + pads[d + k] - span;
    // ceil_mode takes a window that overhangs the end, also one larger than
    // the whole input (PyTorch's avg_pool2d(x[2x2], 3, ceil_mode=True) is 1x1).
    if (w.strides[d] <= 0 || (room < 0 && !ceil))
      return FailureOr<Window>(nodeError(n) << "the window does not fit the input");
    int64_t out = (ceil ? llvm::divideCeilSigned(room, w.strides[d]) : room / w.strides[d]) + 1;
    // ceil_mode: the last window must still start inside the input or its
    // begin padding (PyTorch's and onnxruntime's rule).
    if (ceil && out > 0 && (out - 1) * w.strides[d] >= in[d] + pads[d]) --out;
    if (out < 1) return FailureOr<Window>(nodeError(n) << "the window does not fit the input");
    w.shape.push_back(out);
  }
  return w;
}

LogicalResult NNImporter::pool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  bool wantIndices = n.output_size() > 1 && !n.output(1).empty();
  DS_TRY(includePad, intAttr(n, "count_include_pad", 0));
  DS_TRY(w, poolWindow(n, x));
  SmallVector<int64_t> kernel = w.kernel, strides = w.strides, dilations = w.dilations,
                       pads = w.pads, shape = w.shape;
  auto kind = n.op_type() == "MaxPool" ? PoolKind::Max : PoolKind::Avg;
  DS_TRY(y, buildTyped<PoolOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), x,
                               {attr("kind", PoolKindAttr::get(ctx_, kind)),
                                arrAttr("kernel", kernel), arrAttr("strides", strides),
                                arrAttr("dilations", dilations), arrAttr("pads", pads),
                                attr("count_include_pad", b_.getBoolAttr(includePad != 0))}));
  setOutput(n, 0, y);
  if (wantIndices) {
    DS_TRY(order, intAttr(n, "storage_order", 0));
    if (order != 0 && order != 1) return nodeError(n) << "storage_order must be 0 or 1";
    auto t = RankedTensorType::get(shape, b_.getI64Type());
    DS_TRY(idx, buildTyped<MaxPoolIndicesOp>(
                    t, x, {arrAttr("kernel", kernel), arrAttr("strides", strides),
                           arrAttr("dilations", dilations), arrAttr("pads", pads),
                           attr("column_major", b_.getBoolAttr(order == 1))}));
    setOutput(n, 1, idx);
  }
  return success();
}

// LpPool: (sum over the window of |x|^p)^(1/p). The window sums are a
// depthwise convolution with a kernel of ones (padding adds zeros); a
// ceil_mode window overhanging the end gets zero padding to cover it.
LogicalResult NNImporter::lpPool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(p, intAttr(n, "p", 2));
  Type elem = typeOf(x).getElementType();
  if (!isa<FloatType>(elem)) return nodeError(n) << "needs a float input";
  if (p < 1) return nodeError(n) << "p must be >= 1, not " << p;
  DS_TRY(w, poolWindow(n, x));
  ArrayRef<int64_t> in = typeOf(x).getShape();
  size_t k = in.size() - 2;
  SmallVector<int64_t> pads = w.pads;
  for (size_t d = 0; d < k; ++d) {
    int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
    int64_t need = (w.shape[d + 2] - 1) * w.strides[d] + span - (in[d + 2] + pads[d] + pads[d + k]);
    if (need > 0) pads[d + k] += need;
  }
  DS_TRY(ax, buildTyped<AbsOp>(x.getType(), x));
  Value powered = ax;
  if (p != 1) {
    DS_TRY(pw, build<PowOp>({ax, scalar(elem, static_cast<double>(p))}));
    powered = pw;
  }
  int64_t channels = in[1];
  SmallVector<int64_t> kshape{channels, 1};
  kshape.append(w.kernel.begin(), w.kernel.end());
  auto kt = RankedTensorType::get(kshape, elem);
  Value ones = constant(DenseElementsAttr::get(kt, b_.getFloatAttr(elem, 1.0)));
  DS_TRY(sums, buildTyped<ConvOp>(RankedTensorType::get(w.shape, elem), ValueRange{powered, ones},
                                  {arrAttr("strides", w.strides), arrAttr("dilations", w.dilations),
                                   arrAttr("pads", pads), i64Attr("group", channels),
                                   convSegments(false)}));
  Value y = sums;
  if (p != 1) {
    DS_TRY(root, build<PowOp>({sums, scalar(elem, 1.0 / static_cast<double>(p))}));
    y = root;
  }
  setOutput(n, 0, y);
  return success();
}

// LpNormalization: x / (sum over axis of |x|^p)^(1/p), p 1 or 2; 0 where
// the norm is 0.
LogicalResult NNImporter::lpNormalization(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(p, intAttr(n, "p", 2));
  if (p != 1 && p != 2) return nodeError(n) << "p must be 1 or 2, not " << p;
  if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  Value term;
  if (p == 1) {
    DS_TRY(a, buildTyped<AbsOp>(x.getType(), x));
    term = a;
  } else {
    DS_TRY(sq, build<MulOp>({x, x}));
    term = sq;
  }
  DS_TRY(sum, reduceWith<ReduceSumOp>(term, {axis}, true));
  Value norm = sum;
  if (p == 2) {
    DS_TRY(r, buildTyped<SqrtOp>(sum.getType(), sum));
    norm = r;
  }
  // A zero norm gives 0, not 0/0 (ONNX's reference).
  Type elem = typeOf(x).getElementType();
  DS_TRY(isZero, build<EqualOp>({norm, scalar(elem, 0.0)}));
  DS_TRY(safe, build<WhereOp>({isZero, scalar(elem, 1.0), norm}));
  DS_TRY(q, build<DivOp>({x, safe}));
  DS_TRY(y, build<WhereOp>({isZero, scalar(elem, 0.0), q}));
  setOutput(n, 0, y);
  return success();
}

// GroupNormalization: statistics over each group of channels (and the
// spatial axes), then a per-channel scale and bias; opset 18 gave one per
// group, opset 21 one per channel and stash_type (f32 statistics).
LogicalResult NNImporter::groupNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(bias, required(n, 2));
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  DS_TRY(groups, intAttr(n, "num_groups"));
  RankedTensorType xt = typeOf(x);
  Type elem = xt.getElementType();
  if (xt.getRank() < 3 || !isa<FloatType>(elem))
    return nodeError(n) << "needs a float input [N, C, spatial...]";
  int64_t batch = xt.getDimSize(0), channels = xt.getDimSize(1);
  if (groups <= 0 || channels % groups)
    return nodeError(n) << "num_groups " << groups << " must divide the " << channels
                        << " channels";
  DS_TRY(stash, typeAttrOr(n, "stash_type", b_.getF32Type()));
  if (!isa<FloatType>(stash)) return nodeError(n) << "stash_type must be a float type";
  DS_TRY(xs, castTo(x, stash));
  DS_TRY(grouped, reshape(xs, {batch, groups, xt.getNumElements() / (batch * groups)}));
  DS_TRY(mean, reduceWith<ReduceMeanOp>(grouped, {2}, true));
  DS_TRY(dev, build<SubOp>({grouped, mean}));
  DS_TRY(sq, build<MulOp>({dev, dev}));
  DS_TRY(var, reduceWith<ReduceMeanOp>(sq, {2}, true));
  DS_TRY(ve, build<AddOp>({var, scalar(stash, eps)}));
  DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
  DS_TRY(nrm, build<DivOp>({dev, sd}));
  DS_TRY(back, reshape(nrm, xt.getShape()));
  DS_TRY(normalized, castTo(back, elem));
  int64_t per = typeOf(scale).getNumElements();
  if (per != channels && per != groups)
    return nodeError(n) << "scale and bias need one value per channel (" << channels
                        << ") or, before opset 21, per group (" << groups << ")";
  auto channelwise = [&](Value v) -> FailureOr<Value> {
    DS_TRY(ve2, castTo(v, elem));
    Value c = ve2;
    if (per == groups && per != channels) { // each group's value for its channels
      DS_TRY(g, reshape(ve2, {groups, 1}));
      DS_TRY(e, buildTyped<ExpandOp>(RankedTensorType::get({groups, channels / groups}, elem), g));
      c = e;
    }
    SmallVector<int64_t> shape(xt.getRank(), 1);
    shape[1] = channels;
    return reshape(c, shape);
  };
  DS_TRY(s, channelwise(scale));
  DS_TRY(b, channelwise(bias));
  DS_TRY(sc, build<MulOp>({normalized, s}));
  DS_TRY(y, build<AddOp>({sc, b}));
  setOutput(n, 0, y);
  return success();
}

// LRN: x / (bias + alpha / size * sum of x^2 over the `size` channels
// around each)^beta; the channel window is `size` shifted slices of the
// zero-padded squares.
LogicalResult NNImporter::lrn(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(size, intAttr(n, "size"));
  DS_TRY(alpha, floatAttr(n, "alpha", 1e-4f));
  DS_TRY(beta, floatAttr(n, "beta", 0.75f));
  DS_TRY(bias, floatAttr(n, "bias", 1.0f));
  RankedTensorType xt = typeOf(x);
  Type elem = xt.getElementType();
  if (xt.getRank() < 3 || !isa<FloatType>(elem))
    return nodeError(n) << "needs a float input [N, C, spatial...]";
  if (size < 1) return nodeError(n) << "size must be >= 1";
  int64_t channels = xt.getDimSize(1), rank = xt.getRank();
  DS_TRY(sq, build<MulOp>({x, x}));
  // Window positions more than channels - 1 away read only padding: the
  // window is clipped to those that can reach a channel (a huge `size`
  // costs no more than 2 * channels - 1 slices).
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  lo[1] = std::min<int64_t>((size - 1) / 2, channels - 1);
  hi[1] = std::min<int64_t>(size - 1 - (size - 1) / 2, channels - 1);
  DS_TRY(padded, padWith(n, sq, lo, hi, "constant", b_.getFloatAttr(elem, 0.0)));
  Value sum;
  for (int64_t i = 0; i < lo[1] + hi[1] + 1; ++i) {
    DS_TRY(slice, sliceAxis(padded, 1, i, 1, channels));
    if (!sum) {
      sum = slice;
    } else {
      DS_TRY(acc, build<AddOp>({sum, slice}));
      sum = acc;
    }
  }
  DS_TRY(scaled, build<MulOp>({sum, scalar(elem, alpha / size)}));
  DS_TRY(shifted, build<AddOp>({scaled, scalar(elem, bias)}));
  DS_TRY(den, build<PowOp>({shifted, scalar(elem, beta)}));
  DS_TRY(y, build<DivOp>({x, den}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult NNImporter::globalPool(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  if (rank < 3) return nodeError(n) << "needs an input [N, C, spatial...]";
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  FailureOr<Value> y = n.op_type() == "GlobalAveragePool" ? reduceWith<ReduceMeanOp>(x, axes, true)
                                                          : reduceWith<ReduceMaxOp>(x, axes, true);
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

/// A per-channel [C] tensor reshaped to [C, 1, ...] so it broadcasts over
/// an [N, C, d...] input.
FailureOr<Value> NNImporter::perChannel(const onnx::NodeProto &n, Value v, Value x) {
  int64_t c = typeOf(x).getDimSize(1);
  if (typeOf(v).getNumElements() != c)
    return FailureOr<Value>(nodeError(n) << "per-channel inputs must have " << c << " elements");
  SmallVector<int64_t> shape(typeOf(x).getRank() - 1, 1);
  shape[0] = c;
  return reshape(v, shape);
}

/// BatchNormalization: (x - mean) / sqrt(var + eps) * scale + B, the
/// per-channel vectors broadcast along axis 1; in training mode with the
/// batch's statistics, and the blended running ones as outputs.
LogicalResult NNImporter::batchNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(bias, required(n, 2));
  DS_TRY(mean, required(n, 3));
  DS_TRY(var, required(n, 4));
  DS_TRY(training, intAttr(n, "training_mode", 0));
  DS_TRY(isTest, intAttr(n, "is_test", 0));
  DS_TRY(spatial, intAttr(n, "spatial", 1));
  if (opset_ < 7 && !isTest) training = 1;
  if (!spatial) return nodeError(n) << "BatchNormalization with spatial = 0 is not supported";
  bool wantsStats = false;
  for (int i = 1; i < n.output_size(); ++i) wantsStats |= !n.output(i).empty();
  if (!training && wantsStats)
    return nodeError(n) << "running-statistics outputs need training_mode = 1";
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  DS_TRY(momentum, floatAttr(n, "momentum", 0.9f));
  int64_t rank = typeOf(x).getRank();
  if (rank < 2) return nodeError(n) << "needs an input of rank >= 2";
  auto channel = [&](Value v) { return perChannel(n, v, x); };
  DS_TRY(m0, channel(mean));
  DS_TRY(v0, channel(var));
  Value m = m0, v = v0;
  if (training) {
    // Training mode: the batch's statistics (population variance) normalize,
    // and the running ones move toward them by 1 - momentum.
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
    DS_TRY(bm, reduceWith<ReduceMeanOp>(x, axes, true));
    DS_TRY(dev, build<SubOp>({x, bm}));
    DS_TRY(sq, build<MulOp>({dev, dev}));
    DS_TRY(bv, reduceWith<ReduceMeanOp>(sq, axes, true));
    Type t = typeOf(x).getElementType();
    auto blend = [&](Value running, Value batch) -> FailureOr<Value> {
      DS_TRY(a, build<MulOp>({running, scalar(t, momentum)}));
      DS_TRY(b, build<MulOp>({batch, scalar(t, 1.0 - momentum)}));
      DS_TRY(sum, build<AddOp>({a, b}));
      return reshape(sum, typeOf(mean).getShape());
    };
    DS_TRY(runMean, blend(m0, bm));
    DS_TRY(runVar, blend(v0, bv));
    setOutput(n, 1, runMean);
    setOutput(n, 2, runVar);
    DS_TRY(savedMean, reshape(bm, typeOf(mean).getShape())); // opsets before 14
    DS_TRY(savedVar, reshape(bv, typeOf(var).getShape()));
    setOutput(n, 3, savedMean);
    setOutput(n, 4, savedVar);
    m = bm, v = bv;
  }
  DS_TRY(s, channel(scale));
  DS_TRY(b, channel(bias));
  Type elem = typeOf(x).getElementType();
  DS_TRY(ve, build<AddOp>({v, scalar(elem, eps)}));
  DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
  DS_TRY(d, build<SubOp>({x, m}));
  DS_TRY(nrm, build<DivOp>({d, sd}));
  DS_TRY(sc, build<MulOp>({nrm, s}));
  DS_TRY(y, build<AddOp>({sc, b}));
  setOutput(n, 0, y);
  return success();
}

// InstanceNormalization: statistics per (n, c) over the spatial axes,
// composed from reductions, so it runs and differentiates with no kernel
// of its own.
LogicalResult NNImporter::instanceNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(bias, required(n, 2));
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  int64_t rank = typeOf(x).getRank();
  Type elem = typeOf(x).getElementType();
  if (rank < 3 || !isa<FloatType>(elem))
    return nodeError(n) << "needs a floating-point input of rank >= 3";
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  DS_TRY(s, perChannel(n, scale, x));
  DS_TRY(b, perChannel(n, bias, x));
  DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
  DS_TRY(dev, build<SubOp>({x, mean}));
  DS_TRY(sq, build<MulOp>({dev, dev}));
  DS_TRY(var, reduceWith<ReduceMeanOp>(sq, axes, true));
  DS_TRY(ve, build<AddOp>({var, scalar(elem, eps)}));
  DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
  DS_TRY(nrm, build<DivOp>({dev, sd}));
  DS_TRY(sc, build<MulOp>({nrm, s}));
  DS_TRY(y, build<AddOp>({sc, b}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult NNImporter::layerNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  Value bias = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(eps, floatAttr(n, "epsilon", 1e-5f));
  if (failed(normalizeAxis(n, axis, typeOf(x).getRank()))) return failure();
  ArrayRef<int64_t> norm = typeOf(x).getShape().drop_front(axis);
  // Scale and bias may be given broadcastable; ds wants them exact.
  auto fit = [&](Value v) -> FailureOr<Value> {
    if (typeOf(v).getShape() == norm) return v;
    auto t = RankedTensorType::get(norm, typeOf(v).getElementType());
    return buildTyped<ExpandOp>(t, v);
  };
  DS_TRY(s, fit(scale));
  SmallVector<Value> operands{x, s};
  if (bias) {
    DS_TRY(bb, fit(bias));
    operands.push_back(bb);
  }
  DS_TRY(y, buildTyped<LayerNormOp>(x.getType(), operands,
                                    {i64Attr("axis", axis),
                                     attr("epsilon", b_.getF32FloatAttr(eps))}));
  setOutput(n, 0, y);
  // Mean and InvStdDev (training outputs), computed alongside when asked.
  bool wantMean = n.output_size() > 1 && !n.output(1).empty();
  bool wantInv = n.output_size() > 2 && !n.output(2).empty();
  if (wantMean || wantInv) {
    SmallVector<int64_t> axes;
    for (int64_t d = axis; d < typeOf(x).getRank(); ++d) axes.push_back(d);
    DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
    setOutput(n, 1, mean);
    if (wantInv) {
      DS_TRY(dev, build<SubOp>({x, mean}));
      DS_TRY(sq, build<MulOp>({dev, dev}));
      DS_TRY(var, reduceWith<ReduceMeanOp>(sq, axes, true));
      DS_TRY(ve, build<AddOp>({var, scalar(typeOf(x).getElementType(), eps)}));
      DS_TRY(sd, buildTyped<SqrtOp>(ve.getType(), ve));
      DS_TRY(inv, buildTyped<ReciprocalOp>(sd.getType(), sd));
      setOutput(n, 2, inv);
    }
  }
  return success();
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)
// over `axes`, ONNX's function body.
LogicalResult NNImporter::meanVarianceNorm(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(axesOpt, intsAttr(n, "axes"));
  SmallVector<int64_t> axes = axesOpt ? *axesOpt : SmallVector<int64_t>{0, 2, 3};
  if (failed(normalizeAxes(n, axes, typeOf(x).getRank()))) return failure();
  Type f = typeOf(x).getElementType();
  // The variance of the centred values, E[(x - E[x])^2]: E[x^2] - E[x]^2
  // cancels catastrophically in f32 (rows of mean 1e4 were wrong by 1e9).
  DS_TRY(mean, reduceWith<ReduceMeanOp>(x, axes, true));
  DS_TRY(centered, build<SubOp>({x, mean}));
  DS_TRY(sq, build<MulOp>({centered, centered}));
  DS_TRY(var, reduceWith<ReduceMeanOp>(sq, axes, true));
  DS_TRY(std, build<SqrtOp>({var}));
  DS_TRY(denom, build<AddOp>({std, scalar(f, 1e-9)}));
  DS_TRY(y, build<DivOp>({centered, denom}));
  setOutput(n, 0, y);
  return success();
}

template <typename OpTy> LogicalResult NNImporter::softmax(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  DS_TRY(axis, intAttr(n, "axis", opset_ >= 13 ? -1 : 1));
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (opset_ >= 13 || axis == rank - 1) {
    DS_TRY(y, buildTyped<OpTy>(x.getType(), x, {i64Attr("axis", axis)}));
    setOutput(n, 0, y);
    return success();
  }
  // Before opset 13 the input is coerced to 2-D at `axis` and normalized
  // over the whole second dimension.
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape[d];
  DS_TRY(x2, reshape(x, {outer, inner}));
  DS_TRY(y2, buildTyped<OpTy>(x2.getType(), x2, {i64Attr("axis", 1)}));
  DS_TRY(y, reshape(y2, shape));
  setOutput(n, 0, y);
  return success();
}

LogicalResult NNImporter::hardmax(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  DS_TRY(axis, intAttr(n, "axis", opset_ >= 13 ? -1 : 1));
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  // An empty input (an empty axis included) has an empty result of its own
  // type: there is no maximum to find, and nothing to write.
  if (typeOf(x).getNumElements() == 0) {
    setOutput(n, 0, x);
    return success();
  }
  Value in = x;
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  if (opset_ < 13 && axis != rank - 1) { // coerced to 2-D before opset 13
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= shape[d];
    DS_TRY(x2, reshape(x, {outer, inner}));
    in = x2;
    axis = 1;
  }
  int64_t r = typeOf(in).getRank();
  SmallVector<int64_t> kept(typeOf(in).getShape());
  kept[axis] = 1;
  DS_TRY(am, buildTyped<ArgMaxOp>(RankedTensorType::get(kept, b_.getI64Type()), in,
                                  {i64Attr("axis", axis)}));
  Value ids = iota(typeOf(in).getDimSize(axis), axis, r, b_.getI64Type());
  DS_TRY(eq, build<EqualOp>({ids, am}));
  DS_TRY(y, buildTyped<CastOp>(RankedTensorType::get(typeOf(eq).getShape(), typeOf(x).getElementType()), eq));
  DS_TRY(out, reshape(y, shape));
  setOutput(n, 0, out);
  return success();
}

// 0.5, not 5.000000e-01: how a user wrote the ratio.
static std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

LogicalResult NNImporter::dropout(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  // The ratio only matters in training mode (read below when it is on);
  // otherwise Dropout is the identity whatever it says.
  markRead(1);
  DS_TRY(isTest, intAttr(n, "is_test", 0));
  bool training = false;
  double ratio = 0.5;
  if (opset_ < 7) {
    training = !isTest;
    DS_TRY(r, floatAttr(n, "ratio", 0.5f));
    ratio = r;
  } else if (opset_ >= 12 && input(n, 2)) {
    DenseElementsAttr mode = constantOf(input(n, 2));
    if (!mode)
      return nodeError(n) << "training_mode must be known at compile time (a constant, or "
                          << "bound with --bind-input)";
    if (!mode.getElementType().isInteger(1) || mode.getNumElements() != 1)
      return nodeError(n) << "training_mode must be one bool, got " << mode.getType();
    training = mode.getSplatValue<bool>();
    if (input(n, 1)) {
      // (A one-element float initializer is a literal: literalOf.)
      DenseElementsAttr r = literalOf(input(n, 1));
      if (!r || !isa<FloatType>(r.getElementType()) || r.getNumElements() != 1)
        return nodeError(n) << "ratio must be one float known at compile time";
      ratio = (*r.getValues<APFloat>().begin()).convertToDouble();
    }
  }
  if (training && !(ratio >= 0.0 && ratio < 1.0))
    return nodeError(n) << "ratio must be in [0, 1), got " << shortest(ratio);
  // Training with ratio 0 drops nothing: the identity, as in inference.
  if (!training || ratio == 0.0) return dropoutIdentity(n, x);
  if (!opts_.training) {
    emitWarning(loc_) << "Dropout is in training mode (ratio " << shortest(ratio)
                      << "); an inference plan runs it as model.eval() would, as the identity "
                         "(compile with --config or --loss to train with it)";
    return dropoutIdentity(n, x);
  }
  auto type = dyn_cast<RankedTensorType>(x.getType());
  if (!type || !(type.getElementType().isF32() || type.getElementType().isF64()))
    return nodeError(n) << "training-mode Dropout supports f32 and f64 inputs, got "
                        << x.getType();
  DS_TRY(mask, buildTyped<RandomMaskOp>(type, rngKey(),
                                        {b_.getNamedAttr("ratio", b_.getF64FloatAttr(ratio)),
                                         b_.getNamedAttr("stream",
                                                         b_.getI64IntegerAttr(randomStreams_++))}));
  DS_TRY(y, build<MulOp>({x, mask}));
  setOutput(n, 0, y);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    Value zero = constant(DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                                 b_.getFloatAttr(type.getElementType(), 0.0)));
    DS_TRY(kept, build<GreaterOp>({mask, zero}));
    setOutput(n, 1, kept);
  }
  return success();
}

// Inference Dropout: the identity, and an all-true mask if anyone asks.
LogicalResult NNImporter::dropoutIdentity(const onnx::NodeProto &n, Value x) {
  setOutput(n, 0, x);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    auto t = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
    setOutput(n, 1, constant(DenseElementsAttr::get(t, true)));
  }
  return success();
}

// main's "rng_key" argument: one i64 per run (ds-run derives it from
// --seed; in training, per micro-step and rank), made when the first
// Dropout or random generator needs it.
Value NNImporter::rngKey() {
  if (rngKey_) return rngKey_;
  Operation *parent = b_.getInsertionBlock()->getParentOp();
  auto main = isa<func::FuncOp>(parent) ? cast<func::FuncOp>(parent)
                                        : parent->getParentOfType<func::FuncOp>();
  unsigned idx = main.getNumArguments();
  auto keyType = RankedTensorType::get({}, b_.getI64Type());
  (void)main.insertArgument(
      idx, keyType,
      b_.getDictionaryAttr({b_.getNamedAttr("ds.name", b_.getStringAttr("rng_key")),
                            b_.getNamedAttr("ds.rng_key", b_.getUnitAttr())}),
      main.getLoc());
  rngKey_ = main.getArgument(idx);
  return rngKey_;
}

// A random generator's key: the node's `seed` (a float, taken bit for bit)
// as a constant, so the node draws the same values on every run, as
// onnxruntime does for a seeded node in a new session; without a seed,
// the plan's rng_key.
FailureOr<Value> NNImporter::randomKey(const onnx::NodeProto &n) {
  if (!findAttr(n, "seed")) return rngKey();
  DS_TRY(seed, floatAttr(n, "seed", 0.0f));
  uint32_t bits;
  std::memcpy(&bits, &seed, sizeof bits);
  return constant(DenseElementsAttr::get(RankedTensorType::get({}, b_.getI64Type()),
                                         APInt(64, static_cast<uint64_t>(bits) | (1ull << 32))));
}

// RandomUniform, RandomNormal and their -Like forms: one ds.random. The
// -Like forms take the input's shape (and its type unless `dtype` says).
LogicalResult NNImporter::random(const onnx::NodeProto &n) {
  const bool like = StringRef(n.op_type()).ends_with("Like");
  const bool normal = StringRef(n.op_type()).starts_with("RandomNormal");
  SmallVector<int64_t> shape;
  Type elem = b_.getF32Type();
  if (like) {
    DS_TRY(x, required(n, 0));
    auto t = dyn_cast<RankedTensorType>(x.getType());
    if (!t || !t.hasStaticShape())
      return nodeError(n) << "needs an input of static shape, got " << x.getType();
    shape.assign(t.getShape().begin(), t.getShape().end());
    elem = t.getElementType();
  } else {
    DS_TRY(s, intsAttr(n, "shape"));
    if (!s) return nodeError(n) << "needs the attribute 'shape'";
    for (int64_t d : *s)
      if (d < 0) return nodeError(n) << "shape has a negative dimension " << d;
    shape.assign(s->begin(), s->end());
  }
  if (findAttr(n, "dtype")) {
    DS_TRY(dt, intAttr(n, "dtype"));
    FailureOr<Type> e = elementType(static_cast<int32_t>(dt));
    if (failed(e)) return nodeError(n) << "dtype " << dt << " is not supported";
    elem = *e;
  }
  if (!(elem.isF16() || elem.isBF16() || elem.isF32() || elem.isF64()))
    return nodeError(n) << "draws float16, bfloat16, float or double values, not " << elem;
  DS_TRY(a, floatAttr(n, normal ? "mean" : "low", 0.0f));
  DS_TRY(b, floatAttr(n, normal ? "scale" : "high", 1.0f));
  if (!std::isfinite(a) || !std::isfinite(b) || (normal ? b < 0 : a > b))
    return nodeError(n) << (normal ? "needs a finite mean and a finite scale >= 0"
                                   : "needs finite low <= high")
                        << ", got " << shortest(a) << " and " << shortest(b);
  DS_TRY(key, randomKey(n));
  auto type = RankedTensorType::get(shape, elem);
  DS_TRY(y, buildTyped<RandomOp>(
                type, key,
                {b_.getNamedAttr("distribution",
                                 DistributionAttr::get(b_.getContext(), normal
                                                                            ? Distribution::Normal
                                                                            : Distribution::Uniform)),
                 b_.getNamedAttr("a", b_.getF64FloatAttr(a)),
                 b_.getNamedAttr("b", b_.getF64FloatAttr(b)),
                 b_.getNamedAttr("stream", b_.getI64IntegerAttr(randomStreams_++))}));
  setOutput(n, 0, y);
  return success();
}

// Bernoulli: 1 where a uniform sample on [0, 1) is below the probability,
// so P(1) = p (numpy.random.binomial(1, p), the reference's draw), in
// `dtype` (the input's type by default).
LogicalResult NNImporter::bernoulli(const onnx::NodeProto &n) {
  DS_TRY(p, required(n, 0));
  auto t = dyn_cast<RankedTensorType>(p.getType());
  if (!t || !t.hasStaticShape() || !isa<FloatType>(t.getElementType()))
    return nodeError(n) << "needs float probabilities of static shape, got " << p.getType();
  Type elem = t.getElementType();
  if (findAttr(n, "dtype")) {
    DS_TRY(dt, intAttr(n, "dtype"));
    FailureOr<Type> e = elementType(static_cast<int32_t>(dt));
    if (failed(e)) return nodeError(n) << "dtype " << dt << " is not supported";
    elem = *e;
  }
  DS_TRY(key, randomKey(n));
  DS_TRY(u, buildTyped<RandomOp>(
                t, key,
                {b_.getNamedAttr("distribution",
                                 DistributionAttr::get(b_.getContext(), Distribution::Uniform)),
                 b_.getNamedAttr("a", b_.getF64FloatAttr(0.0)),
                 b_.getNamedAttr("b", b_.getF64FloatAttr(1.0)),
                 b_.getNamedAttr("stream", b_.getI64IntegerAttr(randomStreams_++))}));
  DS_TRY(hit, build<LessOp>({u, p}));
  DS_TRY(y, buildTyped<CastOp>(RankedTensorType::get(t.getShape(), elem), hit));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerNNHandlers(HandlerTable &t) {
  using I = NNImporter;
  t.add<I, &I::conv>("Conv");
  t.add<I, &I::convTranspose>("ConvTranspose");
  t.add<I, &I::pool>("MaxPool");
  t.add<I, &I::pool>("AveragePool");
  t.add<I, &I::lpPool>("LpPool");
  t.add<I, &I::lpNormalization>("LpNormalization");
  t.add<I, &I::groupNorm>("GroupNormalization");
  t.add<I, &I::lrn>("LRN");
  t.add<I, &I::globalPool>("GlobalAveragePool");
  t.add<I, &I::globalPool>("GlobalMaxPool");
  t.add<I, &I::batchNorm>("BatchNormalization");
  t.add<I, &I::instanceNorm>("InstanceNormalization");
  t.add<I, &I::layerNorm>("LayerNormalization");
  t.add<I, &I::meanVarianceNorm>("MeanVarianceNormalization");
  t.add<I, &I::softmax<SoftmaxOp>>("Softmax");
  t.add<I, &I::softmax<LogSoftmaxOp>>("LogSoftmax");
  t.add<I, &I::hardmax>("Hardmax");
  t.add<I, &I::dropout>("Dropout");
  t.add<I, &I::deformConv>("DeformConv");
  for (const char *op : {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike"})
    t.add<I, &I::random>(op);
  t.add<I, &I::bernoulli>("Bernoulli");
}
