//===- SpectralOps.cpp - ONNX DFT and STFT --------------------------------===//
//
// The transform length is known at compile time, so a DFT along an axis is
// one product with a constant matrix of cosines and sines: the axis and the
// real/imaginary pair are flattened into the rows, the output bins and
// their pair into the columns. The GEMM kernels run it, autodiff
// differentiates it, and no FFT kernel is needed for the lengths models use
// (audio front ends: 400-1024). Angles are reduced exactly ((n * k) mod N)
// before the cosine, so the quarter turns are exact zeros and ones, as in
// numpy's FFT. STFT frames the signal with one gather, weights the frames
// by the window and transforms them.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class SpectralImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult dft(const onnx::NodeProto &n);
  LogicalResult stft(const onnx::NodeProto &n);

private:
  enum class Kind { Forward, Inverse, InverseOneSided };
  FailureOr<Value> transform(const onnx::NodeProto &n, Value x, int64_t axis, int64_t length,
                             Kind kind, bool onesided);
  FailureOr<int64_t> optionalScalar(const onnx::NodeProto &n, int i, StringRef what);
};

/// cos and sin of 2*pi*m/N, exact at the quarter turns.
std::pair<double, double> turn(int64_t m, int64_t N) {
  if (m == 0) return {1, 0};
  if (4 * m == N) return {0, 1};
  if (2 * m == N) return {-1, 0};
  if (4 * m == 3 * N) return {0, -1};
  const double a = 2 * M_PI * static_cast<double>(m) / static_cast<double>(N);
  return {std::cos(a), std::sin(a)};
}

/// A scalar integer input known at compile time, or -1 when absent.
FailureOr<int64_t> SpectralImporter::optionalScalar(const onnx::NodeProto &n, int i,
                                                    StringRef what) {
  if (!input(n, i)) return -1;
  DS_TRY(v, constantInts(n, i, what));
  if (v.size() != 1) return FailureOr<int64_t>(nodeError(n) << what << " must be one integer");
  return v[0];
}

/// The DFT of x ([..., L, ..., C], C = 1 real or 2 complex) along `axis`
/// with `length` N points: [..., K, ..., 2] (or [..., N, ..., 1] for the
/// inverse of a one-sided spectrum, numpy's irfft).
FailureOr<Value> SpectralImporter::transform(const onnx::NodeProto &n, Value x0, int64_t axis,
                                             int64_t N, Kind kind, bool onesided) {
  RankedTensorType xt = typeOf(x0);
  const int64_t rank = xt.getRank(), C = xt.getDimSize(rank - 1);
  if (C != 1 && C != 2)
    return FailureOr<Value>(nodeError(n) << "the last dimension holds the real and imaginary "
                                         << "parts: it must be 1 or 2, got " << C);
  Type elem = xt.getElementType();
  // Products in f32 at least: a 16-bit sum over N terms would lose the bins.
  Type compute = elem.isF64() ? elem : b_.getF32Type();
  DS_TRY(x1, castTo(x0, compute));
  // Points the transform reads along the axis: numpy cuts the input to N
  // (irfft: to the N/2 + 1 bins a real signal of N points has) or pads it
  // with zeros, which contribute nothing: their matrix rows are left out.
  const int64_t L = xt.getDimSize(axis);
  const int64_t rows = kind == Kind::InverseOneSided ? N / 2 + 1 : N;
  Value x = x1;
  if (L > rows) {
    DS_TRY(cut, sliceAxis(x, axis, 0, 1, rows));
    x = cut;
  }
  const int64_t used = std::min(L, rows);
  const int64_t K = kind == Kind::Forward && onesided ? N / 2 + 1 : N;
  const int64_t D = kind == Kind::InverseOneSided ? 1 : 2;
  if ((used * C) * (K * D) > opts_.foldLimit * 64)
    return FailureOr<Value>(nodeError(n) << "a transform of " << N << " points is too long for "
                                         << "its " << used * C << "x" << K * D
                                         << " matrix (limit: 64 x --fold-limit elements)");
  // The axis next to the pair, then [batch, L * C] rows.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(rank - 1);
  bool identity = llvm::equal(perm, llvm::seq<int64_t>(0, rank));
  if (!identity) {
    DS_TRY(t, build<TransposeOp>({x}, {arrAttr("permutation", perm)}));
    x = t;
  }
  SmallVector<int64_t> outer;
  int64_t batch = 1;
  for (int64_t d : ArrayRef<int64_t>(perm).drop_back(2)) {
    outer.push_back(xt.getDimSize(d));
    batch *= xt.getDimSize(d);
  }
  DS_TRY(flat, reshape(x, {batch, used * C}));
  // W[(j, c), (k, d)]: input point j (part c) into output bin k (part d).
  std::vector<double> w(static_cast<size_t>(used * C * K * D), 0.0);
  auto at = [&](int64_t j, int64_t c, int64_t k, int64_t d) -> double & {
    return w[static_cast<size_t>(((j * C + c) * K + k) * D + d)];
  };
  for (int64_t j = 0; j < used; ++j)
    for (int64_t k = 0; k < K; ++k) {
      auto [cs, sn] = turn((j * k) % N, N);
      switch (kind) {
      case Kind::Forward: // (xr + i xi)(cos - i sin)
        at(j, 0, k, 0) = cs, at(j, 0, k, 1) = -sn;
        if (C == 2) at(j, 1, k, 0) = sn, at(j, 1, k, 1) = cs;
        break;
      case Kind::Inverse: // (xr + i xi)(cos + i sin) / N
        at(j, 0, k, 0) = cs / N, at(j, 0, k, 1) = sn / N;
        if (C == 2) at(j, 1, k, 0) = -sn / N, at(j, 1, k, 1) = cs / N;
        break;
      case Kind::InverseOneSided: {
        // Bin j stands for itself and its mirror N - j (their sum is twice
        // the real part); the zero bin and, for even N, the middle one
        // have no mirror, and their imaginary parts are dropped.
        const double twice = (j == 0 || 2 * j == N) ? 1 : 2;
        at(j, 0, k, 0) = twice * cs / N;
        if (C == 2) at(j, 1, k, 0) = (j == 0 || 2 * j == N) ? 0 : -twice * sn / N;
        break;
      }
      }
    }
  auto wt = RankedTensorType::get({used * C, K * D}, compute);
  DenseElementsAttr matrix;
  if (compute.isF64()) {
    matrix = DenseElementsAttr::get(wt, ArrayRef<double>(w));
  } else {
    std::vector<float> f(w.begin(), w.end());
    matrix = DenseElementsAttr::get(wt, ArrayRef<float>(f));
  }
  DS_TRY(y, build<MatmulOp>({flat, constant(matrix)}));
  SmallVector<int64_t> shaped(outer);
  shaped.push_back(K);
  shaped.push_back(D);
  DS_TRY(unflat, reshape(y, shaped));
  Value out = unflat;
  if (!identity) {
    SmallVector<int64_t> inverse(rank);
    for (int64_t i = 0; i < rank; ++i) inverse[perm[i]] = i;
    DS_TRY(t, build<TransposeOp>({out}, {arrAttr("permutation", inverse)}));
    out = t;
  }
  return castTo(out, elem);
}

