//===- ElementwiseOps.cpp - facts of the elementwise ops ------------------===//
//
// Unary math, binary arithmetic with numpy broadcasting, comparisons,
// logic, select, casts and GELU: their gradients, their shared sharding
// rule, and the attributes of their kernel steps.
//
// Gradient rules reuse forward values (results and operands), so the
// forward activations the backward needs stay live; ds-plan-memory
// accounts for that. Broadcasting ops sum their operand gradients back to
// the operand's shape (`unbroadcast`).
//
//===----------------------------------------------------------------------===//
#include "llvm/Support/Format.h"
#include "dialects/ds/ops/OpFacts.h"
#include "dialects/ds/ops/Verifiers.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

//===----------------------------------------------------------------------===//
// Sharding: the rule every elementwise op shares
//===----------------------------------------------------------------------===//

/// Result dimension i takes the sharding of the first operand dimension
/// aligned with it (numpy broadcasting) that has the same extent and is
/// split on axes not used yet; operands are asked for the matching splits.
ShardingDecision mlir::ds::facts::elementwiseRule(Operation *op, ArrayRef<Sharding> in) {
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  int64_t r = out.size();
  Sharding res = Sharding::replicated(r);
  llvm::StringSet<> used;
  for (int64_t i = 0; i < r; ++i)
    for (auto [k, v] : llvm::enumerate(op->getOperands())) {
      ArrayRef<int64_t> s = shapeOf(v);
      int64_t j = i - (r - static_cast<int64_t>(s.size()));
      if (j < 0 || s[j] != out[i]) continue;
      const DimSharding &ds = in[k].dims[j];
      if (!ds.isSplit() || llvm::any_of(ds.axes, [&](StringRef a) { return used.contains(a); }))
        continue;
      res.dims[i] = ds;
      for (StringRef a : ds.axes) used.insert(a);
      break;
    }
  ShardingDecision d;
  for (Value v : op->getOperands()) {
    ArrayRef<int64_t> s = shapeOf(v);
    Sharding req = Sharding::replicated(s.size());
    for (int64_t j = 0; j < static_cast<int64_t>(s.size()); ++j) {
      int64_t i = j + r - static_cast<int64_t>(s.size());
      if (i >= 0 && s[j] == out[i]) req.dims[j] = res.dims[i];
    }
    d.operands.push_back(req);
  }
  for (unsigned i = 0; i < op->getNumResults(); ++i) d.results.push_back(res);
  return d;
}

ShardingDecision mlir::ds::defaultShardingRule(Operation *op, ArrayRef<Sharding> in) {
  // Partial sums add (or subtract) as partial sums: the backward's adjoint
  // accumulation of several row-parallel products costs one all_reduce,
  // not one per product. Only without broadcasting, and on the same axes.
  if (isa<AddOp, SubOp>(op) && in.size() == 2 && in[0].isPartial() && in[0] == in[1] &&
      shapeOf(op->getOperand(0)) == shapeOf(op->getResult(0)) &&
      shapeOf(op->getOperand(1)) == shapeOf(op->getResult(0)))
    return {{in[0], in[1]}, {in[0]}};
  if (op->hasTrait<OpTrait::ds::Elementwise>()) return elementwiseRule(op, in);
  return {};
}

//===----------------------------------------------------------------------===//
// Gradients: binary
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.unbroadcast(dres[0], typeOf(getLhs()));
  d[1] = gb.unbroadcast(dres[0], typeOf(getRhs()));
  return success();
}

LogicalResult SubOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.unbroadcast(dres[0], typeOf(getLhs()));
  d[1] = gb.unbroadcast(gb.neg(dres[0]), typeOf(getRhs()));
  return success();
}

LogicalResult MulOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.unbroadcast(gb.mul(dres[0], getRhs()), typeOf(getLhs()));
  d[1] = gb.unbroadcast(gb.mul(dres[0], getLhs()), typeOf(getRhs()));
  return success();
}

