#include "runtime/train/Trainer.h"
#include "runtime/train/PlanIdentity.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/io/Files.h"
#include "runtime/kernels/ElementMath.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/CommsLogger.h"
#include "runtime/train/Data.h"
#include "runtime/train/FlopsProfiler.h"
#include "runtime/train/LossScaler.h"
#include "runtime/train/Monitor.h"
#include "runtime/train/Schedule.h"
#include "runtime/train/StopSignals.h"

namespace ds::rt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

HostArray scalarF32(float v) {
  HostArray a;
  a.dtype = ds::plan::F32;
  a.data.resize(4);
  std::memcpy(a.data.data(), &v, 4);
  return a;
}

HostArray scalarI64(int64_t v) {
  HostArray a;
  a.dtype = ds::plan::I64;
  a.data.resize(8);
  std::memcpy(a.data.data(), &v, 8);
  return a;
}

/// Dropout's key for micro-batch `micro` (counted over the whole run) on
/// `rank`: different per rank and micro-batch, reproducible from --seed, and
/// independent of how ZeRO partitions the state.
int64_t dropoutKey(uint64_t seed, int rank, int64_t micro) {
  using ds::math::mix64;
  return static_cast<int64_t>(
      mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(micro)));
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

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using LogFile = std::unique_ptr<std::FILE, FileCloser>;

/// Ranks per model replica: tensor parallelism's group (adjacent ranks,
/// the innermost mesh axis), 1 without.
int64_t tensorParallel(const ds::plan::Training &t) {
  return std::max<int64_t>(1, t.tensor_parallel());
}

/// This rank's data-parallel coordinate: which replica it belongs to, and so
/// which slice of every batch it reads (the ranks of one replica read the
/// same samples).
int64_t dataParallelRank(const Comm &comm, const ds::plan::Training &t) {
  return comm.rank() / tensorParallel(t);
}

/// The plan trains, and with as many ranks as this run has.
absl::Status checkTrainable(Session &session) {
  const ds::plan::Plan &p = session.plan().plan();
  if (!p.has_training())
    return absl::InvalidArgumentError(
        "this plan has no training step; compile with ds-opt --config/--loss to train");
  const ds::plan::Training &t = p.training();
  if (!session.program(t.micro_step_program()) || !session.program(t.optimizer_program()) ||
      (!t.compressed_optimizer_program().empty() &&
       !session.program(t.compressed_optimizer_program())))
    return absl::InvalidArgumentError("the plan's training programs are missing");
  if ((t.optimizer().kind() == ds::plan::Optimizer::ONEBIT_ADAM ||
       t.optimizer().kind() == ds::plan::Optimizer::ONEBIT_LAMB) &&
      t.compressed_optimizer_program().empty())
    return absl::InvalidArgumentError("the plan's 1-bit Adam has no compressed optimizer program");
  if (t.optimizer().kind() == ds::plan::Optimizer::ZERO_ONE_ADAM &&
      (!session.program(t.gradient_compressed_program()) ||
       !session.program(t.local_step_program()) || !session.program(t.sync_step_program())))
    return absl::InvalidArgumentError("the plan's 0/1 Adam programs are missing");
  const int64_t dp = std::max<int64_t>(1, t.world_size()), tp = tensorParallel(t);
  if (dp * tp != session.comm().size())
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan trains with ", dp, " data-parallel ranks",
        tp > 1 ? absl::StrCat(" of ", tp, " tensor-parallel ranks each (", dp * tp, " ranks)")
               : std::string(),
        " but runs on ", session.comm().size()));
  return absl::OkStatus();
}

/// Data parallelism: rank r trains on its slice of every global batch; the
/// plan averages gradients and the logged loss over the ranks.
absl::StatusOr<DataLoader> openData(Session &session, const TrainOptions &o) {
  const ds::plan::Plan &p = session.plan().plan();
  const ds::plan::Training &t = p.training();
  std::vector<std::string> dataInputs(t.data_inputs().begin(), t.data_inputs().end());
  return DataLoader::open(o.dataPath, p, *session.program(t.micro_step_program()), dataInputs,
                          t.micro_batch_size(), dataParallelRank(session.comm(), t),
                          std::max<int64_t>(1, t.world_size()), o.shuffle, o.seed);
}

/// Ranks resume from one checkpoint or none: its step and id must be the
/// same on all (a rank whose checkpoint directory differs would otherwise
/// train with inconsistent weights).
absl::Status agreeOnCheckpoint(Comm &comm, const ds::plan::CheckpointMeta *meta, bool failed) {
  if (comm.size() == 1) return absl::OkStatus();
  int64_t mine[2] = {meta ? meta->step() : failed ? -2 : -1,
                     meta ? static_cast<int64_t>(meta->checkpoint_id() >> 1) : -1};
  int64_t lo[2] = {mine[0], mine[1]}, hi[2] = {mine[0], mine[1]};
  DS_RETURN_IF_ERROR(comm.allReduce(lo, 2, ds::plan::I64, ReduceOp::Min));
  DS_RETURN_IF_ERROR(comm.allReduce(hi, 2, ds::plan::I64, ReduceOp::Max));
  if (lo[0] != hi[0] || lo[1] != hi[1])
    return absl::FailedPreconditionError(absl::StrFormat(
        "the ranks resume from different checkpoints (rank %d: %s; steps across ranks range "
        "from %d to %d, -1: none, -2: unreadable): every rank must see the same "
        "--checkpoint-dir contents",
        comm.rank(),
        meta ? absl::StrFormat("step %d, id %016x", meta->step(), meta->checkpoint_id())
             : std::string("no checkpoint"),
        lo[0], hi[0]));
  return absl::OkStatus();
}

