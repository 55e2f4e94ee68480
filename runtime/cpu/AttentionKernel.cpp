// attention: softmax(scale q k^T + mask) v per (batch, query head), with
// grouped key/value heads, FlashAttention's recurrence on the CPU. Each task
// takes a block of query rows of one head and walks the keys in blocks:
// scores for the block (one GEMM into a thread's scratch), the running row
// maximum and sum of the online softmax, and the rows' weighted values
// accumulated by a second GEMM. So per head the [Sq, Sk] scores are never
// in memory at once, and q, k, v are read where they are, through the
// strided views the compiler folded their layout ops into (each block
// gathered into a contiguous one for the GEMMs).
#include <algorithm>
#include <array>
#include <string>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/plan/StridedViews.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

/// A [B, H, S, D] view of an operand: element (b, h, s, d) is at
/// b*stride[0] + h*stride[1] + s*stride[2] + d*stride[3].
struct HeadView {
  const float *data = nullptr;
  int64_t shape[4] = {}, stride[4] = {};

  const float *at(int64_t b, int64_t h, int64_t s) const {
    return data + b * stride[0] + h * stride[1] + s * stride[2];
  }
  /// Rows [s0, s0 + rows) of one head's [S, D] matrix as a row-major
  /// [rows, D] block: in place when the view already is one, else copied
  /// into `scratch`. Reading a strided view directly (rows of q, k, v
  /// interleaved by head: a power-of-two row stride) makes the GEMMs thrash
  /// the cache's sets; one copy per block is cheaper.
  const float *block(int64_t b, int64_t h, int64_t s0, int64_t rows, float *scratch) const {
    const float *src = at(b, h, s0);
    const int64_t cols = shape[3];
    if (stride[3] == 1 && (stride[2] == cols || rows == 1)) return src;
    for (int64_t r = 0; r < rows; ++r) {
      float *dst = scratch + r * cols;
      const float *row = src + r * stride[2];
      if (stride[3] == 1) std::copy(row, row + cols, dst);
      else
        for (int64_t c = 0; c < cols; ++c) dst[c] = row[c * stride[3]];
    }
    return scratch;
  }
};

absl::StatusOr<HeadView> headView(const KernelContext &c, const TensorView &t, const char *name) {
  HeadView v;
  v.data = t.as<float>();
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.intsAttr(std::string(name) + "_shape"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> stride, c.intsAttr(std::string(name) + "_strides"));
  if (shape.size() != 4 || stride.size() != 4)
    return c.error(std::string(name) + "_shape and _strides must have 4 entries");
  int64_t offset = 0;
  if (c.hasAttr(std::string(name) + "_offset")) {
    DS_ASSIGN_OR_RETURN(offset, c.intAttr(std::string(name) + "_offset"));
  }
  if (const char *problem = plan::viewProblem(shape.data(), stride.data(), 4, t.numel, offset))
    return c.error(std::string(name) + " " + problem);
  v.data += offset;
  std::copy(shape.begin(), shape.end(), v.shape);
  std::copy(stride.begin(), stride.end(), v.stride);
  if (stride[2] != 1 && stride[3] != 1)
    return c.error(std::string(name) + " view needs stride 1 in one of its last two dimensions");
  return v;
}

struct Attention {
  HeadView q, k, v;
  const void *mask = nullptr;  // f32 added, or bool selecting `fill` (maskSelects)
  int64_t maskStride[4] = {}; // 0 along broadcast dimensions
  bool maskSelects = false;
  float fill = 0.0f;
  float *out = nullptr;
  int64_t outStride[4] = {};
  float scale = 1.0f;
  bool zeroNanRows = false;
  int64_t group = 1; // query heads per key/value head

  static constexpr int64_t kRows = 64;   // query rows per task
  static constexpr int64_t kKeys = 512;  // keys per block of the online softmax