LogicalResult DivOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  Value g = dres[0];
  d[0] = gb.unbroadcast(gb.div(g, getRhs()), typeOf(getLhs()));
  // d/db (a/b) = -(a/b)/b
  d[1] = gb.unbroadcast(gb.neg(gb.div(gb.mul(g, getResult()), getRhs())), typeOf(getRhs()));
  return success();
}

LogicalResult PowOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  // d/da a^e = e a^(e-1); d/de a^e = a^e ln(a) (a > 0).
  Value g = dres[0];
  Type elem = typeOf(getLhs()).getElementType();
  Value em1 = gb.sub(getRhs(), gb.scalar(elem, 1.0));
  Value da = gb.mul(gb.mul(g, getRhs()), PowOp::create(gb.b(), gb.loc(), getLhs(), em1));
  // x^0 is the constant 1: its gradient is 0 (PyTorch's), not 0 * 0^-1 =
  // 0 * inf = NaN at x = 0.
  if (std::optional<double> e = knownFloatSplat(getRhs()); !e || *e == 0.0) {
    Value zeroExp = EqualOp::create(gb.b(), gb.loc(), getRhs(), gb.scalar(elem, 0.0));
    da = gb.where(zeroExp, gb.scalar(elem, 0.0), da);
  }
  d[0] = gb.unbroadcast(da, typeOf(getLhs()));
  // A constant exponent (PyTorch 2 writes x**3's 3 as an initializer) has
  // no gradient; building a^e ln(a) for it anyway would be NaN wherever a
  // is negative, though a^e itself is finite there for integer e.
  if (Operation *def = getRhs().getDefiningOp(); def && isa<ConstantOp, ParameterOp>(def))
    return success();
  // At a = 0 with e >= 0, a^e is 0 (or 1) whatever e is: 0, as PyTorch's
  // pow_backward_exponent, not 0 * ln(0) = NaN.
  Value lna = LogOp::create(gb.b(), gb.loc(), getLhs().getType(), getLhs());
  Value zero = gb.scalar(elem, 0.0);
  Value flat = AndOp::create(gb.b(), gb.loc(), EqualOp::create(gb.b(), gb.loc(), getLhs(), zero),
                             GreaterEqualOp::create(gb.b(), gb.loc(), getRhs(), zero));
  Value de = gb.where(flat, zero, gb.mul(gb.mul(g, getResult()), lna));
  d[1] = gb.unbroadcast(de, typeOf(getRhs()));
  return success();
}

/// Min and max: the selected operand gets the gradient; ties go to the
/// left, or with `ds.split_ties` (ONNX's Max and Min) half to each, as
/// torch.maximum and torch.minimum.
static void selectGradients(GradientBuilder &gb, Operation *op, Value g, Value pick, Value lhs,
                            Value rhs, MutableArrayRef<Value> d) {
  Value zero = gb.scalar(typeOf(g).getElementType(), 0.0);
  Value toLhs = gb.where(pick, g, zero), toRhs = gb.where(pick, zero, g);
  if (op->hasAttr("ds.split_ties")) {
    Value tie = EqualOp::create(gb.b(), gb.loc(), lhs, rhs);
    Value half = gb.mulScalar(g, 0.5);
    toLhs = gb.where(tie, half, toLhs);
    toRhs = gb.where(tie, half, toRhs);
  }
  d[0] = gb.unbroadcast(toLhs, typeOf(lhs));
  d[1] = gb.unbroadcast(toRhs, typeOf(rhs));
}

LogicalResult MinOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  Value pick = LessEqualOp::create(gb.b(), gb.loc(), getLhs(), getRhs());
  selectGradients(gb, *this, dres[0], pick, getLhs(), getRhs(), d);
  return success();
}

LogicalResult MaxOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  Value pick = GreaterEqualOp::create(gb.b(), gb.loc(), getLhs(), getRhs());
  selectGradients(gb, *this, dres[0], pick, getLhs(), getRhs(), d);
  return success();
}

