//===- DeepSpeedConfig.cpp - reading ds_config.json -----------------------===//
#include "ds/Config/DeepSpeedConfig.h"
#include <limits>

#include <cctype>
#include <cstdio>
#include <functional>
#include <set>
#include "ds/Support/TextLimits.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::ds;
namespace json = llvm::json;

namespace {

/// Where configKeysRead() collects the paths the reader asks for (null:
/// not collecting).
std::set<std::string> *gKeysRead = nullptr;

/// The largest count a config may give (2^53: exactly representable as the
/// JSON number it is written as; far beyond any real size).
constexpr int64_t kMaxCount = int64_t(1) << 53;

/// Walks one JSON object, remembering which keys were read, so that every
/// key left over is reported as unknown.
class Reader {
public:
  Reader(const json::Object *obj, std::string path, std::string file)
      : obj_(obj), path_(std::move(path)), file_(std::move(file)) {}

  llvm::Error error(const llvm::Twine &key, const llvm::Twine &msg) const {
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "%s: %s: %s", file_.c_str(), where(key).c_str(),
                                   msg.str().c_str());
  }
  /// The key's path as the user would type it: control characters (a NUL
  /// would end the message early) written as JSON escapes.
  std::string where(const llvm::Twine &key) const {
    std::string printable;
    for (unsigned char ch : key.str())
      printable += ch < 0x20 || ch == 0x7f ? llvm::formatv("\\u{0:x-4}", unsigned(ch)).str()
                                           : std::string(1, ch);
    return path_.empty() ? printable : path_ + "." + printable;
  }

  /// Whether `key` is present (without counting it as read).
  bool has(llvm::StringRef key) const {
    if (gKeysRead) gKeysRead->insert(where(key));
    return obj_->get(key) != nullptr;
  }
  const json::Value *get(llvm::StringRef key) {
    seen_.insert(key);
    if (gKeysRead) gKeysRead->insert(where(key));
    return obj_->get(key);
  }
  /// What a value should have been, with a word for Hugging Face's "auto"
  /// (its Trainer fills those in before DeepSpeed reads the config).
  static std::string expected(const json::Value *v, llvm::StringRef what) {
    std::optional<llvm::StringRef> str = v ? v->getAsString() : std::nullopt;
    if (str && *str == "auto")
      return (what + ", got \"auto\": Hugging Face's Trainer fills that in from its own "
                     "arguments before DeepSpeed reads the config; write the value or give it "
                     "with ds-opt --set KEY=VALUE")
          .str();
    return what.str();
  }
  llvm::Error number(llvm::StringRef key, double &out, bool positive = false,
                     bool nonNegative = false) {
    const json::Value *v = get(key);
    if (!v) return llvm::Error::success();
    std::optional<double> d = v->getAsNumber();
    if (!d) return error(key, expected(v, "expected a number"));
    if (!std::isfinite(*d)) // JSON's 1e400 reads as infinity
      return error(key, "overflows: the number is outside a double's range (magnitude at most "
                        "1.8e308)");
    if (positive && *d <= 0) return error(key, llvm::formatv("must be > 0, got {0}", *d).str());
    if (nonNegative && *d < 0) return error(key, llvm::formatv("must be >= 0, got {0}", *d).str());
    out = *d;
    return llvm::Error::success();
  }
  llvm::Error integer(llvm::StringRef key, int64_t &out, bool positive = false) {
    const json::Value *v = get(key);
    if (!v) return llvm::Error::success();
    std::optional<int64_t> i = v->getAsInteger();
    if (!i) {
      // 5e8-style numbers are common in DeepSpeed configs: accept exact integers.
      std::optional<double> d = v->getAsNumber();
      if (d && !std::isfinite(*d))
        return error(key, "overflows: the number is outside a double's range (magnitude at "
                          "most 1.8e308)");
      if (d && std::isfinite(*d) && *d == std::floor(*d) && std::fabs(*d) >= kMaxCount)
        return error(key, llvm::formatv("must be at most {0}, got {1:e}", kMaxCount, *d).str());
      if (d && std::isfinite(*d) && *d == std::floor(*d)) i = static_cast<int64_t>(*d);
    }
    if (!i) return error(key, expected(v, "expected an integer"));
    if (*i >= kMaxCount || *i <= -kMaxCount)
      return error(key, llvm::formatv("must be at most {0}, got {1}", kMaxCount, *i).str());
    if (positive && *i <= 0) return error(key, llvm::formatv("must be > 0, got {0}", *i).str());
    out = *i;
    return llvm::Error::success();
  }
  llvm::Error boolean(llvm::StringRef key, bool &out) {
    const json::Value *v = get(key);
    if (!v) return llvm::Error::success();
    std::optional<bool> b = v->getAsBoolean();
    if (!b) return error(key, expected(v, "expected true or false"));
    out = *b;
    return llvm::Error::success();
  }
  llvm::Error string(llvm::StringRef key, std::string &out) {
    const json::Value *v = get(key);
    if (!v) return llvm::Error::success();
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s) return error(key, "expected a string");
    out = s->str();
    return llvm::Error::success();
  }
  /// Fails on keys never asked for.
  llvm::Error finish() const {
    for (const auto &kv : *obj_)
      if (!seen_.contains(kv.first)) {
        // The nearest key this section has, for a misspelling.
        const std::string name = kv.first.str();
        llvm::StringRef key = name, best;
        unsigned bestDistance = ~0u;
        for (const auto &known : seen_) {
          unsigned d = key.lower() == known.getKey().lower()
                           ? 0
                           : key.edit_distance(known.getKey(), /*AllowReplacements=*/true,
                                               /*MaxEditDistance=*/4);
          if (d < bestDistance) bestDistance = d, best = known.getKey();
        }
        if (!best.empty() && bestDistance <= std::max<size_t>(2, key.size() / 4))
          return error(key, "unknown key (did you mean '" + best + "'?)");
        return error(key, "unknown key");
      }
    return llvm::Error::success();
  }
  const std::string &path() const { return path_; }
  const std::string &file() const { return file_; }

private:
  const json::Object *obj_;
  std::string path_, file_;
  llvm::StringSet<> seen_;
};

#define DS_CHECK(expr)                                                         \
  if (llvm::Error e = (expr)) return std::move(e)

/// Keys of DeepSpeed configs that other ds issues implement: present and
/// enabled, they are refused with this note rather than ignored.
bool enabledSection(const json::Value *v) {
  if (!v) return false;
  if (const json::Object *o = v->getAsObject()) {
    if (const json::Value *en = o->get("enabled"))
      if (std::optional<bool> b = en->getAsBoolean()) return *b;
    return true;
  }
  return true;
}

