// Elementwise kernels: binary arithmetic and comparisons with numpy
// broadcasting, unary math, where, cast. Inner loops are contiguous (the
// broadcast indexer collapses dimensions) so the compiler vectorizes them.
#include <cstring>
#include <limits>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/kernels/ElementMath.h"
#include "runtime/kernels/NarrowTypes.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

/// 16-bit floats compute in f32: convert, apply, round back.
template <typename Op, bool kBf16> struct HalfBinary {
  static float in(uint16_t v) { return kBf16 ? math::bf16ToFloat(v) : math::halfToFloat(v); }
  uint16_t operator()(uint16_t a, uint16_t b) const {
    float r = Op()(in(a), in(b));
    return kBf16 ? math::floatToBf16(r) : math::floatToHalf(r);
  }
};
template <typename Op, bool kBf16> struct HalfPredicate {
  uint8_t operator()(uint16_t v) const { return Op()(HalfBinary<Op, kBf16>::in(v)); }
};
template <typename Op, bool kBf16> struct HalfCompare {
  uint8_t operator()(uint16_t a, uint16_t b) const {
    return Op()(HalfBinary<Op, kBf16>::in(a), HalfBinary<Op, kBf16>::in(b));
  }
};
template <typename Op, bool kBf16> struct HalfUnary {
  uint16_t operator()(uint16_t a) const {
    float r = Op()(HalfBinary<Op, kBf16>::in(a));
    return kBf16 ? math::floatToBf16(r) : math::floatToHalf(r);
  }
};

// Applies out[i] = op(a[i], b[i]) over a broadcast.
template <typename In, typename Out, typename Op>
PreparedStep makeBinary(BroadcastIndexer ix, const TensorView a, const TensorView b,
                        const TensorView o) {
  return [ix = std::move(ix), pa = a.as<In>(), pb = b.as<In>(),
          po = o.as<Out>()]() -> absl::Status {
    Op op;
    const int64_t inner = ix.inner();
    const int64_t sa = ix.strides[0].back(), sb = ix.strides[1].back();
    auto runRow = [&](int64_t row, int64_t from, int64_t to) {
      int64_t off[2];
      ix.rowOffsets(row, off);
      const In *x = pa + off[0];
      const In *y = pb + off[1];
      Out *z = po + row * inner;
      if (sa == 1 && sb == 1) {
#pragma omp simd
        for (int64_t i = from; i < to; ++i) z[i] = op(x[i], y[i]);
      } else if (sa == 0 && sb == 1) {
        const In xv = x[0];
#pragma omp simd
        for (int64_t i = from; i < to; ++i) z[i] = op(xv, y[i]);
      } else if (sa == 1 && sb == 0) {
        const In yv = y[0];
#pragma omp simd
        for (int64_t i = from; i < to; ++i) z[i] = op(x[i], yv);
      } else {
        for (int64_t i = from; i < to; ++i) z[i] = op(x[i * sa], y[i * sb]);
      }
    };
    const int64_t rows = ix.rows();
    if (rows == 1) {
      parallelFor(inner, 16384, [&](int64_t lo, int64_t hi) { runRow(0, lo, hi); });
    } else {
      parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                  [&](int64_t lo, int64_t hi) {
                    for (int64_t r = lo; r < hi; ++r) runRow(r, 0, inner);
                  });
    }
    return absl::OkStatus();
  };
}

absl::StatusOr<BroadcastIndexer> checkBinary(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  if (c.in[0].dtype != c.in[1].dtype)
    return c.error(absl::StrCat("operands differ in type: ", dtypeName(c.in[0].dtype),
                                " and ", dtypeName(c.in[1].dtype)));
  auto bshape = broadcastShapes(c.in[0].shape, c.in[1].shape);
  if (!bshape || *bshape != c.out[0].shape)
    return c.error(absl::StrCat("operands [", shapeToString(c.in[0].shape), "] and [",
                                shapeToString(c.in[1].shape),
                                "] do not broadcast to the result [",
                                shapeToString(c.out[0].shape), "]"));
  auto ix = makeBroadcastIndexer(c.out[0].shape, {c.in[0].shape, c.in[1].shape});
  if (!ix.ok())
    return c.error(std::string(ix.status().message()));
  return ix;
}

