// CPU kernels against straightforward reference loops, including the
// broadcast, stride and error paths the fast paths skip.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "runtime/cpu/KernelRegistry.h"

using namespace ds::rt;
namespace plan = ds::plan;
using namespace ds::rt::cpu;

namespace {

struct Tensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  static Tensor f32(std::vector<int64_t> shape, std::vector<float> v) {
    Tensor t{plan::F32, std::move(shape), {}};
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  }
  static Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
    Tensor t{plan::I64, std::move(shape), {}};
    t.bytes.resize(v.size() * 8);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  }
  static Tensor empty(DType d, std::vector<int64_t> shape) {
    Tensor t{d, std::move(shape), {}};
    int64_t n = 1;
    for (int64_t x : t.shape) n *= x;
    t.bytes.assign(std::max<int64_t>(1, n) * dtypeSize(d), 0);
    return t;
  }
  TensorView view() {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    return TensorView{dtype, shape, bytes.data(), n};
  }
  std::vector<float> floats() const {
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  std::vector<int64_t> ints() const {
    std::vector<int64_t> v(bytes.size() / 8);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

absl::Status run(const std::string &kernel, std::vector<Tensor *> ins, std::vector<Tensor *> outs,
                 std::function<void(plan::Step &)> attrs = nullptr) {
  plan::Step step;
  step.set_kernel(kernel);
  if (attrs) attrs(step);
  std::vector<TensorView> in, out;
  for (auto *t : ins) in.push_back(t->view());
  for (auto *t : outs) out.push_back(t->view());
  auto fn = cpuKernels().find(kernel);
  if (!fn) return absl::NotFoundError(kernel);
  KernelContext ctx{step, in, out};
  auto prepared = fn(ctx);
  if (!prepared.ok()) return prepared.status();
  return (*prepared)();
}

void ints(plan::Step &s, const char *name, std::vector<int64_t> v) {
  for (int64_t x : v) (*s.mutable_attrs())[name].mutable_ints()->add_values(x);
}

TEST(Broadcast, CollapsesContiguousDims) {
  auto ix = makeBroadcastIndexer({2, 3, 4}, {{2, 3, 4}, {4}});
  ASSERT_TRUE(ix.ok());
  EXPECT_EQ(ix->dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(ix->strides[0], (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(ix->strides[1], (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(makeBroadcastIndexer({2, 3}, {{4}}).ok());
}

TEST(Elementwise, AddBroadcastsBothWays) {
  auto a = Tensor::f32({3, 1}, {1, 2, 3});
  auto b = Tensor::f32({4}, {10, 20, 30, 40});
  auto o = Tensor::empty(plan::F32, {3, 4});
  ASSERT_TRUE(run("add", {&a, &b}, {&o}).ok());
  auto v = o.floats();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(v[i * 4 + j], (i + 1) + 10 * (j + 1));
}

TEST(Elementwise, RejectsWrongResultShape) {
  auto a = Tensor::f32({3}, {1, 2, 3});
  auto o = Tensor::empty(plan::F32, {4});
  auto st = run("mul", {&a, &a}, {&o});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("do not broadcast"), std::string::npos) << st.message();
}

TEST(Elementwise, IntegerDivisionByZeroIsAnError) {
  auto a = Tensor::i64({2}, {4, 5});
  auto b = Tensor::i64({2}, {2, 0});
  auto o = Tensor::empty(plan::I64, {2});
  auto st = run("div", {&a, &b}, {&o});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("division by zero"), std::string::npos);
  auto c = Tensor::i64({2}, {-7, 7});
  auto d = Tensor::i64({}, {2});
  ASSERT_TRUE(run("div", {&c, &d}, {&o}).ok());
  EXPECT_EQ(o.ints(), (std::vector<int64_t>{-3, 3})); // truncation
}

TEST(Elementwise, MaxPropagatesNaN) {
  auto a = Tensor::f32({2}, {NAN, 1});
  auto b = Tensor::f32({2}, {0, 2});
  auto o = Tensor::empty(plan::F32, {2});
  ASSERT_TRUE(run("max", {&a, &b}, {&o}).ok());
  EXPECT_TRUE(std::isnan(o.floats()[0]));
  EXPECT_EQ(o.floats()[1], 2);
}

TEST(Elementwise, GeluMatchesFormula) {
  auto x = Tensor::f32({3}, {-1.5f, 0.f, 2.f});
  auto o = Tensor::empty(plan::F32, {3});
  ASSERT_TRUE(run("gelu", {&x}, {&o}).ok());
  auto v = o.floats();
  for (int i = 0; i < 3; ++i) {
    double xi = x.floats()[i];
    EXPECT_NEAR(v[i], 0.5 * xi * (1 + std::erf(xi / std::sqrt(2.0))), 1e-6);
  }
}

TEST(Elementwise, CastSaturatesAndTruncates) {
  auto x = Tensor::f32({4}, {1.9f, -1.9f, 1e30f, NAN});
  auto o = Tensor::empty(plan::I64, {4});
  ASSERT_TRUE(run("cast", {&x}, {&o}).ok());
  auto v = o.ints();
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[2], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(v[3], 0);
}

TEST(Linalg, BatchedMatmulMatchesReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n;
  const int B = 3, M = 4, K = 5, N = 6;
  std::vector<float> av(B * M * K), bv(K * N);
  for (auto &x : av) x = n(rng);
  for (auto &x : bv) x = n(rng);
  auto a = Tensor::f32({B, M, K}, av);
  auto b = Tensor::f32({K, N}, bv);
  auto o = Tensor::empty(plan::F32, {B, M, N});
  ASSERT_TRUE(run("matmul", {&a, &b}, {&o}).ok());
  auto v = o.floats();
  for (int bb = 0; bb < B; ++bb)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int k = 0; k < K; ++k) s += av[(bb * M + i) * K + k] * bv[k * N + j];
        EXPECT_NEAR(v[(bb * M + i) * N + j], s, 1e-4);
      }
  // Broadcast batch on the right operand, vector on the left.
  auto bt = Tensor::f32({B, K, N}, std::vector<float>(B * K * N, 1.0f));
  auto vec = Tensor::f32({K}, std::vector<float>(K, 2.0f));
  auto o2 = Tensor::empty(plan::F32, {B, N});
  ASSERT_TRUE(run("matmul", {&vec, &bt}, {&o2}).ok());
  for (float x : o2.floats()) EXPECT_EQ(x, 2.0f * K);
  auto bad = Tensor::empty(plan::F32, {B, M, M});
  EXPECT_FALSE(run("matmul", {&a, &b}, {&bad}).ok());
}

TEST(Reductions, NonContiguousAxes) {
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  auto x = Tensor::f32({2, 3, 4}, v);
  auto o = Tensor::empty(plan::F32, {3});
  ASSERT_TRUE(run("reduce_mean", {&x}, {&o}, [](plan::Step &s) { ints(s, "axes", {0, 2}); }).ok());
  for (int j = 0; j < 3; ++j) {
    double s = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) s += v[(i * 3 + j) * 4 + k];
    EXPECT_NEAR(o.floats()[j], s / 8, 1e-5);
  }
  auto m = Tensor::empty(plan::F32, {2, 1, 4});
  ASSERT_TRUE(run("reduce_max", {&x}, {&m}, [](plan::Step &s) { ints(s, "axes", {1}); }).ok());
  EXPECT_EQ(m.floats()[0], v[8]);
}

TEST(Normalization, SoftmaxAndLayerNorm) {
  auto x = Tensor::f32({2, 3}, {1, 2, 3, -1, 0, 1000});
  auto o = Tensor::empty(plan::F32, {2, 3});
  ASSERT_TRUE(run("softmax", {&x}, {&o}, [](plan::Step &s) { (*s.mutable_attrs())["axis"].set_i(1); }).ok());
  auto v = o.floats();
  double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0);
  EXPECT_NEAR(v[0], e1 / (e1 + e2 + e3), 1e-6);
  EXPECT_NEAR(v[5], 1.0, 1e-6); // stable with a large logit
  auto g = Tensor::f32({3}, {1, 2, 3});
  auto b = Tensor::f32({3}, {0, 0, 1});
  auto y = Tensor::empty(plan::F32, {2, 3});
  ASSERT_TRUE(run("layer_norm", {&x, &g, &b}, {&y}, [](plan::Step &s) {
                (*s.mutable_attrs())["axis"].set_i(1);
                (*s.mutable_attrs())["epsilon"].set_f(1e-5);
              }).ok());
  double mean = 2, var = 2.0 / 3;
  EXPECT_NEAR(y.floats()[2], (3 - mean) / std::sqrt(var + 1e-5) * 3 + 1, 1e-4);
}

TEST(DataMovement, SliceWithNegativeStepsAndBounds) {
  auto x = Tensor::f32({5}, {0, 1, 2, 3, 4});
  auto o = Tensor::empty(plan::F32, {3});
  ASSERT_TRUE(run("slice", {&x}, {&o}, [](plan::Step &s) {
                ints(s, "starts", {4});
                ints(s, "steps", {-2});
              }).ok());
  EXPECT_EQ(o.floats(), (std::vector<float>{4, 2, 0}));
  auto st = run("slice", {&x}, {&o}, [](plan::Step &s) {
    ints(s, "starts", {3});
    ints(s, "steps", {1});
  });
  EXPECT_FALSE(st.ok()); // would read index 5
}

TEST(DataMovement, GatherChecksIndicesAtRunTime) {
  auto x = Tensor::f32({3, 2}, {0, 1, 2, 3, 4, 5});
  auto idx = Tensor::i64({2}, {-1, 0});
  auto o = Tensor::empty(plan::F32, {2, 2});
  ASSERT_TRUE(run("gather", {&x, &idx}, {&o}, [](plan::Step &s) { (*s.mutable_attrs())["axis"].set_i(0); }).ok());
  EXPECT_EQ(o.floats(), (std::vector<float>{4, 5, 0, 1}));
  auto bad = Tensor::i64({2}, {3, 0});
  auto st = run("gather", {&x, &bad}, {&o}, [](plan::Step &s) { (*s.mutable_attrs())["axis"].set_i(0); });
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
}

TEST(DataMovement, TransposeConcatSplitExpand) {
  auto x = Tensor::f32({2, 3}, {0, 1, 2, 3, 4, 5});
  auto t = Tensor::empty(plan::F32, {3, 2});
  ASSERT_TRUE(run("transpose", {&x}, {&t}, [](plan::Step &s) { ints(s, "perm", {1, 0}); }).ok());
  EXPECT_EQ(t.floats(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  auto c = Tensor::empty(plan::F32, {2, 6});
  ASSERT_TRUE(run("concat", {&x, &x}, {&c}, [](plan::Step &s) { (*s.mutable_attrs())["axis"].set_i(1); }).ok());
  EXPECT_EQ(c.floats()[3], 0);
  auto p0 = Tensor::empty(plan::F32, {2, 1}), p1 = Tensor::empty(plan::F32, {2, 2});
  ASSERT_TRUE(run("split", {&x}, {&p0, &p1}, [](plan::Step &s) { (*s.mutable_attrs())["axis"].set_i(1); }).ok());
  EXPECT_EQ(p1.floats(), (std::vector<float>{1, 2, 4, 5}));
  auto col = Tensor::f32({2, 1}, {7, 8});
  auto e = Tensor::empty(plan::F32, {2, 3});
  ASSERT_TRUE(run("expand", {&col}, {&e}).ok());
  EXPECT_EQ(e.floats(), (std::vector<float>{7, 7, 7, 8, 8, 8}));
}

// Transposes that swap the innermost dimensions take the tiled path; sizes
// not divisible by the tile and several outer dimensions check its edges
// against the index arithmetic.
TEST(DataMovement, TiledTransposeMatchesIndexing) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  for (const Case &k : {Case{{37, 70}, {1, 0}}, Case{{3, 45, 33}, {0, 2, 1}},
                        Case{{2, 40, 3, 9}, {0, 2, 3, 1}}, Case{{2, 9, 33, 8}, {1, 0, 3, 2}}}) {
    int64_t n = 1;
    for (int64_t d : k.shape) n *= d;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
    auto x = Tensor::f32(k.shape, v);
    std::vector<int64_t> outShape;
    for (int64_t p : k.perm) outShape.push_back(k.shape[p]);
    auto t = Tensor::empty(plan::F32, outShape);
    ASSERT_TRUE(run("transpose", {&x}, {&t}, [&](plan::Step &s) { ints(s, "perm", k.perm); }).ok());
    // Expected by direct index arithmetic over the output.
    std::vector<int64_t> inStride(k.shape.size(), 1);
    for (int64_t d = static_cast<int64_t>(k.shape.size()) - 2; d >= 0; --d)
      inStride[d] = inStride[d + 1] * k.shape[d + 1];
    std::vector<float> got = t.floats();
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, src = 0;
      for (int64_t d = static_cast<int64_t>(outShape.size()) - 1; d >= 0; --d) {
        src += (rem % outShape[d]) * inStride[k.perm[d]];
        rem /= outShape[d];
      }
      ASSERT_EQ(got[i], v[src]) << "element " << i;
    }
  }
}

// transpose_lhs/rhs: the GEMM reads the operand transposed. Every path of
// the kernel (one tall GEMM, batched with broadcasting, the row and column
// splits of big products) against the product of explicitly transposed
// operands.
TEST(Linalg, TransposedOperandsMatchExplicitTransposes) {
  struct Case {
    std::vector<int64_t> a, b; // stored shapes
    bool ta, tb;
  };
  for (const Case &k : {Case{{7, 5}, {7, 3}, true, false}, Case{{2, 4, 6}, {5, 6}, false, true},
                        Case{{2, 6, 4}, {2, 6, 5}, true, false}, Case{{3, 4, 6}, {1, 5, 6}, false, true},
                        Case{{96, 300}, {96, 200}, true, false}, Case{{300, 96}, {200, 96}, false, true},
                        Case{{40, 64}, {300, 40}, true, true}, Case{{40, 8}, {300, 40}, true, true}}) {
    auto fill = [](const std::vector<int64_t> &shape, float seed) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = std::sin(seed + 0.37f * i);
      return Tensor::f32(shape, v);
    };
    auto swapLast = [](std::vector<int64_t> s) {
      std::swap(s[s.size() - 1], s[s.size() - 2]);
      return s;
    };
    auto perm = [](size_t r) {
      std::vector<int64_t> p(r);
      for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(i);
      std::swap(p[r - 1], p[r - 2]);
      return p;
    };
    auto a = fill(k.a, 0.1f), b = fill(k.b, 0.7f);
    // Reference: transpose explicitly, then the plain product.
    auto ea = k.ta ? Tensor::empty(plan::F32, swapLast(k.a)) : fill(k.a, 0.1f);
    auto eb = k.tb ? Tensor::empty(plan::F32, swapLast(k.b)) : fill(k.b, 0.7f);
    if (k.ta) ASSERT_TRUE(run("transpose", {&a}, {&ea}, [&](plan::Step &s) { ints(s, "perm", perm(k.a.size())); }).ok());
    if (k.tb) ASSERT_TRUE(run("transpose", {&b}, {&eb}, [&](plan::Step &s) { ints(s, "perm", perm(k.b.size())); }).ok());
    std::vector<int64_t> as = k.ta ? swapLast(k.a) : k.a, bs = k.tb ? swapLast(k.b) : k.b;
    // numpy broadcasting of the batch dimensions (aligned from the right).
    std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    std::vector<int64_t> batch(std::max(ab.size(), bb.size()), 1);
    for (size_t i = 0; i < batch.size(); ++i) {
      int64_t x = i < ab.size() ? ab[ab.size() - 1 - i] : 1, y = i < bb.size() ? bb[bb.size() - 1 - i] : 1;
      batch[batch.size() - 1 - i] = std::max(x, y);
    }
    std::vector<int64_t> outShape = batch;
    outShape.push_back(as[as.size() - 2]);
    outShape.push_back(bs.back());
    auto want = Tensor::empty(plan::F32, outShape), got = Tensor::empty(plan::F32, outShape);
    ASSERT_TRUE(run("matmul", {&ea, &eb}, {&want}).ok());
    auto st = run("matmul", {&a, &b}, {&got}, [&](plan::Step &s) {
      if (k.ta) (*s.mutable_attrs())["transpose_lhs"].set_i(1);
      if (k.tb) (*s.mutable_attrs())["transpose_rhs"].set_i(1);
    });
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<float> w = want.floats(), g = got.floats();
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-4f * (1 + std::fabs(w[i]))) << i;
  }
  // Integers have no BLAS to transpose for them: refused, naming the flag.
  auto x = Tensor::i64({2, 2}, {1, 2, 3, 4});
  auto o = Tensor::empty(plan::I64, {2, 2});
  auto st = run("matmul", {&x, &x}, {&o}, [](plan::Step &s) { (*s.mutable_attrs())["transpose_lhs"].set_i(1); });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("transpose_lhs needs float operands"), std::string::npos);
}

