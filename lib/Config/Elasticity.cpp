#include "ds/Config/Elasticity.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>

namespace mlir::ds {
namespace {

/// The highly composite numbers DeepSpeed scales its bases by (enough for
/// batches up to 720K).
constexpr int64_t kHcn[] = {1,      2,      4,      6,      12,     24,     36,     48,
                            60,     120,    180,    240,    360,    720,    840,    1260,
                            1680,   2520,   5040,   7560,   10080,  15120,  20160,  25200,
                            27720,  45360,  50400,  55440,  83160,  110880, 166320, 221760,
                            277200, 332640, 498960, 554400, 665280, 720720};

/// Each base scaled by the largest HCN keeping it at most `max` (a base
/// above `max` offers nothing; one equal to it is itself).
std::vector<int64_t> candidateBatchSizes(const std::vector<int64_t> &bases, int64_t max) {
  std::set<int64_t> out;
  for (int64_t base : bases) {
    if (base > max) continue;
    if (base == max) {
      out.insert(base);
      continue;
    }
    const int64_t value = max / base;
    // numpy's argmax(HCN > value) - 1: the last HCN <= value (argmax of an
    // all-false array is 0, and index -1 is the last element).
    int64_t idx = 0;
    const int64_t n = static_cast<int64_t>(std::size(kHcn));
    while (idx < n && !(kHcn[idx] > value)) ++idx;
    int64_t pick = idx == n ? kHcn[n - 1] : (idx == 0 ? kHcn[n - 1] : kHcn[idx - 1]);
    out.insert(pick * base);
  }
  return {out.begin(), out.end()};
}

std::vector<int64_t> validGpus(int64_t batch, const std::vector<int64_t> &micro, int64_t minG,
                               int64_t maxG) {
  std::set<int64_t> valid;
  for (int64_t mb : micro) {
    if (batch % mb) continue;
    const int64_t most = batch / mb;
    if (minG <= most && most <= maxG) valid.insert(most);
    for (int64_t i = 1; i <= most / 2; ++i) {
      if (i > maxG) break;
      if (i < minG) continue;
      if (most % i == 0) valid.insert(i);
    }
  }
  return {valid.begin(), valid.end()};
}

std::pair<int64_t, std::vector<int64_t>> bestCandidate(const std::vector<int64_t> &candidates,
                                                       const std::vector<int64_t> &micro,
                                                       int64_t minG, int64_t maxG, bool larger) {
  size_t most = 0;
  std::vector<int64_t> valid;
  int64_t batch = *std::min_element(micro.begin(), micro.end());
  for (int64_t b : candidates) {
    std::vector<int64_t> v = validGpus(b, micro, minG, maxG);
    if (v.size() > most ||
        (v.size() == most && ((larger && b > batch) || (!larger && b < batch)))) {
      most = v.size();
      valid = std::move(v);
      batch = b;
    }
  }
  return {batch, valid};
}

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(std::make_error_code(std::errc::invalid_argument), "%s",
                                 msg.str().c_str());
}

llvm::Expected<std::pair<int64_t, std::vector<int64_t>>>
compatibleV01(const std::vector<int64_t> &micro, int64_t max, int64_t minG, int64_t maxG,
              bool larger) {
  const int64_t smallest = *std::min_element(micro.begin(), micro.end());
  if (minG == 0) minG = 1;
  if (maxG == 0) maxG = max / smallest;
  for (int64_t mb : micro)
    if (mb > max)
      return fail(llvm::formatv("micro batch size {0} is above max_train_batch_size {1}", mb,
                                max));
  int64_t lcm = 1;
  for (int64_t mb : micro) lcm = std::lcm(lcm, mb);
  std::vector<int64_t> bases = micro;
  bases.push_back(lcm);
  return bestCandidate(candidateBatchSizes(bases, max), micro, minG, maxG, larger);
}

} // namespace