template <typename Op, bool kIntegers, bool kFloats>
absl::StatusOr<PreparedStep> prepareArith(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(BroadcastIndexer ix, checkBinary(c));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  const TensorView a = c.in[0], b = c.in[1], o = c.out[0];
  switch (a.dtype) {
  case plan::F32: if constexpr (kFloats) return makeBinary<float, float, Op>(ix, a, b, o); break;
  case plan::F64: if constexpr (kFloats) return makeBinary<double, double, Op>(ix, a, b, o); break;
  case plan::F16: if constexpr (kFloats) return makeBinary<uint16_t, uint16_t, HalfBinary<Op, false>>(ix, a, b, o); break;
  case plan::BF16: if constexpr (kFloats) return makeBinary<uint16_t, uint16_t, HalfBinary<Op, true>>(ix, a, b, o); break;
  case plan::I32: if constexpr (kIntegers) return makeBinary<int32_t, int32_t, Op>(ix, a, b, o); break;
  case plan::I64: if constexpr (kIntegers) return makeBinary<int64_t, int64_t, Op>(ix, a, b, o); break;
  case plan::I8: if constexpr (kIntegers) return makeBinary<int8_t, int8_t, Op>(ix, a, b, o); break;
  case plan::I16: if constexpr (kIntegers) return makeBinary<int16_t, int16_t, Op>(ix, a, b, o); break;
  case plan::U8: if constexpr (kIntegers) return makeBinary<uint8_t, uint8_t, Op>(ix, a, b, o); break;
  case plan::U16: if constexpr (kIntegers) return makeBinary<uint16_t, uint16_t, Op>(ix, a, b, o); break;
  case plan::U32: if constexpr (kIntegers) return makeBinary<uint32_t, uint32_t, Op>(ix, a, b, o); break;
  case plan::U64: if constexpr (kIntegers) return makeBinary<uint64_t, uint64_t, Op>(ix, a, b, o); break;
  default: break;
  }
  return c.error(absl::StrCat("does not support element type ", dtypeName(a.dtype)));
}

// Integer Div and Mod wrap the generic loop with a check of the divisor.
template <typename T, typename Op>
PreparedStep makeIntDiv(const KernelContext &c, BroadcastIndexer ix) {
  PreparedStep inner = makeBinary<T, T, Op>(ix, c.in[0], c.in[1], c.out[0]);
  const TensorView a = c.in[0], b = c.in[1];
  std::string where = std::string(c.error("").message());
  return [inner, a, b, where]() -> absl::Status {
    const T *pb = b.as<T>();
    for (int64_t i = 0; i < b.numel; ++i) {
      if (pb[i] == 0)
        return absl::InvalidArgumentError(where + "integer division by zero");
      if (std::is_signed_v<T> && pb[i] == T(-1)) {
        const T *pa = a.as<T>();
        for (int64_t j = 0; j < a.numel; ++j)
          if (pa[j] == std::numeric_limits<T>::min())
            return absl::InvalidArgumentError(where + "integer division overflows");
      }
    }
    return inner();
  };
}

template <typename Op>
absl::StatusOr<PreparedStep> prepareDiv(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(BroadcastIndexer ix, checkBinary(c));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  switch (c.in[0].dtype) {
  case plan::F32: return makeBinary<float, float, Op>(ix, c.in[0], c.in[1], c.out[0]);
  case plan::F64: return makeBinary<double, double, Op>(ix, c.in[0], c.in[1], c.out[0]);
  case plan::F16:
    return makeBinary<uint16_t, uint16_t, HalfBinary<Op, false>>(ix, c.in[0], c.in[1], c.out[0]);
  case plan::BF16:
    return makeBinary<uint16_t, uint16_t, HalfBinary<Op, true>>(ix, c.in[0], c.in[1], c.out[0]);
  case plan::I32: return makeIntDiv<int32_t, Op>(c, ix);
  case plan::I64: return makeIntDiv<int64_t, Op>(c, ix);
  case plan::I8: return makeIntDiv<int8_t, Op>(c, ix);
  case plan::I16: return makeIntDiv<int16_t, Op>(c, ix);
  case plan::U8: return makeIntDiv<uint8_t, Op>(c, ix);
  case plan::U16: return makeIntDiv<uint16_t, Op>(c, ix);
  case plan::U32: return makeIntDiv<uint32_t, Op>(c, ix);
  case plan::U64: return makeIntDiv<uint64_t, Op>(c, ix);
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

template <typename Op>
absl::StatusOr<PreparedStep> prepareCompare(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(BroadcastIndexer ix, checkBinary(c));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::BOOL, "result"));
  const TensorView a = c.in[0], b = c.in[1], o = c.out[0];
  switch (a.dtype) {
  case plan::F32: return makeBinary<float, uint8_t, Op>(ix, a, b, o);
  case plan::F64: return makeBinary<double, uint8_t, Op>(ix, a, b, o);
  case plan::F16: return makeBinary<uint16_t, uint8_t, HalfCompare<Op, false>>(ix, a, b, o);
  case plan::BF16: return makeBinary<uint16_t, uint8_t, HalfCompare<Op, true>>(ix, a, b, o);
  case plan::I32: return makeBinary<int32_t, uint8_t, Op>(ix, a, b, o);
  case plan::I64: return makeBinary<int64_t, uint8_t, Op>(ix, a, b, o);
  case plan::I8: return makeBinary<int8_t, uint8_t, Op>(ix, a, b, o);
  case plan::I16: return makeBinary<int16_t, uint8_t, Op>(ix, a, b, o);
  case plan::U16: return makeBinary<uint16_t, uint8_t, Op>(ix, a, b, o);
  case plan::U32: return makeBinary<uint32_t, uint8_t, Op>(ix, a, b, o);
  case plan::U64: return makeBinary<uint64_t, uint8_t, Op>(ix, a, b, o);
  case plan::U8:
  case plan::BOOL: return makeBinary<uint8_t, uint8_t, Op>(ix, a, b, o);
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(a.dtype)));
  }
}

