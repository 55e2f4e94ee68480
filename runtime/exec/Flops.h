// Floating-point operations a step performs, for --profile's achieved
// GFLOP/s: the GEMM-like kernels whose speed is judged against the machine's
// peak (matmul, conv, conv_grad). Other kernels count 0 (memory-bound: their
// time, not their FLOPs, is what matters).
#pragma once

#include <vector>

#include "runtime/backend/Tensor.h"
#include "runtime/proto/plan.pb.h"

namespace ds::rt {

/// Multiply-adds count 2. `ins`/`outs` are the step's bound views.
double stepFlops(const plan::Step &step, const std::vector<TensorView> &ins,
                 const std::vector<TensorView> &outs);

} // namespace ds::rt
