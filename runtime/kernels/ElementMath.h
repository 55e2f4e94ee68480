// Element-level math for every backend: the CPU kernels instantiate these
// functors in their loops. They are host/device (DS_HOST_DEVICE) so GPU
// kernels can share them when the CUDA backend gets kernels (it has none
// yet), and the CPU tests then cover the GPU's arithmetic too.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define DS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DS_HOST_DEVICE inline
#endif

namespace ds::math {

// ---- 16-bit floats, stored as their bits -------------------------------------
/// IEEE binary16 <-> float, round to nearest even, NaN and infinities kept.
DS_HOST_DEVICE float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (man << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
DS_HOST_DEVICE uint16_t floatToHalf(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) // inf or NaN
    return sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0);
  if (absx >= 0x477ff000) return sign | 0x7c00; // rounds past the largest half
  if (absx < 0x38800000) { // subnormal or zero in half
    if (absx < 0x33000000) return sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; // 14..24
    uint32_t half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t r = absx - 0x38000000; // rebias exponent by 112
  uint32_t half = r >> 13, rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}
/// The linear index the importer gives a GatherND/ScatterND row with a
/// component outside its dimension (-2^62: out of range of any tensor), so
/// the kernels report that row.
constexpr int64_t kIndexRowOutOfRange = -(int64_t(1) << 62);

/// bfloat16 <-> float: the top half of the float, round to nearest even.
DS_HOST_DEVICE float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
DS_HOST_DEVICE uint16_t floatToBf16(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40); // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// ---- binary arithmetic -----------------------------------------------------
struct Add { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a + b; } };
struct Sub { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a - b; } };
struct Mul { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a * b; } };
/// Integer division truncates toward zero (C, onnxruntime). Division by zero
/// and INT_MIN / -1 are caught by the kernel before they reach this functor.
struct Div { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a / b; } };
struct Min {
  template <class T> DS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a; // NaN propagates, as in numpy.minimum
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};
struct Max {
  template <class T> DS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};
/// x, or a zero of its sign when it is subnormal. ds-run computes with
/// denormals as zero (FTZ/DAZ); the vector log and pow decode a subnormal's
/// exponent bits themselves and would return neither the exact nor the
/// flushed value (log(1e-40) = -103.97): they get the flushed input.
template <class T> DS_HOST_DEVICE T flushSubnormal(T x) {
  const T smallest = sizeof(T) == 4 ? T(1.17549435082228750797e-38) : T(2.2250738585072013831e-308);
  return (x < smallest && x > -smallest) ? x * T(0) : x;
}

struct Pow {
  template <class T> DS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(flushSubnormal(a), b);
    } else {
      if constexpr (std::is_signed_v<T>)
        if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      T r = 1;
      while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
      return r;
    }
  }
};

// ---- comparisons (result is bool stored as uint8) ------------------------
struct Equal { template <class T> DS_HOST_DEVICE uint8_t operator()(T a, T b) const { return a == b; } };
struct Less { template <class T> DS_HOST_DEVICE uint8_t operator()(T a, T b) const { return a < b; } };
struct Greater { template <class T> DS_HOST_DEVICE uint8_t operator()(T a, T b) const { return a > b; } };
struct LessEqual { template <class T> DS_HOST_DEVICE uint8_t operator()(T a, T b) const { return a <= b; } };
struct GreaterEqual { template <class T> DS_HOST_DEVICE uint8_t operator()(T a, T b) const { return a >= b; } };
struct And { DS_HOST_DEVICE uint8_t operator()(uint8_t a, uint8_t b) const { return a && b; } };
struct Or { DS_HOST_DEVICE uint8_t operator()(uint8_t a, uint8_t b) const { return a || b; } };
struct Xor { DS_HOST_DEVICE uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) != (b != 0); } };