template <typename Op>
absl::StatusOr<PreparedStep> prepareLogical(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(BroadcastIndexer ix, checkBinary(c));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::BOOL, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::BOOL, "result"));
  return makeBinary<uint8_t, uint8_t, Op>(ix, c.in[0], c.in[1], c.out[0]);
}

template <typename T, typename Op>
PreparedStep makeUnary(const TensorView x, const TensorView o) {
  return [px = x.as<T>(), po = o.as<T>(), n = o.numel]() -> absl::Status {
    Op op;
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = op(px[i]);
    });
    return absl::OkStatus();
  };
}

template <typename Op, bool kIntegers>
absl::StatusOr<PreparedStep> prepareUnary(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  switch (c.in[0].dtype) {
  case plan::F32: return makeUnary<float, Op>(c.in[0], c.out[0]);
  case plan::F64: return makeUnary<double, Op>(c.in[0], c.out[0]);
  case plan::F16: return makeUnary<uint16_t, HalfUnary<Op, false>>(c.in[0], c.out[0]);
  case plan::BF16: return makeUnary<uint16_t, HalfUnary<Op, true>>(c.in[0], c.out[0]);
  case plan::I32: if (kIntegers) return makeUnary<int32_t, Op>(c.in[0], c.out[0]); break;
  case plan::I64: if (kIntegers) return makeUnary<int64_t, Op>(c.in[0], c.out[0]); break;
  case plan::I8: if (kIntegers) return makeUnary<int8_t, Op>(c.in[0], c.out[0]); break;
  case plan::I16: if (kIntegers) return makeUnary<int16_t, Op>(c.in[0], c.out[0]); break;
  case plan::U8: if (kIntegers) return makeUnary<uint8_t, Op>(c.in[0], c.out[0]); break;
  case plan::U16: if (kIntegers) return makeUnary<uint16_t, Op>(c.in[0], c.out[0]); break;
  case plan::U32: if (kIntegers) return makeUnary<uint32_t, Op>(c.in[0], c.out[0]); break;
  case plan::U64: if (kIntegers) return makeUnary<uint64_t, Op>(c.in[0], c.out[0]); break;
  default: break;
  }
  return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
}

