// fused_elementwise against the unfused kernels: the same program run one
// kernel at a time on this backend must give the same bits, for every
// element function, across tile boundaries, with broadcast, scalar and
// bool inputs and bool results; malformed programs are errors naming what
// is wrong.
#include <cmath>
#include <numeric>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

/// A fused program in the plan's encoding (FusedElementwiseOp::describeKernelStep).
struct Program {
  std::vector<std::string> ops;
  std::vector<std::vector<int64_t>> args; // per op, its operand registers
  int64_t result = -1;                    // default: the last op

  Step step() const {
    std::string names;
    std::vector<int64_t> flat;
    for (size_t k = 0; k < ops.size(); ++k) {
      names += (k ? "," : "") + ops[k];
      flat.insert(flat.end(), args[k].begin(), args[k].end());
    }
    return Step("fused_elementwise").s("ops", names).ints("args", flat).i("result", resultReg());
  }
  int64_t resultReg() const { return result; }
};

bool isPredicate(const std::string &op) {
  for (const char *p : {"equal", "less", "greater", "less_equal", "greater_equal", "and", "or",
                        "xor", "not", "is_nan", "is_inf", "cast_bool"})
    if (op == p) return true;
  return false;
}

/// The unfused kernel step for one element function.
Step unfusedStep(const std::string &op) {
  if (op == "gelu_tanh") return Step("gelu").s("approximate", "tanh");
  if (op == "gelu") return Step("gelu").s("approximate", "none");
  if (op == "cast_bool" || op == "cast_f32") return Step("cast");
  return Step(op);
}

/// Runs the program one unfused kernel at a time.
HostTensor runUnfused(BackendCts &t, const Program &p, const std::vector<HostTensor> &inputs) {
  std::vector<HostTensor> regs = inputs;
  for (size_t k = 0; k < p.ops.size(); ++k) {
    std::vector<HostTensor> ins;
    Shape shape;
    for (int64_t r : p.args[k]) {
      ins.push_back(regs[r]);
      shape = broadcastShape(shape, regs[r].shape);
    }
    DType dt = isPredicate(p.ops[k]) ? plan::BOOL : plan::F32;
    regs.push_back(t.run1(unfusedStep(p.ops[k]), ins, dt, shape));
  }
  return regs[p.resultReg()];
}

void expectSameAsUnfused(BackendCts &t, Program p, const std::vector<HostTensor> &inputs,
                         const std::string &what) {
  if (p.result < 0) p.result = static_cast<int64_t>(inputs.size() + p.ops.size() - 1);
  HostTensor want = runUnfused(t, p, inputs);
  HostTensor got = t.run1(p.step(), inputs, want.dtype, want.shape);
  expectEqualValues(got.values(), want.values(), what);
}

std::vector<double> withSpecials(std::vector<double> v) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  double specials[] = {0.0, -0.0, nan, inf, -inf, 1.0, -1.0, 1e-40};
  for (size_t i = 0; i < v.size(); i += 97) v[i] = specials[(i / 97) % 8];
  return v;
}

} // namespace

