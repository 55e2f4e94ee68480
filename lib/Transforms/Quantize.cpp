//===- Quantize.cpp - int8 / int4 weights for products with constant weights ===//
//
// An inference plan's projections read constant weights: quantized once
// here, they take a quarter (int8) or an eighth (int4) of their f32 bytes,
// which is what a memory-bound decode step reads, and with int8 activations
// the product runs on the CPU's int8 dot products. Scales are symmetric,
// per output channel or per group of K values (ZeroQuant's group-wise
// quantization); the weight is stored [N, K], each channel's values
// contiguous, the layout the kernels stream.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_QUANTIZEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// What a product to quantize is made of.
struct Candidate {
  Operation *op;
  Value lhs, weight; // weight: the constant right operand
  bool transposed;   // stored [N, K] (transpose_rhs)
  Value bias, addend;
  double alpha = 1.0;
  Activation activation = Activation::None;
  Combine combine = Combine::Add;
};

std::string nameOf(Operation *op, Value weight) {
  std::string s;
  if (auto sh = weight.getDefiningOp<ShardSliceOp>()) weight = sh.getOperand();
  if (auto p = weight.getDefiningOp<ParameterOp>()) s = p.getSymName().str();
  llvm::raw_string_ostream os(s);
  os << " ";
  op->getLoc().print(os);
  return s;
}

/// The product, when it is one ds-quantize can take.
std::optional<Candidate> candidate(Operation *op) {
  auto constant = [](Value v) {
    Operation *d = v.getDefiningOp();
    // A tensor-parallel rank's block of a weight (ds-global-to-local):
    // quantized whole, its block taken of the quantized weight.
    if (auto s = dyn_cast_or_null<ShardSliceOp>(d); s && isWeightShard(s) && s.getOuter() == 1)
      return true;
    return d && isa<ConstantOp, ParameterOp>(d);
  };
  Candidate c{op};
  if (auto m = dyn_cast<MatmulOp>(op)) {
    c.lhs = m.getLhs(), c.weight = m.getRhs(), c.transposed = m.getTransposeRhs();
    if (m.getTransposeLhs()) return std::nullopt;
  } else if (auto f = dyn_cast<FusedMatmulOp>(op)) {
    if (f.getTransposeLhs() || f.getLhsShape() || f.getRhsShape() || f.getResultShape() ||
        f.getSoftmax() || f.getMask() || f.getPreActivation() ||
        (f.getCombine() != Combine::Add && f.getCombine() != Combine::Mul))
      return std::nullopt;
    c.lhs = f.getLhs(), c.weight = f.getRhs(), c.transposed = f.getTransposeRhs();
    c.bias = f.getBias(), c.addend = f.getAddend();
    c.alpha = f.getAlpha().convertToDouble();
    c.activation = f.getActivation();
    c.combine = f.getCombine();
  } else {
    return std::nullopt;
  }
  if (!constant(c.weight) || tensorType(c.weight).getRank() != 2 ||
      !tensorType(c.weight).getElementType().isF32() ||
      !tensorType(c.lhs).getElementType().isF32() || tensorType(c.lhs).getRank() < 1)
    return std::nullopt;
  return c;
}

