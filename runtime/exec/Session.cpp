#include "runtime/exec/Session.h"

#include "runtime/exec/Flops.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/exec/Collectives.h"
#include "runtime/io/Npy.h"

namespace ds::rt {

Session::~Session() {
  // Threads first: a queued collective or swap may still touch the buffers.
  ioWorker_.reset();
  worker_.reset();
  for (auto &[ptr, space] : owned_) backend_.release(ptr, space);
}

absl::StatusOr<std::unique_ptr<Session>> Session::create(const LoadedPlan &plan,
                                                         Backend &backend, Comm *comm,
                                                         uint64_t deviceBudget,
                                                         const std::string &nvmePath) {
  std::unique_ptr<Session> s(new Session(plan, backend));
  s->nvmePath_ = nvmePath.empty() ? plan.plan().nvme().path() : nvmePath;
  s->deviceBudget_ = deviceBudget ? deviceBudget : plan.plan().device_memory_budget();
  if (!comm) {
    DS_ASSIGN_OR_RETURN(s->ownedComm_, createComm(CommOptions{"local"}));
    comm = s->ownedComm_.get();
  }
  s->comm_ = comm;
  uint32_t world = std::max<uint32_t>(1, plan.plan().world_size());
  if (static_cast<uint32_t>(comm->size()) != world) {
    std::string mesh;
    for (const auto &a : plan.plan().mesh().axes())
      absl::StrAppend(&mesh, mesh.empty() ? " (mesh " : ", ", a.name(), "=", a.size());
    if (!mesh.empty()) mesh += ")";
    return absl::FailedPreconditionError(absl::StrCat(
        "plan ", plan.path(), " was compiled for ", world, " ranks", mesh, " but runs on ",
        comm->size(), "; launch it with mpirun -np ", world));
  }
  if (comm->rank() != plan.rank())
    return absl::InternalError("the plan was loaded for another rank");
  DS_RETURN_IF_ERROR(s->bind());
  DS_RETURN_IF_ERROR(s->stageNvmeWeights());
  return s;
}

/// ZeRO-Inference from NVMe: an inference plan's NVMe state is its weights
/// (ds-offload weights=nvme), read-only. They go to the drive once, now,
/// so every swap-in reads the drive, not the plan's bytes in memory
/// (training plans' NVMe state starts as its initial value and is written
/// by the steps).
absl::Status Session::stageNvmeWeights() {
  if (plan_.plan().has_training()) return absl::OkStatus();
  std::vector<NvmeSwapper::Transfer> stage;
  for (const auto &[id, region] : nvmeRegion_)
    if (nvmeInit_[region])
      stage.push_back({region, const_cast<uint8_t *>(nvmeInit_[region]),
                       plan_.plan().buffers(id).io_name()});
  if (stage.empty()) return absl::OkStatus();
  DS_RETURN_IF_ERROR(openSwapper());
  return swapper_->writeMany(stage);
}

/// The communicator of the ranks that differ from this one only along
/// `axes` (comma-separated mesh axis names). Ranks are row-major over the
/// mesh axes; made once per axis set, in plan order on every rank (split is
/// collective).
absl::StatusOr<Comm *> Session::groupFor(const std::string &axes) {
  auto it = groups_.find(axes);
  if (it != groups_.end()) return it->second.get();
  const auto &mesh = plan_.plan().mesh();
  std::vector<std::string> names = absl::StrSplit(axes, ',', absl::SkipEmpty());
  if (names.empty()) return absl::InvalidArgumentError("a collective names no mesh axes");
  std::vector<int64_t> coord(mesh.axes_size());
  int64_t rest = comm_->rank();
  for (int i = mesh.axes_size() - 1; i >= 0; --i) {
    coord[i] = rest % mesh.axes(i).size();
    rest /= mesh.axes(i).size();
  }
  int64_t color = 0, key = 0;
  for (int i = 0; i < mesh.axes_size(); ++i) {
    bool inGroup = std::find(names.begin(), names.end(), mesh.axes(i).name()) != names.end();
    (inGroup ? key : color) = (inGroup ? key : color) * mesh.axes(i).size() + coord[i];
  }
  for (const std::string &n : names) {
    bool known = false;
    for (const auto &a : mesh.axes()) known |= a.name() == n;
    if (!known) return absl::InvalidArgumentError("collective over unknown mesh axis '" + n + "'");
  }
  DS_ASSIGN_OR_RETURN(std::unique_ptr<Comm> g,
                      comm_->split(static_cast<int>(color), static_cast<int>(key)));
  return (groups_[axes] = std::move(g)).get();
}

void Session::record(TraceEvent e) {
  std::lock_guard<std::mutex> lock(traceMu_);
  trace_.push_back(std::move(e));
}

std::vector<Session::CommRecord> Session::takeCommRecords() {
  std::lock_guard<std::mutex> lock(commRecordsMu_);
  std::vector<CommRecord> out;
  out.swap(commRecords_);
  return out;
}

std::vector<TraceEvent> Session::takeTrace() {
  std::lock_guard<std::mutex> lock(traceMu_);
  return std::move(trace_);
}

absl::Status Session::bind() {
  const plan::Plan &p = plan_.plan();
  spaceBytes_ = ::ds::rt::spaceBytes(p);
  DS_RETURN_IF_ERROR(checkDeviceBudget(spaceBytes_, deviceBudget_));
  DS_ASSIGN_OR_RETURN(arena_, backend_.allocate(p.arena_bytes(), plan::DEVICE));
  owned_.push_back({arena_, plan::DEVICE});
  if (p.host_arena_bytes()) {
    DS_ASSIGN_OR_RETURN(hostArena_, backend_.allocate(p.host_arena_bytes(), plan::HOST));
    owned_.push_back({hostArena_, plan::HOST});
  }
  views_.resize(p.buffers_size());
  // ZeRO-Infinity: state on NVMe lives in this rank's swap file, one region
  // per buffer. Its views get addresses no memory has (above 2^60, apart
  // by their sizes) so the hazard tracking still tells them apart; only
  // swap steps touch them (the loader checks).
  // The swap file itself is made at first use (openSwapper): a run that
  // never swaps (inference of a plan whose optimizer state is on NVMe)
  // needs no nvme_path. Until a region is written it reads as its initial
  // value: zeros, or its bytes in the weight section.
  for (const auto &b : p.buffers())
    if (b.space() == plan::NVME) {
      nvmeRegion_[b.id()] = static_cast<uint32_t>(nvmeRegions_.size());
      nvmeRegions_.push_back(b.size_bytes());
      nvmeInit_.push_back(b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS ? plan_.weightData(b)
                                                                             : nullptr);
    }
  uintptr_t nvmeAddress = uintptr_t(1) << 60;
  for (const auto &b : p.buffers()) {
    TensorView &v = views_[b.id()];
    v.dtype = b.dtype();
    v.shape.assign(b.shape().begin(), b.shape().end());
    v.numel = static_cast<int64_t>(b.size_bytes() / dtypeSize(b.dtype()));
    switch (b.kind()) {
    case plan::Buffer::ARENA:
      v.data = static_cast<uint8_t *>(b.space() == plan::HOST ? hostArena_ : arena_) + b.offset();
      break;
    case plan::Buffer::WEIGHT: {
      if (backend_.sharesHostMemory() || b.space() == plan::HOST) {
        // Kernels never write WEIGHT buffers (the loader rejects such plans).
        v.data = const_cast<uint8_t *>(plan_.weightData(b));
      } else {
        DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), plan::DEVICE));
        owned_.push_back({v.data, plan::DEVICE});
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, plan_.weightData(b), b.size_bytes()));
      }
      break;
    }
    case plan::Buffer::STATE: {
      if (b.space() == plan::NVME) {
        v.data = reinterpret_cast<void *>(nvmeAddress);
        nvmeAddress += b.size_bytes() + 64;
        break;
      }
      // State is written by programs: its own memory, initialized once, in
      // its space (host for offloaded optimizer state).
      DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), b.space()));
      owned_.push_back({v.data, b.space()});
      if (b.space() == plan::HOST) {
        if (b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS)
          std::memcpy(v.data, plan_.weightData(b), b.size_bytes());
        else
          std::memset(v.data, 0, b.size_bytes());
      } else if (b.state_init() == plan::Buffer::STATE_INIT_WEIGHTS) {
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, plan_.weightData(b), b.size_bytes()));
      } else {
        std::vector<uint8_t> zeros(b.size_bytes(), 0);
        DS_RETURN_IF_ERROR(backend_.copyFromHost(v.data, zeros.data(), zeros.size()));
      }
      break;
    }
    case plan::Buffer::INPUT:
    case plan::Buffer::OUTPUT: {
      DS_ASSIGN_OR_RETURN(v.data, backend_.allocate(b.size_bytes(), plan::DEVICE));
      owned_.push_back({v.data, plan::DEVICE});
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("buffer ", b.id(), " has no kind"));
    }
  }
  for (const auto &prog : p.programs()) {
    auto &prepared = steps_[prog.name()];
    auto &ranges = ranges_[prog.name()];
    auto &comm = isComm_[prog.name()];
    auto &bytes = stepBytes_[prog.name()];
    auto &stepRanks = stepRanks_[prog.name()];
    // Swap steps (direction: 1 in, 0 out), by step; -1 for the others.
    std::vector<std::pair<int, NvmeSwapper::Transfer>> swaps;
    for (const auto &step : prog.steps()) {
      std::vector<TensorView> ins, outs;
      std::vector<Range> rs;
      uint64_t touched = 0;
      for (uint32_t id : step.inputs()) {
        ins.push_back(views_[id]);
        auto *lo = static_cast<const uint8_t *>(views_[id].data);
        rs.push_back({lo, lo + p.buffers(id).size_bytes(), false});
        touched += p.buffers(id).size_bytes();
      }
      for (uint32_t id : step.outputs()) {
        outs.push_back(views_[id]);
        auto *lo = static_cast<const uint8_t *>(views_[id].data);
        rs.push_back({lo, lo + p.buffers(id).size_bytes(), true});
        touched += p.buffers(id).size_bytes();
      }
      ranges.push_back(std::move(rs));
      // ZeRO-Offload transfers, counted as they run (--rank-report).
      transfers_[prog.name()].push_back(
          step.kernel() == "offload" || step.kernel() == "fetch"
              ? std::make_pair(step.kernel() == "offload" ? 0 : 1,
                               outs.empty() ? uint64_t(0) : p.buffers(step.outputs(0)).size_bytes())
              : std::make_pair(-1, uint64_t(0)));
      bool collective = isCollective(step.kernel());
      // Stream 1 runs on the communication thread; a collective on stream 0
      // (shard_slice, which only copies) runs in order like a kernel.
      comm.push_back(collective && step.stream() == 1);
      // A collective's bytes are its input's; the 1-bit all-reduce sends
      // one bit per element of its padded buffer (the worker error's); a
      // quantized all-gather or reduce-scatter (ZeRO++) a byte per element
      // of its input and a 4-byte scale per block of each rank's piece.
      auto block = step.attrs().find("quantize_block");
      const int64_t qBlock = block == step.attrs().end() ? 0 : block->second.i();
      auto quantizedBytes = [&]() -> uint64_t {
        const int64_t piece = std::max<int64_t>(std::min(ins[0].numel, outs[0].numel), 1);
        const int64_t pieces = ins[0].numel / piece; // the input's: 1 gathered, n scattered
        return static_cast<uint64_t>(ins[0].numel) +
               4 * static_cast<uint64_t>(pieces * ((piece + qBlock - 1) / qBlock));
      };
      bytes.push_back(step.kernel() == "compressed_all_reduce" && ins.size() > 1
                          ? p.buffers(step.inputs(1)).size_bytes() / 32
                      : collective && qBlock > 0 && !ins.empty() && !outs.empty() ? quantizedBytes()
                      : collective && !ins.empty() ? p.buffers(step.inputs(0)).size_bytes()
                                                   : touched);
      absl::StatusOr<PreparedStep> ps = absl::UnknownError("");
      if (!collective) stepRanks.push_back(0);
      if (collective) {
        auto axes = step.attrs().find("axes");
        auto group = groupFor(axes == step.attrs().end() ? "" : axes->second.s());
        if (!group.ok())
          return absl::InvalidArgumentError(absl::StrCat("plan ", plan_.path(), ", program '",
                                                         prog.name(), "', step ", step.kernel(),
                                                         ": ", group.status().message()));
        ps = prepareCollective(step, ins, outs, **group, scratch_);
        stepRanks.push_back((*group)->size());
        if (!worker_) {
          DS_ASSIGN_OR_RETURN(worker_, CommWorker::start("communication"));
        }
      } else if (std::any_of(step.inputs().begin(), step.inputs().end(),
                             [&](uint32_t id) { return nvmeRegion_.count(id); }) ||
                 std::any_of(step.outputs().begin(), step.outputs().end(),
                             [&](uint32_t id) { return nvmeRegion_.count(id); })) {
        auto swap = prepareSwap(step, step.location());
        if (!swap.ok()) return swap.status();
        swaps.resize(prepared.size() + 1, {-1, {}});
        swaps.back() = {step.kernel() == "fetch" ? 1 : 0, std::move(*swap)};
        ps = PreparedStep([] { return absl::OkStatus(); }); // set below, with its batch
        // Swaps wait on the drive, not the cores: they run on the I/O
        // thread, overlapping compute that does not touch their buffers.
        comm.back() = 2;
        if (!ioWorker_) {
          DS_ASSIGN_OR_RETURN(ioWorker_, CommWorker::start("NVMe I/O"));
        }
      } else {
        ps = backend_.prepare(step, ins, outs);
      }
      if (!ps.ok())
        return absl::Status(ps.status().code(),
                            absl::StrCat("plan ", plan_.path(), ", program '", prog.name(),
                                         "': ", ps.status().message()));
      prepared.push_back(std::move(*ps));
    }
    swaps.resize(prepared.size(), {-1, {}});
    auto &batchEnd = batchEnd_[prog.name()];
    batchEnd.assign(prepared.size(), 0);
    for (size_t i = 0; i < swaps.size();) {
      if (swaps[i].first < 0) { ++i; continue; }
      size_t end = i + 1;
      while (end < swaps.size() && swaps[end].first == swaps[i].first) ++end;
      std::vector<NvmeSwapper::Transfer> batch;
      for (size_t k = i; k < end; ++k) batch.push_back(swaps[k].second);
      const bool in = swaps[i].first == 1;
      prepared[i] = [this, batch = std::move(batch), in] { return swapMany(batch, in); };
      batchEnd[i] = end;
      i = end;
    }
  }
  return absl::OkStatus();
}