  /// Per-thread scratch of one task, in floats.
  struct Scratch {
    float *scores, *acc, *rowMaxima, *rowSums, *q, *k, *v;
  };
  static int64_t scratchFloats(int64_t keys, int64_t d, int64_t dv) {
    return kRows * keys + kRows * dv + 2 * kRows + kRows * d + keys * d + keys * dv;
  }
  static Scratch carve(float *p, int64_t keys, int64_t d, int64_t dv) {
    Scratch s;
    s.scores = p, p += kRows * keys;
    s.acc = p, p += kRows * dv;
    s.rowMaxima = p, p += kRows;
    s.rowSums = p, p += kRows;
    s.q = p, p += kRows * d;
    s.k = p, p += keys * d;
    s.v = p;
    return s;
  }

  /// A mask value at or below this removes its key (an additive -inf or
  /// finfo.min, or a select of such a fill): its weight exp(<= -1e30 - max)
  /// is exactly 0 next to any key the mask keeps.
  static constexpr float kDead = -1e30f;

  bool deadKey(int64_t at) const {
    if (maskSelects) return static_cast<const uint8_t *>(mask)[at] != 0 && fill <= kDead;
    return static_cast<const float *>(mask)[at] <= kDead; // NaN: live (it poisons the row)
  }

  /// The keys [first, end) rows [r0, r0 + rows) of head h need: keys the
  /// mask removes from every one of those rows are left out, provided each
  /// row keeps some key (a row with none keeps the whole range, and its NaN
  /// or zero result). Left-out keys weigh exactly 0, so for finite scores
  /// only the GEMMs' rounding order changes (shorter products), and a causal
  /// mask's upper triangle costs nothing: about half the work of a
  /// sequence's attention. (Infinite or NaN values of k or v under such a
  /// mask no longer reach the result, as in PyTorch's is_causal kernels.)
  std::pair<int64_t, int64_t> liveKeys(int64_t b, int64_t h, int64_t r0, int64_t rows) const {
    const int64_t sk = k.shape[2];
    if (!mask) return {0, sk};
    int64_t first = sk, end = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = b * maskStride[0] + h * maskStride[1] + (r0 + r) * maskStride[2];
      int64_t lo = 0, hi = sk;
      while (lo < sk && deadKey(at + lo * maskStride[3])) ++lo;
      if (lo == sk) return {0, sk};
      while (hi > lo + 1 && deadKey(at + (hi - 1) * maskStride[3])) --hi;
      first = std::min(first, lo), end = std::max(end, hi);
    }
    return {first, end};
  }

  /// Rows [r0, r0 + rows) of query head h of batch b, reading keys
  /// [keyFirst, keyEnd) (liveKeys).
  void block(int64_t b, int64_t h, int64_t r0, int64_t rows, int64_t keyFirst, int64_t keyEnd,
             const Scratch &w) const {
    float *scores = w.scores, *acc = w.acc, *rowMaxima = w.rowMaxima, *rowSums = w.rowSums;
    const int64_t sk = keyEnd, d = q.shape[3], dv = v.shape[3], kvh = h / group;
    const int64_t keys = std::min(k.shape[2], kKeys);
    const float *qb = q.block(b, h, r0, rows, w.q);
    for (int64_t r = 0; r < rows; ++r) {
      rowMaxima[r] = -std::numeric_limits<float>::infinity();
      rowSums[r] = 0.0f;
    }
    std::fill(acc, acc + rows * dv, 0.0f);
    bool poisoned[kRows] = {};
    for (int64_t j0 = keyFirst; j0 < sk; j0 += keys) {
      const int64_t n = std::min(keys, sk - j0);
      // scores = scale q k^T for this block: [rows, D] x [D, n].
      const float *kb = k.block(b, kvh, j0, n, w.k);
      sgemm(false, true, rows, n, d, scale, qb, d, kb, d, 0.0f, scores, n);
      for (int64_t r = 0; r < rows; ++r) {
        float *s = scores + r * n;
        float blockMax;
        if (mask) {
          const int64_t at = b * maskStride[0] + h * maskStride[1] + (r0 + r) * maskStride[2] +
                             j0 * maskStride[3], step = maskStride[3];
          if (maskSelects && step == 1) {
            // A mask row (a causal mask): selected and the maximum taken
            // in one vectorized pass.
            blockMax = selectMaxRow(s, 1.0f, static_cast<const uint8_t *>(mask) + at, fill, s, n);
          } else if (maskSelects) {
            const uint8_t *mr = static_cast<const uint8_t *>(mask) + at;
            for (int64_t j = 0; j < n; ++j) s[j] = mr[j * step] ? fill : s[j];
            blockMax = rowMax(s, n);
          } else if (step == 1) { // an additive mask row
            blockMax = addMaxRow(s, static_cast<const float *>(mask) + at, s, n);
          } else {
            const float *mr = static_cast<const float *>(mask) + at;
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) s[j] += mr[j * step];
            blockMax = rowMax(s, n);
          }
        } else {
          blockMax = rowMax(s, n);
        }
        // Online softmax: rescale what the row has so far to the new max.
        const float mOld = rowMaxima[r], mNew = std::max(mOld, blockMax);
        if (mNew == -std::numeric_limits<float>::infinity()) { // every key so far masked
          // (a NaN score is skipped by rowMax; it still poisons the row)
          for (int64_t j = 0; j < n; ++j) poisoned[r] |= std::isnan(s[j]);
          std::fill(s, s + n, 0.0f);
          continue;
        }
        const float sum = rowExpSum<true>(s, s, mNew, n);
        if (std::isnan(sum)) poisoned[r] = true;
        const float corr = expShifted(mOld - mNew);
        if (corr != 1.0f) {
          float *ar = acc + r * dv;
#pragma omp simd
          for (int64_t e = 0; e < dv; ++e) ar[e] *= corr;
        }
        rowSums[r] = rowSums[r] * corr + sum;
        rowMaxima[r] = mNew;
      }
      // acc += p v for this block: [rows, n] x [n, Dv].
      const float *vb = v.block(b, kvh, j0, n, w.v);
      sgemm(false, false, rows, dv, n, 1.0f, scores, n, vb, dv, 1.0f, acc, dv);
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < rows; ++r) {
      float *o = out + b * outStride[0] + h * outStride[1] + (r0 + r) * outStride[2];
      const float *ar = acc + r * dv;
      // A row softmax has no number for (all scores -inf, or a NaN): NaN,
      // or 0 as PyTorch 2's where(isnan(p), 0, p) makes it.
      if (poisoned[r] || rowMaxima[r] == -std::numeric_limits<float>::infinity()) {
        std::fill(o, o + dv, zeroNanRows ? 0.0f : nan);
        continue;
      }
      const float inv = 1.0f / rowSums[r];
#pragma omp simd
      for (int64_t e = 0; e < dv; ++e) o[e] = ar[e] * inv;
    }
  }

  void run() const {
    const int64_t batches = q.shape[0], heads = q.shape[1], sq = q.shape[2];
    const int64_t rowBlocks = (sq + kRows - 1) / kRows;
    const int64_t keys = std::min(k.shape[2], kKeys), d = q.shape[3], dv = v.shape[3];
    // A mask shared by every batch and head (a causal one) has the same
    // live keys for all of them: found once per block of rows.
    const bool shared = !mask || (maskStride[0] == 0 && maskStride[1] == 0);
    std::vector<std::pair<int64_t, int64_t>> sharedKeys;
    if (shared)
      for (int64_t r0 = 0; r0 < sq; r0 += kRows)
        sharedKeys.push_back(liveKeys(0, 0, r0, std::min(kRows, sq - r0)));
    parallelFor(batches * heads * rowBlocks, 1, [&](int64_t lo, int64_t hi) {
      thread_local std::vector<float> scratch;
      scratch.resize(static_cast<size_t>(scratchFloats(keys, d, dv)));
      const Scratch w = carve(scratch.data(), keys, d, dv);
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t bh = t / rowBlocks, rb = t % rowBlocks, r0 = rb * kRows;
        const int64_t b = bh / heads, h = bh % heads, rows = std::min(kRows, sq - r0);
        const auto [first, end] = shared ? sharedKeys[rb] : liveKeys(b, h, r0, rows);
        block(b, h, r0, rows, first, end, w);
      }
    });
  }
};