llvm::Error readOptimizer(Reader &top, TrainingConfig &c) {
  const json::Value *v = top.get("optimizer");
  if (!v) return llvm::Error::success(); // AdamW with DeepSpeed's defaults
  const json::Object *o = v->getAsObject();
  if (!o) return top.error("optimizer", "expected an object");
  Reader r(o, "optimizer", top.file());
  std::string type;
  DS_CHECK(r.string("type", type));
  OptimizerConfig &opt = c.optimizer;
  std::string lower = llvm::StringRef(type).lower();
  if (lower == "adam") {
    opt.kind = OptimizerConfig::Kind::Adam;
  } else if (lower == "adamw") {
    opt.kind = OptimizerConfig::Kind::AdamW;
  } else if (lower == "sgd") {
    opt.kind = OptimizerConfig::Kind::SGD;
  } else if (lower == "lamb") {
    opt.kind = OptimizerConfig::Kind::Lamb; // FusedLamb's defaults, as Adam's
  } else if (lower == "lion") {
    opt.kind = OptimizerConfig::Kind::Lion; // FusedLion's defaults: lr 1e-3, betas (0.9, 0.999)
  } else if (lower == "adagrad") {
    opt.kind = OptimizerConfig::Kind::Adagrad; // DeepSpeed's: lr 1e-2, eps 1e-10
    opt.lr = 1e-2;
    opt.eps = 1e-10;
  } else if (lower == "muon") {
    // MuonWithAuxAdam's defaults for its Adam half (original_muon.py).
    opt.kind = OptimizerConfig::Kind::Muon;
    opt.lr = 3e-4;
    opt.beta2 = 0.95;
    opt.eps = 1e-10;
  } else if (lower == "onebitadam" || lower == "zerooneadam" || lower == "onebitlamb") {
    // Adam's defaults; no bias correction.
    opt.kind = lower == "onebitadam"    ? OptimizerConfig::Kind::OneBitAdam
               : lower == "zerooneadam" ? OptimizerConfig::Kind::ZeroOneAdam
                                        : OptimizerConfig::Kind::OneBitLamb;
    opt.biasCorrection = false;
  } else if (type.empty()) {
    return r.error("type",
                   "missing; expected Adam, AdamW, Lamb, SGD, Lion, Adagrad, Muon, OneBitAdam, ZeroOneAdam or "
                   "OneBitLamb");
  } else {
    return r.error("type", "'" + type + "' is not supported (ds has Adam, AdamW, Lamb, SGD, "
                                        "Lion, Adagrad, Muon, OneBitAdam, ZeroOneAdam and "
                                        "OneBitLamb)");
  }
  if (const json::Value *pv = r.get("params")) {
    const json::Object *po = pv->getAsObject();
    if (!po) return r.error("params", "expected an object");
    Reader p(po, "optimizer.params", top.file());
    // torch.optim.SGD has no default learning rate (DeepSpeed passes the
    // params through), so a missing one is an error, not 1e-3.
    if (opt.kind == OptimizerConfig::Kind::SGD && !p.has("lr"))
      return p.error("lr", "is required for SGD (torch.optim.SGD has no default)");
    // lr 0 is DeepSpeed's too (a frozen run, or a schedule that sets it).
    DS_CHECK(p.number("lr", opt.lr, /*positive=*/false, /*nonNegative=*/true));
    DS_CHECK(p.number("weight_decay", opt.weightDecay, false, /*nonNegative=*/true));
    if (opt.kind == OptimizerConfig::Kind::Muon) {
      // DeepSpeed's engine gives `lr` to both halves, then `muon_lr` and
      // `adam_lr` override each (_muon_half_defaults).
      if (p.has("lr")) opt.muonLr = opt.lr;
      DS_CHECK(p.number("muon_lr", opt.muonLr, false, true));
      DS_CHECK(p.number("adam_lr", opt.lr, false, true));
      DS_CHECK(p.number("momentum", opt.muonMomentum, false, true));
      if (opt.muonMomentum >= 1) return p.error("momentum", "must be below 1");
      std::string ns = "gram";
      DS_CHECK(p.string("ns_method", ns));
      if (ns != "gram" && ns != "standard")
        return p.error("ns_method", "'" + ns + "' is not a Newton-Schulz method (gram, standard)");
      bool perHead = false;
      DS_CHECK(p.boolean("per_head_muon", perHead));
      if (perHead)
        return p.error("per_head_muon", "is not supported yet: ds orthogonalizes each whole "
                                        "matrix (set it to false)");
    }
    if (opt.kind == OptimizerConfig::Kind::ZeroOneAdam) {
      DS_CHECK(p.integer("var_freeze_step", opt.varFreezeStep));
      if (opt.varFreezeStep < 0) return p.error("var_freeze_step", "must be >= 0");
      DS_CHECK(p.integer("var_update_scaler", opt.varUpdateScaler, /*positive=*/true));
      DS_CHECK(p.integer("local_step_scaler", opt.localStepScaler, /*positive=*/true));
      DS_CHECK(p.integer("local_step_clipper", opt.localStepClipper, /*positive=*/true));
    }
    if (opt.kind == OptimizerConfig::Kind::OneBitLamb) {
      DS_CHECK(p.number("coeff_beta", opt.coeffBeta, false, true));
      DS_CHECK(p.number("factor_max", opt.factorMax, /*positive=*/true));
      DS_CHECK(p.number("factor_min", opt.factorMin, /*positive=*/true));
      DS_CHECK(p.number("factor_threshold", opt.factorThreshold, false, true));
      if (opt.coeffBeta >= 1) return p.error("coeff_beta", "must be below 1");
      if (opt.factorMin > opt.factorMax)
        return p.error("factor_min", "is above factor_max: the factor's clamp is empty");
    }
    if (opt.kind == OptimizerConfig::Kind::OneBitAdam ||
        opt.kind == OptimizerConfig::Kind::ZeroOneAdam ||
        opt.kind == OptimizerConfig::Kind::OneBitLamb) {
      if (opt.kind != OptimizerConfig::Kind::ZeroOneAdam) {
        DS_CHECK(p.integer("freeze_step", opt.freezeStep));
        if (opt.freezeStep < 0) return p.error("freeze_step", "must be >= 0");
      }
      // How DeepSpeed moves the compressed bits (NCCL, MPI, CUDA-aware
      // MPI): ds runs them over its own communicator either way.
      bool cudaAware = false;
      DS_CHECK(p.boolean("cuda_aware", cudaAware));
      std::string backend = "nccl";
      DS_CHECK(p.string("comm_backend_name", backend));
      if (backend != "nccl" && backend != "mpi" && backend != "hccl" && backend != "compressed")
        return p.error("comm_backend_name",
                       "'" + backend + "' is not one of DeepSpeed's (nccl, mpi, hccl, compressed)");
    }
    if (opt.kind == OptimizerConfig::Kind::Adagrad) {
      DS_CHECK(p.number("eps", opt.eps, /*positive=*/true));
      // torch.optim.Adagrad's other knobs, at their defaults only.
      double lrDecay = 0, initial = 0;
      DS_CHECK(p.number("lr_decay", lrDecay, false, true));
      DS_CHECK(p.number("initial_accumulator_value", initial, false, true));
      if (lrDecay != 0) return p.error("lr_decay", "is not supported (0 only)");
      if (initial != 0) return p.error("initial_accumulator_value", "is not supported (0 only)");
    } else if (opt.kind == OptimizerConfig::Kind::SGD) {
      DS_CHECK(p.number("momentum", opt.momentum, false, true));
      DS_CHECK(p.number("dampening", opt.dampening, false, true));
      DS_CHECK(p.boolean("nesterov", opt.nesterov));
      if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
        return p.error("nesterov", "needs momentum > 0 and dampening 0 (torch.optim.SGD)");
    } else {
      if (const json::Value *bv = p.get("betas")) {
        const json::Array *a = bv->getAsArray();
        std::optional<double> b1 = a && a->size() == 2 ? (*a)[0].getAsNumber() : std::nullopt;
        std::optional<double> b2 = a && a->size() == 2 ? (*a)[1].getAsNumber() : std::nullopt;
        if (!b1 || !b2 || *b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1)
          return p.error("betas", "expected two numbers in [0, 1)");
        opt.beta1 = *b1;
        opt.beta2 = *b2;
      }
      if (opt.kind != OptimizerConfig::Kind::Lion) // Lion has no epsilon
        DS_CHECK(p.number("eps", opt.eps, /*positive=*/true));
      // Below f32's smallest normal it is a subnormal the kernels flush to
      // 0 (FTZ/DAZ, docs/security.md): a zero gradient would divide 0 by 0.
      if (opt.eps < static_cast<double>(std::numeric_limits<float>::min()))
        return p.error("eps", llvm::formatv("must be at least {0:e} (the smallest normal float: "
                                            "ds flushes smaller values to 0), got {1:e}",
                                            static_cast<double>(std::numeric_limits<float>::min()),
                                            opt.eps)
                                  .str());
      if (opt.kind != OptimizerConfig::Kind::Lion)
        DS_CHECK(p.boolean("bias_correction", opt.biasCorrection));
      if (opt.kind == OptimizerConfig::Kind::Adam || opt.kind == OptimizerConfig::Kind::Muon)
        DS_CHECK(p.boolean("adam_w_mode", opt.decoupledWeightDecay));
      if (opt.kind == OptimizerConfig::Kind::OneBitAdam ||
          opt.kind == OptimizerConfig::Kind::ZeroOneAdam ||
          opt.kind == OptimizerConfig::Kind::OneBitLamb) {
        // Accepted and ignored, as DeepSpeed's OnebitAdam does: its update
        // is always m / (sqrt(v) + eps), without bias correction.
        bool inside = false;
        double maxNorm = 0;
        DS_CHECK(p.boolean("eps_inside_sqrt", inside));
        DS_CHECK(p.number("max_grad_norm", maxNorm));
        opt.biasCorrection = false;
      }
      if (opt.kind == OptimizerConfig::Kind::Lamb ||
          opt.kind == OptimizerConfig::Kind::OneBitLamb) {
        DS_CHECK(p.number("max_coeff", opt.maxCoeff, false, true));
        DS_CHECK(p.number("min_coeff", opt.minCoeff, false, true));
        if (opt.kind == OptimizerConfig::Kind::Lamb)
          DS_CHECK(p.boolean("eps_inside_sqrt", opt.epsInsideSqrt));
        if (opt.minCoeff > opt.maxCoeff)
          return p.error("min_coeff", "is above max_coeff: the trust ratio's clamp is empty");
        if (opt.kind == OptimizerConfig::Kind::Lamb && p.has("max_grad_norm"))
          return p.error("max_grad_norm", "is refused by DeepSpeed in optimizer params: use "
                                          "gradient_clipping");
      }
      if (opt.kind != OptimizerConfig::Kind::Lion) {
        bool amsgrad = false;
        DS_CHECK(p.boolean("amsgrad", amsgrad));
        if (amsgrad) return p.error("amsgrad", "is not supported");
      }
      if (opt.kind == OptimizerConfig::Kind::Adam || opt.kind == OptimizerConfig::Kind::AdamW ||
          opt.kind == OptimizerConfig::Kind::Muon) {
        bool torchAdam = false;
        DS_CHECK(p.boolean("torch_adam", torchAdam));
        // torch_adam: DeepSpeed passes the params to torch.optim.Adam(W),
        // whose implementation switches leave the arithmetic as it is;
        // DeepSpeed's own FusedAdam takes none of them.
        for (llvm::StringRef key : {"fused", "foreach", "capturable", "differentiable", "maximize"}) {
          if (!p.has(key)) continue;
          if (!torchAdam)
            return p.error(key, "is torch.optim.Adam's (with \"torch_adam\": true); DeepSpeed's "
                                "FusedAdam takes no such argument");
          bool on = false;
          DS_CHECK(p.boolean(key, on));
          if (key == "maximize" && on)
            return p.error(key, "is not supported (ds minimizes the loss)");
        }
      }
    }
    DS_CHECK(p.finish());
  } else if (opt.kind == OptimizerConfig::Kind::SGD) {
    return r.error("params", "SGD needs params.lr");
  }
  if (opt.kind == OptimizerConfig::Kind::AdamW) opt.decoupledWeightDecay = true;
  return r.finish();
}