/// A fetch from NVMe (swap in) or an offload to it (swap out), through the
/// swapper; errors name the state.
absl::StatusOr<NvmeSwapper::Transfer> Session::prepareSwap(const plan::Step &step,
                                                          const std::string &where) {
  const bool in = step.kernel() == "fetch";
  if ((step.kernel() != "fetch" && step.kernel() != "offload") || step.inputs_size() != 1 ||
      step.outputs_size() != 1)
    return absl::InvalidArgumentError(absl::StrCat("step ", step.kernel(), " at ", where,
                                                   " touches NVMe state but is not a transfer"));
  uint32_t nvmeId = in ? step.inputs(0) : step.outputs(0);
  uint32_t hostId = in ? step.outputs(0) : step.inputs(0);
  const plan::Buffer &nb = plan_.plan().buffers(nvmeId);
  if (!nvmeRegion_.count(nvmeId) || nvmeRegion_.count(hostId))
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step.kernel(), " at ", where,
        ": moves NVMe state the wrong way (a fetch reads NVMe into host memory, an offload "
        "writes host memory to NVMe)"));
  if (plan_.plan().buffers(hostId).size_bytes() != nb.size_bytes())
    return absl::InvalidArgumentError(absl::StrCat("step ", step.kernel(), " at ", where,
                                                   ": the host and NVMe buffers differ in size"));
  return NvmeSwapper::Transfer{nvmeRegion_.at(nvmeId), views_[hostId].data, nb.io_name()};
}

