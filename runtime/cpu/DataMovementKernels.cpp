// Kernels that move bytes without arithmetic: copy (reshape, squeeze,
// unsqueeze, identity), transpose, slice, concat, split, gather, expand.
// They work on element sizes, so every dtype is covered by one code path.
#include <cmath>
#include <cstring>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/kernels/ElementMath.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

absl::Status expectSameDType(const KernelContext &c) {
  for (const auto &t : c.in)
    if (t.dtype != c.out[0].dtype)
      return c.error(absl::StrCat("operands must be ", dtypeName(c.out[0].dtype),
                                  ", got ", dtypeName(t.dtype)));
  return absl::OkStatus();
}

/// The result's bytes are the operand's (checked by the caller).
PreparedStep copyBytes(const KernelContext &c) {
  const void *src = c.in[0].data;
  void *dst = c.out[0].data;
  uint64_t bytes = c.out[0].bytes();
  return PreparedStep([=] {
    if (dst != src && bytes) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareCopy(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  if (c.in[0].numel != c.out[0].numel)
    return c.error(absl::StrCat("cannot reshape [", shapeToString(c.in[0].shape),
                                "] to [", shapeToString(c.out[0].shape), "]"));
  return copyBytes(c);
}

// ZeRO-Offload's transfers (ds.offload device -> host, ds.fetch host ->
// device): the CPU backend's device and host pools are one memory, so a
// transfer is a copy between them, of one type and shape.
absl::StatusOr<PreparedStep> prepareTransfer(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  return copyBytes(c);
}

// Strided gather of whole elements: out is dense over `dims`, the source
// advances by `strides` (in elements, may be negative) from `base`.
template <typename T>
void stridedCopy(const T *base, T *out, const std::vector<int64_t> &dims,
                 const std::vector<int64_t> &strides) {
  const size_t r = dims.size();
  const int64_t inner = r ? dims.back() : 1;
  const int64_t innerStride = r ? strides.back() : 0;
  // A transpose of the last two dimensions (matmul operands in backward,
  // attention's key permute): copied in square tiles, so the strided reads
  // of a tile's columns stay in L1 instead of missing once per element.
  // A few columns (NCHW -> NHWC of an RGB image): each row gathers its
  // elements from `inner` planes read front to back.
  if (r >= 2 && innerStride != 1 && strides[r - 2] == 1 && inner < 8) {
    const int64_t a = dims[r - 2], outer = product(dims, 0, r - 2);
    auto offsetOf = [&](int64_t o) {
      int64_t off = 0;
      for (int64_t d = static_cast<int64_t>(r) - 3; d >= 0; --d) {
        off += (o % dims[d]) * strides[d];
        o /= dims[d];
      }
      return off;
    };
    parallelFor(outer * a, 4096, [&](int64_t lo, int64_t hi) {
      // Row by row of `a` elements: the outer offset once per row, not a
      // division per element.
      for (int64_t w = lo; w < hi;) {
        const int64_t o = w / a, i0 = w % a, i1 = std::min(a, i0 + (hi - w));
        const T *src = base + offsetOf(o);
        T *dst = out + (w - i0) * inner;
        if (inner == 3)
          for (int64_t i = i0; i < i1; ++i) {
            dst[i * 3] = src[i];
            dst[i * 3 + 1] = src[i + innerStride];
            dst[i * 3 + 2] = src[i + 2 * innerStride];
          }
        else
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < inner; ++j) dst[i * inner + j] = src[i + j * innerStride];
        w += i1 - i0;
      }
    });
    return;
  }
  if (r >= 2 && innerStride != 1 && strides[r - 2] == 1 && inner >= 8 && dims[r - 2] >= 8) {
    constexpr int64_t kTile = 32;
    const int64_t a = dims[r - 2], b = inner;
    const int64_t outer = product(dims, 0, r - 2);
    const int64_t tilesA = (a + kTile - 1) / kTile;
    parallelFor(outer * tilesA, std::max<int64_t>(1, 16384 / (kTile * b)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t w = lo; w < hi; ++w) {
                    int64_t o = w / tilesA, a0 = (w % tilesA) * kTile;
                    int64_t a1 = std::min(a, a0 + kTile);
                    int64_t off = 0, rem = o;
                    for (int64_t d = static_cast<int64_t>(r) - 3; d >= 0; --d) {
                      off += (rem % dims[d]) * strides[d];
                      rem /= dims[d];
                    }
                    const T *src = base + off;
                    T *dst = out + o * a * b;
                    for (int64_t b0 = 0; b0 < b; b0 += kTile) {
                      int64_t b1 = std::min(b, b0 + kTile);
                      for (int64_t i = a0; i < a1; ++i)
                        for (int64_t j = b0; j < b1; ++j) dst[i * b + j] = src[i + j * innerStride];
                    }
                  }
                });
    return;
  }
  const int64_t rows = product(dims, 0, r ? r - 1 : 0);
  parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t row = lo; row < hi; ++row) {
                  int64_t off = 0, rem = row;
                  for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
                    off += (rem % dims[d]) * strides[d];
                    rem /= dims[d];
                  }
                  const T *src = base + off;
                  T *dst = out + row * inner;
                  if (innerStride == 1) std::memcpy(dst, src, inner * sizeof(T));
                  else
                    for (int64_t i = 0; i < inner; ++i) dst[i] = src[i * innerStride];
                }
              });
}

