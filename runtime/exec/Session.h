// Runs the programs of a loaded plan on a backend. Every buffer is bound to
// memory once (arena, weights, state, inputs, outputs) and every step of
// every program is prepared (which checks it) at creation; run() then only
// executes steps. Programs share the arena (they run one at a time) and the
// state buffers (parameters, gradients, optimizer moments).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/Backend.h"
#include "runtime/comm/Comm.h"
#include "runtime/comm/CommWorker.h"
#include "runtime/io/NvmeSwapper.h"
#include "runtime/plan/PlanFile.h"

namespace ds::rt {

using NamedArrays = std::vector<std::pair<std::string, HostArray>>;

struct StepTiming {
  std::string kernel;
  std::string location;
  double seconds = 0;
  double flops = 0; // exec/Flops.h: GEMM-like kernels only
};

/// One span of a --trace timeline: a kernel or a collective on a stream.
struct TraceEvent {
  std::string name, location;
  int stream = 0;          // 0 compute, 1 communication
  double startUs = 0, durUs = 0;
  uint64_t bytes = 0;      // bytes the step reads and writes (collectives: sent)
};

class Session {
public:
  ~Session();
  /// `comm` is the world communicator; null means one local rank. The
  /// plan's world size must equal its size.
  /// `deviceBudget` (bytes; 0: the plan's device_memory_budget) bounds
  /// what this rank may hold in device memory: a plan needing more is
  /// refused before anything is allocated.
  /// `nvmePath` (non-empty) replaces the plan's nvme_path: where this
  /// rank's swap file goes (ZeRO-Infinity).
  static absl::StatusOr<std::unique_ptr<Session>> create(const LoadedPlan &plan,
                                                         Backend &backend,
                                                         Comm *comm = nullptr,
                                                         uint64_t deviceBudget = 0,
                                                         const std::string &nvmePath = "");

  /// Bytes this rank holds per memory space (PlanFile.h), fixed at bind.
  const SpaceBytes &spaceBytes() const { return spaceBytes_; }
  uint64_t deviceBudget() const { return deviceBudget_; }
  const Backend &backend() const { return backend_; }
  /// Bytes moved by ds.offload (device to host) and ds.fetch (host to
  /// device) steps so far.
  uint64_t offloadedBytes() const { return transferred_[0]; }
  uint64_t fetchedBytes() const { return transferred_[1]; }
  /// The NVMe swapper (null when no state is on NVMe or none was swapped
  /// out yet).
  const NvmeSwapper *swapper() const { return swapper_.get(); }
  /// Creates this rank's swap file now (a training run does at its start,
  /// so a missing directory or a full disk is found before the first step);
  /// otherwise the first swap-out does.
  absl::Status openSwapper();
  absl::Status stageNvmeWeights();

  /// Binds the program's inputs by ONNX name (every input, exact dtype and
  /// shape), runs it and returns its outputs in graph order.
  absl::StatusOr<NamedArrays> run(const std::string &program,
                                  const std::map<std::string, HostArray> &inputs);

  const plan::Program *program(const std::string &name) const { return plan_.findProgram(name); }
  const LoadedPlan &plan() const { return plan_; }

  /// State buffers by name (parameters, optimizer moments, ...), for
  /// checkpoints and export.
  std::vector<std::string> stateNames() const;
  absl::StatusOr<HostArray> readState(const std::string &name);
  absl::Status writeState(const std::string &name, const HostArray &value);

  /// Where the time of each run went (wall_clock_breakdown), when
  /// setTiming(true): the whole run, until the end of step `mark` (the
  /// forward's last, for the training step), collectives' own time on the
  /// communication thread (overlapping compute), and the compute thread's
  /// waits for them.
  struct RunTimes {
    double total = 0, untilMark = 0, collectives = 0, waits = 0;
  };
  void setTiming(bool on) { timing_ = on; }
  void setMark(const std::string &program, int64_t step) { marks_[program] = step; }
  const RunTimes &lastTimes() const { return times_; }