absl::Status Session::openSwapper() {
  std::lock_guard<std::mutex> lock(swapMu_);
  if (swapper_ || nvmeRegions_.empty()) return absl::OkStatus();
  const plan::Plan &p = plan_.plan();
  if (nvmePath_.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "plan ", plan_.path(), " keeps ",
        p.has_training() ? "state" : "weights (ds-opt --offload-weights nvme)",
        " on NVMe and names no directory for its swap file: give ds-run --nvme-path DIR"));
  NvmeSwapOptions o;
  o.directory = nvmePath_;
  o.blockSize = p.nvme().block_size();
  o.queueDepth = p.nvme().queue_depth();
  o.bufferCount = p.nvme().buffer_count();
  o.fileTag = absl::StrCat("rank", comm_ ? comm_->rank() : 0);
  auto sw = NvmeSwapper::create(o, nvmeRegions_);
  if (!sw.ok())
    return absl::Status(sw.status().code(),
                        absl::StrCat(sw.status().message(), " (the plan swaps state to NVMe there; "
                                     "ds-run --nvme-path DIR puts it elsewhere)"));
  swapper_ = std::move(*sw);
  return absl::OkStatus();
}

absl::Status Session::swapIn(uint32_t region, void *host) {
  if (!swapper_ || !swapper_->written(region)) { // its initial value, no I/O
    if (nvmeInit_[region]) std::memcpy(host, nvmeInit_[region], nvmeRegions_[region]);
    else std::memset(host, 0, nvmeRegions_[region]);
    return absl::OkStatus();
  }
  return swapper_->read(region, host);
}

