// The plan container and its validation: everything a corrupted or
// malicious plan could do is refused with a message.
#include <functional>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "runtime/plan/PlanFile.h"

using namespace ds::rt;
namespace plan = ds::plan;

namespace {

plan::Buffer *addBuffer(plan::Plan &p, plan::Buffer::Kind kind, std::vector<int64_t> shape,
                        uint64_t offset = 0, const std::string &io = "") {
  auto *b = p.add_buffers();
  b->set_id(p.buffers_size() - 1);
  b->set_kind(kind);
  b->set_dtype(plan::F32);
  int64_t n = 1;
  for (int64_t d : shape) {
    b->add_shape(d);
    n *= d;
  }
  b->set_size_bytes(n * 4);
  b->set_offset(offset);
  b->set_io_name(io);
  return b;
}

/// Appends a step `kernel(in...) -> out` to `prog`.
void addStep(plan::Program &prog, const char *kernel, std::vector<uint32_t> in, uint32_t out) {
  auto *s = prog.add_steps();
  s->set_kernel(kernel);
  for (uint32_t i : in) s->add_inputs(i);
  s->add_outputs(out);
}

/// x -> exp -> t (arena) -> exp -> y, with a weight.
std::vector<uint8_t> validPlanBytes(std::string *pathOut = nullptr) {
  PlanWriter w;
  auto &p = w.plan();
  p.set_arena_bytes(64);
  addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
  addBuffer(p, plan::Buffer::ARENA, {4}, 0);
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
  float wv[4] = {1, 2, 3, 4};
  w.addWeight(*addBuffer(p, plan::Buffer::WEIGHT, {4}), wv, sizeof wv);
  auto *prog = p.add_programs();
  prog->set_name("forward");
  prog->add_inputs(0);
  prog->add_outputs(2);
  auto *s0 = prog->add_steps();
  s0->set_kernel("exp");
  s0->add_inputs(0);
  s0->add_outputs(1);
  auto *s1 = prog->add_steps();
  s1->set_kernel("mul");
  s1->add_inputs(1);
  s1->add_inputs(3);
  s1->add_outputs(2);
  // One file per test: ctest runs the tests of this binary in parallel.
  std::string path = testing::TempDir() + "/" +
                     testing::UnitTest::GetInstance()->current_test_info()->name() + ".dsplan";
  EXPECT_TRUE(w.write(path).ok());
  if (pathOut) *pathOut = path;
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(PlanFile, RoundTrips) {
  std::string path;
  validPlanBytes(&path);
  auto lp = LoadedPlan::open(path);
  ASSERT_TRUE(lp.ok()) << lp.status().message();
  const auto &b = (*lp)->plan().buffers(3);
  const float *w = reinterpret_cast<const float *>((*lp)->weightData(b));
  EXPECT_EQ(w[2], 3.0f);
  EXPECT_NE(dumpPlan((*lp)->plan()).find("exp"), std::string::npos);
}

TEST(PlanFile, EveryTruncationIsRefused) {
  auto bytes = validPlanBytes();
  for (size_t len = 0; len < bytes.size(); len += 7) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + len);
    EXPECT_FALSE(LoadedPlan::fromBytes(cut, "cut").ok()) << "length " << len;
  }
}

TEST(PlanFile, BitFlipsAreCaught) {
  auto bytes = validPlanBytes();
  // Header, message and weights are all covered by a check.
  for (size_t pos : {size_t(3), size_t(9), size_t(70), bytes.size() - 3}) {
    auto bad = bytes;
    bad[pos] ^= 0x40;
    auto lp = LoadedPlan::fromBytes(bad, "flipped");
    EXPECT_FALSE(lp.ok()) << "flip at " << pos;
  }
}

TEST(PlanFile, WeightChecksumMismatchNamesTheBuffer) {
  auto bytes = validPlanBytes();
  bytes[bytes.size() - 1] ^= 1;
  auto lp = LoadedPlan::fromBytes(bytes, "w");
  ASSERT_FALSE(lp.ok());
  // (The buffer has no debug name: no empty "()" after its number.)
  EXPECT_EQ(std::string(lp.status().message()),
            "plan w: checksum mismatch in weight buffer 3: the weight section is corrupt");
}

