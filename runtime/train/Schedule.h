// Learning-rate schedules and optimizer-step scalars, computed on the host
// the way DeepSpeed (lr_schedules.py) and torch.optim compute them.
#pragma once

#include <cstdint>

#include "runtime/proto/plan.pb.h"

namespace ds::rt {

/// The learning rate of the optimizer step after `applied` applied steps
/// (steps an fp16 overflow skipped do not count): the schedule at
/// DeepSpeed's last_batch_iteration = applied - 1 (-1: the rate its
/// constructor set), as DeepSpeed 0.19's engine runs it.
double learningRateAt(const ds::plan::Training &t, int64_t applied);
/// The same for a parameter group whose own rate is `base` (Muon's half):
/// DeepSpeed's schedules set every group to one rate, except
/// WarmupCosineLR, which scales each group's own.
double learningRateAt(const ds::plan::Training &t, int64_t applied, double base);

/// Adam's beta1 for that step: OneCycle's cycled momentum
/// (`cycle_momentum`), else the optimizer's.
double beta1At(const ds::plan::Training &t, int64_t applied);

/// Adam's step-dependent scalars for the 1-based step count `t`, in double
/// like torch.optim.AdamW: step_size = lr / (1 - beta1^t) and
/// bias2_sqrt = sqrt(1 - beta2^t) (both plain lr / 1 without bias correction).
struct AdamScalars {
  double stepSize, bias2Sqrt;
};
AdamScalars adamScalars(const ds::plan::Optimizer &o, double lr, int64_t t);
/// The same with this step's beta1 (a cycled one: the bias correction uses
/// the current value, as torch's Adam and DeepSpeed's FusedAdam do).
AdamScalars adamScalars(const ds::plan::Optimizer &o, double lr, int64_t t, double beta1);

/// DeepSpeed's ZeroOneAdam policy (zoadam.py), step by step: which kind
/// of optimizer step each (1-based) step is, and for a sync the learning
/// rates summed since the last one. A pure function of the step count and
/// the schedule, so a resumed run replays it.
class ZeroOnePolicy {
public:
  enum class Step {
    Init,     // the first: initializes, no update
    Variance, // m and v from averaged gradients
    Gradient, // m from 1-bit-averaged gradients, v kept
    Local,    // after var_freeze_step: a step on local gradients
    Sync,     // ... and the local steps' sum averaged (1-bit)
  };
  explicit ZeroOnePolicy(const ds::plan::Optimizer &o) : o_(o) {}
  /// The next step's kind at rate `lr`; `lrs` gets the summed rates of a Sync.
  Step next(double lr, double &lrs);

private:
  ds::plan::Optimizer o_;
  int64_t step_ = 0, varInterval_ = 1, varCounter_ = 0, localInterval_ = 1, localCounter_ = 0;
  double lrs_ = 0;
  bool frozen_ = false;
};

} // namespace ds::rt
