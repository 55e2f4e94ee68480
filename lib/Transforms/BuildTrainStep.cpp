//===- BuildTrainStep.cpp - training and optimizer steps from @main -------===//
#include "dialects/ds/DSOps.h"
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Autodiff.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstring>

namespace mlir::ds {
#define GEN_PASS_DEF_BUILDTRAINSTEPPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

struct Parameter {
  std::string name;
  ml_program::GlobalOp global;
  /// Muon's choice (optimizer type Muon): orthogonalized updates, and
  /// DeepSpeed's sqrt(max(1, out / in)) for the layer's shape.
  bool muon = false;
  double muonScale = 1.0;
  /// Stored transposed from its initializer (a Gemm's transB weight).
  bool storedTransposed = false;
  std::string initializer; // the ONNX initializer it comes from
};

/// The ONNX node names of a value's consumers (their NameLoc, "node 'N'
/// (...)"), lowercased, through layout ops.
std::string consumerNames(Value v, int depth = 0) {
  std::string names;
  for (Operation *u : v.getUsers()) {
    if (auto n = dyn_cast<NameLoc>(u->getLoc())) names += n.getName().str() + " ";
    if (depth < 2 && isa<TransposeOp, ReshapeOp, CastOp>(u))
      names += consumerNames(u->getResult(0), depth + 1);
  }
  return llvm::StringRef(names).lower();
}

/// How DeepSpeed's Muon (set_optimizer_flags, muon_update) treats the
/// parameter: matrices (rank >= 2) whose name has neither "embed" nor
/// "lm_head" are Muon's; an exporter's anonymous name ("onnx::MatMul_7")
/// is judged by its consumers' node names ("/lm_head/MatMul"). The scale
/// uses the torch layer's [out, in] (a matmul's right operand is [in, out]
/// in ONNX); other ranks use their last two dimensions, as DeepSpeed does.
void chooseMuon(ParameterOp p, Parameter &out) {
  RankedTensorType t = p.getType();
  if (t.getRank() < 2) return;
  std::string name = p.getSymName().str();
  if (auto of = p->getAttrOfType<StringAttr>("ds.transpose_of")) name = of.str();
  std::string judged = llvm::StringRef(name).starts_with("onnx::")
                           ? consumerNames(p.getResult())
                           : llvm::StringRef(name).lower();
  if (llvm::StringRef(judged).contains("embed") || llvm::StringRef(judged).contains("lm_head"))
    return;
  out.muon = true;
  double rows = static_cast<double>(t.getDimSize(t.getRank() - 2));
  double cols = static_cast<double>(t.getDimSize(t.getRank() - 1));
  if (t.getRank() == 2)
    for (OpOperand &use : p.getResult().getUses()) {
      Operation *u = use.getOwner();
      bool flipped = false;
      unsigned index = use.getOperandNumber();
      if (auto tr = dyn_cast<TransposeOp>(u); tr && tr->hasOneUse()) {
        flipped = true;
        index = tr->use_begin()->getOperandNumber();
        u = *tr->user_begin();
      }
      auto mm = dyn_cast<MatmulOp>(u);
      if (!mm || index != 1) continue;
      // Stored [in, out] when the product reads it as it is stored (or a
      // transposed read undoes a transpose): out is its last dimension.
      bool inOut = flipped == mm.getTransposeRhs();
      if (inOut) std::swap(rows, cols);
      break;
    }
  out.muonScale = rows > cols ? std::sqrt(rows / cols) : 1.0;
}

class BuildTrainStepPass
    : public mlir::ds::impl::BuildTrainStepPassBase<BuildTrainStepPass> {
public:
  using BuildTrainStepPassBase::BuildTrainStepPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || !main.getBody().hasOneBlock()) {
      module.emitError("ds-build-train-step needs a single-block function @main");
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step") || module.lookupSymbol("optimizer_step")) {
      module.emitError("the module already has a training step");
      return signalPassFailure();
    }
    if (failed(readConfig(main)) || failed(promoteParameters(module, main)) ||
        failed(buildTrainStep(module, main)) || failed(buildOptimizerStep(module)))
      return signalPassFailure();
    // The 1-bit optimizers' programs over each rank's own gradients.
    SmallVector<Phase> phases;
    if (config_.optimizer.kind == OptimizerConfig::Kind::OneBitAdam)
      phases = {Phase::OneBitMomentum};
    if (config_.optimizer.kind == OptimizerConfig::Kind::ZeroOneAdam)
      phases = {Phase::ZeroOneGradient, Phase::ZeroOneLocal, Phase::ZeroOneSync};
    if (config_.optimizer.kind == OptimizerConfig::Kind::OneBitLamb)
      phases = {Phase::OneBitLambMomentum};
    for (Phase ph : phases)
      if (failed(buildOptimizerStep(module, ph))) return signalPassFailure();
    evalDropout(main);
    recordGradientless(module);
    recordConfig(module);
  }

