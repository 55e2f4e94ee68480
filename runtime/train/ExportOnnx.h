// --export-onnx: the plan keeps the source ONNX model with the trained
// initializers' data stripped; export writes it back with the values of
// the state buffers bound to them (transposed back where ds stored them
// transposed), so ONNX tools see the original graph with trained weights.
#pragma once

#include <string>

#include "runtime/exec/Session.h"

namespace ds::rt {

absl::Status exportOnnx(Session &session, const std::string &path);

} // namespace ds::rt