/// With --resume, loads the latest checkpoint (if the directory has one)
/// into the session and the data cursor; returns its metadata (nullopt when
/// starting afresh).
absl::StatusOr<std::optional<ds::plan::CheckpointMeta>> resume(Session &session,
                                                               const TrainOptions &o,
                                                               DataLoader &data) {
  if (!o.resume) return std::nullopt;
  if (o.checkpointDir.empty())
    return absl::InvalidArgumentError("--resume needs --checkpoint-dir");
  auto meta = loadLatestCheckpoint(o.checkpointDir, session, o.resumeFallback);
  const bool failed = !meta.ok() && meta.status().code() != absl::StatusCode::kNotFound;
  // Every rank takes part in the agreement, also one whose load failed (so
  // the others fail too instead of waiting for it).
  absl::Status agreed = agreeOnCheckpoint(session.comm(), meta.ok() ? &*meta : nullptr, failed);
  if (failed) return meta.status();
  DS_RETURN_IF_ERROR(agreed);
  if (!meta.ok()) return std::nullopt;
  if (meta->shuffle() != o.shuffle || (o.shuffle && meta->seed() != o.seed))
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint was taken with ", meta->shuffle() ? "--shuffle --seed " : "in-order data",
        meta->shuffle() ? absl::StrCat(meta->seed()) : "", "; resume with the same data order"));
  // Dropout's masks are drawn from the seed: another one would continue
  // with other masks than the run that was interrupted.
  if (!session.plan().plan().training().rng_input().empty() && meta->seed() != o.seed)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint was taken with --seed ", meta->seed(),
        ", from which the plan's Dropout masks are drawn; resume with --seed ", meta->seed(),
        " (this run has --seed ", o.seed, ")"));
  data.setCursor(meta->data_cursor());
  std::fprintf(stderr, "ds-run: resumed from %s at step %lld\n", o.checkpointDir.c_str(),
               static_cast<long long>(meta->step()));
  return *std::move(meta);
}

/// The JSONL log, appended to when resuming; only rank 0 writes one.
absl::StatusOr<LogFile> openLog(const TrainOptions &o, bool root) {
  if (o.logPath.empty() || !root) return LogFile();
  DS_ASSIGN_OR_RETURN(std::FILE * f,
                      openOutputStream(o.logPath, o.resume, "--log", /*streams=*/true));
  return LogFile(f);
}

/// One optimizer step as logged.
struct StepRecord {
  int64_t step; // 1-based: optimizer steps done
  double loss, lr;
  float gradNorm;
  double seconds, samplesPerSec;
  /// fp16: the loss scale the step ran with, and whether its gradients
  /// overflowed so the update was skipped. lossScale 0: no scaler.
  double lossScale = 0;
  bool skipped = false;
  double beta1 = -1; // >= 0: the step's cycled Adam beta1 (OneCycle), logged
};

/// A JSON number, or null for NaN and infinities (which JSON lacks); the
/// name then goes into the record's "nonfinite" list with what it was.
std::string jsonNumber(const char *name, double v, std::string &nonfinite) {
  if (std::isfinite(v)) return absl::StrFormat("%.9g", v);
  absl::StrAppend(&nonfinite, nonfinite.empty() ? "" : ", ", "\"", name, "\": \"",
                  std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"), "\"");
  return "null";
}

absl::Status logStep(std::FILE *log, const std::string &path, const StepRecord &r) {
  std::string nonfinite;
  std::string loss = jsonNumber("loss", r.loss, nonfinite);
  std::string lr = jsonNumber("lr", r.lr, nonfinite);
  std::string norm = jsonNumber("grad_norm", r.gradNorm, nonfinite);
  if (!nonfinite.empty()) nonfinite = ", \"nonfinite\": {" + nonfinite + "}";
  std::string scaler;
  if (r.lossScale > 0)
    scaler = absl::StrFormat(", \"loss_scale\": %.9g, \"skipped\": %s", r.lossScale,
                             r.skipped ? "true" : "false");
  if (r.beta1 >= 0) scaler += absl::StrFormat(", \"beta1\": %.9g", r.beta1);
  std::fprintf(log,
               "{\"step\": %lld, \"loss\": %s, \"lr\": %s, \"grad_norm\": %s, "
               "\"time\": %.6f, \"samples_per_sec\": %.3f%s%s}\n",
               static_cast<long long>(r.step), loss.c_str(), lr.c_str(), norm.c_str(),
               r.seconds, r.samplesPerSec, scaler.c_str(), nonfinite.c_str());
  // A full disk must not turn the log into a silently empty file.
  if (std::fflush(log) != 0 || std::ferror(log))
    return absl::ResourceExhaustedError(
        absl::StrCat("writing the --log ", path, " failed: ", std::strerror(errno)));
  return absl::OkStatus();
}

