// --export-onnx: the plan keeps the source ONNX model with the trained
// initializers' data stripped; export writes it back with the values of
// the state buffers bound to them (transposed back where ds stored them
// transposed), so ONNX tools see the original graph with trained weights.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/Session.h"

namespace ds::rt {

/// A state buffer's value, whole, by its state name.
using StateReader = std::function<absl::StatusOr<HostArray>(const std::string &state)>;

/// The trained weights under their ONNX initializer names, in the ONNX
/// shapes (what zero_to_fp32 gives a DeepSpeed user: a state dict).
absl::StatusOr<std::vector<std::pair<std::string, HostArray>>>
trainedInitializers(const ds::plan::Plan &plan, const StateReader &state);

absl::Status exportOnnx(const ds::plan::Plan &plan, const StateReader &state,
                        const std::string &path);

/// From a session's own state. Multi-rank ZeRO-3 sessions hold blocks:
/// export those from a checkpoint instead (consolidateLatestCheckpoint).
absl::Status exportOnnx(Session &session, const std::string &path);

/// The files the plan's source model is made of: the .onnx it was compiled
/// from and the external-data files its initializers name (relative to
/// it), those that exist. No output of a run may replace them.
std::vector<std::string> sourceModelFiles(const ds::plan::Plan &plan);

} // namespace ds::rt