CTS_TEST(FusedElementwise, "fused_elementwise", "add", "sub", "mul", "div", "pow", "min", "max",
         "equal", "less", "greater", "less_equal", "greater_equal", "and", "or", "xor", "not",
         "where", "cast", "is_nan", "is_inf", "gelu", "sqrt", "reciprocal", "exp", "log", "erf",
         "tanh", "sigmoid", "relu", "neg", "abs", "sin", "cos", "tan", "asin", "acos", "atan",
         "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round", "sign",
         "softplus") {
  // Rows longer than a tile (512) and not a multiple of it, two rows.
  const Shape big{2, 1100};
  HostTensor x = f32(big, withSpecials(sample(2200, -3, 3, 21)));
  HostTensor y = f32(big, sample(2200, -2, 2, 22));
  HostTensor half = f32({}, {0.5}), a = f32({}, {0.044715}), b = f32({}, {0.7978845608}),
             one = f32({}, {1.0});

  // GPT-2's tanh GELU as PyTorch 2 exports it.
  expectSameAsUnfused(*this,
                      {{"mul", "mul", "mul", "mul", "add", "mul", "tanh", "add", "mul"},
                       {{0, 1}, {0, 0}, {6, 0}, {7, 2}, {0, 8}, {9, 3}, {10}, {11, 4}, {5, 12}}},
                      {x, half, a, b, one}, "gelu tanh chain");

  // Every element function once: unary f(x) then add y; binary f(x, y)
  // then mul by x; predicates select between x and y.
  for (const char *u : {"sqrt", "reciprocal", "exp", "log", "erf", "tanh", "sigmoid", "relu",
                        "neg", "abs", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                        "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round", "sign",
                        "softplus", "gelu", "gelu_tanh"})
    expectSameAsUnfused(*this, {{u, "add"}, {{0}, {2, 1}}}, {x, y}, std::string("unary ") + u);
  for (const char *bn : {"add", "sub", "mul", "div", "pow", "min", "max"})
    expectSameAsUnfused(*this, {{bn, "mul"}, {{0, 1}, {2, 0}}}, {x, y}, std::string("binary ") + bn);
  for (const char *cmp : {"equal", "less", "greater", "less_equal", "greater_equal"})
    expectSameAsUnfused(*this, {{cmp, "where"}, {{0, 1}, {2, 0, 1}}}, {x, y},
                        std::string("compare ") + cmp);
  for (const char *pred : {"is_nan", "is_inf", "cast_bool"})
    expectSameAsUnfused(*this, {{pred, "where"}, {{0}, {2, 1, 0}}}, {x, y},
                        std::string("predicate ") + pred);
  HostTensor zero = f32({}, {0});
  for (const char *logic : {"and", "or", "xor"})
    expectSameAsUnfused(*this,
                        {{"less", "greater", logic, "not", "cast_f32"},
                         {{0, 2}, {1, 2}, {3, 4}, {5}, {6}}},
                        {x, y, zero}, std::string("logic ") + logic);

  // Broadcasting: a column [2,1], a bool row [1100] and a scalar; the
  // result a bool (a mask), and a result read by a later op.
  std::vector<double> rowMask(1100);
  for (size_t i = 0; i < rowMask.size(); ++i) rowMask[i] = (i * 7) % 3 == 0;
  HostTensor col = f32({2, 1}, {0.25, -4}), mask = boolean({1100}, rowMask);
  expectSameAsUnfused(*this, {{"mul", "neg", "where"}, {{0, 1}, {0}, {2, 3, 4}}},
                      {x, col, mask}, "broadcast column and bool row");
}

CTS_TEST(FusedElementwiseEdges, "fused_elementwise", "mul", "add", "less", "not", "where") {
  // "add" runs in the zero-size and rank-0 cases.
  HostTensor x = f32({3, 5}, sample(15, -1, 1, 31)), s = f32({}, {2});
  // A bool result; the result register read again by a later op; the
  // result an input register (a copy).
  expectSameAsUnfused(*this, {{"less", "not"}, {{0, 1}, {2}}}, {x, s}, "bool result");
  expectSameAsUnfused(*this, {{"mul", "less", "where"}, {{0, 1}, {2, 1}, {3, 0, 2}}, 2}, {x, s},
                      "result read later");
  HostTensor copy = run1(Program{{"mul"}, {{0, 1}}, 0}.step(), {x, s}, plan::F32, {3, 5});
  expectEqualValues(copy.values(), x.values(), "result is an input");
  // Zero-size and rank-0 results.
  EXPECT_TRUE(run1(Program{{"mul", "add"}, {{0, 1}, {2, 1}}, 3}.step(),
                   {f32({0, 4}, {}), s}, plan::F32, {0, 4})
                  .bytes.empty());
  expectSameAsUnfused(*this, {{"mul", "add"}, {{0, 1}, {2, 1}}}, {f32({}, {3}), s}, "rank 0");

  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3, 5})};
  expectError(run(Program{{"mul", "frobnicate"}, {{0, 1}, {2}}, 3}.step(), {x, s}, outs),
              "op #1 'frobnicate' has no fused element function");
  expectError(run(Program{{"mul", "add"}, {{0, 1}, {3, 1}}, 3}.step(), {x, s}, outs),
              "op #1 'add' reads register 3, which is not defined before it");
  expectError(run(Program{{"mul", "add"}, {{0, 1}, {2}}, 3}.step(), {x, s}, outs),
              "'args' ends before op #1 'add' gets its 2 operands");
  expectError(run(Program{{"neg"}, {{0, 1}}, 2}.step(), {x, s}, outs),
              "'args' has 2 registers, the ops read 1");
  expectError(run(Program{{"neg"}, {{0}}, 7}.step(), {x, s}, outs),
              "'result' names register 7, which does not exist");
  expectError(run(Program{{"neg"}, {{0}}, 2}.step(), {i64({3, 5}, std::vector<double>(15, 1)), s},
                  outs),
              "input #0 is i64");
  expectError(run(Program{{"neg"}, {{0}}, 2}.step(), {f32({4}, {1, 2, 3, 4}), s}, outs),
              "broadcast");
  outs = {HostTensor::result(plan::I32, {3, 5})};
  expectError(run(Program{{"neg"}, {{0}}, 2}.step(), {x, s}, outs),
              "result must be f32 or bool, got i32");
}