template <typename F> absl::StatusOr<PreparedStep> bySize(const KernelContext &c, F f) {
  switch (dtypeSize(c.out[0].dtype)) {
  case 1: return f(uint8_t());
  case 2: return f(uint16_t());
  case 4: return f(uint32_t());
  case 8: return f(uint64_t());
  default: return c.error("unsupported element size");
  }
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    // Saturates: only a zero-size tensor ([0, 101, 3e17]; the fuzzer found
    // it) has strides past 2^63, and none of its elements is ever read.
    if (__builtin_mul_overflow(acc, s[i], &acc)) acc = INT64_MAX;
  }
  return st;
}

absl::StatusOr<PreparedStep> prepareTranspose(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> perm, c.intsAttr("perm"));
  const auto &s = c.in[0].shape;
  if (perm.size() != s.size())
    return c.error("perm length differs from the operand's rank");
  std::vector<bool> seen(s.size(), false);
  std::vector<int64_t> outShape, strides;
  auto inStrides = contiguousStrides(s);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[p])
      return c.error("perm is not a permutation");
    seen[p] = true;
    outShape.push_back(s[p]);
    strides.push_back(inStrides[p]);
  }
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], outShape, "result"));
  // Merge result dimensions the operand also keeps adjacent (NCHW -> NHWC
  // is a [C, H*W] -> [H*W, C] transpose), so the copy loops run long.
  std::vector<int64_t> dims, dimStrides;
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1) continue;
    if (!dims.empty() && dimStrides.back() == strides[d] * outShape[d]) {
      dims.back() *= outShape[d];
      dimStrides.back() = strides[d];
    } else {
      dims.push_back(outShape[d]);
      dimStrides.push_back(strides[d]);
    }
  }
  return bySize(c, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    using T = decltype(tag);
    const T *src = c.in[0].as<T>();
    T *dst = c.out[0].as<T>();
    return PreparedStep([=] {
      stridedCopy<T>(src, dst, dims, dimStrides);
      return absl::OkStatus();
    });
  });
}

// slice: per-dimension start and step (normalized by the compiler; steps may
// be negative), the result shape gives the counts. Every touched index is
// checked against the operand here.
absl::StatusOr<PreparedStep> prepareSlice(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, c.intsAttr("starts"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> steps, c.intsAttr("steps"));
  const auto &s = c.in[0].shape;
  const auto &o = c.out[0].shape;
  if (starts.size() != s.size() || steps.size() != s.size() || o.size() != s.size())
    return c.error("starts, steps and result must match the operand's rank");
  auto inStrides = contiguousStrides(s);
  int64_t base = 0;
  std::vector<int64_t> strides(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    if (o[d] == 0) continue;
    // Checked arithmetic: a wrapped product (a step of 2^62 + 1) would
    // land "inside" the extent.
    int64_t span = 0, last = 0;
    const bool wraps = __builtin_mul_overflow(o[d] - 1, steps[d], &span) ||
                       __builtin_add_overflow(starts[d], span, &last);
    if (wraps || starts[d] < 0 || starts[d] >= s[d] || last < 0 || last >= s[d] ||
        steps[d] == 0)
      return c.error(absl::StrCat("slice of dimension ", d, " (start ", starts[d],
                                  ", step ", steps[d], ", count ", o[d],
                                  ") leaves the operand's extent ", s[d]));
    base += starts[d] * inStrides[d];
    // One element taken: the step never moves (and may be any size).
    strides[d] = o[d] == 1 ? 0 : steps[d] * inStrides[d];
  }
  if (c.out[0].numel == 0)
    return PreparedStep([] { return absl::OkStatus(); });
  return bySize(c, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    using T = decltype(tag);
    const T *src = c.in[0].as<T>() + base;
    T *dst = c.out[0].as<T>();
    return PreparedStep([=] {
      stridedCopy<T>(src, dst, o, strides);
      return absl::OkStatus();
    });
  });
}