TEST(PlanStructure, OverlappingLiveArenaBuffersAreRefused) {
  plan::Plan p;
  p.set_arena_bytes(64);
  addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
  addBuffer(p, plan::Buffer::ARENA, {4}, 0);
  addBuffer(p, plan::Buffer::ARENA, {4}, 8); // shares bytes with buffer 1
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
  auto *prog = p.add_programs();
  prog->add_inputs(0);
  addStep(*prog, "exp", {0}, 1);
  addStep(*prog, "exp", {0}, 2);
  addStep(*prog, "add", {1, 2}, 3); // both live here
  auto st = validatePlanStructure(p, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("overlap in memory while both are live"), std::string::npos);
}

TEST(PlanStructure, AnOutputNoStepWritesIsRefused) {
  plan::Plan p;
  p.set_arena_bytes(64);
  addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "z");
  auto *prog = p.add_programs();
  prog->set_name("forward");
  prog->add_inputs(0);
  prog->add_outputs(1);
  prog->add_outputs(2);
  addStep(*prog, "exp", {0}, 1); // z is never written: it would be uninitialized
  auto st = validatePlanStructure(p, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output 2 ('z') is never written by a step"), std::string::npos)
      << st.message();
  addStep(*prog, "exp", {0}, 2);
  EXPECT_TRUE(validatePlanStructure(p, 0).ok());
}

TEST(PlanStructure, ReadingAnUnboundInputOrAnUnwrittenOutputIsRefused) {
  // ds-run allocates inputs and outputs without clearing them: a step that
  // read an input its program does not bind, or an output before the
  // program wrote it, would read leftover heap memory.
  plan::Plan p;
  p.set_arena_bytes(64);
  addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
  addBuffer(p, plan::Buffer::INPUT, {4}, 0, "z");
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
  addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "w");
  auto *prog = p.add_programs();
  prog->set_name("forward");
  prog->add_inputs(0);
  prog->add_outputs(2);
  prog->add_outputs(3);
  addStep(*prog, "exp", {1}, 2); // z is not this program's input
  addStep(*prog, "exp", {0}, 3);
  auto st = validatePlanStructure(p, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reads input buffer 1 ('z'), which the program does not take as an "
                              "input"),
            std::string::npos)
      << st.message();
  prog->mutable_steps(0)->set_inputs(0, 3); // w, before the step that writes it
  st = validatePlanStructure(p, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reads output buffer 3 ('w') before a step of the program writes it"),
            std::string::npos)
      << st.message();
  // Read after it is written: fine.
  prog->mutable_steps(0)->set_inputs(0, 0);
  addStep(*prog, "exp", {3}, 2);
  EXPECT_TRUE(validatePlanStructure(p, 0).ok()) << validatePlanStructure(p, 0).message();
}

