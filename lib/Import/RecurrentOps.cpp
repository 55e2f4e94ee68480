//===- RecurrentOps.cpp - ONNX RNN, GRU and LSTM ---------------------------===//
//
// A recurrent layer over a sequence of static length is its cell unrolled:
// the input projections of every step in one matmul, then per step the
// recurrent matmul and the gate arithmetic, all ds ops. So the GEMM
// kernels and the elementwise fusion serve them, and autodiff gives
// backpropagation through time with no recurrent kernel or gradient rule
// of ds's own. Every attribute of the ONNX ops is honoured: directions
// (forward, reverse, bidirectional), activations with their alpha/beta,
// clip, LSTM's peepholes and input_forget, GRU's linear_before_reset,
// initial states, layout, and sequence_lens (steps past a sequence's
// length keep its state and output zeros).
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;
  std::optional<float> alpha, beta;
};

class RecurrentImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult rnn(const onnx::NodeProto &n) { return recurrent(n, Cell::Rnn); }
  LogicalResult gru(const onnx::NodeProto &n) { return recurrent(n, Cell::Gru); }
  LogicalResult lstm(const onnx::NodeProto &n) { return recurrent(n, Cell::Lstm); }

private:
  LogicalResult recurrent(const onnx::NodeProto &n, Cell cell);
  FailureOr<Value> activate(const onnx::NodeProto &n, const Activation &a, Value x);
  /// Row block `k` (of `h` rows) of a [rows, cols] matrix, transposed:
  /// the [cols, h] right operand of a product.
  FailureOr<Value> gateBlockT(Value m, int64_t k, int64_t h) {
    DS_TRY(rows, sliceAxis(m, 0, k * h, 1, h));
    return build<TransposeOp>({rows}, {arrAttr("permutation", {1, 0})});
  }
  /// Slice `k` of width `h` along the last axis.
  FailureOr<Value> part(Value v, int64_t k, int64_t h) {
    return sliceAxis(v, typeOf(v).getRank() - 1, k * h, 1, h);
  }
  /// The direction's [rows, ...] slice of a [num_directions, rows, ...] input.
  FailureOr<Value> ofDirection(Value v, int64_t d) {
    DS_TRY(s, sliceAxis(v, 0, d, 1, 1));
    SmallVector<int64_t> shape(typeOf(s).getShape().drop_front());
    return reshape(s, shape);
  }
};

FailureOr<Value> RecurrentImporter::activate(const onnx::NodeProto &n, const Activation &a,
                                             Value x) {
  Type elem = typeOf(x).getElementType();
  auto k = [&](double v) { return scalar(elem, v); };
  const std::string &f = a.name;
  if (f == "Sigmoid") return buildTyped<SigmoidOp>(x.getType(), x);
  if (f == "Tanh") return buildTyped<TanhOp>(x.getType(), x);
  if (f == "Relu") return buildTyped<ReluOp>(x.getType(), x);
  if (f == "Softsign") {
    DS_TRY(ax, buildTyped<AbsOp>(x.getType(), x));
    DS_TRY(den, build<AddOp>({ax, k(1)}));
    return build<DivOp>({x, den});
  }
  if (f == "Softplus") return buildTyped<SoftplusOp>(x.getType(), x);
  if (f == "HardSigmoid") { // max(0, min(1, alpha * x + beta))
    DS_TRY(ax, build<MulOp>({x, k(a.alpha.value_or(0.2f))}));
    DS_TRY(s, build<AddOp>({ax, k(a.beta.value_or(0.5f))}));
    DS_TRY(lo, build<MaxOp>({s, k(0)}));
    return build<MinOp>({lo, k(1)});
  }
  if (f == "LeakyRelu" || f == "ThresholdedRelu" || f == "Elu") {
    float alpha = a.alpha.value_or(f == "LeakyRelu" ? 0.01f : 1.0f);
    if (f == "ThresholdedRelu") { // x > alpha ? x : 0
      DS_TRY(above, build<GreaterOp>({x, k(alpha)}));
      return build<WhereOp>({above, x, k(0)});
    }
    DS_TRY(pos, build<GreaterOp>({x, k(0)}));
    Value neg;
    if (f == "LeakyRelu") {
      DS_TRY(m, build<MulOp>({x, k(alpha)}));
      neg = m;
    } else { // alpha * (e^x - 1)
      DS_TRY(e, buildTyped<ExpOp>(x.getType(), x));
      DS_TRY(em1, build<SubOp>({e, k(1)}));
      DS_TRY(m, build<MulOp>({em1, k(alpha)}));
      neg = m;
    }
    return build<WhereOp>({pos, x, neg});
  }
  if (f == "ScaledTanh" || f == "Affine") {
    float alpha = a.alpha.value_or(1.0f), beta = a.beta.value_or(f == "Affine" ? 0.0f : 1.0f);
    if (f == "Affine") { // alpha * x + beta
      DS_TRY(m, build<MulOp>({x, k(alpha)}));
      return build<AddOp>({m, k(beta)});
    }
    DS_TRY(bx, build<MulOp>({x, k(beta)})); // alpha * tanh(beta * x)
    DS_TRY(t, buildTyped<TanhOp>(bx.getType(), bx));
    return build<MulOp>({t, k(alpha)});
  }
  return FailureOr<Value>(nodeError(n) << "activation '" << f << "' is not one of ONNX's");
}