absl::StatusOr<PreparedStep> prepareAttention(const KernelContext &c) {
  bool hasMask = false, zeroNan = false, bshd = false;
  for (auto [name, flag] : {std::pair<const char *, bool *>{"mask", &hasMask},
                            {"zero_nan_rows", &zeroNan}, {"result_bshd", &bshd}})
    if (c.hasAttr(name)) {
      DS_ASSIGN_OR_RETURN(int64_t v, c.intAttr(name));
      *flag = v != 0;
    }
  const size_t arity = hasMask ? 4 : 3;
  DS_RETURN_IF_ERROR(c.expectArity(arity, arity, 1));
  for (size_t i = 0; i < 3; ++i) DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  auto a = std::make_shared<Attention>();
  DS_ASSIGN_OR_RETURN(a->q, headView(c, c.in[0], "query"));
  DS_ASSIGN_OR_RETURN(a->k, headView(c, c.in[1], "key"));
  DS_ASSIGN_OR_RETURN(a->v, headView(c, c.in[2], "value"));
  const int64_t *q = a->q.shape, *k = a->k.shape, *v = a->v.shape;
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2] || k[3] != q[3])
    return c.error("views disagree: query [B, Hq, Sq, D], key [B, Hkv, Sk, D], value "
                   "[B, Hkv, Sk, Dv] expected");
  if (q[1] % k[1]) return c.error("key/value heads must divide query heads");
  a->group = q[1] / k[1];
  DS_ASSIGN_OR_RETURN(double scale, c.floatAttr("scale"));
  if (!std::isfinite(static_cast<float>(scale))) return c.error("scale must be finite as an f32");
  a->scale = static_cast<float>(scale);
  a->zeroNanRows = zeroNan;
  // The result, [B, Hq, Sq, Dv] or [B, Sq, Hq, Dv].
  std::vector<int64_t> want = bshd ? std::vector<int64_t>{q[0], q[2], q[1], v[3]}
                                   : std::vector<int64_t>{q[0], q[1], q[2], v[3]};
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], want, "result"));
  a->out = c.out[0].as<float>();
  const int64_t dv = v[3];
  if (bshd) {
    a->outStride[0] = q[2] * q[1] * dv, a->outStride[1] = dv, a->outStride[2] = q[1] * dv;
  } else {
    a->outStride[0] = q[1] * q[2] * dv, a->outStride[1] = q[2] * dv, a->outStride[2] = dv;
  }
  a->outStride[3] = 1;
  if (hasMask) {
    const TensorView &m = c.in[3];
    const std::vector<int64_t> scores{q[0], q[1], q[2], k[2]};
    if (m.rank() > 4) return c.error("mask must have rank <= 4");
    std::vector<int64_t> padded(4 - m.rank(), 1);
    padded.insert(padded.end(), m.shape.begin(), m.shape.end());
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      if (padded[i] != scores[i] && padded[i] != 1)
        return c.error("mask [" + shapeToString(m.shape) + "] does not broadcast to the scores");
      a->maskStride[i] = padded[i] == 1 ? 0 : stride;
      stride *= padded[i];
    }
    a->mask = m.data;
    a->maskSelects = c.hasAttr("mask_fill");
    if (a->maskSelects) {
      DS_ASSIGN_OR_RETURN(double fill, c.floatAttr("mask_fill"));
      a->fill = static_cast<float>(fill);
    }
    DS_RETURN_IF_ERROR(c.expectDType(m, a->maskSelects ? plan::BOOL : plan::F32, "mask"));
  } else if (c.hasAttr("mask_fill")) {
    return c.error("mask_fill needs a mask");
  }
  return PreparedStep([a] {
    a->run();
    return absl::OkStatus();
  });
}