// concat and split share the [outer, axis-chunk] layout.
struct Chunking {
  int64_t outer;
  std::vector<uint64_t> chunkBytes; // per piece, per outer index
  uint64_t totalBytes;
};

absl::StatusOr<Chunking> chunking(const KernelContext &c, const TensorView &whole,
                                  const std::vector<TensorView> &pieces) {
  const int64_t rank = whole.rank();
  if (rank == 0)
    return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", rank));
  Chunking k;
  k.outer = product(whole.shape, 0, axis);
  int64_t inner = product(whole.shape, axis + 1, rank);
  int64_t sum = 0;
  for (const auto &p : pieces) {
    if (p.rank() != rank)
      return c.error("pieces must have the whole's rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && p.shape[d] != whole.shape[d])
        return c.error(absl::StrCat("piece [", shapeToString(p.shape),
                                    "] differs from [", shapeToString(whole.shape),
                                    "] off the axis"));
    sum += p.shape[axis];
    k.chunkBytes.push_back(static_cast<uint64_t>(p.shape[axis] * inner) *
                           dtypeSize(whole.dtype));
  }
  if (sum != whole.shape[axis])
    return c.error(absl::StrCat("pieces add up to ", sum, " along the axis, not ",
                                whole.shape[axis]));
  k.totalBytes = static_cast<uint64_t>(whole.shape[axis] * inner) * dtypeSize(whole.dtype);
  return k;
}

absl::StatusOr<PreparedStep> prepareConcat(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, SIZE_MAX, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  DS_ASSIGN_OR_RETURN(Chunking k, chunking(c, c.out[0], c.in));
  std::vector<const uint8_t *> srcs;
  for (const auto &t : c.in) srcs.push_back(static_cast<const uint8_t *>(t.data));
  auto *dst = static_cast<uint8_t *>(c.out[0].data);
  return PreparedStep([=] {
    parallelFor(k.outer, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        uint8_t *d = dst + o * k.totalBytes;
        for (size_t p = 0; p < srcs.size(); ++p) {
          if (k.chunkBytes[p]) std::memcpy(d, srcs[p] + o * k.chunkBytes[p], k.chunkBytes[p]);
          d += k.chunkBytes[p];
        }
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareSplit(const KernelContext &c) {
  if (c.in.size() != 1 || c.out.empty())
    return c.error("takes one input and at least one output");
  for (const auto &t : c.out)
    if (t.dtype != c.in[0].dtype)
      return c.error("outputs must share the input's element type");
  DS_ASSIGN_OR_RETURN(Chunking k, chunking(c, c.in[0], c.out));
  auto *src = static_cast<const uint8_t *>(c.in[0].data);
  std::vector<uint8_t *> dsts;
  for (const auto &t : c.out) dsts.push_back(static_cast<uint8_t *>(t.data));
  return PreparedStep([=] {
    parallelFor(k.outer, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        const uint8_t *s = src + o * k.totalBytes;
        for (size_t p = 0; p < dsts.size(); ++p) {
          if (k.chunkBytes[p]) std::memcpy(dsts[p] + o * k.chunkBytes[p], s, k.chunkBytes[p]);
          s += k.chunkBytes[p];
        }
      }
    });
    return absl::OkStatus();
  });
}

// gather(data, indices) along axis; indices are checked at run time (they
// are data), negative ones count from the end as in ONNX.
template <typename I>
PreparedStep makeGather(const KernelContext &c, int64_t axis) {
  const auto &s = c.in[0].shape;
  int64_t outer = product(s, 0, axis), dim = s[axis];
  uint64_t innerBytes = static_cast<uint64_t>(product(s, axis + 1, s.size())) *
                        dtypeSize(c.in[0].dtype);
  int64_t nIdx = c.in[1].numel;
  const auto *data = static_cast<const uint8_t *>(c.in[0].data);
  const I *idx = c.in[1].as<I>();
  auto *out = static_cast<uint8_t *>(c.out[0].data);
  std::string where(c.error("").message());
  return [=]() -> absl::Status {
    for (int64_t j = 0; j < nIdx; ++j) {
      int64_t v = static_cast<int64_t>(idx[j]);
      if (v == math::kIndexRowOutOfRange)
        return absl::OutOfRangeError(absl::StrCat(
            where, "index row ", j, " has a component outside its dimension (GatherND)"));
      if (v < -dim || v >= dim)
        return absl::OutOfRangeError(absl::StrCat(where, "index ", v, " at position ", j,
                                                  " is out of range for a dimension of ",
                                                  dim));
    }
    parallelFor(outer * nIdx, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        int64_t o = t / nIdx, j = t % nIdx;
        int64_t v = static_cast<int64_t>(idx[j]);
        if (v < 0) v += dim;
        if (innerBytes)
          std::memcpy(out + t * innerBytes, data + (o * dim + v) * innerBytes, innerBytes);
      }
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareGather(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  const auto &s = c.in[0].shape;
  if (s.empty())
    return c.error("data must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", c.in[0].rank()));
  std::vector<int64_t> expect(s.begin(), s.begin() + axis);
  expect.insert(expect.end(), c.in[1].shape.begin(), c.in[1].shape.end());
  expect.insert(expect.end(), s.begin() + axis + 1, s.end());
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], expect, "result"));
  if (c.in[1].dtype == plan::I64) return makeGather<int64_t>(c, axis);
  if (c.in[1].dtype == plan::I32) return makeGather<int32_t>(c, axis);
  return c.error(absl::StrCat("indices must be i32 or i64, got ", dtypeName(c.in[1].dtype)));
}

/// gather_elements and its gradient walk the indices tensor; `data` is the
/// gathered-from (or scattered-into) tensor of the same rank.
struct ElementIndexing {
  std::vector<int64_t> idxShape, dataStrides;
  int64_t axis, dim;
  /// Offset in `data` of the element index `flat` of `indices` selects.
  template <typename I>
  absl::StatusOr<int64_t> offset(const I *idx, int64_t flat, const std::string &where) const {
    int64_t v = static_cast<int64_t>(idx[flat]);
    if (v == math::kIndexRowOutOfRange)
      return absl::OutOfRangeError(absl::StrCat(
          where, "index row ", flat, " has a component outside its dimension (ScatterND)"));
    if (v < -dim || v >= dim)
      return absl::OutOfRangeError(absl::StrCat(where, "index ", v, " is out of range for ", dim));
    if (v < 0) v += dim;
    int64_t off = 0, rem = flat;
    for (size_t d = idxShape.size(); d-- > 0;) {
      int64_t coord = rem % idxShape[d];
      rem /= idxShape[d];
      off += (static_cast<int64_t>(d) == axis ? v : coord) * dataStrides[d];
    }
    return off;
  }
};

absl::StatusOr<ElementIndexing> elementIndexing(const KernelContext &c, const TensorView &data,
                                                const TensorView &idx) {
  if (data.rank() < 1 || idx.rank() != data.rank())
    return c.error("data and indices must have one rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", data.rank()));
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && idx.shape[d] > data.shape[d])
      return c.error("indices are larger than the data off the axis");
  if (idx.dtype != plan::I64 && idx.dtype != plan::I32) return c.error("indices must be i32 or i64");
  return ElementIndexing{idx.shape, contiguousStrides(data.shape), axis, data.shape[axis]};
}

