// Runs the programs of a loaded plan on a backend. Every buffer is bound to
// memory once (arena, weights, state, inputs, outputs) and every step of
// every program is prepared (which checks it) at creation; run() then only
// executes steps. Programs share the arena (they run one at a time) and the
// state buffers (parameters, gradients, optimizer moments).
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
  static absl::StatusOr<std::unique_ptr<Session>> create(const LoadedPlan &plan,
                                                         Backend &backend);

  /// Binds the program's inputs by ONNX name (every input, exact dtype and
  /// shape), runs it and returns its outputs in graph order.
  absl::StatusOr<NamedArrays> run(const std::string &program,
                                  const std::map<std::string, HostArray> &inputs);

  const plan::Program *program(const std::string &name) const { return plan_.findProgram(name); }
  const LoadedPlan &plan() const { return plan_; }

  /// State buffers by name (parameters, optimizer moments, ...), for
  /// checkpoints and export.
  std::vector<std::string> stateNames() const;
  absl::StatusOr<HostArray> readState(const std::string &name);
  absl::Status writeState(const std::string &name, const HostArray &value);

  void setProfiling(bool on) { profiling_ = on; }
  const std::vector<StepTiming> &lastProfile() const { return profile_; }

private:
  Session(const LoadedPlan &plan, Backend &backend) : plan_(plan), backend_(backend) {}
  absl::Status bind();
  const plan::Buffer *stateBuffer(const std::string &name) const;

  const LoadedPlan &plan_;
  Backend &backend_;
  void *arena_ = nullptr;
  std::vector<std::pair<void *, plan::MemorySpace>> owned_;
  std::vector<TensorView> views_;                           // by buffer id
  std::map<std::string, std::vector<PreparedStep>> steps_; // by program
  bool profiling_ = false;
  std::vector<StepTiming> profile_;
};

} // namespace ds::rt
