// Runs one program of a loaded plan on a backend: binds every buffer to
// memory once (arena, weights, inputs, outputs), prepares every step (which
// checks it), then executes the steps in order on each run().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/Backend.h"
#include "runtime/plan/PlanFile.h"

namespace ds::rt {

using NamedArrays = std::vector<std::pair<std::string, HostArray>>;

struct StepTiming {
  std::string kernel;
  std::string location;
  double seconds = 0;
};

class Session {
public:
  ~Session();
  static absl::StatusOr<std::unique_ptr<Session>>
  create(const LoadedPlan &plan, Backend &backend, const std::string &program);

  /// Binds inputs by ONNX name (every input, exact dtype and shape), runs the
  /// program and returns the outputs in graph order.
  absl::StatusOr<NamedArrays> run(const std::map<std::string, HostArray> &inputs);

  const plan::Program &program() const { return *program_; }
  uint64_t arenaBytes() const { return plan_.plan().arena_bytes(); }
  /// Per-step wall time of the last run when profiling is on.
  void setProfiling(bool on) { profiling_ = on; }
  const std::vector<StepTiming> &lastProfile() const { return profile_; }

private:
  Session(const LoadedPlan &plan, Backend &backend) : plan_(plan), backend_(backend) {}
  absl::Status bind();

  const LoadedPlan &plan_;
  Backend &backend_;
  const plan::Program *program_ = nullptr;
  void *arena_ = nullptr;
  std::vector<std::pair<void *, plan::MemorySpace>> owned_;
  std::vector<TensorView> views_; // by buffer id
  std::vector<PreparedStep> steps_;
  bool profiling_ = false;
  std::vector<StepTiming> profile_;
};

} // namespace ds::rt