/// Integer-only unary ops (bitwise_not).
template <typename Op>
absl::StatusOr<PreparedStep> prepareIntegerUnary(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  switch (c.in[0].dtype) {
  case plan::I8: return makeUnary<int8_t, Op>(c.in[0], c.out[0]);
  case plan::I16: return makeUnary<int16_t, Op>(c.in[0], c.out[0]);
  case plan::I32: return makeUnary<int32_t, Op>(c.in[0], c.out[0]);
  case plan::I64: return makeUnary<int64_t, Op>(c.in[0], c.out[0]);
  case plan::U8: return makeUnary<uint8_t, Op>(c.in[0], c.out[0]);
  case plan::U16: return makeUnary<uint16_t, Op>(c.in[0], c.out[0]);
  case plan::U32: return makeUnary<uint32_t, Op>(c.in[0], c.out[0]);
  case plan::U64: return makeUnary<uint64_t, Op>(c.in[0], c.out[0]);
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

/// bitcast: the operand's bytes, copied (same shape and element width).
absl::StatusOr<PreparedStep> prepareBitcast(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  if (dtypeSize(c.in[0].dtype) != dtypeSize(c.out[0].dtype))
    return c.error(absl::StrCat("cannot reinterpret ", dtypeName(c.in[0].dtype), " as ",
                                dtypeName(c.out[0].dtype), ": the widths differ"));
  return PreparedStep([x = c.in[0].as<uint8_t>(), y = c.out[0].as<uint8_t>(),
                       bytes = c.in[0].numel * dtypeSize(c.in[0].dtype)]() -> absl::Status {
    if (x != y) std::memcpy(y, x, bytes);
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareGelu(const KernelContext &c) {
  std::string approx = "none";
  if (c.hasAttr("approximate")) {
    DS_ASSIGN_OR_RETURN(approx, c.stringAttr("approximate"));
  }
  if (approx == "none")
    return prepareUnary<math::Gelu, false>(c);
  if (approx == "tanh")
    return prepareUnary<math::GeluTanh, false>(c);
  return c.error(absl::StrCat("unknown approximation '", approx, "'"));
}

/// fake_quantize: QuantizeLinear to uint8 and DequantizeLinear, in one pass.
absl::StatusOr<PreparedStep> prepareFakeQuantize(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_ASSIGN_OR_RETURN(double scale, c.floatAttr("scale"));
  DS_ASSIGN_OR_RETURN(int64_t zero, c.intAttr("zero_point"));
  if (!(scale > 0) || !std::isfinite(static_cast<float>(scale)) || zero < 0 || zero > 255)
    return c.error("scale must be positive and finite and zero_point in [0, 255]");
  return PreparedStep([x = c.in[0].as<float>(), y = c.out[0].as<float>(), n = c.out[0].numel,
                       s = static_cast<float>(scale), z = static_cast<float>(zero)] {
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
      roundToUint8(x + lo, hi - lo, s, z, nullptr, y + lo);
    });
    return absl::OkStatus();
  });
}

template <typename T, typename Op>
PreparedStep makePredicate(const TensorView x, const TensorView o) {
  return [px = x.as<T>(), po = o.as<uint8_t>(), n = o.numel]() -> absl::Status {
    Op op;
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = op(px[i]);
    });
    return absl::OkStatus();
  };
}

template <typename Op>
absl::StatusOr<PreparedStep> preparePredicate(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::BOOL, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  switch (c.in[0].dtype) {
  case plan::F32: return makePredicate<float, Op>(c.in[0], c.out[0]);
  case plan::F64: return makePredicate<double, Op>(c.in[0], c.out[0]);
  case plan::F16: return makePredicate<uint16_t, HalfPredicate<Op, false>>(c.in[0], c.out[0]);
  case plan::BF16: return makePredicate<uint16_t, HalfPredicate<Op, true>>(c.in[0], c.out[0]);
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

absl::StatusOr<PreparedStep> prepareNot(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::BOOL, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::BOOL, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  return makeUnary<uint8_t, math::Not>(c.in[0], c.out[0]);
}

// where(cond, x, y): a byte-level select, so any element type works.
template <typename T>
PreparedStep makeWhere(BroadcastIndexer ix, const KernelContext &c) {
  return [ix = std::move(ix), pc = c.in[0].as<uint8_t>(), px = c.in[1].as<T>(),
          py = c.in[2].as<T>(), po = c.out[0].as<T>()]() -> absl::Status {
    const int64_t inner = ix.inner();
    const int64_t sc = ix.strides[0].back(), sx = ix.strides[1].back(),
                  sy = ix.strides[2].back();
    parallelFor(ix.rows(), std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                [&](int64_t lo, int64_t hi) {
                  int64_t off[3];
                  for (int64_t r = lo; r < hi; ++r) {
                    ix.rowOffsets(r, off);
                    const uint8_t *cc = pc + off[0];
                    const T *x = px + off[1];
                    const T *y = py + off[2];
                    T *z = po + r * inner;
                    for (int64_t i = 0; i < inner; ++i)
                      z[i] = cc[i * sc] ? x[i * sx] : y[i * sy];
                  }
                });
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareWhere(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::BOOL, "condition"));
  if (c.in[1].dtype != c.in[2].dtype || c.out[0].dtype != c.in[1].dtype)
    return c.error("branches and result must share one element type");
  auto s = broadcastShapes(c.in[0].shape, c.in[1].shape);
  if (s) s = broadcastShapes(*s, c.in[2].shape);
  if (!s || *s != c.out[0].shape)
    return c.error(absl::StrCat("operands do not broadcast to the result [",
                                shapeToString(c.out[0].shape), "]"));
  auto ix = makeBroadcastIndexer(c.out[0].shape,
                                 {c.in[0].shape, c.in[1].shape, c.in[2].shape});
  if (!ix.ok())
    return c.error(std::string(ix.status().message()));
  switch (dtypeSize(c.out[0].dtype)) {
  case 1: return makeWhere<uint8_t>(*ix, c);
  case 2: return makeWhere<uint16_t>(*ix, c);
  case 4: return makeWhere<uint32_t>(*ix, c);
  case 8: return makeWhere<uint64_t>(*ix, c);
  default: return c.error("unsupported element size");
  }
}

// ---- cast --------------------------------------------------------------------
template <typename From, typename To, bool kToBool = false>
PreparedStep makeCast(const TensorView x, const TensorView o) {
  return [px = x.as<From>(), po = o.as<To>(), n = o.numel]() -> absl::Status {
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        if constexpr (kToBool)
          po[i] = px[i] != From(0);
        else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
          // Out-of-range and NaN float->int casts are UB in C++; saturate.
          From v = px[i];
          if (!(v == v)) po[i] = 0;
          else if (v >= static_cast<From>(std::numeric_limits<To>::max())) po[i] = std::numeric_limits<To>::max();
          else if (v <= static_cast<From>(std::numeric_limits<To>::min())) po[i] = std::numeric_limits<To>::min();
          else po[i] = static_cast<To>(v);
        } else
          po[i] = static_cast<To>(px[i]);
      }
    });
    return absl::OkStatus();
  };
}

