#include "runtime/train/LossScaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace ds::rt {

LossScaler::LossScaler(const plan::LossScaler &config)
    : config_(config), dynamic_(config.static_scale() <= 0) {
  state_.set_cur_scale(dynamic_ ? config.initial_scale() : config.static_scale());
  state_.set_cur_iter(0);
  state_.set_last_overflow_iter(-1);
  state_.set_cur_hysteresis(std::max<int64_t>(1, config.hysteresis()));
}

absl::StatusOr<std::string> LossScaler::update(bool overflow) {
  // A static scale never changes; its overflowing steps are still skipped.
  if (!dynamic_) return overflow ? std::string("overflow, step skipped") : std::string();
  const int64_t delayedShift = std::max<int64_t>(1, config_.hysteresis());
  const double factor = 2.0;
  std::string what;
  if (overflow) {
    if (delayedShift == 1 || state_.cur_hysteresis() == 1) {
      if (state_.cur_scale() == config_.min_scale())
        return absl::ResourceExhaustedError(absl::StrFormat(
            "the fp16 gradients overflow at the minimum loss scale %g (fp16.min_loss_scale): "
            "current loss scale already at minimum, cannot decrease it; the model diverged or "
            "its values do not fit fp16 (try bf16)",
            config_.min_scale()));
      double next = std::max(state_.cur_scale() / factor, config_.min_scale());
      what = absl::StrFormat("overflow, step skipped; loss scale %g -> %g", state_.cur_scale(),
                             next);
      state_.set_cur_scale(next);
    } else {
      what = absl::StrFormat("overflow, step skipped; loss scale stays %g, hysteresis %d -> %d",
                             state_.cur_scale(), state_.cur_hysteresis(),
                             state_.cur_hysteresis() - 1);
      state_.set_cur_hysteresis(state_.cur_hysteresis() - 1);
    }
    state_.set_last_overflow_iter(state_.cur_iter());
  } else {
    if (config_.consecutive_hysteresis()) state_.set_cur_hysteresis(delayedShift);
    const int64_t stable = state_.cur_iter() - state_.last_overflow_iter() - 1;
    if (stable > 0 && stable % std::max<int64_t>(1, config_.scale_window()) == 0) {
      if (!config_.consecutive_hysteresis()) state_.set_cur_hysteresis(delayedShift);
      what = absl::StrFormat("loss scale %g -> %g after %d steps without overflow",
                             state_.cur_scale(), state_.cur_scale() * factor, stable);
      state_.set_cur_scale(state_.cur_scale() * factor);
    }
  }
  state_.set_cur_iter(state_.cur_iter() + 1);
  return what;
}

absl::Status LossScaler::restore(const plan::LossScalerState &s, int64_t step) {
  // last_overflow_iter is the iteration an overflow happened in, so it is
  // below cur_iter (or -1 before any); the scaler counts one iteration per
  // optimizer step, so cur_iter is at most the checkpoint's step (less
  // when the scaler started later, from an fp32 checkpoint).
  if (!(s.cur_scale() >= std::numeric_limits<float>::min()) ||
      !(s.cur_scale() <= std::numeric_limits<float>::max()) || s.cur_iter() < 0 ||
      s.cur_iter() > step ||
      s.last_overflow_iter() < -1 || s.last_overflow_iter() >= s.cur_iter() ||
      s.cur_hysteresis() < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "the checkpoint's loss scaler state is inconsistent (scale %g, iteration %d at step %d, "
        "last overflow %d, hysteresis %d)",
        s.cur_scale(), s.cur_iter(), step, s.last_overflow_iter(), s.cur_hysteresis()));
  state_ = s;
  return absl::OkStatus();
}

} // namespace ds::rt
