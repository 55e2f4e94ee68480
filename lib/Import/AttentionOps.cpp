//===- AttentionOps.cpp - ONNX's language-model ops (opsets 23-28) -------===//
//
// Attention (opsets 23-25: KV cache, grouped-query heads, boolean and
// additive masks, causal and sliding-window masks, softcap, padding
// lengths), RotaryEmbedding, RMSNormalization, Swish, SwiGLU,
// TensorScatter, CausalConvWithState and LinearAttention. ONNX defines each by a function body; ds imports each as
// that composition of ds ops, so the fusion passes (attention, RMS norm,
// matmul epilogues), autodiff and every backend serve them exactly as they
// serve an exporter's decomposed form, with no kernel of their own.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class AttentionImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult attention(const onnx::NodeProto &n);
  LogicalResult rotaryEmbedding(const onnx::NodeProto &n);
  LogicalResult rmsNormalization(const onnx::NodeProto &n);
  LogicalResult swish(const onnx::NodeProto &n);
  LogicalResult swiGlu(const onnx::NodeProto &n);
  LogicalResult tensorScatter(const onnx::NodeProto &n);
  LogicalResult causalConv(const onnx::NodeProto &n);
  LogicalResult linearAttention(const onnx::NodeProto &n);

private:
  FailureOr<Value> toHeads(const onnx::NodeProto &n, Value x, int64_t heads, StringRef what);
  FailureOr<Value> repeatHeads(Value x, int64_t reps);
  FailureOr<Value> swishOf(Value x, float alpha);
  FailureOr<Value> maskBias(const onnx::NodeProto &n, Value mask, int64_t kvLength, Type elem);
  FailureOr<Value> positionBias(Value nonpad, int64_t queries, int64_t keys, int64_t past,
                                bool causal, int64_t left, int64_t right, Type elem);
  Value negInf(Type elem) { return scalar(elem, -std::numeric_limits<double>::infinity()); }
};

/// [B, S, heads * D] -> [B, heads, S, D]: the 3-D layout's heads.
FailureOr<Value> AttentionImporter::toHeads(const onnx::NodeProto &n, Value x, int64_t heads,
                                            StringRef what) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  if (heads <= 0 || s[2] % heads)
    return FailureOr<Value>(nodeError(n) << what << "'s hidden size " << s[2]
                                         << " is not a multiple of its " << heads << " heads");
  DS_TRY(split, reshape(x, {s[0], s[1], heads, s[2] / heads}));
  return build<TransposeOp>({split}, {arrAttr("permutation", {0, 2, 1, 3})});
}

/// Each of x's heads (axis 1) `reps` times in a row: grouped-query
/// attention's [h0, h0, h1, h1, ...].
FailureOr<Value> AttentionImporter::repeatHeads(Value x, int64_t reps) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  Type elem = typeOf(x).getElementType();
  DS_TRY(one, reshape(x, {s[0], s[1], 1, s[2], s[3]}));
  DS_TRY(spread, buildTyped<ExpandOp>(
                     RankedTensorType::get({s[0], s[1], reps, s[2], s[3]}, elem), one));
  return reshape(spread, {s[0], s[1] * reps, s[2], s[3]});
}

/// attn_mask as an additive bias: a boolean mask selects 0 (attend) or
/// -inf; a mask shorter than the keys is padded with "masked".
FailureOr<Value> AttentionImporter::maskBias(const onnx::NodeProto &n, Value mask,
                                             int64_t kvLength, Type elem) {
  RankedTensorType mt = typeOf(mask);
  bool isBool = mt.getElementType().isInteger(1);
  if (mt.getRank() < 1)
    return FailureOr<Value>(nodeError(n) << "attn_mask must have rank >= 1");
  int64_t last = mt.getShape().back();
  if (last > kvLength)
    return FailureOr<Value>(nodeError(n) << "attn_mask has " << last << " key positions, more "
                                         << "than the " << kvLength << " keys");
  Value m = mask;
  if (!isBool) {
    DS_TRY(f, castTo(mask, elem));
    m = f;
  }
  if (last < kvLength) {
    SmallVector<int64_t> padShape(mt.getShape());
    padShape.back() = kvLength - last;
    auto padType = RankedTensorType::get(padShape, typeOf(m).getElementType());
    Attribute fill = isBool ? Attribute(b_.getBoolAttr(false))
                            : Attribute(b_.getFloatAttr(elem, -INFINITY));
    Value pad = constant(DenseElementsAttr::get(padType, fill));
    DS_TRY(padded, build<ConcatOp>({m, pad}, {i64Attr("axis", mt.getRank() - 1)}));
    m = padded;
  }
  if (!isBool) return m;
  return build<WhereOp>({m, scalar(elem, 0.0), negInf(elem)});
}

