// fused_elementwise: a register program of element functions (the body of
// ds.fused_elementwise, see FusedElementwiseOp::describeKernelStep) run
// over tiles of the result. A tile of every live value fits in L1/L2, so a
// chain of N ops reads its inputs and writes its result once instead of
// making N passes over memory. Values are f32 in the registers (i1 as 0/1);
// each function is the functor the unfused kernel applies, in f32, so the
// fused result equals the unfused one.
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/cpu/KernelFamilies.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/kernels/ElementMath.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

/// Elements per tile: 2 KiB per register, so a dozen live registers stay in L1.
constexpr int64_t kTile = 512;

using Unary = void (*)(const float *, float *, int64_t);
using Binary = void (*)(const float *, const float *, float *, int64_t);
/// A unary function with parameters (fake_quantize's scale and zero point).
using ParamUnary = void (*)(const float *, float *, int64_t, const float *);

template <class Op> void unary(const float *a, float *o, int64_t n) {
  Op op;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(op(a[i]));
}
template <class Op> void binary(const float *a, const float *b, float *o, int64_t n) {
  Op op;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(op(a[i], b[i]));
}
// Comparisons and logic give i1 registers holding 0/1, written as a
// choice of two floats: the comparison functors return a byte, and GCC
// leaves a byte-to-float conversion scalar (HardSwish's two comparisons
// were most of its time).
template <class Op> void compare(const float *a, const float *b, float *o, int64_t n) {
  Op op;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]) ? 1.0f : 0.0f;
}
template <class Op> void test(const float *a, float *o, int64_t n) {
  Op op;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = op(a[i]) ? 1.0f : 0.0f;
}
template <class Op> void logical(const float *a, const float *b, float *o, int64_t n) {
  Op op;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = op(a[i] != 0.0f, b[i] != 0.0f) ? 1.0f : 0.0f;
}
void logicalNot(const float *a, float *o, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] == 0.0f ? 1.0f : 0.0f;
}
void toBool(const float *a, float *o, int64_t n) {
  // Any non-zero value (NaN included) is true, as the cast kernel converts.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] != 0.0f ? 1.0f : 0.0f;
}
void copy(const float *a, float *o, int64_t n) {
  if (a != o) std::memmove(o, a, n * sizeof(float));
}
/// x * sigmoid(x) (SiLU) in one loop: the program's sigmoid-then-multiply
/// pair, with the same arithmetic, without a pass over the tile between.
void silu(const float *a, float *o, int64_t n) {
  math::Sigmoid sig;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * sig(a[i]);
}
void select(const float *c, const float *a, const float *b, float *o, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = c[i] != 0 ? a[i] : b[i];
}

struct ElementFn {
  int arity = 0;
  Unary unary = nullptr;
  Binary binary = nullptr; // arity 3 is `where`
  ParamUnary paramUnary = nullptr;
};

/// QuantizeLinear to uint8 and back: params = {scale, zero point}.
void fakeQuantize(const float *a, float *o, int64_t n, const float *params) {
  roundToUint8(a, n, params[0], params[1], nullptr, o);
}

