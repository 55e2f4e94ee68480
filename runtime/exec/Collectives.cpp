#include "runtime/exec/Collectives.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/ElementMath.h"

namespace ds::rt {
namespace {

absl::Status stepError(const plan::Step &s, const std::string &msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(s.kernel(), " (", s.location(), "): ", msg));
}

int64_t attrInt(const plan::Step &s, const char *name, int64_t dflt) {
  auto it = s.attrs().find(name);
  return it == s.attrs().end() ? dflt : it->second.i();
}

/// [outer, n, blk] <-> [n, outer, blk] (bytes): moves the blocks of one
/// dimension to the front (toFront) or back.
void moveBlocks(const uint8_t *src, uint8_t *dst, int64_t outer, int64_t n, int64_t blk,
                bool toFront) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t *from = toFront ? src + (o * n + i) * blk : src + (i * outer + o) * blk;
      uint8_t *to = toFront ? dst + (i * outer + o) * blk : dst + (o * n + i) * blk;
      std::memcpy(to, from, blk);
    }
}

int64_t product(const std::vector<int64_t> &s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t i = from; i < to; ++i) p *= s[i];
  return p;
}

absl::StatusOr<ReduceOp> reduction(const plan::Step &s) {
  auto it = s.attrs().find("reduction");
  std::string r = it == s.attrs().end() ? "sum" : it->second.s();
  if (r == "sum") return ReduceOp::Sum;
  if (r == "max") return ReduceOp::Max;
  if (r == "min") return ReduceOp::Min;
  if (r == "prod") return ReduceOp::Prod;
  return stepError(s, "unknown reduction '" + r + "'");
}

/// Packs `n` signs (x >= 0 as 1), eight to a byte, first element in the
/// high bit (numpy's and cupy's packbits order, as DeepSpeed packs them).
void packSigns(const float *x, int64_t n, uint8_t *bits) {
  for (int64_t b = 0; b < n / 8; ++b) {
    uint8_t byte = 0;
    for (int k = 0; k < 8; ++k) byte |= static_cast<uint8_t>(x[8 * b + k] >= 0.0f) << (7 - k);
    bits[b] = byte;
  }
}
inline float signAt(const uint8_t *bits, int64_t i) {
  return (bits[i / 8] >> (7 - i % 8)) & 1 ? 1.0f : -1.0f;
}
/// The root mean square of x[0, n): the scale DeepSpeed sends with signs.
float rootMeanSquare(const float *x, int64_t n) {
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(std::sqrt(sq) / std::sqrt(static_cast<double>(n)));
}