// ---- bitwise (integer types) ------------------------------------------------
struct BitAnd { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a & b; } };
struct BitOr { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a | b; } };
struct BitXor { template <class T> DS_HOST_DEVICE T operator()(T a, T b) const { return a ^ b; } };
struct BitNot { template <class T> DS_HOST_DEVICE T operator()(T a) const { return static_cast<T>(~a); } };
/// ONNX BitShift (opset 28): a shift below 0 or of the width or more
/// leaves only what the fill gives (0 left; the sign fill right).
template <class T> DS_HOST_DEVICE bool shiftOutOfRange(T s) {
  if constexpr (std::is_signed_v<T>)
    if (s < 0) return true;
  return static_cast<uint64_t>(s) >= sizeof(T) * 8;
}
struct ShiftLeft {
  template <class T> DS_HOST_DEVICE T operator()(T a, T s) const {
    using U = std::make_unsigned_t<T>;
    if (shiftOutOfRange(s)) return T(0);
    return static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<int>(s)));
  }
};
struct ShiftRight {
  template <class T> DS_HOST_DEVICE T operator()(T a, T s) const {
    bool negative = false;
    if constexpr (std::is_signed_v<T>) negative = a < 0;
    if (shiftOutOfRange(s)) return negative ? T(-1) : T(0);
    return static_cast<T>(a >> static_cast<int>(s)); // arithmetic for signed T
  }
};

// ---- unary -----------------------------------------------------------------
struct Neg { template <class T> DS_HOST_DEVICE T operator()(T x) const { return -x; } };
struct Abs { template <class T> DS_HOST_DEVICE T operator()(T x) const { return x < 0 ? -x : x; } };
// NaN stays NaN (torch.relu, numpy.maximum(x, 0)): a NaN must not vanish into a 0.
struct Relu { template <class T> DS_HOST_DEVICE T operator()(T x) const { return x < T(0) ? T(0) : x; } };
struct Sqrt { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::sqrt(x); } };
struct Reciprocal { template <class T> DS_HOST_DEVICE T operator()(T x) const { return T(1) / x; } };
struct Exp { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::exp(x); } };
struct Log {
  template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::log(flushSubnormal(x)); }
};
struct Erf { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::erf(x); } };
struct Tanh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::tanh(x); } };
struct Sigmoid {
  template <class T> DS_HOST_DEVICE T operator()(T x) const {
    return T(1) / (T(1) + std::exp(-x));
  }
};
/// GELU, exact form: x/2 * (1 + erf(x / sqrt(2))) (torch.nn.GELU()).
struct Gelu {
  template <class T> DS_HOST_DEVICE T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
/// GELU, tanh form (torch.nn.GELU(approximate="tanh")).
struct GeluTanh {
  template <class T> DS_HOST_DEVICE T operator()(T x) const {
    const T k = T(0.79788456080286535588); // sqrt(2/pi)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
};
/// GELU's derivative (erf form): Phi(x) + x phi(x); ds.gelu_grad is dy times it.
struct GeluDeriv {
  template <class T> DS_HOST_DEVICE T operator()(T v) const {
    T cdf = T(0.5) * (T(1) + std::erf(v * T(0.70710678118654752440)));
    T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * v * v);
    return cdf + v * pdf;
  }
};
/// GELU's derivative (tanh form).
struct GeluTanhDeriv {
  template <class T> DS_HOST_DEVICE T operator()(T v) const {
    const T k = T(0.79788456080286535588), a = T(0.044715);
    T t = std::tanh(k * (v + a * v * v * v));
    return T(0.5) * (1 + t) + T(0.5) * v * (1 - t * t) * k * (1 + 3 * a * v * v);
  }
};
struct Not { DS_HOST_DEVICE uint8_t operator()(uint8_t x) const { return !x; } };
struct Sin { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::sin(x); } };
struct Cos { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::cos(x); } };
struct Tan { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::tan(x); } };
struct Asin { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::asin(x); } };
struct Acos { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::acos(x); } };
struct Atan { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::atan(x); } };
struct Sinh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::sinh(x); } };
struct Cosh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::cosh(x); } };
struct Asinh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::asinh(x); } };
struct Acosh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::acosh(x); } };
struct Atanh { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::atanh(x); } };
struct Floor { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::floor(x); } };
struct Ceil { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::ceil(x); } };
/// Half to even, as ONNX Round and numpy.round (the default rounding mode).
struct Round { template <class T> DS_HOST_DEVICE T operator()(T x) const { return std::nearbyint(x); } };
struct Sign {
  // NaN stays NaN (x != x only for a float NaN), as numpy and ONNX.
  template <class T> DS_HOST_DEVICE T operator()(T x) const {
    return x != x ? x : T((x > T(0)) - (x < T(0)));
  }
};
/// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
struct Softplus {
  template <class T> DS_HOST_DEVICE T operator()(T x) const {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-(x < T(0) ? -x : x)));
  }
};
struct IsNan { template <class T> DS_HOST_DEVICE uint8_t operator()(T x) const { return x != x; } };
struct IsInf {
  template <class T> DS_HOST_DEVICE uint8_t operator()(T x) const {
    return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
  }
};
/// ONNX Mod: fmod for floats; for integers the result takes the divisor's
/// sign (Python's %). Zero divisors are caught by the kernel.
struct Mod {
  template <class T> DS_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::fmod(a, b);
    } else {
      T r = a % b;
      if constexpr (std::is_signed_v<T>)
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
      return r;
    }
  }
};