llvm::Expected<ElasticBatch> computeElasticBatch(const ElasticityConfig &e, int64_t dp) {
  const std::vector<int64_t> &micro = e.microBatchSizes;
  if (micro.empty()) return fail("micro_batch_sizes is empty");
  ElasticBatch out;
  int64_t candidateMicro = 0;
  if (e.version == 0.1) {
    auto r = compatibleV01(micro, e.maxTrainBatchSize, e.minGpus, e.maxGpus, e.preferLargerBatch);
    if (!r) return r.takeError();
    out.trainBatchSize = r->first;
    out.validWorldSizes = r->second;
  } else {
    const int64_t gpn = e.numGpusPerNode, mp = e.modelParallelSize;
    if (gpn % mp)
      return fail(llvm::formatv("num_gpus_per_node {0} is not divisible by model_parallel_size "
                                "{1} (elasticity version 0.2)",
                                gpn, mp));
    auto microFor = [&](int64_t batch, int64_t dpSize) {
      int64_t pick = 0;
      for (int64_t mb : micro)
        if (dpSize > 0 && (batch / dpSize) % mb == 0) {
          if (!pick) pick = mb;
          if (e.preferLargerBatch && pick < mb) pick = mb;
        }
      return pick;
    };
    const int64_t dpPerNode = gpn / mp;
    // Elasticity 0.2 works in nodes.
    auto r = compatibleV01(micro, static_cast<int64_t>(double(e.maxTrainBatchSize) / dpPerNode),
                           static_cast<int64_t>(double(e.minGpus) / gpn),
                           static_cast<int64_t>(double(e.maxGpus) / gpn), e.preferLargerBatch);
    if (!r) return r.takeError();
    out.trainBatchSize = r->first * dpPerNode;
    for (int64_t v : r->second) out.validWorldSizes.push_back(v * dpPerNode);
    // DeepSpeed's engine passes the data-parallel size as the GPU count.
    const int64_t gpus = dp;
    if (std::find(out.validWorldSizes.begin(), out.validWorldSizes.end(), gpus / mp) !=
        out.validWorldSizes.end()) {
      candidateMicro = microFor(out.trainBatchSize, gpus / mp);
    } else {
      const double current = (double(gpus) / gpn) * dpPerNode;
      std::vector<double> candidates;
      for (int64_t mb : micro) {
        const double least = mb * current;
        candidates.push_back(std::floor(double(e.maxTrainBatchSize) / least) * least);
      }
      const double pick = e.preferLargerBatch
                              ? *std::max_element(candidates.begin(), candidates.end())
                              : *std::min_element(candidates.begin(), candidates.end());
      out.trainBatchSize = static_cast<int64_t>(pick);
      out.validWorldSizes = {static_cast<int64_t>(current)};
      candidateMicro = microFor(out.trainBatchSize, static_cast<int64_t>(current));
    }
  }
  (void)candidateMicro; // (the engine picks its own below, as DeepSpeed's does)
  std::string valid;
  for (int64_t v : out.validWorldSizes) valid += (valid.empty() ? "" : ", ") + std::to_string(v);
  if (std::find(out.validWorldSizes.begin(), out.validWorldSizes.end(), dp) ==
      out.validWorldSizes.end())
    return fail(llvm::formatv("{0} data-parallel ranks are not among the sizes global batch {1} "
                              "trains with: [{2}]",
                              dp, out.trainBatchSize, valid));
  // The largest micro batch the per-rank batch divides by.
  std::vector<int64_t> sorted(micro.begin(), micro.end());
  std::sort(sorted.rbegin(), sorted.rend());
  for (int64_t mb : sorted)
    if ((out.trainBatchSize / dp) % mb == 0) {
      out.microBatchSize = mb;
      break;
    }
  if (!out.microBatchSize)
    return fail(llvm::formatv("no micro batch size of [{0}] divides global batch {1} over {2} "
                              "data-parallel ranks",
                              [&] {
                                std::string s;
                                for (int64_t m : micro)
                                  s += (s.empty() ? "" : ", ") + std::to_string(m);
                                return s;
                              }(),
                              out.trainBatchSize, dp));
  out.gradientAccumulationSteps = out.trainBatchSize / (out.microBatchSize * dp);
  return out;
}

} // namespace mlir::ds
