// Training data: an .npz whose arrays are keyed by the training program's
// input names (model inputs and labels) and carry a leading sample
// dimension. Micro-batches are taken in order, or in a seeded per-epoch
// permutation; rank r of W takes its own disjoint slice of each global batch.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/backend/Tensor.h"
#include "runtime/plan/PlanFile.h"

namespace ds::rt {

class DataLoader {
public:
  /// Checks every array against the program's inputs: present, dtype, per-
  /// sample shape, and equal sample counts. Errors name the array.
  static absl::StatusOr<DataLoader> open(const std::string &path, const ds::plan::Plan &plan,
                                         const ds::plan::Program &program,
                                         const std::vector<std::string> &dataInputs,
                                         int64_t microBatch, int64_t rank, int64_t worldSize,
                                         bool shuffle, uint64_t seed);

  /// The next micro-batch for this rank, advancing the cursor.
  std::map<std::string, HostArray> next();

  /// Where the last micro-batch came from, for errors: "samples 28-31 of
  /// d.npz" (or the indices, shuffled).
  std::string describeLast() const;

  /// Samples in the data file.
  int64_t samples() const { return samples_; }
  /// A checksum of the arrays (names, types, shapes and bytes): ranks
  /// compare it, so one given another file of the same size is caught.
  uint64_t contentHash() const;
  /// Position in the global sample stream (for checkpoints).
  int64_t cursor() const { return cursor_; }
  void setCursor(int64_t c) { cursor_ = c; }

private:
  int64_t sampleAt(int64_t globalIndex);
  struct Array {
    std::string name;
    HostArray data;
    uint64_t sampleBytes = 0;
  };
  std::vector<Array> arrays_;
  std::string path_;
  std::vector<int64_t> last_; // the last micro-batch's sample indices
  int64_t samples_ = 0, microBatch_ = 1, rank_ = 0, worldSize_ = 1;
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  int64_t cursor_ = 0;
  int64_t permEpoch_ = -1;
  std::vector<int64_t> perm_;
};

} // namespace ds::rt
