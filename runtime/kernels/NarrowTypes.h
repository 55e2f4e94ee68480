// The narrow storage types ONNX models carry (float8, float4, 4- and 2-bit
// integers), one element per byte: their values as float and back. Shared
// by every backend (DS_HOST_DEVICE); the CPU's Cast kernel and the
// compiler's constant folding both use it.
//
// Encoding rounds once, to nearest even, from a double (every source ds
// casts from is exact in double, or rounds there first as ONNX's reference
// does through numpy). Beyond the largest finite value a saturating cast
// gives that value; a non-saturating one gives infinity where the type has
// one (e5m2) and NaN where it has not. float4 e2m1 has neither and always
// saturates. These are ONNX Cast-19/23's rules (onnx.numpy_helper's
// saturate_cast, and ml_dtypes' conversions otherwise).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/kernels/ElementMath.h"

namespace ds::math {

/// A narrow float: exponent and mantissa widths, bias, largest finite value
/// and which encodings are special.
struct NarrowFloat {
  enum class Specials : uint8_t {
    Ieee,  // exponent all ones: infinity (mantissa 0) or NaN (e5m2)
    Fn,    // no infinity; only all-ones exponent and mantissa is NaN (e4m3fn)
    Fnuz,  // no infinity, no negative zero; 0x80 is the one NaN
    None,  // no infinity and no NaN (e2m1)
  };
  int exponentBits, mantissaBits, bias;
  double maxFinite;
  Specials specials;