absl::StatusOr<PreparedStep> prepareGatherElements(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[1].shape, "result"));
  DS_ASSIGN_OR_RETURN(ElementIndexing ix, elementIndexing(c, c.in[0], c.in[1]));
  const TensorView data = c.in[0], idx = c.in[1], out = c.out[0];
  size_t es = dtypeSize(data.dtype);
  std::string where(c.error("").message());
  return PreparedStep([=]() -> absl::Status {
    for (int64_t i = 0; i < idx.numel; ++i) {
      absl::StatusOr<int64_t> off = idx.dtype == plan::I64 ? ix.offset(idx.as<int64_t>(), i, where)
                                                           : ix.offset(idx.as<int32_t>(), i, where);
      if (!off.ok()) return off.status();
      std::memcpy(static_cast<uint8_t *>(out.data) + i * es,
                  static_cast<const uint8_t *>(data.data) + *off * es, es);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareGatherElementsGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[1], plan::F32, "dy"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], c.in[0].shape, "dy"));
  DS_ASSIGN_OR_RETURN(ElementIndexing ix, elementIndexing(c, c.out[0], c.in[0]));
  const TensorView idx = c.in[0], dy = c.in[1], out = c.out[0];
  std::string where(c.error("").message());
  return PreparedStep([=]() -> absl::Status {
    float *o = out.as<float>();
    std::fill(o, o + out.numel, 0.0f);
    for (int64_t i = 0; i < idx.numel; ++i) {
      absl::StatusOr<int64_t> off = idx.dtype == plan::I64 ? ix.offset(idx.as<int64_t>(), i, where)
                                                           : ix.offset(idx.as<int32_t>(), i, where);
      if (!off.ok()) return off.status();
      o[*off] += dy.as<float>()[i];
    }
    return absl::OkStatus();
  });
}