/// The causal and sliding-window masks as an additive bias. A query at
/// block index i sits at position i + offset, offset being the past length
/// (or, with nonpad_kv_seqlen, each batch's valid length minus the queries);
/// it attends key j when j <= its position (causal) and the distance lies
/// inside the window bounds that are >= 0. [S, L], or [B, 1, S, L] per batch.
FailureOr<Value> AttentionImporter::positionBias(Value nonpad, int64_t queries, int64_t keys,
                                                 int64_t past, bool causal, int64_t left,
                                                 int64_t right, Type elem) {
  Type i64 = b_.getI64Type();
  Value i = iota(queries, 0, 2, i64), j = iota(keys, 1, 2, i64);
  Value pos = i;
  if (nonpad) {
    DS_TRY(lens, castTo(nonpad, i64));
    int64_t batch = typeOf(lens).getNumElements();
    DS_TRY(lens3, reshape(lens, {batch, 1, 1}));
    DS_TRY(offset, build<SubOp>({lens3, scalar(i64, static_cast<double>(queries))}));
    DS_TRY(p, build<AddOp>({i, offset}));
    pos = p;
  } else if (past) {
    DS_TRY(p, build<AddOp>({i, scalar(i64, static_cast<double>(past))}));
    pos = p;
  }
  DS_TRY(diff, build<SubOp>({pos, j})); // position - key
  Value allowed;
  auto both = [&](Value cond) -> LogicalResult {
    if (!allowed) {
      allowed = cond;
      return success();
    }
    FailureOr<Value> a = build<AndOp>({allowed, cond});
    if (failed(a)) return failure();
    allowed = *a;
    return success();
  };
  Value zero = scalar(i64, 0);
  if (causal) {
    DS_TRY(c, build<GreaterEqualOp>({diff, zero}));
    if (failed(both(c))) return failure();
  }
  if (left >= 0) {
    DS_TRY(c, build<LessEqualOp>({diff, scalar(i64, static_cast<double>(left))}));
    if (failed(both(c))) return failure();
  }
  if (right >= 0) {
    DS_TRY(c, build<GreaterEqualOp>({diff, scalar(i64, -static_cast<double>(right))}));
    if (failed(both(c))) return failure();
  }
  DS_TRY(bias, build<WhereOp>({allowed, scalar(elem, 0.0), negInf(elem)}));
  if (!nonpad) return bias;
  ArrayRef<int64_t> s = typeOf(bias).getShape(); // [B, S, L]
  return reshape(bias, {s[0], 1, s[1], s[2]});
}