LogicalResult ModOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  // Float mod is fmod: a - trunc(a / b) * b. Integer mod has no gradient.
  if (!isa<FloatType>(typeOf(getLhs()).getElementType())) return success();
  Value g = dres[0];
  Value q = gb.div(getLhs(), getRhs());
  Type t = q.getType();
  Value trunc = gb.mul(SignOp::create(gb.b(), gb.loc(), t, q),
                       FloorOp::create(gb.b(), gb.loc(), t, AbsOp::create(gb.b(), gb.loc(), t, q)));
  d[0] = gb.unbroadcast(g, typeOf(getLhs()));
  d[1] = gb.unbroadcast(gb.neg(gb.mul(g, trunc)), typeOf(getRhs()));
  return success();
}

LogicalResult WhereOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  Value g = dres[0];
  Value zero = gb.scalar(typeOf(g).getElementType(), 0.0);
  d[1] = gb.unbroadcast(gb.where(getCondition(), g, zero), typeOf(getOnTrue()));
  d[2] = gb.unbroadcast(gb.where(getCondition(), zero, g), typeOf(getOnFalse()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients: unary
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.neg(dres[0]);
  return success();
}

LogicalResult AbsOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], SignOp::create(gb.b(), gb.loc(), getOperand().getType(), getOperand()));
  return success();
}

LogicalResult ReluOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  Type elem = typeOf(dres[0]).getElementType();
  Value pos = GreaterOp::create(gb.b(), gb.loc(), getOperand(), gb.scalar(elem, 0.0));
  d[0] = gb.where(pos, dres[0], gb.scalar(elem, 0.0));
  return success();
}

LogicalResult SqrtOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = gb.div(gb.mulScalar(dres[0], 0.5), getResult());
  return success();
}

LogicalResult ExpOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], getResult());
  return success();
}

LogicalResult LogOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.div(dres[0], getOperand());
  return success();
}

LogicalResult ReciprocalOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                           MutableArrayRef<Value> d) {
  d[0] = gb.neg(gb.mul(dres[0], gb.mul(getResult(), getResult())));
  return success();
}

LogicalResult TanhOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  Type elem = typeOf(dres[0]).getElementType();
  Value y2 = gb.mul(getResult(), getResult());
  d[0] = gb.mul(dres[0], gb.sub(gb.scalar(elem, 1.0), y2));
  return success();
}

LogicalResult SigmoidOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                        MutableArrayRef<Value> d) {
  Type elem = typeOf(dres[0]).getElementType();
  d[0] = gb.mul(dres[0], gb.mul(getResult(), gb.sub(gb.scalar(elem, 1.0), getResult())));
  return success();
}

LogicalResult ErfOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  // 2/sqrt(pi) exp(-x^2)
  Value x = getOperand();
  Value e = ExpOp::create(gb.b(), gb.loc(), x.getType(), gb.neg(gb.mul(x, x)));
  d[0] = gb.mul(dres[0], gb.mulScalar(e, 1.12837916709551257390));
  return success();
}

LogicalResult SinOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], CosOp::create(gb.b(), gb.loc(), getType(), getOperand()));
  return success();
}

LogicalResult CosOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) {
  d[0] = gb.neg(gb.mul(dres[0], SinOp::create(gb.b(), gb.loc(), getType(), getOperand())));
  return success();
}

LogicalResult TanOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                    MutableArrayRef<Value> d) { // 1 + tan^2
  Type elem = typeOf(dres[0]).getElementType();
  d[0] = gb.mul(dres[0], gb.add(gb.scalar(elem, 1.0), gb.mul(getResult(), getResult())));
  return success();
}

/// asin and acos: +-1 / sqrt(1 - x^2).
static Value arcSinCosGradient(GradientBuilder &gb, Value g, Value x) {
  Type elem = typeOf(g).getElementType();
  Value r = SqrtOp::create(gb.b(), gb.loc(), x.getType(),
                           gb.sub(gb.scalar(elem, 1.0), gb.mul(x, x)));
  return gb.div(g, r);
}

LogicalResult AsinOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = arcSinCosGradient(gb, dres[0], getOperand());
  return success();
}

LogicalResult AcosOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = gb.neg(arcSinCosGradient(gb, dres[0], getOperand()));
  return success();
}

