//===- ConvChannelsLast.cpp - convolutions in [N, spatial..., C] ----------===//
//
// oneDNN's CPU convolution kernels compute in channels-last layouts; a plan
// whose activations are [N, C, H, W] pays a reorder into that layout before
// every convolution and one back after it (MobileNetV2 spent more time in
// those reorders than in its 52 convolutions). This pass gives inference
// convolutions `channels_last`, with explicit transposes around them, then
// moves the transposes down through elementwise ops (a residual add of two
// channels-last values is a channels-last add; a per-channel operand such
// as a batch norm's scale [C, 1, 1] or a squeeze-excitation gate
// [N, C, 1, 1] is reshaped to [1, 1, 1, C] / [N, 1, 1, C]), poolings,
// resamplings (an inference Resize; upsamplings only toward a convolution),
// concatenations (DenseNet, SqueezeNet) and reductions (a global mean)
// until they meet the transposes of the next convolution and cancel
// (TransposeOp's folder composes them). A transpose left that moves only
// unit dimensions ([N, 1, 1, C] -> [N, C, 1, 1]) is a reshape. What remains
// are transposes where the network enters and leaves the convolutions.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CONVCHANNELSLASTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// [0, 2, ..., r-1, 1]: channels-first to channels-last.
SmallVector<int64_t> toLast(int64_t rank) {
  SmallVector<int64_t> p{0};
  for (int64_t i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}
/// [0, r-1, 1, ..., r-2]: channels-last back to channels-first.
SmallVector<int64_t> toFirst(int64_t rank) {
  SmallVector<int64_t> p{0, rank - 1};
  for (int64_t i = 1; i < rank - 1; ++i) p.push_back(i);
  return p;
}

Value transpose(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(t.getDimSize(p));
  return TransposeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), v,
                             b.getDenseI64ArrayAttr(perm));
}

/// An inference convolution: f32, 1 to 3 spatial dimensions, weights known
/// before the run (a training forward's weights are loaded state).
/// (ds.quantized_conv's int8 kernels compute channels-last too.)
template <typename ConvLike> bool eligible(ConvLike conv) {
  Operation *w = conv.getWeight().getDefiningOp();
  int64_t rank = conv.getInput().getType().getRank();
  return !conv.getChannelsLast() && rank >= 3 && rank <= 5 &&
         conv.getInput().getType().getElementType().isF32() && w &&
         isa<ConstantOp, ParameterOp>(w);
}