// Memory spaces (ZeRO-Offload): host intermediates are placed in the host
// arena, inputs and outputs are device memory, NVMe holds state only and is
// touched by transfer steps only, under valid swapper settings.
TEST(PlanStructure, MemorySpacesAreChecked) {
  auto base = [] {
    plan::Plan p;
    p.set_arena_bytes(64);
    p.set_host_arena_bytes(64);
    addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");                       // 0
    addBuffer(p, plan::Buffer::ARENA, {4}, 0)->set_space(plan::HOST);     // 1
    addBuffer(p, plan::Buffer::STATE, {4}, 0, "adam_m:w")->set_space(plan::NVME); // 2
    addBuffer(p, plan::Buffer::ARENA, {4}, 16)->set_space(plan::HOST);    // 3
    addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");                      // 4
    p.mutable_nvme()->set_block_size(4096);
    p.mutable_nvme()->set_queue_depth(2);
    p.mutable_nvme()->set_buffer_count(2);
    auto *prog = p.add_programs();
    prog->set_name("forward");
    prog->add_inputs(0);
    prog->add_outputs(4);
    addStep(*prog, "offload", {0}, 1);
    addStep(*prog, "fetch", {2}, 3);   // swap in
    addStep(*prog, "add", {1, 3}, 1);
    addStep(*prog, "offload", {1}, 2); // swap out
    addStep(*prog, "fetch", {1}, 4);
    return p;
  };
  auto refused = [](const plan::Plan &p, const std::string &why) {
    auto st = validatePlanStructure(p, 0);
    EXPECT_FALSE(st.ok()) << why;
    if (!st.ok()) EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  EXPECT_TRUE(validatePlanStructure(base(), 0).ok()) << validatePlanStructure(base(), 0).message();
  plan::Plan a = base();
  a.mutable_buffers(3)->set_offset(64); // past the host arena
  refused(a, "lies outside the 64-byte host arena");
  plan::Plan b = base();
  b.mutable_buffers(4)->set_space(plan::HOST);
  refused(b, "is a program input or output in host memory");
  plan::Plan c = base();
  c.mutable_buffers(1)->set_space(plan::NVME);
  refused(c, "is in memory space NVME but is not state");
  plan::Plan d = base();
  addStep(*d.mutable_programs(0), "exp", {2}, 3); // a kernel reading a swap file
  refused(d, "touches an NVMe buffer");
  plan::Plan e = base();
  e.mutable_nvme()->set_block_size(1000);
  refused(e, "NVMe block size 1000 is not a multiple of 4096");
  plan::Plan f = base();
  f.mutable_nvme()->set_buffer_count(0);
  refused(f, "must be in [1, 4096]");
}

TEST(PlanStructure, BoundsAndKindsAreChecked) {
  plan::Plan p;
  p.set_arena_bytes(8);
  addBuffer(p, plan::Buffer::ARENA, {4}, 0); // 16 bytes in an 8-byte arena
  EXPECT_FALSE(validatePlanStructure(p, 0).ok());
  plan::Plan q;
  addBuffer(q, plan::Buffer::WEIGHT, {4}, 0);
  EXPECT_FALSE(validatePlanStructure(q, 8).ok()); // past the weight section
  plan::Plan r;
  auto *b = addBuffer(r, plan::Buffer::INPUT, {4}, 0, "x");
  b->set_size_bytes(12); // disagrees with the shape
  EXPECT_FALSE(validatePlanStructure(r, 0).ok());
  plan::Plan s;
  auto *neg = addBuffer(s, plan::Buffer::INPUT, {4}, 0, "x");
  neg->set_shape(0, -4);
  EXPECT_FALSE(validatePlanStructure(s, 0).ok());
  plan::Plan t;
  addBuffer(t, plan::Buffer::WEIGHT, {1}, 0);
  auto *prog = t.add_programs();
  auto *step = prog->add_steps();
  step->set_kernel("exp");
  step->add_inputs(0);
  step->add_outputs(0); // writes a weight
  t.set_weight_bytes(4);
  EXPECT_FALSE(validatePlanStructure(t, 4).ok());
  plan::Plan u;
  auto *prog2 = u.add_programs();
  prog2->add_steps()->add_inputs(7); // no such buffer
  EXPECT_FALSE(validatePlanStructure(u, 0).ok());
  // A product told its right operand is a constant weight (packed once at
  // load) when it is a graph input: refused, naming the attribute.
  plan::Plan v;
  addBuffer(v, plan::Buffer::INPUT, {2, 2}, 0, "a");
  addBuffer(v, plan::Buffer::INPUT, {2, 2}, 0, "b");
  addBuffer(v, plan::Buffer::OUTPUT, {2, 2}, 0, "y");
  auto *prog3 = v.add_programs();
  prog3->set_name("forward");
  prog3->add_inputs(0);
  prog3->add_inputs(1);
  addStep(*prog3, "matmul", {0, 1}, 2);
  (*prog3->mutable_steps(0)->mutable_attrs())["constant_weight"].set_i(1);
  absl::Status st = validatePlanStructure(v, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("constant_weight"), std::string::npos) << st.message();
}

// Sizes and settings a hostile plan could carry with a valid checksum: an
// arena that wraps the allocator's rounding, and a training section whose
// numbers drive loops and the update.
TEST(PlanStructure, HugeArenaAndTrainingSettingsAreChecked) {
  plan::Plan a;
  a.set_arena_bytes(~uint64_t(0) - 10);
  auto st = validatePlanStructure(a, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("larger than 2^62"), std::string::npos) << st.message();
  auto training = [] {
    plan::Plan p;
    auto *t = p.mutable_training();
    t->set_micro_batch_size(4);
    t->set_gradient_accumulation_steps(1);
    t->mutable_optimizer()->set_lr(1e-3);
    t->mutable_optimizer()->set_beta1(0.9);
    t->mutable_optimizer()->set_beta2(0.999);
    t->mutable_optimizer()->set_eps(1e-8);
    return p;
  };
  EXPECT_TRUE(validatePlanStructure(training(), 0).ok());
  auto expectRefused = [&](const std::function<void(plan::Training &)> &edit, const char *what) {
    plan::Plan p = training();
    edit(*p.mutable_training());
    auto s = validatePlanStructure(p, 0);
    EXPECT_FALSE(s.ok()) << what;
    if (!s.ok()) EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  };
  expectRefused([](plan::Training &t) { t.mutable_optimizer()->set_lr(-1); }, "optimizer lr");
  expectRefused([](plan::Training &t) { t.mutable_optimizer()->set_beta1(2); }, "betas");
  expectRefused([](plan::Training &t) { t.mutable_optimizer()->set_kind(plan::Optimizer::Kind(17)); },
                "optimizer kind");
  expectRefused([](plan::Training &t) { t.mutable_schedule()->set_kind(plan::Schedule::Kind(9)); },
                "schedule kind");
  expectRefused([](plan::Training &t) { t.set_zero_stage(9); }, "zero_stage");
  expectRefused([](plan::Training &t) { t.set_precision("fp8"); }, "precision");
  expectRefused([](plan::Training &t) { t.set_gradient_accumulation_steps(int64_t(1) << 62); },
                "gradient_accumulation_steps");
  expectRefused([](plan::Training &t) { t.set_micro_batch_size(0); }, "micro_batch_size");
  // What the config reader refuses (a negative rate trains by gradient
  // ascent; a cosine schedule without a decay phase divides by zero).
  expectRefused([](plan::Training &t) { t.mutable_schedule()->set_warmup_min_lr(-1); }, "schedule");
  expectRefused([](plan::Training &t) { t.mutable_schedule()->set_warmup_min_ratio(-1); }, "schedule");
  expectRefused([](plan::Training &t) { t.mutable_optimizer()->set_dampening(-3); }, "dampening");
  // A subnormal eps is flushed to 0 by the kernels: 0 / 0 for a zero gradient.
  expectRefused([](plan::Training &t) { t.mutable_optimizer()->set_eps(1e-40); }, "smallest normal");
  expectRefused(
      [](plan::Training &t) {
        t.mutable_schedule()->set_kind(plan::Schedule::WARMUP_COSINE_LR);
        t.mutable_schedule()->set_warmup_num_steps(2);
        t.mutable_schedule()->set_total_num_steps(0);
      },
      "greater than warmup_num_steps");
}

// State and outputs are saved to .npz files under their names: a name no
// zip member can be (absolute, a backslash, '..', over 65000 bytes) is
// refused when the plan is written, not at the first checkpoint.
TEST(PlanStructure, NamesNoNpzCanHoldAreRefused) {
  for (const std::string &name : {std::string("momentum:a\\b"), std::string("param:/w"),
                                  std::string("param:x/../../y"),
                                  "param:" + std::string(70000, 'w')}) {
    plan::Plan p;
    plan::Buffer *b = p.add_buffers();
    b->set_id(0);
    b->set_kind(plan::Buffer::STATE);
    b->set_dtype(plan::F32);
    b->set_size_bytes(4);
    b->set_io_name(name);
    auto st = validatePlanStructure(p, 0);
    ASSERT_FALSE(st.ok()) << name.substr(0, 40);
    EXPECT_NE(st.message().find("so no checkpoint could hold it"), std::string::npos) << st.message();
    EXPECT_LT(st.message().size(), 1000u); // names are cut in messages
  }
}

// An out-of-range operand id names the program once, then where in it.
TEST(PlanStructure, OutOfRangeBufferIdsNameTheProgramOnce) {
  auto planWith = [](auto edit) {
    plan::Plan p;
    addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
    addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
    auto *prog = p.add_programs();
    prog->set_name("forward");
    prog->add_inputs(0);
    prog->add_outputs(1);
    auto *s = prog->add_steps();
    s->set_kernel("exp");
    s->set_location("node 'e'");
    s->add_inputs(0);
    s->add_outputs(1);
    edit(*prog);
    return p;
  };
  auto message = [](const plan::Plan &p) {
    return std::string(validatePlanStructure(p, 0).message());
  };
  EXPECT_TRUE(validatePlanStructure(planWith([](plan::Program &) {}), 0).ok());
  EXPECT_EQ(message(planWith([](plan::Program &g) { g.mutable_steps(0)->set_inputs(0, 7); })),
            "program 'forward', step 0 (exp at node 'e'): buffer id 7 is out of range (2 buffers)");
  EXPECT_EQ(message(planWith([](plan::Program &g) { g.mutable_steps(0)->set_outputs(0, 9); })),
            "program 'forward', step 0 (exp at node 'e'): buffer id 9 is out of range (2 buffers)");
  EXPECT_EQ(message(planWith([](plan::Program &g) { g.set_inputs(0, 5); })),
            "program 'forward', inputs: buffer id 5 is out of range (2 buffers)");
  EXPECT_EQ(message(planWith([](plan::Program &g) { g.set_outputs(0, 6); })),
            "program 'forward', outputs: buffer id 6 is out of range (2 buffers)");
}

} // namespace