/// scatter_elements: out = data, then each update lands (or combines) at
/// its index along the axis, in order, so the last duplicate wins.
template <typename T>
PreparedStep makeScatterElements(const KernelContext &c, ElementIndexing ix,
                                 const std::string &reduction) {
  const TensorView data = c.in[0], idx = c.in[1], upd = c.in[2], out = c.out[0];
  std::string where(c.error("").message());
  int mode = reduction == "add" ? 1 : reduction == "mul" ? 2 : reduction == "max" ? 3
           : reduction == "min" ? 4 : 0;
  return [=]() -> absl::Status {
    T *o = static_cast<T *>(out.data);
    const T *u = static_cast<const T *>(upd.data);
    if (out.data != data.data) std::memcpy(out.data, data.data, out.bytes());
    for (int64_t i = 0; i < idx.numel; ++i) {
      absl::StatusOr<int64_t> off = idx.dtype == plan::I64 ? ix.offset(idx.as<int64_t>(), i, where)
                                                           : ix.offset(idx.as<int32_t>(), i, where);
      if (!off.ok()) return off.status();
      T &dst = o[*off];
      switch (mode) {
      case 1: dst = static_cast<T>(dst + u[i]); break;
      case 2: dst = static_cast<T>(dst * u[i]); break;
      case 3: dst = math::Max()(dst, u[i]); break;
      case 4: dst = math::Min()(dst, u[i]); break;
      default: dst = u[i];
      }
    }
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareScatterElements(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[2], c.in[0].dtype, "updates"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[2], c.in[1].shape, "updates"));
  DS_ASSIGN_OR_RETURN(ElementIndexing ix, elementIndexing(c, c.in[0], c.in[1]));
  DS_ASSIGN_OR_RETURN(std::string reduction, c.stringAttr("reduction"));
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    return c.error("reduction must be none, add, mul, max or min, not '" + reduction + "'");
  if (reduction == "none") // a plain copy: any element type, by size
    return bySize(c, [&](auto tag) -> absl::StatusOr<PreparedStep> {
      return makeScatterElements<decltype(tag)>(c, ix, reduction);
    });
  return dispatchNative(c, c.in[0].dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    return makeScatterElements<decltype(tag)>(c, ix, reduction);
  });
}

absl::StatusOr<PreparedStep> prepareExpand(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  auto ix = makeBroadcastIndexer(c.out[0].shape, {c.in[0].shape});
  if (!ix.ok())
    return c.error(std::string(ix.status().message()));
  return bySize(c, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    using T = decltype(tag);
    const T *src = c.in[0].as<T>();
    T *dst = c.out[0].as<T>();
    return PreparedStep([ix = *ix, src, dst] {
      const int64_t inner = ix.inner(), st = ix.strides[0].back();
      parallelFor(ix.rows(), std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                  [&](int64_t lo, int64_t hi) {
                    int64_t off;
                    for (int64_t r = lo; r < hi; ++r) {
                      ix.rowOffsets(r, &off);
                      T *d = dst + r * inner;
                      if (st == 0) std::fill(d, d + inner, src[off]);
                      else std::memcpy(d, src + off, inner * sizeof(T));
                    }
                  });
      return absl::OkStatus();
    });
  });
}

// trilu: zero one triangle of every [rows, cols] matrix in the batch.
absl::StatusOr<PreparedStep> prepareTrilu(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(expectSameDType(c));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  if (c.in[0].rank() < 2) return c.error("operand must have rank >= 2");
  DS_ASSIGN_OR_RETURN(int64_t upper, c.intAttr("upper"));
  DS_ASSIGN_OR_RETURN(int64_t k, c.intAttr("k"));
  const auto &s = c.in[0].shape;
  int64_t rows = s[s.size() - 2], cols = s.back();
  int64_t batch = product(s, 0, s.size() - 2);
  size_t es = dtypeSize(c.in[0].dtype);
  auto *src = static_cast<const uint8_t *>(c.in[0].data);
  auto *dst = static_cast<uint8_t *>(c.out[0].data);
  return PreparedStep([=] {
    parallelFor(batch * rows, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        int64_t row = r % rows;
        const uint8_t *in = src + r * cols * es;
        uint8_t *out = dst + r * cols * es;
        for (int64_t col = 0; col < cols; ++col) {
          bool keep = upper ? (col - row >= k) : (col - row <= k);
          if (keep) std::memcpy(out + col * es, in + col * es, es);
          else std::memset(out + col * es, 0, es);
        }
      }
    });
    return absl::OkStatus();
  });
}

