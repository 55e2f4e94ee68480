// Learning-rate schedules against DeepSpeed 0.19.8's lr_schedules.py as its
// engine runs them (the rates below were printed by DeepSpeed itself: the
// optimizer's lr before each engine step, scheduler.step() after it).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/train/Schedule.h"

using namespace ds::rt;
namespace plan = ds::plan;

namespace {

std::vector<double> rates(const plan::Training &t, int steps) {
  std::vector<double> r;
  for (int applied = 0; applied < steps; ++applied) r.push_back(learningRateAt(t, applied));
  return r;
}

void expectRates(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-6) << "optimizer step " << k + 1;
}

TEST(Schedule, WarmupLRStartsAtTheConstructorsRate) {
  // WarmupLR(0.001, 0.01, 4 steps, linear): steps 1 and 2 both at the minimum.
  plan::Training t;
  t.mutable_optimizer()->set_lr(0.1);
  auto *s = t.mutable_schedule();
  s->set_kind(plan::Schedule::WARMUP_LR);
  s->set_warmup_min_lr(0.001);
  s->set_warmup_max_lr(0.01);
  s->set_warmup_num_steps(4);
  s->set_warmup_linear(true);
  expectRates(rates(t, 6), {0.001, 0.001, 0.00325, 0.0055, 0.00775, 0.01});
}

TEST(Schedule, WarmupDecayLR) {
  // WarmupDecayLR(total 8, 0 -> 0.01 over 3 steps, log warmup).
  plan::Training t;
  auto *s = t.mutable_schedule();
  s->set_kind(plan::Schedule::WARMUP_DECAY_LR);
  s->set_warmup_min_lr(0.0);
  s->set_warmup_max_lr(0.01);
  s->set_warmup_num_steps(3);
  s->set_total_num_steps(8);
  expectRates(rates(t, 10), {0.0, 0.0, 0.006309, 0.01, 0.01, 0.008, 0.006, 0.004, 0.002, 0.0});
}

TEST(Schedule, WarmupCosineLRHoldsItsMinimumAfterTheEnd) {
  // WarmupCosineLR(total 10, warmup 3, warmup_min_ratio 0.2, cos_min_ratio
  // 0.1, log), base lr 0.1: 0 at step 1, then the cosine, then 0.1 * 0.1.
  plan::Training t;
  t.mutable_optimizer()->set_lr(0.1);
  auto *s = t.mutable_schedule();
  s->set_kind(plan::Schedule::WARMUP_COSINE_LR);
  s->set_warmup_num_steps(3);
  s->set_total_num_steps(10);
  s->set_warmup_min_ratio(0.2);
  s->set_cos_min_ratio(0.1);
  expectRates(rates(t, 14), {0.0, 0.02, 0.070474, 0.1, 0.095544, 0.083057, 0.065013, 0.044987,
                             0.026943, 0.014456, 0.01, 0.01, 0.01, 0.01});
}

TEST(Schedule, WarmupCosineLRWithTheWarmupClampedToTheTotal) {
  // total 2 with warmup 1 (clamped to 2): the cosine phase is max(1, T - W)
  // = 1 step long, so the rate goes to cos_min_ratio, never 0 / 0.
  plan::Training t;
  t.mutable_optimizer()->set_lr(0.1);
  auto *s = t.mutable_schedule();
  s->set_kind(plan::Schedule::WARMUP_COSINE_LR);
  s->set_warmup_num_steps(1);
  s->set_total_num_steps(2);
  s->set_cos_min_ratio(0.5);
  s->set_warmup_linear(true);
  expectRates(rates(t, 6), {0.0, 0.0, 0.05, 0.05, 0.05, 0.05});
}

} // namespace