  DS_HOST_DEVICE int bits() const { return 1 + exponentBits + mantissaBits; }
  DS_HOST_DEVICE uint8_t signBit() const { return uint8_t(1u << (exponentBits + mantissaBits)); }
};

constexpr NarrowFloat kF8E4M3FN{4, 3, 7, 448.0, NarrowFloat::Specials::Fn};
constexpr NarrowFloat kF8E4M3FNUZ{4, 3, 8, 240.0, NarrowFloat::Specials::Fnuz};
constexpr NarrowFloat kF8E5M2{5, 2, 15, 57344.0, NarrowFloat::Specials::Ieee};
constexpr NarrowFloat kF8E5M2FNUZ{5, 2, 16, 57344.0, NarrowFloat::Specials::Fnuz};
constexpr NarrowFloat kF4E2M1{2, 1, 1, 6.0, NarrowFloat::Specials::None};

/// The value of `code` (its low f.bits() bits).
DS_HOST_DEVICE float narrowToFloat(uint8_t code, const NarrowFloat &f) {
  const int m = f.mantissaBits;
  const bool negative = code & f.signBit();
  const unsigned field = (code >> m) & ((1u << f.exponentBits) - 1), mant = code & ((1u << m) - 1);
  const unsigned allOnes = (1u << f.exponentBits) - 1;
  switch (f.specials) {
  case NarrowFloat::Specials::Ieee:
    if (field == allOnes) return mant ? NAN : (negative ? -INFINITY : INFINITY);
    break;
  case NarrowFloat::Specials::Fn:
    if (field == allOnes && mant == (1u << m) - 1) return NAN;
    break;
  case NarrowFloat::Specials::Fnuz:
    if (code == f.signBit()) return NAN;
    break;
  case NarrowFloat::Specials::None: break;
  }
  // Subnormals (field 0) scale the mantissa alone; normals add the hidden bit.
  float magnitude = field == 0 ? std::ldexp(float(mant), 1 - f.bias - m)
                               : std::ldexp(float((1u << m) | mant), int(field) - f.bias - m);
  return negative ? -magnitude : magnitude;
}

/// `x` rounded to nearest even in `f`, saturating as described above.
DS_HOST_DEVICE uint8_t floatToNarrow(double x, const NarrowFloat &f, bool saturate) {
  using S = NarrowFloat::Specials;
  const uint8_t sign = std::signbit(x) ? f.signBit() : 0;
  const uint8_t maxCode = uint8_t(((1u << (f.exponentBits + f.mantissaBits)) - 1) -
                                  (f.specials == S::Ieee ? (1u << f.mantissaBits)   // below inf
                                   : f.specials == S::Fn ? 1u : 0u));              // below NaN
  const uint8_t nan = f.specials == S::Fnuz ? f.signBit()
                      : f.specials == S::Fn ? uint8_t(sign | (f.signBit() - 1))
                      : f.specials == S::Ieee
                          ? uint8_t(sign | (f.signBit() - 1) & ~((1u << (f.mantissaBits - 1)) - 1))
                          : f.signBit(); // e2m1: ml_dtypes (and ONNX's data) write -0
  auto overflow = [&]() -> uint8_t {
    if (saturate || f.specials == S::None) return uint8_t(sign | maxCode);
    if (f.specials == S::Ieee) return uint8_t(sign | (maxCode + 1)); // infinity
    return nan;
  };
  if (std::isnan(x)) return nan;
  double a = std::fabs(x);
  if (std::isinf(a) || a > f.maxFinite * 2) return overflow();
  const int m = f.mantissaBits, emin = 1 - f.bias;
  int e;
  (void)std::frexp(a, &e); // a = g * 2^e, g in [0.5, 1): a's exponent is e - 1
  e = a == 0 ? emin : (e - 1 < emin ? emin : e - 1);
  // a / 2^(e - m) is exact in double; rint rounds it to nearest even.
  double r = std::rint(std::ldexp(a, m - e));
  if (r >= double(2u << m)) { // rounded up into the next binade
    ++e;
    r = double(1u << m);
  }
  if (std::ldexp(r, e - m) > f.maxFinite) return overflow();
  unsigned mag;
  if (r < double(1u << m)) mag = unsigned(r); // subnormal (e == emin): field 0
  else mag = (unsigned(e + f.bias) << m) | (unsigned(r) - (1u << m));
  if (mag == 0 && f.specials == S::Fnuz) return 0; // no negative zero
  return uint8_t(sign | mag);
}

/// float8 e8m0 (a power of two, 2^(code - 127); 0xFF is NaN), in double:
/// 2^-127 is subnormal in float, which ds-run flushes to zero (FTZ/DAZ).
DS_HOST_DEVICE double e8m0ToDouble(uint8_t code) {
  return code == 0xFF ? NAN : std::ldexp(1.0, int(code) - 127);
}

enum class E8M0Rounding : uint8_t { Up, Down, Nearest };

/// ONNX's float -> e8m0 (onnx.numpy_helper.to_float8e8m0), from float32's
/// bits: the exponent field, rounded up/down/to nearest by the mantissa;
/// the sign is dropped and NaN and infinities become 0xFF (NaN).
DS_HOST_DEVICE uint8_t floatToE8M0(float x, bool saturate, E8M0Rounding mode) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  unsigned exponent = (bits >> 23) & 0xFF;
  if (exponent == 0xFF) return 0xFF;
  bool roundUp = false;
  if (mode == E8M0Rounding::Up) {
    roundUp = (bits & 0x7FFFFF) != 0;
  } else if (mode == E8M0Rounding::Nearest) {
    const bool guard = bits & 0x400000, round = bits & 0x200000, sticky = bits & 0x1FFFFF;
    roundUp = guard && (round || sticky || exponent > 0);
  }
  if (roundUp && !(saturate && exponent == 0xFE)) ++exponent;
  return uint8_t(exponent);
}

/// A 4- or 2-bit integer's value from its low `bits` bits.
DS_HOST_DEVICE int32_t narrowIntValue(uint8_t stored, int bits, bool isSigned) {
  const uint32_t mask = (1u << bits) - 1, v = stored & mask;
  return isSigned && (v >> (bits - 1)) ? int32_t(v) - int32_t(1u << bits) : int32_t(v);
}

/// The low `bits` bits of `v` (ONNX's and ml_dtypes' wrap-around).
DS_HOST_DEVICE uint8_t narrowIntBits(int64_t v, int bits) {
  return uint8_t(uint64_t(v) & ((1u << bits) - 1));
}

} // namespace ds::math
