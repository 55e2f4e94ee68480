#include "runtime/train/Schedule.h"

#include <algorithm>
#include <cmath>

namespace ds::rt {

namespace {

/// OneCycle's position in its cycle at last_batch_iteration `i`: 0 at the
/// ends, 1 at the peak (DeepSpeed 0.19's _get_scale_factor, stairs too).
double oneCycleScale(const ds::plan::Schedule &s, int64_t i) {
  const double first = s.cycle_first_step_size(), second = s.cycle_second_step_size();
  const double total = first + second, ratio = first / total;
  const double n = static_cast<double>(i + 1);
  const double cycle = std::floor(1.0 + n / total), x = 1.0 + n / total - cycle;
  double scale;
  int64_t stairs;
  if (x <= ratio) {
    scale = x / ratio;
    stairs = s.cycle_first_stair_count();
  } else {
    scale = (x - 1.0) / (ratio - 1.0);
    stairs = s.cycle_second_stair_count();
  }
  if (stairs > 0) {
    // From the integer offset in the cycle, not from `scale` (DeepSpeed:
    // a scale a hair under a stair would drop a whole one).
    const double at = std::fmod(n, total);
    const double pos = at <= first ? at * static_cast<double>(stairs) / first
                                   : (total - at) * static_cast<double>(stairs) / second;
    scale = std::floor(pos) / static_cast<double>(stairs);
  }
  return scale;
}

} // namespace

double learningRateAt(const ds::plan::Training &t, int64_t applied) {
  return learningRateAt(t, applied, t.optimizer().lr());
}

double learningRateAt(const ds::plan::Training &t, int64_t applied, double base) {
  const auto &s = t.schedule();
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
  case ds::plan::Schedule::LR_RANGE_TEST: {
    // lr = min_lr (1 + rate * interval), interval = n / step_size (floored
    // with staircase), n = last_batch_iteration + 1 (the constructor's: 0).
    const double n = static_cast<double>(i + 1), size = static_cast<double>(s.range_step_size());
    const double interval = s.range_staircase() ? std::floor(n / size) : n / size;
    return s.range_min_lr() * (1.0 + s.range_step_rate() * interval);
  }
  case ds::plan::Schedule::ONE_CYCLE: {
    if (i < 0) return s.cycle_min_lr(); // the constructor's rate
    const double total = s.cycle_first_step_size() + s.cycle_second_step_size();
    if (static_cast<double>(i) < total)
      return s.cycle_min_lr() + (s.cycle_max_lr() - s.cycle_min_lr()) * oneCycleScale(s, i);
    if (s.decay_step_size() == 0 || s.decay_lr_rate() == 0) return s.cycle_min_lr();
    const double interval = (static_cast<double>(i) - total + 1) / s.decay_step_size();
    return s.cycle_min_lr() / (1.0 + s.decay_lr_rate() * interval);
  }
  default:
    return base;
  }
}

double beta1At(const ds::plan::Training &t, int64_t applied) {
  const auto &s = t.schedule();
  if (s.kind() != ds::plan::Schedule::ONE_CYCLE || !s.cycle_momentum()) return t.optimizer().beta1();
  const int64_t i = applied - 1;
  if (i < 0) return s.cycle_min_mom(); // the constructor's betas
  const double total = s.cycle_first_step_size() + s.cycle_second_step_size();
  if (static_cast<double>(i) < total)
    return s.cycle_max_mom() - (s.cycle_max_mom() - s.cycle_min_mom()) * oneCycleScale(s, i);
  if (s.decay_step_size() == 0 || s.decay_mom_rate() == 0) return s.cycle_max_mom();
  const double interval = (static_cast<double>(i) - total + 1) / s.decay_step_size();
  return s.cycle_max_mom() * (1.0 + s.decay_mom_rate() * interval);
}

AdamScalars adamScalars(const ds::plan::Optimizer &o, double lr, int64_t t) {
  return adamScalars(o, lr, t, o.beta1());
}

AdamScalars adamScalars(const ds::plan::Optimizer &o, double lr, int64_t t, double beta1) {
  if (!o.bias_correction()) return {lr, 1.0};
  double bc1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  double bc2 = 1.0 - std::pow(o.beta2(), static_cast<double>(t));
  return {lr / bc1, std::sqrt(bc2)};
}

ZeroOnePolicy::Step ZeroOnePolicy::next(double lr, double &lrs) {
  ++step_;
  if (step_ == 1) return Step::Init; // no policy update, no freeze check
  Step kind;
  if (!frozen_) {
    // Variance updates at var_interval, which doubles every
    // var_update_scaler of them; the gradients between are 1-bit averaged.
    const bool variance = step_ % varInterval_ == 0;
    kind = variance ? Step::Variance : Step::Gradient;
    if (variance && ++varCounter_ == o_.var_update_scaler()) {
      varCounter_ = 0;
      varInterval_ *= 2;
    }
  } else {
    // Local steps synced every local_step_interval, which doubles (up to
    // local_step_clipper) every local_step_scaler steps.
    lrs_ += lr;
    kind = step_ % localInterval_ == 0 ? Step::Sync : Step::Local;
    if (kind == Step::Sync) {
      lrs = lrs_;
      lrs_ = 0;
    }
    if (++localCounter_ == o_.local_step_scaler()) {
      localCounter_ = 0;
      localInterval_ = std::min<int64_t>(o_.local_step_clipper(), 2 * localInterval_);
    }
  }
  if (step_ > o_.var_freeze_step()) frozen_ = true;
  return kind;
}

} // namespace ds::rt
