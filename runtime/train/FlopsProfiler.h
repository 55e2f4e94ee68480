// DeepSpeed's flops_profiler for a ds training step: at profile_step the
// micro-steps and the optimizer step run with per-step timing, and rank 0
// prints (or writes to output_file) the step's FLOPs, MACs, latency and
// achieved FLOP/s, by kernel and by module (the ONNX node path,
// /blocks.0/attn/..., cut at each depth). FLOPs are counted for matrix
// products and convolutions (runtime/exec/Flops.h), where nearly all are.
#pragma once

#include <string>
#include <vector>

#include "runtime/exec/Session.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

struct FlopsProfileInput {
  std::vector<StepTiming> steps; // every compute step of the profiled step
  double seconds = 0;            // wall time of the whole optimizer step
  int64_t step = 0, worldSize = 1, microBatch = 0, parameters = 0;
};

std::string flopsProfileReport(const plan::FlopsProfiler &config, const FlopsProfileInput &in);

} // namespace ds::rt