const std::map<std::string, ElementFn> &elementFns() {
  static const std::map<std::string, ElementFn> fns = [] {
    std::map<std::string, ElementFn> m;
    auto u = [&](const char *n, Unary f) { m[n] = {1, f, nullptr}; };
    auto b = [&](const char *n, Binary f) { m[n] = {2, nullptr, f}; };
    u("sqrt", unary<math::Sqrt>);
    u("reciprocal", unary<math::Reciprocal>);
    u("exp", unary<math::Exp>);
    u("log", unary<math::Log>);
    u("erf", unary<math::Erf>);
    u("tanh", unary<math::Tanh>);
    u("sigmoid", unary<math::Sigmoid>);
    u("relu", unary<math::Relu>);
    u("neg", unary<math::Neg>);
    u("abs", unary<math::Abs>);
    u("sin", unary<math::Sin>);
    u("cos", unary<math::Cos>);
    u("tan", unary<math::Tan>);
    u("asin", unary<math::Asin>);
    u("acos", unary<math::Acos>);
    u("atan", unary<math::Atan>);
    u("sinh", unary<math::Sinh>);
    u("cosh", unary<math::Cosh>);
    u("asinh", unary<math::Asinh>);
    u("acosh", unary<math::Acosh>);
    u("atanh", unary<math::Atanh>);
    u("floor", unary<math::Floor>);
    u("ceil", unary<math::Ceil>);
    u("round", unary<math::Round>);
    u("sign", unary<math::Sign>);
    u("softplus", unary<math::Softplus>);
    u("gelu", unary<math::Gelu>);
    u("gelu_tanh", unary<math::GeluTanh>);
    u("is_nan", test<math::IsNan>);
    u("is_inf", test<math::IsInf>);
    u("not", logicalNot);
    u("cast_bool", toBool);
    u("cast_f32", copy);
    b("add", binary<math::Add>);
    b("sub", binary<math::Sub>);
    b("mul", binary<math::Mul>);
    b("div", binary<math::Div>);
    b("pow", binary<math::Pow>);
    b("min", binary<math::Min>);
    b("max", binary<math::Max>);
    b("equal", compare<math::Equal>);
    b("less", compare<math::Less>);
    b("greater", compare<math::Greater>);
    b("less_equal", compare<math::LessEqual>);
    b("greater_equal", compare<math::GreaterEqual>);
    b("and", logical<math::And>);
    b("or", logical<math::Or>);
    b("xor", logical<math::Xor>);
    m["where"] = {3, nullptr, nullptr};
    return m;
  }();
  return fns;
}

struct Instr {
  ElementFn fn;
  int src[3] = {0, 0, 0};
  int dst = 0; // register
  float params[2] = {0, 0};
};

/// Where a register's tile lives during one tile of work.
struct Program {
  int numInputs = 0;
  std::vector<Instr> code;
  int result = 0;
  std::vector<int> slot;   // per register: scratch slot, or -1 (reads input memory directly)
  int numSlots = 0;
};

/// Gives each register a scratch slot, reusing a slot once its value is
/// dead. Inputs read in place (contiguous f32) need none; the result
/// instruction writes to the output when it is f32.
void allocateSlots(Program &p, const std::vector<bool> &inputInPlace, bool resultInPlace) {
  const int numRegs = p.numInputs + static_cast<int>(p.code.size());
  std::vector<int> lastUse(numRegs, -1);
  for (size_t k = 0; k < p.code.size(); ++k)
    for (int a = 0; a < p.code[k].fn.arity; ++a) lastUse[p.code[k].src[a]] = static_cast<int>(k);
  lastUse[p.result] = static_cast<int>(p.code.size()); // live to the end
  p.slot.assign(numRegs, -1);
  std::vector<int> freeSlots;
  auto take = [&]() {
    if (!freeSlots.empty()) {
      int s = freeSlots.back();
      freeSlots.pop_back();
      return s;
    }
    return p.numSlots++;
  };
  for (int r = 0; r < p.numInputs; ++r)
    if (!inputInPlace[r]) p.slot[r] = take(); // inputs stay for the whole tile
  for (size_t k = 0; k < p.code.size(); ++k) {
    const Instr &in = p.code[k];
    for (int a = 0; a < in.fn.arity; ++a) {
      int r = in.src[a];
      bool repeated = false;
      for (int b = 0; b < a; ++b) repeated |= in.src[b] == r;
      if (r >= p.numInputs && lastUse[r] == static_cast<int>(k) && !repeated && p.slot[r] >= 0)
        freeSlots.push_back(p.slot[r]);
    }
    if (!(in.dst == p.result && resultInPlace)) p.slot[in.dst] = take();
  }
}

/// Runs the program's instructions over one tile of `len` elements: `reg`
/// holds the inputs' tiles and receives each result's; the result lands in
/// `out` when it may (resultInPlace), else in a scratch slot.
void runProgram(const Program &prog, std::vector<const float *> &reg, float *scratch, float *out,
                int64_t len, bool resultInPlace) {
  for (const Instr &in : prog.code) {
    float *dst = (resultInPlace && in.dst == prog.result)
                     ? out
                     : scratch + static_cast<size_t>(prog.slot[in.dst]) * kTile;
    if (in.fn.paramUnary) in.fn.paramUnary(reg[in.src[0]], dst, len, in.params);
    else if (in.fn.arity == 1) in.fn.unary(reg[in.src[0]], dst, len);
    else if (in.fn.arity == 2) in.fn.binary(reg[in.src[0]], reg[in.src[1]], dst, len);
    else select(reg[in.src[0]], reg[in.src[1]], reg[in.src[2]], dst, len);
    reg[in.dst] = dst;
  }
}