/// h:mm:ss (m:ss under an hour).
std::string clockTime(double seconds) {
  int64_t t = seconds > 0 && std::isfinite(seconds) ? static_cast<int64_t>(seconds + 0.5) : 0;
  return t >= 3600 ? absl::StrFormat("%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60)
                   : absl::StrFormat("%d:%02d", t / 60, t % 60);
}

/// What rank 0 shows while training, as DeepSpeed's steps_per_print does: a
/// line every `every` steps (and at the last), on stdout; on a terminal
/// also a bar redrawn every step. The ETA extrapolates the steps this run
/// did.
class Progress {
public:
  Progress(const TrainOptions &o, bool root, int64_t every, int64_t firstStep)
      : on_(root && !o.quiet), terminal_(o.terminal), every_(every > 0 ? every : 10),
        total_(o.steps), first_(firstStep), start_(Clock::now()) {}

  void step(const StepRecord &r) {
    if (!on_) return;
    const double elapsed = secondsSince(start_);
    const double eta = elapsed / std::max<int64_t>(1, r.step - first_) * (total_ - r.step);
    const std::string scaler =
        r.lossScale > 0
            ? absl::StrFormat(" | loss_scale %g%s", r.lossScale, r.skipped ? " (skipped)" : "")
            : std::string();
    const std::string text = absl::StrFormat(
        "step %d/%d | loss %.5f | lr %.3e | grad_norm %.4g%s | %.1f samples/s | elapsed %s | "
        "ETA %s",
        r.step, total_, r.loss, r.lr, r.gradNorm, scaler, r.samplesPerSec, clockTime(elapsed),
        clockTime(eta));
    const bool line = r.step % every_ == 0 || r.step == total_;
    if (terminal_) {
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(kWidth * r.step / std::max<int64_t>(1, total_));
      std::printf("\r[%s%s] %s\033[K%s", std::string(filled, '#').c_str(),
                  std::string(kWidth - filled, '.').c_str(), text.c_str(), line ? "\n" : "");
    } else if (line) {
      std::printf("%s\n", text.c_str());
    }
    std::fflush(stdout);
  }

  /// Whether step `step` (1-based) gets a progress line.
  bool printsLine(int64_t step) const { return step % every_ == 0 || step == total_; }

private:
  bool on_, terminal_;
  int64_t every_, total_, first_;
  Clock::time_point start_;
};

/// DeepSpeed's wall_clock_breakdown: per optimizer step, averaged over the
/// steps since the last print, the forward and backward of the micro-steps
/// (split where the loss is computed), the optimizer step, and the
/// collectives' own time (they overlap compute where the plan allows; the
/// compute thread's waits for them are shown too).
class WallClock {
public:
  WallClock(Session &session, const ds::plan::Training &t, bool on) : session_(session), on_(on) {
    if (!on_) return;
    session.setTiming(true);
    // The forward ends with the step that computes the loss (the compiler
    // records it; without it the forward and backward are reported together).
    const ds::plan::Program *prog = session.program(t.micro_step_program());
    split_ = prog && prog->loss_step() > 0;
    if (split_) session.setMark(t.micro_step_program(), prog->loss_step() - 1);
  }
  void microStep() {
    if (!on_) return;
    const Session::RunTimes &r = session_.lastTimes();
    step_.fwd += split_ ? r.untilMark : r.total;
    step_.bwd += split_ ? r.total - r.untilMark : 0;
    step_.comm += r.collectives;
    step_.wait += r.waits;
  }
  void optimizerStep() {
    if (!on_) return;
    const Session::RunTimes &r = session_.lastTimes();
    step_.opt += r.total;
    step_.comm += r.collectives;
    step_.wait += r.waits;
    fwd_ += step_.fwd;
    bwd_ += step_.bwd;
    opt_ += step_.opt;
    comm_ += step_.comm;
    wait_ += step_.wait;
    last_ = step_;
    step_ = Times();
    ++steps_;
  }
  bool on() const { return on_; }
  /// The last optimizer step's times, in seconds, as DeepSpeed's monitors
  /// log them (elapsed_time_ms_*).
  std::vector<std::pair<std::string, double>> lastStepMs() const {
    return {{"forward", last_.fwd * 1e3}, {"backward", (last_.bwd) * 1e3},
            {"backward_inner", (last_.bwd - last_.wait) * 1e3},
            {"backward_allreduce", last_.comm * 1e3}, {"step", last_.opt * 1e3}};
  }
  /// The line to print (and a reset), or "" when off.
  std::string take() {
    if (!on_ || steps_ == 0) return "";
    const double k = 1e3 / steps_;
    std::string line =
        split_ ? absl::StrFormat("time (ms) | fwd: %.2f | bwd: %.2f | optimizer_step: %.2f | "
                                 "collectives: %.2f (compute waited %.2f)",
                                 fwd_ * k, bwd_ * k, opt_ * k, comm_ * k, wait_ * k)
               : absl::StrFormat("time (ms) | fwd+bwd: %.2f | optimizer_step: %.2f | "
                                 "collectives: %.2f (compute waited %.2f)",
                                 fwd_ * k, opt_ * k, comm_ * k, wait_ * k);
    fwd_ = bwd_ = opt_ = comm_ = wait_ = 0;
    steps_ = 0;
    return line;
  }

private:
  struct Times {
    double fwd = 0, bwd = 0, opt = 0, comm = 0, wait = 0;
  };
  Session &session_;
  bool on_, split_ = false;
  Times step_, last_;
  double fwd_ = 0, bwd_ = 0, opt_ = 0, comm_ = 0, wait_ = 0;
  int64_t steps_ = 0;
};

/// The stop signal any rank received, or 0: ranks agree on stopping (a
/// signal may reach them at different steps).
absl::StatusOr<int32_t> agreedStopSignal(Comm &comm) {
  int32_t sig = stopRequested();
  if (comm.size() > 1) DS_RETURN_IF_ERROR(comm.allReduce(&sig, 1, ds::plan::I32, ReduceOp::Max));
  return sig;
}

absl::Status stoppedBySignal(int32_t sig, int64_t step, const TrainOptions &o) {
  return absl::CancelledError(absl::StrFormat(
      "stopped by signal %d after step %lld%s", sig, static_cast<long long>(step),
      o.checkpointDir.empty() ? " (no --checkpoint-dir: nothing saved)"
                              : "; checkpoint saved, continue with --resume"));
}

/// The steps of one run over a checked plan: gradient accumulation, the
/// optimizer, checkpoints.
class TrainingRun {
public:
  TrainingRun(Session &session, const TrainOptions &o, DataLoader data)
      : session_(session), o_(o), p_(session.plan().plan()), t_(p_.training()),
        comm_(session.comm()), data_(std::move(data)),
        clock_(session, p_.training(), p_.training().wall_clock_breakdown()) {
    if (t_.precision() == "fp16") scaler_.emplace(t_.loss_scaler());
    if (t_.optimizer().kind() == ds::plan::Optimizer::ZERO_ONE_ADAM)
      zeroOne_.emplace(t_.optimizer());
    if (t_.comms_logger().enabled()) {
      comms_.emplace(t_.comms_logger());
      session_.setCommRecording(true);
    }
  }

  /// DeepSpeed's comms_logger table so far ("" when it is off or nothing
  /// was logged).
  std::string commsSummary() const { return comms_ ? comms_->summary() : std::string(); }

  /// Continues from a checkpoint's step counts and loss scaler.
  absl::Status restore(const ds::plan::CheckpointMeta &meta) {
    // Plans without a scaler apply every step they do (a non-finite one
    // stops the run).
    applied_ = meta.has_loss_scaler() ? meta.applied_steps() : meta.step();
    if (applied_ < 0 || applied_ > meta.step())
      return absl::InvalidArgumentError(absl::StrFormat(
          "the checkpoint says %d of its %d steps were applied", applied_, meta.step()));
    if (zeroOne_) { // replay the policy to the checkpoint's step
      double lrs = 0;
      for (int64_t k = 0; k < applied_; ++k) zeroOne_->next(learningRateAt(t_, k), lrs);
    }
    if (scaler_ && meta.has_loss_scaler()) return scaler_->restore(meta.loss_scaler(), meta.step());
    if (scaler_)
      std::fprintf(stderr, "ds-run: the checkpoint has no loss scaler state; starting from "
                           "the configured initial loss scale\n");
    return absl::OkStatus();
  }

  Comm &comm() { return comm_; }
  DataLoader &data() { return data_; }
  WallClock &clock() { return clock_; }
  bool root() const { return comm_.rank() == 0; }

  /// Runs `step` (0-based) and returns what to log for it.
  absl::StatusOr<StepRecord> runStep(int64_t step) {
    const ds::plan::FlopsProfiler &fp = t_.flops_profiler();
    profiling_ = fp.enabled() && step + 1 == fp.profile_step();
    profiled_.clear();
    session_.setProfiling(profiling_);
    auto t0 = Clock::now();
    const double lossScale = scaler_ ? scaler_->scale() : 0.0;
    DS_ASSIGN_OR_RETURN(double loss, accumulateGradients(step));
    // The schedule and Adam's step count advance with applied steps only
    // (DeepSpeed skips lr_scheduler.step() after an fp16 overflow).
    double lr = learningRateAt(t_, applied_);
    const int64_t appliedBefore = applied_;
    DS_ASSIGN_OR_RETURN(float gradNorm, applyOptimizer(applied_, lr));
    // The norm is all-reduced, so every rank decides alike.
    const bool overflow = !std::isfinite(gradNorm);
    if (scaler_) {
      absl::StatusOr<std::string> event = scaler_->update(overflow);
      if (!event.ok())
        return absl::Status(event.status().code(),
                            absl::StrCat("step ", step + 1, ": ", event.status().message()));
      if (!event->empty() && root() && !o_.quiet)
        std::fprintf(stderr, "ds-run: step %lld: %s\n", static_cast<long long>(step + 1),
                     event->c_str());
    }
    if (!overflow) ++applied_;
    if (comms_) {
      const std::string lines = comms_->add(session_.takeCommRecords());
      if (!lines.empty() && root() && !o_.quiet) {
        std::fputs(lines.c_str(), stdout);
        std::fflush(stdout);
      }
    }
    double secs = secondsSince(t0);
    if (profiling_) {
      session_.setProfiling(false);
      profiling_ = false;
      DS_RETURN_IF_ERROR(reportFlops(step + 1, secs));
    }
    StepRecord r{step + 1, loss, lr, gradNorm, secs, t_.train_batch_size() / std::max(secs, 1e-9)};
    r.lossScale = lossScale;
    r.skipped = overflow;
    if (programTakes(t_.optimizer_program(), "beta1")) r.beta1 = beta1At(t_, appliedBefore);
    return r;
  }

  /// The flops profiler's report of step `step` (1-based), on rank 0.
  absl::Status reportFlops(int64_t step, double seconds) {
    if (!root()) return absl::OkStatus();
    FlopsProfileInput in;
    in.steps = std::move(profiled_);
    in.seconds = seconds;
    in.step = step;
    in.worldSize = std::max<int64_t>(1, t_.world_size());
    in.microBatch = t_.micro_batch_size();
    for (const auto &b : p_.buffers())
      if (b.kind() == ds::plan::Buffer::STATE && b.io_name().rfind("param:", 0) == 0) {
        int64_t n = 1;
        for (int64_t d : b.shape()) n *= d;
        in.parameters += n;
      }
    const ds::plan::FlopsProfiler &fp = t_.flops_profiler();
    std::string report = flopsProfileReport(fp, in);
    if (fp.output_file().empty()) {
      std::fputs(report.c_str(), stdout);
      std::fflush(stdout);
      return absl::OkStatus();
    }
    DS_ASSIGN_OR_RETURN(std::FILE * f, openOutputStream(fp.output_file(), /*append=*/false,
                                                        "flops_profiler.output_file"));
    bool ok = std::fputs(report.c_str(), f) >= 0;
    ok = std::fclose(f) == 0 && ok;
    return ok ? absl::OkStatus()
              : absl::ResourceExhaustedError("writing flops_profiler.output_file failed");
  }

  /// DeepSpeed's Train/Samples/* events of a step, at DeepSpeed's sample
  /// counts: the loss is logged before the step counts its samples, the
  /// rest after.
  std::vector<MonitorEvent> monitorEvents(const StepRecord &r) const {
    const int64_t tbs = t_.train_batch_size();
    std::vector<MonitorEvent> e = {{"Train/Samples/train_loss", r.loss, (r.step - 1) * tbs},
                                   {"Train/Samples/lr", r.lr, r.step * tbs}};
    if (scaler_) e.push_back({"Train/Samples/loss_scale", r.lossScale, r.step * tbs});
    if (clock_.on())
      for (const auto &[name, ms] : clock_.lastStepMs())
        e.push_back({"Train/Samples/elapsed_time_ms_" + name, ms, r.step * tbs});
    return e;
  }

  /// Without a loss scaler a non-finite gradient norm ends the run (after
  /// the step is logged): the kernels already left the state untouched.
  absl::Status checkFinite(const StepRecord &r) const {
    if (!r.skipped || scaler_) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat(
        "the gradient norm is %s at step %lld: some gradient is inf or NaN. The update was "
        "not applied (parameters and optimizer state are those before this step) and no "
        "checkpoint is written for it; lower the learning rate, check the data, or train with "
        "fp16 loss scaling",
        std::isnan(r.gradNorm) ? "NaN" : "infinite", static_cast<long long>(r.step)));
  }

  /// Saves after `done` steps when a directory is given and it is time:
  /// every --checkpoint-every steps, at the end, and when stopping.
  absl::Status maybeSave(int64_t done, bool stopping) {
    bool due = (o_.checkpointEvery > 0 && done % o_.checkpointEvery == 0) || done == o_.steps;
    if (o_.checkpointDir.empty() || !(due || stopping)) return absl::OkStatus();
    // Every rank takes part in the tag check, also where rank 0 alone writes.
    DS_RETURN_IF_ERROR(validateTag(done));
    return root() || perRankState() ? save(done) : absl::OkStatus();
  }

private:
  // ZeRO >= 1 or tensor parallelism: state differs per rank, so every rank
  // saves. Otherwise every rank holds the same state and rank 0 saves it.
  bool perRankState() const {
    return (t_.zero_stage() > 0 || tensorParallel(t_) > 1) && comm_.size() > 1;
  }

  /// The micro-batches of one step through the micro-step program (which
  /// accumulates gradients in state); returns their mean loss.
  absl::StatusOr<double> accumulateGradients(int64_t step) {
    const int64_t gas = std::max<int64_t>(1, t_.gradient_accumulation_steps());
    double lossSum = 0;
    for (int64_t m = 0; m < gas; ++m) {
      std::map<std::string, HostArray> in = data_.next();
      if (scaler_) in["loss_scale"] = scalarF32(static_cast<float>(scaler_->scale()));
      if (!t_.rng_input().empty())
        in[t_.rng_input()] = scalarI64(dropoutKey(o_.seed, dataParallelRank(comm_, t_), step * gas + m));
      absl::StatusOr<NamedArrays> ran = session_.run(t_.micro_step_program(), in);
      // A kernel's complaint about the data (a label out of range) names
      // the plan's step; say which training step and samples too.
      if (!ran.ok())
        return absl::Status(ran.status().code(),
                            absl::StrCat("training step ", step + 1, ", micro-batch ", m + 1, " (",
                                         data_.describeLast(), "): ", ran.status().message()));
      NamedArrays out = std::move(*ran);
      clock_.microStep();
      if (profiling_)
        profiled_.insert(profiled_.end(), session_.lastProfile().begin(), session_.lastProfile().end());
      float loss = scalarOf(out, t_.loss_output());
      // fp16: a forward that overflows shows as non-finite gradients too,
      // and the scaler skips the step.
      if (!std::isfinite(loss) && !scaler_) {
        // Micro-batches counted from 1 with the samples they hold, as the
        // data errors above say them.
        if (std::string labels = allLabelsIgnored(in); !labels.empty())
          return absl::InvalidArgumentError(absl::StrFormat(
              "the loss is NaN at step %lld (micro-batch %lld, %s): every label in '%s' is "
              "the ignore index, so the mean is over no labels",
              static_cast<long long>(step + 1), static_cast<long long>(m + 1),
              data_.describeLast(), labels));
        return absl::InternalError(absl::StrFormat(
            "the loss is %f at step %lld (micro-batch %lld, %s): training diverged or the data "
            "is bad",
            loss, static_cast<long long>(step + 1), static_cast<long long>(m + 1),
            data_.describeLast()));
      }
      lossSum += loss;
    }
    return lossSum / gas;
  }

  /// The labels input of a cross-entropy loss in `in` whose every value is
  /// its ignore_index (what makes the loss 0/0), or "".
  std::string allLabelsIgnored(const std::map<std::string, HostArray> &in) const {
    const ds::plan::Program *micro = session_.program(t_.micro_step_program());
    if (!micro) return "";
    for (const ds::plan::Step &st : micro->steps()) {
      auto ignore = st.attrs().find("ignore_index");
      // The loss alone, or with its gradient (ds-fuse-softmax's form).
      const bool loss = st.kernel() == "softmax_cross_entropy" ||
                        (st.kernel() == "softmax_cross_entropy_grad" && st.outputs_size() == 2);
      if (!loss || st.inputs_size() < 2 || ignore == st.attrs().end())
        continue;
      const std::string &name = p_.buffers(st.inputs(1)).io_name();
      auto it = in.find(name);
      if (it == in.end() || it->second.numel() == 0) continue;
      TensorView v = const_cast<HostArray &>(it->second).view();
      bool all = v.dtype == ds::plan::I64 || v.dtype == ds::plan::I32;
      for (int64_t i = 0; all && i < v.numel; ++i)
        all = (v.dtype == ds::plan::I64 ? v.as<int64_t>()[i] : v.as<int32_t>()[i]) ==
              ignore->second.i();
      if (all) return name;
    }
    return "";
  }

  /// Whether program `name` has an input called `input` (a scalar only
  /// some configurations' programs take).
  bool programTakes(const std::string &name, const std::string &input) const {
    for (const auto &prog : p_.programs())
      if (prog.name() == name)
        for (uint32_t id : prog.inputs())
          if (p_.buffers(id).io_name() == input) return true;
    return false;
  }

  /// The optimizer program with this step's scalars (`step`: updates
  /// applied before this one); returns the gradient norm.
  absl::StatusOr<float> applyOptimizer(int64_t step, double lr) {
    std::map<std::string, HostArray> scalars;
    scalars["lr"] = scalarF32(static_cast<float>(lr));
    const auto kind = t_.optimizer().kind();
    std::string program = t_.optimizer_program();
    // DeepSpeed's OnebitAdam: step 1 initializes only; then Adam on
    // averaged gradients (no bias correction: adamScalars' plain lr) until
    // a step ends with its count >= freeze_step (checked from step 2 on);
    // then each rank's own gradients with the momentum averaged by the
    // 1-bit all-reduce.
    // OnebitLamb alike, its LAMB warm-up copying v into the fresh variance
    // at freeze_step, its first compressed step fixing the scaling.
    const bool lamb = kind == ds::plan::Optimizer::ONEBIT_LAMB;
    const int64_t freeze = std::max<int64_t>(2, t_.optimizer().freeze_step());
    const bool compressed =
        (kind == ds::plan::Optimizer::ONEBIT_ADAM || lamb) && step >= freeze;
    if ((kind == ds::plan::Optimizer::ONEBIT_ADAM || lamb) && !compressed)
      scalars["skip"] = scalarF32(step == 0 ? 1.0f : 0.0f);
    if (lamb && !compressed)
      scalars["fresh"] =
          scalarF32(step >= 1 && step + 1 == t_.optimizer().freeze_step() ? 1.0f : 0.0f);
    if (lamb && compressed) scalars["first"] = scalarF32(step == freeze ? 1.0f : 0.0f);
    // DeepSpeed's ZeroOneAdam: its policy picks the step's program.
    bool zeroOneOwn = false;
    if (zeroOne_) {
      double lrs = 0;
      const ZeroOnePolicy::Step z = zeroOne_->next(lr, lrs);
      zeroOneOwn = z != ZeroOnePolicy::Step::Init && z != ZeroOnePolicy::Step::Variance;
      if (!zeroOneOwn) scalars["skip"] = scalarF32(z == ZeroOnePolicy::Step::Init ? 1.0f : 0.0f);
      if (z == ZeroOnePolicy::Step::Gradient) program = t_.gradient_compressed_program();
      if (z == ZeroOnePolicy::Step::Local) program = t_.local_step_program();
      if (z == ZeroOnePolicy::Step::Sync) {
        program = t_.sync_step_program();
        scalars["lrs"] = scalarF32(static_cast<float>(lrs));
      }
    }
    if (compressed) {
      program = t_.compressed_optimizer_program();
    } else if (zeroOneOwn || lamb) {
      // The learning rate (and a sync's summed rates) alone.
    } else if (kind == ds::plan::Optimizer::SGD) {
      scalars["first"] = scalarF32(step == 0 ? 1.0f : 0.0f);
    } else if (kind == ds::plan::Optimizer::LION || kind == ds::plan::Optimizer::ADAGRAD) {
      // The learning rate alone (neither has a bias correction).
    } else {
      const double beta1 = beta1At(t_, step);
      AdamScalars a = adamScalars(t_.optimizer(), lr, step + 1, beta1);
      scalars["step_size"] = scalarF32(static_cast<float>(a.stepSize));
      scalars["bias2_sqrt"] = scalarF32(static_cast<float>(a.bias2Sqrt));
      if (programTakes(t_.optimizer_program(), "beta1"))
        scalars["beta1"] = scalarF32(static_cast<float>(beta1));
      if (kind == ds::plan::Optimizer::MUON)
        scalars["muon_lr"] = scalarF32(
            static_cast<float>(learningRateAt(t_, step, t_.optimizer().muon_lr())));
    }
    if (scaler_) scalars["inv_loss_scale"] = scalarF32(static_cast<float>(1.0 / scaler_->scale()));
    DS_ASSIGN_OR_RETURN(NamedArrays out, session_.run(program, scalars));
    clock_.optimizerStep();
    if (profiling_)
      profiled_.insert(profiled_.end(), session_.lastProfile().begin(), session_.lastProfile().end());
    return scalarOf(out, "grad_norm");
  }

  absl::Status save(int64_t atStep) {
    ds::plan::CheckpointMeta meta;
    meta.set_format_version(1);
    meta.set_step(atStep);
    meta.set_data_cursor(data_.cursor());
    meta.set_seed(o_.seed);
    meta.set_shuffle(o_.shuffle);
    meta.set_plan_source(p_.source());
    meta.set_model_hash(modelHash(p_));
    meta.set_plan_hash(planHash(p_));
    meta.set_world_size(t_.world_size());
    meta.set_zero_stage(t_.zero_stage());
    meta.set_applied_steps(applied_);
    if (scaler_) *meta.mutable_loss_scaler() = scaler_->state();
    CheckpointOptions co;
    if (perRankState()) co.perRank = &comm_;
    return saveCheckpoint(o_.checkpointDir, meta, session_, co);
  }

  /// DeepSpeed's checkpoint tag validation: the ranks compare the tag they
  /// save under (the step's directory name) by the smallest and largest
  /// of its hash; a mismatch warns (default) or, with "fail", stops.
  absl::Status validateTag(int64_t atStep) {
    const std::string &mode = t_.checkpoint_tag_validation();
    if (mode == "ignore" || comm_.size() == 1) return absl::OkStatus();
    const std::string tag = absl::StrFormat("step_%08d", atStep);
    const int64_t hash = static_cast<int64_t>(std::hash<std::string>()(tag) >> 1);
    int64_t lo = hash, hi = hash;
    DS_RETURN_IF_ERROR(comm_.allReduce(&lo, 1, ds::plan::I64, ReduceOp::Min));
    DS_RETURN_IF_ERROR(comm_.allReduce(&hi, 1, ds::plan::I64, ReduceOp::Max));
    if (lo == hi) return absl::OkStatus();
    const std::string msg = absl::StrFormat(
        "[rank=%d] the checkpoint tag name '%s' is not consistent across all ranks (they are at "
        "different steps: were they resumed from different checkpoint directories?)",
        comm_.rank(), tag);
    if (mode == "fail")
      return absl::FailedPreconditionError(msg + " (checkpoint.tag_validation: Fail)");
    std::fprintf(stderr, "ds-run: warning: %s\n", msg.c_str());
    return absl::OkStatus();
  }

  Session &session_;
  const TrainOptions &o_;
  const ds::plan::Plan &p_;
  const ds::plan::Training &t_;
  Comm &comm_;
  DataLoader data_;
  WallClock clock_;
  bool profiling_ = false;             // this step is the flops profiler's
  std::vector<StepTiming> profiled_;   // its steps' timings and FLOPs
  std::optional<LossScaler> scaler_;
  std::optional<CommsLogger> comms_; // comms_logger
  std::optional<ZeroOnePolicy> zeroOne_; // ZeroOneAdam's step policy
  int64_t applied_ = 0; // optimizer updates applied (fp16 overflows skip some)
};

} // namespace