absl::Status Session::swapMany(const std::vector<NvmeSwapper::Transfer> &swaps, bool in) {
  if (!in) {
    DS_RETURN_IF_ERROR(openSwapper());
    return swapper_->writeMany(swaps);
  }
  std::vector<NvmeSwapper::Transfer> io;
  for (const NvmeSwapper::Transfer &t : swaps) {
    if (swapper_ && swapper_->written(t.region)) io.push_back(t);
    else DS_RETURN_IF_ERROR(swapIn(t.region, t.host)); // its initial value, no I/O
  }
  return io.empty() ? absl::OkStatus() : swapper_->readMany(io);
}

absl::Status Session::swapOut(uint32_t region, const void *host) {
  DS_RETURN_IF_ERROR(openSwapper());
  return swapper_->write(region, host);
}

absl::StatusOr<NamedArrays> Session::run(const std::string &name,
                                         const std::map<std::string, HostArray> &inputs) {
  const plan::Program *prog = plan_.findProgram(name);
  if (!prog) {
    std::vector<std::string> names;
    for (const auto &q : plan_.plan().programs()) names.push_back(q.name());
    return absl::NotFoundError(absl::StrCat("plan ", plan_.path(), " has no program '", name,
                                            "' (it has: ", absl::StrJoin(names, ", "), ")"));
  }
  const plan::Plan &p = plan_.plan();
  std::vector<std::string> expected;
  for (uint32_t id : prog->inputs()) expected.push_back(p.buffers(id).io_name());
  for (const auto &[n, arr] : inputs)
    if (std::find(expected.begin(), expected.end(), n) == expected.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown input '", n, "'; the model's inputs are: ", absl::StrJoin(expected, ", ")));
  for (uint32_t id : prog->inputs()) {
    const plan::Buffer &b = p.buffers(id);
    auto it = inputs.find(b.io_name());
    if (it == inputs.end())
      return absl::InvalidArgumentError(absl::StrCat("missing input '", b.io_name(), "' (",
                                                     dtypeName(b.dtype()), " [",
                                                     shapeToString(views_[id].shape), "])"));
    const HostArray &a = it->second;
    if (!npyHolds(a.dtype, b.dtype()))
      return absl::InvalidArgumentError(absl::StrCat("input '", b.io_name(), "' must be ",
                                                     dtypeName(b.dtype()), ", got ",
                                                     dtypeName(a.dtype)));
    if (a.shape != views_[id].shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", b.io_name(), "' must have shape [", shapeToString(views_[id].shape),
          "], got [", shapeToString(a.shape), "] (plans have static shapes: recompile with ds-opt --inputs FILE or --input-shape)"));
    std::vector<uint8_t> normalized; // a 4-/2-bit input given as int8 values
    auto bytes = npyBytesAs(a, b.dtype(), normalized);
    if (!bytes.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("input '", b.io_name(), "': ", bytes.status().message()));
    DS_RETURN_IF_ERROR(backend_.copyFromHost(views_[id].data, *bytes, b.size_bytes()));
  }
  profile_.clear();
  const auto runStart = std::chrono::steady_clock::now();
  auto secondsSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  times_ = RunTimes();
  const int64_t mark = marks_.count(name) ? marks_[name] : -1;
  auto &steps = steps_[name];
  const auto &ranges = ranges_[name];
  const auto &isComm = isComm_[name];
  const auto &bytes = stepBytes_[name];
  const auto &stepRanks = stepRanks_[name];
  const auto &transfers = transfers_[name];
  const auto &batchEnd = batchEnd_[name];
  // Collectives go to the communication thread; a step waits only for the
  // in-flight collectives whose bytes it shares (read-after-write,
  // write-after-read, write-after-write), so the rest overlap.
  struct InFlight { CommWorker *worker; uint64_t ticket; size_t step; };
  std::vector<InFlight> inFlight;
  auto fail = [&](size_t i, const absl::Status &st) {
    return absl::Status(st.code(), absl::StrCat("program '", name, "', step ", i, " (",
                                                prog->steps(static_cast<int>(i)).kernel(),
                                                "): ", st.message()));
  };
  auto conflicts = [&](size_t a, size_t b) {
    for (const Range &x : ranges[a])
      for (const Range &y : ranges[b])
        if ((x.write || y.write) && x.lo < y.hi && y.lo < x.hi) return true;
    return false;
  };
  auto drain = [&](auto pred) -> absl::Status {
    absl::Status first;
    for (auto it = inFlight.begin(); it != inFlight.end();) {
      if (!pred(*it)) { ++it; continue; }
      const auto waitStart = std::chrono::steady_clock::now();
      absl::Status st = it->worker->wait(it->ticket);
      if (timing_) times_.waits += secondsSince(waitStart);
      if (!st.ok() && first.ok()) first = fail(it->step, st);
      it = inFlight.erase(it);
    }
    return first;
  };
  auto usPast = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - epoch_).count();
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const plan::Step &ps = prog->steps(static_cast<int>(i));
    // A batch of swaps waits for what any of its steps shares.
    const size_t last = std::max(i + 1, batchEnd[i]);
    DS_RETURN_IF_ERROR(drain([&](const InFlight &f) {
      for (size_t k = i; k < last; ++k)
        if (conflicts(f.step, k)) return true;
      return false;
    }));
    if (transfers[i].first >= 0) transferred_[transfers[i].first] += transfers[i].second;
    if (isComm[i]) {
      PreparedStep fn = steps[i];
      TraceEvent ev{ps.kernel(), ps.location(), isComm[i], 0, 0, bytes[i]};
      bool trace = tracing_, timing = timing_ && isComm[i] == 1;
      const bool logged = recordComms_ && isComm[i] == 1;
      const int ranks = stepRanks[i];
      // What the collective serves: its program, and the ONNX node when a
      // node's location survived the passes that inserted it.
      const std::string caller =
          ps.location().rfind("node '", 0) == 0 ? name + ": " + ps.location() : name;
      CommWorker *w = isComm[i] == 2 ? ioWorker_.get() : worker_.get();
      inFlight.push_back({w, w->submit([this, fn, ev, trace, timing, logged, ranks, caller,
                                        usPast]() mutable {
                            auto t0 = std::chrono::steady_clock::now();
                            absl::Status st = fn();
                            const double seconds = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0).count();
                            if (timing) {
                              std::lock_guard<std::mutex> lock(timesMu_);
                              times_.collectives += seconds;
                            }
                            if (logged && st.ok()) {
                              std::lock_guard<std::mutex> lock(commRecordsMu_);
                              commRecords_.push_back(
                                  {ev.name, caller, ev.bytes, seconds, ranks});
                            }
                            if (trace) {
                              ev.startUs = usPast(t0);
                              ev.durUs = usPast(std::chrono::steady_clock::now()) - ev.startUs;
                              record(std::move(ev));
                            }
                            return st;
                          }),
                          i});
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    absl::Status st = steps[i]();
    if (!st.ok()) {
      (void)drain([](const InFlight &) { return true; });
      return fail(i, st);
    }
    if (tracing_)
      record({ps.kernel(), ps.location(), 0, usPast(t0),
              usPast(std::chrono::steady_clock::now()) - usPast(t0), bytes[i]});
    if (timing_ && static_cast<int64_t>(i) == mark) {
      DS_RETURN_IF_ERROR(backend_.synchronize());
      times_.untilMark = secondsSince(runStart);
    }
    if (profiling_) {
      DS_RETURN_IF_ERROR(backend_.synchronize());
      const auto &s = prog->steps(static_cast<int>(i));
      std::vector<TensorView> ins, outs;
      for (uint32_t id : s.inputs()) ins.push_back(views_[id]);
      for (uint32_t id : s.outputs()) outs.push_back(views_[id]);
      profile_.push_back({s.kernel(), s.location(),
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                          stepFlops(s, ins, outs)});
    }
  }
  DS_RETURN_IF_ERROR(drain([](const InFlight &) { return true; }));
  DS_RETURN_IF_ERROR(backend_.synchronize());
  if (timing_) times_.total = secondsSince(runStart);
  NamedArrays out;
  for (uint32_t id : prog->outputs()) {
    const plan::Buffer &b = p.buffers(id);
    HostArray a;
    a.dtype = b.dtype();
    a.shape = views_[id].shape;
    if (backend_.sharesHostMemory()) {
      // One pass over the bytes (resize would zero them first: a
      // segmentation map's 4 MB twice per run).
      const auto *src = static_cast<const uint8_t *>(views_[id].data);
      a.data.assign(src, src + b.size_bytes());
    } else {
      a.data.resize(b.size_bytes());
      DS_RETURN_IF_ERROR(backend_.copyToHost(a.data.data(), views_[id].data, b.size_bytes()));
    }
    out.emplace_back(b.io_name(), std::move(a));
  }
  return out;
}