void nothing(const float *, float *, int64_t) {}

/// s = sigmoid(x) read only by m = x * s (either order) becomes m =
/// silu(x), and the sigmoid computes nothing.
void fuseSilu(Program &p) {
  const int numRegs = p.numInputs + static_cast<int>(p.code.size());
  std::vector<int> uses(numRegs, 0);
  for (const Instr &in : p.code)
    for (int a = 0; a < in.fn.arity; ++a) ++uses[in.src[a]];
  if (p.result < numRegs) ++uses[p.result];
  const Unary sigmoidFn = elementFns().at("sigmoid").unary;
  const Binary mulFn = elementFns().at("mul").binary;
  std::vector<bool> dead(p.code.size(), false);
  for (size_t k = 0; k < p.code.size(); ++k) {
    const Instr &sg = p.code[k];
    if (sg.fn.arity != 1 || sg.fn.unary != sigmoidFn || uses[sg.dst] != 1) continue;
    for (size_t j = k + 1; j < p.code.size(); ++j) {
      Instr &m = p.code[j];
      if (m.fn.arity != 2 || m.fn.binary != mulFn) continue;
      const int x = sg.src[0];
      if (!((m.src[0] == x && m.src[1] == sg.dst) || (m.src[1] == x && m.src[0] == sg.dst))) continue;
      m.fn = {1, silu, nullptr};
      m.src[0] = x;
      dead[k] = true;
      break;
    }
  }
  // Registers are numbered by position: a dropped sigmoid stays in place,
  // as an instruction that computes nothing (nothing reads its register).
  for (size_t k = 0; k < p.code.size(); ++k)
    if (dead[k]) p.code[k].fn = {1, nothing, nullptr};
}