struct QuantizePass : public mlir::ds::impl::QuantizePassBase<QuantizePass> {
  using QuantizePassBase::QuantizePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int bits = 8;
    ActivationQuant act = ActivationQuant::None;
    if (scheme == "int8-dynamic") act = ActivationQuant::DynamicPerRow;
    else if (scheme == "int4-weight") bits = 4;
    else if (scheme == "int4-dynamic") bits = 4, act = ActivationQuant::DynamicPerRow;
    else if (scheme != "int8-weight") {
      module.emitError("ds-quantize: scheme must be int8-dynamic, int8-weight, int4-weight or "
                       "int4-dynamic, got '")
          << scheme << "'";
      return signalPassFailure();
    }
    int64_t group = groupSize >= 0 ? groupSize : bits == 4 ? 128 : 0;
    if (act != ActivationQuant::None && bits == 8 && group != 0) {
      module.emitError("ds-quantize: int8-dynamic quantizes weights per output channel; "
                       "group-size applies to the weight-only schemes");
      return signalPassFailure();
    }
    for (auto f : module.getOps<func::FuncOp>()) {
      // The ops first: a product's operands are read when it is rewritten
      // (an earlier rewrite may have replaced one).
      SmallVector<Operation *> found;
      f.walk([&](Operation *op) {
        if (candidate(op)) found.push_back(op);
      });
      for (auto [i, op] : llvm::enumerate(found)) {
        if ((keepFirst && i == 0) || (keepLast && i + 1 == found.size())) continue;
        std::optional<Candidate> cand = candidate(op);
        if (!cand) continue;
        const Candidate &c = *cand;
        std::string name = nameOf(c.op, c.weight);
        if (llvm::any_of(skip, [&](const std::string &s) { return name.find(s) != std::string::npos; }))
          continue;
        if (failed(quantize(c, bits, group, act))) return signalPassFailure();
      }
    }
  }

  /// Replaces the product by a ds.quantized_matmul with the weight
  /// quantized; products whose K the group size does not divide stay.
  LogicalResult quantize(const Candidate &c, int bits, int64_t group, ActivationQuant act) {
    auto shard = c.weight.getDefiningOp<ShardSliceOp>();
    Value whole = shard ? shard.getOperand() : c.weight;
    RankedTensorType wt = tensorType(whole);
    const int64_t n = c.transposed ? wt.getDimSize(0) : wt.getDimSize(1);
    const int64_t k = c.transposed ? wt.getDimSize(1) : wt.getDimSize(0);
    int64_t g = group ? group : k;
    if (k % g || (bits == 4 && (k % 2 || g % 2))) return success(); // left as it is
    // A rank's block: of output channels (column-parallel), or of the
    // reduced K (row-parallel: whole groups and whole int4 bytes only).
    int64_t ranks = 1;
    bool alongK = false;
    if (shard) {
      MeshAttr mesh = MeshAttr::lookup(shard);
      if (!mesh) return shard.emitError("ds-quantize: a weight shard needs a ds.mesh");
      for (Attribute a : shard.getAxes()) ranks *= *mesh.getAxisSize(cast<StringAttr>(a).getValue());
      alongK = (shard.getDim() == 1) == c.transposed;
      const int64_t local = (alongK ? k : n) / ranks;
      if ((alongK ? k : n) % ranks) return success();
      if (alongK && ((group && local % g) || (bits == 4 && local % 2))) return success();
    }
    Operation *wd = whole.getDefiningOp();
    Attribute value = isa<ConstantOp>(wd) ? cast<ConstantOp>(wd).getValue()
                                          : cast<ParameterOp>(wd).getValue();
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(value, c.op->getLoc());
    if (failed(bytes)) return failure();
    const float *w = reinterpret_cast<const float *>(bytes->data());
    auto at = [&](int64_t row, int64_t col) { // W as [N, K]
      return c.transposed ? w[row * k + col] : w[col * n + row];
    };
    const int64_t groups = k / g;
    const float qmax = bits == 8 ? 127.0f : 7.0f;
    std::vector<float> scales(static_cast<size_t>(n * groups));
    std::vector<int8_t> q8;
    std::vector<uint8_t> q4;
    if (bits == 8) q8.resize(static_cast<size_t>(n * k));
    else q4.assign(static_cast<size_t>(n * k / 2), 0);
    for (int64_t row = 0; row < n; ++row)
      for (int64_t gi = 0; gi < groups; ++gi) {
        float amax = 0;
        for (int64_t col = gi * g; col < (gi + 1) * g; ++col) {
          const float v = at(row, col);
          if (!std::isfinite(v))
            return c.op->emitError("ds-quantize: the weight ")
                   << nameOf(c.op, c.weight) << " holds " << v << " at [" << row << ", " << col
                   << "] (as [N, K]); a weight that is not finite cannot be quantized";
          amax = std::max(amax, std::fabs(v));
        }
        const float scale = amax > 0 ? amax / qmax : 1.0f;
        scales[row * groups + gi] = scale;
        for (int64_t col = gi * g; col < (gi + 1) * g; ++col) {
          float r = std::nearbyint(at(row, col) / scale);
          r = std::min(std::max(r, bits == 8 ? -127.0f : -8.0f), qmax);
          if (bits == 8) {
            q8[row * k + col] = static_cast<int8_t>(r);
          } else {
            const uint8_t nib = static_cast<uint8_t>(static_cast<int>(r) + 8);
            q4[(row * k + col) / 2] |= col % 2 ? nib << 4 : nib;
          }
        }
      }
    OpBuilder b(c.op);
    Location loc = c.op->getLoc();
    MLIRContext *ctx = b.getContext();
    Value weight;
    if (bits == 8) {
      auto t = RankedTensorType::get({n, k}, IntegerType::get(ctx, 8));
      weight = ConstantOp::create(b, loc, DenseElementsAttr::get(t, ArrayRef<int8_t>(q8)));
    } else {
      auto t = RankedTensorType::get({n, k / 2}, IntegerType::get(ctx, 8, IntegerType::Unsigned));
      weight = ConstantOp::create(
          b, loc, DenseElementsAttr::getFromRawBuffer(t, ArrayRef<char>(
                                                             reinterpret_cast<const char *>(q4.data()),
                                                             q4.size())));
    }
    auto st = group ? RankedTensorType::get({n, groups}, b.getF32Type())
                    : RankedTensorType::get({n}, b.getF32Type());
    Value scale = ConstantOp::create(b, loc, DenseElementsAttr::get(st, ArrayRef<float>(scales)));
    if (shard) {
      // This rank's blocks: [N, K] and [N, groups] cut as the weight was
      // (a per-channel scale over the whole K serves every K block).
      auto cut = [&](Value v, int64_t dim) {
        auto t = tensorType(v);
        SmallVector<int64_t> shape(t.getShape());
        shape[dim] /= ranks;
        return ShardSliceOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), v,
                                    shard.getAxes(), b.getI64IntegerAttr(dim),
                                    b.getI64IntegerAttr(1))
            .getResult();
      };
      weight = cut(weight, alongK ? 1 : 0);
      if (!alongK || group) scale = cut(scale, alongK ? 1 : 0);
    }
    Type result = c.op->getResult(0).getType();
    auto qm = QuantizedMatmulOp::create(
        b, loc, result, c.lhs, weight, scale, Value(), c.bias, c.addend, b.getI64IntegerAttr(bits),
        b.getI64IntegerAttr(group), ActivationQuantAttr::get(ctx, act), b.getF64FloatAttr(c.alpha),
        ActivationAttr::get(ctx, c.activation), CombineAttr::get(ctx, c.combine), FloatAttr(),
        IntegerAttr(), FloatAttr(), IntegerAttr());
    c.op->getResult(0).replaceAllUsesWith(qm.getResult());
    c.op->erase();
    // The f32 weight goes when nothing else reads it (or it would be in
    // the plan beside its quantized copy).
    if (Operation *def = c.weight.getDefiningOp(); def && def->use_empty()) def->erase();
    if (shard && wd->use_empty()) wd->erase();
    ++numQuantized;
    bytesSaved += n * k * 4 - (bits == 8 ? n * k : n * k / 2) - n * groups * 4;
    return success();
  }
};

} // namespace