TEST(Registry, UnknownAttributesAreErrors) {
  auto x = Tensor::f32({2}, {0, 1});
  auto o = Tensor::empty(plan::F32, {2});
  auto st = run("softmax", {&x}, {&o}); // no axis
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("axis"), std::string::npos);
}

} // namespace

namespace {
TEST(MoreKernels, ModFollowsTheDivisorsSign) {
  auto a = Tensor::i64({4}, {7, -7, 7, -7});
  auto b = Tensor::i64({4}, {3, 3, -3, -3});
  auto o = Tensor::empty(plan::I64, {4});
  ASSERT_TRUE(run("mod", {&a, &b}, {&o}).ok());
  EXPECT_EQ(o.ints(), (std::vector<int64_t>{1, 2, -2, -1})); // Python's %
  auto z = Tensor::i64({4}, {1, 0, 1, 1});
  EXPECT_FALSE(run("mod", {&a, &z}, {&o}).ok());
}

TEST(MoreKernels, TriluAndCumSum) {
  auto x = Tensor::f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto o = Tensor::empty(plan::F32, {3, 3});
  ASSERT_TRUE(run("trilu", {&x}, {&o}, [](plan::Step &s) {
                (*s.mutable_attrs())["upper"].set_i(1);
                (*s.mutable_attrs())["k"].set_i(1);
              }).ok());
  EXPECT_EQ(o.floats(), (std::vector<float>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  auto c = Tensor::empty(plan::F32, {3, 3});
  ASSERT_TRUE(run("cumsum", {&x}, {&c}, [](plan::Step &s) {
                (*s.mutable_attrs())["axis"].set_i(0);
                (*s.mutable_attrs())["exclusive"].set_i(0);
                (*s.mutable_attrs())["reverse"].set_i(1);
              }).ok());
  EXPECT_EQ(c.floats(), (std::vector<float>{12, 15, 18, 11, 13, 15, 7, 8, 9}));
}
} // namespace
