// --trace: Chrome trace-event JSON (opens in Perfetto and chrome://tracing)
// with one process per rank and one thread per stream (compute,
// communication); every kernel and collective is a complete ("X") event
// carrying its bytes and the ONNX node it came from.
#pragma once

#include <string>
#include <vector>

#include "runtime/comm/Comm.h"
#include "runtime/exec/Session.h"

namespace ds::rt {

/// Collects every rank's events on rank 0 (a collective: all ranks call
/// it) and rank 0 writes `path`.
absl::Status writeTrace(const std::string &path, const std::vector<TraceEvent> &events,
                        Comm &world);

} // namespace ds::rt