/// Dropout's mask: `scale` where math::DropoutKeep keeps the element, else 0.
template <typename T>
PreparedStep randomMaskStep(const TensorView key, const TensorView o, double ratio,
                            uint64_t stream) {
  return PreparedStep([=] {
    math::DropoutKeep keep{math::DropoutKeep::baseOf(static_cast<uint64_t>(*key.as<int64_t>()),
                                                     stream),
                           static_cast<uint32_t>(std::ldexp(ratio, 24))};
    const T scale = static_cast<T>(1.0 / (1.0 - ratio));
    T *out = o.as<T>();
    parallelFor(o.numel, 16384, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = keep(static_cast<uint64_t>(i)) ? scale : T(0);
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareRandomMask(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  if (c.in[0].dtype != plan::I64 || c.in[0].numel != 1)
    return c.error("key must be one i64");
  DS_ASSIGN_OR_RETURN(double ratio, c.floatAttr("ratio"));
  DS_ASSIGN_OR_RETURN(int64_t stream, c.intAttr("stream"));
  if (!(ratio >= 0.0 && ratio < 1.0))
    return c.error(absl::StrCat("ratio must be in [0, 1), got ", ratio));
  const TensorView o = c.out[0];
  if (o.dtype == plan::F32) return randomMaskStep<float>(c.in[0], o, ratio, stream);
  if (o.dtype == plan::F64) return randomMaskStep<double>(c.in[0], o, ratio, stream);
  return c.error(absl::StrCat("does not support element type ", dtypeName(o.dtype)));
}

/// ds.random: uniform or normal samples (math::RandomDraw), rounded once
/// to the result's type; a uniform sample that rounds up to `high` is
/// stepped back below it, so results stay in [low, high).
absl::StatusOr<PreparedStep> prepareRandom(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  if (c.in[0].dtype != plan::I64 || c.in[0].numel != 1)
    return c.error("key must be one i64");
  DS_ASSIGN_OR_RETURN(std::string dist, c.stringAttr("distribution"));
  DS_ASSIGN_OR_RETURN(double a, c.floatAttr("a"));
  DS_ASSIGN_OR_RETURN(double b, c.floatAttr("b"));
  DS_ASSIGN_OR_RETURN(int64_t stream, c.intAttr("stream"));
  if (dist != "uniform" && dist != "normal")
    return c.error(absl::StrCat("distribution must be uniform or normal, got '", dist, "'"));
  if (!std::isfinite(a) || !std::isfinite(b) || (dist == "uniform" ? a > b : b < 0))
    return c.error(absl::StrCat("bad parameters ", a, " and ", b, " for a ", dist,
                                " distribution"));
  const TensorView key = c.in[0], o = c.out[0];
  const bool uniform = dist == "uniform";
  auto step = [=](auto encode, auto below) {
    return PreparedStep([=] {
      math::RandomDraw draw{math::DropoutKeep::baseOf(static_cast<uint64_t>(*key.as<int64_t>()),
                                                      static_cast<uint64_t>(stream))};
      using T = decltype(encode(0.0));
      T *out = o.as<T>();
      parallelFor(o.numel, 8192, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const auto u = static_cast<uint64_t>(i);
          out[i] = uniform ? below(draw.uniform(u, a, b)) : encode(draw.normal(u, a, b));
        }
      });
      return absl::OkStatus();
    });
  };
  // A 16-bit sample that rounded up to `high` steps one unit down (the bit
  // patterns are sign-magnitude), and not below `low`.
  auto belowHigh = [a, b](auto encode, auto decode) {
    return [=](double v) {
      uint16_t e = encode(v);
      if (!(decode(e) >= b && a < b)) return e;
      uint16_t down = (e & 0x7fff) == 0 ? uint16_t(0x8001) : (e & 0x8000) ? uint16_t(e + 1)
                                                                             : uint16_t(e - 1);
      return decode(down) >= a ? down : encode(a);
    };
  };
  switch (o.dtype) {
  case plan::F64: {
    auto enc = [](double v) { return v; };
    return step(enc, [=](double v) { return v >= b && a < b ? std::nextafter(b, a) : v; });
  }
  case plan::F32: {
    auto enc = [](double v) { return static_cast<float>(v); };
    return step(enc, [=](double v) {
      float f = static_cast<float>(v);
      return f >= static_cast<float>(b) && a < b ? std::nextafter(static_cast<float>(b), static_cast<float>(a)) : f;
    });
  }
  case plan::F16: {
    auto enc = [](double v) { return ds::math::floatToHalf(static_cast<float>(v)); };
    auto dec = [](uint16_t h) { return ds::math::halfToFloat(h); };
    return step(enc, belowHigh(enc, dec));
  }
  case plan::BF16: {
    auto enc = [](double v) { return ds::math::floatToBf16(static_cast<float>(v)); };
    auto dec = [](uint16_t h) { return ds::math::bf16ToFloat(h); };
    return step(enc, belowHigh(enc, dec));
  }
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(o.dtype)));
  }
}