llvm::Error readScheduler(Reader &top, TrainingConfig &c) {
  const json::Value *v = top.get("scheduler");
  if (!v) return llvm::Error::success();
  const json::Object *o = v->getAsObject();
  if (!o) return top.error("scheduler", "expected an object");
  Reader r(o, "scheduler", top.file());
  std::string type;
  DS_CHECK(r.string("type", type));
  SchedulerConfig &s = c.scheduler;
  if (type == "WarmupLR") s.kind = SchedulerConfig::Kind::WarmupLR;
  else if (type == "WarmupDecayLR") s.kind = SchedulerConfig::Kind::WarmupDecayLR;
  else if (type == "WarmupCosineLR") s.kind = SchedulerConfig::Kind::WarmupCosineLR;
  else if (type == "OneCycle") s.kind = SchedulerConfig::Kind::OneCycle;
  else if (type == "LRRangeTest") s.kind = SchedulerConfig::Kind::LRRangeTest;
  else
    return r.error("type", "'" + type + "' is not a DeepSpeed scheduler");
  const json::Object *po = nullptr;
  if (const json::Value *pv = r.get("params")) {
    po = pv->getAsObject();
    if (!po) return r.error("params", "expected an object");
  }
  json::Object empty;
  Reader p(po ? po : &empty, "scheduler.params", top.file());
  int64_t lastBatch = -1;
  if (s.kind == SchedulerConfig::Kind::OneCycle || s.kind == SchedulerConfig::Kind::LRRangeTest) {
    DS_CHECK(p.integer("last_batch_iteration", lastBatch));
    if (lastBatch != -1)
      return p.error("last_batch_iteration", "only -1 (--resume continues a schedule)");
  }
  if (s.kind == SchedulerConfig::Kind::OneCycle) {
    for (const char *k : {"cycle_min_lr", "cycle_max_lr"})
      if (!p.has(k)) return p.error(k, "is required for OneCycle");
    DS_CHECK(p.number("cycle_min_lr", s.cycleMinLr, false, true));
    DS_CHECK(p.number("cycle_max_lr", s.cycleMaxLr, false, true));
    DS_CHECK(p.number("decay_lr_rate", s.decayLrRate, false, true));
    DS_CHECK(p.number("cycle_first_step_size", s.cycleFirstStepSize, /*positive=*/true));
    if (p.has("cycle_second_step_size"))
      DS_CHECK(p.number("cycle_second_step_size", s.cycleSecondStepSize, false, true));
    DS_CHECK(p.integer("cycle_first_stair_count", s.cycleFirstStairCount));
    if (p.has("cycle_second_stair_count"))
      DS_CHECK(p.integer("cycle_second_stair_count", s.cycleSecondStairCount));
    if (s.cycleFirstStairCount < 0 || s.cycleSecondStairCount < -1)
      return p.error("cycle_first_stair_count", "stair counts must be >= 0");
    DS_CHECK(p.number("decay_step_size", s.decayStepSize, false, true));
    DS_CHECK(p.boolean("cycle_momentum", s.cycleMomentum));
    DS_CHECK(p.number("cycle_min_mom", s.cycleMinMom, false, true));
    DS_CHECK(p.number("cycle_max_mom", s.cycleMaxMom, false, true));
    DS_CHECK(p.number("decay_mom_rate", s.decayMomRate, false, true));
    if (s.cycleMomentum && (s.cycleMinMom >= 1 || s.cycleMaxMom >= 1))
      return p.error("cycle_max_mom", "momenta (Adam's beta1) must be below 1");
    if (s.cycleSecondStepSize < 0) s.cycleSecondStepSize = s.cycleFirstStepSize;
    if (s.cycleSecondStairCount < 0) s.cycleSecondStairCount = s.cycleFirstStairCount;
    DS_CHECK(p.finish());
    return r.finish();
  }
  if (s.kind == SchedulerConfig::Kind::LRRangeTest) {
    DS_CHECK(p.number("lr_range_test_min_lr", s.rangeMinLr, false, true));
    DS_CHECK(p.integer("lr_range_test_step_size", s.rangeStepSize, /*positive=*/true));
    DS_CHECK(p.number("lr_range_test_step_rate", s.rangeStepRate, false, true));
    DS_CHECK(p.boolean("lr_range_test_staircase", s.rangeStaircase));
    DS_CHECK(p.finish());
    return r.finish();
  }
  std::string warmupType = "log";
  DS_CHECK(p.string("warmup_type", warmupType));
  if (warmupType != "log" && warmupType != "linear")
    return p.error("warmup_type", "expected 'log' or 'linear', got '" + warmupType + "'");
  s.warmupLinear = warmupType == "linear";
  DS_CHECK(p.integer("warmup_num_steps", s.warmupNumSteps));
  if (s.warmupNumSteps < 0) return p.error("warmup_num_steps", "must be >= 0");
  // DeepSpeed's constructor argument for continuing a schedule by hand;
  // ds continues from a checkpoint's step instead (--resume).
  int64_t lastBatchIteration = -1;
  DS_CHECK(p.integer("last_batch_iteration", lastBatchIteration));
  if (lastBatchIteration != -1)
    return p.error("last_batch_iteration",
                   llvm::formatv("only -1 (the schedule starts at step 1; --resume continues "
                                 "it from the checkpoint's step), got {0}",
                                 lastBatchIteration)
                       .str());
  if (s.kind == SchedulerConfig::Kind::WarmupCosineLR) {
    DS_CHECK(p.number("warmup_min_ratio", s.warmupMinRatio, false, true));
    DS_CHECK(p.number("cos_min_ratio", s.cosMinRatio, false, true));
  } else {
    DS_CHECK(p.number("warmup_min_lr", s.warmupMinLr, false, true));
    DS_CHECK(p.number("warmup_max_lr", s.warmupMaxLr, false, true));
  }
  if (s.kind != SchedulerConfig::Kind::WarmupLR) {
    if (!po || !po->get("total_num_steps"))
      return p.error("total_num_steps", "is required for " + type);
    DS_CHECK(p.integer("total_num_steps", s.totalNumSteps, /*positive=*/true));
    // DeepSpeed's cosine phase divides by their difference.
    if (s.kind == SchedulerConfig::Kind::WarmupCosineLR && s.totalNumSteps <= s.warmupNumSteps)
      return p.error("total_num_steps",
                     llvm::formatv("must be greater than warmup_num_steps ({0}) for "
                                   "WarmupCosineLR, got {1}",
                                   s.warmupNumSteps, s.totalNumSteps)
                         .str());
  }
  DS_CHECK(p.finish());
  return r.finish();
}

/// A section's object, or null when absent; `error` set when not an object.
const json::Object *section(Reader &r, llvm::StringRef key, llvm::Error &error) {
  const json::Value *v = r.get(key);
  if (!v) return nullptr;
  if (const json::Object *o = v->getAsObject()) return o;
  error = r.error(key, "expected an object");
  return nullptr;
}

/// A flag ds accepts only at the value it implements.
llvm::Error onlyValue(Reader &r, llvm::StringRef key, bool supported, llvm::StringRef why) {
  bool v = supported;
  DS_CHECK(r.boolean(key, v));
  if (v == supported) return llvm::Error::success();
  return r.error(key, (llvm::Twine(v ? "true" : "false") + " is not supported: " + why).str());
}

/// "bf16" (or its old name "bfloat16") and "fp16", with DeepSpeed's keys
/// and defaults (deepspeed/runtime/precision_config.py).
llvm::Error readPrecision(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  llvm::StringRef bf16Key = top.has("bf16") || !top.has("bfloat16") ? "bf16" : "bfloat16";
  if (top.has("bf16") && top.has("bfloat16"))
    return top.error("bfloat16", "is the old name of bf16; give only one of them");
  bool bf16 = false, fp16 = false;
  if (const json::Object *o = section(top, bf16Key, err)) {
    Reader r(o, bf16Key.str(), top.file());
    DS_CHECK(r.boolean("enabled", bf16));
    // ds accumulates gradients in fp32 and checks every step's gradient
    // norm for inf/NaN anyway, so these two change nothing.
    bool ignored = false;
    DS_CHECK(r.boolean("immediate_grad_update", ignored));
    DS_CHECK(r.boolean("check_grad_overflow", ignored));
    DS_CHECK(onlyValue(r, "bf16_master_weights_and_grads", false,
                       "ds keeps fp32 master weights and gradients"));
    DS_CHECK(onlyValue(r, "bf16_optimizer_states", false, "ds keeps fp32 optimizer state"));
    DS_CHECK(r.finish());
  }
  if (err) return err;
  PrecisionConfig &p = c.precision;
  if (const json::Object *o = section(top, "fp16", err)) {
    Reader r(o, "fp16", top.file());
    DS_CHECK(r.boolean("enabled", fp16));
    DS_CHECK(onlyValue(r, "auto_cast", false,
                       "ds casts where its precision pass decides, not the model's inputs"));
    DS_CHECK(r.number("loss_scale", p.lossScale, false, /*nonNegative=*/true));
    DS_CHECK(r.integer("initial_scale_power", p.initialScalePower));
    if (p.initialScalePower < 0 || p.initialScalePower > 126)
      return r.error("initial_scale_power",
                     llvm::formatv("must be in [0, 126], got {0}", p.initialScalePower).str());
    DS_CHECK(r.integer("loss_scale_window", p.lossScaleWindow, /*positive=*/true));
    DS_CHECK(r.integer("hysteresis", p.hysteresis, /*positive=*/true));
    DS_CHECK(r.boolean("consecutive_hysteresis", p.consecutiveHysteresis));
    DS_CHECK(r.number("min_loss_scale", p.minLossScale, /*positive=*/true));
    // The scale multiplies the f32 loss: beyond f32's range it is inf (every
    // step skipped), below its smallest normal a value flushed to 0.
    for (auto [key, v] : {std::pair<const char *, double>{"loss_scale", p.lossScale},
                          {"min_loss_scale", p.minLossScale}})
      if (v != 0 && (v < static_cast<double>(std::numeric_limits<float>::min()) ||
                     v > static_cast<double>(std::numeric_limits<float>::max())))
        return r.error(key, llvm::formatv("must be within the range of normal floats "
                                          "[{0:e}, {1:e}], got {2:e}",
                                          static_cast<double>(std::numeric_limits<float>::min()),
                                          static_cast<double>(std::numeric_limits<float>::max()),
                                          v)
                                .str());
    DS_CHECK(onlyValue(r, "fp16_master_weights_and_grads", false,
                       "ds keeps fp32 master weights and gradients"));
    DS_CHECK(r.finish());
  }
  if (err) return err;
  if (bf16 && fp16)
    return top.error("fp16", (llvm::Twine("and ") + bf16Key +
                              " are both enabled; enable one of them").str());
  p.kind = bf16 ? PrecisionConfig::Kind::BF16
                : fp16 ? PrecisionConfig::Kind::FP16 : PrecisionConfig::Kind::FP32;
  // Gradient reductions: the training type unless said otherwise, as in
  // DeepSpeed's engine.
  p.communication = p.kind;
  std::string comm;
  DS_CHECK(top.string("communication_data_type", comm));
  std::string lower = llvm::StringRef(comm).lower();
  if (!comm.empty() && lower != "fp32" && lower != "fp16" && lower != "bf16")
    return top.error("communication_data_type",
                     "expected \"fp32\", \"fp16\" or \"bf16\", got \"" + comm + "\"");
  if (!comm.empty()) p.communication = *parseDtypeName(lower);
  // data_types.grad_accum_dtype: the gradient accumulators' type, the
  // training type unless said otherwise (DeepSpeed's engine).
  p.gradAccum = p.kind;
  if (const json::Object *o = section(top, "data_types", err)) {
    Reader r(o, "data_types", top.file());
    std::string accum;
    DS_CHECK(r.string("grad_accum_dtype", accum));
    std::string l = llvm::StringRef(accum).lower();
    if (!accum.empty()) {
      auto kind = parseDtypeName(l);
      if (!kind)
        return r.error("grad_accum_dtype",
                       "expected \"fp32\", \"fp16\" or \"bf16\", got \"" + accum + "\"");
      if (*kind != PrecisionConfig::Kind::FP32 && *kind != p.kind)
        return r.error("grad_accum_dtype",
                       "is " + l + " but the model trains in " + precisionName(p.kind) +
                           " (gradients accumulate in the training type or in fp32)");
      p.gradAccum = *kind;
    }
    DS_CHECK(r.finish());
  }
  if (err) return err;
  return llvm::Error::success();
}