/// cached_attention: one step of generation. The chunk's new keys and
/// values go into the caches at each row's positions, then each query row
/// attends to its sequence's cached keys up to its own position (causal),
/// or the last `window` of them. The key cache is stored in tiles of
/// kLanes keys, transposed, [Bc, Hkv, M / kLanes, D, kLanes]: a row's
/// scores against a tile's keys are vector products over one contiguous
/// block (no horizontal sums, and memory read in sequence, which the
/// prefetchers follow; a plain transposed cache is read with a stride
/// they do not). Tasks are (batch row, key/value
/// head, block of query rows), the rows of all query heads sharing that
/// key/value head taken together so each cached key is read once for the
/// group (grouped-query attention): decode's few rows by direct loops, a
/// prefill chunk's many by GEMMs over blocks of keys with the online
/// softmax of `Attention` above.
struct CachedAttention {
  HeadView q, k, v;               // the chunk's queries, new keys, new values
  const float *kcIn = nullptr, *vcIn = nullptr;
  float *kc = nullptr, *vc = nullptr; // the caches written (the inputs' bytes in plans)
  int64_t bc = 0, hkv = 0, m = 0, d = 0, dv = 0, group = 1, window = 0;
  const int64_t *pos = nullptr, *len = nullptr, *slot = nullptr;
  float *out = nullptr;
  int64_t outStride[4] = {};
  float scale = 1.0f;
  std::string where; // for run-time errors

