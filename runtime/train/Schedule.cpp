#include "runtime/train/Schedule.h"

#include <algorithm>
#include <cmath>

namespace ds::rt {

double learningRateAt(const ds::plan::Training &t, int64_t applied) {
  const auto &s = t.schedule();
  const double base = t.optimizer().lr();
  // DeepSpeed's engine steps the scheduler after each applied optimizer
  // step, and its constructor set the first rate at last_batch_iteration
  // -1: step 1 runs at i = -1, step k at i = k - 2 (so with the default log
  // warmup steps 1 and 2 both run at the minimum).
  const int64_t i = applied - 1;
  // DeepSpeed clamps the warmup to at least 2 steps (log(1) would divide by 0).
  const int64_t warmup = std::max<int64_t>(2, s.warmup_num_steps());
  const double invLog = 1.0 / std::log(static_cast<double>(warmup));
  auto warmupGamma = [&] {
    return s.warmup_linear() ? static_cast<double>(i) / warmup
                             : invLog * std::log(static_cast<double>(i + 1));
  };
  switch (s.kind()) {
  case ds::plan::Schedule::CONSTANT:
    return base;
  case ds::plan::Schedule::WARMUP_LR: {
    if (i < 0) return s.warmup_min_lr();
    double gamma = i < warmup ? warmupGamma() : 1.0;
    return s.warmup_min_lr() + (s.warmup_max_lr() - s.warmup_min_lr()) * gamma;
  }
  case ds::plan::Schedule::WARMUP_DECAY_LR: {
    if (i < 0) return s.warmup_min_lr();
    double gamma = i < warmup
                       ? warmupGamma()
                       : std::max(0.0, static_cast<double>(s.total_num_steps() - i) /
                                           std::max(1.0, static_cast<double>(
                                                             s.total_num_steps() - warmup)));
    return s.warmup_min_lr() + (s.warmup_max_lr() - s.warmup_min_lr()) * gamma;
  }
  case ds::plan::Schedule::WARMUP_COSINE_LR: {
    if (i < 0) return 0.0; // the constructor's rate
    double ratio;
    if (i < warmup) {
      ratio = s.warmup_min_ratio() + warmupGamma() * (1.0 - s.warmup_min_ratio());
    } else {
      // DeepSpeed >= 0.19: the cosine phase spans max(1, T - W) steps (no
      // division by 0 when T is the clamped warmup) and stays at its end.
      double realTotal = std::max(1.0, static_cast<double>(s.total_num_steps() - warmup));
      double progress = std::min(1.0, static_cast<double>(i - warmup + 1) / realTotal);
      double c = (1 + std::cos(M_PI * progress)) / 2;
      ratio = std::max(0.0, s.cos_min_ratio() + (1.0 - s.cos_min_ratio()) * c);
    }
    return base * ratio;
  }
  default:
    return base;
  }
}

AdamScalars adamScalars(const ds::plan::Optimizer &o, double lr, int64_t t) {
  if (!o.bias_correction()) return {lr, 1.0};
  double bc1 = 1.0 - std::pow(o.beta1(), static_cast<double>(t));
  double bc2 = 1.0 - std::pow(o.beta2(), static_cast<double>(t));
  return {lr / bc1, std::sqrt(bc2)};
}

} // namespace ds::rt