/// DeepSpeed's compressed_allreduce (runtime/comm/nccl.py): the operand
/// plus the worker error, sent as signs and one scale per rank (an
/// all-to-all of each rank's chunk); each rank averages its chunk, adds
/// its server error and sends back signs and a scale (all-gathers).
absl::StatusOr<PreparedStep> prepareCompressedAllReduce(const plan::Step &s,
                                                        const std::vector<TensorView> &ins,
                                                        const std::vector<TensorView> &outs,
                                                        Comm &g,
                                                        std::vector<std::vector<uint8_t>> &scratch) {
  if (ins.size() != 3 || outs.size() != 3)
    return stepError(s, "takes the operand and the two errors, and returns all three");
  for (const TensorView &t : ins)
    if (t.dtype != plan::F32) return stepError(s, "operands must be f32");
  for (const TensorView &t : outs)
    if (t.dtype != plan::F32) return stepError(s, "results must be f32");
  const TensorView x = ins[0], we = ins[1], se = ins[2], out = outs[0], weOut = outs[1],
                   seOut = outs[2];
  const int64_t n = g.size(), big = we.numel, chunk = se.numel, numel = x.numel;
  if (big < numel || big % (8 * n) || chunk * n != big || out.numel != numel ||
      weOut.numel != big || seOut.numel != chunk)
    return stepError(s, absl::StrCat("worker_error has ", big, " elements and server_error ",
                                     chunk, ": N must be >= ", numel,
                                     ", a multiple of 8 times the group's ", n,
                                     " ranks, and server_error N / ", n));
  auto bytes = [&](int64_t count) {
    scratch.emplace_back(static_cast<size_t>(count));
    return scratch.back().data(); // a moved vector keeps its storage
  };
  auto floats = [&](int64_t count) {
    return reinterpret_cast<float *>(bytes(count * static_cast<int64_t>(sizeof(float))));
  };
  float *sum = floats(big), *server = floats(chunk), *workerScales = floats(n),
        *serverScales = floats(n);
  uint8_t *sent = bytes(big / 8), *received = bytes(big / 8), *serverBits = bytes(chunk / 8),
          *allServerBits = bytes(big / 8);
  return PreparedStep([=, &g]() -> absl::Status {
    const float *xv = x.as<float>(), *wev = we.as<float>(), *sev = se.as<float>();
    // 1. The worker's compensated value, its signs, scale and new error.
    for (int64_t i = 0; i < big; ++i) sum[i] = (i < numel ? xv[i] : 0.0f) + wev[i];
    float scale = rootMeanSquare(sum, big);
    packSigns(sum, big, sent);
    float *weo = weOut.as<float>();
    for (int64_t i = 0; i < big; ++i) weo[i] = sum[i] - scale * (sum[i] >= 0.0f ? 1.0f : -1.0f);
    // 2. Chunk j of every rank's signs to rank j, and every rank's scale.
    DS_RETURN_IF_ERROR(g.allToAll(sent, received, big / 8 / n, plan::U8));
    DS_RETURN_IF_ERROR(g.allGather(&scale, workerScales, 1, plan::F32));
    // 3. This rank's chunk: the average, compensated by the server error.
    const float inv = 1.0f / static_cast<float>(n);
    for (int64_t e = 0; e < chunk; ++e) {
      float c = 0;
      for (int64_t r = 0; r < n; ++r) c += signAt(received + r * chunk / 8, e) * workerScales[r];
      server[e] = c * inv + sev[e];
    }
    float serverScale = rootMeanSquare(server, chunk);
    packSigns(server, chunk, serverBits);
    float *seo = seOut.as<float>();
    for (int64_t e = 0; e < chunk; ++e)
      seo[e] = server[e] - serverScale * (server[e] >= 0.0f ? 1.0f : -1.0f);
    // 4. Every chunk's signs and scale to every rank; 5. the average.
    DS_RETURN_IF_ERROR(g.allGather(serverBits, allServerBits, chunk / 8, plan::U8));
    DS_RETURN_IF_ERROR(g.allGather(&serverScale, serverScales, 1, plan::F32));
    float *o = out.as<float>();
    for (int64_t i = 0; i < numel; ++i) o[i] = signAt(allServerBits, i) * serverScales[i / chunk];
    return absl::OkStatus();
  });
}

// ---- ZeRO++'s quantized collectives (qwZ, qgZ) ---------------------------
// A float buffer travels as int8 blocks of `block` elements, each with its
// f32 scale (symmetric: absmax / 127): `n` codes, then the scales.

uint64_t packedBytes(int64_t n, int64_t block) {
  return static_cast<uint64_t>(n) + 4 * static_cast<uint64_t>((n + block - 1) / block);
}

float loadFloat(DType dt, const void *p, int64_t i) {
  if (dt == plan::F32) return static_cast<const float *>(p)[i];
  const uint16_t h = static_cast<const uint16_t *>(p)[i];
  return dt == plan::BF16 ? math::bf16ToFloat(h) : math::halfToFloat(h);
}

void storeFloat(DType dt, void *p, int64_t i, float v) {
  if (dt == plan::F32) static_cast<float *>(p)[i] = v;
  else static_cast<uint16_t *>(p)[i] = dt == plan::BF16 ? math::floatToBf16(v) : math::floatToHalf(v);
}