LogicalResult AtanOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) { // 1 / (1 + x^2)
  Type elem = typeOf(dres[0]).getElementType();
  Value x = getOperand();
  d[0] = gb.div(dres[0], gb.add(gb.scalar(elem, 1.0), gb.mul(x, x)));
  return success();
}

LogicalResult SinhOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], CoshOp::create(gb.b(), gb.loc(), getType(), getOperand()));
  return success();
}

LogicalResult CoshOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], SinhOp::create(gb.b(), gb.loc(), getType(), getOperand()));
  return success();
}

/// asinh and acosh: 1 / sqrt(x^2 +- 1).
static Value arcHyperbolicGradient(GradientBuilder &gb, Value g, Value x, bool plus) {
  Type elem = typeOf(g).getElementType();
  Value one = gb.scalar(elem, 1.0);
  Value x2 = gb.mul(x, x);
  Value r = SqrtOp::create(gb.b(), gb.loc(), x.getType(), plus ? gb.add(x2, one) : gb.sub(x2, one));
  return gb.div(g, r);
}

LogicalResult AsinhOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  d[0] = arcHyperbolicGradient(gb, dres[0], getOperand(), /*plus=*/true);
  return success();
}

LogicalResult AcoshOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  d[0] = arcHyperbolicGradient(gb, dres[0], getOperand(), /*plus=*/false);
  return success();
}

LogicalResult AtanhOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) { // 1 / (1 - x^2)
  Type elem = typeOf(dres[0]).getElementType();
  Value x = getOperand();
  d[0] = gb.div(dres[0], gb.sub(gb.scalar(elem, 1.0), gb.mul(x, x)));
  return success();
}

LogicalResult SoftplusOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                         MutableArrayRef<Value> d) {
  d[0] = gb.mul(dres[0], SigmoidOp::create(gb.b(), gb.loc(), getType(), getOperand()));
  return success();
}

// Piecewise constant: zero gradient (no operand gradient at all).
LogicalResult FloorOp::buildGradients(GradientBuilder &, ArrayRef<Value>, MutableArrayRef<Value>) {
  return success();
}
LogicalResult CeilOp::buildGradients(GradientBuilder &, ArrayRef<Value>, MutableArrayRef<Value>) {
  return success();
}
LogicalResult RoundOp::buildGradients(GradientBuilder &, ArrayRef<Value>, MutableArrayRef<Value>) {
  return success();
}
LogicalResult SignOp::buildGradients(GradientBuilder &, ArrayRef<Value>, MutableArrayRef<Value>) {
  return success();
}

LogicalResult GeluOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  d[0] = GeluGradOp::create(gb.b(), gb.loc(), getType(), getOperand(), dres[0],
                            getApproximateAttr());
  return success();
}