LogicalResult RecurrentImporter::recurrent(const onnx::NodeProto &n, Cell cell) {
  const int64_t gates = cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1;
  const size_t actsPerDir = cell == Cell::Lstm ? 3 : cell == Cell::Gru ? 2 : 1;
  DS_TRY(x0, required(n, 0));
  DS_TRY(w, required(n, 1));
  DS_TRY(r, required(n, 2));
  Value bias = input(n, 3), lens = input(n, 4), h0 = input(n, 5);
  Value c0 = cell == Cell::Lstm ? input(n, 6) : Value();
  Value peep = cell == Cell::Lstm ? input(n, 7) : Value();
  DS_TRY(hidden, intAttr(n, "hidden_size"));
  DS_TRY(direction, stringAttr(n, "direction", "forward"));
  DS_TRY(layout, intAttr(n, "layout", 0));
  DS_TRY(clip, floatAttr(n, "clip", 0.0f));
  DS_TRY(inputForget, intAttr(n, "input_forget", 0));
  DS_TRY(linearBeforeReset, intAttr(n, "linear_before_reset", 0));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return nodeError(n) << "direction '" << direction << "' is not forward, reverse or "
                           "bidirectional";
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  RankedTensorType xt = typeOf(x0);
  Type elem = xt.getElementType();
  if (xt.getRank() != 3 || !isa<FloatType>(elem))
    return nodeError(n) << "X must be a 3-D float tensor";
  Value x = x0;
  if (layout) { // [batch, seq, input] -> [seq, batch, input]
    DS_TRY(t, build<TransposeOp>({x0}, {arrAttr("permutation", {1, 0, 2})}));
    x = t;
  }
  const int64_t steps = typeOf(x).getDimSize(0), batch = typeOf(x).getDimSize(1),
                features = typeOf(x).getDimSize(2), h = hidden;
  if (h <= 0) return nodeError(n) << "hidden_size must be positive";
  if (steps < 1) return nodeError(n) << "the sequence is empty: there is no step to run";
  auto expect = [&](Value v, ArrayRef<int64_t> shape, StringRef what) -> LogicalResult {
    if (v && typeOf(v).getShape() != shape) {
      std::string want;
      for (size_t i = 0; i < shape.size(); ++i) want += (i ? "x" : "") + std::to_string(shape[i]);
      return nodeError(n) << what << " is " << typeOf(v) << "; expected [" << want << "]";
    }
    return success();
  };
  if (failed(expect(w, {dirs, gates * h, features}, "W")) ||
      failed(expect(r, {dirs, gates * h, h}, "R")) ||
      failed(expect(bias, {dirs, 2 * gates * h}, "B")) ||
      failed(expect(peep, {dirs, 3 * h}, "P")))
    return failure();
  // Activations, per direction, with alpha/beta aligned to them.
  SmallVector<Activation> acts;
  SmallVector<std::string> names;
  if (const onnx::AttributeProto *a = findAttr(n, "activations"))
    for (const auto &name : a->strings()) names.push_back(name);
  auto floats = [&](StringRef name) {
    SmallVector<float> v;
    if (const onnx::AttributeProto *a = findAttr(n, name))
      for (float f : a->floats()) v.push_back(f);
    return v;
  };
  SmallVector<float> alphas = floats("activation_alpha"), betas = floats("activation_beta");
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) {
      if (cell == Cell::Rnn) names.push_back("Tanh");
      else names.append({"Sigmoid", "Tanh"});
      if (cell == Cell::Lstm) names.push_back("Tanh");
    }
  }
  if (names.size() != actsPerDir * dirs)
    return nodeError(n) << "activations lists " << names.size() << " functions; "
                        << actsPerDir * dirs << " expected";
  for (size_t i = 0; i < names.size(); ++i) {
    Activation a{names[i], std::nullopt, std::nullopt};
    if (i < alphas.size()) a.alpha = alphas[i];
    if (i < betas.size()) a.beta = betas[i];
    acts.push_back(a);
  }
  // sequence_lens: equal to the sequence length (or absent) changes
  // nothing; otherwise steps past a sequence's length are masked, which a
  // reverse pass (that starts at each sequence's own end) cannot do here.
  Value stepMask; // [steps][batch, 1] i1, built per step from `lens`
  if (lens) {
    DenseElementsAttr c = constantOf(lens);
    bool full = c && llvm::all_of(c.getValues<APInt>(),
                                  [&](const APInt &v) { return v.getSExtValue() == steps; });
    if (!full) {
      if (direction != "forward")
        return nodeError(n) << "sequence_lens shorter than the sequence are supported for "
                               "forward layers (a reverse pass starts at each sequence's end)";
      DS_TRY(l, castTo(lens, b_.getI64Type()));
      DS_TRY(l2, reshape(l, {batch, 1}));
      stepMask = l2;
    }
  }
  auto initial = [&](Value v, StringRef what) -> FailureOr<Value> {
    if (!v) return constant(DenseElementsAttr::get(
                 RankedTensorType::get({dirs, batch, h}, elem), b_.getFloatAttr(elem, 0.0)));
    if (!layout) {
      if (failed(expect(v, {dirs, batch, h}, what))) return failure();
      return v;
    }
    if (failed(expect(v, {batch, dirs, h}, what))) return failure();
    return build<TransposeOp>({v}, {arrAttr("permutation", {1, 0, 2})});
  };
  DS_TRY(hInit, initial(h0, "initial_h"));
  Value cInit;
  if (cell == Cell::Lstm) {
    DS_TRY(ci, initial(c0, "initial_c"));
    cInit = ci;
  }
  auto clipped = [&](Value g) -> FailureOr<Value> {
    if (clip <= 0) return g;
    DS_TRY(lo, build<MaxOp>({g, scalar(elem, -clip)}));
    return build<MinOp>({lo, scalar(elem, clip)});
  };
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    const Activation *act = &acts[d * actsPerDir];
    DS_TRY(wd, ofDirection(w, d));
    DS_TRY(rd, ofDirection(r, d));
    DS_TRY(wdT, build<TransposeOp>({wd}, {arrAttr("permutation", {1, 0})}));
    DS_TRY(xw, build<MatmulOp>({x, wdT})); // [steps, batch, gates * h]
    Value proj = xw, rbH;
    if (bias) {
      DS_TRY(bd, ofDirection(bias, d));
      DS_TRY(wb, sliceAxis(bd, 0, 0, 1, gates * h));
      DS_TRY(rb, sliceAxis(bd, 0, gates * h, 1, gates * h));
      Value upfront = rb;
      if (cell == Cell::Gru) { // GRU adds Rbh inside the reset product
        DS_TRY(zr, sliceAxis(rb, 0, 0, 1, 2 * h));
        DS_TRY(hb, sliceAxis(rb, 0, 2 * h, 1, h));
        DS_TRY(zrPad, padWith(n, zr, {0}, {h}, "constant", b_.getFloatAttr(elem, 0.0)));
        upfront = zrPad;
        rbH = hb;
      }
      DS_TRY(bsum, build<AddOp>({wb, upfront}));
      DS_TRY(pb, build<AddOp>({xw, bsum}));
      proj = pb;
    }
    Value rAllT, rZrT, rHT;
    if (cell == Cell::Gru) {
      DS_TRY(zrRows, sliceAxis(rd, 0, 0, 1, 2 * h));
      DS_TRY(zrT, build<TransposeOp>({zrRows}, {arrAttr("permutation", {1, 0})}));
      DS_TRY(hT, gateBlockT(rd, 2, h));
      rZrT = zrT, rHT = hT;
    } else {
      DS_TRY(all, build<TransposeOp>({rd}, {arrAttr("permutation", {1, 0})}));
      rAllT = all;
    }
    Value pI, pO, pF;
    if (peep) {
      DS_TRY(pd, ofDirection(peep, d));
      DS_TRY(a, sliceAxis(pd, 0, 0, 1, h));
      DS_TRY(b, sliceAxis(pd, 0, h, 1, h));
      DS_TRY(c, sliceAxis(pd, 0, 2 * h, 1, h));
      pI = a, pO = b, pF = c;
    }
    DS_TRY(hPrev0, ofDirection(hInit, d));
    Value hPrev = hPrev0, cPrev;
    if (cell == Cell::Lstm) {
      DS_TRY(cp, ofDirection(cInit, d));
      cPrev = cp;
    }
    SmallVector<Value> outs(steps);
    for (int64_t s = 0; s < steps; ++s) {
      int64_t t = reverse ? steps - 1 - s : s;
      DS_TRY(xs, sliceAxis(proj, 0, t, 1, 1));
      DS_TRY(xtv, reshape(xs, {batch, gates * h}));
      Value hNew, cNew;
      if (cell == Cell::Rnn) {
        DS_TRY(hr, build<MatmulOp>({hPrev, rAllT}));
        DS_TRY(g, build<AddOp>({xtv, hr}));
        DS_TRY(gc, clipped(g));
        DS_TRY(hv, activate(n, act[0], gc));
        hNew = hv;
      } else if (cell == Cell::Gru) {
        DS_TRY(hzr, build<MatmulOp>({hPrev, rZrT}));
        DS_TRY(xz, part(xtv, 0, h));
        DS_TRY(xr, part(xtv, 1, h));
        DS_TRY(xh, part(xtv, 2, h));
        DS_TRY(hz, part(hzr, 0, h));
        DS_TRY(hrr, part(hzr, 1, h));
        DS_TRY(zs, build<AddOp>({xz, hz}));
        DS_TRY(rs, build<AddOp>({xr, hrr}));
        DS_TRY(zc, clipped(zs));
        DS_TRY(rc, clipped(rs));
        DS_TRY(z, activate(n, act[0], zc));
        DS_TRY(rg, activate(n, act[0], rc));
        Value hh;
        if (linearBeforeReset) { // r * (H R_h^T + Rb_h)
          DS_TRY(m, build<MatmulOp>({hPrev, rHT}));
          Value mb = m;
          if (rbH) {
            DS_TRY(a, build<AddOp>({m, rbH}));
            mb = a;
          }
          DS_TRY(p, build<MulOp>({rg, mb}));
          hh = p;
        } else { // (r * H) R_h^T + Rb_h
          DS_TRY(rh, build<MulOp>({rg, hPrev}));
          DS_TRY(m, build<MatmulOp>({rh, rHT}));
          hh = m;
          if (rbH) {
            DS_TRY(a, build<AddOp>({m, rbH}));
            hh = a;
          }
        }
        DS_TRY(hs0, build<AddOp>({xh, hh}));
        DS_TRY(hc, clipped(hs0));
        DS_TRY(cand, activate(n, act[1], hc));
        // (1 - z) * cand + z * H = cand + z * (H - cand)
        DS_TRY(diff, build<SubOp>({hPrev, cand}));
        DS_TRY(zd, build<MulOp>({z, diff}));
        DS_TRY(hv, build<AddOp>({cand, zd}));
        hNew = hv;
      } else { // LSTM, gates i, o, f, c
        DS_TRY(hr, build<MatmulOp>({hPrev, rAllT}));
        DS_TRY(g, build<AddOp>({xtv, hr}));
        DS_TRY(gi0, part(g, 0, h));
        DS_TRY(go0, part(g, 1, h));
        DS_TRY(gf0, part(g, 2, h));
        DS_TRY(gc0, part(g, 3, h));
        Value gi = gi0, gf = gf0;
        if (peep) {
          DS_TRY(a, build<MulOp>({pI, cPrev}));
          DS_TRY(b, build<AddOp>({gi0, a}));
          DS_TRY(c, build<MulOp>({pF, cPrev}));
          DS_TRY(e, build<AddOp>({gf0, c}));
          gi = b, gf = e;
        }
        DS_TRY(gic, clipped(gi));
        DS_TRY(iv, activate(n, act[0], gic));
        Value fv;
        if (inputForget) { // the forget gate coupled to the input gate: 1 - i
          DS_TRY(one, build<SubOp>({scalar(elem, 1.0), iv}));
          fv = one;
        } else {
          DS_TRY(gfc, clipped(gf));
          DS_TRY(f, activate(n, act[0], gfc));
          fv = f;
        }
        DS_TRY(gcc, clipped(gc0));
        DS_TRY(cand, activate(n, act[1], gcc));
        DS_TRY(fc, build<MulOp>({fv, cPrev}));
        DS_TRY(ic, build<MulOp>({iv, cand}));
        DS_TRY(cv, build<AddOp>({fc, ic}));
        Value go = go0;
        if (peep) {
          DS_TRY(a, build<MulOp>({pO, cv}));
          DS_TRY(b, build<AddOp>({go0, a}));
          go = b;
        }
        DS_TRY(goc, clipped(go));
        DS_TRY(ov, activate(n, act[0], goc));
        DS_TRY(hc, activate(n, act[2], cv));
        DS_TRY(hv, build<MulOp>({ov, hc}));
        hNew = hv, cNew = cv;
      }
      Value out = hNew;
      if (stepMask) { // past a sequence's end: state kept, output 0
        DS_TRY(live, build<GreaterOp>({stepMask, scalar(b_.getI64Type(), static_cast<double>(t))}));
        DS_TRY(hk, build<WhereOp>({live, hNew, hPrev}));
        DS_TRY(o, build<WhereOp>({live, hNew, scalar(elem, 0.0)}));
        out = o, hNew = hk;
        if (cNew) {
          DS_TRY(ck, build<WhereOp>({live, cNew, cPrev}));
          cNew = ck;
        }
      }
      outs[t] = out;
      hPrev = hNew;
      if (cNew) cPrev = cNew;
    }
    // Y for this direction: [steps, 1, batch, h].
    SmallVector<Value> rows;
    for (Value o : outs) {
      DS_TRY(row, reshape(o, {1, 1, batch, h}));
      rows.push_back(row);
    }
    Value yd = rows[0];
    if (rows.size() > 1) {
      DS_TRY(cat, build<ConcatOp>(rows, {i64Attr("axis", 0)}));
      yd = cat;
    }
    ys.push_back(yd);
    DS_TRY(hl, reshape(hPrev, {1, batch, h}));
    hs.push_back(hl);
    if (cPrev && cell == Cell::Lstm) {
      DS_TRY(cl, reshape(cPrev, {1, batch, h}));
      cs.push_back(cl);
    }
  }
  auto joined = [&](SmallVector<Value> &parts, int64_t axis) -> FailureOr<Value> {
    if (parts.size() == 1) return parts[0];
    return build<ConcatOp>(parts, {i64Attr("axis", axis)});
  };
  DS_TRY(y, joined(ys, 1));  // [steps, dirs, batch, h]
  DS_TRY(yh, joined(hs, 0)); // [dirs, batch, h]
  Value yc;
  if (cell == Cell::Lstm) {
    DS_TRY(c, joined(cs, 0));
    yc = c;
  }
  if (layout) {
    DS_TRY(ty, build<TransposeOp>({y}, {arrAttr("permutation", {2, 0, 1, 3})}));
    DS_TRY(th, build<TransposeOp>({yh}, {arrAttr("permutation", {1, 0, 2})}));
    y = ty, yh = th;
    if (yc) {
      DS_TRY(tc, build<TransposeOp>({yc}, {arrAttr("permutation", {1, 0, 2})}));
      yc = tc;
    }
  }
  setOutput(n, 0, y);
  setOutput(n, 1, yh);
  if (yc) setOutput(n, 2, yc);
  return success();
}

} // namespace

void mlir::ds::importer::registerRecurrentHandlers(HandlerTable &t) {
  using I = RecurrentImporter;
  t.add<I, &I::rnn>("RNN");
  t.add<I, &I::gru>("GRU");
  t.add<I, &I::lstm>("LSTM");
}