LogicalResult AttentionImporter::attention(const onnx::NodeProto &n) {
  DS_TRY(q0, required(n, 0));
  DS_TRY(k0, required(n, 1));
  DS_TRY(v0, required(n, 2));
  Value mask = input(n, 3), pastK = input(n, 4), pastV = input(n, 5), nonpad = input(n, 6);
  DS_TRY(isCausal, intAttr(n, "is_causal", 0));
  DS_TRY(qHeads, intAttr(n, "q_num_heads", 0));
  DS_TRY(kvHeads, intAttr(n, "kv_num_heads", 0));
  DS_TRY(mode, intAttr(n, "qk_matmul_output_mode", 0));
  DS_TRY(softcap, floatAttr(n, "softcap", 0.0f));
  DS_TRY(left, intAttr(n, "left_window_size", -1));
  DS_TRY(right, intAttr(n, "right_window_size", -1));
  int64_t rank = typeOf(q0).getRank();
  Type elem = typeOf(q0).getElementType();
  if (!isa<FloatType>(elem)) return nodeError(n) << "Q must be a float tensor, not " << elem;
  if ((rank != 3 && rank != 4) || typeOf(k0).getRank() != rank || typeOf(v0).getRank() != rank)
    return nodeError(n) << "Q, K and V must all be 3-D [batch, sequence, hidden] or all 4-D "
                           "[batch, heads, sequence, head size]";
  if (typeOf(k0).getElementType() != elem || typeOf(v0).getElementType() != elem)
    return nodeError(n) << "Q, K and V must have one element type";
  if (!pastK != !pastV) return nodeError(n) << "past_key and past_value come together";
  if (nonpad && pastK)
    return nodeError(n) << "nonpad_kv_seqlen cannot be combined with past_key/past_value";
  if (left < -1 || right < -1)
    return nodeError(n) << "window sizes must be -1 (unbounded) or >= 0";
  if (mode < 0 || mode > 3) return nodeError(n) << "qk_matmul_output_mode must be 0 to 3";
  Value q = q0, k = k0, v = v0;
  if (rank == 3) {
    if (qHeads <= 0 || kvHeads <= 0)
      return nodeError(n) << "3-D inputs need the q_num_heads and kv_num_heads attributes";
    DS_TRY(qh, toHeads(n, q0, qHeads, "Q"));
    DS_TRY(kh, toHeads(n, k0, kvHeads, "K"));
    DS_TRY(vh, toHeads(n, v0, kvHeads, "V"));
    q = qh, k = kh, v = vh;
  }
  ArrayRef<int64_t> qs = typeOf(q).getShape(), ks = typeOf(k).getShape(),
                    vs = typeOf(v).getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] || vs[1] != ks[1] || vs[2] != ks[2])
    return nodeError(n) << "Q, K and V do not agree: Q's batch and head size must be K's, and "
                           "V's batch, heads and sequence K's";
  int64_t past = 0;
  if (pastK) {
    if (typeOf(pastK).getRank() != 4 || typeOf(pastV).getRank() != 4)
      return nodeError(n) << "past_key and past_value must be 4-D";
    past = typeOf(pastK).getDimSize(2);
    DS_TRY(kk, build<ConcatOp>({pastK, k}, {i64Attr("axis", 2)}));
    DS_TRY(vv, build<ConcatOp>({pastV, v}, {i64Attr("axis", 2)}));
    k = kk, v = vv;
  }
  setOutput(n, 1, k); // present_key / present_value: the cache with this step
  setOutput(n, 2, v);
  int64_t heads = qs[1], groups = typeOf(k).getDimSize(1), queries = qs[2],
          keys = typeOf(k).getDimSize(2), headSize = qs[3];
  if (heads % groups)
    return nodeError(n) << heads << " query heads are not a multiple of " << groups
                        << " key/value heads";

  // Q and K are each scaled by sqrt(scale) (ONNX's function body does so).
  const onnx::AttributeProto *scaleAttr = findAttr(n, "scale");
  double scale = scaleAttr ? scaleAttr->f() : 1.0 / std::sqrt(static_cast<double>(headSize));
  Value rootScale = scalar(elem, std::sqrt(scale));
  DS_TRY(qScaled, build<MulOp>({q, rootScale}));
  DS_TRY(kScaled, build<MulOp>({k, rootScale}));
  Value kUse = kScaled, vUse = v;
  if (heads != groups) {
    DS_TRY(kr, repeatHeads(kScaled, heads / groups));
    DS_TRY(vr, repeatHeads(v, heads / groups));
    kUse = kr, vUse = vr;
  }
  DS_TRY(kT, build<TransposeOp>({kUse}, {arrAttr("permutation", {0, 1, 3, 2})}));
  DS_TRY(qk, build<MatmulOp>({qScaled, kT}));
  Value scores = qk;
  if (softcap > 0) { // before the mask, so masked scores stay -inf
    Value cap = scalar(elem, softcap);
    DS_TRY(d, build<DivOp>({qk, cap}));
    DS_TRY(t, buildTyped<TanhOp>(d.getType(), d));
    DS_TRY(c, build<MulOp>({t, cap}));
    scores = c;
  }
  Value qkOut = scores; // modes 0 and 1, as ONNX's reference gives them

  Value bias;
  auto addBias = [&](Value b) -> LogicalResult {
    if (!bias) {
      bias = b;
      return success();
    }
    FailureOr<Value> s = build<AddOp>({bias, b});
    if (failed(s)) return failure();
    bias = *s;
    return success();
  };
  if (mask) {
    DS_TRY(mb, maskBias(n, mask, keys, elem));
    if (failed(addBias(mb))) return failure();
  }
  if (isCausal || left >= 0 || right >= 0) {
    DS_TRY(pb, positionBias(pastK ? Value() : nonpad, queries, keys, past, isCausal != 0, left,
                            right, elem));
    if (failed(addBias(pb))) return failure();
  }
  if (nonpad) { // keys at or past each batch's valid length are padding
    DS_TRY(lens, castTo(nonpad, b_.getI64Type()));
    int64_t batch = typeOf(lens).getNumElements();
    DS_TRY(lens2, reshape(lens, {batch, 1}));
    DS_TRY(valid, build<LessOp>({iota(keys, 1, 2, b_.getI64Type()), lens2}));
    DS_TRY(pad, build<WhereOp>({valid, scalar(elem, 0.0), negInf(elem)}));
    DS_TRY(pad4, reshape(pad, {batch, 1, 1, keys}));
    if (failed(addBias(pad4))) return failure();
  }
  Value withBias = scores;
  if (bias) {
    DS_TRY(s, build<AddOp>({scores, bias}));
    withBias = s;
  }
  if (mode == 2) qkOut = withBias;
  DS_TRY(softmaxType, typeAttrOr(n, "softmax_precision", elem));
  if (!isa<FloatType>(softmaxType))
    return nodeError(n) << "softmax_precision must name a float type";
  DS_TRY(logits, castTo(withBias, softmaxType));
  int64_t lastAxis = typeOf(logits).getRank() - 1;
  DS_TRY(probs0, buildTyped<SoftmaxOp>(logits.getType(), logits, {i64Attr("axis", lastAxis)}));
  Value probs = probs0;
  if (bias) {
    // A row with no attendable key gets zero weights (and Y = 0), decided
    // on the bias, not on scores that may be NaN there.
    int64_t biasLast = typeOf(bias).getRank() - 1;
    DS_TRY(rowMax, reduceWith<ReduceMaxOp>(bias, {biasLast}, true));
    DS_TRY(none, build<EqualOp>({rowMax, negInf(elem)}));
    DenseElementsAttr known = constantOf(none);
    if (!known || !known.isSplat() || known.getSplatValue<bool>()) { // else no such row
      DS_TRY(guarded, build<WhereOp>({none, scalar(softmaxType, 0.0), probs0}));
      probs = guarded;
    }
  }
  if (mode == 3) qkOut = probs;
  DS_TRY(p, castTo(probs, elem));
  DS_TRY(y4, build<MatmulOp>({p, vUse}));
  Value y = y4;
  if (rank == 3) {
    DS_TRY(t, build<TransposeOp>({y4}, {arrAttr("permutation", {0, 2, 1, 3})}));
    ArrayRef<int64_t> s = typeOf(t).getShape();
    DS_TRY(flat, reshape(t, {s[0], s[1], s[2] * s[3]}));
    y = flat;
  }
  setOutput(n, 0, y);
  if (n.output_size() > 3 && !n.output(3).empty()) {
    DS_TRY(out, castTo(qkOut, elem));
    setOutput(n, 3, out);
  }
  return success();
}