LogicalResult CastOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  // Only a float operand carries a gradient back through the conversion.
  if (!isa<FloatType>(typeOf(getOperand()).getElementType())) return success();
  d[0] = CastOp::create(gb.b(), gb.loc(), getOperand().getType(), dres[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Kernel steps
//===----------------------------------------------------------------------===//

void CastOp::describeKernelStep(KernelStep &s) {
  if (std::optional<bool> saturate = getSaturate()) s.setInt("saturate", *saturate);
  if (std::optional<StringRef> mode = getRoundMode()) s.setString("round_mode", mode->str());
}

void GeluOp::describeKernelStep(KernelStep &s) {
  s.setString("approximate", stringifyGeluApproximation(getApproximate()));
}

/// The body as a register program: inputs are registers 0..n-1, body op k
/// writes register n+k; `ops` names each op's element function
/// (comma-separated), `args` lists their operand registers in order, and
/// `result` is the register the body yields. Casts are named by their
/// target (`cast_bool`, `cast_<type>`), GELU by its form (`gelu_tanh`).
void FakeQuantizeOp::describeKernelStep(KernelStep &s) {
  s.setFloat("scale", getScale().convertToDouble());
  s.setInt("zero_point", getZeroPoint());
}

void FusedElementwiseOp::describeKernelStep(KernelStep &s) {
  Block &body = getBody().front();
  llvm::DenseMap<Value, int64_t> reg;
  for (BlockArgument a : body.getArguments()) reg[a] = a.getArgNumber();
  std::string ops;
  SmallVector<int64_t> args;
  for (Operation &op : body.without_terminator()) {
    KernelStep inner;
    inner.kernel = op.getName().stripDialect().str();
    if (auto k = dyn_cast<KernelStepOpInterface>(op)) k.describeKernelStep(inner);
    std::string name = inner.kernel;
    if (auto gelu = dyn_cast<GeluOp>(op)) {
      if (gelu.getApproximate() == GeluApproximation::Tanh) name = "gelu_tanh";
    } else if (auto fq = dyn_cast<FakeQuantizeOp>(op)) {
      // Its parameters in the name (the program's ops take no attributes):
      // the scale as the f32 it computes with, exactly.
      llvm::raw_string_ostream(name)
          << ":" << llvm::format("%.9g", static_cast<float>(fq.getScale().convertToDouble()))
          << ":" << fq.getZeroPoint();
    } else if (isa<CastOp>(op)) {
      Type e = typeOf(op.getResult(0)).getElementType();
      name = "cast_bool";
      if (!e.isInteger(1)) {
        name = "cast_";
        llvm::raw_string_ostream(name) << e;
      }
    }
    if (!ops.empty()) ops += ",";
    ops += name;
    for (Value v : op.getOperands()) args.push_back(reg.lookup(v));
    reg[op.getResult(0)] = static_cast<int64_t>(reg.size());
  }
  s.setString("ops", ops);
  s.setInts("args", args);
  s.setInt("result", reg.lookup(body.getTerminator()->getOperand(0)));
}

//===----------------------------------------------------------------------===//
// Elementwise ops (moved from DSOps.cpp): type inference, verifiers, folders
//===----------------------------------------------------------------------===//

using namespace mlir::ds::verifiers;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

LogicalResult CastOp::verify() {
  if (std::optional<StringRef> mode = getRoundMode();
      mode && *mode != "up" && *mode != "down" && *mode != "nearest")
    return emitOpError("round_mode must be \"up\", \"down\" or \"nearest\", got \"")
           << *mode << "\"";
  return success();
}

static LogicalResult inferBinary(std::optional<Location> loc, ValueRange operands,
                                 bool boolResult,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = rankedType(operands[0]), rhs = rankedType(operands[1]);
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operands have different element types: ",
                             lhs.getElementType(), " and ", rhs.getElementType());
  auto shape = broadcastShapes({lhs.getShape(), rhs.getShape()});
  if (failed(shape))
    return emitOptionalError(loc, "operand shapes ", shapeStr(lhs.getShape()),
                             " and ", shapeStr(rhs.getShape()),
                             " do not broadcast");
  Type elem = boolResult ? IntegerType::get(lhs.getContext(), 1)
                         : lhs.getElementType();
  inferred.push_back(RankedTensorType::get(*shape, elem));
  return success();
}

#define DS_INFER_BINARY(OP, BOOL_RESULT)                                       \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBinary(loc, operands, BOOL_RESULT, inferred);                  \
  }