absl::Status train(Session &session, const TrainOptions &o) {
  DS_RETURN_IF_ERROR(checkTrainable(session));
  // ZeRO-Infinity: the swap file exists (and its space is reserved) before
  // the first step, not at the first swap.
  DS_RETURN_IF_ERROR(session.openSwapper());
  DS_ASSIGN_OR_RETURN(DataLoader data, openData(session, o));
  // Data-parallel ranks read one data set in one order: a rank given
  // another file (or --shuffle / --seed) would train on other samples.
  uint64_t dataId = fnv1a(&o.seed, sizeof(o.seed));
  const int64_t samples = data.samples();
  dataId = fnv1a(&samples, sizeof(samples), dataId);
  dataId = fnv1a(&o.shuffle, sizeof(o.shuffle), dataId);
  DS_RETURN_IF_ERROR(agreeAcrossRanks(
      session.comm(), dataId, "different data (sample counts, --shuffle or --seed)",
      absl::StrCat(o.dataPath, ": ", samples, " samples, --seed ", o.seed,
                   o.shuffle ? ", --shuffle" : "")));
  if (session.comm().size() > 1) {
    const uint64_t content = data.contentHash();
    DS_RETURN_IF_ERROR(agreeAcrossRanks(
        session.comm(), content, "different data (the arrays' contents differ)",
        absl::StrFormat("%s: checksum %016x", o.dataPath, content)));
  }
  TrainingRun run(session, o, std::move(data));
  // The checkpoint directory is this run's (and writable) before anything
  // is read from it.
  std::unique_ptr<CheckpointLock> lock;
  if (!o.checkpointDir.empty()) {
    DS_ASSIGN_OR_RETURN(lock, CheckpointLock::acquire(o.checkpointDir, run.comm()));
  }
  DS_ASSIGN_OR_RETURN(std::optional<ds::plan::CheckpointMeta> resumed,
                      resume(session, o, run.data()));
  // After the resume agreement, which names a disagreement more precisely.
  if (lock) DS_RETURN_IF_ERROR(lock->checkSharedByRanks(o.checkpointDir, run.comm()));
  if (lock && !o.resume) DS_RETURN_IF_ERROR(lock->checkNoEarlierRun(o.checkpointDir, run.comm()));
  int64_t step = resumed ? resumed->step() : 0;
  // --steps is the total from the start of training, as DeepSpeed's
  // train_iters: a checkpoint past it would silently train nothing.
  if (step > o.steps)
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint in ", o.checkpointDir, " is at step ", step, ", past --steps ", o.steps,
        " (--steps counts from the start of training; raise it to train further)"));
  if (resumed && step == o.steps && run.root())
    std::fprintf(stderr, "ds-run: the checkpoint is at step %lld = --steps: no step to run\n",
                 static_cast<long long>(step));
  if (resumed) DS_RETURN_IF_ERROR(run.restore(*resumed));
  DS_ASSIGN_OR_RETURN(LogFile log, openLog(o, run.root()));
  DS_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Monitor>> monitors,
                      openMonitors(session.plan().plan().training(), run.root()));

  // Preemption: finish the step in flight, save, and stop.
  armGracefulStop(true);
  struct Disarm {
    ~Disarm() { armGracefulStop(false); }
  } disarm;
  Progress progress(o, run.root(), session.plan().plan().training().steps_per_print(), step);
  for (; step < o.steps; ++step) {
    DS_ASSIGN_OR_RETURN(StepRecord record, run.runStep(step));
    if (log) DS_RETURN_IF_ERROR(logStep(log.get(), o.logPath, record));
    for (auto &monitor : monitors) DS_RETURN_IF_ERROR(monitor->write(run.monitorEvents(record)));
    progress.step(record);
    if (progress.printsLine(record.step)) {
      std::string breakdown = run.clock().take();
      if (!breakdown.empty() && run.root() && !o.quiet) std::printf("%s\n", breakdown.c_str());
      std::string comms = run.commsSummary();
      if (!comms.empty() && run.root() && !o.quiet) std::printf("%s", comms.c_str());
    }
    DS_RETURN_IF_ERROR(run.checkFinite(record));
    DS_ASSIGN_OR_RETURN(int32_t sig, agreedStopSignal(run.comm()));
    DS_RETURN_IF_ERROR(run.maybeSave(step + 1, sig != 0));
    if (sig && step + 1 != o.steps) return stoppedBySignal(sig, step + 1, o);
  }
  return absl::OkStatus();
}

} // namespace ds::rt
