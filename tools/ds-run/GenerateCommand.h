// ds-run's generation mode (plans from ds-opt --generate).
#pragma once

#include "runtime/exec/Session.h"

namespace ds::rt {

/// Reads --prompt, generates with the plan's prefill and decode programs
/// (--max-new-tokens, sampling flags, --seed), writes --outputs or prints
/// the tokens; with --benchmark N, prints time to first token and decode
/// tokens/s as JSON.
absl::Status generateCommand(Session &session);

/// Whether any generation flag was given (they need a generation plan).
bool generationFlagsGiven();

} // namespace ds::rt