template <typename From>
absl::StatusOr<PreparedStep> castFrom(const KernelContext &c) {
  const TensorView x = c.in[0], o = c.out[0];
  switch (o.dtype) {
  case plan::F32: return makeCast<From, float>(x, o);
  case plan::F64: return makeCast<From, double>(x, o);
  case plan::I8: return makeCast<From, int8_t>(x, o);
  case plan::I16: return makeCast<From, int16_t>(x, o);
  case plan::I32: return makeCast<From, int32_t>(x, o);
  case plan::I64: return makeCast<From, int64_t>(x, o);
  case plan::U8: return makeCast<From, uint8_t>(x, o);
  case plan::U16: return makeCast<From, uint16_t>(x, o);
  case plan::U32: return makeCast<From, uint32_t>(x, o);
  case plan::U64: return makeCast<From, uint64_t>(x, o);
  case plan::BOOL: return makeCast<From, uint8_t, true>(x, o);
  default: return c.error(absl::StrCat("cannot cast to ", dtypeName(o.dtype)));
  }
}

/// f32 <-> bf16/f16, the casts mixed precision puts around every product:
/// straight loops the compiler vectorizes, split over the threads.
template <typename From, typename To, To (*Convert)(From)>
PreparedStep castLoop(const TensorView &x, const TensorView &o) {
  const From *in = x.as<From>();
  To *out = o.as<To>();
  const int64_t n = o.numel;
  return PreparedStep([=] {
    parallelFor(n, 1 << 15, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) out[i] = Convert(in[i]);
    });
    return absl::OkStatus();
  });
}

#if defined(DS_CPU_ISA_AVX512)
/// f32 <-> f16 with F16C's conversions (round to nearest even, NaN stays
/// NaN, subnormals exact): the scalar RNE above is branchy and does not
/// vectorize; these are one instruction per 16 elements.
PreparedStep halfCastF16C(const TensorView &x, const TensorView &o, bool toHalf) {
  const int64_t n = o.numel;
  return PreparedStep([=] {
    parallelFor(n, 1 << 15, [&](int64_t lo, int64_t hi) {
      int64_t i = lo;
      if (toHalf) {
        const float *in = x.as<float>();
        uint16_t *out = o.as<uint16_t>();
        for (; i + 16 <= hi; i += 16)
          _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i),
                              _mm512_cvtps_ph(_mm512_loadu_ps(in + i),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (; i < hi; ++i) out[i] = math::floatToHalf(in[i]);
      } else {
        const uint16_t *in = x.as<uint16_t>();
        float *out = o.as<float>();
        for (; i + 16 <= hi; i += 16)
          _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                        reinterpret_cast<const __m256i *>(in + i))));
        for (; i < hi; ++i) out[i] = math::halfToFloat(in[i]);
      }
    });
    return absl::OkStatus();
  });
}
#endif

/// Casts that involve a 16-bit float go through f32: in.f16 -> f32 -> out.
absl::StatusOr<PreparedStep> castViaDouble(const KernelContext &c);

absl::StatusOr<PreparedStep> prepareHalfCast(const KernelContext &c) {
  const TensorView x = c.in[0], o = c.out[0];
#if defined(DS_CPU_ISA_AVX512)
  if (x.dtype == plan::F32 && o.dtype == plan::F16) return halfCastF16C(x, o, true);
  if (x.dtype == plan::F16 && o.dtype == plan::F32) return halfCastF16C(x, o, false);
#endif
  if (x.dtype == plan::F32 && o.dtype == plan::BF16)
    return castLoop<float, uint16_t, math::floatToBf16>(x, o);
  if (x.dtype == plan::BF16 && o.dtype == plan::F32)
    return castLoop<uint16_t, float, math::bf16ToFloat>(x, o);
  if (x.dtype == plan::F32 && o.dtype == plan::F16)
    return castLoop<float, uint16_t, math::floatToHalf>(x, o);
  if (x.dtype == plan::F16 && o.dtype == plan::F32)
    return castLoop<uint16_t, float, math::halfToFloat>(x, o);
  return castViaDouble(c);
}

