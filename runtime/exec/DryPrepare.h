// ds-opt's run of ds-run's load-time kernel checks: one validator for both
// tools, so that ds-opt never writes a plan whose kernels ds-run refuses (an
// element type, shape or attribute a kernel does not take).
#pragma once

#include "runtime/backend/Backend.h"
#include "runtime/plan/Status.h"

namespace ds::rt {

/// Prepares every kernel step of `p` on `backend` against views of the
/// plan's buffers laid out as ds-run binds them, in address space only (one
/// reserved mapping no check touches), and throws the prepared steps away.
/// Left to ds-run: collectives and NVMe swaps (they need the ranks and the
/// drive), constant-weight packing (it reads the weights), multi-rank plans,
/// and any plan whose layout cannot be reserved (an address-space limit).
/// Errors are the kernel's, naming the program and the step.
absl::Status dryPrepare(const plan::Plan &p, Backend &backend);

} // namespace ds::rt