// RotaryEmbedding: rotate the first rotary_embedding_dim features of each
// head by the position's angle, in halves or interleaved pairs.
LogicalResult AttentionImporter::rotaryEmbedding(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(cos0, required(n, 1));
  DS_TRY(sin0, required(n, 2));
  Value positions = input(n, 3);
  DS_TRY(interleaved, intAttr(n, "interleaved", 0));
  DS_TRY(rotDim0, intAttr(n, "rotary_embedding_dim", 0));
  DS_TRY(numHeads, intAttr(n, "num_heads", 0));
  RankedTensorType xt = typeOf(x);
  Type elem = xt.getElementType();
  if (xt.getRank() != 3 && xt.getRank() != 4)
    return nodeError(n) << "X must be 3-D [batch, sequence, hidden] or 4-D [batch, heads, "
                           "sequence, head size]";
  // Work in [B, S, H, D] for 3-D inputs and in [B, H, S, D] for 4-D ones;
  // the angles broadcast over the heads axis either way.
  Value h = x;
  int64_t headAxis = 1;
  if (xt.getRank() == 3) {
    ArrayRef<int64_t> s = xt.getShape();
    if (numHeads <= 0 || s[2] % numHeads)
      return nodeError(n) << "a 3-D X needs num_heads dividing its hidden size " << s[2];
    DS_TRY(r, reshape(x, {s[0], s[1], numHeads, s[2] / numHeads}));
    h = r;
    headAxis = 2;
  }
  ArrayRef<int64_t> hs = typeOf(h).getShape();
  int64_t headSize = hs[3], rotDim = rotDim0 ? rotDim0 : headSize;
  if (rotDim <= 0 || rotDim > headSize || rotDim % 2)
    return nodeError(n) << "rotary_embedding_dim " << rotDim << " must be even and at most the "
                        << "head size " << headSize;
  int64_t half = rotDim / 2;
  auto angles = [&](Value cache) -> FailureOr<Value> {
    Value c = cache;
    if (positions) {
      if (typeOf(cache).getRank() != 2)
        return FailureOr<Value>(nodeError(n) << "with position_ids the caches must be 2-D "
                                                "[max positions, rotary dim / 2]");
      DS_TRY(g, build<GatherOp>({cache, positions}, {i64Attr("axis", 0)}));
      c = g;
    }
    RankedTensorType ct = typeOf(c);
    if (ct.getRank() != 3 || ct.getShape().back() != half)
      return FailureOr<Value>(nodeError(n) << "the cos/sin caches must give [batch, sequence, "
                                           << half << "] angles");
    DS_TRY(ce, castTo(c, elem));
    ArrayRef<int64_t> s = ct.getShape();
    SmallVector<int64_t> shape = {s[0], s[1], s[2]};
    shape.insert(shape.begin() + headAxis, 1);
    return reshape(ce, shape);
  };
  DS_TRY(cosA, angles(cos0));
  DS_TRY(sinA, angles(sin0));
  Value x1, x2;
  if (interleaved) {
    DS_TRY(a, sliceAxis(h, 3, 0, 2, half));
    DS_TRY(b, sliceAxis(h, 3, 1, 2, half));
    x1 = a, x2 = b;
  } else {
    DS_TRY(a, sliceAxis(h, 3, 0, 1, half));
    DS_TRY(b, sliceAxis(h, 3, half, 1, half));
    x1 = a, x2 = b;
  }
  DS_TRY(c1, build<MulOp>({cosA, x1}));
  DS_TRY(s2, build<MulOp>({sinA, x2}));
  DS_TRY(real, build<SubOp>({c1, s2}));
  DS_TRY(s1, build<MulOp>({sinA, x1}));
  DS_TRY(c2, build<MulOp>({cosA, x2}));
  DS_TRY(imag, build<AddOp>({s1, c2}));
  Value rotated;
  if (interleaved) {
    ArrayRef<int64_t> s = typeOf(real).getShape();
    DS_TRY(re, reshape(real, {s[0], s[1], s[2], s[3], 1}));
    DS_TRY(im, reshape(imag, {s[0], s[1], s[2], s[3], 1}));
    DS_TRY(pairs, build<ConcatOp>({re, im}, {i64Attr("axis", 4)}));
    DS_TRY(r, reshape(pairs, {s[0], s[1], s[2], rotDim}));
    rotated = r;
  } else {
    DS_TRY(r, build<ConcatOp>({real, imag}, {i64Attr("axis", 3)}));
    rotated = r;
  }
  Value out = rotated;
  if (rotDim < headSize) {
    DS_TRY(rest, sliceAxis(h, 3, rotDim, 1, headSize - rotDim));
    DS_TRY(all, build<ConcatOp>({rotated, rest}, {i64Attr("axis", 3)}));
    out = all;
  }
  DS_TRY(y, reshape(out, xt.getShape()));
  setOutput(n, 0, y);
  return success();
}

