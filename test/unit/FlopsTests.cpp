// --profile's FLOP counts: 2 per multiply-add of the GEMM-like kernels.
#include <gtest/gtest.h>

#include "runtime/exec/Flops.h"

using namespace ds::rt;
namespace plan = ds::plan;

namespace {

TensorView view(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return TensorView{plan::F32, shape, nullptr, n};
}

plan::Step step(const char *kernel) {
  plan::Step s;
  s.set_kernel(kernel);
  return s;
}

TEST(Flops, MatmulCountsTheContraction) {
  // [2,3,4] x [4,5] -> [2,3,5]: 30 dot products of length 4.
  EXPECT_EQ(stepFlops(step("matmul"), {view({2, 3, 4}), view({4, 5})}, {view({2, 3, 5})}),
            2.0 * 30 * 4);
  // transpose_lhs: the operand is [K, M] = [4, 3].
  plan::Step t = step("matmul");
  (*t.mutable_attrs())["transpose_lhs"].set_i(1);
  EXPECT_EQ(stepFlops(t, {view({4, 3}), view({4, 5})}, {view({3, 5})}), 2.0 * 15 * 4);
}

TEST(Flops, FusedProductsCountTheirProducts) {
  // fused_matmul: the product's count; the bias and addend add nothing.
  EXPECT_EQ(stepFlops(step("fused_matmul"), {view({2, 3, 4}), view({4, 5}), view({5})},
                      {view({2, 3, 5})}),
            2.0 * 30 * 4);
  // attention, 2 batches x 4 heads x 6 query rows x 10 keys: scores over
  // D = 8, weighted values over Dv = 3.
  plan::Step a = step("attention");
  for (auto [name, dims] : {std::pair<const char *, std::vector<int64_t>>{"query_shape", {2, 4, 6, 8}},
                            {"key_shape", {2, 2, 10, 8}},
                            {"value_shape", {2, 2, 10, 3}}})
    for (int64_t d : dims) (*a.mutable_attrs())[name].mutable_ints()->add_values(d);
  EXPECT_EQ(stepFlops(a, {}, {view({2, 4, 6, 3})}), 2.0 * 2 * 4 * 6 * 10 * (8 + 3));
}

TEST(Flops, ConvCountsChannelsPerGroupTimesKernel) {
  // [1,4,8,8] * [6,2,3,3] (group 2) -> [1,6,6,6]: 216 outputs x 18 products.
  EXPECT_EQ(stepFlops(step("conv"), {view({1, 4, 8, 8}), view({6, 2, 3, 3})}, {view({1, 6, 6, 6})}),
            2.0 * 216 * 18);
  // The gradient computes both the input and the weight gradient.
  EXPECT_EQ(stepFlops(step("conv_grad"),
                      {view({1, 4, 8, 8}), view({6, 2, 3, 3}), view({1, 6, 6, 6})},
                      {view({1, 4, 8, 8}), view({6, 2, 3, 3})}),
            4.0 * 216 * 18);
}

TEST(Flops, OtherKernelsCountNothing) {
  EXPECT_EQ(stepFlops(step("add"), {view({4}), view({4})}, {view({4})}), 0.0);
}

} // namespace