  /// Each collective of each run as it ends (comms_logger), when
  /// setCommRecording(true): its kernel, what it serves (its program, and
  /// the ONNX node when known), the bytes of its input, its own time and
  /// its group's ranks.
  struct CommRecord {
    std::string kernel, location;
    uint64_t bytes = 0;
    double seconds = 0;
    int ranks = 1;
  };
  void setCommRecording(bool on) { recordComms_ = on; }
  /// The records since the last call, in the order the collectives ended.
  std::vector<CommRecord> takeCommRecords();

  void setProfiling(bool on) { profiling_ = on; }
  const std::vector<StepTiming> &lastProfile() const { return profile_; }
  /// Records every step of every run as a TraceEvent (see takeTrace()).
  void setTracing(bool on) { tracing_ = on; }
  std::vector<TraceEvent> takeTrace();
  Comm &comm() { return *comm_; }

private:
  Session(const LoadedPlan &plan, Backend &backend) : plan_(plan), backend_(backend) {}
  absl::Status bind();
  absl::StatusOr<Comm *> groupFor(const std::string &axes);
  void record(TraceEvent e);
  const plan::Buffer *stateBuffer(const std::string &name) const;

  const LoadedPlan &plan_;
  Backend &backend_;
  void *arena_ = nullptr;
  void *hostArena_ = nullptr; // ZeRO-Offload: intermediates in host memory
  uint64_t deviceBudget_ = 0;
  SpaceBytes spaceBytes_;
  std::string nvmePath_;
  std::unique_ptr<NvmeSwapper> swapper_;
  std::mutex swapMu_;
  std::vector<uint64_t> nvmeRegions_;        // bytes, by region
  std::vector<const uint8_t *> nvmeInit_;    // initial bytes (null: zeros), by region
  absl::Status swapIn(uint32_t region, void *host);
  absl::Status swapOut(uint32_t region, const void *host);
  /// Several swaps of one direction as one stream of I/O (a sub-group's).
  absl::Status swapMany(const std::vector<NvmeSwapper::Transfer> &swaps, bool in);
  std::map<uint32_t, uint32_t> nvmeRegion_; // NVME buffer id -> swapper region
  absl::StatusOr<NvmeSwapper::Transfer> prepareSwap(const plan::Step &step, const std::string &where);
  /// Consecutive swaps of one direction run as one batch, submitted by its
  /// first step (the others are placeholders the hazard tracking waits on);
  /// by program and step: the end of the batch a step starts, or 0.
  std::map<std::string, std::vector<size_t>> batchEnd_;
  std::map<std::string, std::vector<std::pair<int, uint64_t>>> transfers_; // by program, step
  uint64_t transferred_[2] = {0, 0};
  std::vector<std::pair<void *, plan::MemorySpace>> owned_;
  std::vector<TensorView> views_;                           // by buffer id
  std::map<std::string, std::vector<PreparedStep>> steps_; // by program
  bool profiling_ = false;
  std::vector<StepTiming> profile_;
  bool timing_ = false;
  RunTimes times_;
  std::map<std::string, int64_t> marks_;
  std::mutex timesMu_;

  // Multi-rank: the world, one communicator per set of mesh axes, and the
  // communication thread with the byte ranges its in-flight steps touch.
  std::unique_ptr<Comm> ownedComm_;
  Comm *comm_ = nullptr;
  std::map<std::string, std::unique_ptr<Comm>> groups_;
  std::vector<std::vector<uint8_t>> scratch_;
  struct Range { const uint8_t *lo, *hi; bool write; };
  std::map<std::string, std::vector<std::vector<Range>>> ranges_; // by program, step
  std::map<std::string, std::vector<uint8_t>> isComm_; // by program, step: 1 comm, 2 I/O thread
  std::map<std::string, std::vector<uint64_t>> stepBytes_;        // by program, step
  std::map<std::string, std::vector<int>> stepRanks_; // by program, step: a collective's group size
  bool recordComms_ = false;
  std::mutex commRecordsMu_;
  std::vector<CommRecord> commRecords_;
  std::unique_ptr<CommWorker> worker_;
  std::unique_ptr<CommWorker> ioWorker_; // NVMe swaps (stream 2)
  bool tracing_ = false;
  std::mutex traceMu_;
  std::vector<TraceEvent> trace_;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
};

} // namespace ds::rt