// ---- counter-based random numbers -------------------------------------------
/// SplitMix64's output function: a bijective 64-bit mix whose outputs over
/// consecutive counters pass BigCrush (Steele et al., OOPSLA 2014).
DS_HOST_DEVICE uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/// Dropout's keep decision for element `i` of stream `stream` under `key`:
/// a pure function of its counters, so the mask is the same wherever and
/// however often it is computed (recompute, any thread split, any backend).
/// Element i keeps with probability 1 - ratio (24-bit resolution).
struct DropoutKeep {
  uint64_t base;    // mix64(key ^ mix64(stream)), once per step
  uint32_t cutoff;  // ratio * 2^24
  DS_HOST_DEVICE static uint64_t baseOf(uint64_t key, uint64_t stream) {
    return mix64(key ^ mix64(stream + 0x9e3779b97f4a7c15ull));
  }
  DS_HOST_DEVICE bool operator()(uint64_t i) const {
    return static_cast<uint32_t>(mix64(base + i * 0x9e3779b97f4a7c15ull) >> 40) >= cutoff;
  }
};

/// ds.random's samples: element i of stream `stream` under `key`, a pure
/// function of its counters as DropoutKeep's decisions are. A uniform
/// sample is the top 53 bits of mix64 of counter 2i (in [0, 1)); a normal
/// one is Box-Muller of counters 2i and 2i + 1.
struct RandomDraw {
  uint64_t base;  // DropoutKeep::baseOf(key, stream)
  DS_HOST_DEVICE double unit(uint64_t counter) const {
    return static_cast<double>(mix64(base + counter * 0x9e3779b97f4a7c15ull) >> 11) *
           0x1.0p-53;
  }
  DS_HOST_DEVICE double uniform(uint64_t i, double low, double high) const {
    // One fused multiply-add, written out: compilers that contract and
    // those that do not then agree on the bits.
    return std::fma(high - low, unit(2 * i), low);
  }
  DS_HOST_DEVICE double normal(uint64_t i, double mean, double scale) const {
    // 1 - u is in (0, 1]: the logarithm is finite.
    double r = std::sqrt(-2.0 * std::log(1.0 - unit(2 * i)));
    return std::fma(scale * r, std::cos(6.283185307179586 * unit(2 * i + 1)), mean);
  }
};

} // namespace ds::math