  static constexpr int64_t kRows = 64;    // query rows per task
  static constexpr int64_t kKeys = 512;   // keys per block of the online softmax
  static constexpr int64_t kFewRows = 16; // rows per task taken without GEMMs
  static constexpr int64_t kLanes = 16;   // keys scored at once by the direct loops

  /// Head g of slot s: key tiles [M / kLanes, D, kLanes], values [M, Dv].
  const float *keysOf(int64_t s, int64_t g) const { return kc + (s * hkv + g) * d * m; }
  /// Element (key j, dimension e) of a head's key tiles.
  int64_t keyAt(int64_t j, int64_t e) const { return (j / kLanes * d + e) * kLanes + j % kLanes; }
  const float *valuesOf(int64_t s, int64_t g) const { return vc + (s * hkv + g) * m * dv; }

  absl::Status check() const {
    const int64_t batch = q.shape[0], t = q.shape[2];
    std::vector<char> used(static_cast<size_t>(bc), 0);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t l = len[b], p = pos[b], s = slot[b];
      auto row = [&] { return where + ": row " + std::to_string(b) + ": "; };
      if (l < 0 || l > t)
        return absl::InvalidArgumentError(row() + "length " + std::to_string(l) +
                                          " outside [0, " + std::to_string(t) + "]");
      if (l == 0) continue;
      if (p < 0 || p > m - l)
        return absl::InvalidArgumentError(
            row() + "positions " + std::to_string(p) + ".." + std::to_string(p + l - 1) +
            " do not fit the cache of " + std::to_string(m) + " tokens (ds-opt --max-tokens)");
      if (s < 0 || s >= bc)
        return absl::InvalidArgumentError(row() + "slot " + std::to_string(s) + " outside [0, " +
                                          std::to_string(bc) + ")");
      if (used[s]++)
        return absl::InvalidArgumentError(row() + "slot " + std::to_string(s) +
                                          " is written by an earlier row too");
    }
    return absl::OkStatus();
  }

  /// The new keys and values into their cache rows (a key into its column).
  void append() const {
    const int64_t batch = q.shape[0];
    parallelFor(batch * hkv, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t b = i / hkv, g = i % hkv, l = len[b];
        float *kd = kc + (slot[b] * hkv + g) * d * m;
        float *vd = vc + ((slot[b] * hkv + g) * m + pos[b]) * dv;
        for (int64_t t = 0; t < l; ++t) {
          const float *ks = k.at(b, g, t), *vs = v.at(b, g, t);
          for (int64_t e = 0; e < d; ++e) kd[keyAt(pos[b] + t, e)] = ks[e * k.stride[3]];
          for (int64_t e = 0; e < dv; ++e) vd[t * dv + e] = vs[e * v.stride[3]];
        }
      }
    });
  }

  /// Query row r (of group g's rows: head g * group + r / l at chunk token
  /// r % l): its scaled query, and the keys it sees [lo, last].
  void rowOf(int64_t b, int64_t g, int64_t r, float *qr, int64_t &lo, int64_t &last) const {
    const int64_t l = len[b];
    const int64_t h = g * group + r / l, t = r % l;
    last = pos[b] + t;
    lo = window ? std::max<int64_t>(0, last - window + 1) : 0;
    const float *src = q.at(b, h, t);
    for (int64_t e = 0; e < d; ++e) qr[e] = src[e * q.stride[3]] * scale;
  }
  float *outRow(int64_t b, int64_t g, int64_t r) const {
    const int64_t l = len[b];
    return out + b * outStride[0] + (g * group + r / l) * outStride[1] + (r % l) * outStride[2];
  }

  /// Few rows (decode: a token's query heads of one group): scores kLanes
  /// keys at a time by vector products along the transposed keys, one
  /// softmax per row over its keys (all held: at most the cache's length),
  /// values summed row by row; no GEMM calls, whose setup costs more than
  /// these products.
  void fewRows(int64_t b, int64_t g, int64_t r0, int64_t rows, std::vector<float> &scratch) const {
    const int64_t keys = (pos[b] + len[b] + kLanes - 1) / kLanes * kLanes; // whole tiles
    scratch.resize(static_cast<size_t>(rows * (d + keys + dv)));
    float *qs = scratch.data(), *scores = qs + rows * d, *acc = scores + rows * keys;
    int64_t lows[kFewRows], lasts[kFewRows], keyFirst = keys, keyEnd = 0;
    for (int64_t r = 0; r < rows; ++r) {
      rowOf(b, g, r0 + r, qs + r * d, lows[r], lasts[r]);
      keyFirst = std::min(keyFirst, lows[r]);
      keyEnd = std::max(keyEnd, lasts[r] + 1);
    }
    const float *kt = keysOf(slot[b], g), *vrows = valuesOf(slot[b], g);
    // Scores of every row against the tiles holding keys [keyFirst,
    // keyEnd) (a tile's other keys are scored too, and not read after).
    for (int64_t j0 = keyFirst / kLanes * kLanes; j0 < keyEnd; j0 += kLanes) {
      const float *tile = kt + j0 * d;
      for (int64_t r = 0; r < rows; ++r) {
        const float *qr = qs + r * d;
        float sc[kLanes] = {};
        for (int64_t e = 0; e < d; ++e) {
          const float qe = qr[e], *ke = tile + e * kLanes;
#pragma omp simd
          for (int64_t jj = 0; jj < kLanes; ++jj) sc[jj] += qe * ke[jj];
        }
        std::copy_n(sc, kLanes, scores + r * keys + j0);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t lo = lows[r], n = lasts[r] - lo + 1;
      float *sr = scores + r * keys + lo;
      const float mx = rowMax(sr, n);
      const float inv = 1.0f / rowExpSum<true>(sr, sr, mx, n);
      float *ar = acc + r * dv;
      std::fill(ar, ar + dv, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float w = sr[j] * inv, *vj = vrows + (lo + j) * dv;
#pragma omp simd
        for (int64_t e = 0; e < dv; ++e) ar[e] += w * vj[e];
      }
      std::copy(ar, ar + dv, outRow(b, g, r0 + r));
    }
  }

  /// Rows [r0, r0 + rows) of batch row b's group g by GEMMs over blocks of
  /// keys, with the online softmax.
  void block(int64_t b, int64_t g, int64_t r0, int64_t rows, std::vector<float> &scratch) const {
    int64_t keyEnd = 0, keyFirst = pos[b] + len[b];
    for (int64_t r = r0; r < r0 + rows; ++r) {
      const int64_t last = pos[b] + r % len[b];
      keyEnd = std::max(keyEnd, last + 1);
      keyFirst = std::min(keyFirst, window ? std::max<int64_t>(0, last - window + 1) : 0);
    }
    const int64_t keys = std::min(kKeys, keyEnd - keyFirst);
    scratch.resize(static_cast<size_t>(rows * (d + keys + dv + 2) + d * (keys + kLanes)));
    float *qb = scratch.data(), *scores = qb + rows * d, *acc = scores + rows * keys;
    float *rowMaxima = acc + rows * dv, *rowSums = rowMaxima + rows;
    float *kb = rowSums + rows; // a block of keys untiled: [D, n]
    std::vector<int64_t> lows(rows), lasts(rows);
    for (int64_t r = 0; r < rows; ++r) {
      rowOf(b, g, r0 + r, qb + r * d, lows[r], lasts[r]);
      rowMaxima[r] = -std::numeric_limits<float>::infinity();
      rowSums[r] = 0.0f;
    }
    std::fill(acc, acc + rows * dv, 0.0f);
    const float *kt = keysOf(slot[b], g), *vrows = valuesOf(slot[b], g);
    for (int64_t j0 = keyFirst; j0 < keyEnd; j0 += keys) {
      const int64_t n = std::min(keys, keyEnd - j0);
      // [rows, D] x [D, n] of the keys, copied out of their tiles (the
      // query is scaled).
      for (int64_t e = 0; e < d; ++e)
        for (int64_t j = 0; j < n; ++j) kb[e * n + j] = kt[keyAt(j0 + j, e)];
      sgemm(false, false, rows, n, d, 1.0f, qb, d, kb, n, 0.0f, scores, n);
      for (int64_t r = 0; r < rows; ++r) {
        float *sr = scores + r * n;
        // Keys after the row's own position (later tokens of the chunk) or
        // before its window weigh nothing.
        for (int64_t j = 0; j < n; ++j)
          if (j0 + j > lasts[r] || j0 + j < lows[r]) sr[j] = -std::numeric_limits<float>::infinity();
        const float blockMax = rowMax(sr, n);
        const float mOld = rowMaxima[r], mNew = std::max(mOld, blockMax);
        if (mNew == -std::numeric_limits<float>::infinity()) {
          std::fill(sr, sr + n, 0.0f);
          continue;
        }
        const float sum = rowExpSum<true>(sr, sr, mNew, n);
        const float corr = expShifted(mOld - mNew);
        if (corr != 1.0f) {
          float *ar = acc + r * dv;
#pragma omp simd
          for (int64_t e = 0; e < dv; ++e) ar[e] *= corr;
        }
        rowSums[r] = rowSums[r] * corr + sum;
        rowMaxima[r] = mNew;
      }
      sgemm(false, false, rows, dv, n, 1.0f, scores, n, vrows + j0 * dv, dv, 1.0f, acc, dv);
    }
    for (int64_t r = 0; r < rows; ++r) {
      float *o = outRow(b, g, r0 + r);
      const float inv = 1.0f / rowSums[r]; // every row has its own key: the sum is > 0
      const float *ar = acc + r * dv;
#pragma omp simd
      for (int64_t e = 0; e < dv; ++e) o[e] = ar[e] * inv;
    }
  }

  absl::Status run() const {
    DS_RETURN_IF_ERROR(check());
    const int64_t batch = q.shape[0], heads = q.shape[1], t = q.shape[2];
    if (kc != kcIn) std::copy(kcIn, kcIn + bc * hkv * m * d, kc);
    if (vc != vcIn) std::copy(vcIn, vcIn + bc * hkv * m * dv, vc);
    append();
    // Rows past a row's length are 0.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t tt = len[b]; tt < t; ++tt)
          std::fill_n(out + b * outStride[0] + h * outStride[1] + tt * outStride[2], dv, 0.0f);
    std::vector<std::array<int64_t, 4>> tasks; // b, g, first row, rows
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t g = 0; g < hkv; ++g)
        for (int64_t r0 = 0; r0 < group * len[b]; r0 += kRows)
          tasks.push_back({b, g, r0, std::min(kRows, group * len[b] - r0)});
    parallelFor(static_cast<int64_t>(tasks.size()), 1, [&](int64_t lo, int64_t hi) {
      thread_local std::vector<float> scratch;
      for (int64_t i = lo; i < hi; ++i) {
        const auto &[b, g, r0, rows] = tasks[static_cast<size_t>(i)];
        if (rows <= kFewRows) fewRows(b, g, r0, rows, scratch);
        else block(b, g, r0, rows, scratch);
      }
    });
    return absl::OkStatus();
  }
};