LogicalResult SpectralImporter::dft(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  const int64_t rank = typeOf(x).getRank();
  if (rank < 2)
    return nodeError(n) << "input must have rank >= 2 (signal dimensions and the real/imaginary "
                        << "pair), got rank " << rank;
  DS_TRY(inverse, intAttr(n, "inverse", 0));
  DS_TRY(onesided, intAttr(n, "onesided", 0));
  // DFT-17 takes the axis as an attribute (default 1), DFT-20 as input 2
  // (default -2).
  int64_t axis;
  if (opset_ < 20) {
    DS_TRY(a, intAttr(n, "axis", 1));
    axis = a;
  } else {
    DS_TRY(a, optionalScalar(n, 2, "axis"));
    axis = input(n, 2) ? a : -2;
  }
  if (axis < -rank || axis >= rank)
    return nodeError(n) << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0) axis += rank;
  if (axis == rank - 1)
    return nodeError(n) << "axis " << axis << " is the real/imaginary dimension; the transform "
                        << "runs along a signal dimension";
  DS_TRY(length, optionalScalar(n, 1, "dft_length"));
  const int64_t L = typeOf(x).getDimSize(axis);
  const bool irfft = inverse && onesided;
  if (length < 0) length = irfft ? 2 * (L - 1) : L;
  if (length < 1) return nodeError(n) << "dft_length must be at least 1, got " << length;
  DS_TRY(y, transform(n, x, axis, length,
                      !inverse ? Kind::Forward : irfft ? Kind::InverseOneSided : Kind::Inverse,
                      onesided != 0));
  setOutput(n, 0, y);
  return success();
}

LogicalResult SpectralImporter::stft(const onnx::NodeProto &n) {
  DS_TRY(signal, required(n, 0));
  RankedTensorType st = typeOf(signal);
  if (st.getRank() != 3)
    return nodeError(n) << "signal must be [batch, length, 1 or 2], got rank " << st.getRank();
  DS_TRY(onesided, intAttr(n, "onesided", 1));
  DS_TRY(step, optionalScalar(n, 1, "frame_step"));
  if (step < 1) return nodeError(n) << "frame_step must be a positive integer";
  Value window = input(n, 2);
  DS_TRY(frameLength, optionalScalar(n, 3, "frame_length"));
  const int64_t L = st.getDimSize(1);
  const int64_t width = window ? typeOf(window).getNumElements() : frameLength < 0 ? L : frameLength;
  if (window && typeOf(window).getRank() != 1)
    return nodeError(n) << "window must be 1-D";
  if (frameLength < 0) frameLength = width;
  if (frameLength < 1 || width < 1 || width > L)
    return nodeError(n) << "frames of " << width << " samples do not fit a signal of " << L;
  const int64_t frames = 1 + (L - width) / step;
  // One gather takes every frame: [batch, frames, width, C].
  SmallVector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < width; ++t) idx.push_back(f * step + t);
  auto it = RankedTensorType::get({frames, width}, b_.getI64Type());
  DS_TRY(framed, build<GatherOp>({signal, constant(DenseElementsAttr::get(it, ArrayRef(idx)))},
                                 {i64Attr("axis", 1)}));
  Value x = framed;
  if (window) {
    DS_TRY(wc, castTo(window, st.getElementType()));
    DS_TRY(w, reshape(wc, {width, 1}));
    DS_TRY(weighted, build<MulOp>({x, w}));
    x = weighted;
  }
  DS_TRY(y, transform(n, x, 2, frameLength, Kind::Forward, onesided != 0));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerSpectralHandlers(HandlerTable &t) {
  using I = SpectralImporter;
  t.add<I, &I::dft>("DFT");
  t.add<I, &I::stft>("STFT");
}