/// flops_profiler (deepspeed/profiling/config.py): enabled, profile_step,
/// module_depth, top_modules, detailed, output_file, recompute_fwd_factor.
llvm::Error readFlopsProfiler(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "flops_profiler", err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  Reader r(o, "flops_profiler", top.file());
  DS_CHECK(r.boolean("enabled", c.flopsProfiler));
  DS_CHECK(r.integer("profile_step", c.profileStep, /*positive=*/true));
  DS_CHECK(r.integer("module_depth", c.moduleDepth));
  DS_CHECK(r.integer("top_modules", c.topModules, /*positive=*/true));
  DS_CHECK(r.boolean("detailed", c.profileDetailed));
  if (const json::Value *v = r.get("output_file"); v && v->kind() != json::Value::Null) {
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s) return r.error("output_file", "expected a string or null");
    c.profileOutputFile = s->str();
  }
  double recompute = 0; // activation recomputation: ds recomputes nothing
  DS_CHECK(r.number("recompute_fwd_factor", recompute, false, /*nonNegative=*/true));
  return r.finish();
}

/// The collectives ds runs, by the names DeepSpeed's comms logger gives
/// them (deepspeed/comm/comm.py).
constexpr const char *kCommsLoggerOps[] = {"all_reduce", "all_gather_into_tensor",
                                           "reduce_scatter_tensor", "broadcast",
                                           "all_to_all_single", "compressed_allreduce"};

/// comms_logger (deepspeed/comm/config.py): enabled, verbose, prof_all,
/// prof_ops, debug.
llvm::Error readCommsLogger(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "comms_logger", err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  TrainingConfig::CommsLogger &l = c.commsLogger;
  Reader r(o, "comms_logger", top.file());
  DS_CHECK(r.boolean("enabled", l.enabled));
  DS_CHECK(r.boolean("verbose", l.verbose));
  DS_CHECK(r.boolean("prof_all", l.profAll));
  DS_CHECK(r.boolean("debug", l.debug));
  if (const json::Value *v = r.get("prof_ops")) {
    const json::Array *a = v->getAsArray();
    if (!a) return r.error("prof_ops", "expected a list of collective names");
    for (const json::Value &e : *a) {
      std::optional<llvm::StringRef> name = e.getAsString();
      if (!name || !llvm::is_contained(kCommsLoggerOps, *name))
        return r.error("prof_ops", (name ? "'" + name->str() + "'" : std::string("an entry")) +
                                       " is not a collective ds runs (all_reduce, "
                                       "all_gather_into_tensor, reduce_scatter_tensor, "
                                       "broadcast, all_to_all_single, compressed_allreduce)");
      l.profOps.push_back(name->str());
    }
  }
  return r.finish();
}

/// activation_checkpointing (deepspeed/runtime/activation_checkpointing/
/// config.py): every key DeepSpeed reads, with its defaults.
llvm::Error readActivationCheckpointing(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "activation_checkpointing", err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  ActivationCheckpointingConfig &a = c.activationCheckpointing;
  a.enabled = true;
  Reader r(o, "activation_checkpointing", top.file());
  DS_CHECK(r.boolean("partition_activations", a.partitionActivations));
  DS_CHECK(r.boolean("cpu_checkpointing", a.cpuCheckpointing));
  DS_CHECK(r.boolean("contiguous_memory_optimization", a.contiguousMemoryOptimization));
  DS_CHECK(r.boolean("synchronize_checkpoint_boundary", a.synchronizeCheckpointBoundary));
  DS_CHECK(r.boolean("profile", a.profile));
  if (const json::Value *v = o->get("number_checkpoints"); v && v->kind() == json::Value::Null)
    (void)r.get("number_checkpoints");
  else
    DS_CHECK(r.integer("number_checkpoints", a.numberCheckpoints, /*positive=*/true));
  return r.finish();
}

/// tensor_parallel in a training config: DeepSpeed's AutoTP training
/// (autotp_size), or `given` ranks (ds-opt --tensor-parallel, 0: none
/// given). Splits the world into tp groups; c.worldSize becomes the
/// data-parallel size.
llvm::Error readTensorParallel(Reader &top, TrainingConfig &c, int64_t given) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "tensor_parallel", err);
  if (err) return err;
  int64_t size = 0;
  if (o) {
    Reader r(o, "tensor_parallel", top.file());
    DS_CHECK(r.integer("autotp_size", size, /*positive=*/true));
    // Communication overlap and layer presets: ds schedules its
    // collectives and finds the column/row pairs itself.
    bool overlap = false;
    DS_CHECK(r.boolean("tp_overlap_comm", overlap));
    std::string preset;
    DS_CHECK(r.string("preset_model", preset));
    if (r.has("tp_size"))
      return r.error("tp_size", "is DeepSpeed-Inference's key; a training config names the "
                                "tensor-parallel ranks in autotp_size");
    if (r.has("partition_config"))
      return r.error("partition_config",
                     "is not supported yet: ds finds the column- and row-parallel pairs from "
                     "the graph (leave it out)");
    DS_CHECK(r.finish());
    if (!o->get("autotp_size"))
      return top.error("tensor_parallel", "needs autotp_size (the tensor-parallel ranks)");
  }
  if (given > 0 && size > 0 && given != size)
    return top.error("tensor_parallel.autotp_size",
                     llvm::formatv("is {0}, but ds-opt --tensor-parallel says {1}", size, given)
                         .str());
  const bool fromFlag = given > 0 && size <= 0;
  if (given > 0) size = given;
  if (size <= 0) size = 1;
  if (c.worldSize % size) {
    std::string msg = llvm::formatv("{0} tensor-parallel ranks do not divide the world of {1}",
                                    size, c.worldSize);
    if (fromFlag)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--tensor-parallel " + std::to_string(size) + ": " + msg);
    return top.error("tensor_parallel.autotp_size", msg);
  }
  c.tensorParallel = size;
  c.worldSize /= size;
  return llvm::Error::success();
}

/// csv_monitor or tensorboard: {enabled, output_path, job_name}
/// (deepspeed/monitor/config.py).
llvm::Error readMonitor(Reader &top, llvm::StringRef key, MonitorConfig &m) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, key, err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  Reader r(o, key.str(), top.file());
  DS_CHECK(r.boolean("enabled", m.enabled));
  DS_CHECK(r.string("output_path", m.outputPath));
  DS_CHECK(r.string("job_name", m.jobName));
  if (m.jobName.empty() || m.jobName.find('/') != std::string::npos ||
      m.jobName.find('\0') != std::string::npos || m.jobName == "." || m.jobName == "..")
    return r.error("job_name", "must be a plain directory name");
  return r.finish();
}

/// An offload section's device and nvme_path: "cpu", "nvme" (with a path)
/// or "none", and the ZeRO stage the device needs (`stageNeeded`, or "").
llvm::Error checkOffloadDevice(Reader &r, const std::string &device, const std::string &nvmePath,
                               bool stageOk, const char *stageNeeded) {
  if (device != "cpu" && device != "nvme" && device != "none")
    return r.error("device", "expected \"cpu\", \"nvme\" or \"none\", got \"" + device + "\"");
  if (device != "none" && !stageOk)
    return r.error("device", "\"" + device + "\" needs " + stageNeeded);
  // Where the swap files go is the run machine's business (ds-run
  // --nvme-path overrides it), but DeepSpeed requires the key.
  if (device == "nvme" && nvmePath.empty())
    return r.error("nvme_path", "is required with \"device\": \"nvme\" (a directory on the "
                                "NVMe drive)");
  return llvm::Error::success();
}

/// zero_optimization.offload_optimizer: DeepSpeed's keys and defaults.
/// "cpu" is ZeRO-Offload, "nvme" ZeRO-Infinity's optimizer swapping (stages
/// 1-3).
llvm::Error readOffloadOptimizer(const json::Object &zo, const std::string &file,
                                 TrainingConfig &c) {
  const json::Value *v = zo.get("offload_optimizer");
  const json::Object *o = v->getAsObject();
  Reader top(&zo, "zero_optimization", file);
  if (!o) return top.error("offload_optimizer", "expected an object");
  Reader r(o, "zero_optimization.offload_optimizer", file);
  std::string device = "none", nvmePath;
  DS_CHECK(r.string("device", device));
  DS_CHECK(r.string("nvme_path", nvmePath));
  DS_CHECK(r.boolean("pin_memory", c.offloadPinMemory));
  DS_CHECK(r.integer("buffer_count", c.offloadBufferCount, /*positive=*/true));
  DS_CHECK(r.number("ratio", c.offloadRatio));
  // DeepSpeed's run-time knobs of its swapper: fast_init speeds its
  // initialization, pipeline_read/pipeline_write (and the older pipeline)
  // overlap its swaps with the step, which ds's planned swaps always do.
  bool fastInit = false, pipelineRead = false, pipelineWrite = false, pipeline = false;
  DS_CHECK(r.boolean("fast_init", fastInit));
  DS_CHECK(r.boolean("pipeline_read", pipelineRead));
  DS_CHECK(r.boolean("pipeline_write", pipelineWrite));
  DS_CHECK(r.boolean("pipeline", pipeline));
  DS_CHECK(r.finish());
  if (c.offloadRatio < 0 || c.offloadRatio > 1)
    return r.error("ratio", llvm::formatv("must be in [0, 1], got {0}", c.offloadRatio).str());
  if (c.offloadBufferCount > 4096)
    return r.error("buffer_count",
                   llvm::formatv("must be at most 4096, got {0}", c.offloadBufferCount).str());
  DS_CHECK(checkOffloadDevice(r, device, nvmePath, c.zeroStage > 0,
                              "zero_optimization.stage 1, 2 or 3 (ZeRO-Offload offloads the "
                              "partitioned optimizer state, as in DeepSpeed)"));
  c.offloadOptimizer = device;
  c.offloadNvmePath = nvmePath;
  return llvm::Error::success();
}

/// zero_optimization.offload_param: DeepSpeed's keys and defaults; stage 3
/// only, as DeepSpeed.
llvm::Error readOffloadParam(const json::Object &zo, const std::string &file, TrainingConfig &c) {
  const json::Object *o = zo.getObject("offload_param");
  Reader top(&zo, "zero_optimization", file);
  if (!o) return top.error("offload_param", "expected an object");
  Reader r(o, "zero_optimization.offload_param", file);
  std::string device = "none", nvmePath;
  bool pin = false;
  DS_CHECK(r.string("device", device));
  DS_CHECK(r.string("nvme_path", nvmePath));
  DS_CHECK(r.boolean("pin_memory", pin));
  DS_CHECK(r.integer("buffer_count", c.offloadParamBufferCount, /*positive=*/true));
  DS_CHECK(r.integer("buffer_size", c.offloadParamBufferSize, true));
  DS_CHECK(r.integer("max_in_cpu", c.offloadParamMaxInCpu));
  DS_CHECK(r.finish());
  if (c.offloadParamMaxInCpu < 0)
    return r.error("max_in_cpu",
                   llvm::formatv("must be >= 0, got {0}", c.offloadParamMaxInCpu).str());
  if (c.offloadParamBufferCount > 4096)
    return r.error("buffer_count",
                   llvm::formatv("must be at most 4096, got {0}", c.offloadParamBufferCount).str());
  DS_CHECK(checkOffloadDevice(r, device, nvmePath, c.zeroStage == 3,
                              "zero_optimization.stage 3 (parameter offload partitions the "
                              "parameters first, as in DeepSpeed)"));
  c.offloadParam = device;
  c.offloadParamNvmePath = nvmePath;
  return llvm::Error::success();
}

