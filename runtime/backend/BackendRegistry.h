// Backends by name, like IREE's HAL driver registry: each implementation
// registers a factory from its own folder (cpu/, cuda/), and tools create
// backends through here without naming any of them. Which backends a binary
// has is decided by what it links and registers: see
// runtime/backend/AllBackends.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backend/Backend.h"

namespace ds::rt {

using BackendFactory = absl::StatusOr<std::unique_ptr<Backend>> (*)(const BackendOptions &);
/// OK when the backend can run on this machine, else why not (no device, no
/// driver, not built in). Cheaper than creating the backend.
using BackendProbe = absl::Status (*)();

struct BackendInfo {
  std::string name;        // what --backend= takes
  std::string description; // one line, for listings and errors
  BackendFactory create = nullptr;
  BackendProbe probe = nullptr; // optional: none means always available
};

/// Adds a backend. Names are unique: registering one twice is an error.
absl::Status registerBackend(BackendInfo info);

/// Registered names, in registration order.
std::vector<std::string> registeredBackendNames();

/// The registration of `name`, if any.
std::optional<BackendInfo> findBackend(const std::string &name);

/// Runs the backend's availability probe: OK, or the reason it cannot run
/// here. Unknown names are errors listing the registered ones.
absl::Status probeBackend(const std::string &name);

/// Creates the backend registered as `name`. Unknown names fail with the
/// list of registered backends; a registered backend that cannot run here
/// (no device, not built in) fails with its own message.
absl::StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                       const BackendOptions &opts);

} // namespace ds::rt