// RMSNormalization: X / sqrt(mean(X^2 over axis..last) + epsilon) * scale,
// stage one in stash_type's precision (float by default).
LogicalResult AttentionImporter::rmsNormalization(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(scale, required(n, 1));
  DS_TRY(axis, intAttr(n, "axis", -1));
  DS_TRY(epsilon, floatAttr(n, "epsilon", 1e-5f));
  int64_t rank = typeOf(x).getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  Type elem = typeOf(x).getElementType();
  DS_TRY(stash, typeAttrOr(n, "stash_type", b_.getF32Type()));
  if (!isa<FloatType>(stash) || !isa<FloatType>(elem))
    return nodeError(n) << "X and stash_type must be float types";
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d) axes.push_back(d);
  DS_TRY(xs, castTo(x, stash));
  DS_TRY(sq, build<MulOp>({xs, xs}));
  DS_TRY(mean, reduceWith<ReduceMeanOp>(sq, axes, true));
  DS_TRY(shifted, build<AddOp>({mean, scalar(stash, epsilon)}));
  DS_TRY(rms, buildTyped<SqrtOp>(shifted.getType(), shifted));
  DS_TRY(inv, buildTyped<ReciprocalOp>(rms.getType(), rms));
  DS_TRY(normalized, build<MulOp>({xs, inv}));
  DS_TRY(back, castTo(normalized, elem));
  DS_TRY(s, castTo(scale, elem));
  DS_TRY(y, build<MulOp>({back, s}));
  setOutput(n, 0, y);
  return success();
}

FailureOr<Value> AttentionImporter::swishOf(Value x, float alpha) {
  Value in = x;
  if (alpha != 1.0f) {
    DS_TRY(ax, build<MulOp>({x, scalar(typeOf(x).getElementType(), alpha)}));
    in = ax;
  }
  DS_TRY(sig, buildTyped<SigmoidOp>(in.getType(), in));
  return build<MulOp>({x, sig});
}

LogicalResult AttentionImporter::swish(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
  DS_TRY(y, swishOf(x, alpha));
  setOutput(n, 0, y);
  return success();
}