/// The top-level `aio` section (the NVMe swapper's asynchronous I/O):
/// DeepSpeed's keys, each checked.
llvm::Error readAio(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "aio", err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  Reader r(o, "aio", top.file());
  DS_CHECK(r.integer("block_size", c.aioBlockSize, /*positive=*/true));
  DS_CHECK(r.integer("queue_depth", c.aioQueueDepth, true));
  DS_CHECK(r.integer("thread_count", c.aioThreadCount, true));
  DS_CHECK(r.boolean("single_submit", c.aioSingleSubmit));
  DS_CHECK(r.boolean("overlap_events", c.aioOverlapEvents));
  int64_t intraOp = 1; // DeepSpeed's I/O threads per request; io_uring needs none
  DS_CHECK(r.integer("intra_op_parallelism", intraOp, /*positive=*/true));
  bool gds = false;
  DS_CHECK(r.boolean("use_gds", gds));
  if (gds) return r.error("use_gds", "true (GPUDirect Storage) is not supported");
  if (c.aioBlockSize % 4096 != 0 || c.aioBlockSize > (int64_t(1) << 30))
    return r.error("block_size",
                   llvm::formatv("must be a multiple of 4096 (O_DIRECT) of at most 1 GiB, got {0}",
                                 c.aioBlockSize).str());
  if (c.aioQueueDepth > 4096)
    return r.error("queue_depth",
                   llvm::formatv("must be at most 4096, got {0}", c.aioQueueDepth).str());
  return r.finish();
}

/// zero_optimization: the stage and DeepSpeed's bucketing, overlap and
/// stage-3 knobs; keys of other features are refused naming the key.
llvm::Error readZeroOptimization(Reader &r, TrainingConfig &c) {
  const json::Value *z = r.get("zero_optimization");
  if (!z) return llvm::Error::success();
  const json::Object *zo = z->getAsObject();
  if (!zo) return r.error("zero_optimization", "expected an object");
  const json::Value *stage = zo->get("stage");
  std::optional<int64_t> st = stage ? stage->getAsInteger() : std::optional<int64_t>(0);
  if (!st || *st < 0 || *st > 3)
    return r.error("zero_optimization.stage", "expected 0, 1, 2 or 3");
  c.zeroStage = *st;
  // Element counts: DeepSpeed configs write them as 5e8-style numbers too.
  auto count = [&](llvm::StringRef key, int64_t &out) -> llvm::Error {
    const json::Value *v = zo->get(key);
    if (!v) return llvm::Error::success();
    std::optional<double> d = v->getAsNumber();
    if (!d || *d < 0 || *d != std::floor(*d))
      return r.error(llvm::Twine("zero_optimization.") + key,
                     Reader::expected(v, "expected a non-negative integer"));
    if (*d >= kMaxCount)
      return r.error(llvm::Twine("zero_optimization.") + key,
                     llvm::formatv("must be at most {0}, got {1:e}", kMaxCount, *d).str());
    out = static_cast<int64_t>(*d);
    return llvm::Error::success();
  };
  auto flag = [&](llvm::StringRef key, bool &out) -> llvm::Error {
    const json::Value *v = zo->get(key);
    if (!v) return llvm::Error::success();
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return r.error(llvm::Twine("zero_optimization.") + key, Reader::expected(v, "expected true or false"));
    out = *b;
    return llvm::Error::success();
  };
  auto knob = [&](llvm::StringRef k) -> llvm::Error {
    // Keys the section gives are read as they come (configKeysRead).
    if (gKeysRead) gKeysRead->insert(("zero_optimization." + k).str());
    if (k == "stage") return llvm::Error::success();
    if (k == "stage3_param_persistence_threshold") return count(k, c.stage3ParamPersistenceThreshold);
    if (k == "reduce_bucket_size") return count(k, c.reduceBucketSize);
    if (k == "allgather_bucket_size") return count(k, c.allgatherBucketSize);
    if (k == "stage3_prefetch_bucket_size") return count(k, c.stage3PrefetchBucketSize);
    if (k == "stage3_max_live_parameters") return count(k, c.stage3MaxLiveParameters);
    if (k == "stage3_max_reuse_distance") return count(k, c.stage3MaxReuseDistance);
    if (k == "contiguous_gradients") return flag(k, c.contiguousGradients);
    if (k == "overlap_comm") {
      bool on = false;
      if (llvm::Error e = flag(k, on)) return e;
      c.overlapComm = on ? 1 : 0;
      return llvm::Error::success();
    }
    if (k == "reduce_scatter") {
      bool on = true;
      if (llvm::Error e = flag(k, on)) return e;
      if (on) return llvm::Error::success();
      return r.error("zero_optimization.reduce_scatter",
                     "false (all-reduce instead of reduce-scatter) is not supported; ds "
                     "always reduce-scatters into the partitions");
    }
    // The unit of the offloaded optimizer step (ds-offload).
    if (k == "sub_group_size") {
      if (llvm::Error e = count(k, c.subGroupSize)) return e;
      if (c.subGroupSize <= 0)
        return r.error("zero_optimization.sub_group_size",
                       llvm::formatv("must be positive, got {0}", c.subGroupSize).str());
      return llvm::Error::success();
    }
    // A key of DeepSpeed's example configs that changes nothing here: the
    // 16-bit save gathers nothing in fp32 training (whole weights come from
    // --zero-to-fp32 / --export-onnx).
    if (k == "stage3_gather_16bit_weights_on_model_save" ||
        k == "gather_16bit_weights_on_model_save" || k == "stage3_gather_fp16_weights_on_model_save") {
      bool ignored = false;
      return flag(k, ignored);
    }
    if (k == "offload_optimizer") return readOffloadOptimizer(*zo, r.file(), c);
    // DeepSpeed's older spelling of offload_optimizer {"device": "cpu"}.
    if (k == "cpu_offload") {
      bool on = false;
      if (llvm::Error e = flag(k, on)) return e;
      if (on && zo->get("offload_optimizer"))
        return r.error("zero_optimization.cpu_offload",
                       "and offload_optimizer both given; keep offload_optimizer");
      if (on && c.zeroStage == 0)
        return r.error("zero_optimization.cpu_offload",
                       "needs zero_optimization.stage 1, 2 or 3 (ZeRO-Offload)");
      if (on) c.offloadOptimizer = "cpu";
      return llvm::Error::success();
    }
    // Keys of DeepSpeed's example configs whose result ds always has:
    // partitions are all-gathered after the update (allgather_partitions),
    // checkpoints keep fp32 state and reshard to any world size
    // (load_from_fp32_weights, elastic_checkpoint), and parameters a step
    // does not use are simply not gathered (ignore_unused_parameters).
    if (k == "allgather_partitions" || k == "load_from_fp32_weights" ||
        k == "elastic_checkpoint" || k == "ignore_unused_parameters") {
      bool ignored = false;
      return flag(k, ignored);
    }
    if (k == "offload_param") return readOffloadParam(*zo, r.file(), c);
    // ZeRO++ (arXiv 2306.10209). qwZ: int8 blocks in the stage-3 parameter
    // all-gathers.
    // qgZ: int8 blocks in the gradient reduce-scatters.
    if (k == "zero_quantized_weights" || k == "zero_quantized_gradients") {
      bool &on = k == "zero_quantized_weights" ? c.zeroQuantizedWeights : c.zeroQuantizedGradients;
      if (llvm::Error e = flag(k, on)) return e;
      if (on && c.zeroStage != 3)
        return r.error(llvm::Twine("zero_optimization.") + k,
                       k == "zero_quantized_weights"
                           ? "quantizes the parameter all-gathers of stage 3; set "
                             "zero_optimization.stage to 3"
                           : "quantizes the gradient reduce-scatters of stage 3 (as DeepSpeed's "
                             "ZeRO++); set zero_optimization.stage to 3");
      return llvm::Error::success();
    }
    // hpZ and qgZ are not built yet: their neutral values are accepted.
    if (k == "zero_hpz_partition_size") {
      int64_t size = 1;
      if (llvm::Error e = count(k, size)) return e;
      if (size <= 1) return llvm::Error::success();
      return r.error("zero_optimization.zero_hpz_partition_size",
                     "above 1 (hpZ's secondary partition) is not supported yet; every rank "
                     "gathers from the whole data-parallel group");
    }
    if (k == "zero_quantized_nontrainable_weights") {
      bool on = false;
      if (llvm::Error e = flag(k, on)) return e;
      if (!on) return llvm::Error::success();
      return r.error("zero_optimization.zero_quantized_nontrainable_weights",
                     "true is not supported (ds trains every parameter it gathers); "
                     "zero_quantized_weights (qwZ) is");
    }
    // DeepSpeed orders the ranks' gradient copies to the host with it (a
    // run-time scheduling choice); ds's transfers are planned, and the
    // result is the same either way.
    if (k == "round_robin_gradients") {
      bool ignored = false;
      return flag(k, ignored);
    }
    if (gKeysRead) gKeysRead->erase(("zero_optimization." + k).str());
    return r.error(llvm::Twine("zero_optimization.") + k,
                   "is not supported yet (ds supports stage, reduce_bucket_size, "
                   "allgather_bucket_size, overlap_comm, contiguous_gradients, reduce_scatter, "
                   "offload_optimizer, offload_param, sub_group_size, zero_quantized_weights, "
                   "zero_quantized_gradients and the stage3_* prefetch, persistence, live and "
                   "reuse knobs)");
  };
  for (const auto &kv : *zo)
    if (llvm::Error e = knob(kv.first)) return e;
  // One swap file per rank holds everything swapped: one directory.
  if (c.offloadOptimizer == "nvme" && c.offloadParam == "nvme" &&
      c.offloadNvmePath != c.offloadParamNvmePath)
    return r.error("zero_optimization.offload_param.nvme_path",
                   "\"" + c.offloadParamNvmePath + "\" differs from offload_optimizer.nvme_path \"" +
                       c.offloadNvmePath +
                       "\"; ds keeps one swap file per rank, so give both the same directory");
  return llvm::Error::success();
}