const plan::Buffer *Session::stateBuffer(const std::string &name) const {
  for (const auto &b : plan_.plan().buffers())
    if (b.kind() == plan::Buffer::STATE && b.io_name() == name) return &b;
  return nullptr;
}

std::vector<std::string> Session::stateNames() const {
  std::vector<std::string> names;
  for (const auto &b : plan_.plan().buffers())
    if (b.kind() == plan::Buffer::STATE) names.push_back(b.io_name());
  return names;
}

absl::StatusOr<HostArray> Session::readState(const std::string &name) {
  const plan::Buffer *b = stateBuffer(name);
  if (!b) return absl::NotFoundError(absl::StrCat("no state buffer '", name, "'"));
  HostArray a;
  a.dtype = b->dtype();
  a.shape = views_[b->id()].shape;
  a.data.resize(b->size_bytes());
  DS_RETURN_IF_ERROR(backend_.synchronize());
  if (b->space() == plan::NVME)
    DS_RETURN_IF_ERROR(swapIn(nvmeRegion_.at(b->id()), a.data.data()));
  else if (b->space() == plan::HOST)
    std::memcpy(a.data.data(), views_[b->id()].data, b->size_bytes());
  else
    DS_RETURN_IF_ERROR(backend_.copyToHost(a.data.data(), views_[b->id()].data, b->size_bytes()));
  return a;
}

absl::Status Session::writeState(const std::string &name, const HostArray &value) {
  const plan::Buffer *b = stateBuffer(name);
  if (!b) return absl::NotFoundError(absl::StrCat("no state buffer '", name, "' in the plan"));
  if (!npyHolds(value.dtype, b->dtype()) || value.shape != views_[b->id()].shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "state '", name, "' is ", dtypeName(b->dtype()), " [",
        shapeToString(views_[b->id()].shape), "], the value given is ", dtypeName(value.dtype),
        " [", shapeToString(value.shape), "]"));
  if (b->space() == plan::NVME) return swapOut(nvmeRegion_.at(b->id()), value.data.data());
  if (b->space() == plan::HOST) {
    std::memcpy(views_[b->id()].data, value.data.data(), b->size_bytes());
    return absl::OkStatus();
  }
  return backend_.copyFromHost(views_[b->id()].data, value.data.data(), b->size_bytes());
}

} // namespace ds::rt