/// x[0, n) of `dt` packed into `packed` (packedBytes(n, block) bytes).
void packInt8Blocks(DType dt, const void *x, int64_t n, int64_t block, uint8_t *packed) {
  auto *codes = reinterpret_cast<int8_t *>(packed);
  for (int64_t b = 0, lo = 0; lo < n; ++b, lo += block) {
    const int64_t hi = std::min(n, lo + block);
    float absmax = 0;
    for (int64_t i = lo; i < hi; ++i) absmax = std::max(absmax, std::fabs(loadFloat(dt, x, i)));
    const float scale = absmax > 0 ? absmax / 127.0f : 1.0f;
    for (int64_t i = lo; i < hi; ++i)
      codes[i] = static_cast<int8_t>(std::nearbyint(loadFloat(dt, x, i) / scale));
    std::memcpy(packed + n + 4 * b, &scale, 4);
  }
}

/// The values of a packed buffer, added to (or stored in) f32 `acc`.
void unpackInt8Blocks(const uint8_t *packed, int64_t n, int64_t block, float *acc, bool add) {
  const auto *codes = reinterpret_cast<const int8_t *>(packed);
  for (int64_t b = 0, lo = 0; lo < n; ++b, lo += block) {
    float scale;
    std::memcpy(&scale, packed + n + 4 * b, 4);
    const int64_t hi = std::min(n, lo + block);
    for (int64_t i = lo; i < hi; ++i) acc[i] = (add ? acc[i] : 0.0f) + codes[i] * scale;
  }
}

absl::Status checkQuantizable(const plan::Step &s, const TensorView &in, int64_t block,
                              int64_t outer) {
  if (block < 0 || outer != 1)
    return stepError(s, "quantize_block needs a positive block and outer 1");
  if (in.dtype != plan::F32 && in.dtype != plan::F16 && in.dtype != plan::BF16)
    return stepError(s, absl::StrCat("quantize_block needs f32, f16 or bf16, got ",
                                     dtypeName(in.dtype)));
  return absl::OkStatus();
}

/// qwZ's all-gather: each rank's slice packed, the packed slices gathered
/// as bytes, every one unpacked into the result.
absl::StatusOr<PreparedStep> prepareQuantizedAllGather(const plan::Step &s, const TensorView in,
                                                       const TensorView out, Comm &g,
                                                       std::vector<std::vector<uint8_t>> &scratch,
                                                       int64_t block, int64_t outer) {
  DS_RETURN_IF_ERROR(checkQuantizable(s, in, block, outer));
  const int64_t numel = in.numel, n = g.size();
  const uint64_t part = packedBytes(numel, block);
  scratch.emplace_back(part);
  uint8_t *send = scratch.back().data();
  scratch.emplace_back(part * static_cast<uint64_t>(n));
  uint8_t *recv = scratch.back().data();
  scratch.emplace_back(static_cast<size_t>(numel) * sizeof(float));
  auto *values = reinterpret_cast<float *>(scratch.back().data());
  return PreparedStep([=, &g]() -> absl::Status {
    packInt8Blocks(in.dtype, in.data, numel, block, send);
    DS_RETURN_IF_ERROR(g.allGather(send, recv, static_cast<int64_t>(part), plan::U8));
    for (int64_t r = 0; r < n; ++r) {
      unpackInt8Blocks(recv + r * part, numel, block, values, /*add=*/false);
      for (int64_t i = 0; i < numel; ++i) storeFloat(out.dtype, out.data, r * numel + i, values[i]);
    }
    return absl::OkStatus();
  });
}