/// DeepSpeed 0.19 keys that change nothing ds does (GPU-only mechanisms,
/// services, what ds always does), checked for their type and accepted;
/// and the features not built yet, refused with the reason.
llvm::Error readInertKeys(Reader &r, TrainingConfig &c) {
  bool flag = false;
  // memory_breakdown: ds-opt --report prints the breakdown before a run;
  // load_universal_checkpoint: ds loads any checkpoint into any layout;
  // graph_harvesting: CUDA graphs; use_data_before_expert_parallelism: MoE.
  for (llvm::StringRef key : {"memory_breakdown", "load_universal_checkpoint", "graph_harvesting",
                              "use_data_before_expert_parallelism"})
    DS_CHECK(r.boolean(key, flag));
  std::string type;
  DS_CHECK(r.string("seq_parallel_communication_data_type", type));
  if (!type.empty() && type != "fp32" && type != "fp16" && type != "bf16")
    return r.error("seq_parallel_communication_data_type",
                   "expected \"fp32\", \"fp16\" or \"bf16\", got \"" + type + "\"");
  // compile (ds compiles the whole step ahead of time), nebula (ds writes
  // its own checkpoints), eigenvalue (read by DeepSpeed only inside
  // quantize_training): objects accepted as they are.
  for (llvm::StringRef key : {"compile", "nebula", "eigenvalue"})
    if (const json::Value *v = r.get(key); v && !v->getAsObject())
      return r.error(key, "expected an object");
  if (r.has("sparse_gradients")) {
    DS_CHECK(r.boolean("sparse_gradients", flag));
    if (flag)
      return r.error("sparse_gradients", "is not supported yet: ds reduces embedding gradients "
                                         "dense (set it to false)");
  }
  llvm::Error err = llvm::Error::success();
  const json::Object *checkpoint = section(r, "checkpoint", err);
  if (err) return err;
  if (const json::Object *o = checkpoint) {
    Reader ck(o, "checkpoint", r.file());
    std::string tag;
    DS_CHECK(ck.string("tag_validation", tag));
    std::string lower = llvm::StringRef(tag).lower();
    if (!tag.empty() && lower != "ignore" && lower != "warn" && lower != "fail")
      return ck.error("tag_validation", "expected Ignore, Warn or Fail, got \"" + tag + "\"");
    if (!tag.empty()) c.checkpointTagValidation = lower;
    DS_CHECK(ck.boolean("load_universal", flag));
    DS_CHECK(ck.boolean("use_node_local_storage", flag));
    for (llvm::StringRef key : {"parallel_write", "writer"})
      if (const json::Value *v = ck.get(key); v && !v->getAsObject())
        return ck.error(key, "expected an object");
    DS_CHECK(ck.finish());
  }
  // Features other work builds: refused while enabled, with what to use.
  const std::pair<const char *, const char *> refused[] = {
      {"hybrid_engine", "(the RLHF hybrid engine)"},
      {"weight_quantization", "(ds-opt --quantize int8-dynamic or int4-weight quantizes "
                              "weights for inference)"},
      {"quantize_training", "(quantization-aware training)"},
      {"progressive_layer_drop", "(progressive layer dropping)"},
      {"torch_autocast", "(use the bf16 or fp16 section: ds's mixed precision)"}};
  for (const auto &[key, what] : refused)
    if (enabledSection(r.get(key)))
      return r.error(key, llvm::Twine("is not supported yet ") + what +
                              "; remove it or set \"enabled\": false");
  return llvm::Error::success();
}

/// DeepSpeed's `elasticity` section: when enabled, the global batch, the
/// micro batch and the accumulation steps come from it for this run's
/// data-parallel size (ds/Config/Elasticity.h), replacing the batch keys.
llvm::Error readElasticity(Reader &top, TrainingConfig &c) {
  llvm::Error err = llvm::Error::success();
  const json::Object *o = section(top, "elasticity", err);
  if (err) return err;
  if (!o) return llvm::Error::success();
  ElasticityConfig &el = c.elasticity;
  Reader r(o, "elasticity", top.file());
  DS_CHECK(r.boolean("enabled", el.enabled));
  if (!el.enabled) {
    // Disabled: DeepSpeed reads none of it.
    for (const auto &kv : *o) (void)r.get(kv.first);
    return llvm::Error::success();
  }
  for (const char *key : {"max_train_batch_size", "micro_batch_sizes"})
    if (!r.has(key))
      return r.error(key, "is required when elasticity is enabled (DeepSpeed's rule)");
  DS_CHECK(r.integer("max_train_batch_size", el.maxTrainBatchSize, /*positive=*/true));
  const json::Array *mbs = r.get("micro_batch_sizes")->getAsArray();
  if (!mbs || mbs->empty())
    return r.error("micro_batch_sizes", "expected a non-empty list of positive integers");
  el.microBatchSizes.clear();
  for (const json::Value &v : *mbs) {
    std::optional<int64_t> i = v.getAsInteger();
    if (!i || *i <= 0 || *i >= kMaxCount)
      return r.error("micro_batch_sizes", "expected a non-empty list of positive integers");
    el.microBatchSizes.push_back(*i);
  }
  DS_CHECK(r.integer("min_gpus", el.minGpus, true));
  DS_CHECK(r.integer("max_gpus", el.maxGpus, true));
  DS_CHECK(r.integer("num_gpus_per_node", el.numGpusPerNode, true));
  DS_CHECK(r.integer("model_parallel_size", el.modelParallelSize, true));
  DS_CHECK(r.number("min_time", el.minTime, false, /*nonNegative=*/true)); // the scheduler's
  DS_CHECK(r.boolean("prefer_larger_batch", el.preferLargerBatch));
  DS_CHECK(r.boolean("ignore_non_elastic_batch_info", el.ignoreNonElasticBatchInfo));
  DS_CHECK(r.number("version", el.version, true));
  DS_CHECK(r.finish());
  char version[32];
  std::snprintf(version, sizeof version, "%g", el.version);
  if (el.version > 0.2)
    return r.error("version", llvm::Twine(version) +
                                  " is newer than the latest elasticity version, 0.2");
  if (el.version != 0.1 && el.version != 0.2)
    return r.error("version", llvm::Twine(version) + ": elasticity has versions 0.1 and 0.2");
  if (el.modelParallelSize > 1 && el.version != 0.2)
    return r.error("model_parallel_size", "needs elasticity version 0.2");
  if (el.modelParallelSize != c.tensorParallel && el.modelParallelSize > 1)
    return r.error("model_parallel_size",
                   llvm::formatv("is {0}, but the run has {1} tensor-parallel ranks",
                                 el.modelParallelSize, c.tensorParallel)
                       .str());
  // The batch keys elasticity replaces (DeepSpeed refuses them beside it).
  for (const char *key : {"train_batch_size", "train_micro_batch_size_per_gpu",
                          "gradient_accumulation_steps"}) {
    if (!top.has(key)) continue;
    if (!el.ignoreNonElasticBatchInfo)
      return top.error(key, "is set beside an enabled elasticity section, which computes the "
                            "batch sizes; remove it or set elasticity.ignore_non_elastic_batch_info");
    (void)top.get(key);
  }
  llvm::Expected<ElasticBatch> b = computeElasticBatch(el, c.worldSize);
  if (!b) return top.error("elasticity", llvm::toString(b.takeError()));
  c.trainBatchSize = b->trainBatchSize;
  c.microBatchSize = b->microBatchSize;
  c.gradientAccumulationSteps = b->gradientAccumulationSteps;
  c.elasticValidWorldSizes = b->validWorldSizes;
  return llvm::Error::success();
}

/// DeepSpeed's batch arithmetic: train_batch_size = micro batch *
/// accumulation steps * world size; any two give the third.
llvm::Error readBatchSizes(Reader &r, TrainingConfig &c) {
  int64_t worldSize = c.worldSize;
  int64_t tbs = 0, mbs = 0, gas = 0;
  bool haveTbs = r.has("train_batch_size"), haveMbs = r.has("train_micro_batch_size_per_gpu"),
       haveGas = r.has("gradient_accumulation_steps");
  DS_CHECK(r.integer("train_batch_size", tbs, /*positive=*/true));
  DS_CHECK(r.integer("train_micro_batch_size_per_gpu", mbs, true));
  DS_CHECK(r.integer("gradient_accumulation_steps", gas, true));
  auto mismatch = [&](const char *why) {
    return r.error("train_batch_size",
                   llvm::formatv("{0}: train_batch_size {1} != train_micro_batch_size_per_gpu "
                                 "{2} * gradient_accumulation_steps {3} * {5} {4}",
                                 why, tbs, mbs, gas, worldSize,
                                 c.tensorParallel > 1 ? "data-parallel size" : "world size")
                       .str());
  };
  // Products in checked arithmetic: absurd sizes are an error, not overflow.
  auto times = [](int64_t a, int64_t b) -> std::optional<int64_t> {
    int64_t p;
    if (__builtin_mul_overflow(a, b, &p)) return std::nullopt;
    return p;
  };
  auto tooLarge = [&] {
    return r.error("train_batch_size",
                   "the batch sizes are too large (their product overflows 64-bit integers)");
  };
  if (haveTbs && haveMbs && haveGas) {
    auto want = times(mbs, gas);
    if (want) want = times(*want, worldSize);
    if (!want) return tooLarge();
    if (tbs != *want) return mismatch("batch sizes disagree");
  } else if (haveTbs && haveMbs) {
    auto per = times(mbs, worldSize);
    if (!per) return tooLarge();
    if (tbs % *per) return mismatch("not divisible");
    gas = tbs / *per;
  } else if (haveTbs && haveGas) {
    auto per = times(gas, worldSize);
    if (!per) return tooLarge();
    if (tbs % *per) return mismatch("not divisible");
    mbs = tbs / *per;
  } else if (haveMbs) {
    if (!haveGas) gas = 1;
    auto all = times(mbs, gas);
    if (all) all = times(*all, worldSize);
    if (!all) return tooLarge();
    tbs = *all;
  } else if (haveTbs) {
    gas = 1;
    if (tbs % worldSize) return mismatch("not divisible");
    mbs = tbs / worldSize;
  } else {
    return r.error("train_batch_size", "either train_batch_size or "
                                       "train_micro_batch_size_per_gpu must be given");
  }
  // The plan's bound (runtime/plan/PlanFile.cpp), named here with its key.
  if (gas > (int64_t(1) << 20))
    return r.error(haveGas ? "gradient_accumulation_steps" : "train_batch_size",
                   llvm::formatv("gradient_accumulation_steps {0} is over 2^20", gas).str());
  c.trainBatchSize = tbs;
  c.microBatchSize = mbs;
  c.gradientAccumulationSteps = gas;
  return llvm::Error::success();
}

