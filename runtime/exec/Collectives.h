// Collective steps of a plan, bound to a group communicator: the layout
// work around the Comm calls (gathering or scattering along a dimension
// other than the first, all-to-all's split and concat dims).
#pragma once

#include <vector>

#include "runtime/backend/Backend.h"
#include "runtime/comm/Comm.h"

namespace ds::rt {

/// Whether `kernel` names a collective (runs on the communication stream).
bool isCollective(const std::string &kernel);

/// Checks a collective step against its views and the group, and returns
/// the runnable step. `scratch` receives memory the step owns.
absl::StatusOr<PreparedStep> prepareCollective(const plan::Step &step,
                                               const std::vector<TensorView> &ins,
                                               const std::vector<TensorView> &outs, Comm &group,
                                               std::vector<std::vector<uint8_t>> &scratch);

} // namespace ds::rt
