// The training loop of ds-run: micro-batches through the plan's micro-step
// program (gradient accumulation happens in state), then the optimizer
// program with the step's learning rate; logs, checkpoints, resume.
#pragma once

#include <cstdio>
#include <string>

#include "runtime/exec/Session.h"

namespace ds::rt {

struct TrainOptions {
  std::string dataPath;
  int64_t steps = 0;           // total optimizer steps to reach
  std::string logPath;         // JSONL, one line per step
  std::string checkpointDir;
  int64_t checkpointEvery = 0; // 0: only at the end (when a directory is given)
  bool resume = false;
  bool resumeFallback = false; // a damaged latest checkpoint: use an older intact one
  bool shuffle = false;
  uint64_t seed = 0;
  bool quiet = false;          // no progress output
  bool terminal = false;       // stdout is a terminal: a live progress bar
};

/// Runs training to `steps` optimizer steps. Fails with the step number on
/// a non-finite loss. SIGTERM/SIGINT (preemption) end the run after the
/// current step, with a checkpoint when a directory is given: the status is
/// then kCancelled, naming the step, so a launcher can tell "resume me"
/// from failure.
absl::Status train(Session &session, const TrainOptions &options);

} // namespace ds::rt