/// The narrow float formats by plan dtype (e8m0 is not one: it has no
/// mantissa and its own rounding modes).
const math::NarrowFloat *narrowFloatFormat(DType t) {
  switch (t) {
  case plan::F8E4M3FN: return &math::kF8E4M3FN;
  case plan::F8E4M3FNUZ: return &math::kF8E4M3FNUZ;
  case plan::F8E5M2: return &math::kF8E5M2;
  case plan::F8E5M2FNUZ: return &math::kF8E5M2FNUZ;
  case plan::F4E2M1: return &math::kF4E2M1;
  default: return nullptr;
  }
}

/// Bits and signedness of the 4- and 2-bit integers (0 bits otherwise).
std::pair<int, bool> narrowIntFormat(DType t) {
  switch (t) {
  case plan::I4: return {4, true};
  case plan::U4: return {4, false};
  case plan::I2: return {2, true};
  case plan::U2: return {2, false};
  default: return {0, false};
  }
}

/// Every cast the typed loops do not cover (16-bit floats with f64,
/// integers or bools; anything to or from a narrow type) through double,
/// where every source value is exact (integers beyond 2^53 round once;
/// integer -> 4-/2-bit integer keeps every bit through int64).
absl::StatusOr<PreparedStep> castViaDouble(const KernelContext &c) {
  const TensorView x = c.in[0], o = c.out[0];
  const int64_t n = o.numel;
  auto toDouble = [&]() -> std::function<double(int64_t)> {
    if (const math::NarrowFloat *f = narrowFloatFormat(x.dtype))
      return [p = x.as<uint8_t>(), f](int64_t i) { return math::narrowToFloat(p[i], *f); };
    // (Not structured bindings: clang before 16 cannot capture those.)
    if (const std::pair<int, bool> fmt = narrowIntFormat(x.dtype); fmt.first)
      return [p = x.as<uint8_t>(), bits = fmt.first, isSigned = fmt.second](int64_t i) {
        return math::narrowIntValue(p[i], bits, isSigned);
      };
    switch (x.dtype) {
    case plan::F8E8M0: return [p = x.as<uint8_t>()](int64_t i) { return math::e8m0ToDouble(p[i]); };
    case plan::F16: return [p = x.as<uint16_t>()](int64_t i) { return math::halfToFloat(p[i]); };
    case plan::BF16: return [p = x.as<uint16_t>()](int64_t i) { return math::bf16ToFloat(p[i]); };
    case plan::F32: return [p = x.as<float>()](int64_t i) { return p[i]; };
    case plan::F64: return [p = x.as<double>()](int64_t i) { return p[i]; };
    case plan::I8: return [p = x.as<int8_t>()](int64_t i) { return p[i]; };
    case plan::I16: return [p = x.as<int16_t>()](int64_t i) { return p[i]; };
    case plan::I32: return [p = x.as<int32_t>()](int64_t i) { return p[i]; };
    case plan::I64: return [p = x.as<int64_t>()](int64_t i) { return static_cast<double>(p[i]); };
    case plan::U8:
    case plan::BOOL: return [p = x.as<uint8_t>()](int64_t i) { return p[i]; };
    case plan::U16: return [p = x.as<uint16_t>()](int64_t i) { return p[i]; };
    case plan::U32: return [p = x.as<uint32_t>()](int64_t i) { return p[i]; };
    case plan::U64: return [p = x.as<uint64_t>()](int64_t i) { return static_cast<double>(p[i]); };
    default: return nullptr;
    }
  }();
  if (!toDouble) return c.error(absl::StrCat("cannot cast from ", dtypeName(x.dtype)));
  // double -> f32 rounded to odd, then to 16 bits to nearest even: one
  // rounding, as a direct conversion (f32 keeps more than 2 extra bits).
  auto narrow = [](double d) {
    float f = static_cast<float>(d);
    if (std::isfinite(f) && static_cast<double>(f) != d) {
      if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      bits |= 1u;
      std::memcpy(&f, &bits, sizeof(bits));
    }
    return f;
  };
  // To an integer: NaN is 0, out-of-range values saturate (as makeCast).
  auto integral = [&](auto *p) {
    using To = std::remove_pointer_t<decltype(p)>;
    return PreparedStep([=] {
      for (int64_t i = 0; i < n; ++i) {
        const double v = toDouble(i);
        if (!(v == v)) p[i] = 0;
        else if (v >= static_cast<double>(std::numeric_limits<To>::max())) p[i] = std::numeric_limits<To>::max();
        else if (v <= static_cast<double>(std::numeric_limits<To>::min())) p[i] = std::numeric_limits<To>::min();
        else p[i] = static_cast<To>(v);
      }
      return absl::OkStatus();
    });
  };
  switch (o.dtype) {
  case plan::F16:
    return PreparedStep([=, p = o.as<uint16_t>()] {
      for (int64_t i = 0; i < n; ++i) p[i] = math::floatToHalf(narrow(toDouble(i)));
      return absl::OkStatus();
    });
  case plan::BF16:
    return PreparedStep([=, p = o.as<uint16_t>()] {
      for (int64_t i = 0; i < n; ++i) p[i] = math::floatToBf16(narrow(toDouble(i)));
      return absl::OkStatus();
    });
  case plan::F32:
    return PreparedStep([=, p = o.as<float>()] {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(toDouble(i));
      return absl::OkStatus();
    });
  case plan::F64:
    return PreparedStep([=, p = o.as<double>()] {
      for (int64_t i = 0; i < n; ++i) p[i] = toDouble(i);
      return absl::OkStatus();
    });
  case plan::BOOL:
    return PreparedStep([=, p = o.as<uint8_t>()] {
      for (int64_t i = 0; i < n; ++i) p[i] = toDouble(i) != 0.0;
      return absl::OkStatus();
    });
  case plan::I8: return integral(o.as<int8_t>());
  case plan::I16: return integral(o.as<int16_t>());
  case plan::I32: return integral(o.as<int32_t>());
  case plan::I64: return integral(o.as<int64_t>());
  case plan::U8: return integral(o.as<uint8_t>());
  case plan::U16: return integral(o.as<uint16_t>());
  case plan::U32: return integral(o.as<uint32_t>());
  case plan::U64: return integral(o.as<uint64_t>());
  default: break;
  }
  // To a narrow type. Cast-19's `saturate` (absent: true) and Cast-24's
  // `round_mode` for e8m0 (absent: "up").
  bool saturate = true;
  if (c.hasAttr("saturate")) {
    DS_ASSIGN_OR_RETURN(saturate, c.flagAttr("saturate"));
  }
  auto p = o.as<uint8_t>();
  if (const math::NarrowFloat *f = narrowFloatFormat(o.dtype))
    return PreparedStep([=] {
      for (int64_t i = 0; i < n; ++i) p[i] = math::floatToNarrow(toDouble(i), *f, saturate);
      return absl::OkStatus();
    });
  if (o.dtype == plan::F8E8M0) {
    std::string mode = "up";
    if (c.hasAttr("round_mode")) {
      DS_ASSIGN_OR_RETURN(mode, c.stringAttr("round_mode"));
    }
    if (mode != "up" && mode != "down" && mode != "nearest")
      return c.error(absl::StrCat("round_mode must be up, down or nearest, got '", mode, "'"));
    const math::E8M0Rounding r = mode == "up"     ? math::E8M0Rounding::Up
                                 : mode == "down" ? math::E8M0Rounding::Down
                                                  : math::E8M0Rounding::Nearest;
    // ONNX rounds to float32 first (its reference converts with numpy).
    return PreparedStep([=] {
      for (int64_t i = 0; i < n; ++i)
        p[i] = math::floatToE8M0(static_cast<float>(toDouble(i)), saturate, r);
      return absl::OkStatus();
    });
  }
  if (const int bits = narrowIntFormat(o.dtype).first; bits) { // (signedness: same low bits)
    // Integers wrap with every bit kept; floats truncate toward zero first
    // (NaN is 0, beyond int64 saturates), as numpy's astype does.
    std::function<int64_t(int64_t)> toInt;
    switch (x.dtype) {
    case plan::I64: toInt = [q = x.as<int64_t>()](int64_t i) { return q[i]; }; break;
    case plan::U64: toInt = [q = x.as<uint64_t>()](int64_t i) { return int64_t(q[i]); }; break;
    default:
      toInt = [toDouble](int64_t i) -> int64_t {
        const double v = toDouble(i);
        if (!(v == v)) return 0;
        if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
        if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
        return static_cast<int64_t>(v);
      };
    }
    return PreparedStep([=] {
      for (int64_t i = 0; i < n; ++i) p[i] = math::narrowIntBits(toInt(i), bits);
      return absl::OkStatus();
    });
  }
  return c.error(absl::StrCat("cannot cast ", dtypeName(x.dtype), " to ", dtypeName(o.dtype)));
}

