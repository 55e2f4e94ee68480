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

} // namespace ds::rt
