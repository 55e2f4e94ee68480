#include "runtime/train/Trainer.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Data.h"
#include "runtime/train/Schedule.h"
#include "runtime/train/StopSignals.h"

namespace ds::rt {
namespace {

HostArray scalarF32(float v) {
  HostArray a;
  a.dtype = ds::plan::F32;
  a.data.resize(4);
  std::memcpy(a.data.data(), &v, 4);
  return a;
}

float scalarOf(const NamedArrays &outs, const std::string &name) {
  for (const auto &[n, a] : outs)
    if (n == name && a.data.size() == 4) {
      float v;
      std::memcpy(&v, a.data.data(), 4);
      return v;
    }
  return NAN;
}

} // namespace

absl::Status train(Session &session, const TrainOptions &o) {
  const ds::plan::Plan &p = session.plan().plan();
  if (!p.has_training())
    return absl::InvalidArgumentError(
        "this plan has no training step; compile with ds-opt --config/--loss to train");
  const ds::plan::Training &t = p.training();
  const ds::plan::Program *micro = session.program(t.micro_step_program());
  if (!micro || !session.program(t.optimizer_program()))
    return absl::InvalidArgumentError("the plan's training programs are missing");
  std::vector<std::string> dataInputs(t.data_inputs().begin(), t.data_inputs().end());
  // Data parallelism: rank r trains on its slice of every global batch; the
  // plan averages gradients and the logged loss over the ranks. Rank 0
  // logs and saves (every rank holds the same state).
  Comm &comm = session.comm();
  const bool root = comm.rank() == 0;
  // ZeRO >= 1: optimizer state differs per rank, so every rank saves.
  const bool perRankState = t.zero_stage() > 0 && comm.size() > 1;
  if (std::max<int64_t>(1, t.world_size()) != comm.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan trains with ", t.world_size(), " data-parallel ranks but runs on ", comm.size()));
  DS_ASSIGN_OR_RETURN(DataLoader data,
                      DataLoader::open(o.dataPath, p, *micro, dataInputs, t.micro_batch_size(),
                                       comm.rank(), std::max<int64_t>(1, t.world_size()),
                                       o.shuffle, o.seed));
  int64_t step = 0;
  if (o.resume) {
    if (o.checkpointDir.empty())
      return absl::InvalidArgumentError("--resume needs --checkpoint-dir");
    auto meta = loadLatestCheckpoint(o.checkpointDir, session);
    if (!meta.ok() && meta.status().code() != absl::StatusCode::kNotFound) return meta.status();
    if (meta.ok()) {
      if (meta->shuffle() != o.shuffle || (o.shuffle && meta->seed() != o.seed))
        return absl::InvalidArgumentError(absl::StrCat(
            "the checkpoint was taken with ", meta->shuffle() ? "--shuffle --seed " : "in-order data",
            meta->shuffle() ? absl::StrCat(meta->seed()) : "",
            "; resume with the same data order"));
      step = meta->step();
      data.setCursor(meta->data_cursor());
      std::fprintf(stderr, "ds-run: resumed from %s at step %lld\n", o.checkpointDir.c_str(),
                   static_cast<long long>(step));
    }
  }
  std::FILE *log = nullptr;
  if (!o.logPath.empty() && root) {
    log = std::fopen(o.logPath.c_str(), o.resume ? "a" : "w");
    if (!log)
      return absl::InvalidArgumentError(absl::StrCat("cannot open ", o.logPath, ": ",
                                                     std::strerror(errno)));
  }
  auto closeLog = [&] {
    if (log) std::fclose(log);
  };
  auto save = [&](int64_t atStep) -> absl::Status {
    ds::plan::CheckpointMeta meta;
    meta.set_format_version(1);
    meta.set_step(atStep);
    meta.set_data_cursor(data.cursor());
    meta.set_seed(o.seed);
    meta.set_shuffle(o.shuffle);
    meta.set_plan_source(p.source());
    meta.set_world_size(t.world_size());
    meta.set_zero_stage(t.zero_stage());
    CheckpointOptions co;
    if (perRankState) co.perRank = &comm;
    return saveCheckpoint(o.checkpointDir, meta, session, co);
  };

  // Preemption: finish the step in flight, save, and stop.
  armGracefulStop(true);
  struct Disarm {
    ~Disarm() { armGracefulStop(false); }
  } disarm;
  const int64_t gas = std::max<int64_t>(1, t.gradient_accumulation_steps());
  const bool sgd = t.optimizer().kind() == ds::plan::Optimizer::SGD;
  auto start = std::chrono::steady_clock::now();
  const int64_t firstStep = step;
  for (; step < o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    double lossSum = 0;
    for (int64_t m = 0; m < gas; ++m) {
      auto out = session.run(t.micro_step_program(), data.next());
      if (!out.ok()) {
        closeLog();
        return out.status();
      }
      float loss = scalarOf(*out, t.loss_output());
      if (!std::isfinite(loss)) {
        closeLog();
        return absl::InternalError(absl::StrFormat(
            "the loss is %f at step %lld (micro-batch %lld): training diverged or the data is bad",
            loss, static_cast<long long>(step + 1), static_cast<long long>(m)));
      }
      lossSum += loss;
    }
    double lr = learningRateAt(t, step);
    std::map<std::string, HostArray> scalars;
    scalars["lr"] = scalarF32(static_cast<float>(lr));
    if (sgd) {
      scalars["first"] = scalarF32(step == 0 ? 1.0f : 0.0f);
    } else {
      AdamScalars a = adamScalars(t.optimizer(), lr, step + 1);
      scalars["step_size"] = scalarF32(static_cast<float>(a.stepSize));
      scalars["bias2_sqrt"] = scalarF32(static_cast<float>(a.bias2Sqrt));
    }
    auto out = session.run(t.optimizer_program(), scalars);
    if (!out.ok()) {
      closeLog();
      return out.status();
    }
    float gradNorm = scalarOf(*out, "grad_norm");
    double loss = lossSum / gas;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double samplesPerSec = t.train_batch_size() / std::max(secs, 1e-9);
    if (log) {
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                   "\"time\": %.6f, \"samples_per_sec\": %.3f}\n",
                   static_cast<long long>(step + 1), loss, lr, gradNorm, secs, samplesPerSec);
      std::fflush(log);
    }
    if (o.progress && root) {
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double eta = elapsed / (step + 1 - firstStep) * (o.steps - step - 1);
      std::fprintf(stderr, "\rstep %lld/%lld  loss %.4f  lr %.3g  %.1f samples/s  ETA %d:%02d   ",
                   static_cast<long long>(step + 1), static_cast<long long>(o.steps), loss, lr,
                   samplesPerSec, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
      std::fflush(stderr);
    }
    bool last = step + 1 == o.steps;
    // Ranks agree on stopping (a signal may reach them at different steps).
    int32_t sig = stopRequested();
    if (comm.size() > 1) {
      absl::Status st = comm.allReduce(&sig, 1, ds::plan::I32, ReduceOp::Max);
      if (!st.ok()) {
        closeLog();
        return st;
      }
    }
    if (!o.checkpointDir.empty() && (root || perRankState) &&
        ((o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0) || last || sig)) {
      absl::Status st = save(step + 1);
      if (!st.ok()) {
        closeLog();
        return st;
      }
    }
    if (sig && !last) {
      closeLog();
      return absl::CancelledError(absl::StrFormat(
          "stopped by signal %d after step %lld%s", sig, static_cast<long long>(step + 1),
          o.checkpointDir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                  : "; checkpoint saved, continue with --resume"));
    }
  }
  if (o.progress && root) std::fprintf(stderr, "\n");
  closeLog();
  return absl::OkStatus();
}

} // namespace ds::rt