/// The first key that repeats within one JSON object, with the line, or
/// "" (llvm::json keeps the last silently; DeepSpeed's loader refuses
/// duplicates). The nesting is bounded by checkNesting first.
std::string duplicateKey(llvm::StringRef text) {
  struct Frame {
    bool object;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  int64_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') ++line;
    if (c == '{' || c == '[') stack.push_back({c == '{', {}});
    else if ((c == '}' || c == ']') && !stack.empty()) stack.pop_back();
    else if (c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) value += text[j++];
        value += text[j];
      }
      // Keys compare decoded ("optimize\u0072" is "optimizer"): the text
      // parsed as JSON already, so the quoted run is a valid string.
      if (value.find('\\') != std::string::npos) {
        llvm::Expected<json::Value> decoded = json::parse(text.slice(i, j + 1));
        if (!decoded) llvm::consumeError(decoded.takeError());
        else if (auto str = decoded->getAsString()) value = str->str();
      }
      i = j;
      size_t k = j + 1;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k < text.size() && text[k] == ':' && !stack.empty() && stack.back().object &&
          !stack.back().keys.insert(value).second)
        return "key \"" + value + "\" appears twice in one object (line " +
               std::to_string(line) + ")";
    }
  }
  return "";
}

} // namespace

namespace {
llvm::Error configError(llvm::StringRef name, const llvm::Twine &msg) {
  return llvm::createStringError(std::make_error_code(std::errc::invalid_argument), "%s: %s",
                                 name.str().c_str(), msg.str().c_str());
}

/// --set KEY=VALUE: the dotted path's last key gets VALUE (JSON, or else a
/// string), objects on the way created.
llvm::Error applyOverrides(json::Value &root, llvm::ArrayRef<std::string> overrides) {
  for (const std::string &spec : overrides) {
    auto [key, value] = llvm::StringRef(spec).split('=');
    if (key.empty() || key.size() == spec.size())
      return configError("--set " + spec, "expected KEY=VALUE (KEY a dotted path such as "
                                          "optimizer.params.lr)");
    llvm::SmallVector<llvm::StringRef> path;
    key.split(path, '.');
    json::Object *o = root.getAsObject();
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      if (path[i].empty() || !o)
        return configError("--set " + spec, "'" + key + "' is not a path of keys");
      json::Value &next = (*o)[path[i]];
      if (next.kind() == json::Value::Null) next = json::Object();
      o = next.getAsObject();
      if (!o)
        return configError("--set " + spec, "'" + path[i] + "' is not an object in the config");
    }
    if (!o || path.back().empty())
      return configError("--set " + spec, "'" + key + "' is not a path of keys");
    llvm::Expected<json::Value> v = json::parse(value);
    if (v) (*o)[path.back()] = std::move(*v);
    else {
      llvm::consumeError(v.takeError());
      (*o)[path.back()] = value.str();
    }
  }
  return llvm::Error::success();
}

bool isAuto(const json::Value *v) {
  std::optional<llvm::StringRef> s = v ? v->getAsString() : std::nullopt;
  return s && *s == "auto";
}

/// Hugging Face's "auto" (its Trainer fills them from its arguments): the
/// values ds can know are filled (`filled` lists them for the report), the
/// batch keys are left to DeepSpeed's arithmetic, and any other is an error
/// naming the key and ds-opt --set.
llvm::Error resolveAuto(json::Object &root, llvm::StringRef name,
                        std::vector<std::string> &filled, int64_t modelMicroBatch) {
  auto fill = [&](json::Object *o, llvm::StringRef path, llvm::StringRef key, json::Value v) {
    if (!o || !isAuto(o->get(key))) return;
    (*o)[key] = std::move(v);
    filled.push_back((path.empty() ? key.str() : (path + "." + key).str()));
  };
  // The Trainer's defaults (TrainingArguments) and DeepSpeed's.
  fill(&root, "", "gradient_clipping", 1.0);
  for (const char *sec : {"bf16", "fp16"})
    if (json::Object *o = root.getObject(sec)) fill(o, sec, "enabled", false);
  if (json::Object *opt = root.getObject("optimizer"))
    if (json::Object *p = opt->getObject("params")) {
      fill(p, "optimizer.params", "betas", json::Array{0.9, 0.999});
      fill(p, "optimizer.params", "eps", 1e-8);
      fill(p, "optimizer.params", "weight_decay", 0.0);
    }
  if (json::Object *sch = root.getObject("scheduler"))
    if (json::Object *p = sch->getObject("params")) {
      fill(p, "scheduler.params", "warmup_min_lr", 0.0);
      fill(p, "scheduler.params", "warmup_num_steps", 0);
    }
  if (json::Object *z = root.getObject("zero_optimization"))
    for (auto [key, value] : {std::pair<const char *, int64_t>{"reduce_bucket_size", 500000000},
                              {"allgather_bucket_size", 500000000},
                              {"stage3_prefetch_bucket_size", 50000000},
                              {"stage3_param_persistence_threshold", 100000},
                              {"stage3_max_live_parameters", 1000000000},
                              {"stage3_max_reuse_distance", 1000000000}})
      fill(z, "zero_optimization", key, value);
  // The micro batch: the Trainer's per-device batch, which is the batch
  // the model's inputs have (exported or --input-shape) when they fix one.
  if (modelMicroBatch > 0 && isAuto(root.get("train_micro_batch_size_per_gpu"))) {
    root["train_micro_batch_size_per_gpu"] = modelMicroBatch;
    filled.push_back("train_micro_batch_size_per_gpu (" + std::to_string(modelMicroBatch) +
                     ", the model's input batch)");
  }
  // Batch sizes: an "auto" one is left to the others (any two give the third).
  int autos = 0;
  for (const char *key : {"train_batch_size", "train_micro_batch_size_per_gpu",
                          "gradient_accumulation_steps"})
    if (isAuto(root.get(key))) {
      root.erase(key);
      filled.push_back(std::string(key) + " (from the other batch sizes)");
      ++autos;
    }
  if (autos > 0 && !root.get("train_batch_size") && !root.get("train_micro_batch_size_per_gpu"))
    return configError(name, "the batch sizes are \"auto\" and no other gives them: give the "
                             "micro batch, e.g. ds-opt --set train_micro_batch_size_per_gpu=8, "
                             "or fix the model's batch with --input-shape");
  // Anything else "auto" ds cannot know.
  std::string left;
  std::function<void(const json::Object &, const std::string &)> walk =
      [&](const json::Object &o, const std::string &path) {
        for (const auto &kv : o) {
          std::string k = path.empty() ? kv.first.str() : path + "." + kv.first.str();
          if (isAuto(&kv.second) && left.empty()) left = k;
          if (const json::Object *sub = kv.second.getAsObject()) walk(*sub, k);
        }
      };
  walk(root, "");
  if (!left.empty())
    return configError(name, left + ": is \"auto\", which Hugging Face's Trainer fills from its "
                                    "arguments and ds cannot know: give it, e.g. ds-opt --set " +
                                    left + "=VALUE");
  return llvm::Error::success();
}
} // namespace