/// qgZ's reduce-scatter: each rank packs the block every other rank owns,
/// one all-to-all of the packed blocks, and each rank sums the blocks it
/// received in f32 (in rank order).
absl::StatusOr<PreparedStep> prepareQuantizedReduceScatter(
    const plan::Step &s, const TensorView in, const TensorView out, Comm &g,
    std::vector<std::vector<uint8_t>> &scratch, int64_t block, int64_t outer, ReduceOp op) {
  DS_RETURN_IF_ERROR(checkQuantizable(s, in, block, outer));
  if (op != ReduceOp::Sum) return stepError(s, "quantize_block reduces by sum only");
  const int64_t chunk = out.numel, n = g.size();
  const uint64_t part = packedBytes(chunk, block);
  scratch.emplace_back(part * static_cast<uint64_t>(n));
  uint8_t *send = scratch.back().data();
  scratch.emplace_back(part * static_cast<uint64_t>(n));
  uint8_t *recv = scratch.back().data();
  scratch.emplace_back(static_cast<size_t>(chunk) * sizeof(float));
  auto *sum = reinterpret_cast<float *>(scratch.back().data());
  const size_t es = dtypeSize(in.dtype);
  return PreparedStep([=, &g]() -> absl::Status {
    for (int64_t d = 0; d < n; ++d)
      packInt8Blocks(in.dtype, static_cast<const uint8_t *>(in.data) + d * chunk * es, chunk, block,
                     send + d * part);
    DS_RETURN_IF_ERROR(g.allToAll(send, recv, static_cast<int64_t>(part), plan::U8));
    for (int64_t r = 0; r < n; ++r) unpackInt8Blocks(recv + r * part, chunk, block, sum, r > 0);
    for (int64_t i = 0; i < chunk; ++i) storeFloat(out.dtype, out.data, i, sum[i]);
    return absl::OkStatus();
  });
}

} // namespace

bool isCollective(const std::string &k) {
  return k == "all_reduce" || k == "all_gather" || k == "reduce_scatter" || k == "broadcast" ||
         k == "all_to_all" || k == "shard_slice" || k == "compressed_all_reduce";
}