TEST(PlanStructure, ViewsShareTheirTargetsBytesAndLiveness) {
  // x -> exp -> %1; %2 views %1 as 2x2; exp(%2) -> %3 (arena, over other
  // bytes); add(%3, %1) -> y.
  auto planWith = [](auto edit) {
    plan::Plan p;
    p.set_arena_bytes(128);
    addBuffer(p, plan::Buffer::INPUT, {4}, 0, "x");
    addBuffer(p, plan::Buffer::ARENA, {4}, 0);
    addBuffer(p, plan::Buffer::ARENA, {2, 2}, 0)->set_alias_of(1);
    addBuffer(p, plan::Buffer::ARENA, {2, 2}, 64);
    addBuffer(p, plan::Buffer::OUTPUT, {4}, 0, "y");
    auto *prog = p.add_programs();
    prog->set_name("forward");
    prog->add_inputs(0);
    addStep(*prog, "exp", {0}, 1);
    addStep(*prog, "exp", {2}, 3);
    addStep(*prog, "add", {3, 1}, 4);
    edit(p);
    return validatePlanStructure(p, 0);
  };
  EXPECT_TRUE(planWith([](plan::Plan &) {}).ok());
  auto message = [&](auto edit) { return std::string(planWith(edit).message()); };
  // Buffer 3 moved onto buffer 1's bytes while the view keeps them live.
  EXPECT_NE(message([](plan::Plan &p) { p.mutable_buffers(3)->set_offset(0); })
                .find("arena buffers 1 and 3 overlap in memory while both are live"),
            std::string::npos);
  EXPECT_NE(message([](plan::Plan &p) { p.mutable_programs(0)->mutable_steps(0)->set_outputs(0, 2); })
                .find("writes buffer 2, a view of buffer 1"),
            std::string::npos);
  EXPECT_NE(message([](plan::Plan &p) { p.mutable_buffers(2)->set_offset(64); })
                .find("is a view of buffer 1 but not on the same bytes"),
            std::string::npos);
  EXPECT_NE(message([](plan::Plan &p) { p.mutable_buffers(2)->set_alias_of(0); })
                .find("which is not an arena buffer owning its bytes"),
            std::string::npos);
  EXPECT_NE(message([](plan::Plan &p) { p.mutable_buffers(2)->set_alias_of(3); })
                .find("which does not come before it"),
            std::string::npos);
  EXPECT_NE(message([](plan::Plan &p) {
              p.mutable_buffers(2)->set_kind(plan::Buffer::OUTPUT);
              p.mutable_buffers(2)->set_io_name("v");
            }).find("is a view but not an arena buffer"),
            std::string::npos);
}
