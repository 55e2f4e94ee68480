//===- RaiseActivations.cpp - GELU spelled out becomes ds.gelu ------------===//
//
// Exporters write GELU as a handful of elementwise ops whose association
// varies by exporter and version. Matching op patterns would chase those
// spellings; instead the pass takes every small elementwise function of one
// value (other operands known scalars, intermediates read only inside) and
// compares it by value with GELU's two forms. The candidates are functions
// of one variable built from smooth primitives, so agreement at 512 points
// to f32 rounding identifies them (plus points out to 2^100, where a clamp
// or a ReLU branch would show); the two forms themselves differ by up to
// 4.7e-4, far above the tolerance.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_RAISEACTIVATIONSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Largest op group examined from one value (GELU's tanh form is 9 ops).
constexpr size_t kMaxOps = 16;
constexpr int kProbes = 512;
constexpr double kProbeRange = 12.0, kTolerance = 2e-6;

/// Ops the evaluator knows, in double precision: the smooth ones GELU's
/// spellings use. Piecewise ops (relu, max, min, abs) stay out: with them a
/// function can equal GELU at every probe and differ between probes (a
/// bump between two of them, a clamp beyond the last), and probing would
/// take it for GELU.
bool isEvaluable(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, NegOp, TanhOp, ErfOp, SigmoidOp, ExpOp, SqrtOp,
             ReciprocalOp, GeluOp>(op);
}

double geluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) {
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

double evalOp(Operation *op, ArrayRef<double> a) {
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([&](AddOp) { return a[0] + a[1]; })
      .Case([&](SubOp) { return a[0] - a[1]; })
      .Case([&](MulOp) { return a[0] * a[1]; })
      .Case([&](DivOp) { return a[0] / a[1]; })
      .Case([&](PowOp) { return std::pow(a[0], a[1]); })
      .Case([&](NegOp) { return -a[0]; })
      .Case([&](TanhOp) { return std::tanh(a[0]); })
      .Case([&](ErfOp) { return std::erf(a[0]); })
      .Case([&](SigmoidOp) { return 1.0 / (1.0 + std::exp(-a[0])); })
      .Case([&](ExpOp) { return std::exp(a[0]); })
      .Case([&](SqrtOp) { return std::sqrt(a[0]); })
      .Case([&](ReciprocalOp) { return 1.0 / a[0]; })
      .Case([&](GeluOp g) {
        return g.getApproximate() == GeluApproximation::Tanh ? geluTanh(a[0]) : geluErf(a[0]);
      })
      .Default([](Operation *) { return NAN; });
}

/// A one-element operand whose value is known at compile time; a
/// parameter the user asked to train (`trained`) is not.
std::optional<double> scalarConstant(Value v, ArrayRef<std::string> trained) {
  if (cast<RankedTensorType>(v.getType()).getNumElements() != 1) return std::nullopt;
  if (auto p = v.getDefiningOp<ParameterOp>(); p && llvm::is_contained(trained, p.getSymName()))
    return std::nullopt;
  return knownFloatSplat(v);
}

struct RaiseActivationsPass
    : public mlir::ds::impl::RaiseActivationsPassBase<RaiseActivationsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Value> roots;
    getOperation().walk([&](Operation *op) {
      for (Value r : op->getResults()) roots.push_back(r);
      for (Region &region : op->getRegions())
        for (Block &b : region)
          for (BlockArgument a : b.getArguments()) roots.push_back(a);
    });
    for (Value x : roots)
      if (!erased_.contains(x)) raiseFrom(x);
  }

  /// Replaces the GELU computed from `x`, if any.
  void raiseFrom(Value x) {
    auto type = dyn_cast<RankedTensorType>(x.getType());
    if (!type || !type.getElementType().isF32() || x.use_empty()) return;
    llvm::SetVector<Operation *> group = functionsOf(x, type);
    if (group.size() < 2) return;
    // The largest sub-group ending in one value that nothing else reads
    // mid-way: try each member as the result, latest first.
    SmallVector<Operation *> members(group.begin(), group.end());
    llvm::sort(members, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (Operation *out : llvm::reverse(members)) {
      llvm::SetVector<Operation *> cone = coneOf(out, group);
      if (cone.size() < 2 || !closed(cone, out)) continue;
      std::optional<GeluApproximation> form = identify(x, cone);
      if (!form) continue;
      OpBuilder b(out);
      auto gelu = GeluOp::create(b, out->getLoc(), x.getType(), x,
                                 GeluApproximationAttr::get(b.getContext(), *form));
      out->getResult(0).replaceAllUsesWith(gelu.getResult());
      SmallVector<Operation *> dead(cone.begin(), cone.end());
      llvm::sort(dead, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
      for (Operation *op : dead) {
        erased_.insert(op->getResult(0));
        op->erase();
      }
      ++numRaised;
      numOpsReplaced += dead.size();
      return;
    }
  }

  /// Ops in x's block that compute from x and scalar constants only, each
  /// with x's type.
  llvm::SetVector<Operation *> functionsOf(Value x, RankedTensorType type) {
    llvm::SetVector<Operation *> group;
    auto eligible = [&](Operation *op) {
      if (group.contains(op) || !isEvaluable(op) || op->getNumResults() != 1 ||
          op->getResult(0).getType() != type)
        return false;
      if (Block *b = x.getParentBlock(); op->getBlock() != b) return false;
      return llvm::all_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return v == x || (def && group.contains(def)) || scalarConstant(v, trained);
      });
    };
    SmallVector<Operation *> work(x.getUsers().begin(), x.getUsers().end());
    while (!work.empty() && group.size() < kMaxOps) {
      Operation *op = work.pop_back_val();
      if (!eligible(op)) continue;
      group.insert(op);
      for (Operation *u : op->getResult(0).getUsers()) work.push_back(u);
    }
    return group;
  }

  /// `out` and the members of `group` it is computed from.
  static llvm::SetVector<Operation *> coneOf(Operation *out,
                                             const llvm::SetVector<Operation *> &group) {
    llvm::SetVector<Operation *> cone;
    SmallVector<Operation *> work{out};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!cone.insert(op)) continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && group.contains(def)) work.push_back(def);
    }
    return cone;
  }

  /// Nothing outside the cone reads a value before `out`.
  static bool closed(const llvm::SetVector<Operation *> &cone, Operation *out) {
    return llvm::all_of(cone, [&](Operation *op) {
      return op == out ||
             llvm::all_of(op->getResult(0).getUsers(), [&](Operation *u) { return cone.contains(u); });
    });
  }

  /// Which GELU the cone computes from x, by value.
  std::optional<GeluApproximation> identify(Value x, const llvm::SetVector<Operation *> &cone) {
    SmallVector<Operation *> order(cone.begin(), cone.end());
    llvm::sort(order, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    bool erf = true, tanh = true;
    llvm::DenseMap<Value, double> value;
    // Dense probes where GELU bends, then magnitudes out to 2^100 of both
    // signs: a clamp or a branch beyond the dense range (min(gelu(x), 15))
    // is not GELU.
    SmallVector<double> probes;
    for (int i = 0; i < kProbes; ++i) probes.push_back(-kProbeRange + 2 * kProbeRange * i / (kProbes - 1));
    for (double e = std::log2(kProbeRange); e <= 100; e += 0.25)
      probes.append({std::exp2(e), -std::exp2(e)});
    // Each probe twice: in double (the function it is), and rounded to f32
    // after every op (what the graph computes): a spelling that overflows
    // in f32 where GELU does not ((x * 1e20) ... / 1e20) is not replaced by
    // a kernel that would not.
    auto evaluate = [&](double px, bool f32) {
      value.clear();
      value[x] = f32 ? static_cast<float>(px) : px;
      double result = NAN;
      for (Operation *op : order) {
        SmallVector<double, 3> args;
        for (Value v : op->getOperands()) {
          auto it = value.find(v);
          double a = it != value.end() ? it->second : *scalarConstant(v, trained);
          args.push_back(f32 ? static_cast<float>(a) : a);
        }
        result = evalOp(op, args);
        if (f32) result = static_cast<float>(result);
        value[op->getResult(0)] = result;
      }
      return result;
    };
    for (size_t i = 0; i < probes.size() && (erf || tanh); ++i) {
      double px = probes[i];
      for (bool f32 : {false, true}) {
        double result = evaluate(px, f32);
        auto near = [&](double want) {
          return std::isfinite(result) &&
                 std::fabs(result - want) <= kTolerance * std::max(1.0, std::fabs(want));
        };
        erf = erf && near(geluErf(px));
        tanh = tanh && near(geluTanh(px));
      }
    }
    if (erf) return GeluApproximation::None;
    if (tanh) return GeluApproximation::Tanh;
    return std::nullopt;
  }

  llvm::DenseSet<Value> erased_;
};

} // namespace
