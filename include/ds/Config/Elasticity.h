//===- Elasticity.h - DeepSpeed's elastic batch arithmetic ------*- C++ -*-===//
//
// DeepSpeed's `elasticity` section chooses one global batch size that many
// data-parallel sizes can train with (micro batch x accumulation steps x
// ranks), so a job can shrink or grow between restarts without changing
// the optimization. This is deepspeed/elasticity/elasticity.py's
// compute_elastic_config, step for step (versions 0.1 and 0.2), so the
// same config gives the same batch and the same valid sizes as DeepSpeed.
//
//===----------------------------------------------------------------------===//
#ifndef DS_CONFIG_ELASTICITY_H
#define DS_CONFIG_ELASTICITY_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mlir::ds {

struct ElasticityConfig {
  bool enabled = false;
  int64_t maxTrainBatchSize = 2000;
  std::vector<int64_t> microBatchSizes{2, 4, 6};
  int64_t minGpus = 1, maxGpus = 10000, numGpusPerNode = 1, modelParallelSize = 1;
  double minTime = 0;
  bool preferLargerBatch = true, ignoreNonElasticBatchInfo = false;
  double version = 0.2;
};

/// What the elastic config gives for one data-parallel size.
struct ElasticBatch {
  int64_t trainBatchSize = 0;
  std::vector<int64_t> validWorldSizes; // data-parallel sizes, increasing
  int64_t microBatchSize = 0, gradientAccumulationSteps = 0;
};

/// compute_elastic_config(config, world_size=dataParallel) and the batch
/// DeepSpeed's engine then trains with; an error when the size is not
/// among the valid ones (naming them) or no micro batch divides.
llvm::Expected<ElasticBatch> computeElasticBatch(const ElasticityConfig &e, int64_t dataParallel);

} // namespace mlir::ds

#endif