private:
  /// @main stays the plan's forward program, which evaluates the trained
  /// model as model.eval() does: Dropout keeps everything (its mask is 1,
  /// and x * 1 is x), and the forward takes no key.
  void evalDropout(func::FuncOp main) {
    SmallVector<RandomMaskOp> masks(main.getOps<RandomMaskOp>());
    for (RandomMaskOp m : masks) {
      OpBuilder b(m);
      auto type = cast<RankedTensorType>(m.getType());
      Value one = ConstantOp::create(
          b, m.getLoc(), DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 1.0)));
      for (Operation *user : llvm::make_early_inc_range(m->getUsers())) {
        auto mul = dyn_cast<MulOp>(user);
        if (!mul) continue;
        Value other = mul.getLhs() == m.getResult() ? mul.getRhs() : mul.getLhs();
        if (other.getType() != mul.getType()) continue;
        mul.getResult().replaceAllUsesWith(other);
        mul->erase();
      }
      m.getResult().replaceAllUsesWith(one);
      m->erase();
    }
    for (unsigned i = main.getNumArguments(); i-- > 0;)
      if (main.getArgAttr(i, "ds.rng_key") && main.getArgument(i).use_empty())
        (void)main.eraseArgument(i);
  }

  LogicalResult readConfig(func::FuncOp main) {
    // With several ranks each processes micro_batch_size samples; the
    // gradients are averaged by ds-data-parallel (the training pipeline runs
    // it after this pass).
    if (worldSize < 1)
      return main.emitError("world size must be >= 1, got ") << static_cast<int64_t>(worldSize);
    // The micro-batch is the leading dimension of the data inputs.
    int64_t modelBatch = -1;
    for (Type t : main.getArgumentTypes()) {
      auto rt = cast<RankedTensorType>(t);
      if (rt.getRank() == 0) continue;
      if (modelBatch < 0) modelBatch = rt.getDimSize(0);
    }
    if (modelBatch < 0)
      return main.emitError("the model has no batched input to train on");
    if (tensorParallel < 0 || (tensorParallel > 0 && worldSize % tensorParallel))
      return main.emitError("tensor-parallel size ")
             << static_cast<int64_t>(tensorParallel) << " does not divide the world of "
             << static_cast<int64_t>(worldSize);
    if (configPath.empty()) {
      config_.tensorParallel = std::max<int64_t>(1, tensorParallel);
      config_.worldSize = worldSize / config_.tensorParallel;
      config_.microBatchSize = modelBatch;
      config_.gradientAccumulationSteps = 1;
      config_.trainBatchSize = modelBatch * config_.worldSize;
      return success();
    }
    auto c = readDeepSpeedConfig(configPath, worldSize, tensorParallel,
                                 std::vector<std::string>(overrides.begin(), overrides.end()),
                                 modelBatch);
    if (!c) return main.emitError() << llvm::toString(c.takeError());
    config_ = *c;
    if (config_.microBatchSize != modelBatch)
      return main.emitError("train_micro_batch_size_per_gpu is ")
             << config_.microBatchSize << " but the model's inputs have batch " << modelBatch
             << "; export with that batch or fix it with --input-shape";
    return success();
  }

  /// Whether `p` is trained. ONNX says nothing about trainability and
  /// PyTorch 2's exporter writes literals (Pow's exponent, a mask's fill
  /// value, GELU's 0.5) as initializers, so by default a float initializer
  /// is trained unless it is a literal (at most one element), a buffer by
  /// the exporter's graph signature, or frozen; --parameters names the set
  /// exactly instead.
  bool selected(ParameterOp p, const llvm::StringSet<> &frozenSet,
                const llvm::StringSet<> &only) const {
    if (!isa<FloatType>(p.getType().getElementType())) return false;
    if (!only.empty()) return named(p, only);
    // ONNX training_info's update bindings name what is trained, literals'
    // size or not (the importer marks them ds.trained).
    if (p->hasAttr("ds.trained")) return !named(p, frozenSet);
    // PyTorch 2's exporter records which initializers are buffers (the
    // importer marks them ds.buffer).
    return !named(p, frozenSet) && p.getType().getNumElements() > 1 && !p->hasAttr("ds.buffer") &&
           !holdsMaskValues(p);
  }

  /// An initializer holding an infinity, a NaN or a magnitude of 1e30 or
  /// more is an attention mask (a buffer TorchScript exports like any
  /// initializer), not a weight: trained, its -inf entries give NaN losses
  /// and its -1e30 ones move.
  static bool holdsMaskValues(ParameterOp p) {
    Type e = p.getType().getElementType();
    if (!(e.isF32() || e.isF64())) return false;
    FailureOr<Seen> v = valuesOf(p);
    if (failed(v)) return false;
    const size_t n = v->bytes.size() / (e.isF32() ? 4 : 8); // (one for a splat)
    for (size_t i = 0; i < n; ++i) {
      double x;
      if (e.isF32()) {
        float f;
        std::memcpy(&f, v->bytes.data() + 4 * i, 4);
        x = f;
      } else {
        std::memcpy(&x, v->bytes.data() + 8 * i, 8);
      }
      if (!(std::fabs(x) < 1e30)) return true;
    }
    return false;
  }

  /// Whether `set` names `p` or the initializer it is a transposed copy of
  /// (a Gemm's transB weight: --freeze l1.weight freezes its copy too).
  static bool named(ParameterOp p, const llvm::StringSet<> &set) {
    auto of = p->getAttrOfType<StringAttr>("ds.transpose_of");
    return set.contains(p.getSymName()) || (of && set.contains(of.getValue()));
  }

  /// ds.parameter (trainable) -> mutable global + global_load; tied copies
  /// load their original (transposed when stored transposed). What was
  /// trained and what was held constant is recorded on the module
  /// (ds.trained_parameters, ds.constant_initializers) for --report.
  LogicalResult promoteParameters(ModuleOp module, func::FuncOp main) {
    llvm::StringSet<> frozenSet, only;
    for (const std::string &f : frozen) frozenSet.insert(f);
    for (const std::string &f : trainOnly) only.insert(f);
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToStart(module.getBody());
    SmallVector<ParameterOp> params;
    main.walk([&](ParameterOp p) { params.push_back(p); });
    // A Gemm's transB weight the importer stored transposed (a copy marked
    // ds.transpose_of) is its original, transposed: one parameter, whose
    // gradient sums every reader's (a tied embedding read by a Gather and
    // by the head's Gemm), not two trained apart.
    {
      llvm::StringMap<ParameterOp> byName;
      for (ParameterOp p : params) byName[p.getSymName()] = p;
      SmallVector<ParameterOp> keep;
      for (ParameterOp p : params) {
        auto of = p->getAttrOfType<StringAttr>("ds.transpose_of");
        ParameterOp original = of ? byName.lookup(of.getValue()) : ParameterOp();
        if (!original || original->getBlock() != p->getBlock() ||
            !original->isBeforeInBlock(p) || original.getType().getRank() != 2) {
          keep.push_back(p);
          continue;
        }
        OpBuilder b(p);
        Value t = TransposeOp::create(b, p.getLoc(), TypeRange{p.getType()},
                                      ValueRange{original.getResult()},
                                      {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr({1, 0}))});
        p.replaceAllUsesWith(t);
        p.erase();
      }
      params = std::move(keep);
    }
    llvm::StringSet<> names;
    for (ParameterOp p : params) {
      names.insert(p.getSymName());
      if (auto of = p->getAttrOfType<StringAttr>("ds.transpose_of")) names.insert(of.getValue());
    }
    // An initializer no node reads is gone from the IR: named, it gets a
    // note (no gradient reaches it), not an error.
    llvm::StringSet<> unread;
    if (auto all = module->getAttrOfType<ArrayAttr>("ds.initializer_names"))
      for (auto n : all.getAsRange<StringAttr>())
        if (!names.contains(n.getValue())) unread.insert(n.getValue());
    for (const std::string &f : frozen)
      if (!names.contains(f) && !unread.contains(f))
        return module.emitError("--freeze names '") << f << "', which is not a parameter";
    for (const std::string &f : trainOnly)
      if (!names.contains(f) && !unread.contains(f))
        return module.emitError("--parameters names '")
               << f << "', which is not an initializer of the model";
    for (const auto *list : {&trainOnly, &frozen})
      for (const std::string &f : *list)
        if (unread.contains(f))
          module.emitRemark("'") << f << "' is an initializer no node of the graph reads: "
                                 << "no gradient reaches it, so it is not trained";
    // Running statistics left out by default are said (--parameters
    // trains what it names, these too).
    SmallVector<std::string> stats;
    for (ParameterOp p : params)
      if (p->hasAttr("ds.running_stat") && !selected(p, frozenSet, only))
        stats.push_back(p.getSymName().str());
    if (!stats.empty())
      module.emitRemark() << stats.size()
                          << (stats.size() == 1
                                  ? " BatchNormalization running statistic is a buffer, not "
                                    "trained (--parameters names it to train it anyway): "
                                  : " BatchNormalization running statistics are buffers, not "
                                    "trained (--parameters names them to train them anyway): ")
                          << llvm::join(stats, ", ");
    // So are masks (holdsMaskValues), by default.
    SmallVector<std::string> masks;
    if (only.empty())
      for (ParameterOp p : params)
        if (isa<FloatType>(p.getType().getElementType()) && !p->hasAttr("ds.trained") &&
            !named(p, frozenSet) && p.getType().getNumElements() > 1 &&
            !p->hasAttr("ds.buffer") && holdsMaskValues(p))
          masks.push_back(p.getSymName().str());
    if (!masks.empty())
      module.emitRemark() << masks.size()
                          << (masks.size() == 1 ? " initializer holds" : " initializers hold")
                          << " infinities or magnitudes of 1e30 or more (an attention mask), so "
                             "not trained (--parameters names it to train it anyway): "
                          << llvm::join(masks, ", ");
    // Selected parameters first, so a copy met before its original (a
    // folded transpose) still finds it.
    std::stable_partition(params.begin(), params.end(),
                          [&](ParameterOp p) { return selected(p, frozenSet, only); });

    Builder ab(module.getContext());
    SmallVector<Attribute> trained, constant;
    std::vector<Seen> seen;
    // Frozen parameters' values: a copy of one (a tied head's transposed
    // copy of a frozen embedding) is the same weight, frozen too.
    std::vector<Seen> frozenSeen;
    if (tieWeights)
      for (ParameterOp p : params)
        if (isa<FloatType>(p.getType().getElementType()) && named(p, frozenSet)) {
          FailureOr<Seen> v = valuesOf(p);
          if (failed(v)) return failure();
          frozenSeen.push_back(std::move(*v));
        }
    for (ParameterOp p : params) {
      std::string name = p.getSymName().str();
      bool train = selected(p, frozenSet, only);
      bool isFloat = isa<FloatType>(p.getType().getElementType());
      // The values, for finding ties: a view of the IR's bytes where it has
      // them (weights are not copied: ds-opt's memory stays one model).
      ArrayRef<uint8_t> bytes;
      std::shared_ptr<std::vector<uint8_t>> owned;
      // Untied copies (TorchParameters.h) hold equal values on purpose.
      bool tieable = tieWeights && isFloat && !named(p, frozenSet) && !p->hasAttr("ds.untied");
      if (tieable) {
        FailureOr<Seen> v = valuesOf(p);
        if (failed(v)) return failure();
        bytes = v->bytes;
        owned = v->owned;
        bool transposed = false;
        if (matchTie(p, bytes, frozenSeen, transposed)) train = false;
        else if (Value tied = findTie(p, bytes, seen)) {
          auto load = tied.getDefiningOp<ml_program::GlobalLoadOp>();
          bool transposed = !load;
          if (!load)
            load = tied.getDefiningOp()->getOperand(0).getDefiningOp<ml_program::GlobalLoadOp>();
          recordSource(p, load.getGlobal().getLeafReference().str(), transposed);
          // Said, so a tie is never silent.
          StringRef source = load.getGlobal().getLeafReference().getValue();
          source.consume_front("param:");
          p.emitRemark() << "trained as '" << source << "'" << (transposed ? ", transposed" : "")
                         << ": the exporter's copy of it (equal values)";
          p.replaceAllUsesWith(tied);
          p.erase();
          continue;
        }
      }
      if (!train) {
        if (isFloat) constant.push_back(ab.getStringAttr(name));
        continue;
      }
      trained.push_back(ab.getDictionaryAttr(
          {ab.getNamedAttr("name", ab.getStringAttr(name)),
           ab.getNamedAttr("shape", ab.getDenseI64ArrayAttr(p.getType().getShape()))}));
      auto global = ml_program::GlobalOp::create(mb, p.getLoc(), "param:" + name, p.getType(),
                                                 /*is_mutable=*/true, p.getValue(),
                                                 mb.getStringAttr("private"));
      recordSource(p, global.getSymName().str(), false);
      OpBuilder b(p);
      auto load = ml_program::GlobalLoadOp::create(b, p.getLoc(), p.getType(),
                                                   SymbolRefAttr::get(global.getSymNameAttr()));
      Parameter param{name, global};
      param.storedTransposed = p->hasAttr("ds.transpose_of");
      auto of = p->getAttrOfType<StringAttr>("ds.transpose_of");
      param.initializer = of ? of.str() : name;
      if (config_.optimizer.kind == OptimizerConfig::Kind::Muon) chooseMuon(p, param);
      p.replaceAllUsesWith(load.getResult());
      p.erase();
      params_.push_back(param);
      if (tieable)
        seen.push_back({global, cast<RankedTensorType>(global.getType()), bytes, owned,
                        exporterMadeName(name)});
    }
    if (params_.empty())
      return module.emitError("the model has no trainable parameters");
    module->setAttr("ds.trained_parameters", ab.getArrayAttr(trained));
    module->setAttr("ds.constant_initializers", ab.getArrayAttr(constant));
    return success();
  }

  /// Parameters the loss does not reach differentiably (a float attention
  /// mask buffer compared against 0) get no gradient, so they are not
  /// trained: --report lists them as held constant, not as trained.
  void recordGradientless(ModuleOp module) {
    auto trained = module->getAttrOfType<ArrayAttr>("ds.trained_parameters");
    auto constant = module->getAttrOfType<ArrayAttr>("ds.constant_initializers");
    if (!trained || !constant) return;
    SmallVector<Attribute> keep, held(constant.begin(), constant.end());
    for (auto d : trained.getAsRange<DictionaryAttr>()) {
      auto name = d.getAs<StringAttr>("name");
      if (name && !gradGlobals_.count(name.getValue())) held.push_back(name);
      else keep.push_back(d);
    }
    Builder b(module.getContext());
    module->setAttr("ds.trained_parameters", b.getArrayAttr(keep));
    module->setAttr("ds.constant_initializers", b.getArrayAttr(held));
    // ... and they are constants again, not state the plan carries (and
    // checkpoints, and mixed precision gives a master copy).
    for (Parameter &p : params_) {
      if (gradGlobals_.count(p.name)) continue;
      SmallVector<ml_program::GlobalLoadOp> loads;
      bool stored = false;
      module.walk([&](Operation *op) {
        if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op); l && l.getGlobal().getLeafReference() == p.global.getSymName())
          loads.push_back(l);
        if (auto st = dyn_cast<ml_program::GlobalStoreOp>(op); st && st.getGlobal().getLeafReference() == p.global.getSymName())
          stored = true;
      });
      auto value = dyn_cast_or_null<TypedAttr>(p.global.getValueAttr());
      if (stored || !value) continue;
      for (auto l : loads) {
        OpBuilder lb(l);
        auto c = ParameterOp::create(lb, l.getLoc(), lb.getStringAttr(p.name), value);
        c->setAttr("ds.buffer", lb.getUnitAttr());
        l.getResult().replaceAllUsesWith(c.getResult());
        l.erase();
      }
      llvm::erase_if(sources_, [&](Attribute a) {
        auto st = cast<DictionaryAttr>(a).getAs<StringAttr>("state");
        return st && st.getValue() == p.global.getSymName();
      });
      p.global.erase();
    }
  }

  /// Which global (and whether transposed) holds an ONNX initializer's
  /// trained values. The importer stores a Gemm transB weight transposed
  /// and marks it ds.transpose_of.
  void recordSource(ParameterOp p, const std::string &global, bool transposed) {
    std::string initializer = p.getSymName().str();
    if (auto of = p->getAttrOfType<StringAttr>("ds.transpose_of")) {
      initializer = of.str();
      transposed = !transposed;
    }
    Builder b(p.getContext());
    SmallVector<NamedAttribute> attrs;
    // One block of a fused projection split for tensor parallelism
    // (ds-tensor-parallel): the initializer is its parts joined.
    if (auto of = p->getAttrOfType<StringAttr>("ds.part_of")) {
      initializer = of.str();
      if (p->hasAttr("ds.part_transposed")) transposed = !transposed;
      attrs.push_back(b.getNamedAttr("part", p->getAttr("ds.part_index")));
    }
    attrs.push_back(b.getNamedAttr("initializer", b.getStringAttr(initializer)));
    attrs.push_back(b.getNamedAttr("state", b.getStringAttr(global)));
    attrs.push_back(b.getNamedAttr("transpose", b.getBoolAttr(transposed)));
    sources_.push_back(b.getDictionaryAttr(attrs));
  }

  struct Seen {
    ml_program::GlobalOp global;
    RankedTensorType type;
    ArrayRef<uint8_t> bytes; // the IR's own bytes, or `owned`'s
    std::shared_ptr<std::vector<uint8_t>> owned;
    bool exporterMade = false; // named by the exporter (exporterMadeName)
  };

  /// A name the exporter generated for a value it made (TorchScript's
  /// "onnx::MatMul_8", the dynamo optimizer's "val_313"), not a model's.
  static bool exporterMadeName(StringRef name) {
    if (name.starts_with("onnx::")) return true;
    StringRef digits;
    return name.starts_with("val_") && !(digits = name.drop_front(4)).empty() &&
           llvm::all_of(digits, [](char c) { return c >= '0' && c <= '9'; });
  }

  /// An exporter-made parameter holding exactly the values of an earlier
  /// one, or of its transpose, is the same weight: returns the earlier
  /// one's load (or its transpose). Only tensors with varied values
  /// (random initializations) qualify, so equal zero- or one-initialized
  /// biases are never tied.
  /// The entry of `seen` whose values are `bytes` (p's), or their
  /// transpose (`transposed` set); null when none is.
  static const Seen *matchTie(ParameterOp p, ArrayRef<uint8_t> bytes, ArrayRef<Seen> seen,
                              bool &transposedMatch) {
    RankedTensorType t = p.getType();
    size_t es = bytes.size() / std::max<int64_t>(1, t.getNumElements());
    // Only an initializer the exporter made and named ("onnx::MatMul_8":
    // TorchScript's constant folding of a tied head's transpose; "val_313":
    // the dynamo exporter's optimizer's) is a copy of the weight holding its
    // values; two initializers the model names are two weights, however
    // equal their values (they may be set equal on purpose and trained
    // apart).
    const bool exporterNamed = exporterMadeName(p.getSymName());
    if (t.getNumElements() < 2 || es == 0) return nullptr;
    bool varied = false;
    for (size_t i = es; i < bytes.size() && !varied; i += es)
      varied = std::memcmp(bytes.data(), bytes.data() + i, es) != 0;
    if (!varied) return nullptr;
    std::vector<uint8_t> transposed;
    if (t.getRank() == 2) {
      int64_t r = t.getDimSize(0), c = t.getDimSize(1);
      transposed.resize(bytes.size());
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j)
          std::memcpy(transposed.data() + (j * r + i) * es, bytes.data() + (i * c + j) * es, es);
    }
    for (const Seen &s : seen) {
      if ((!exporterNamed && !s.exporterMade) || s.type.getElementType() != t.getElementType() ||
          s.bytes.size() != bytes.size())
        continue;
      transposedMatch = false;
      if (s.type == t && s.bytes == bytes) return &s;
      transposedMatch = true;
      if (!transposed.empty() && s.type.getRank() == 2 &&
          s.type.getDimSize(0) == t.getDimSize(1) && s.type.getDimSize(1) == t.getDimSize(0) &&
          s.bytes == ArrayRef<uint8_t>(transposed))
        return &s;
    }
    return nullptr;
  }

  Value findTie(ParameterOp p, ArrayRef<uint8_t> bytes, std::vector<Seen> &seen) {
    bool transposed = false;
    const Seen *s = matchTie(p, bytes, seen, transposed);
    if (!s) return Value();
    OpBuilder b(p);
    auto sym = SymbolRefAttr::get(ml_program::GlobalOp(s->global).getSymNameAttr());
    Value load = ml_program::GlobalLoadOp::create(b, p.getLoc(), s->type, sym);
    if (!transposed) return load;
    return TransposeOp::create(b, p.getLoc(), ValueRange{load},
                               {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr({1, 0}))});
  }

  /// The bytes of a parameter's value: a view of the IR's where it has
  /// them (weights are not copied: ds-opt's memory stays one model).
  static FailureOr<Seen> valuesOf(ParameterOp p) {
    Seen s{ml_program::GlobalOp(), p.getType(), {}, nullptr, exporterMadeName(p.getSymName())};
    // A splat (ds-opt --shapes-only's placeholders): one element stands
    // for all (it is never varied enough to tie, and it is not expanded).
    if (auto d = dyn_cast<DenseElementsAttr>(p.getValue()); d && d.isSplat()) {
      auto one = RankedTensorType::get({1}, d.getElementType());
      FailureOr<std::vector<uint8_t>> b =
          constantBytes(DenseElementsAttr::get(one, d.getSplatValue<Attribute>()), p.getLoc());
      if (failed(b)) return failure();
      s.owned = std::make_shared<std::vector<uint8_t>>(std::move(*b));
      s.bytes = *s.owned;
      return s;
    }
    if (std::optional<ArrayRef<uint8_t>> view = constantView(p.getValue())) {
      s.bytes = *view;
      return s;
    }
    FailureOr<std::vector<uint8_t>> b = constantBytes(p.getValue(), p.getLoc());
    if (failed(b)) return failure();
    s.owned = std::make_shared<std::vector<uint8_t>>(std::move(*b));
    s.bytes = *s.owned;
    return s;
  }
  ml_program::GlobalOp stateGlobal(ModuleOp module, const std::string &name, Type type) {
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToStart(module.getBody());
    // Zero-initialized: the plan stores no bytes for these.
    return ml_program::GlobalOp::create(mb, module.getLoc(), name, type, /*is_mutable=*/true,
                                        Attribute(), mb.getStringAttr("private"));
  }

  LogicalResult buildTrainStep(ModuleOp module, func::FuncOp main) {
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointAfter(main);
    func::FuncOp step = main.clone();
    mb.insert(step);
    step.setSymName("train_step");
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Which model output the loss uses.
    int64_t outIndex = 0;
    if (!lossOutput.empty()) {
      outIndex = -1;
      for (unsigned i = 0; i < step.getNumResults(); ++i)
        if (auto n = step.getResultAttrOfType<StringAttr>(i, "ds.name"); n && n.getValue() == lossOutput)
          outIndex = i;
      if (outIndex < 0)
        return main.emitError("--loss-output '") << lossOutput << "' is not an output of the model";
    }
    Value out = ret.getOperand(outIndex);
    auto outType = typeOf(out);
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    Value loss;
    SmallVector<std::string> dataInputs;
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto n = step.getArgAttrOfType<StringAttr>(i, "ds.name");
      if (!n) continue;
      // Dropout's key is fed by ds-run per micro-step, not read from data.
      if (step.getArgAttr(i, "ds.rng_key")) rngInput_ = n.str();
      else dataInputs.push_back(n.str());
    }
    if (lossKind == "softmax-cross-entropy" || lossKind == "mse") {
      Type labelsType =
          lossKind == "mse" ? Type(outType)
                            : Type(RankedTensorType::get(outType.getShape().drop_back(),
                                                         b.getI64Type()));
      if (lossKind == "softmax-cross-entropy" && outType.getRank() < 1)
        return main.emitError("softmax-cross-entropy needs logits of rank >= 1");
      // The labels come from the data a micro-batch at a time: one row per
      // sample, so the output needs the micro-batch as its first dimension
      // (a mean over the batch has none, and no data could ever be fed).
      auto lt = cast<RankedTensorType>(labelsType);
      if (lt.getRank() < 1 || lt.getDimSize(0) != config_.microBatchSize) {
        auto name = step.getResultAttrOfType<StringAttr>(outIndex, "ds.name");
        std::string shape;
        for (int64_t d : outType.getShape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
        return main.emitError("the loss output '")
               << (name ? name.getValue() : StringRef("#0")) << "' has shape [" << shape
               << "], but --loss " << lossKind << " reads labels of shape "
               << (lossKind == "mse" ? "[that shape]" : "[that shape without its last axis]")
               << ", one row per sample: it needs a leading micro-batch dimension of "
               << config_.microBatchSize << " (train_micro_batch_size_per_gpu)";
      }
      for (unsigned i = 0; i < step.getNumArguments(); ++i)
        if (auto n = step.getArgAttrOfType<StringAttr>(i, "ds.name"); n && n.getValue() == labelsName)
          return main.emitError("--labels '")
                 << labelsName << "' is already a graph input; name the labels input something "
                                  "else (ds-opt --labels NAME)";
      unsigned idx = step.getNumArguments();
      if (failed(step.insertArgument(idx, labelsType, b.getDictionaryAttr({b.getNamedAttr(
                                                          "ds.name", b.getStringAttr(labelsName))}),
                                     loc)))
        return failure();
      Value labels = step.getArgument(idx);
      dataInputs.push_back(labelsName);
      if (lossKind == "softmax-cross-entropy") {
        loss = SoftmaxCrossEntropyOp::create(b, loc, RankedTensorType::get({}, outType.getElementType()),
                                             out, labels, b.getI64IntegerAttr(ignoreIndex));
      } else {
        Value d = SubOp::create(b, loc, out, labels);
        Value sq = MulOp::create(b, loc, d, d);
        SmallVector<int64_t> all;
        for (int64_t i = 0; i < outType.getRank(); ++i) all.push_back(i);
        loss = ReduceMeanOp::create(b, loc, ValueRange{sq},
                                    {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(all)),
                                     b.getNamedAttr("keepdims", b.getBoolAttr(false))});
      }
    } else if (lossKind == "graph") {
      if (outType.getRank() != 0 || !isa<FloatType>(outType.getElementType()))
        return main.emitError("--loss graph needs a scalar float output, and output ")
               << outIndex << " is " << outType;
      loss = out;
    } else {
      return main.emitError("unknown loss '") << lossKind
                                              << "' (softmax-cross-entropy, mse or graph)";
    }
    dataInputs_ = dataInputs;
    // Where the forward ends, for wall_clock_breakdown (ds.loss survives
    // the passes on the loss op; a fused or folded one just loses the split).
    if (Operation *def = loss.getDefiningOp()) def->setAttr("ds.loss", b.getUnitAttr());

    // Differentiate with respect to the parameter loads (and asked inputs).
    SmallVector<Value> wrt;
    SmallVector<std::string> wrtNames;
    // One load per parameter: tied copies read the same global, and its
    // gradient must collect every use.
    llvm::DenseMap<StringRef, Value> loads;
    SmallVector<ml_program::GlobalLoadOp> duplicates;
    step.walk([&](ml_program::GlobalLoadOp l) {
      Value &first = loads[l.getGlobal().getLeafReference().getValue()];
      if (first) duplicates.push_back(l);
      else first = l.getResult();
    });
    for (ml_program::GlobalLoadOp l : duplicates) {
      l.getResult().replaceAllUsesWith(loads[l.getGlobal().getLeafReference().getValue()]);
      l.erase();
    }
    for (const Parameter &p : params_) {
      Value v = loads.lookup(ml_program::GlobalOp(p.global).getSymName());
      if (!v) continue; // not used by this function
      wrt.push_back(v);
      wrtNames.push_back(p.name);
    }
    size_t numParamGrads = wrt.size();
    for (const std::string &in : gradInputs) {
      Value arg;
      for (unsigned i = 0; i < step.getNumArguments(); ++i)
        if (auto n = step.getArgAttrOfType<StringAttr>(i, "ds.name"); n && n.getValue() == in)
          arg = step.getArgument(i);
      if (!arg || !isa<FloatType>(typeOf(arg).getElementType()))
        return main.emitError("--grad-inputs names '") << in << "', which is not a float input";
      wrt.push_back(arg);
      wrtNames.push_back(in);
    }
    Type elem = typeOf(loss).getElementType();
    auto scalarType = RankedTensorType::get({}, elem);
    Value seed = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(scalarType,
                               b.getFloatAttr(elem, 1.0 / config_.gradientAccumulationSteps)));
    if (lossScaled()) {
      // fp16: the backward starts from the loss scale (DeepSpeed's
      // scale_loss), so small gradients survive 16-bit products.
      unsigned idx = step.getNumArguments();
      if (!elem.isF32()) return main.emitError("fp16 loss scaling needs an f32 loss, got ") << elem;
      if (failed(step.insertArgument(
              idx, scalarType,
              b.getDictionaryAttr({b.getNamedAttr("ds.name", b.getStringAttr("loss_scale"))}),
              loc)))
        return failure();
      seed = MulOp::create(b, loc, seed, step.getArgument(idx));
    }
    FailureOr<SmallVector<Value>> grads = differentiate(b, loss, seed, wrt);
    if (failed(grads)) return failure();

    // Accumulate parameter gradients into their globals. Parameters the
    // loss does not reach differentiably (buffers such as attention masks)
    // get no gradient and no optimizer state, as in PyTorch. Without
    // accumulation (one micro-step per optimizer step) the micro-step's
    // gradient is the step's: stored as it is, so the weight-gradient
    // GEMMs write it instead of reading the zeroed accumulator back
    // (beta = 1) and adding.
    const bool accumulate = !gradientsOverwritten();
    for (size_t i = 0; i < numParamGrads; ++i) {
      if (!(*grads)[i]) continue;
      auto g = stateGlobal(module, "grad:" + wrtNames[i], (*grads)[i].getType());
      auto sym = SymbolRefAttr::get(g.getSymNameAttr());
      Value sum = (*grads)[i];
      if (accumulate) {
        Value acc = ml_program::GlobalLoadOp::create(b, loc, (*grads)[i].getType(), sym);
        sum = AddOp::create(b, loc, acc, (*grads)[i]);
      }
      ml_program::GlobalStoreOp::create(b, loc, sym, sum);
      gradGlobals_[wrtNames[i]] = g;
    }
    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs{
        b.getDictionaryAttr({b.getNamedAttr("ds.name", b.getStringAttr("loss"))})};
    for (size_t i = numParamGrads; i < wrt.size(); ++i) {
      Value gi = (*grads)[i];
      if (!gi)
        gi = FillOp::create(b, loc, wrt[i].getType(), b.getF64FloatAttr(0.0));
      results.push_back(gi);
      resultAttrs.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("ds.name", b.getStringAttr("grad:" + wrtNames[i]))}));
    }
    func::ReturnOp::create(b, loc, results);
    ret.erase();
    step.setType(b.getFunctionType(step.getArgumentTypes(), TypeRange(ValueRange(results))));
    step.setAllResultAttrs(resultAttrs);
    // The forward's other outputs are dead now.
    return success();
  }

  /// One micro-step per optimizer step on one rank, fp32, nothing
  /// offloaded: each step's gradient replaces the last. (Data parallelism,
  /// offload and 16-bit states rewrite the accumulation and keep it.)
  bool gradientsOverwritten() const {
    return config_.gradientAccumulationSteps == 1 && config_.worldSize == 1 &&
           config_.offloadOptimizer == "none" && config_.offloadParam == "none" &&
           config_.precision.kind == PrecisionConfig::Kind::FP32;
  }

  /// Whether a tensor-parallel constraint (ds.shard) reads the parameter.
  static bool isSliced(ModuleOp module, const Parameter &p) {
    auto sym = ml_program::GlobalOp(p.global).getSymNameAttr();
    bool sliced = false;
    module.walk([&](ml_program::GlobalLoadOp load) {
      if (load.getGlobal().getLeafReference() == sym &&
          llvm::any_of(load->getUsers(), [](Operation *u) { return isa<ShardOp>(u); }))
        sliced = true;
    });
    return sliced;
  }

  /// A reduction (ReduceSumOp, ReduceMaxOp) of x over every element, a
  /// scalar (a scalar x is its own).
  template <typename ReduceOpT> static Value reduceAll(OpBuilder &b, Location loc, Value x) {
    SmallVector<int64_t> all;
    for (int64_t i = 0; i < typeOf(x).getRank(); ++i) all.push_back(i);
    if (all.empty()) return x;
    return ReduceOpT::create(b, loc, ValueRange{x},
                             {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(all)),
                              b.getNamedAttr("keepdims", b.getBoolAttr(false))});
  }
  /// sqrt(sum(x^2)) over every element: a tensor's L2 norm, a scalar.
  static Value l2Norm(OpBuilder &b, Location loc, Value x) {
    Value sum = reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, x, x));
    return SqrtOp::create(b, loc, sum.getType(), sum);
  }

  /// A scalar (or zero-initialized tensor) state global with an initial
  /// value: 1-bit LAMB's last factor starts at 1.
  SymbolRefAttr scalarState(ModuleOp module, const std::string &name, double init) {
    if (auto g = module.lookupSymbol<ml_program::GlobalOp>(name))
      return SymbolRefAttr::get(g.getSymNameAttr());
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToStart(module.getBody());
    auto t = RankedTensorType::get({}, mb.getF32Type());
    Attribute value = init == 0 ? Attribute()
                                : DenseElementsAttr::get(t, mb.getF32FloatAttr(static_cast<float>(init)));
    auto g = ml_program::GlobalOp::create(mb, module.getLoc(), name, t, /*is_mutable=*/true,
                                          value, mb.getStringAttr("private"));
    return SymbolRefAttr::get(g.getSymNameAttr());
  }

  /// 1-bit LAMB's warm-up step of one parameter (lamb.py before
  /// freeze_step): LAMB on averaged gradients without bias correction,
  /// u = m / (sqrt(v) + eps) + wd param, c = clamp(|param| / |u|) (1 when a
  /// norm is 0), param -= lr c u; the frozen coefficient follows c
  /// (coeff_beta) when c != 1; `fresh` copies v into the fresh variance.
  /// `skip` (or a non-finite norm) keeps everything.
  template <typename GlobalFn, typename ScalarFn>
  void buildOneBitLambWarmup(OpBuilder &b, const Parameter &p, Value param, SymbolRefAttr psym,
                             Value grad, Value foundInf, Block *body, GlobalFn &global,
                             ScalarFn &scalar) {
    const OptimizerConfig &opt = config_.optimizer;
    Location loc = param.getLoc();
    Type t = param.getType();
    ModuleOp module = body->getParentOp()->getParentOfType<ModuleOp>();
    auto i1 = RankedTensorType::get({}, b.getI1Type());
    auto msym = global("adam_m:" + p.name, t), vsym = global("adam_v:" + p.name, t),
         fsym = global("onebit_fresh_v:" + p.name, t);
    SymbolRefAttr csym = scalarState(module, "onebit_lamb_coeff:" + p.name, 0.0);
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    Value m = ml_program::GlobalLoadOp::create(b, loc, t, msym);
    Value v = ml_program::GlobalLoadOp::create(b, loc, t, vsym);
    Value fresh = ml_program::GlobalLoadOp::create(b, loc, t, fsym);
    Value coeffFreeze = ml_program::GlobalLoadOp::create(b, loc, f32, csym);
    Value m1 = AddOp::create(b, loc, MulOp::create(b, loc, m, scalar(opt.beta1)),
                             MulOp::create(b, loc, grad, scalar(1.0 - opt.beta1)));
    Value v1 = AddOp::create(b, loc, MulOp::create(b, loc, v, scalar(opt.beta2)),
                             MulOp::create(b, loc, MulOp::create(b, loc, grad, grad),
                                           scalar(1.0 - opt.beta2)));
    Value u = DivOp::create(b, loc, m1,
                            AddOp::create(b, loc, SqrtOp::create(b, loc, t, v1), scalar(opt.eps)));
    if (opt.weightDecay > 0)
      u = AddOp::create(b, loc, u, MulOp::create(b, loc, param, scalar(opt.weightDecay)));
    Value wn = l2Norm(b, loc, param), un = l2Norm(b, loc, u);
    Value ratio = MinOp::create(b, loc, MaxOp::create(b, loc, DivOp::create(b, loc, wn, un),
                                                      scalar(opt.minCoeff)),
                                scalar(opt.maxCoeff));
    Value zeroNorm = OrOp::create(b, loc, i1, EqualOp::create(b, loc, i1, wn, scalar(0)),
                                  EqualOp::create(b, loc, i1, un, scalar(0)));
    Value c = WhereOp::create(b, loc, f32, zeroNorm, scalar(1.0), ratio);
    Value followed = AddOp::create(b, loc, MulOp::create(b, loc, coeffFreeze, scalar(opt.coeffBeta)),
                                   MulOp::create(b, loc, c, scalar(1.0 - opt.coeffBeta)));
    Value coeff1 = WhereOp::create(b, loc, f32, EqualOp::create(b, loc, i1, c, scalar(1.0)),
                                   coeffFreeze, followed);
    Value lr = body->getArgument(0);
    Value param1 = SubOp::create(b, loc, param, MulOp::create(b, loc, u, MulOp::create(b, loc, lr, c)));
    Value copy = GreaterOp::create(b, loc, i1, body->getArgument(2), scalar(0));
    Value fresh1 = WhereOp::create(b, loc, t, copy, v1, fresh);
    // skip (DeepSpeed's init-only first step) or a non-finite norm: keep.
    Value keep = GreaterOp::create(
        b, loc, i1, MaxOp::create(b, loc, foundInf, body->getArgument(1)), scalar(0));
    auto store = [&](SymbolRefAttr sym, Value old, Value now) {
      ml_program::GlobalStoreOp::create(
          b, loc, sym, WhereOp::create(b, loc, now.getType(), keep, old, now));
    };
    store(msym, m, m1);
    store(vsym, v, v1);
    store(fsym, fresh, fresh1);
    store(csym, coeffFreeze, coeff1);
    store(psym, param, param1);
  }

  /// 1-bit LAMB after freeze_step (lamb.py's compression stage) over all
  /// parameters: each momentum m = b1 m + (1 - b1) g (local gradients)
  /// times its scaling coefficient (fixed at the first such step: the mean
  /// over parameters of |m| / sqrt(n), over its own), all of them joined
  /// into one buffer (initializer layouts) for one 1-bit all-reduce, then
  /// divided back; a fresh variance from the reconstructed gradient; the
  /// trust ratio is the frozen coefficient times a factor max((sqrt(v) +
  /// eps) / (sqrt(v_fresh) + eps)) (mixed with the weight decay's share),
  /// clamped to [factor_min, factor_max] and to within factor_threshold of
  /// the last one.
  template <typename GlobalFn, typename ScalarFn>
  void buildOneBitLambCompressed(OpBuilder &b, ArrayRef<std::pair<Parameter, Value>> grads,
                                 Value gscale, Block *body, GlobalFn &global, ScalarFn &scalar) {
    const OptimizerConfig &opt = config_.optimizer;
    ModuleOp module = body->getParentOp()->getParentOfType<ModuleOp>();
    Location loc = module.getLoc();
    auto f32 = RankedTensorType::get({}, b.getF32Type());
    auto i1 = RankedTensorType::get({}, b.getI1Type());
    Value lr = body->getArgument(0);
    Value first = GreaterOp::create(b, loc, i1, body->getArgument(1), scalar(0));
    struct State {
      Parameter p;
      RankedTensorType t;
      SymbolRefAttr psym, msym, vsym, fsym, ssym, lsym, csym;
      Value grad, param, m, scaling, scaled;
    };
    SmallVector<State> states;
    // The scaling coefficients: stored, or (first step) from the momenta
    // before this step's update.
    Value scaleSum;
    for (auto &[p, g] : grads) {
      State s;
      s.p = p;
      s.grad = g;
      s.t = cast<RankedTensorType>(ml_program::GlobalOp(p.global).getType());
      s.psym = SymbolRefAttr::get(ml_program::GlobalOp(p.global).getSymNameAttr());
      s.msym = global("adam_m:" + p.name, s.t);
      s.vsym = global("adam_v:" + p.name, s.t);
      s.fsym = global("onebit_fresh_v:" + p.name, s.t);
      s.ssym = scalarState(module, "onebit_scaling:" + p.name, 0.0);
      s.lsym = scalarState(module, "onebit_last_factor:" + p.name, 1.0);
      s.csym = scalarState(module, "onebit_lamb_coeff:" + p.name, 0.0);
      s.param = ml_program::GlobalLoadOp::create(b, loc, s.t, s.psym);
      s.m = ml_program::GlobalLoadOp::create(b, loc, s.t, s.msym);
      Value rms = DivOp::create(b, loc, l2Norm(b, loc, s.m),
                                scalar(std::sqrt(static_cast<double>(s.t.getNumElements()))));
      s.scaling = rms; // the momentum's scale, for now
      scaleSum = scaleSum ? Value(AddOp::create(b, loc, scaleSum, rms)) : rms;
      states.push_back(s);
    }
    // DeepSpeed joins the momenta in its parameters' order: the model's,
    // which the exporter kept as the initializers' order.
    llvm::StringMap<int64_t> order;
    if (auto names = module->getAttrOfType<ArrayAttr>("ds.initializer_names"))
      for (auto [i, n] : llvm::enumerate(names.getAsRange<StringAttr>()))
        order.try_emplace(n.getValue(), static_cast<int64_t>(i));
    auto rank = [&](const State &s) {
      auto it = order.find(s.p.initializer);
      return it == order.end() ? INT64_MAX : it->second;
    };
    std::stable_sort(states.begin(), states.end(),
                     [&](const State &a, const State &b) { return rank(a) < rank(b); });
    Value united = DivOp::create(b, loc, scaleSum, scalar(static_cast<double>(states.size())));
    SmallVector<Value> flat;
    int64_t total = 0;
    for (State &s : states) {
      Value stored = ml_program::GlobalLoadOp::create(b, loc, f32, s.ssym);
      s.scaling = WhereOp::create(b, loc, f32, first, DivOp::create(b, loc, united, s.scaling), stored);
      ml_program::GlobalStoreOp::create(b, loc, s.ssym, s.scaling);
      Value grad = MulOp::create(b, loc, s.grad, gscale);
      Value m1 = AddOp::create(b, loc, MulOp::create(b, loc, s.m, scalar(opt.beta1)),
                               MulOp::create(b, loc, grad, scalar(1.0 - opt.beta1)));
      s.scaled = MulOp::create(b, loc, m1, s.scaling);
      Value laid = s.scaled;
      if (s.p.storedTransposed && s.t.getRank() == 2)
        laid = TransposeOp::create(b, loc, ValueRange{laid},
                                   {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr({1, 0}))});
      flat.push_back(ReshapeOp::create(
          b, loc, RankedTensorType::get({s.t.getNumElements()}, s.t.getElementType()), laid));
      total += s.t.getNumElements();
    }
    auto flatT = RankedTensorType::get({total}, b.getF32Type());
    Value joined = flat.size() == 1 ? flat[0]
                                    : Value(ConcatOp::create(b, loc, flatT, flat,
                                                             b.getI64IntegerAttr(0)));
    // One rank: DeepSpeed skips the all-reduce (the scaling still applies).
    joined = compressed(joined, "lamb_momenta", "");
    int64_t offset = 0;
    for (State &s : states) {
      const int64_t n = s.t.getNumElements();
      Value piece = SliceOp::create(b, loc, RankedTensorType::get({n}, b.getF32Type()), joined,
                                    b.getDenseI64ArrayAttr({offset}), b.getDenseI64ArrayAttr({1}));
      offset += n;
      Value shaped;
      if (s.p.storedTransposed && s.t.getRank() == 2) {
        auto laidT = RankedTensorType::get({s.t.getDimSize(1), s.t.getDimSize(0)}, s.t.getElementType());
        shaped = TransposeOp::create(
            b, loc, ValueRange{ReshapeOp::create(b, loc, laidT, piece)},
            {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr({1, 0}))});
      } else {
        shaped = ReshapeOp::create(b, loc, s.t, piece);
      }
      Value m2 = DivOp::create(b, loc, shaped, s.scaling);
      Value v = ml_program::GlobalLoadOp::create(b, loc, s.t, s.vsym);
      Value fresh = ml_program::GlobalLoadOp::create(b, loc, s.t, s.fsym);
      Value rebuilt = DivOp::create(b, loc, SubOp::create(b, loc, m2, MulOp::create(b, loc, s.m, scalar(opt.beta1))),
                                    scalar(1.0 - opt.beta1));
      Value fresh1 = AddOp::create(b, loc, MulOp::create(b, loc, fresh, scalar(opt.beta2)),
                                   MulOp::create(b, loc, MulOp::create(b, loc, rebuilt, rebuilt),
                                                 scalar(1.0 - opt.beta2)));
      Value denom = AddOp::create(b, loc, SqrtOp::create(b, loc, s.t, v), scalar(opt.eps));
      Value prelim = DivOp::create(b, loc, m2, denom);
      Value update = prelim;
      if (opt.weightDecay > 0)
        update = AddOp::create(b, loc, prelim, MulOp::create(b, loc, s.param, scalar(opt.weightDecay)));
      Value denomReal = AddOp::create(b, loc, SqrtOp::create(b, loc, s.t, fresh1), scalar(opt.eps));
      Value factor = reduceAll<ReduceMaxOp>(b, loc, DivOp::create(b, loc, denom, denomReal));
      if (opt.weightDecay > 0) {
        Value share = MinOp::create(b, loc, scalar(1.0),
                                    DivOp::create(b, loc, l2Norm(b, loc, prelim), l2Norm(b, loc, update)));
        factor = AddOp::create(b, loc, MulOp::create(b, loc, factor, share),
                               SubOp::create(b, loc, scalar(1.0), share));
      }
      factor = MaxOp::create(b, loc, MinOp::create(b, loc, factor, scalar(opt.factorMax)),
                             scalar(opt.factorMin));
      Value last = ml_program::GlobalLoadOp::create(b, loc, f32, s.lsym);
      factor = MaxOp::create(b, loc,
                             MinOp::create(b, loc, factor,
                                           MulOp::create(b, loc, last, scalar(1.0 + opt.factorThreshold))),
                             MulOp::create(b, loc, last, scalar(1.0 - opt.factorThreshold)));
      Value coeff = MulOp::create(b, loc, ml_program::GlobalLoadOp::create(b, loc, f32, s.csym), factor);
      Value param1 = SubOp::create(b, loc, s.param,
                                   MulOp::create(b, loc, update, MulOp::create(b, loc, lr, coeff)));
      ml_program::GlobalStoreOp::create(b, loc, s.lsym, factor);
      ml_program::GlobalStoreOp::create(b, loc, s.fsym, fresh1);
      ml_program::GlobalStoreOp::create(b, loc, s.msym, m2);
      ml_program::GlobalStoreOp::create(b, loc, s.psym, param1);
    }
  }

  /// The optimizer programs: @optimizer_step (Phase::Full), and those of
  /// the 1-bit optimizers over each rank's own gradients, where a value
  /// marked `ds.onebit_compress` is what ds-data-parallel averages by the
  /// 1-bit all-reduce (ranks > 1).
  enum class Phase {
    Full,
    OneBitMomentum,  // OneBitAdam after freeze_step: m from local gradients, v frozen
    ZeroOneGradient, // 0/1 Adam between variance updates: m from 1-bit-averaged gradients
    ZeroOneLocal,    // 0/1 Adam after var_freeze_step: a local step
    ZeroOneSync,     // ... and the local steps' sum averaged (1-bit), m rebuilt from it
    OneBitLambMomentum, // OneBitLamb after freeze_step: all momenta in one 1-bit all-reduce
  };
  static const char *programName(Phase ph) {
    switch (ph) {
    case Phase::Full: return "optimizer_step";
    case Phase::OneBitMomentum: return "optimizer_step_compressed";
    case Phase::ZeroOneGradient: return "optimizer_step_onebit_grad";
    case Phase::ZeroOneLocal: return "optimizer_step_local";
    case Phase::ZeroOneSync: return "optimizer_step_sync";
    case Phase::OneBitLambMomentum: return "optimizer_step_lamb_compressed";
    }
    return "";
  }

  /// Marks `v` for ds-data-parallel's 1-bit all-reduce, with error state
  /// `errors` of parameter `param` (ranks > 1; one rank keeps it as is).
  Value compressed(Value v, const std::string &errors, const std::string &param) {
    if (config_.worldSize <= 1) return v;
    Operation *def = v.getDefiningOp();
    Builder b(def->getContext());
    def->setAttr("ds.onebit_compress", b.getStringAttr(errors));
    def->setAttr("ds.onebit_param", b.getStringAttr(param));
    return v;
  }

  /// One parameter's update in a 1-bit optimizer's program over local
  /// gradients (`grad`, clipped): DeepSpeed's OnebitAdam after freeze_step,
  /// or ZeroOneAdam's steps (deepspeed/runtime/fp16/onebit/{adam,zoadam}.py).
  template <typename GlobalFn, typename ScalarFn>
  void buildOneBitUpdate(OpBuilder &b, Phase phase, const Parameter &p, Value param,
                         SymbolRefAttr psym, Value grad, Block *body, GlobalFn &global,
                         ScalarFn &scalar) {
    const OptimizerConfig &opt = config_.optimizer;
    Location loc = param.getLoc();
    Type t = param.getType();
    auto msym = global("adam_m:" + p.name, t), vsym = global("adam_v:" + p.name, t);
    Value m = ml_program::GlobalLoadOp::create(b, loc, t, msym);
    Value v = ml_program::GlobalLoadOp::create(b, loc, t, vsym);
    Value lr = body->getArgument(0);
    auto momentum = [&](Value g) {
      return AddOp::create(b, loc, MulOp::create(b, loc, m, scalar(opt.beta1)),
                           MulOp::create(b, loc, g, scalar(1.0 - opt.beta1)))
          .getResult();
    };
    Value denom = AddOp::create(b, loc, SqrtOp::create(b, loc, t, v), scalar(opt.eps));
    // u = m / (sqrt(v) + eps) + wd param (v frozen in every phase here).
    auto update = [&](Value mNow) {
      Value u = DivOp::create(b, loc, mNow, denom);
      if (opt.weightDecay > 0)
        u = AddOp::create(b, loc, u, MulOp::create(b, loc, param, scalar(opt.weightDecay)));
      return MulOp::create(b, loc, u, lr).getResult();
    };
    Value mNew = m;
    if (phase == Phase::OneBitMomentum) {
      mNew = compressed(momentum(grad), p.name, p.name);
    } else if (phase == Phase::ZeroOneGradient) {
      // One rank has no other gradients to average: DeepSpeed leaves m.
      if (config_.worldSize > 1) mNew = momentum(compressed(grad, p.name, p.name));
    } else {
      mNew = momentum(grad);
    }
    Value step = update(mNew);
    Value newParam = SubOp::create(b, loc, param, step);
    if (phase == Phase::ZeroOneLocal || phase == Phase::ZeroOneSync) {
      // acc, the local steps' sum (0/1 Adam's u): acc -= lr u.
      auto asym = global("onebit_accumulator:" + p.name, t);
      Value acc = SubOp::create(b, loc, ml_program::GlobalLoadOp::create(b, loc, t, asym), step);
      if (phase == Phase::ZeroOneSync) {
        // Back to the last synced point, the sum averaged (1-bit) in
        // gradient scale, m rebuilt from it: param += avg / (sqrt(v) + eps),
        // m = -avg / lrs, acc = 0.
        Value lrs = body->getArgument(1);
        Value back = SubOp::create(b, loc, newParam, acc);
        Value avg = compressed(MulOp::create(b, loc, acc, denom), "acc:" + p.name, p.name);
        newParam = AddOp::create(b, loc, back, DivOp::create(b, loc, avg, denom));
        mNew = DivOp::create(b, loc, NegOp::create(b, loc, avg), lrs);
        acc = FillOp::create(b, loc, t, b.getF64FloatAttr(0.0));
      }
      ml_program::GlobalStoreOp::create(b, loc, asym, acc);
    }
    if (mNew != m) ml_program::GlobalStoreOp::create(b, loc, msym, mNew);
    ml_program::GlobalStoreOp::create(b, loc, psym, newParam);
  }

  LogicalResult buildOptimizerStep(ModuleOp module, Phase phase = Phase::Full) {
    const bool compressedPhase = phase != Phase::Full;
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    const OptimizerConfig &opt = config_.optimizer;
    const bool oneBitLamb = opt.kind == OptimizerConfig::Kind::OneBitLamb;
    const bool oneBit = opt.kind == OptimizerConfig::Kind::OneBitAdam ||
                        opt.kind == OptimizerConfig::Kind::ZeroOneAdam || oneBitLamb;
    bool sgd = opt.kind == OptimizerConfig::Kind::SGD;
    const bool lion = opt.kind == OptimizerConfig::Kind::Lion;
    const bool adagrad = opt.kind == OptimizerConfig::Kind::Adagrad;
    auto f32 = RankedTensorType::get({}, mb.getF32Type());
    SmallVector<std::string> scalarNames =
        sgd              ? SmallVector<std::string>{"lr", "first"}
        : lion || adagrad ? SmallVector<std::string>{"lr"}
                          : SmallVector<std::string>{"lr", "step_size", "bias2_sqrt"};
    // Muon's half has its own rate (muon_lr; the Adam half's is lr).
    const bool muon = opt.kind == OptimizerConfig::Kind::Muon;
    if (muon) scalarNames.push_back("muon_lr");
    // 1-bit Adam's first step only initializes (DeepSpeed's OnebitAdam
    // makes no update then): `skip` leaves everything unchanged.
    if (oneBit && !compressedPhase) scalarNames.push_back("skip");
    if (compressedPhase) scalarNames = {"lr"};
    if (phase == Phase::ZeroOneSync) scalarNames.push_back("lrs"); // lr summed since the last sync
    // 1-bit LAMB: its warm-up's last step copies v into the fresh variance;
    // its first compressed step fixes each momentum's scaling coefficient.
    if (oneBitLamb && !compressedPhase) scalarNames = {"lr", "skip", "fresh"};
    if (phase == Phase::OneBitLambMomentum) scalarNames.push_back("first");
    // OneCycle's momentum cycling: Adam's beta1 is this step's scalar.
    const bool cycledBeta1 = !sgd && !lion && !adagrad &&
                             config_.scheduler.kind == SchedulerConfig::Kind::OneCycle &&
                             config_.scheduler.cycleMomentum;
    if (cycledBeta1) scalarNames.push_back("beta1");
    if (lossScaled()) scalarNames.push_back("inv_loss_scale");
    SmallVector<Type> argTypes(scalarNames.size(), f32);
    auto fn = func::FuncOp::create(mb, loc, programName(phase),
                                   mb.getFunctionType(argTypes, {f32}));
    Block *body = fn.addEntryBlock();
    for (auto [i, n] : llvm::enumerate(scalarNames))
      fn.setArgAttr(i, "ds.name", mb.getStringAttr(n));
    fn.setResultAttr(0, "ds.name", mb.getStringAttr("grad_norm"));
    OpBuilder b = OpBuilder::atBlockEnd(body);
    auto scalar = [&](double v) {
      return ConstantOp::create(b, loc, DenseElementsAttr::get(f32, b.getF32FloatAttr(v)));
    };

    // Global L2 norm of all gradients (torch.nn.utils.clip_grad_norm_).
    // Squares of tensor-parallel slices (a ds.shard reads the parameter)
    // are summed apart from the others so that one all-reduce completes
    // them all, not one per parameter.
    SmallVector<std::pair<Parameter, Value>> grads;
    Value sumSliced, sumWhole;
    for (const Parameter &p : params_) {
      auto it = gradGlobals_.find(p.name);
      if (it == gradGlobals_.end()) continue;
      Value g = ml_program::GlobalLoadOp::create(b, loc, ml_program::GlobalOp(p.global).getType(),
                                                 SymbolRefAttr::get(it->second.getSymNameAttr()));
      grads.push_back({p, g});
      Value sq = MulOp::create(b, loc, g, g);
      SmallVector<int64_t> all;
      for (int64_t i = 0; i < typeOf(g).getRank(); ++i) all.push_back(i);
      Value s = all.empty() ? sq
                            : Value(ReduceSumOp::create(
                                  b, loc, ValueRange{sq},
                                  {b.getNamedAttr("axes", b.getDenseI64ArrayAttr(all)),
                                   b.getNamedAttr("keepdims", b.getBoolAttr(false))}));
      Value &sum = isSliced(module, p) ? sumSliced : sumWhole;
      sum = sum ? Value(AddOp::create(b, loc, sum, s)) : s;
    }
    Value sumSq = sumSliced && sumWhole ? Value(AddOp::create(b, loc, sumSliced, sumWhole))
                                        : (sumSliced ? sumSliced : sumWhole);
    if (!sumSq)
      return module.emitError("no parameter receives a gradient from the loss (is the loss "
                              "computed from the model's output?)");
    auto normOp = SqrtOp::create(b, loc, f32, sumSq);
    normOp->setAttr(kGradNormAttr, b.getUnitAttr());
    Value norm = normOp;
    // fp16: the gradients carry the loss scale; the norm and the update
    // use them unscaled (DeepSpeed's unscale_and_clip_grads).
    Value invScale = lossScaled() ? body->getArgument(llvm::find(scalarNames, "inv_loss_scale") -
                                                      scalarNames.begin())
                                  : Value();
    Value beta1Now = cycledBeta1 ? body->getArgument(3) : Value();
    if (invScale) norm = MulOp::create(b, loc, norm, invScale);
    Value gscale = scalar(1.0);
    if (config_.gradientClipping > 0) {
      // coef = max_norm / (norm + 1e-6), applied only when below 1.
      Value coef = DivOp::create(b, loc, scalar(config_.gradientClipping),
                                 AddOp::create(b, loc, norm, scalar(1e-6)));
      gscale = MinOp::create(b, loc, coef, scalar(1.0));
    }
    if (invScale) gscale = MulOp::create(b, loc, gscale, invScale);
    // An inf or NaN anywhere in the gradients makes the norm non-finite:
    // then no parameter or state changes (the step is skipped; ds-run stops
    // unless a loss scaler handles the overflow).
    auto i1 = RankedTensorType::get({}, b.getI1Type());
    Value isNan = IsNanOp::create(b, loc, i1, norm);
    Value isInf = IsInfOp::create(b, loc, i1, norm);
    Value nonFinite = OrOp::create(b, loc, i1, isNan, isInf);
    Value foundInf = CastOp::create(b, loc, f32, nonFinite);
    if (oneBit && !compressedPhase)
      foundInf = MaxOp::create(b, loc, foundInf,
                               body->getArgument(llvm::find(scalarNames, "skip") -
                                                 scalarNames.begin()));
    auto global = [&](const std::string &name, Type t) {
      // 1-bit Adam's second optimizer program shares the first's moments.
      auto g = module.lookupSymbol<ml_program::GlobalOp>(name);
      if (!g) g = stateGlobal(module, name, t);
      return SymbolRefAttr::get(g.getSymNameAttr());
    };
    if (phase == Phase::OneBitLambMomentum)
      buildOneBitLambCompressed(b, grads, gscale, body, global, scalar);
    for (auto &[p, g] : grads) {
      if (phase == Phase::OneBitLambMomentum) break;
      auto pg = ml_program::GlobalOp(p.global);
      Type t = pg.getType();
      auto psym = SymbolRefAttr::get(pg.getSymNameAttr());
      Value param = ml_program::GlobalLoadOp::create(b, loc, t, psym);
      if (oneBitLamb) {
        buildOneBitLambWarmup(b, p, param, psym, MulOp::create(b, loc, g, gscale), foundInf,
                              body, global, scalar);
      } else if (compressedPhase) {
        buildOneBitUpdate(b, phase, p, param, psym, MulOp::create(b, loc, g, gscale), body,
                          global, scalar);      } else if (muon && p.muon) {
        if (isSliced(module, p))
          return emitError(loc) << "Muon orthogonalizes each whole matrix; '" << p.name
                                << "' is split over tensor-parallel ranks (use AdamW, or no "
                                   "tensor parallelism)";
        // The momentum buffer under SGD's name: what offload, ZeRO and
        // checkpoints know.
        auto bsym = global("momentum:" + p.name, t);
        Value buf = ml_program::GlobalLoadOp::create(b, loc, t, bsym);
        Value muonLr = body->getArgument(llvm::find(scalarNames, "muon_lr") - scalarNames.begin());
        auto upd = MuonUpdateOp::create(
            b, loc, TypeRange{t, t}, param, g, buf, muonLr, gscale, foundInf,
            b.getF64FloatAttr(opt.muonMomentum), b.getF64FloatAttr(opt.weightDecay),
            b.getBoolAttr(true), b.getI64IntegerAttr(5), b.getF64FloatAttr(p.muonScale));
        ml_program::GlobalStoreOp::create(b, loc, psym, upd.getNewParam());
        ml_program::GlobalStoreOp::create(b, loc, bsym, upd.getNewBuf());
      } else if (lion || adagrad) {
        // The one state (Lion's moment, Adagrad's sum of squares) under the
        // name SGD's momentum has: what offload, ZeRO and checkpoints know.
        auto ssym = global("momentum:" + p.name, t);
        Value st = ml_program::GlobalLoadOp::create(b, loc, t, ssym);
        Operation *upd;
        if (lion)
          upd = LionUpdateOp::create(b, loc, TypeRange{t, t}, param, g, st, body->getArgument(0),
                                     gscale, foundInf, b.getF64FloatAttr(opt.beta1),
                                     b.getF64FloatAttr(opt.beta2),
                                     b.getF64FloatAttr(opt.weightDecay));
        else // on the host (offloaded) DeepSpeed runs DeepSpeedCPUAdagrad
          upd = AdagradUpdateOp::create(b, loc, TypeRange{t, t}, param, g, st,
                                        body->getArgument(0), gscale, foundInf,
                                        b.getF64FloatAttr(opt.eps),
                                        b.getF64FloatAttr(opt.weightDecay),
                                        b.getBoolAttr(config_.offloadOptimizer != "none"));
        ml_program::GlobalStoreOp::create(b, loc, psym, upd->getResult(0));
        ml_program::GlobalStoreOp::create(b, loc, ssym, upd->getResult(1));
      } else if (sgd) {
        auto bsym = global("momentum:" + p.name, t);
        Value buf = ml_program::GlobalLoadOp::create(b, loc, t, bsym);
        auto upd = SgdUpdateOp::create(
            b, loc, TypeRange{t, t}, param, g, buf, body->getArgument(0), gscale,
            body->getArgument(1), foundInf, b.getF64FloatAttr(opt.momentum), b.getF64FloatAttr(opt.dampening),
            b.getBoolAttr(opt.nesterov), b.getF64FloatAttr(opt.weightDecay));
        ml_program::GlobalStoreOp::create(b, loc, psym, upd.getNewParam());
        ml_program::GlobalStoreOp::create(b, loc, bsym, upd.getNewBuf());
      } else if (opt.kind == OptimizerConfig::Kind::Lamb) {
        // Its trust ratio needs the whole tensor: no tensor-parallel slice
        // (ZeRO partitions are refused with the config, lambRefusal).
        if (isSliced(module, p))
          return emitError(loc) << "Lamb's trust ratio is over each whole parameter; '" << p.name
                                << "' is split over tensor-parallel ranks (use AdamW, or no "
                                   "tensor parallelism)";
        auto msym = global("adam_m:" + p.name, t), vsym = global("adam_v:" + p.name, t);
        Value m = ml_program::GlobalLoadOp::create(b, loc, t, msym);
        Value v = ml_program::GlobalLoadOp::create(b, loc, t, vsym);
        auto upd = LambUpdateOp::create(
            b, loc, TypeRange{t, t, t}, param, g, m, v, body->getArgument(0),
            body->getArgument(1), body->getArgument(2), gscale, foundInf,
            b.getF64FloatAttr(opt.beta1), b.getF64FloatAttr(opt.beta2), b.getF64FloatAttr(opt.eps),
            b.getF64FloatAttr(opt.weightDecay), b.getF64FloatAttr(opt.maxCoeff),
            b.getF64FloatAttr(opt.minCoeff), b.getBoolAttr(opt.epsInsideSqrt));
        ml_program::GlobalStoreOp::create(b, loc, psym, upd.getNewParam());
        ml_program::GlobalStoreOp::create(b, loc, msym, upd.getNewM());
        ml_program::GlobalStoreOp::create(b, loc, vsym, upd.getNewV());
      } else {
        auto msym = global("adam_m:" + p.name, t), vsym = global("adam_v:" + p.name, t);
        Value m = ml_program::GlobalLoadOp::create(b, loc, t, msym);
        Value v = ml_program::GlobalLoadOp::create(b, loc, t, vsym);
        auto upd = AdamUpdateOp::create(
            b, loc, TypeRange{t, t, t}, param, g, m, v, body->getArgument(0),
            body->getArgument(1), body->getArgument(2), gscale, foundInf, beta1Now,
            b.getF64FloatAttr(opt.beta1),
            b.getF64FloatAttr(opt.beta2), b.getF64FloatAttr(opt.eps),
            b.getF64FloatAttr(opt.weightDecay), b.getBoolAttr(opt.decoupledWeightDecay));
        ml_program::GlobalStoreOp::create(b, loc, psym, upd.getNewParam());
        ml_program::GlobalStoreOp::create(b, loc, msym, upd.getNewM());
        ml_program::GlobalStoreOp::create(b, loc, vsym, upd.getNewV());
      }
    }
    // Gradients restart from zero for the next accumulation window. Not
    // when each micro-step overwrites them: nothing reads them before the
    // next step's store. (Checkpoints hold gradient accumulators as zeros
    // either way, Checkpoint.cpp, which a plan that accumulates, resuming
    // one on more ranks, starts from.)
    if (!gradientsOverwritten())
      for (auto &[p, g] : grads) {
        Value zero = FillOp::create(b, loc, g.getType(), b.getF64FloatAttr(0.0));
        ml_program::GlobalStoreOp::create(
            b, loc, SymbolRefAttr::get(gradGlobals_[p.name].getSymNameAttr()), zero);
      }
    func::ReturnOp::create(b, loc, ValueRange{norm});
    return success();
  }

  void recordConfig(ModuleOp module) {
    Builder b(module.getContext());
    const OptimizerConfig &o = config_.optimizer;
    const SchedulerConfig &s = config_.scheduler;
    const ActivationCheckpointingConfig &ac = config_.activationCheckpointing;
    const char *kind = o.kind == OptimizerConfig::Kind::SGD       ? "sgd"
                       : o.kind == OptimizerConfig::Kind::Lion    ? "lion"
                       : o.kind == OptimizerConfig::Kind::Adagrad ? "adagrad"
                       : o.kind == OptimizerConfig::Kind::Lamb    ? "lamb"
                       : o.kind == OptimizerConfig::Kind::Muon    ? "muon"
                       : o.kind == OptimizerConfig::Kind::OneBitAdam ? "onebit_adam"
                       : o.kind == OptimizerConfig::Kind::ZeroOneAdam ? "zero_one_adam"
                       : o.kind == OptimizerConfig::Kind::OneBitLamb ? "onebit_lamb"
                       : o.decoupledWeightDecay                   ? "adamw"
                                                                  : "adam_l2";
    const char *sched = s.kind == SchedulerConfig::Kind::WarmupLR        ? "warmup_lr"
                        : s.kind == SchedulerConfig::Kind::WarmupDecayLR  ? "warmup_decay_lr"
                        : s.kind == SchedulerConfig::Kind::WarmupCosineLR ? "warmup_cosine_lr"
                        : s.kind == SchedulerConfig::Kind::OneCycle       ? "one_cycle"
                        : s.kind == SchedulerConfig::Kind::LRRangeTest    ? "lr_range_test"
                                                                          : "constant";
    SmallVector<Attribute> inputs;
    for (const std::string &n : dataInputs_) inputs.push_back(b.getStringAttr(n));
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr("micro_batch_size", b.getI64IntegerAttr(config_.microBatchSize)),
        b.getNamedAttr("gradient_accumulation_steps",
                       b.getI64IntegerAttr(config_.gradientAccumulationSteps)),
        b.getNamedAttr("train_batch_size", b.getI64IntegerAttr(config_.trainBatchSize)),
        b.getNamedAttr("world_size", b.getI64IntegerAttr(config_.worldSize)),
        b.getNamedAttr("tensor_parallel", b.getI64IntegerAttr(config_.tensorParallel)),
        b.getNamedAttr("filled_auto", b.getStrArrayAttr(std::vector<StringRef>(
                                          config_.filledAuto.begin(), config_.filledAuto.end()))),
        b.getNamedAttr("elastic_valid_world_sizes",
                       b.getDenseI64ArrayAttr(config_.elasticValidWorldSizes)),
        b.getNamedAttr("zero_stage", b.getI64IntegerAttr(config_.zeroStage)),
        b.getNamedAttr("stage3_param_persistence_threshold",
                       b.getI64IntegerAttr(config_.stage3ParamPersistenceThreshold)),
        b.getNamedAttr("reduce_bucket_size", b.getI64IntegerAttr(config_.reduceBucketSize)),
        b.getNamedAttr("allgather_bucket_size", b.getI64IntegerAttr(config_.allgatherBucketSize)),
        b.getNamedAttr("overlap_comm",
                       b.getI64IntegerAttr(config_.overlapComm >= 0 ? config_.overlapComm
                                           : config_.zeroStage >= 3 ? 1 : 0)),
        b.getNamedAttr("contiguous_gradients", b.getBoolAttr(config_.contiguousGradients)),
        b.getNamedAttr("offload_optimizer", b.getStringAttr(config_.offloadOptimizer)),
        b.getNamedAttr("offload_ratio", b.getF64FloatAttr(config_.offloadRatio)),
        b.getNamedAttr("offload_nvme_path",
                       b.getStringAttr(config_.offloadNvmePath.empty()
                                           ? config_.offloadParamNvmePath
                                           : config_.offloadNvmePath)),
        b.getNamedAttr("offload_param", b.getStringAttr(config_.offloadParam)),
        b.getNamedAttr("offload_buffer_count", b.getI64IntegerAttr(config_.offloadBufferCount)),
        b.getNamedAttr("offload_param_buffer_count",
                       b.getI64IntegerAttr(config_.offloadParamBufferCount)),
        b.getNamedAttr("offload_param_buffer_size",
                       b.getI64IntegerAttr(config_.offloadParamBufferSize)),
        b.getNamedAttr("offload_param_max_in_cpu", b.getI64IntegerAttr(config_.offloadParamMaxInCpu)),
        b.getNamedAttr("sub_group_size", b.getI64IntegerAttr(config_.subGroupSize)),
        b.getNamedAttr("aio_block_size", b.getI64IntegerAttr(config_.aioBlockSize)),
        b.getNamedAttr("aio_queue_depth", b.getI64IntegerAttr(config_.aioQueueDepth)),
        b.getNamedAttr("stage3_prefetch_bucket_size",
                       b.getI64IntegerAttr(config_.stage3PrefetchBucketSize)),
        b.getNamedAttr("stage3_max_live_parameters",
                       b.getI64IntegerAttr(config_.stage3MaxLiveParameters)),
        b.getNamedAttr("stage3_max_reuse_distance",
                       b.getI64IntegerAttr(config_.stage3MaxReuseDistance)),
        b.getNamedAttr("zero_quantized_weights",
                       b.getI64IntegerAttr(config_.zeroQuantizedWeights ? 1 : 0)),
        b.getNamedAttr("zero_quantized_gradients",
                       b.getI64IntegerAttr(config_.zeroQuantizedGradients ? 1 : 0)),
        b.getNamedAttr("gradient_clipping", b.getF64FloatAttr(config_.gradientClipping)),
        b.getNamedAttr("steps_per_print", b.getI64IntegerAttr(config_.stepsPerPrint)),
        b.getNamedAttr("wall_clock_breakdown", b.getBoolAttr(config_.wallClockBreakdown)),
        b.getNamedAttr("csv_monitor", b.getBoolAttr(config_.csvMonitor.enabled)),
        b.getNamedAttr("tensorboard", b.getBoolAttr(config_.tensorboard.enabled)),
        b.getNamedAttr("tensorboard_output_path", b.getStringAttr(config_.tensorboard.outputPath)),
        b.getNamedAttr("tensorboard_job_name", b.getStringAttr(config_.tensorboard.jobName)),
        b.getNamedAttr("flops_profiler", b.getBoolAttr(config_.flopsProfiler)),
        b.getNamedAttr("profile_step", b.getI64IntegerAttr(config_.profileStep)),
        b.getNamedAttr("module_depth", b.getI64IntegerAttr(config_.moduleDepth)),
        b.getNamedAttr("top_modules", b.getI64IntegerAttr(config_.topModules)),
        b.getNamedAttr("profile_detailed", b.getBoolAttr(config_.profileDetailed)),
        b.getNamedAttr("profile_output_file", b.getStringAttr(config_.profileOutputFile)),
        b.getNamedAttr("comms_logger", b.getBoolAttr(config_.commsLogger.enabled)),
        b.getNamedAttr("checkpoint_tag_validation",
                       b.getStringAttr(config_.checkpointTagValidation)),
        b.getNamedAttr("comms_logger_verbose", b.getBoolAttr(config_.commsLogger.verbose)),
        b.getNamedAttr("comms_logger_prof_all", b.getBoolAttr(config_.commsLogger.profAll)),
        b.getNamedAttr("comms_logger_debug", b.getBoolAttr(config_.commsLogger.debug)),
        b.getNamedAttr("comms_logger_prof_ops",
                       b.getStringAttr(llvm::join(config_.commsLogger.profOps, ","))),
        b.getNamedAttr("csv_output_path", b.getStringAttr(config_.csvMonitor.outputPath)),
        b.getNamedAttr("csv_job_name", b.getStringAttr(config_.csvMonitor.jobName)),
        b.getNamedAttr("precision", b.getStringAttr(precisionName(config_.precision.kind))),
        b.getNamedAttr("grad_accum_dtype",
                       b.getStringAttr(precisionName(config_.precision.gradAccum))),
        b.getNamedAttr("communication_data_type",
                       b.getStringAttr(precisionName(config_.precision.communication))),
        b.getNamedAttr("loss_scale", b.getF64FloatAttr(config_.precision.lossScale)),
        b.getNamedAttr("initial_loss_scale",
                       b.getF64FloatAttr(std::ldexp(1.0, config_.precision.initialScalePower))),
        b.getNamedAttr("loss_scale_window", b.getI64IntegerAttr(config_.precision.lossScaleWindow)),
        b.getNamedAttr("hysteresis", b.getI64IntegerAttr(config_.precision.hysteresis)),
        b.getNamedAttr("consecutive_hysteresis",
                       b.getBoolAttr(config_.precision.consecutiveHysteresis)),
        b.getNamedAttr("min_loss_scale", b.getF64FloatAttr(config_.precision.minLossScale)),
        b.getNamedAttr("optimizer", b.getStringAttr(kind)),
        b.getNamedAttr("lr", b.getF64FloatAttr(o.lr)),
        b.getNamedAttr("muon_lr", b.getF64FloatAttr(o.muonLr)),
        b.getNamedAttr("freeze_step", b.getI64IntegerAttr(o.freezeStep)),
        b.getNamedAttr("var_freeze_step", b.getI64IntegerAttr(o.varFreezeStep)),
        b.getNamedAttr("var_update_scaler", b.getI64IntegerAttr(o.varUpdateScaler)),
        b.getNamedAttr("local_step_scaler", b.getI64IntegerAttr(o.localStepScaler)),
        b.getNamedAttr("local_step_clipper", b.getI64IntegerAttr(o.localStepClipper)),
        b.getNamedAttr("beta1", b.getF64FloatAttr(o.beta1)),
        b.getNamedAttr("beta2", b.getF64FloatAttr(o.beta2)),
        b.getNamedAttr("eps", b.getF64FloatAttr(o.eps)),
        b.getNamedAttr("weight_decay", b.getF64FloatAttr(o.weightDecay)),
        b.getNamedAttr("bias_correction", b.getBoolAttr(o.biasCorrection)),
        b.getNamedAttr("momentum", b.getF64FloatAttr(o.momentum)),
        b.getNamedAttr("dampening", b.getF64FloatAttr(o.dampening)),
        b.getNamedAttr("nesterov", b.getBoolAttr(o.nesterov)),
        b.getNamedAttr("schedule", b.getStringAttr(sched)),
        b.getNamedAttr("warmup_min_lr", b.getF64FloatAttr(s.warmupMinLr)),
        b.getNamedAttr("warmup_max_lr", b.getF64FloatAttr(s.warmupMaxLr)),
        b.getNamedAttr("warmup_num_steps", b.getI64IntegerAttr(s.warmupNumSteps)),
        b.getNamedAttr("warmup_linear", b.getBoolAttr(s.warmupLinear)),
        b.getNamedAttr("total_num_steps", b.getI64IntegerAttr(s.totalNumSteps)),
        b.getNamedAttr("warmup_min_ratio", b.getF64FloatAttr(s.warmupMinRatio)),
        b.getNamedAttr("cos_min_ratio", b.getF64FloatAttr(s.cosMinRatio)),
        b.getNamedAttr("cycle_min_lr", b.getF64FloatAttr(s.cycleMinLr)),
        b.getNamedAttr("cycle_max_lr", b.getF64FloatAttr(s.cycleMaxLr)),
        b.getNamedAttr("decay_lr_rate", b.getF64FloatAttr(s.decayLrRate)),
        b.getNamedAttr("cycle_first_step_size", b.getF64FloatAttr(s.cycleFirstStepSize)),
        b.getNamedAttr("cycle_second_step_size", b.getF64FloatAttr(s.cycleSecondStepSize)),
        b.getNamedAttr("cycle_first_stair_count", b.getI64IntegerAttr(s.cycleFirstStairCount)),
        b.getNamedAttr("cycle_second_stair_count", b.getI64IntegerAttr(s.cycleSecondStairCount)),
        b.getNamedAttr("decay_step_size", b.getF64FloatAttr(s.decayStepSize)),
        b.getNamedAttr("cycle_momentum", b.getBoolAttr(s.cycleMomentum)),
        b.getNamedAttr("cycle_min_mom", b.getF64FloatAttr(s.cycleMinMom)),
        b.getNamedAttr("cycle_max_mom", b.getF64FloatAttr(s.cycleMaxMom)),
        b.getNamedAttr("decay_mom_rate", b.getF64FloatAttr(s.decayMomRate)),
        b.getNamedAttr("lr_range_test_min_lr", b.getF64FloatAttr(s.rangeMinLr)),
        b.getNamedAttr("lr_range_test_step_size", b.getI64IntegerAttr(s.rangeStepSize)),
        b.getNamedAttr("lr_range_test_step_rate", b.getF64FloatAttr(s.rangeStepRate)),
        b.getNamedAttr("lr_range_test_staircase", b.getBoolAttr(s.rangeStaircase)),
        b.getNamedAttr("activation_checkpointing", b.getBoolAttr(ac.enabled)),
        b.getNamedAttr("partition_activations", b.getBoolAttr(ac.partitionActivations)),
        b.getNamedAttr("cpu_checkpointing", b.getBoolAttr(ac.cpuCheckpointing)),
        b.getNamedAttr("number_checkpoints", b.getI64IntegerAttr(ac.numberCheckpoints)),
        b.getNamedAttr("data_inputs", b.getArrayAttr(inputs)),
        b.getNamedAttr("rng_input", b.getStringAttr(rngInput_)),
        b.getNamedAttr("export_bindings", b.getArrayAttr(sources_)),
    };
    module->setAttr("ds.training", b.getDictionaryAttr(attrs));
  }

  /// fp16 trains with a loss scale: the micro step takes it, the
  /// optimizer step its reciprocal.
  bool lossScaled() const { return config_.precision.kind == PrecisionConfig::Kind::FP16; }

  TrainingConfig config_;
  SmallVector<Parameter> params_;
  SmallVector<Attribute> sources_;
  llvm::StringMap<ml_program::GlobalOp> gradGlobals_;
  SmallVector<std::string> dataInputs_;
  std::string rngInput_;
};

} // namespace