absl::StatusOr<Program> parseProgram(const KernelContext &c) {
  Program p;
  p.numInputs = static_cast<int>(c.in.size());
  DS_ASSIGN_OR_RETURN(std::string ops, c.stringAttr("ops"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> args, c.intsAttr("args"));
  DS_ASSIGN_OR_RETURN(int64_t result, c.intAttr("result"));
  size_t next = 0;
  for (absl::string_view name : absl::StrSplit(ops, ',', absl::SkipEmpty())) {
    Instr in;
    if (absl::ConsumePrefix(&name, "fake_quantize:")) {
      // fake_quantize:<scale>:<zero point>
      std::vector<absl::string_view> ps = absl::StrSplit(name, ':');
      float scale = 0;
      int zero = -1;
      if (ps.size() != 2 || !absl::SimpleAtof(ps[0], &scale) || !absl::SimpleAtoi(ps[1], &zero) ||
          !(scale > 0) || !std::isfinite(scale) || zero < 0 || zero > 255)
        return c.error(absl::StrCat("op #", p.code.size(), " 'fake_quantize:", name,
                                    "' needs a positive scale and a zero point in [0, 255]"));
      in.fn = {1, nullptr, nullptr, fakeQuantize};
      in.params[0] = scale;
      in.params[1] = static_cast<float>(zero);
    } else {
      auto it = elementFns().find(std::string(name));
      if (it == elementFns().end())
        return c.error(absl::StrCat("op #", p.code.size(), " '", name,
                                    "' has no fused element function"));
      in.fn = it->second;
    }
    in.dst = p.numInputs + static_cast<int>(p.code.size());
    for (int a = 0; a < in.fn.arity; ++a, ++next) {
      if (next >= args.size())
        return c.error(absl::StrCat("'args' ends before op #", p.code.size(), " '", name,
                                    "' gets its ", in.fn.arity, " operands"));
      if (args[next] < 0 || args[next] >= in.dst)
        return c.error(absl::StrCat("op #", p.code.size(), " '", name, "' reads register ",
                                    args[next], ", which is not defined before it"));
      in.src[a] = static_cast<int>(args[next]);
    }
    p.code.push_back(in);
  }
  if (next != args.size())
    return c.error(absl::StrCat("'args' has ", args.size(), " registers, the ops read ", next));
  if (result < 0 || result >= p.numInputs + static_cast<int64_t>(p.code.size()))
    return c.error(absl::StrCat("'result' names register ", result, ", which does not exist"));
  p.result = static_cast<int>(result);
  fuseSilu(p);
  return p;
}

/// Short rows (a per-channel scale over channels-last activations: rows
/// of C = 64 elements) would make every op of the program a call over a
/// few dozen elements. When each f32 input is either the whole result's
/// shape, one row repeated (a [C] vector) or a scalar, tiles run over the
/// flattened result instead, across row boundaries: a repeated row is read
/// from a buffer holding it end to end, at the tile's offset into it.
PreparedStep prepareFlat(const Program &prog, const BroadcastIndexer &ix, const KernelContext &c,
                         const TensorView &out) {
  const int64_t inner = ix.inner(), total = out.numel;
  if (out.dtype != plan::F32 || inner >= kTile || total < 2 * kTile) return PreparedStep();
  const int n = prog.numInputs;
  // Per input: its base (whole), or a periodic buffer (repeated row,
  // scalar) refilled at every run from `rowOf` (inputs change per run).
  auto periodic = std::make_shared<std::vector<std::vector<float>>>(n);
  std::vector<const float *> whole(n, nullptr), rowOf(n, nullptr);
  std::vector<int64_t> rowStep(n, 0);
  for (int i = 0; i < n; ++i) {
    if (c.in[i].dtype != plan::F32) return PreparedStep();
    const std::vector<int64_t> &st = ix.strides[i];
    bool outerZero = true, outerWhole = true;
    int64_t expect = inner;
    for (size_t d = st.size() - 1; d-- > 0;) {
      outerZero &= st[d] == 0;
      outerWhole &= st[d] == expect;
      expect *= ix.dims[d];
    }
    const float *src = c.in[i].as<float>();
    if (st.back() == 1 && outerWhole) {
      whole[i] = src;
    } else if (outerZero && (st.back() == 1 || st.back() == 0)) {
      // The row (or the scalar) repeated over kTile + inner elements.
      (*periodic)[i].resize(static_cast<size_t>(kTile + inner));
      rowOf[i] = src;
      rowStep[i] = st.back();
    } else {
      return PreparedStep();
    }
  }
  const bool resultInPlace = prog.result >= n;
  float *po = out.as<float>();
  return PreparedStep([prog, periodic, whole, rowOf, rowStep, po, total, inner,
                       resultInPlace]() -> absl::Status {
    const int n = prog.numInputs;
    for (int i = 0; i < n; ++i)
      if (rowOf[i]) {
        std::vector<float> &buf = (*periodic)[i];
        for (size_t e = 0; e < buf.size(); ++e) buf[e] = rowOf[i][rowStep[i] ? e % inner : 0];
      }
    const int64_t tiles = (total + kTile - 1) / kTile;
    parallelFor(tiles, std::max<int64_t>(1, 16384 / kTile), [&](int64_t lo, int64_t hi) {
      thread_local std::vector<float> scratch;
      scratch.resize(static_cast<size_t>(std::max(prog.numSlots, 1)) * kTile);
      std::vector<const float *> reg(n + prog.code.size());
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t from = t * kTile, len = std::min(kTile, total - from);
        for (int i = 0; i < n; ++i)
          reg[i] = whole[i] ? whole[i] + from : (*periodic)[i].data() + from % inner;
        float *outTile = po + from;
        runProgram(prog, reg, scratch.data(), outTile, len, resultInPlace);
        if (reg[prog.result] != outTile) std::memcpy(outTile, reg[prog.result], len * sizeof(float));
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareFused(const KernelContext &c) {
  if (c.out.size() != 1) return c.error(absl::StrCat("produces 1 outputs, got ", c.out.size()));
  for (size_t i = 0; i < c.in.size(); ++i)
    if (c.in[i].dtype != plan::F32 && c.in[i].dtype != plan::BOOL)
      return c.error(absl::StrCat("input #", i, " is ", dtypeName(c.in[i].dtype),
                                  "; fused element functions take f32 and bool"));
  const TensorView out = c.out[0];
  if (out.dtype != plan::F32 && out.dtype != plan::BOOL)
    return c.error("result must be f32 or bool, got " + dtypeName(out.dtype));
  DS_ASSIGN_OR_RETURN(Program prog, parseProgram(c));
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorView &t : c.in) shapes.push_back(t.shape);
  auto ixOr = makeBroadcastIndexer(out.shape, shapes);
  if (!ixOr.ok()) return c.error(std::string(ixOr.status().message()));
  BroadcastIndexer ix = *std::move(ixOr);

  // Contiguous f32 inputs are read where they are; splats and broadcast
  // rows are expanded into a slot; bools are widened to 0/1.
  const int n = prog.numInputs;
  std::vector<bool> inPlace(n);
  for (int i = 0; i < n; ++i)
    inPlace[i] = c.in[i].dtype == plan::F32 && ix.strides[i].back() == 1;
  const bool resultInPlace = out.dtype == plan::F32 && prog.result >= n;
  allocateSlots(prog, inPlace, resultInPlace);

  std::vector<const void *> bases;
  std::vector<bool> isBool;
  for (const TensorView &t : c.in) {
    bases.push_back(t.data);
    isBool.push_back(t.dtype == plan::BOOL);
  }
  if (PreparedStep flat = prepareFlat(prog, ix, c, out)) return flat;
  return PreparedStep([prog = std::move(prog), ix = std::move(ix), bases, isBool,
                       po = out.data, outBool = out.dtype == plan::BOOL,
                       resultInPlace]() -> absl::Status {
    const int64_t inner = ix.inner(), rows = ix.rows();
    const int64_t tilesPerRow = (inner + kTile - 1) / kTile;
    const int n = prog.numInputs;
    parallelFor(rows * tilesPerRow, std::max<int64_t>(1, 16384 / kTile), [&](int64_t lo,
                                                                              int64_t hi) {
      thread_local std::vector<float> scratch;
      scratch.resize(static_cast<size_t>(std::max(prog.numSlots, 1)) * kTile);
      std::vector<int64_t> off(n);
      std::vector<const float *> reg(n + prog.code.size());
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t row = t / tilesPerRow, from = (t % tilesPerRow) * kTile;
        const int64_t len = std::min(kTile, inner - from);
        if (n > 0) ix.rowOffsets(row, off.data());
        for (int i = 0; i < n; ++i) {
          const int64_t s = ix.strides[i].back();
          if (prog.slot[i] < 0) {
            reg[i] = static_cast<const float *>(bases[i]) + off[i] + from;
            continue;
          }
          float *dst = scratch.data() + static_cast<size_t>(prog.slot[i]) * kTile;
          if (isBool[i]) {
            const uint8_t *src = static_cast<const uint8_t *>(bases[i]) + off[i];
            for (int64_t e = 0; e < len; ++e) dst[e] = src[(from + e) * s] != 0;
          } else {
            const float *src = static_cast<const float *>(bases[i]) + off[i];
            if (s == 0) std::fill(dst, dst + len, src[0]);
            else
              for (int64_t e = 0; e < len; ++e) dst[e] = src[(from + e) * s];
          }
          reg[i] = dst;
        }
        float *outRow = static_cast<float *>(po) + row * inner + from;
        runProgram(prog, reg, scratch.data(), outRow, len, resultInPlace);
        const float *res = reg[prog.result];
        if (outBool) {
          uint8_t *o = static_cast<uint8_t *>(po) + row * inner + from;
          for (int64_t e = 0; e < len; ++e) o[e] = res[e] != 0;
        } else if (res != outRow) {
          std::memcpy(outRow, res, len * sizeof(float));
        }
      }
    });
    return absl::OkStatus();
  });
}

} // namespace

void registerFusedElementwiseKernel(KernelRegistry &r) { r.add("fused_elementwise", prepareFused); }

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"