struct ConvChannelsLastPass
    : public mlir::ds::impl::ConvChannelsLastPassBase<ConvChannelsLastPass> {
  void runOnOperation() override {
    SmallVector<Operation *> convs;
    getOperation().walk([&](Operation *op) {
      if (auto c = dyn_cast<ConvOp>(op); c && eligible(c)) convs.push_back(op);
      if (auto c = dyn_cast<QuantizedConvOp>(op); c && eligible(c)) convs.push_back(op);
    });
    for (Operation *conv : convs) toChannelsLast(conv);
    if (convs.empty()) return;
    // Sink transposes through elementwise users until nothing moves.
    bool changed = true;
    while (changed) {
      changed = false;
      // Transposes that met are one (a reshape's sinking reads the composite).
      composeTransposes();
      SmallVector<Operation *> candidates;
      getOperation().walk([&](Operation *op) {
        if (op->hasTrait<OpTrait::ds::Elementwise>() && !isa<FusedElementwiseOp>(op) &&
            op->getNumResults() == 1)
          candidates.push_back(op);
      });
      for (Operation *op : candidates) changed |= sinkThrough(op);
      SmallVector<PoolOp> pools;
      getOperation().walk([&](PoolOp p) { pools.push_back(p); });
      for (PoolOp p : pools) changed |= sinkThroughPool(p);
      SmallVector<ResampleOp> resamples;
      getOperation().walk([&](ResampleOp r) { resamples.push_back(r); });
      for (ResampleOp r : resamples) changed |= sinkThroughResample(r);
      SmallVector<Operation *> others;
      getOperation().walk([&](Operation *op) {
        if (isa<ConcatOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReshapeOp,
                SplitOp, SliceOp>(op))
          others.push_back(op);
      });
      for (Operation *op : others) {
        if (auto concat = dyn_cast<ConcatOp>(op)) changed |= sinkThroughConcat(concat);
        else if (auto reshape = dyn_cast<ReshapeOp>(op)) changed |= sinkThroughReshape(reshape);
        else if (auto split = dyn_cast<SplitOp>(op)) changed |= sinkThroughSplit(split);
        else if (auto slice = dyn_cast<SliceOp>(op)) changed |= sinkThroughSlice(slice);
        else changed |= sinkThroughReduce(op);
      }
    }
    composeTransposes();
    getOperation().walk([&](TransposeOp t) {
      if (!keepsOrder(t.getOperand().getType().getShape(), t.getPermutation())) return;
      OpBuilder b(t);
      t.getResult().replaceAllUsesWith(
          ReshapeOp::create(b, t.getLoc(), t.getType(), t.getOperand()).getResult());
      t->erase();
    });
  }

  /// Composes and cancels the transposes that met (TransposeOp's folder),
  /// then drops dead ones.
  void composeTransposes() {
    SmallVector<TransposeOp> transposes;
    getOperation().walk([&](TransposeOp t) { transposes.push_back(t); });
    for (TransposeOp t : transposes) {
      SmallVector<OpFoldResult> folded;
      if (succeeded(t->fold(folded)) && folded.size() == 1)
        if (auto v = dyn_cast<Value>(folded[0]); v && v != t.getResult())
          t.getResult().replaceAllUsesWith(v);
    }
    for (TransposeOp t : llvm::reverse(transposes))
      if (t->use_empty()) t->erase();
  }

  /// Whether permuting `shape` by `perm` keeps the order of its non-unit
  /// dimensions: the elements stay where they are (a reshape).
  static bool keepsOrder(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
    int64_t last = -1;
    for (int64_t p : perm) {
      if (shape[p] == 1) continue;
      if (p < last) return false;
      last = p;
    }
    return true;
  }

  /// The shape of `t` (of a rank up to perm's, broadcast against the
  /// result) in the frame inside transposes by `perm`: padded and permuted,
  /// when that moves only unit dimensions (a per-channel scale), so a reshape
  /// gives it; nothing otherwise.
  static std::optional<SmallVector<int64_t>> throughPermutation(RankedTensorType t,
                                                                ArrayRef<int64_t> perm) {
    int64_t rank = perm.size();
    if (t.getRank() > rank) return std::nullopt;
    SmallVector<int64_t> padded(rank - t.getRank(), 1);
    llvm::append_range(padded, t.getShape());
    // outer[i] = inner[perm[i]]
    SmallVector<int64_t> inner(rank, 1), inverse(rank);
    for (int64_t i = 0; i < rank; ++i) {
      inner[perm[i]] = padded[i];
      inverse[perm[i]] = i;
    }
    if (!keepsOrder(padded, inverse)) return std::nullopt;
    return inner;
  }

  /// concat(transpose(a, p), transpose(b, p)) on axis k ->
  /// transpose(concat(a, b) on axis p[k], p).
  bool sinkThroughConcat(ConcatOp concat) {
    std::optional<ArrayRef<int64_t>> perm;
    SmallVector<Value> inputs;
    for (Value v : concat.getInputs()) {
      auto tr = v.getDefiningOp<TransposeOp>();
      if (!tr || (perm && *perm != tr.getPermutation())) return false;
      perm = tr.getPermutation();
      inputs.push_back(tr.getOperand());
    }
    if (!perm) return false;
    OpBuilder b(concat);
    int64_t axis = (*perm)[concat.getAxis()];
    auto moved = ConcatOp::create(b, concat.getLoc(), inputs, b.getI64IntegerAttr(axis));
    concat.getResult().replaceAllUsesWith(transpose(b, concat.getLoc(), moved, *perm));
    concat.erase();
    return true;
  }

  /// Groups of consecutive `fine` dimensions whose sizes multiply to each
  /// `coarse` dimension (a reshape that only splits dimensions, read from
  /// the fine side, or only merges them); nothing when the reshape mixes.
  static std::optional<SmallVector<SmallVector<int64_t>>> groupDims(ArrayRef<int64_t> coarse,
                                                                   ArrayRef<int64_t> fine) {
    SmallVector<SmallVector<int64_t>> groups;
    size_t j = 0;
    for (int64_t size : coarse) {
      SmallVector<int64_t> group;
      int64_t product = 1;
      while (j < fine.size() && (group.empty() || product < size)) {
        product *= fine[j];
        group.push_back(j++);
      }
      if (product != size) return std::nullopt;
      groups.push_back(std::move(group));
    }
    // Trailing unit dimensions join the last group.
    for (; j < fine.size(); ++j) {
      if (fine[j] != 1 || groups.empty()) return std::nullopt;
      groups.back().push_back(j);
    }
    return groups;
  }

  /// reshape(transpose(x, p)) -> transpose(reshape(x), p') when the reshape
  /// splits or merges dimensions that stay whole inside the transpose.
  /// Only transposes back to channels-first move (the ones the next
  /// convolution cancels), and a merge only when what comes out is such a
  /// transpose again: ShuffleNet's channel shuffle (split C into [g, C/g],
  /// swap, merge) then shuffles the channels-last tensor's last dimension
  /// instead of converting the whole tensor to channels-first and back.
  /// Merged dimensions that a transpose left out of order inside are put
  /// in order by a transpose inside (the shuffle itself).
  bool sinkThroughReshape(ReshapeOp reshape) {
    auto tr = reshape.getOperand().getDefiningOp<TransposeOp>();
    if (!tr) return false;
    ArrayRef<int64_t> perm = tr.getPermutation();
    auto inType = tr.getOperand().getType();
    ArrayRef<int64_t> inner = inType.getShape();
    ArrayRef<int64_t> outer = reshape.getOperand().getType().getShape();
    ArrayRef<int64_t> target = reshape.getType().getShape();
    int64_t m = outer.size(), n = target.size();
    if (m == n || m < 3 || n < 3) return false;
    SmallVector<int64_t> innerShape, newPerm, innerPerm;
    if (n > m) {
      // Split: outer dimension i (inner p[i]) becomes the group's dims.
      if (perm != ArrayRef<int64_t>(toFirst(m))) return false;
      auto groups = groupDims(outer, target);
      if (!groups) return false;
      SmallVector<int64_t> inverse(m), offset(m);
      for (int64_t i = 0; i < m; ++i) inverse[perm[i]] = i;
      for (int64_t j = 0, at = 0; j < m; ++j) {
        offset[j] = at;
        for (int64_t k : (*groups)[inverse[j]]) innerShape.push_back(target[k]);
        at += (*groups)[inverse[j]].size();
      }
      for (int64_t i = 0; i < m; ++i)
        for (size_t t = 0; t < (*groups)[i].size(); ++t) newPerm.push_back(offset[perm[i]] + t);
    } else {
      // Merge: target dimension k is the outer dims of its group, which
      // must cover a contiguous range of inner dimensions.
      auto groups = groupDims(target, outer);
      if (!groups) return false;
      SmallVector<std::pair<int64_t, int64_t>> byStart; // (first inner dim, target dim)
      for (auto [k, group] : llvm::enumerate(*groups)) {
        int64_t lo = m, hi = -1;
        for (int64_t i : group) {
          lo = std::min(lo, perm[i]);
          hi = std::max(hi, perm[i]);
        }
        if (hi - lo + 1 != static_cast<int64_t>(group.size())) return false;
        byStart.push_back({lo, static_cast<int64_t>(k)});
      }
      llvm::sort(byStart);
      newPerm.assign(n, 0);
      for (auto [pos, entry] : llvm::enumerate(byStart)) {
        int64_t size = 1;
        for (int64_t i : (*groups)[entry.second]) {
          innerPerm.push_back(perm[i]);
          size *= outer[i];
        }
        innerShape.push_back(size);
        newPerm[entry.second] = pos;
      }
      if (newPerm != toFirst(n)) return false;
      // Putting them in order is a transpose of its own: worth it only
      // when the one left outside meets a convolution's and cancels.
      if (!llvm::equal(innerPerm, llvm::seq<int64_t>(0, m)) &&
          !reachesChannelsLast(reshape.getResult(), 4))
        return false;
    }
    OpBuilder b(reshape);
    Value x = tr.getOperand();
    if (!innerPerm.empty() && !llvm::equal(innerPerm, llvm::seq<int64_t>(0, m)))
      x = transpose(b, reshape.getLoc(), x, innerPerm);
    Value moved = ReshapeOp::create(
        b, reshape.getLoc(), RankedTensorType::get(innerShape, inType.getElementType()), x);
    reshape.getResult().replaceAllUsesWith(transpose(b, reshape.getLoc(), moved, newPerm));
    reshape.erase();
    return true;
  }

  /// Whether `v`, through at most `depth` ops a transpose sinks through
  /// (splits, slices, concatenations, elementwise ops), reaches a
  /// transpose to channels-last (a convolution's input).
  static bool reachesChannelsLast(Value v, int depth) {
    for (Operation *user : v.getUsers()) {
      if (auto tr = dyn_cast<TransposeOp>(user))
        if (tr.getPermutation() == ArrayRef<int64_t>(toLast(tr.getType().getRank()))) return true;
      if (depth > 0 && (isa<SplitOp, SliceOp, ConcatOp>(user) ||
                        user->hasTrait<OpTrait::ds::Elementwise>()))
        for (Value r : user->getResults())
          if (reachesChannelsLast(r, depth - 1)) return true;
    }
    return false;
  }

  /// `values` (one per dimension of a transpose's result) in the order of
  /// its operand's dimensions: inner[perm[i]] = values[i].
  static SmallVector<int64_t> inside(ArrayRef<int64_t> values, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> inner(values.size());
    for (size_t i = 0; i < values.size(); ++i) inner[perm[i]] = values[i];
    return inner;
  }

  /// The transpose back to channels-first that `v` is, or null.
  static TransposeOp toFirstOf(Value v) {
    auto tr = v.getDefiningOp<TransposeOp>();
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    return tr && tr.getPermutation() == ArrayRef<int64_t>(toFirst(rank)) ? tr : TransposeOp();
  }

  /// split(transpose(x, to-first)) on axis k -> transpose(split(x) on axis
  /// p[k]) per piece: ShuffleNet splits the shuffled channels between a
  /// convolution and a concatenation that both stay channels-last.
  bool sinkThroughSplit(SplitOp split) {
    TransposeOp tr = toFirstOf(split.getOperand());
    if (!tr) return false;
    ArrayRef<int64_t> perm = tr.getPermutation();
    int64_t axis = perm[split.getAxis()];
    SmallVector<Type> types;
    for (Value r : split.getResults()) {
      auto t = cast<RankedTensorType>(r.getType());
      types.push_back(RankedTensorType::get(inside(t.getShape(), perm), t.getElementType()));
    }
    OpBuilder b(split);
    auto moved = SplitOp::create(b, split.getLoc(), types, tr.getOperand(),
                                 b.getI64IntegerAttr(axis));
    for (auto [old, piece] : llvm::zip(split.getResults(), moved.getResults()))
      old.replaceAllUsesWith(transpose(b, split.getLoc(), piece, perm));
    split.erase();
    return true;
  }

  /// slice(transpose(x, to-first)) -> transpose(slice(x)), the starts and
  /// steps permuted: torch.chunk exports as slices.
  bool sinkThroughSlice(SliceOp slice) {
    TransposeOp tr = toFirstOf(slice.getOperand());
    if (!tr) return false;
    ArrayRef<int64_t> perm = tr.getPermutation();
    SmallVector<int64_t> starts = inside(slice.getStarts(), perm),
                         steps = inside(slice.getSteps(), perm),
                         shape = inside(slice.getType().getShape(), perm);
    OpBuilder b(slice);
    auto moved = SliceOp::create(b, slice.getLoc(),
                                 RankedTensorType::get(shape, slice.getType().getElementType()),
                                 tr.getOperand(), b.getDenseI64ArrayAttr(starts),
                                 b.getDenseI64ArrayAttr(steps));
    slice.getResult().replaceAllUsesWith(transpose(b, slice.getLoc(), moved, perm));
    slice.erase();
    return true;
  }

  /// reduce(transpose(x, p)) over axes A, dimensions kept ->
  /// transpose(reduce(x) over p[A], p): a global mean of channels-last
  /// activations reduces their rows.
  bool sinkThroughReduce(Operation *op) {
    Value in = op->getOperand(0);
    auto tr = in.getDefiningOp<TransposeOp>();
    auto keep = op->getAttrOfType<BoolAttr>("keepdims");
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    if (!tr || !axes || (keep && !keep.getValue())) return false;
    ArrayRef<int64_t> perm = tr.getPermutation();
    SmallVector<int64_t> innerAxes;
    for (int64_t a : axes.asArrayRef()) innerAxes.push_back(perm[a]);
    llvm::sort(innerAxes);
    auto innerIn = tr.getOperand().getType();
    SmallVector<int64_t> shape(innerIn.getShape());
    for (int64_t a : innerAxes) shape[a] = 1;
    OpBuilder b(op);
    Operation *moved = b.clone(*op);
    moved->setOperand(0, tr.getOperand());
    moved->setAttr("axes", b.getDenseI64ArrayAttr(innerAxes));
    moved->getResult(0).setType(RankedTensorType::get(shape, innerIn.getElementType()));
    op->getResult(0).replaceAllUsesWith(transpose(b, op->getLoc(), moved->getResult(0), perm));
    op->erase();
    return true;
  }

  /// A ds.conv or ds.quantized_conv (input first, addend last).
  void toChannelsLast(Operation *conv) {
    OpBuilder b(conv);
    Value input = conv->getOperand(0);
    Value convAddend = isa<ConvOp>(conv) ? cast<ConvOp>(conv).getAddend()
                                         : cast<QuantizedConvOp>(conv).getAddend();
    int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
    Value x = transpose(b, conv->getLoc(), input, toLast(rank));
    // A residual folded in already is read in the result's layout (its
    // transpose made before the convolution that reads it).
    Value addend;
    if (convAddend) addend = transpose(b, conv->getLoc(), convAddend, toLast(rank));
    auto resultType = cast<RankedTensorType>(conv->getResult(0).getType());
    SmallVector<int64_t> shape;
    for (int64_t p : toLast(rank)) shape.push_back(resultType.getDimSize(p));
    Operation *cl = b.clone(*conv);
    cl->setOperand(0, x);
    if (addend) cl->setOperand(cl->getNumOperands() - 1, addend);
    cl->getResult(0).setType(RankedTensorType::get(shape, resultType.getElementType()));
    cl->setAttr("channels_last", b.getUnitAttr());
    Value back = transpose(b, conv->getLoc(), cl->getResult(0), toFirst(rank));
    conv->getResult(0).replaceAllUsesWith(back);
    conv->erase();
    ++numConvs;
  }

  /// pool(transpose(x, to-first)) -> transpose(pool{channels_last}(x), to-first):
  /// a pooling between channels-last convolutions (ResNet's stem) pools
  /// channels-last instead of breaking the chain.
  bool sinkThroughPool(PoolOp pool) {
    auto tr = pool.getInput().getDefiningOp<TransposeOp>();
    auto type = pool.getInput().getType();
    if (pool.getChannelsLast() || !tr || !type.getElementType().isF32() ||
        tr.getPermutation() != ArrayRef<int64_t>(toFirst(type.getRank())))
      return false;
    OpBuilder b(pool);
    Operation *moved = b.clone(*pool);
    moved->setOperand(0, tr.getOperand());
    SmallVector<int64_t> shape;
    for (int64_t p : toLast(type.getRank())) shape.push_back(pool.getType().getDimSize(p));
    moved->getResult(0).setType(RankedTensorType::get(shape, pool.getType().getElementType()));
    cast<PoolOp>(moved).setChannelsLast(true);
    pool.getResult().replaceAllUsesWith(
        transpose(b, pool.getLoc(), moved->getResult(0), toFirst(type.getRank())));
    pool.erase();
    return true;
  }

  /// resample(transpose(x, to-first)) -> transpose(resample(x) on the same
  /// spatial axes, now channels-last, to-first): a U-Net's or FPN's 2x
  /// upsampling between channels-last convolutions blends pixel vectors
  /// instead of converting both sides. An upsampling moves only when a
  /// convolution's transpose waits after it (to cancel): else the transpose
  /// would go to the larger tensor.
  bool sinkThroughResample(ResampleOp r) {
    auto tr = r.getOperand().getDefiningOp<TransposeOp>();
    RankedTensorType in = r.getOperand().getType(), out = r.getType();
    int64_t rank = in.getRank();
    if (!tr || tr.getPermutation() != ArrayRef<int64_t>(toFirst(rank))) return false;
    if (out.getNumElements() > in.getNumElements() && !reachesChannelsLast(r.getResult(), 4))
      return false;
    ArrayRef<int64_t> perm = tr.getPermutation();
    SmallVector<int64_t> axes;
    for (int64_t a : r.getAxes()) axes.push_back(perm[a]);
    if (axes.size() == 2 && axes[0] > axes[1]) return false; // tables in axis order
    OpBuilder b(r);
    SmallVector<int64_t> shape;
    for (int64_t p : toLast(rank)) shape.push_back(out.getDimSize(p));
    auto moved = ResampleOp::create(b, r.getLoc(), RankedTensorType::get(shape, out.getElementType()),
                                    tr.getOperand(), r.getIndex(), r.getWeight(),
                                    b.getDenseI64ArrayAttr(axes), r.getTapsAttr());
    r.getResult().replaceAllUsesWith(transpose(b, r.getLoc(), moved, toFirst(rank)));
    r.erase();
    return true;
  }

  /// op(transpose(a, p), transpose(b, p), scalar) -> transpose(op(a, b, scalar), p)
  /// when every operand that is not a scalar is a transpose by the same p of
  /// a value with op's (unbroadcast) shape, or a broadcast operand whose
  /// permutation moves only unit dimensions (reshaped).
  bool sinkThrough(Operation *op) {
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    std::optional<ArrayRef<int64_t>> perm;
    ArrayRef<int64_t> innerShape;
    SmallVector<Value> operands;
    SmallVector<unsigned> broadcast;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      auto t = cast<RankedTensorType>(v.getType());
      operands.push_back(v);
      if (t.getRank() == 0) continue;
      auto tr = v.getDefiningOp<TransposeOp>();
      if (!tr || t.getShape() != resultType.getShape()) {
        broadcast.push_back(i);
        continue;
      }
      if (perm && *perm != tr.getPermutation()) return false;
      perm = tr.getPermutation();
      innerShape = tr.getOperand().getType().getShape();
      operands.back() = tr.getOperand();
    }
    if (!perm) return false;
    SmallVector<SmallVector<int64_t>> innerShapes;
    for (unsigned &i : broadcast) {
      // A broadcast operand transposed the same way (a gate computed
      // channels-last) is read inside as it is.
      if (auto tr = operands[i].getDefiningOp<TransposeOp>();
          tr && tr.getPermutation() == *perm &&
          tr.getOperand().getType().getRank() == resultType.getRank()) {
        operands[i] = tr.getOperand();
        i = ~0u;
        continue;
      }
      auto t = cast<RankedTensorType>(operands[i].getType());
      if (t.getNumElements() == resultType.getNumElements())
        return false; // a full operand in the outer layout: not a broadcast
      auto shape = throughPermutation(t, *perm);
      if (!shape) return false;
      innerShapes.push_back(*shape);
    }
    OpBuilder b(op);
    llvm::erase(broadcast, ~0u);
    for (auto [i, shape] : llvm::zip(broadcast, innerShapes))
      operands[i] = ReshapeOp::create(
          b, op->getLoc(),
          RankedTensorType::get(shape, getElementTypeOrSelf(operands[i].getType())), operands[i]);
    Operation *moved = b.clone(*op);
    moved->setOperands(operands);
    moved->getResult(0).setType(RankedTensorType::get(innerShape, resultType.getElementType()));
    op->getResult(0).replaceAllUsesWith(transpose(b, op->getLoc(), moved->getResult(0), *perm));
    op->erase();
    return true;
  }
};

} // namespace