LogicalResult AttentionImporter::swiGlu(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(b, required(n, 1));
  DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
  if (typeOf(a) != typeOf(b))
    return nodeError(n) << "A and B must have one shape and type (SwiGLU does not broadcast)";
  DS_TRY(gate, swishOf(a, alpha));
  DS_TRY(y, build<MulOp>({gate, b}));
  setOutput(n, 0, y);
  return success();
}

// TensorScatter: the cache with `update` written along `axis` from each
// batch's write index (0 without write_indices), wrapping in "circular"
// mode. A ScatterElements whose indices are write index + position.
LogicalResult AttentionImporter::tensorScatter(const onnx::NodeProto &n) {
  DS_TRY(cache, required(n, 0));
  DS_TRY(update, required(n, 1));
  Value writes = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", -2));
  DS_TRY(mode, stringAttr(n, "mode", "linear"));
  if (mode != "linear" && mode != "circular")
    return nodeError(n) << "mode '" << mode << "' is not linear or circular";
  RankedTensorType ct = typeOf(cache), ut = typeOf(update);
  int64_t rank = ct.getRank();
  if (failed(normalizeAxis(n, axis, rank))) return failure();
  if (axis == 0) return nodeError(n) << "axis cannot be the batch axis 0";
  if (ut.getRank() != rank || ut.getElementType() != ct.getElementType())
    return nodeError(n) << "update must have the cache's rank and element type";
  for (int64_t d = 0; d < rank; ++d)
    if (d == axis ? ut.getDimSize(d) > ct.getDimSize(d) : ut.getDimSize(d) != ct.getDimSize(d))
      return nodeError(n) << "update's dimension " << d << " (" << ut.getDimSize(d)
                          << ") does not fit the cache's (" << ct.getDimSize(d) << ")";
  Type i64 = b_.getI64Type();
  int64_t batch = ct.getDimSize(0), maxLen = ct.getDimSize(axis);
  Value index = iota(ut.getDimSize(axis), axis, rank, i64);
  if (writes) {
    DS_TRY(w, castTo(writes, i64));
    if (typeOf(w).getNumElements() != batch)
      return nodeError(n) << "write_indices must hold one index per batch entry (" << batch << ")";
    SmallVector<int64_t> shape(rank, 1);
    shape[0] = batch;
    DS_TRY(wb, reshape(w, shape));
    DS_TRY(sum, build<AddOp>({wb, index}));
    index = sum;
  }
  if (mode == "circular") {
    DS_TRY(wrapped, build<ModOp>({index, scalar(i64, static_cast<double>(maxLen))}));
    index = wrapped;
  }
  DS_TRY(full, buildTyped<ExpandOp>(RankedTensorType::get(ut.getShape(), i64), index));
  DS_TRY(y, buildTyped<ScatterElementsOp>(ct, ValueRange{cache, full, update},
                                           {i64Attr("axis", axis)}));
  setOutput(n, 0, y);
  return success();
}

// CausalConvWithState (opset 27): a depthwise 1-D convolution over the past
// state (zeros without one) followed by the input, SiLU optionally fused;
// the present state is the last k - 1 positions of that concatenation.
LogicalResult AttentionImporter::causalConv(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  Value bias = input(n, 2), past = input(n, 3);
  DS_TRY(activation, stringAttr(n, "activation", "none"));
  if (activation != "none" && activation != "silu" && activation != "swish")
    return nodeError(n) << "activation '" << activation << "' is not none, silu or swish";
  RankedTensorType xt = typeOf(x), wt = typeOf(w);
  Type elem = xt.getElementType();
  if (xt.getRank() != 3 || wt.getRank() != 3 || !isa<FloatType>(elem) ||
      wt.getDimSize(0) != xt.getDimSize(1) || wt.getDimSize(1) != 1)
    return nodeError(n) << "input must be [batch, channels, length] and weight [channels, 1, k]";
  int64_t batch = xt.getDimSize(0), channels = xt.getDimSize(1), length = xt.getDimSize(2),
          k = wt.getDimSize(2);
  if (k < 1) return nodeError(n) << "the kernel must have at least one tap";
  Value state = past;
  if (!state) {
    state = constant(DenseElementsAttr::get(
        RankedTensorType::get({batch, channels, k - 1}, elem), b_.getFloatAttr(elem, 0.0)));
  } else if (typeOf(past) != RankedTensorType::get({batch, channels, k - 1}, elem)) {
    return nodeError(n) << "past_state must be [batch, channels, k - 1] = [" << batch << ", "
                        << channels << ", " << k - 1 << "]";
  }
  Value padded = x;
  if (k > 1) {
    DS_TRY(cat, build<ConcatOp>({state, x}, {i64Attr("axis", 2)}));
    padded = cat;
  }
  SmallVector<Value> operands{padded, w};
  if (bias) operands.push_back(bias);
  DS_TRY(conv, buildTyped<ConvOp>(RankedTensorType::get({batch, channels, length}, elem), operands,
                                  {arrAttr("strides", {1}), arrAttr("dilations", {1}),
                                   arrAttr("pads", {0, 0}), i64Attr("group", channels),
                                   convSegments(bias != nullptr)}));
  Value y = conv;
  if (activation != "none") {
    DS_TRY(sw, swishOf(conv, 1.0f));
    y = sw;
  }
  setOutput(n, 0, y);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    DS_TRY(present, sliceAxis(padded, 2, typeOf(padded).getDimSize(2) - (k - 1), 1, k - 1));
    setOutput(n, 1, present);
  }
  return success();
}