absl::StatusOr<PreparedStep> prepareCollective(const plan::Step &s,
                                               const std::vector<TensorView> &ins,
                                               const std::vector<TensorView> &outs, Comm &g,
                                               std::vector<std::vector<uint8_t>> &scratch) {
  if (s.kernel() == "compressed_all_reduce")
    return prepareCompressedAllReduce(s, ins, outs, g, scratch);
  if (ins.size() != 1 || outs.size() != 1) return stepError(s, "takes one input and one output");
  const TensorView in = ins[0], out = outs[0];
  if (in.dtype != out.dtype) return stepError(s, "input and output differ in element type");
  const int64_t n = g.size();
  const std::string &k = s.kernel();
  const uint64_t es = dtypeSize(in.dtype);
  // The dimension a gather/scatter/slice works on, and the byte geometry
  // around it: [outer, dim, inner].
  auto geometry = [&](const TensorView &big, const TensorView &small, int64_t d,
                      int64_t &outer, int64_t &blk) -> absl::Status {
    if (d < 0 || d >= static_cast<int64_t>(big.shape.size()) || big.shape.size() != small.shape.size())
      return stepError(s, absl::StrCat("dim ", d, " is out of range"));
    for (size_t i = 0; i < big.shape.size(); ++i) {
      int64_t want = static_cast<int64_t>(i) == d ? small.shape[i] * n : small.shape[i];
      if (big.shape[i] != want)
        return stepError(s, absl::StrCat("shapes [", shapeToString(small.shape), "] and [",
                                         shapeToString(big.shape), "] do not differ by the ", n,
                                         " ranks of the group on dim ", d));
    }
    // A dimension with an outer factor o is [o, extent / o]; the blocks are
    // of the second factor, so o joins the outer count.
    int64_t o = attrInt(s, "outer", 1);
    if (o < 1 || small.shape[d] % o)
      return stepError(s, absl::StrCat("outer ", o, " does not divide dim ", d));
    outer = product(small.shape, 0, d) * o;
    blk = small.numel / std::max<int64_t>(outer, 1) * es;
    return absl::OkStatus();
  };

  if (k == "all_reduce" || k == "broadcast") {
    if (in.shape != out.shape) return stepError(s, "input and output shapes differ");
    int64_t root = attrInt(s, "root", 0);
    ReduceOp op = ReduceOp::Sum;
    if (k == "all_reduce") {
      DS_ASSIGN_OR_RETURN(op, reduction(s));
    }
    bool isReduce = k == "all_reduce";
    return PreparedStep([=, &g]() -> absl::Status {
      if (in.data != out.data) std::memcpy(out.data, in.data, out.bytes());
      return isReduce ? g.allReduce(out.data, out.numel, out.dtype, op)
                      : g.broadcast(out.data, out.numel, out.dtype, static_cast<int>(root));
    });
  }
  if (k == "all_gather") {
    int64_t outer = 0, blk = 0;
    DS_RETURN_IF_ERROR(geometry(out, in, attrInt(s, "dim", 0), outer, blk));
    if (const int64_t block = attrInt(s, "quantize_block", 0); block != 0)
      return prepareQuantizedAllGather(s, in, out, g, scratch, block, outer);
    if (outer == 1)
      return PreparedStep([=, &g] { return g.allGather(in.data, out.data, in.numel, in.dtype); });
    scratch.emplace_back(out.bytes());
    uint8_t *tmp = scratch.back().data();
    return PreparedStep([=, &g]() -> absl::Status {
      DS_RETURN_IF_ERROR(g.allGather(in.data, tmp, in.numel, in.dtype));
      moveBlocks(tmp, static_cast<uint8_t *>(out.data), outer, n, blk, false);
      return absl::OkStatus();
    });
  }
  if (k == "reduce_scatter" || k == "shard_slice") {
    int64_t outer = 0, blk = 0;
    DS_RETURN_IF_ERROR(geometry(in, out, attrInt(s, "dim", 0), outer, blk));
    if (k == "shard_slice") {
      int64_t r = g.rank();
      return PreparedStep([=]() -> absl::Status {
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<uint8_t *>(out.data) + o * blk,
                      static_cast<const uint8_t *>(in.data) + (o * n + r) * blk, blk);
        return absl::OkStatus();
      });
    }
    DS_ASSIGN_OR_RETURN(ReduceOp op, reduction(s));
    if (const int64_t block = attrInt(s, "quantize_block", 0); block != 0)
      return prepareQuantizedReduceScatter(s, in, out, g, scratch, block, outer, op);
    if (outer == 1)
      return PreparedStep(
          [=, &g] { return g.reduceScatter(in.data, out.data, out.numel, out.dtype, op); });
    scratch.emplace_back(in.bytes());
    uint8_t *tmp = scratch.back().data();
    return PreparedStep([=, &g]() -> absl::Status {
      moveBlocks(static_cast<const uint8_t *>(in.data), tmp, outer, n, blk, true);
      return g.reduceScatter(tmp, out.data, out.numel, out.dtype, op);
    });
  }
  if (k == "all_to_all") {
    int64_t sd = attrInt(s, "split_dim", 0), cd = attrInt(s, "concat_dim", 0);
    int64_t rank = in.shape.size();
    if (sd < 0 || sd >= rank || cd < 0 || cd >= rank || out.shape.size() != in.shape.size())
      return stepError(s, "split_dim and concat_dim must be dims of the input");
    // The piece sent to each rank: the input with its split dim divided.
    TensorView piece = in;
    if (in.shape[sd] % n) return stepError(s, "split_dim does not divide by the group size");
    piece.shape[sd] /= n;
    piece.numel /= n;
    std::vector<int64_t> want = piece.shape;
    want[cd] *= n;
    if (out.shape != want)
      return stepError(s, absl::StrCat("output must be [", shapeToString(want), "]"));
    int64_t sOuter = product(in.shape, 0, sd), sBlk = piece.numel / std::max<int64_t>(sOuter, 1) * es;
    int64_t cOuter = product(piece.shape, 0, cd), cBlk = piece.numel / std::max<int64_t>(cOuter, 1) * es;
    scratch.emplace_back(in.bytes());
    uint8_t *sendBuf = scratch.back().data();
    scratch.emplace_back(in.bytes());
    uint8_t *recvBuf = scratch.back().data();
    return PreparedStep([=, &g]() -> absl::Status {
      moveBlocks(static_cast<const uint8_t *>(in.data), sendBuf, sOuter, n, sBlk, true);
      DS_RETURN_IF_ERROR(g.allToAll(sendBuf, recvBuf, piece.numel, in.dtype));
      moveBlocks(recvBuf, static_cast<uint8_t *>(out.data), cOuter, n, cBlk, false);
      return absl::OkStatus();
    });
  }
  return stepError(s, "is not a collective");
}

} // namespace ds::rt
