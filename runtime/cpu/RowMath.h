// Row reductions shared by softmax, layer norm and the cross-entropy loss:
// max, and the sum of exp(x - max), over one contiguous row. Kernel code:
// included inside a kernel file's instruction-set region (after
// IsaBegin.h), so each set gets its own, vectorized for it.
#pragma once

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>

#include "runtime/cpu/VectorMath.h" // expf's simd declaration: vectorized exp

#ifndef DS_CPU_ISA_REGION
#error "include RowMath.h after runtime/cpu/IsaBegin.h"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {

// Row reductions with kLanes independent accumulators: GCC vectorizes
// these across the lanes, where a single running max or float sum is a
// serial dependency chain it may not reorder (3x faster softmax rows).
constexpr int64_t kLanes = 16;

/// The largest element of p[0, n) (NaNs are skipped, as std::max does).
inline float rowMax(const float *p, int64_t n) {
  float acc[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) acc[k] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  // `simd`: without it GCC leaves the lanes scalar (vmaxss); the select is
  // exactly vmaxps's (the accumulator kept when p is NaN).
  for (; j + kLanes <= n; j += kLanes)
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) acc[k] = p[j + k] > acc[k] ? p[j + k] : acc[k];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
  for (; j < n; ++j) m = p[j] > m ? p[j] : m;
  return m;
}

/// y = mask ? fill : alpha * x (no mask: alpha * x) and the maximum of y:
/// rowMax's value (max is exact in any order; an element only replaces a
/// smaller maximum, so NaNs never win). One simd loop with a max
/// reduction: in rowMax's lane form GCC left the byte-mask select scalar.
inline float selectMaxRow(const float *x, float alpha, const uint8_t *mask, float fill, float *y,
                          int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  if (mask) {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) {
      const float s = alpha * x[j]; // unconditional: a masked load does not vectorize
      const float v = mask[j] ? fill : s;
      y[j] = v;
      m = v > m ? v : m;
    }
  } else {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) {
      const float v = alpha * x[j];
      y[j] = v;
      m = v > m ? v : m;
    }
  }
  return m;
}

/// y = x + mask (an additive mask row) and the maximum of y, in one pass:
/// rowMax's value, as selectMaxRow's.
inline float addMaxRow(const float *x, const float *mask, float *y, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) {
    const float v = x[j] + mask[j];
    y[j] = v;
    m = v > m ? v : m;
  }
  return m;
}

/// sum(a * b) over p[0, n): kLanes f32 lanes, added in f64 (softmax's
/// backward, squared norms).
inline double rowDot(const float *a, const float *b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += a[j + l] * b[j + l];
  double dot = 0;
  for (int64_t l = 0; l < kLanes; ++l) dot += lanes[l];
  for (; j < n; ++j) dot += static_cast<double>(a[j]) * b[j];
  return dot;
}

/// e^x for x in [-87, 0] (a logit minus its row maximum): 2^n e^r with
/// n = round(x log2 e), r = x - n ln 2 split in two parts (Cody-Waite), and
/// a degree-6 polynomial for e^r on |r| <= ln2/2; within 2 ulp of expf.
/// Inline arithmetic the compiler vectorizes with FMAs, where libmvec's
/// vector expf is a call that spills every register, and takes a slow
/// per-lane path for masked logits below its normal range.
inline float expNonPositive(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
  float r = n * -0.693359375f + x;
  r = n * 2.12194440e-4f + r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

/// exp(d) for a shifted logit d <= 0; exactly 0 below -87 (masked logits,
/// -inf included), where expf would underflow anyway.
inline float expShifted(float d) {
  constexpr float kLow = -87.0f;
  const float e = expNonPositive(d < kLow ? kLow : d);
  return d < kLow ? 0.0f : e;
}

/// Sum of exp(p[j] - mx), also stored to q with kStore.
template <bool kStore> float rowExpSum(const float *p, float *q, float mx, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  // `simd` (q may be p: each lane reads its element before writing it):
  // without it GCC versions the loop for q overlapping p and spills the
  // lanes, 20% slower.
  for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) {
      float e = expShifted(p[j + k] - mx);
      if constexpr (kStore) q[j + k] = e;
      acc[k] += e;
    }
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

/// ONNX QuantizeLinear to uint8 of x[0, n): q = clamp(round_half_even(x /
/// scale) + zero, 0, 255), into `q` and dequantized, (q - zero) * scale,
/// into `dequant` (either may be null; `dequant` may be `x`).
///
/// ONNX divides; a division costs a vector unit ~16 cycles where a multiply
/// costs one, and only round(x / scale) matters. t = x * (1 / scale) is
/// within 2^-23 |x / scale| of the quotient, so it rounds to the same
/// integer unless it lies that close to a half: those few lanes are
/// rounded again from the division itself. The results are the
/// division's, bit for bit.
inline void roundToUint8(const float *x, int64_t n, float scale, float zero, uint8_t *q,
                         float *dequant) {
  constexpr int64_t kBlock = 256;
  const float s = scale, z = zero, inv = 1.0f / scale;
  // One block's results from its rounded quotients (`Quotient(v)`), each
  // written once (the block is in cache; `dequant` may overwrite `x`).
  auto store = [&](const float *xb, int64_t len, uint8_t *qb, float *db, auto quotient) {
    if (qb && db) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) {
        const float r = std::min(std::max(std::nearbyint(quotient(xb[i])) + z, 0.0f), 255.0f);
        qb[i] = static_cast<uint8_t>(static_cast<int32_t>(r));
        db[i] = (r - z) * s;
      }
    } else if (qb) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i)
        qb[i] = static_cast<uint8_t>(static_cast<int32_t>(
            std::min(std::max(std::nearbyint(quotient(xb[i])) + z, 0.0f), 255.0f)));
    } else if (db) {
#pragma omp simd
      for (int64_t i = 0; i < len; ++i)
        db[i] = (std::min(std::max(std::nearbyint(quotient(xb[i])) + z, 0.0f), 255.0f) - z) * s;
    }
  };
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = std::min(kBlock, n - i0);
    const float *xb = x + i0;
    int near = 0;
#pragma omp simd reduction(| : near)
    for (int64_t i = 0; i < len; ++i) {
      const float t = xb[i] * inv;
      near |= std::fabs(std::fabs(t - std::nearbyint(t)) - 0.5f) <= 3e-7f * std::fabs(t);
    }
    uint8_t *qb = q ? q + i0 : nullptr;
    float *db = dequant ? dequant + i0 : nullptr;
    // A block with a lane near a half takes the division for every lane
    // (elsewhere both give the same integer).
    if (near) store(xb, len, qb, db, [s](float v) { return v / s; });
    else store(xb, len, qb, db, [inv](float v) { return v * inv; });
  }
}

} // namespace ds::rt::cpu::DS_CPU_ISA
