// Row reductions shared by softmax, layer norm and the cross-entropy loss:
// max, and the sum of exp(x - max), over one contiguous row.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/cpu/VectorMath.h" // expf's simd declaration: vectorized exp

namespace ds::rt::cpu {

/// exp(d) for d <= 0 (a logit minus the row maximum). Masked logits are
/// -inf or very negative; they would send libmvec's vector expf to its slow
/// scalar path, so anything below expf's normal range is exactly 0 here.
inline float expShifted(float d) {
  constexpr float kLow = -87.0f;
  float e = std::exp(d < kLow ? kLow : d);
  return d < kLow ? 0.0f : e;
}

// Row reductions with kLanes independent accumulators: GCC vectorizes
// these across the lanes, where a single running max or float sum is a
// serial dependency chain it may not reorder (3x faster softmax rows).
constexpr int64_t kLanes = 16;

/// The largest element of p[0, n) (NaNs are skipped, as std::max does).
inline float rowMax(const float *p, int64_t n) {
  float acc[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) acc[k] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] = p[j + k] > acc[k] ? p[j + k] : acc[k];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
  for (; j < n; ++j) m = p[j] > m ? p[j] : m;
  return m;
}

/// Sum of exp(p[j] - mx), also stored to q with kStore.
template <bool kStore> float rowExpSum(const float *p, float *q, float mx, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) {
      float e = expShifted(p[j + k] - mx);
      if constexpr (kStore) q[j + k] = e;
      acc[k] += e;
    }
  float sum = 0;
  for (int64_t k = 0; k < kLanes; ++k) sum += acc[k];
  for (; j < n; ++j) {
    float e = expShifted(p[j] - mx);
    if constexpr (kStore) q[j] = e;
    sum += e;
  }
  return sum;
}

} // namespace ds::rt::cpu
