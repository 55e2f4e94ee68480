// Registers every backend this build has. Tools call it once before
// createBackend(); it lives in its own library (ds_backends) so that the
// interface library (ds_backend) never depends on an implementation.
#pragma once

#include "runtime/plan/Status.h"

namespace ds::rt {

/// Registers "cpu", and "cuda" (the real one, or, in a build without CUDA, an
/// entry whose factory says so). Idempotent and thread-safe; returns the
/// first call's result.
absl::Status registerAllBackends();

} // namespace ds::rt