/// ds.resample: out[o, y, m, x, i] = sum over taps of wy * wx *
/// in[o, iy, m, ix, i], with the shape collapsed around the resampled axes
/// (one axis: y is a unit axis). Each output element is computed once from
/// input rows that stay in cache, so the output is written once and nothing
/// else goes to memory (upsampling is bound by that write); channels-last
/// data (i = C) blends whole pixel vectors. Channels-first data (x
/// innermost) goes through a scratch of x-resampled rows instead.
absl::StatusOr<PreparedStep> prepareResample(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, 1));
  const TensorView x = c.in[0], index = c.in[1], weight = c.in[2], o = c.out[0];
  DS_RETURN_IF_ERROR(c.expectDType(x, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(index, plan::I64, "index"));
  DS_RETURN_IF_ERROR(c.expectDType(weight, plan::F32, "weight"));
  DS_RETURN_IF_ERROR(c.expectDType(o, plan::F32, "result"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.intsAttr("axes"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> taps, c.intsAttr("taps"));
  const int64_t rank = x.rank();
  if (axes.empty() || axes.size() > 2 || taps.size() != axes.size() || o.rank() != rank)
    return c.error("needs one or two axes with a tap count each, and a result of the operand's rank");
  int64_t entries = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank || (i && axes[i] <= axes[i - 1]) || taps[i] < 1)
      return c.error("axes must be increasing and in range, tap counts positive");
    entries += o.shape[axes[i]] * taps[i];
  }
  if (index.numel != entries || weight.numel != entries)
    return c.error(absl::StrCat("index and weight need ", entries, " entries each"));
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end() && x.shape[d] != o.shape[d])
      return c.error(absl::StrCat("dimension ", d, " is not resampled but changes size"));
  auto prod = [](const std::vector<int64_t> &s, int64_t lo, int64_t hi) {
    int64_t p = 1;
    for (int64_t d = lo; d < hi; ++d) p *= s[d];
    return p;
  };
  // [outer, Y, mid, X, inner]; one axis is the X axis with Y = 1.
  const bool two = axes.size() == 2;
  const int64_t ax = axes.back(), ay = two ? axes[0] : ax;
  const int64_t outer = prod(x.shape, 0, two ? ay : ax);
  const int64_t yIn = two ? x.shape[ay] : 1, yOut = two ? o.shape[ay] : 1;
  const int64_t mid = two ? prod(x.shape, ay + 1, ax) : 1;
  const int64_t xIn = x.shape[ax], xOut = o.shape[ax], inner = prod(x.shape, ax + 1, rank);
  const int64_t ty = two ? taps[0] : 1, tx = taps.back();
  // Two axes with x innermost take two passes through scratch (below).
  std::shared_ptr<std::vector<float>> scratch;
  if (two && inner == 1)
    scratch = std::make_shared<std::vector<float>>(static_cast<size_t>(outer * yIn * mid * xOut));
  return PreparedStep([=]() -> absl::Status {
    const int64_t *idx = index.as<int64_t>();
    const float *w = weight.as<float>();
    // Tables: y's first (two axes), then x's; one axis reads y as [0] of weight 1.
    static const int64_t zero = 0;
    static const float one = 1.0f;
    const int64_t *iy = two ? idx : &zero, *ix = idx + (two ? yOut * ty : 0);
    const float *wy = two ? w : &one, *wx = w + (two ? yOut * ty : 0);
    for (int64_t e = 0; e < (two ? yOut * ty : 0); ++e)
      if (iy[e] < 0 || iy[e] >= yIn)
        return absl::OutOfRangeError(absl::StrCat("resample index ", iy[e], " outside [0, ", yIn, ")"));
    for (int64_t e = 0; e < xOut * tx; ++e)
      if (ix[e] < 0 || ix[e] >= xIn)
        return absl::OutOfRangeError(absl::StrCat("resample index ", ix[e], " outside [0, ", xIn, ")"));
    const float *in = x.as<float>();
    float *out = o.as<float>();
    const int64_t rowOut = mid * xOut * inner, rowIn = mid * xIn * inner;
    if (scratch) {
      // Scalar x taps (channels-first: x is innermost): resample every input
      // row along x once into scratch, then blend whole scratch rows along y
      // (vectorized): a segmentation head's 8x upsampling reads each input
      // row for eight output rows.
      float *rows = scratch->data();
      parallelFor(outer * yIn * mid, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, xOut)),
                  [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const float *src = in + r * xIn;
          float *dst = rows + r * xOut;
          for (int64_t p = 0; p < xOut; ++p) {
            float acc = 0.0f;
            for (int64_t t = 0; t < tx; ++t) acc += wx[p * tx + t] * src[ix[p * tx + t]];
            dst[p] = acc;
          }
        }
      });
      parallelFor(outer * yOut, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rowOut)),
                  [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const int64_t b = r / yOut, q = r % yOut;
          float *d = out + r * rowOut;
          const float *s0 = rows + (b * yIn + iy[q * ty]) * rowOut;
          const float w0 = wy[q * ty];
          for (int64_t i = 0; i < rowOut; ++i) d[i] = w0 * s0[i];
          for (int64_t a = 1; a < ty; ++a) {
            const float *st = rows + (b * yIn + iy[q * ty + a]) * rowOut;
            const float wt = wy[q * ty + a];
            for (int64_t i = 0; i < rowOut; ++i) d[i] += wt * st[i];
          }
        }
      });
      return absl::OkStatus();
    }
    parallelFor(outer * yOut, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, rowOut)),
                [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t b = r / yOut, q = r % yOut;
        const int64_t *tyi = iy + q * ty;
        const float *tyw = wy + q * ty;
        for (int64_t m = 0; m < mid; ++m)
          for (int64_t p = 0; p < xOut; ++p) {
            float *d = out + r * rowOut + (m * xOut + p) * inner;
            const int64_t *txi = ix + p * tx;
            const float *txw = wx + p * tx;
            if (inner == 1) {
              float acc = 0.0f;
              for (int64_t a = 0; a < ty; ++a) {
                const float *src = in + (b * yIn + tyi[a]) * rowIn + m * xIn;
                float part = 0.0f;
                for (int64_t t = 0; t < tx; ++t) part += txw[t] * src[txi[t]];
                acc += tyw[a] * part;
              }
              *d = acc;
              continue;
            }
            bool first = true;
            for (int64_t a = 0; a < ty; ++a) {
              const float *src = in + (b * yIn + tyi[a]) * rowIn + m * xIn * inner;
              for (int64_t t = 0; t < tx; ++t) {
                const float *s0 = src + txi[t] * inner;
                const float wt = tyw[a] * txw[t];
                if (first) {
                  for (int64_t i = 0; i < inner; ++i) d[i] = wt * s0[i];
                  first = false;
                } else {
                  for (int64_t i = 0; i < inner; ++i) d[i] += wt * s0[i];
                }
              }
            }
          }
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareFill(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(0, 0, 1));
  DS_ASSIGN_OR_RETURN(double value, c.floatAttr("value"));
  const TensorView o = c.out[0];
  // On every thread: one core cannot keep a memory channel busy with stores.
  auto fill = [o](auto v) {
    using T = decltype(v);
    return PreparedStep([o, v] {
      parallelFor(o.numel, 1 << 15, [&](int64_t lo, int64_t hi) {
        std::fill(o.as<T>() + lo, o.as<T>() + hi, v);
      });
      return absl::OkStatus();
    });
  };
  if (o.dtype == plan::F32) return fill(static_cast<float>(value));
  if (o.dtype == plan::F64) return fill(value);
  // 16-bit gradient accumulators (mixed precision) are zeroed too.
  if (o.dtype == plan::BF16) return fill(ds::math::floatToBf16(static_cast<float>(value)));
  if (o.dtype == plan::F16) return fill(ds::math::floatToHalf(static_cast<float>(value)));
  return c.error(absl::StrCat("does not support element type ", dtypeName(o.dtype)));
}

} // namespace

void registerDataMovementKernels(KernelRegistry &r) {
  r.add("fill", prepareFill);
  r.add("random_mask", prepareRandomMask);
  r.add("random", prepareRandom);
  r.add("resample", prepareResample);
  r.add("trilu", prepareTrilu);
  r.add("copy", prepareCopy);
  r.add("offload", prepareTransfer);
  r.add("fetch", prepareTransfer);
  r.add("transpose", prepareTranspose);
  r.add("slice", prepareSlice);
  r.add("concat", prepareConcat);
  r.add("split", prepareSplit);
  r.add("gather", prepareGather);
  r.add("gather_elements", prepareGatherElements);
  r.add("gather_elements_grad", prepareGatherElementsGrad);
  r.add("scatter_elements", prepareScatterElements);
  r.add("expand", prepareExpand);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