// LinearAttention (opset 27): the recurrence over the tokens, unrolled (the
// sequence length is static), in f32: per token the state decays
// (gated rules), takes the delta-corrected (delta rules) outer product
// k v^T, and each query head reads its KV head's state.
LogicalResult AttentionImporter::linearAttention(const onnx::NodeProto &n) {
  DS_TRY(q0, required(n, 0));
  DS_TRY(k0, required(n, 1));
  DS_TRY(v0, required(n, 2));
  Value past = input(n, 3), decay = input(n, 4), beta = input(n, 5);
  DS_TRY(qHeads, intAttr(n, "q_num_heads"));
  DS_TRY(kvHeads, intAttr(n, "kv_num_heads"));
  DS_TRY(chunk, intAttr(n, "chunk_size", 64));
  (void)chunk; // a tuning hint for chunked prefill; the unrolled recurrence is exact
  DS_TRY(scaleAttr, floatAttr(n, "scale", 0.0f));
  DS_TRY(rule, stringAttr(n, "update_rule", "gated_delta"));
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    return nodeError(n) << "update_rule '" << rule << "' is not linear, gated, delta or gated_delta";
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  if (gating != static_cast<bool>(decay))
    return nodeError(n) << "update_rule '" << rule << "' " << (gating ? "needs" : "takes no")
                        << " decay input";
  if (delta != static_cast<bool>(beta))
    return nodeError(n) << "update_rule '" << rule << "' " << (delta ? "needs" : "takes no")
                        << " beta input";
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads)
    return nodeError(n) << "q_num_heads must be a positive multiple of kv_num_heads";
  Type elem = typeOf(q0).getElementType(), f = b_.getF32Type();
  for (Value v : {q0, k0, v0})
    if (typeOf(v).getRank() != 3)
      return nodeError(n) << "query, key and value must be [batch, tokens, heads * size]";
  int64_t batch = typeOf(q0).getDimSize(0), tokens = typeOf(q0).getDimSize(1);
  if (tokens < 1) return nodeError(n) << "there are no tokens to attend";
  DS_TRY(qf, castTo(q0, f));
  DS_TRY(kf, castTo(k0, f));
  DS_TRY(vf, castTo(v0, f));
  DS_TRY(q, toHeads(n, qf, qHeads, "query")); // [B, Hq, T, dk]
  DS_TRY(k, toHeads(n, kf, kvHeads, "key"));
  DS_TRY(v, toHeads(n, vf, kvHeads, "value"));
  int64_t dk = typeOf(q).getDimSize(3), dv = typeOf(v).getDimSize(3);
  if (typeOf(k).getDimSize(3) != dk)
    return nodeError(n) << "key's head size differs from query's";
  double scale = scaleAttr != 0.0f ? scaleAttr : 1.0 / std::sqrt(static_cast<double>(dk));
  auto perToken = [&](Value x, int64_t width, StringRef what) -> FailureOr<Value> {
    // [B, T, heads * width] or [B, T, heads] -> [B, heads, T, width]
    DS_TRY(xf, castTo(x, f));
    int64_t last = typeOf(xf).getDimSize(2);
    if (typeOf(xf).getRank() != 3)
      return FailureOr<Value>(nodeError(n) << what << " must be rank 3");
    int64_t heads = last == width * kvHeads && width > 1 ? kvHeads : last;
    DS_TRY(r, reshape(xf, {batch, tokens, heads, last / heads}));
    return build<TransposeOp>({r}, {arrAttr("permutation", {0, 2, 1, 3})});
  };
  Value decay4, beta4;
  if (decay) {
    int64_t last = typeOf(decay).getDimSize(2);
    if (last != kvHeads && last != kvHeads * dk)
      return nodeError(n) << "decay's last dimension must be kv_num_heads or kv_num_heads * d_k";
    DS_TRY(d4, perToken(decay, last == kvHeads ? 1 : dk, "decay")); // [B, Hkv, T, 1 | dk]
    decay4 = d4;
  }
  if (beta) {
    int64_t last = typeOf(beta).getDimSize(2);
    if (last != kvHeads && last != 1)
      return nodeError(n) << "beta's last dimension must be kv_num_heads or 1";
    DS_TRY(b4, perToken(beta, 1, "beta")); // [B, Hkv | 1, T, 1]
    beta4 = b4;
  }
  auto stateType = RankedTensorType::get({batch, kvHeads, dk, dv}, f);
  Value state;
  if (past) {
    if (typeOf(past).getShape() != stateType.getShape())
      return nodeError(n) << "past_state must be [" << batch << ", " << kvHeads << ", " << dk
                          << ", " << dv << "]";
    DS_TRY(p, castTo(past, f));
    state = p;
  } else {
    state = constant(DenseElementsAttr::get(stateType, b_.getFloatAttr(f, 0.0)));
  }
  auto token = [&](Value x, int64_t t) { return sliceAxis(x, 2, t, 1, 1); };
  auto swapLast = [&](Value x) {
    return build<TransposeOp>({x}, {arrAttr("permutation", {0, 1, 3, 2})});
  };
  SmallVector<Value> outs;
  for (int64_t t = 0; t < tokens; ++t) {
    DS_TRY(qt, token(q, t)); // [B, Hq, 1, dk]
    DS_TRY(kt, token(k, t)); // [B, Hkv, 1, dk]
    DS_TRY(vt0, token(v, t));
    Value vt = vt0;
    if (gating) { // S *= exp(g), g per head or per key dimension
      DS_TRY(gt, token(decay4, t));
      DS_TRY(eg, buildTyped<ExpOp>(gt.getType(), gt));
      DS_TRY(egT, swapLast(eg)); // [B, Hkv, 1 | dk, 1]
      DS_TRY(decayed, build<MulOp>({state, egT}));
      state = decayed;
    }
    if (delta) { // v <- beta (v - S^T k)
      DS_TRY(retrieved, build<MatmulOp>({kt, state})); // [B, Hkv, 1, dv]
      DS_TRY(diff, build<SubOp>({vt0, retrieved}));
      DS_TRY(bt, token(beta4, t));
      DS_TRY(scaled, build<MulOp>({bt, diff}));
      vt = scaled;
    }
    DS_TRY(ktT, swapLast(kt));                   // [B, Hkv, dk, 1]
    DS_TRY(outer, build<MatmulOp>({ktT, vt}));   // [B, Hkv, dk, dv]
    DS_TRY(next, build<AddOp>({state, outer}));
    state = next;
    Value read = state;
    if (qHeads != kvHeads) {
      DS_TRY(rep, repeatHeads(state, qHeads / kvHeads));
      read = rep;
    }
    DS_TRY(o, build<MatmulOp>({qt, read})); // [B, Hq, 1, dv]
    DS_TRY(os, build<MulOp>({o, scalar(f, scale)}));
    outs.push_back(os);
  }
  Value all = outs[0];
  if (outs.size() > 1) {
    DS_TRY(cat, build<ConcatOp>(outs, {i64Attr("axis", 2)}));
    all = cat;
  }
  DS_TRY(tr, build<TransposeOp>({all}, {arrAttr("permutation", {0, 2, 1, 3})}));
  DS_TRY(flat, reshape(tr, {batch, tokens, qHeads * dv}));
  DS_TRY(y, castTo(flat, elem));
  setOutput(n, 0, y);
  if (n.output_size() > 1 && !n.output(1).empty()) {
    DS_TRY(present, castTo(state, past ? typeOf(past).getElementType() : elem));
    setOutput(n, 1, present);
  }
  return success();
}

} // namespace

void mlir::ds::importer::registerAttentionHandlers(HandlerTable &t) {
  using I = AttentionImporter;
  t.add<I, &I::attention>("Attention");
  t.add<I, &I::rotaryEmbedding>("RotaryEmbedding");
  t.add<I, &I::rmsNormalization>("RMSNormalization");
  t.add<I, &I::swish>("Swish");
  t.add<I, &I::swiGlu>("SwiGLU");
  t.add<I, &I::tensorScatter>("TensorScatter");
  t.add<I, &I::causalConv>("CausalConvWithState");
  t.add<I, &I::linearAttention>("LinearAttention");
}