llvm::Expected<TrainingConfig> mlir::ds::parseDeepSpeedConfig(llvm::StringRef text,
                                                              llvm::StringRef name,
                                                              int64_t worldSize,
                                                              int64_t tensorParallel,
                                                              llvm::ArrayRef<std::string> overrides,
                                                              int64_t modelMicroBatch) {
  if (std::string deep = checkNesting(text); !deep.empty())
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument), "%s: %s",
                                   name.str().c_str(), deep.c_str());
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "%s: not valid JSON: %s", name.str().c_str(),
                                   llvm::toString(parsed.takeError()).c_str());
  if (std::string dup = duplicateKey(text); !dup.empty())
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument), "%s: %s",
                                   name.str().c_str(), dup.c_str());
  if (!parsed->getAsObject())
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "%s: expected a JSON object", name.str().c_str());
  DS_CHECK(applyOverrides(*parsed, overrides));
  std::vector<std::string> filledAuto;
  DS_CHECK(resolveAuto(*parsed->getAsObject(), name, filledAuto, modelMicroBatch));
  const json::Object *root = parsed->getAsObject();
  if (worldSize < 1)
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "%s: world size must be >= 1, got %lld", name.str().c_str(),
                                   static_cast<long long>(worldSize));
  TrainingConfig c;
  c.worldSize = worldSize;
  c.filledAuto = std::move(filledAuto);
  Reader r(root, "", name.str());
  // Tensor parallelism first: the batch arithmetic counts data-parallel
  // ranks only (DeepSpeed's with an mpu).
  DS_CHECK(readTensorParallel(r, c, tensorParallel));

  // Sections other issues implement: refused while enabled.
  for (llvm::StringRef key : {"amp", "pipeline", "compression_training",
                              "sparse_attention", "curriculum_learning", "data_efficiency",
                              "autotuning"}) {
    if (enabledSection(r.get(key)))
      return r.error(key, "is not supported yet; remove it or set \"enabled\": false");
  }
  DS_CHECK(readZeroOptimization(r, c));
  DS_CHECK(readAio(r, c));
  DS_CHECK(readPrecision(r, c));
  // Logging and bookkeeping keys with no effect on the computation.
  DS_CHECK(r.boolean("wall_clock_breakdown", c.wallClockBreakdown));
  DS_CHECK(readMonitor(r, "csv_monitor", c.csvMonitor));
  DS_CHECK(readMonitor(r, "tensorboard", c.tensorboard));
  DS_CHECK(readFlopsProfiler(r, c));
  DS_CHECK(readActivationCheckpointing(r, c));
  DS_CHECK(readCommsLogger(r, c));
  for (llvm::StringRef key : {"dump_state",
                              "prescale_gradients", "gradient_predivide_factor",
                              "wandb"})
    (void)r.get(key);
  DS_CHECK(readInertKeys(r, c));
  // DeepSpeed's permission to wrap a client optimizer, and its check that
  // an offloaded optimizer is its own CPU Adam: ds's optimizers are its
  // own either way.
  bool ignored = false;
  DS_CHECK(r.boolean("zero_allow_untested_optimizer", ignored));
  DS_CHECK(r.boolean("zero_force_ds_cpu_optimizer", ignored));

  DS_CHECK(readElasticity(r, c));
  if (!c.elasticity.enabled) DS_CHECK(readBatchSizes(r, c));
  DS_CHECK(r.number("gradient_clipping", c.gradientClipping, false, /*nonNegative=*/true));
  DS_CHECK(r.integer("steps_per_print", c.stepsPerPrint, /*positive=*/true));
  DS_CHECK(readOptimizer(r, c));
  DS_CHECK(readScheduler(r, c));
  if (c.scheduler.kind != SchedulerConfig::Kind::Constant &&
      c.scheduler.kind != SchedulerConfig::Kind::WarmupCosineLR &&
      c.scheduler.kind != SchedulerConfig::Kind::OneCycle &&
      c.scheduler.kind != SchedulerConfig::Kind::LRRangeTest && !root->get("optimizer"))
    c.optimizer.lr = c.scheduler.warmupMaxLr;
  // OneCycle cycles Adam's beta1 and holds its beta2 at 0.99 (DeepSpeed's
  // constructor); optimizers without betas do not cycle (a warning there).
  const bool hasBetas = c.optimizer.kind == OptimizerConfig::Kind::Adam ||
                        c.optimizer.kind == OptimizerConfig::Kind::AdamW ||
                        c.optimizer.kind == OptimizerConfig::Kind::Lion;
  if (c.scheduler.kind == SchedulerConfig::Kind::OneCycle && c.scheduler.cycleMomentum) {
    if (c.optimizer.kind == OptimizerConfig::Kind::Lion ||
        c.optimizer.kind == OptimizerConfig::Kind::OneBitAdam ||
        c.optimizer.kind == OptimizerConfig::Kind::ZeroOneAdam ||
        c.optimizer.kind == OptimizerConfig::Kind::OneBitLamb)
      return r.error("scheduler", std::string("OneCycle's cycle_momentum cycles ") +
                                      (c.optimizer.kind == OptimizerConfig::Kind::Lion ? "Lion's"
                                       : c.optimizer.kind == OptimizerConfig::Kind::OneBitAdam
                                           ? "OneBitAdam's"
                                       : c.optimizer.kind == OptimizerConfig::Kind::ZeroOneAdam
                                           ? "ZeroOneAdam's"
                                           : "OneBitLamb's") +
                                      " betas[0], which ds does for Adam and AdamW only: set "
                                      "scheduler.params.cycle_momentum to false");
    if (!hasBetas) c.scheduler.cycleMomentum = false; // as DeepSpeed (it warns)
    else c.optimizer.beta2 = 0.99;
  }
  // Lamb's trust ratio and Muon's orthogonalization need each parameter
  // whole, which a ZeRO partition is not: DeepSpeed lists no LAMB among
  // ZeRO's optimizers (zero/utils.py), and orthogonalizes Muon's whole
  // gradient before ZeRO cuts it (get_flat_partition), where ds's ZeRO
  // updates run on a rank's block.
  const bool lamb = c.optimizer.kind == OptimizerConfig::Kind::Lamb;
  if ((lamb || c.optimizer.kind == OptimizerConfig::Kind::Muon) && c.zeroStage > 0 &&
      c.worldSize / std::max<int64_t>(1, c.tensorParallel) > 1)
    return r.error("optimizer",
                   (lamb ? "Lamb's trust ratio needs each parameter whole"
                         : "Muon orthogonalizes each whole weight matrix") +
                       std::string(", and ZeRO stage ") + std::to_string(c.zeroStage) +
                       " partitions them over the data-parallel ranks " +
                       (lamb ? "(DeepSpeed does not support Lamb with ZeRO either)"
                             : "(ds does not support that with Muon yet)") +
                       ": use stage 0");
  // DeepSpeed's 1-bit optimizers assert ZeRO is off; the rest are ds's
  // limits for now.
  if (c.optimizer.kind == OptimizerConfig::Kind::OneBitAdam ||
      c.optimizer.kind == OptimizerConfig::Kind::ZeroOneAdam ||
      c.optimizer.kind == OptimizerConfig::Kind::OneBitLamb) {
    const char *name = c.optimizer.kind == OptimizerConfig::Kind::OneBitAdam    ? "OneBitAdam "
                       : c.optimizer.kind == OptimizerConfig::Kind::ZeroOneAdam ? "ZeroOneAdam "
                                                                                 : "OneBitLamb ";
    const char *why = c.zeroStage > 0 ? "runs without ZeRO (DeepSpeed asserts stage 0)"
                      : c.tensorParallel > 1 ? "runs without tensor parallelism in ds"
                      : c.precision.kind != PrecisionConfig::Kind::FP32
                          ? "runs in fp32 in ds (bf16 and fp16 are not supported with it yet)"
                          : nullptr;
    if (why) return r.error("optimizer", std::string(name) + why);
  }
  DS_CHECK(r.finish());
  return c;
}

llvm::Expected<TrainingConfig> mlir::ds::readDeepSpeedConfig(const std::string &path,
                                                             int64_t worldSize,
                                                             int64_t tensorParallel,
                                                             llvm::ArrayRef<std::string> overrides,
                                                             int64_t modelMicroBatch) {
  // A FIFO or device would block or never end: only regular files are read.
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && !llvm::sys::fs::is_regular_file(st))
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "%s is not a regular file", path.c_str());
  if (!llvm::sys::fs::status(path, st) &&
      st.getSize() > static_cast<uint64_t>(maxConfigBytes()))
    return llvm::createStringError(std::make_error_code(std::errc::file_too_large),
                                   "%s is %llu bytes, over the limit of %lld for a config "
                                   "(ds-opt --max-config-bytes raises it)",
                                   path.c_str(), static_cast<unsigned long long>(st.getSize()),
                                   static_cast<long long>(maxConfigBytes()));
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read %s: %s", path.c_str(),
                                   buf.getError().message().c_str());
  return parseDeepSpeedConfig((*buf)->getBuffer(), path, worldSize, tensorParallel, overrides,
                              modelMicroBatch);
}

std::optional<InferenceConfig> mlir::ds::asInferenceConfig(const std::string &path,
                                                           std::string &error) {
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && !llvm::sys::fs::is_regular_file(st))
    return std::nullopt; // readDeepSpeedConfig reports it
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) return std::nullopt; // readDeepSpeedConfig reports it
  if (!checkNesting((*buf)->getBuffer()).empty()) return std::nullopt; // reported by the reader
  llvm::Expected<json::Value> parsed = json::parse((*buf)->getBuffer());
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  const json::Object *root = parsed->getAsObject();
  // deepspeed.init_inference's config: a tensor-parallel section or a dtype, and no
  // training keys.
  if (!root ||
      (!root->get("tensor_parallel") && !root->get("mp_size") && !root->get("dtype") &&
       !root->get("max_out_tokens") && !root->get("max_tokens")) ||
      root->get("train_batch_size") || root->get("train_micro_batch_size_per_gpu") ||
      root->get("optimizer"))
    return std::nullopt;
  Reader r(root, "", path);
  InferenceConfig c;
  auto check = [&](llvm::Error e) {
    if (!e) return true;
    error = llvm::toString(std::move(e));
    return false;
  };
  if (const json::Value *tp = r.get("tensor_parallel")) {
    const json::Object *o = tp->getAsObject();
    if (!o) {
      error = path + ": tensor_parallel: expected an object";
      return InferenceConfig{};
    }
    Reader t(o, "tensor_parallel", path);
    bool enabled = true;
    if (!check(t.boolean("enabled", enabled)) || !check(t.integer("tp_size", c.tpSize, true)) ||
        !check(t.finish()))
      return InferenceConfig{};
    if (!enabled) c.tpSize = 1;
  }
  int64_t mp = 0;
  if (!check(r.integer("mp_size", mp, true))) return InferenceConfig{};
  // The older spelling; DeepSpeed refuses both together, so does ds.
  const json::Value *tp = r.get("tensor_parallel");
  if (r.get("mp_size") && tp && tp->getAsObject() && tp->getAsObject()->get("tp_size")) {
    error = path + ": mp_size (deprecated) and tensor_parallel.tp_size are both given; keep "
                   "tensor_parallel.tp_size";
    return InferenceConfig{};
  }
  if (mp) c.tpSize = mp;
  if (const json::Value *d = r.get("dtype")) {
    std::optional<llvm::StringRef> s = d->getAsString();
    std::optional<PrecisionConfig::Kind> k = s ? parseDtypeName(*s) : std::nullopt;
    if (!k) {
      error = path + ": dtype: expected fp32, bf16 or fp16 (or DeepSpeed's other spellings: "
                     "float32, bfloat16, float16, half, torch.float16, ...)";
      return InferenceConfig{};
    }
    c.dtype = *k;
  }
  // max_out_tokens and its alias; DeepSpeed refuses both together.
  if (r.get("max_out_tokens") && r.get("max_tokens")) {
    error = path + ": max_out_tokens and its alias max_tokens are both given; keep one";
    return InferenceConfig{};
  }
  for (const char *key : {"max_out_tokens", "max_tokens"})
    if (r.get(key)) {
      if (!check(r.integer(key, c.maxOutTokens, true))) return InferenceConfig{};
      if (c.maxOutTokens < 1) {
        error = path + ": " + key + ": expected a count of tokens >= 1";
        return InferenceConfig{};
      }
    }
  int64_t minOut = 1; // what generate() must produce at least: ds-run's --max-new-tokens decides
  for (const char *key : {"min_out_tokens", "min_tokens"})
    if (!check(r.integer(key, minOut, true))) return InferenceConfig{};
  // Kernel injection is what ds does anyway (its kernels are compiled).
  bool inject = false;
  if (!check(r.boolean("replace_with_kernel_inject", inject)) || !check(r.finish()))
    return InferenceConfig{};
  return c;
}

const char *mlir::ds::precisionName(PrecisionConfig::Kind k) {
  switch (k) {
  case PrecisionConfig::Kind::BF16: return "bf16";
  case PrecisionConfig::Kind::FP16: return "fp16";
  case PrecisionConfig::Kind::FP32: break;
  }
  return "fp32";
}

std::optional<PrecisionConfig::Kind> mlir::ds::parseDtypeName(llvm::StringRef name) {
  // DeepSpeed's DtypeEnum spellings.
  for (llvm::StringRef n : {"fp32", "float32", "float", "torch.float32"})
    if (name == n) return PrecisionConfig::Kind::FP32;
  for (llvm::StringRef n : {"bf16", "bfloat16", "bfloat", "torch.bfloat16"})
    if (name == n) return PrecisionConfig::Kind::BF16;
  for (llvm::StringRef n : {"fp16", "float16", "half", "torch.float16"})
    if (name == n) return PrecisionConfig::Kind::FP16;
  return std::nullopt;
}

std::set<std::string> mlir::ds::configKeysRead(llvm::StringRef json, int64_t worldSize,
                                               std::string *error) {
  std::set<std::string> read;
  gKeysRead = &read;
  llvm::Expected<TrainingConfig> c = parseDeepSpeedConfig(json, "sample", worldSize);
  gKeysRead = nullptr;
  std::string message = c ? std::string() : llvm::toString(c.takeError());
  if (error) *error = message;
  return read;
}
