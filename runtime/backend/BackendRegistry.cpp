#include "runtime/backend/BackendRegistry.h"

#include <mutex>

#include "absl/strings/str_join.h"

namespace ds::rt {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<BackendInfo> backends; // registration order: listings follow it
};

Registry &registry() {
  // Never destroyed, and built on first use: registration may come from
  // other static initializers, lookups from static destructors.
  static Registry *r = new Registry();
  return *r;
}

absl::Status unknown(const std::string &name, const std::vector<std::string> &names) {
  if (names.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "unknown backend '", name,
        "': no backends are registered (the tool must call ds::rt::registerAllBackends())"));
  return absl::InvalidArgumentError(absl::StrCat("unknown backend '", name, "' (registered: ",
                                                 absl::StrJoin(names, ", "), ")"));
}

} // namespace

absl::Status registerBackend(BackendInfo info) {
  if (info.name.empty() || !info.create)
    return absl::InvalidArgumentError("a backend needs a name and a factory");
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const BackendInfo &b : r.backends)
    if (b.name == info.name)
      return absl::AlreadyExistsError(
          absl::StrCat("backend '", info.name, "' is already registered"));
  r.backends.push_back(std::move(info));
  return absl::OkStatus();
}

std::vector<std::string> registeredBackendNames() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const BackendInfo &b : r.backends) names.push_back(b.name);
  return names;
}

std::optional<BackendInfo> findBackend(const std::string &name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const BackendInfo &b : r.backends)
    if (b.name == name) return b;
  return std::nullopt;
}

absl::Status probeBackend(const std::string &name) {
  std::optional<BackendInfo> info = findBackend(name);
  if (!info) return unknown(name, registeredBackendNames());
  return info->probe ? info->probe() : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                       const BackendOptions &opts) {
  // The factory runs outside the lock: it may probe devices for a while.
  std::optional<BackendInfo> info = findBackend(name);
  if (!info) return unknown(name, registeredBackendNames());
  return info->create(opts);
}

} // namespace ds::rt
