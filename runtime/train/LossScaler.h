// fp16 loss scaling as DeepSpeed does it (deepspeed/runtime/fp16/
// loss_scaler.py): the loss is multiplied by the scale before the backward,
// gradients are divided by it before the update, and a step whose gradients
// overflowed (inf/NaN; every rank sees the same global gradient norm) is
// skipped. The dynamic scaler halves the scale on overflow once its
// hysteresis is used up and doubles it after `scale_window` clean steps.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

class LossScaler {
public:
  /// From the plan's settings; a static scaler when static_scale > 0.
  explicit LossScaler(const plan::LossScaler &config);

  double scale() const { return state_.cur_scale(); }
  bool dynamic() const { return dynamic_; }

  /// After a step: `overflow` when its gradients were not finite. Returns
  /// what happened in DeepSpeed's words for the log ("" when nothing did),
  /// or an error when the scale is already at its minimum and overflows
  /// again (DeepSpeed raises "Current loss scale already at minimum").
  absl::StatusOr<std::string> update(bool overflow);

  const plan::LossScalerState &state() const { return state_; }
  /// Restores a checkpointed state; checks it is one this scaler can be in.
  absl::Status restore(const plan::LossScalerState &s, int64_t step);

private:
  plan::LossScaler config_;
  bool dynamic_;
  plan::LossScalerState state_;
};

} // namespace ds::rt