DS_INFER_BINARY(AddOp, false)
DS_INFER_BINARY(SubOp, false)
DS_INFER_BINARY(MulOp, false)
DS_INFER_BINARY(DivOp, false)
DS_INFER_BINARY(PowOp, false)
DS_INFER_BINARY(MinOp, false)
DS_INFER_BINARY(MaxOp, false)
DS_INFER_BINARY(ModOp, false)
DS_INFER_BINARY(EqualOp, true)
DS_INFER_BINARY(LessOp, true)
DS_INFER_BINARY(GreaterOp, true)
DS_INFER_BINARY(LessEqualOp, true)
DS_INFER_BINARY(GreaterEqualOp, true)
DS_INFER_BINARY(AndOp, true)
DS_INFER_BINARY(OrOp, true)
DS_INFER_BINARY(XorOp, true)
DS_INFER_BINARY(BitwiseAndOp, false)
DS_INFER_BINARY(BitwiseOrOp, false)
DS_INFER_BINARY(BitwiseXorOp, false)
DS_INFER_BINARY(ShiftLeftOp, false)
DS_INFER_BINARY(ShiftRightOp, false)
#undef DS_INFER_BINARY

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        ValueRange operands, DictionaryAttr,
                                        OpaqueProperties, RegionRange,
                                        SmallVectorImpl<Type> &inferred) {
  auto c = rankedType(operands[0]), t = rankedType(operands[1]),
       f = rankedType(operands[2]);
  if (t.getElementType() != f.getElementType())
    return emitOptionalError(loc, "branches have different element types: ",
                             t.getElementType(), " and ", f.getElementType());
  auto shape = broadcastShapes({c.getShape(), t.getShape(), f.getShape()});
  if (failed(shape))
    return emitOptionalError(loc, "operand shapes ", shapeStr(c.getShape()), ", ",
                             shapeStr(t.getShape()), " and ",
                             shapeStr(f.getShape()), " do not broadcast");
  inferred.push_back(RankedTensorType::get(*shape, t.getElementType()));
  return success();
}

namespace {
/// pow(x, n) with a constant integral exponent n in [1, 4] on floats is
/// x * ... * x: a few multiplies instead of one libm pow per element (GPT-2's
/// GELU writes x^3); within 2 ulp of pow. Only when the result has x's
/// type (the exponent does not broadcast x to a larger shape).
struct PowToMultiplies : OpRewritePattern<PowOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PowOp op, PatternRewriter &rewriter) const override {
    Value x = op.getLhs();
    if (op.getType() != x.getType() || !isa<FloatType>(op.getType().getElementType()))
      return failure();
    std::optional<double> exponent = knownFloatSplat(op.getRhs());
    if (!exponent) return failure();
    double n = *exponent;
    if (n != 1.0 && n != 2.0 && n != 3.0 && n != 4.0) return failure();
    Location loc = op.getLoc();
    Value y = x;
    if (n == 2.0 || n == 3.0) y = MulOp::create(rewriter, loc, x, x);
    if (n == 3.0) y = MulOp::create(rewriter, loc, y, x);
    if (n == 4.0) {
      Value x2 = MulOp::create(rewriter, loc, x, x);
      y = MulOp::create(rewriter, loc, x2, x2);
    }
    rewriter.replaceOp(op, y);
    return success();
  }
};
} // namespace

void PowOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<PowToMultiplies>(context);
}

bool mlir::ds::isOnUint8Grid(Value v, double scale, int64_t zeroPoint) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto fq = dyn_cast<FakeQuantizeOp>(def))
      return fq.getScale().convertToDouble() == scale && fq.getZeroPoint() == zeroPoint;
    if (auto q = dyn_cast<QuantizedMatmulOp>(def))
      return q.getRoundScale() && q.getRoundScale()->convertToDouble() == scale &&
             q.getRoundZeroPoint() && static_cast<int64_t>(*q.getRoundZeroPoint()) == zeroPoint;
    if (!isa<ReshapeOp, TransposeOp, SliceOp, ExpandOp>(def)) return false;
    v = def->getOperand(0);
  }
  return false;
}

// fake_quantize is idempotent: (q - z) * s divided by s is within an ulp
// of the integer q - z, which rounds back to it.
OpFoldResult FakeQuantizeOp::fold(FoldAdaptor) {
  if (isOnUint8Grid(getOperand(), getScale().convertToDouble(), getZeroPoint()))
    return getOperand();
  return {};
}

LogicalResult FakeQuantizeOp::verify() {
  return verifyInputQuantization(*this, getScale().convertToDouble(), getZeroPoint(), "scale",
                                 "zero_point");
}

LogicalResult BitcastOp::verify() {
  auto bits = [](Type t) {
    unsigned w = t.getIntOrFloatBitWidth();
    return w == 1 ? 8u : w; // i1 occupies a byte
  };
  Type from = getOperand().getType().getElementType(), to = getType().getElementType();
  if (bits(from) != bits(to))
    return emitOpError("needs element types of one width, got ") << from << " and " << to;
  return success();
}