absl::StatusOr<PreparedStep> prepareCast(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  if (isNarrowDType(c.in[0].dtype) || isNarrowDType(c.out[0].dtype)) return castViaDouble(c);
  auto half = [](DType t) { return t == plan::F16 || t == plan::BF16; };
  if (half(c.in[0].dtype) || half(c.out[0].dtype)) return prepareHalfCast(c);
  switch (c.in[0].dtype) {
  case plan::F32: return castFrom<float>(c);
  case plan::F64: return castFrom<double>(c);
  case plan::I8: return castFrom<int8_t>(c);
  case plan::I16: return castFrom<int16_t>(c);
  case plan::I32: return castFrom<int32_t>(c);
  case plan::I64: return castFrom<int64_t>(c);
  case plan::U8: return castFrom<uint8_t>(c);
  case plan::U16: return castFrom<uint16_t>(c);
  case plan::U32: return castFrom<uint32_t>(c);
  case plan::U64: return castFrom<uint64_t>(c);
  case plan::BOOL: return castFrom<uint8_t>(c); // 0/1 values, numeric
  default:
    return c.error(absl::StrCat("cannot cast from ", dtypeName(c.in[0].dtype)));
  }
}

} // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  r.add("add", prepareArith<math::Add, true, true>);
  r.add("sub", prepareArith<math::Sub, true, true>);
  r.add("mul", prepareArith<math::Mul, true, true>);
  r.add("div", prepareDiv<math::Div>);
  r.add("mod", prepareDiv<math::Mod>);
  r.add("sin", prepareUnary<math::Sin, false>);
  r.add("cos", prepareUnary<math::Cos, false>);
  r.add("tan", prepareUnary<math::Tan, false>);
  r.add("asin", prepareUnary<math::Asin, false>);
  r.add("acos", prepareUnary<math::Acos, false>);
  r.add("atan", prepareUnary<math::Atan, false>);
  r.add("sinh", prepareUnary<math::Sinh, false>);
  r.add("cosh", prepareUnary<math::Cosh, false>);
  r.add("asinh", prepareUnary<math::Asinh, false>);
  r.add("acosh", prepareUnary<math::Acosh, false>);
  r.add("atanh", prepareUnary<math::Atanh, false>);
  r.add("floor", prepareUnary<math::Floor, false>);
  r.add("ceil", prepareUnary<math::Ceil, false>);
  r.add("round", prepareUnary<math::Round, false>);
  r.add("sign", prepareUnary<math::Sign, true>);
  r.add("softplus", prepareUnary<math::Softplus, false>);
  r.add("is_nan", preparePredicate<math::IsNan>);
  r.add("is_inf", preparePredicate<math::IsInf>);
  r.add("pow", prepareArith<math::Pow, true, true>);
  r.add("min", prepareArith<math::Min, true, true>);
  r.add("max", prepareArith<math::Max, true, true>);
  r.add("equal", prepareCompare<math::Equal>);
  r.add("less", prepareCompare<math::Less>);
  r.add("greater", prepareCompare<math::Greater>);
  r.add("less_equal", prepareCompare<math::LessEqual>);
  r.add("greater_equal", prepareCompare<math::GreaterEqual>);
  r.add("and", prepareLogical<math::And>);
  r.add("or", prepareLogical<math::Or>);
  r.add("xor", prepareLogical<math::Xor>);
  r.add("not", prepareNot);
  r.add("bitwise_and", prepareArith<math::BitAnd, true, false>);
  r.add("bitwise_or", prepareArith<math::BitOr, true, false>);
  r.add("bitwise_xor", prepareArith<math::BitXor, true, false>);
  r.add("shift_left", prepareArith<math::ShiftLeft, true, false>);
  r.add("shift_right", prepareArith<math::ShiftRight, true, false>);
  r.add("bitwise_not", prepareIntegerUnary<math::BitNot>);
  r.add("bitcast", prepareBitcast);
  r.add("neg", prepareUnary<math::Neg, true>);
  r.add("abs", prepareUnary<math::Abs, true>);
  r.add("relu", prepareUnary<math::Relu, true>);
  r.add("sqrt", prepareUnary<math::Sqrt, false>);
  r.add("reciprocal", prepareUnary<math::Reciprocal, false>);
  r.add("exp", prepareUnary<math::Exp, false>);
  r.add("log", prepareUnary<math::Log, false>);
  r.add("erf", prepareUnary<math::Erf, false>);
  r.add("tanh", prepareUnary<math::Tanh, false>);
  r.add("sigmoid", prepareUnary<math::Sigmoid, false>);
  r.add("gelu", prepareGelu);
  r.add("fake_quantize", prepareFakeQuantize);
  r.add("where", prepareWhere);
  r.add("cast", prepareCast);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