absl::StatusOr<PreparedStep> prepareCachedAttention(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(8, 8, 3));
  for (size_t i = 0; i < 5; ++i) DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::F32, "operand"));
  for (size_t i = 5; i < 8; ++i)
    DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::I64, "positions, lengths and slots"));
  for (size_t i = 0; i < 3; ++i) DS_RETURN_IF_ERROR(c.expectDType(c.out[i], plan::F32, "result"));
  bool bshd = false;
  if (c.hasAttr("result_bshd")) {
    DS_ASSIGN_OR_RETURN(int64_t flag, c.intAttr("result_bshd"));
    bshd = flag != 0;
  }
  auto a = std::make_shared<CachedAttention>();
  DS_ASSIGN_OR_RETURN(a->q, headView(c, c.in[0], "query"));
  DS_ASSIGN_OR_RETURN(a->k, headView(c, c.in[1], "key"));
  DS_ASSIGN_OR_RETURN(a->v, headView(c, c.in[2], "value"));
  const int64_t *q = a->q.shape, *k = a->k.shape, *v = a->v.shape;
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2] || k[2] != q[2] ||
      k[3] != q[3])
    return c.error("views disagree: query [B, Hq, T, D], key [B, Hkv, T, D], value "
                   "[B, Hkv, T, Dv] expected");
  if (q[1] % k[1]) return c.error("key/value heads must divide query heads");
  a->group = q[1] / k[1];
  const TensorView &kc = c.in[3], &vc = c.in[4];
  const int64_t lanes = CachedAttention::kLanes;
  if (kc.rank() != 5 || vc.rank() != 4 || kc.shape[1] != k[1] || kc.shape[3] != k[3] ||
      kc.shape[4] != lanes || vc.shape[0] != kc.shape[0] || vc.shape[1] != k[1] ||
      vc.shape[2] != kc.shape[2] * lanes || vc.shape[3] != v[3] || vc.shape[2] < q[2])
    return c.error("caches must be key tiles [Bc, Hkv, M / 16, D, 16] and value [Bc, Hkv, M, "
                   "Dv] with M >= T, got [" + shapeToString(kc.shape) + "] and [" +
                   shapeToString(vc.shape) + "]");
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], kc.shape, "updated key cache"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[2], vc.shape, "updated value cache"));
  for (size_t i = 5; i < 8; ++i)
    DS_RETURN_IF_ERROR(c.expectShape(c.in[i], {q[0]}, "positions, lengths and slots"));
  a->bc = kc.shape[0], a->hkv = k[1], a->m = vc.shape[2], a->d = k[3], a->dv = v[3];
  a->kcIn = kc.as<float>(), a->vcIn = vc.as<float>();
  a->kc = c.out[1].as<float>(), a->vc = c.out[2].as<float>();
  a->pos = c.in[5].as<int64_t>(), a->len = c.in[6].as<int64_t>(), a->slot = c.in[7].as<int64_t>();
  DS_ASSIGN_OR_RETURN(double scale, c.floatAttr("scale"));
  if (!std::isfinite(static_cast<float>(scale))) return c.error("scale must be finite as an f32");
  a->scale = static_cast<float>(scale);
  if (c.hasAttr("window")) {
    DS_ASSIGN_OR_RETURN(a->window, c.intAttr("window"));
    if (a->window < 1) return c.error("window must be >= 1");
  }
  std::vector<int64_t> want = bshd ? std::vector<int64_t>{q[0], q[2], q[1], v[3]}
                                   : std::vector<int64_t>{q[0], q[1], q[2], v[3]};
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], want, "result"));
  a->out = c.out[0].as<float>();
  const int64_t dv = v[3];
  if (bshd) {
    a->outStride[0] = q[2] * q[1] * dv, a->outStride[1] = dv, a->outStride[2] = q[1] * dv;
  } else {
    a->outStride[0] = q[1] * q[2] * dv, a->outStride[1] = q[2] * dv, a->outStride[2] = dv;
  }
  a->outStride[3] = 1;
  a->where = "cached_attention" + (c.step.location().empty() ? std::string()
                                                             : " at " + c.step.location());
  return PreparedStep([a] { return a->run(); });
}

} // namespace

void registerAttentionKernel(KernelRegistry &r) {
  r.add("attention", prepareAttention);
  r.add("cached_attention", prepareCachedAttention);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
