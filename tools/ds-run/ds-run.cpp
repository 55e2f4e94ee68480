// ds-run: loads a .dsplan, checks it, and executes it on a backend.
//
//   ds-run model.dsplan --inputs in.npz --outputs out.npz
//   ds-run model.dsplan --dump
//   ds-run model.dsplan --inputs in.npz --benchmark 50
//   mpirun -np 2 ds-run tp2.dsplan --inputs in.npz --outputs out.npz --trace trace.json
#include "tools/OutOfMemory.h"
#include <filesystem>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage_config.h"
#include "ds/BuildInfo.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "runtime/backend/AllBackends.h"
#include "runtime/backend/BackendRegistry.h"
#include "runtime/comm/Comm.h"
#include "runtime/exec/Session.h"
#include "runtime/exec/Trace.h"
#include "runtime/io/Npy.h"
#include "runtime/kernels/ElementMath.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/ExportOnnx.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/io/Files.h"
#include "runtime/train/PlanIdentity.h"
#include <csignal>
#include <unistd.h>
#include "runtime/train/StopSignals.h"
#include "runtime/train/Trainer.h"
#include "tools/ds-run/GenerateCommand.h"
#include <sys/resource.h>
#include <unistd.h>

ABSL_FLAG(std::string, inputs, "", "input arrays: an .npz keyed by the model's input names, or an .npy for a one-input model");
ABSL_FLAG(std::string, outputs, "", "where to write the outputs: .npz keyed by output names (or .npy for a one-output model)");
ABSL_FLAG(bool, dump, false, "print the plan readably and exit");
ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda");
ABSL_FLAG(int, threads, 0, "threads for kernels and GEMM (0: all cores)");
ABSL_FLAG(std::string, program, "forward", "program of the plan to run");
ABSL_FLAG(int, benchmark, 0, "run N timed iterations after 2 warm-up runs and print latency as JSON");
ABSL_FLAG(bool, quiet, false,
          "train: no progress output (by default rank 0 prints a line every steps_per_print "
          "steps of the config, and a live progress bar when stdout is a terminal)");
ABSL_FLAG(std::string, progress, "auto",
          "train: 'bar' (a live bar redrawn every step), 'lines' (a line every steps_per_print "
          "steps) or 'auto' (bar when stdout is a terminal; under mpirun, which gives ranks a "
          "terminal, use 'lines' when the output goes to a log)");
ABSL_FLAG(bool, profile, false, "print the time of each step (slowest first)");
ABSL_FLAG(int, profile_runs, 5,
          "--profile: runs to time; each step's median is shown, so a busy machine's "
          "preempted runs do not skew the profile");
ABSL_FLAG(std::string, data, "", "train: .npz of samples keyed by the training step's input names (leading sample dimension)");
ABSL_FLAG(int64_t, steps, 0, "train: optimizer steps to reach (counting steps already in a resumed checkpoint)");
ABSL_FLAG(std::string, log, "", "train: JSONL log, one line per step (step, loss, lr, grad_norm, time)");
ABSL_FLAG(std::string, checkpoint_dir, "", "train: where checkpoints go (atomic; `latest` names the newest)");
ABSL_FLAG(int64_t, checkpoint_every, 0, "train: save every N steps (and at the end)");
ABSL_FLAG(bool, resume, false, "train: continue from the latest checkpoint in --checkpoint-dir");
ABSL_FLAG(bool, resume_fallback, false,
          "train: with --resume, when the latest checkpoint is damaged (a file's size or CRC-32 "
          "differs from its metadata) resume from the newest older intact one instead of failing");
ABSL_FLAG(bool, shuffle, false, "train: shuffle samples each epoch (with --seed)");
ABSL_FLAG(uint64_t, seed, 0, "train: seed of the data order (--shuffle) and of Dropout masks; run: of the random generators (RandomUniform, RandomNormal, Bernoulli); generate: of the sampling");
ABSL_FLAG(std::string, export_onnx, "", "write the source ONNX model with the trained weights (of the latest checkpoint in --checkpoint-dir, if given)");
ABSL_FLAG(std::string, zero_to_fp32, "", "write the trained weights of the latest checkpoint in --checkpoint-dir, whole (ZeRO blocks of every rank joined), to this .npz keyed by ONNX initializer name; one process, any world size");
ABSL_FLAG(std::string, comm, "auto", "communicator: auto (mpi under mpirun, else local), local, mpi, or nccl (with --backend=cuda)");
ABSL_FLAG(double, collective_timeout, 300, "seconds a collective may wait for its peers before every rank stops with an error");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace-event JSON timeline (one track per rank and stream) of the run");
ABSL_FLAG(bool, rank_report, false, "at the end, print one JSON line per rank: weight, arena, parameter/gradient/optimizer state bytes and peak RSS");
ABSL_FLAG(std::string, device_memory, "",
          "device memory this rank may use, e.g. 2GiB (default: the plan's ds-opt --device-memory, "
          "else unbounded): a plan needing more is refused, and the cpu backend bounds its "
          "device pool to it");
ABSL_FLAG(std::string, nvme_path, "",
          "directory for this rank's NVMe swap file (ZeRO-Infinity), instead of the config's "
          "offload_optimizer.nvme_path");
ABSL_FLAG(std::string, save_state, "", "after running, write every state buffer (parameters, gradients, moments) to this .npz");

namespace {

using namespace ds::rt;
namespace plan = ds::plan;

Comm *gWorld = nullptr; // set once the communicator exists

/// Reports and ends the run. With several ranks the error ends every rank
/// at once (MPI_Abort) instead of leaving peers to wait for their timeout.
int fail(const absl::Status &st) {
  if (gWorld && gWorld->size() > 1) {
    std::fprintf(stderr, "ds-run: error: rank %d: %s\n", gWorld->rank(),
                 std::string(st.message()).c_str());
    std::fflush(stderr);
    gWorld->abort(1);
  }
  std::fprintf(stderr, "ds-run: error: %s\n", std::string(st.message()).c_str());
  return 1;
}

absl::StatusOr<std::map<std::string, HostArray>> loadInputs(const std::string &path,
                                                            const plan::Program &prog,
                                                            const ds::plan::Plan &p) {
  std::map<std::string, HostArray> inputs;
  if (path.empty()) {
    // (ds-run feeds the random generators' key itself.)
    if (prog.inputs_size() != (prog.rng_input().empty() ? 0 : 1))
      return absl::InvalidArgumentError("the model has inputs: pass --inputs FILE.npz");
    return inputs;
  }
  if (absl::EndsWith(path, ".npy")) {
    if (prog.inputs_size() != 1)
      return absl::InvalidArgumentError(
          "an .npy file can only feed a one-input model; use an .npz keyed by input names");
    DS_ASSIGN_OR_RETURN(HostArray a, readNpy(path));
    inputs.emplace(p.buffers(prog.inputs(0)).io_name(), std::move(a));
    return inputs;
  }
  DS_ASSIGN_OR_RETURN(auto arrays, readNpz(path));
  for (auto &[name, arr] : arrays) inputs.emplace(name, std::move(arr));
  return inputs;
}

absl::Status writeOutputs(const std::string &path, const NamedArrays &outs) {
  if (outs.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("--outputs ", path, ": the program has no outputs to write"));
  if (absl::EndsWith(path, ".npy")) {
    if (outs.size() != 1)
      return absl::InvalidArgumentError("the model has several outputs: write an .npz");
    return writeNpy(path, outs[0].second);
  }
  return writeNpz(path, outs);
}

/// Outputs when no --outputs file is given: names, types and shapes.
void printOutputs(const NamedArrays &outs) {
  for (const auto &[name, arr] : outs)
    std::printf("%s: %s [%s]\n", name.c_str(), dtypeName(arr.dtype).c_str(),
                shapeToString(arr.shape).c_str());
}

/// A /proc/self/status size ("VmHWM:", "VmRSS:") in bytes. Not getrusage's
/// ru_maxrss: Linux carries that across exec, so it reports the launcher's
/// peak (a Python parent with torch loaded) when that was larger.
unsigned long long procStatusBytes(const char *key) {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, key, std::strlen(key)) == 0) {
      kb = std::strtoull(line + std::strlen(key), nullptr, 10);
      break;
    }
  std::fclose(f);
  return kb * 1024ull;
}

/// Flags are spelled with hyphens on the command line (--checkpoint-dir),
/// as in ds-opt; absl names them with underscores. Returns the positional
/// arguments (argv[0] first).
/// abseil's --flagfile reads files of flags, which may name more flag
/// files: a file naming itself loops, a FIFO blocks, /dev/zero never ends.
/// ds-run takes regular files of at most 1 MiB that name no further
/// flag file; "" when the command line is fine, else the error.
std::string checkFlagFiles(const std::vector<std::string> &spelled) {
  for (size_t i = 1; i < spelled.size(); ++i) {
    const std::string &a = spelled[i];
    // --fromenv=flagfile would read $FLAGS_flagfile past these checks.
    for (const char *env : {"-fromenv", "-tryfromenv"})
      if (a.find(env) != std::string::npos &&
          (a.find("flagfile") != std::string::npos ||
           (i + 1 < spelled.size() && spelled[i + 1].find("flagfile") != std::string::npos)))
        return absl::StrCat(a, ": a flag file comes from --flagfile only");
    std::string files;
    if (a.rfind("--flagfile=", 0) == 0) files = a.substr(11);
    else if (a == "--flagfile" && i + 1 < spelled.size()) files = spelled[i + 1];
    else continue;
    for (absl::string_view f : absl::StrSplit(files, ',')) {
      auto text = ds::rt::readRegularFile(std::string(f), 1 << 20);
      if (!text.ok()) return absl::StrCat("--flagfile: ", text.status().message());
      if (text->find("-flagfile") != std::string::npos || text->find("fromenv") != std::string::npos)
        return absl::StrCat("--flagfile ", f, " names another flag file; ds-run reads one level");
    }
  }
  return "";
}

std::vector<std::string> parseCommandLine(int argc, char **argv) {
  std::vector<std::string> spelled(argv, argv + argc);
  if (std::string bad = checkFlagFiles(spelled); !bad.empty()) {
    std::fprintf(stderr, "ds-run: error: %s\n", bad.c_str());
    std::exit(2);
  }
  std::vector<char *> normalized;
  for (std::string &a : spelled) {
    if (a.rfind("--", 0) == 0) {
      size_t end = a.find('=');
      for (size_t i = 2; i < std::min(end, a.size()); ++i)
        if (a[i] == '-') a[i] = '_';
    }
    normalized.push_back(a.data());
  }
  std::vector<char *> args = absl::ParseCommandLine(argc, normalized.data());
  // A flag given twice would silently keep its last value (--outputs a.npz
  // --outputs b.npz writes b only; --steps 2 --steps 3 runs 3): refused,
  // wherever the two come from: the command line, a --flagfile's lines,
  // --fromenv/--tryfromenv (FLAGS_name). Names are read as abseil does: one
  // or two dashes, up to '=', and --noNAME for a boolean; what is not a flag
  // (a value such as -1) and everything after "--" is not counted, nor are
  // abseil's own flags, which may repeat (--flagfile a --flagfile b).
  {
    std::vector<std::string> sources;
    auto valueOf = [&](size_t &i, const std::string &flag) -> std::optional<std::string> {
      const std::string &a = spelled[i];
      for (const std::string &dashes : {std::string("--"), std::string("-")}) {
        if (a.rfind(dashes + flag + "=", 0) == 0) return a.substr(dashes.size() + flag.size() + 1);
        if (a == dashes + flag && i + 1 < spelled.size()) return spelled[++i];
      }
      return std::nullopt;
    };
    for (size_t i = 1; i < spelled.size(); ++i) {
      if (spelled[i] == "--") break;
      sources.push_back(spelled[i]);
      if (std::optional<std::string> files = valueOf(i, "flagfile")) {
        for (absl::string_view f : absl::StrSplit(*files, ',', absl::SkipEmpty()))
          if (auto text = ds::rt::readRegularFile(std::string(f), 1 << 20); text.ok())
            for (absl::string_view line : absl::StrSplit(*text, '\n'))
              if (line = absl::StripAsciiWhitespace(line); !line.empty() && line[0] != '#')
                sources.emplace_back(line);
      } else {
        for (const char *env : {"fromenv", "tryfromenv"})
          if (std::optional<std::string> names = valueOf(i, env))
            for (absl::string_view n : absl::StrSplit(*names, ',', absl::SkipEmpty()))
              if (std::getenv(absl::StrCat("FLAGS_", n).c_str()))
                sources.push_back(absl::StrCat("--", n));
      }
    }
    std::map<std::string, int> count;
    for (const std::string &a : sources) {
      if (a.size() < 2 || a[0] != '-') continue;
      std::string name = a.substr(a[1] == '-' ? 2 : 1);
      name = name.substr(0, name.find('='));
      std::replace(name.begin(), name.end(), '-', '_');
      if (!absl::FindCommandLineFlag(name) && absl::StartsWith(name, "no") &&
          absl::FindCommandLineFlag(name.substr(2)))
        name = name.substr(2);
      if (name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok")
        continue;
      if (absl::FindCommandLineFlag(name) && ++count[name] == 2) {
        std::replace(name.begin(), name.end(), '_', '-');
        std::fprintf(stderr, "ds-run: error: --%s given more than once (on the command line, in "
                             "a --flagfile or through --fromenv): it takes one value (give it "
                             "once)\n", name.c_str());
        std::exit(2);
      }
    }
  }
  // A path flag given an empty value (an unset shell variable) would
  // silently mean "not given" (--nvme-path: the plan's); say so instead.
  // (`spelled` has the flags' names with underscores now.)
  auto given = [&](const std::string &name) {
    for (const std::string &a : spelled)
      for (const char *dashes : {"--", "-"})
        if (a == dashes + name || a.rfind(dashes + name + "=", 0) == 0) return true;
    return false;
  };
  for (const char *name : {"inputs", "outputs", "data", "log", "checkpoint_dir", "export_onnx",
                           "zero_to_fp32", "trace", "save_state", "nvme_path"}) {
    const absl::CommandLineFlag *flag = absl::FindCommandLineFlag(name);
    if (flag && flag->CurrentValue().empty() && given(name)) {
      std::string option = name;
      std::replace(option.begin(), option.end(), '_', '-');
      std::fprintf(stderr, "ds-run: error: --%s: expected a path, got ''\n", option.c_str());
      std::exit(2);
    }
  }
  return std::vector<std::string>(args.begin(), args.end());
}

int dump(const std::string &planPath) {
  auto loaded = LoadedPlan::open(planPath);
  if (!loaded.ok()) return fail(loaded.status());
  std::fputs(dumpPlan((*loaded)->plan()).c_str(), stdout);
  return 0;
}

/// --zero-to-fp32, or --export-onnx from --checkpoint-dir with nothing to run.
bool wantsConsolidation() {
  const bool nothingToRun =
      absl::GetFlag(FLAGS_inputs).empty() && absl::GetFlag(FLAGS_data).empty();
  return !absl::GetFlag(FLAGS_zero_to_fp32).empty() ||
         (!absl::GetFlag(FLAGS_export_onnx).empty() &&
          !absl::GetFlag(FLAGS_checkpoint_dir).empty() && nothingToRun);
}

/// Writes the trained ONNX initializers, whole, to an .npz; counts the
/// tensors and their elements for the summary.
absl::Status writeFp32Weights(const plan::Plan &p, const StateReader &read,
                              const std::string &path, size_t *tensors, uint64_t *elements) {
  DS_ASSIGN_OR_RETURN(auto weights, trainedInitializers(p, read));
  for (const auto &[name, a] : weights) *elements += a.data.size() / sizeof(float);
  *tensors = weights.size();
  return writeNpz(path, weights);
}

/// --zero-to-fp32 / --export-onnx from the latest checkpoint in
/// --checkpoint-dir. Returns the exit code.
int consolidate(const std::string &planPath) {
  const std::string toFp32 = absl::GetFlag(FLAGS_zero_to_fp32);
  const std::string onnxOut = absl::GetFlag(FLAGS_export_onnx);
  const std::string ck = absl::GetFlag(FLAGS_checkpoint_dir);
  if (ck.empty())
    return fail(absl::InvalidArgumentError(
        "--zero-to-fp32 needs --checkpoint-dir (the checkpoint to consolidate)"));
  if (const char *n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1)
    return fail(absl::InvalidArgumentError(
        "consolidating a checkpoint runs in one process: start ds-run without mpirun"));
  auto loaded = LoadedPlan::open(planPath);
  if (!loaded.ok()) return fail(loaded.status());
  const plan::Plan &p = (*loaded)->plan();
  plan::CheckpointMeta meta;
  auto state = consolidateLatestCheckpoint(ck, p, &meta);
  if (!state.ok()) return fail(state.status());
  StateReader read = [&](const std::string &n) -> absl::StatusOr<HostArray> {
    auto it = state->find(n);
    if (it == state->end()) return absl::NotFoundError(absl::StrCat("no state '", n, "'"));
    return it->second;
  };
  size_t tensors = 0;
  uint64_t elements = 0;
  if (!toFp32.empty())
    if (absl::Status st = writeFp32Weights(p, read, toFp32, &tensors, &elements); !st.ok())
      return fail(st);
  if (!onnxOut.empty())
    if (absl::Status st = exportOnnx(p, read, onnxOut); !st.ok()) return fail(st);
  std::printf("ds-run: consolidated step %lld of a %lld-rank checkpoint (ZeRO stage %lld)%s\n",
              static_cast<long long>(meta.step()),
              static_cast<long long>(std::max<int64_t>({1, meta.world_size(), meta.ranks()})),
              static_cast<long long>(meta.zero_stage()),
              toFp32.empty() ? ""
                             : absl::StrFormat(": %d fp32 tensors, %d parameters", tensors,
                                               elements).c_str());
  return 0;
}

absl::StatusOr<std::unique_ptr<Comm>> createWorld() {
  CommOptions commOpts;
  commOpts.kind = absl::GetFlag(FLAGS_comm);
  if (commOpts.kind == "nccl" && absl::GetFlag(FLAGS_backend) != "cuda")
    return absl::InvalidArgumentError(
        "--comm=nccl moves device memory: it needs --backend=cuda (use --comm=mpi with the cpu backend)");
  commOpts.timeout_seconds = absl::GetFlag(FLAGS_collective_timeout);
  return createComm(commOpts);
}

/// What this rank runs: its view of the plan, the backend, and the session
/// over both (declared last, so destroyed first).
struct Execution {
  std::unique_ptr<LoadedPlan> loaded;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Session> session;
};

absl::StatusOr<Execution> openExecution(const std::string &planPath, Comm &world) {
  Execution e;
  // Each rank maps the plan and checks only its own weight shards.
  DS_ASSIGN_OR_RETURN(e.loaded, LoadedPlan::open(planPath, std::min(world.rank(), 4095)));
  BackendOptions opts;
  opts.threads = absl::GetFlag(FLAGS_threads);
  uint64_t budget = e.loaded->plan().device_memory_budget();
  if (std::string dm = absl::GetFlag(FLAGS_device_memory); !dm.empty()) {
    std::optional<unsigned long long> bytes = ::ds::tools::parseByteSize(dm);
    if (!bytes || *bytes > (1ull << 62))
      return absl::InvalidArgumentError(absl::StrCat(
          "--device-memory: expected a size such as 2GiB, 512MiB or 2e9, got '", dm, "'"));
    budget = *bytes;
  }
  opts.deviceMemoryLimit = budget;
  const plan::Plan &p = e.loaded->plan();
  if (!absl::GetFlag(FLAGS_nvme_path).empty() &&
      std::none_of(p.buffers().begin(), p.buffers().end(),
                   [](const plan::Buffer &b) { return b.space() == plan::NVME; }))
    return absl::InvalidArgumentError(
        "--nvme-path: this plan swaps nothing to NVMe (compile it with offload_optimizer or "
        "offload_param \"device\": \"nvme\")");
  DS_RETURN_IF_ERROR(registerAllBackends());
  DS_ASSIGN_OR_RETURN(e.backend, createBackend(absl::GetFlag(FLAGS_backend), opts));
  DS_ASSIGN_OR_RETURN(e.session, Session::create(*e.loaded, *e.backend, &world, budget,
                                                 absl::GetFlag(FLAGS_nvme_path)));
  return e;
}

/// --rank-report: what this rank holds, measured: mapped weights, the
/// arena, the state buffers by kind (ZeRO partitions them), and the
/// process's peak RSS.
void printRankReport(const LoadedPlan &loaded, const Session &session, const Backend &backend,
                     unsigned long long startRss) {
  if (!absl::GetFlag(FLAGS_rank_report)) return;
  const plan::Plan &p = loaded.plan();
  unsigned long long params = 0, grads = 0, optimizer = 0;
  for (const auto &b : p.buffers()) {
    if (b.kind() != plan::Buffer::STATE) continue;
    const std::string &n = b.io_name();
    (n.rfind("param:", 0) == 0 ? params : n.rfind("grad:", 0) == 0 ? grads : optimizer) +=
        b.size_bytes();
  }
  // Memory spaces (ZeRO-Offload): what the plan holds in each, and what
  // the backend's pools handed out at the most; transfers as they ran.
  const SpaceBytes &sb = session.spaceBytes();
  const NvmeSwapper *sw = session.swapper();
  auto ull = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("{\"rank\": %d, \"world_size\": %d, \"weight_bytes\": %llu, \"arena_bytes\": %llu, "
              "\"param_bytes\": %llu, \"grad_bytes\": %llu, \"optimizer_bytes\": %llu, "
              "\"device_bytes\": %llu, \"host_bytes\": %llu, \"host_arena_bytes\": %llu, "
              "\"device_state_bytes\": %llu, \"host_state_bytes\": %llu, "
              "\"device_pool_peak_bytes\": %llu, \"host_pool_peak_bytes\": %llu, "
              "\"device_memory_budget\": %llu, \"offloaded_bytes\": %llu, \"fetched_bytes\": %llu, "
              "\"nvme_bytes\": %llu, \"nvme_read_bytes\": %llu, \"nvme_written_bytes\": %llu, "
              "\"nvme_read_gbps\": %.3f, \"nvme_write_gbps\": %.3f, "
              "\"peak_rss_bytes\": %llu, \"start_rss_bytes\": %llu}\n",
              gWorld->rank(), gWorld->size(),
              static_cast<unsigned long long>(loaded.rankWeightBytes()),
              static_cast<unsigned long long>(p.arena_bytes()), params, grads, optimizer,
              ull(sb.device), ull(sb.host), ull(sb.hostArena), ull(sb.deviceState),
              ull(sb.hostState), ull(backend.memoryUsage(plan::DEVICE).peak),
              ull(backend.memoryUsage(plan::HOST).peak), ull(session.deviceBudget()),
              ull(session.offloadedBytes()), ull(session.fetchedBytes()), ull(sb.nvme),
              ull(sw ? sw->bytesRead() : 0), ull(sw ? sw->bytesWritten() : 0),
              sw && sw->secondsReading() > 0 ? sw->bytesRead() / sw->secondsReading() / 1e9 : 0.0,
              sw && sw->secondsWriting() > 0 ? sw->bytesWritten() / sw->secondsWriting() / 1e9
                                             : 0.0,
              procStatusBytes("VmHWM:"), startRss);
  std::fflush(stdout);
}

absl::Status writeTraceIfAsked(Session &session) {
  const std::string path = absl::GetFlag(FLAGS_trace);
  if (path.empty()) return absl::OkStatus();
  return writeTrace(path, session.takeTrace(), *gWorld);
}

TrainOptions trainOptionsFromFlags() {
  TrainOptions t;
  t.dataPath = absl::GetFlag(FLAGS_data);
  t.steps = absl::GetFlag(FLAGS_steps);
  t.logPath = absl::GetFlag(FLAGS_log);
  t.checkpointDir = absl::GetFlag(FLAGS_checkpoint_dir);
  t.checkpointEvery = absl::GetFlag(FLAGS_checkpoint_every);
  t.resume = absl::GetFlag(FLAGS_resume);
  t.resumeFallback = absl::GetFlag(FLAGS_resume_fallback);
  t.shuffle = absl::GetFlag(FLAGS_shuffle);
  t.seed = absl::GetFlag(FLAGS_seed);
  t.quiet = absl::GetFlag(FLAGS_quiet);
  const std::string progress = absl::GetFlag(FLAGS_progress);
  t.terminal = progress == "bar" || (progress == "auto" && isatty(STDOUT_FILENO));
  return t;
}

/// --data: trains. Returns the exit code.
absl::Status saveState(Session &session, const std::string &path);

/// An output of the run (a flag's, or a config's file) is none of the
/// files the run reads or keeps: the plan, --data, --inputs, the plan's
/// source model and its external data, or anything in --checkpoint-dir
/// (whether or not it exists yet). Replacing one would lose it.
static absl::Status notAnInput(const std::string &what, const std::string &path,
                               const std::string &planPath,
                               const std::vector<std::string> &sourceFiles) {
  if (ds::rt::sameFile(path, planPath))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is the plan being run; name another file"));
  for (const auto &[inFlag, in] : std::vector<std::pair<std::string, std::string>>{
           {"--data", absl::GetFlag(FLAGS_data)}, {"--inputs", absl::GetFlag(FLAGS_inputs)}})
    if (!in.empty() && ds::rt::sameFile(path, in))
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path, " is the ", inFlag, " file; name another file"));
  for (const std::string &source : sourceFiles)
    if (ds::rt::sameFile(path, source))
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, " is a file of the plan's source model (", source,
          "); name another file"));
  const std::string &ckpt = absl::GetFlag(FLAGS_checkpoint_dir);
  std::string parent = std::filesystem::path(path).parent_path().string();
  // Inside it, whether or not it exists yet (a first run creates it):
  // the paths with what exists of them resolved, compared by component.
  auto inside = [](const std::string &file, const std::string &dir) {
    std::error_code ec;
    auto f = std::filesystem::weakly_canonical(std::filesystem::absolute(file), ec);
    if (ec) return false;
    auto d = std::filesystem::weakly_canonical(std::filesystem::absolute(dir), ec);
    if (ec) return false;
    auto [di, fi] = std::mismatch(d.begin(), d.end(), f.begin(), f.end());
    return di == d.end() || (std::next(di) == d.end() && di->empty());
  };
  if (!ckpt.empty() &&
      (ds::rt::sameFile(parent.empty() ? "." : parent, ckpt) || inside(path, ckpt)))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", path, " is inside --checkpoint-dir ", ckpt,
        ", whose files checkpoints own; name a file elsewhere"));
  return absl::OkStatus();
}

int trainCommand(Session &session, const LoadedPlan &loaded, unsigned long long startRss) {
  TrainOptions t = trainOptionsFromFlags();
  // The config's own outputs (the flops profile, the monitors' files) are
  // held to what the flags' are.
  {
    const ds::plan::Training &tr = loaded.plan().training();
    const std::vector<std::string> sources = ds::rt::sourceModelFiles(loaded.plan());
    std::vector<std::pair<std::string, std::string>> configured;
    if (tr.flops_profiler().enabled() && !tr.flops_profiler().output_file().empty())
      configured.push_back({"flops_profiler.output_file", tr.flops_profiler().output_file()});
    for (const auto &[key, m] : {std::pair{"csv_monitor", &tr.csv_monitor()},
                                 std::pair{"tensorboard", &tr.tensorboard()}})
      if (m->enabled()) // a file in its directory (os.path.join(output_path, job_name))
        configured.push_back({std::string(key) + " directory",
                              (m->output_path().empty() ? m->job_name()
                                                        : m->output_path() + "/" + m->job_name()) +
                                  "/events"});
    for (const auto &[key, path] : configured)
      if (absl::Status st = notAnInput(key, path, loaded.path(), sources); !st.ok()) return fail(st);
  }
  if (t.steps <= 0) return fail(absl::InvalidArgumentError("training needs --steps N (N > 0)"));
  if (t.resumeFallback && !t.resume)
    return fail(absl::InvalidArgumentError("--resume-fallback needs --resume"));
  if (std::string p = absl::GetFlag(FLAGS_progress); p != "auto" && p != "bar" && p != "lines")
    return fail(absl::InvalidArgumentError("--progress must be auto, bar or lines, not '" + p + "'"));
  // Inference flags have nothing to act on in a training run.
  std::vector<std::string> ignored;
  if (!absl::GetFlag(FLAGS_outputs).empty()) ignored.push_back("--outputs");
  if (absl::GetFlag(FLAGS_benchmark) != 0) ignored.push_back("--benchmark");
  if (absl::GetFlag(FLAGS_profile)) ignored.push_back("--profile (training: the config's flops_profiler)");
  if (absl::GetFlag(FLAGS_program) != "forward") ignored.push_back("--program");
  if (!absl::GetFlag(FLAGS_inputs).empty()) ignored.push_back("--inputs");
  if (!ignored.empty())
    return fail(absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(ignored, ", "), ": inference flags, but --data trains; run the plan "
        "again with --checkpoint-dir and --inputs to use the trained weights")));
  if (absl::GetFlag(FLAGS_checkpoint_every) > 0 && t.checkpointDir.empty())
    return fail(absl::InvalidArgumentError("--checkpoint-every needs --checkpoint-dir"));
  absl::Status st = train(session, t);
  printRankReport(loaded, session, session.backend(), startRss);
  if (st.ok()) st = writeTraceIfAsked(session);
  // What the run trained, as asked: the state and the ONNX model.
  if (st.ok())
    if (std::string statePath = absl::GetFlag(FLAGS_save_state); !statePath.empty())
      st = saveState(session, statePath);
  if (st.ok())
    if (std::string out = absl::GetFlag(FLAGS_export_onnx); !out.empty())
      st = exportOnnx(session, out);
  if (absl::IsCancelled(st)) {
    // Preempted: state saved; EX_TEMPFAIL tells a launcher to resume.
    std::fprintf(stderr, "ds-run: %s\n", std::string(st.message()).c_str());
    return 75;
  }
  if (!st.ok()) return fail(st);
  return 0;
}

/// Outside training, --checkpoint-dir runs (or exports) the trained state.
absl::Status loadTrainedState(Session &session) {
  // Training flags outside training would be ignored silently.
  {
    std::vector<std::string> given;
    if (absl::GetFlag(FLAGS_resume)) given.push_back("--resume");
    if (absl::GetFlag(FLAGS_resume_fallback)) given.push_back("--resume-fallback");
    if (absl::GetFlag(FLAGS_steps) != 0) given.push_back("--steps");
    if (!absl::GetFlag(FLAGS_log).empty()) given.push_back("--log");
    if (!absl::GetFlag(FLAGS_data).empty()) given.push_back("--data");
    if (absl::GetFlag(FLAGS_checkpoint_every) != 0) given.push_back("--checkpoint-every");
    if (absl::GetFlag(FLAGS_shuffle)) given.push_back("--shuffle");
    // A program with random generators draws from --seed.
    const plan::Program *prog = session.program(absl::GetFlag(FLAGS_program));
    if (absl::GetFlag(FLAGS_seed) != 0 && !(prog && !prog->rng_input().empty()))
      given.push_back("--seed");
    if (absl::GetFlag(FLAGS_progress) != "auto") given.push_back("--progress");
    if (!given.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          absl::StrJoin(given, ", "), ": training flags, but ",
          session.plan().plan().has_training()
              ? "this run does not train (training takes --data)"
              : "this is an inference plan (compiled without --config/--loss)"));
  }
  if (std::string ck = absl::GetFlag(FLAGS_checkpoint_dir); !ck.empty()) {
    // An inference plan's weights are constants of the plan: a checkpoint
    // has nothing to load into, and ignoring the flag would silently run
    // the untrained weights.
    if (!session.plan().plan().has_training())
      return absl::InvalidArgumentError(
          "--checkpoint-dir " + ck +
          ": this is an inference plan (compiled without --config/--loss); its weights are "
          "constants of the plan. Run the training plan with --checkpoint-dir and --inputs, or "
          "export the trained model with --export-onnx and compile that");
    DS_RETURN_IF_ERROR(loadLatestCheckpoint(ck, session).status());
  }
  if (std::string out = absl::GetFlag(FLAGS_export_onnx); !out.empty())
    DS_RETURN_IF_ERROR(exportOnnx(session, out));
  return absl::OkStatus();
}

/// --benchmark: 2 warm-up runs, then `iters` timed ones; prints latency as JSON.
absl::Status benchmark(Session &session, const std::string &program,
                       const std::map<std::string, HostArray> &inputs, int iters) {
  for (int i = 0; i < 2; ++i) DS_RETURN_IF_ERROR(session.run(program, inputs).status());
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    DS_RETURN_IF_ERROR(session.run(program, inputs).status());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= ms.size();
  std::printf("{\"iterations\": %d, \"median_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f}\n",
              iters, ms[ms.size() / 2], mean, ms.front());
  return absl::OkStatus();
}

/// --profile: time by kernel, then the slowest steps, on stderr.
void printProfile(std::vector<StepTiming> prof) {
  std::sort(prof.begin(), prof.end(),
            [](const StepTiming &a, const StepTiming &b) { return a.seconds > b.seconds; });
  struct Row { double seconds = 0, flops = 0; int count = 0; };
  std::map<std::string, Row> byKernel;
  double total = 0;
  for (const auto &t : prof) {
    Row &r = byKernel[t.kernel];
    r.seconds += t.seconds;
    r.flops += t.flops;
    r.count += 1;
    total += t.seconds;
  }
  std::vector<std::pair<std::string, Row>> rows(byKernel.begin(), byKernel.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second.seconds > b.second.seconds; });
  std::fprintf(stderr, "total %.3f ms in %zu steps; by kernel:\n", total * 1e3, prof.size());
  for (const auto &[k, r] : rows) {
    std::fprintf(stderr, "%10.3f ms %5.1f%%  %-14s x%d", r.seconds * 1e3, 100 * r.seconds / total,
                 k.c_str(), r.count);
    // Achieved rate of the GEMM-like kernels, to compare with the peak.
    if (r.flops > 0 && r.seconds > 0)
      std::fprintf(stderr, "  %.1f GFLOP/s", r.flops / r.seconds * 1e-9);
    std::fprintf(stderr, "\n");
  }
  std::fprintf(stderr, "slowest steps:\n");
  for (size_t i = 0; i < prof.size() && i < 15; ++i)
    std::fprintf(stderr, "%10.3f ms  %-14s %s\n", prof[i].seconds * 1e3, prof[i].kernel.c_str(),
                 prof[i].location.c_str());
}

/// The run whose outputs are kept (profiled with --profile).
absl::StatusOr<NamedArrays> runForOutputs(Session &session, const std::string &program,
                                          const std::map<std::string, HostArray> &inputs) {
  const bool profile = absl::GetFlag(FLAGS_profile);
  if (profile) {
    // Warm up first so the profile shows steady state, not first-touch page
    // faults of the arena and the mapped weights.
    DS_RETURN_IF_ERROR(session.run(program, inputs).status());
    session.setProfiling(true);
  }
  DS_ASSIGN_OR_RETURN(NamedArrays outs, session.run(program, inputs));
  if (!profile)
    return outs;
  const int runs = absl::GetFlag(FLAGS_profile_runs);
  // Per step, the median of the runs: a step that lost a time slice to
  // another process in one run does not show up as the slowest.
  std::vector<StepTiming> prof = session.lastProfile();
  std::vector<std::vector<double>> seconds(prof.size());
  for (size_t i = 0; i < prof.size(); ++i) seconds[i].push_back(prof[i].seconds);
  for (int r = 1; r < runs; ++r) {
    DS_ASSIGN_OR_RETURN(outs, session.run(program, inputs));
    const std::vector<StepTiming> &again = session.lastProfile();
    for (size_t i = 0; i < prof.size() && i < again.size(); ++i)
      seconds[i].push_back(again[i].seconds);
  }
  for (size_t i = 0; i < prof.size(); ++i) {
    std::vector<double> &v = seconds[i];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    prof[i].seconds = v[v.size() / 2];
  }
  printProfile(std::move(prof));
  return outs;
}

/// --save-state: every state buffer (parameters, gradients, moments); on
/// several ranks each writes its own file, PATH.rank<R>.npz (ZeRO ranks hold
/// different blocks).
absl::Status saveState(Session &session, const std::string &path) {
  if (session.stateNames().empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "--save-state ", path, ": this plan has no state to save (an inference plan's weights "
        "are constants of the plan)"));
  NamedArrays state;
  for (const std::string &n : session.stateNames()) {
    DS_ASSIGN_OR_RETURN(HostArray a, session.readState(n));
    state.emplace_back(n, std::move(a));
  }
  std::string out = path;
  if (session.comm().size() > 1) {
    std::string stem = absl::EndsWith(path, ".npz") ? path.substr(0, path.size() - 4) : path;
    out = absl::StrCat(stem, ".rank", session.comm().rank(), ".npz");
  }
  return writeNpz(out, state);
}

/// Says which float outputs hold NaN or inf: a plan computing in fp16
/// overflows past 65504 (a product's row then turns NaN through a norm or
/// softmax), which fp32 and bf16 would not, and nothing else would tell.
void warnNonFinite(const NamedArrays &outs, const plan::Plan &p) {
  const bool half = std::any_of(p.buffers().begin(), p.buffers().end(),
                                [](const plan::Buffer &b) { return b.dtype() == plan::F16; });
  for (const auto &[name, a] : outs) {
    int64_t bad = 0;
    const int64_t n = static_cast<int64_t>(a.numel());
    for (int64_t i = 0; i < n; ++i) {
      float v;
      switch (a.dtype) {
      case plan::F32: std::memcpy(&v, a.data.data() + 4 * i, 4); break;
      case plan::F64: {
        double d;
        std::memcpy(&d, a.data.data() + 8 * i, 8);
        v = std::isfinite(d) ? 0.0f : NAN;
        break;
      }
      case plan::F16:
      case plan::BF16: {
        uint16_t h;
        std::memcpy(&h, a.data.data() + 2 * i, 2);
        v = a.dtype == plan::F16 ? ds::math::halfToFloat(h) : ds::math::bf16ToFloat(h);
        break;
      }
      default: v = 0.0f;
      }
      bad += !std::isfinite(v);
    }
    if (bad)
      std::fprintf(stderr, "ds-run: warning: output '%s' holds %lld non-finite values (NaN or "
                           "inf) of %lld%s\n",
                   name.c_str(), static_cast<long long>(bad), static_cast<long long>(n),
                   half ? "; the plan computes in fp16, whose largest value is 65504: products "
                          "beyond it overflow (ds-opt --dtype bf16 keeps fp32's range)"
                        : "");
  }
}

/// Runs --program on --inputs. Returns the exit code.
int inferCommand(Session &session, const LoadedPlan &loaded, unsigned long long startRss) {
  if (absl::Status st = loadTrainedState(session); !st.ok()) return fail(st);
  if (!absl::GetFlag(FLAGS_export_onnx).empty() && absl::GetFlag(FLAGS_inputs).empty()) return 0;
  const std::string program = absl::GetFlag(FLAGS_program);
  const plan::Program *prog = session.program(program);
  if (!prog) return fail(session.run(program, {}).status());
  auto inputs = loadInputs(absl::GetFlag(FLAGS_inputs), *prog, loaded.plan());
  if (!inputs.ok()) return fail(inputs.status());
  // The random generators' key, from --seed unless --inputs gives one.
  if (!prog->rng_input().empty() && !inputs->count(prog->rng_input())) {
    const int64_t key = static_cast<int64_t>(ds::math::mix64(absl::GetFlag(FLAGS_seed)));
    HostArray k;
    k.dtype = plan::I64;
    k.data.resize(sizeof key);
    std::memcpy(k.data.data(), &key, sizeof key);
    (*inputs)[prog->rng_input()] = std::move(k);
  }
  // Tensor-parallel ranks compute one result from one input: a rank given
  // other arrays would silently make it wrong.
  {
    uint64_t h = 1469598103934665603ULL;
    for (const auto &[name, a] : *inputs) {
      h = ds::rt::fnv1a(name.data(), name.size(), h);
      h = ds::rt::fnv1a(a.data.data(), a.data.size(), h);
    }
    if (absl::Status st = ds::rt::agreeAcrossRanks(session.comm(), h, "with different --inputs",
                                                   absl::GetFlag(FLAGS_inputs));
        !st.ok())
      return fail(st);
  }
  const int iters = absl::GetFlag(FLAGS_benchmark);
  if (iters > 0)
    if (absl::Status st = benchmark(session, program, *inputs, iters); !st.ok()) return fail(st);
  auto outs = runForOutputs(session, program, *inputs);
  if (!outs.ok()) return fail(outs.status());
  if (std::string statePath = absl::GetFlag(FLAGS_save_state); !statePath.empty())
    if (absl::Status st = saveState(session, statePath); !st.ok()) return fail(st);
  printRankReport(loaded, session, session.backend(), startRss);
  if (absl::Status st = writeTraceIfAsked(session); !st.ok()) return fail(st);
  // Outputs are replicated across ranks: rank 0 writes them.
  if (gWorld->rank() != 0) return 0;
  warnNonFinite(*outs, loaded.plan());
  if (std::string outPath = absl::GetFlag(FLAGS_outputs); !outPath.empty()) {
    if (absl::Status st = writeOutputs(outPath, *outs); !st.ok()) return fail(st);
  } else if (iters == 0) {
    printOutputs(*outs);
  }
  return 0;
}

/// --version: this build, the LLVM/MLIR of its compiler, and each backend
/// with whether it can run on this machine.
std::string versionText() {
  std::string text = std::string("ds-run ") + DS_VERSION + "\n";
  if (std::string(DS_LLVM_VERSION).size())
    text += std::string("built with LLVM/MLIR ") + DS_LLVM_VERSION + "\n";
  text += "backends:\n";
  if (absl::Status st = ds::rt::registerAllBackends(); !st.ok())
    return text + "  (cannot register: " + std::string(st.message()) + ")\n";
  for (const std::string &name : ds::rt::registeredBackendNames()) {
    absl::Status probe = ds::rt::probeBackend(name);
    std::optional<ds::rt::BackendInfo> info = ds::rt::findBackend(name);
    text += "  " + name +
            (probe.ok() ? ": available" + (info ? " (" + info->description + ")" : std::string())
                        : ": not available here (" + std::string(probe.message()) + ")") +
            "\n";
  }
  return text;
}

} // namespace

/// The plan is mapped: if its file is truncated or rewritten while ds-run
/// runs, reading it raises SIGBUS. That is a user's error, reported as one
/// (write and _exit only: async-signal-safe).
extern "C" void onBusError(int) {
  static const char msg[] =
      "ds-run: error: a mapped file (the plan) was truncated or rewritten while ds-run read "
      "it; do not write a plan while it runs\n";
  ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
  (void)ignored;
  ::_exit(1);
}

static int runMain(int argc, char **argv);

// What ds-run prints on stdout (--dump, --benchmark, --rank-report, the
// consolidation summary) is output like a file's: a full disk, a closed
// pipe's end or a file size limit is an error, not a silent exit 0.
int main(int argc, char **argv) {
  int rc = runMain(argc, argv);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "ds-run: error: writing standard output: %s\n",
                 errno ? std::strerror(errno) : "write failed");
    return rc ? rc : 1;
  }
  return rc;
}

static int runMain(int argc, char **argv) {
  ::ds::tools::setOutOfMemoryTool("ds-run");
  struct sigaction bus {};
  bus.sa_handler = onBusError;
  ::sigaction(SIGBUS, &bus, nullptr);
  ::ds::tools::armCrashWatchdog(10);
  // Before any thread starts, so that compute threads never take SIGTERM/SIGINT.
  ds::rt::installStopSignals();
  absl::FlagsUsageConfig usage;
  usage.version_string = versionText;
  // --help names this tool, not the build machine's source path.
  usage.normalize_filename = [](absl::string_view) { return std::string("ds-run"); };
  usage.contains_help_flags = [](absl::string_view) { return true; };
  usage.contains_helpshort_flags = [](absl::string_view) { return true; };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "ds-run PLAN.dsplan [--inputs in.npz --outputs out.npz] [--dump]\n"
      "Executes a plan compiled by ds-opt.");
  // A file size limit (ulimit -f) makes write(2) fail with EFBIG, which
  // every writer reports naming its file; the default SIGXFSZ would kill
  // the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  const std::vector<std::string> args = parseCommandLine(argc, argv);
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: ds-run PLAN.dsplan [--inputs in.npz --outputs out.npz] [--dump]\n");
    return 2;
  }
  const std::string &planPath = args[1];
  for (const auto &[flag, v] : std::vector<std::pair<std::string, int64_t>>{
           {"--steps", absl::GetFlag(FLAGS_steps)},
           {"--checkpoint-every", absl::GetFlag(FLAGS_checkpoint_every)},
           {"--benchmark", absl::GetFlag(FLAGS_benchmark)},
           {"--threads", absl::GetFlag(FLAGS_threads)}})
    if (v < 0)
      return fail(absl::InvalidArgumentError(absl::StrCat(flag, " must be >= 0, got ", v)));
  if (int runs = absl::GetFlag(FLAGS_profile_runs); runs < 1 || runs > 1000)
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--profile-runs must be between 1 and 1000, got ", runs)));
  // (A value other than the default: abseil here keeps "specified" private.)
  if (const absl::CommandLineFlag *runs = absl::FindCommandLineFlag("profile_runs");
      runs && runs->CurrentValue() != runs->DefaultValue() && !absl::GetFlag(FLAGS_profile))
    return fail(absl::InvalidArgumentError("--profile-runs needs --profile"));
  // Thread counts past any machine's cores: libgomp and oneDNN crashed on
  // tens of thousands (per-thread stacks and arrays), docs/security.md.
  constexpr int64_t kMaxThreads = 1024;
  if (int64_t t = absl::GetFlag(FLAGS_threads); t > kMaxThreads)
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--threads ", t, " is more than ", kMaxThreads, " threads")));
  if (absl::GetFlag(FLAGS_threads) == 0)
    if (const char *env = std::getenv("OMP_NUM_THREADS")) {
      // The first level of a list ("8,2") is what the kernels use.
      int64_t n = 0;
      absl::string_view first = absl::string_view(env).substr(0, absl::string_view(env).find(','));
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(first), &n) && n > kMaxThreads)
        return fail(absl::InvalidArgumentError(
            absl::StrCat("OMP_NUM_THREADS=", env, " asks for more than ", kMaxThreads,
                         " threads (or give --threads)")));
    }
  // NaN would pass a `<= 0` check and never expire; a deadline past ~115
  // days is no deadline either (and would overflow the clock's arithmetic).
  if (double t = absl::GetFlag(FLAGS_collective_timeout); !(t > 0 && t <= 1e7))
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "--collective-timeout must be a number of seconds in (0, 1e7], got ", t)));
  // Outputs replace their file: never a device or FIFO, never the plan.
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"--outputs", absl::GetFlag(FLAGS_outputs)}, {"--trace", absl::GetFlag(FLAGS_trace)},
      {"--log", absl::GetFlag(FLAGS_log)}, {"--save-state", absl::GetFlag(FLAGS_save_state)},
      {"--export-onnx", absl::GetFlag(FLAGS_export_onnx)},
      {"--zero-to-fp32", absl::GetFlag(FLAGS_zero_to_fp32)}};
  // The plan's source model and its external data: an export or any other
  // output over them would lose the weights they hold (ds-opt -o refuses
  // them too).
  std::vector<std::string> sourceFiles;
  if (auto peek = LoadedPlan::open(planPath); peek.ok())
    sourceFiles = ds::rt::sourceModelFiles((*peek)->plan());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    if (path.empty()) continue;

    // Two outputs in one file: the second would silently replace the first.
    for (size_t j = 0; j < i; ++j) {
      const auto &[other, otherPath] = outputs[j];
      if (!otherPath.empty() &&
          (std::filesystem::absolute(path).lexically_normal() ==
               std::filesystem::absolute(otherPath).lexically_normal() ||
           ds::rt::sameFile(path, otherPath)))
        return fail(absl::InvalidArgumentError(absl::StrCat(
            flag, " ", path, " is the ", other, " file; each output needs its own file")));
    }
    // --log is appended to in place (a terminal or pipe is fine); the
    // others are written aside and renamed over their path.
    if (absl::Status st = ds::rt::checkOutputFile(path, flag); !st.ok() && flag != "--log")
      return fail(st);
    if (absl::Status st = notAnInput(flag, path, planPath, sourceFiles); !st.ok()) return fail(st);
  }
  if (absl::GetFlag(FLAGS_dump)) {
    // --dump prints the plan and runs nothing: flags of a run would be ignored.
    for (const auto &[flag, given] : std::vector<std::pair<std::string, bool>>{
             {"--data", !absl::GetFlag(FLAGS_data).empty()},
             {"--inputs", !absl::GetFlag(FLAGS_inputs).empty()},
             {"--outputs", !absl::GetFlag(FLAGS_outputs).empty()},
             {"--steps", absl::GetFlag(FLAGS_steps) != 0},
             {"--checkpoint-dir", !absl::GetFlag(FLAGS_checkpoint_dir).empty()},
             {"--benchmark", absl::GetFlag(FLAGS_benchmark) != 0},
             {"--profile", absl::GetFlag(FLAGS_profile)}})
      if (given)
        return fail(absl::InvalidArgumentError(
            absl::StrCat("--dump prints the plan and runs nothing; drop ", flag)));
    return dump(planPath);
  }
  // Consolidation (DeepSpeed's zero_to_fp32, and ONNX export from a
  // checkpoint) reads a checkpoint of any world size in one process: no
  // session and no communicator.
  if (wantsConsolidation()) return consolidate(planPath);
  auto world = createWorld();
  if (!world.ok()) return fail(world.status());
  gWorld = world->get();
  // The process before any plan is mapped (libraries, MPI): --rank-report
  // subtracts it so the growth is what ds itself holds.
  const unsigned long long startRss = procStatusBytes("VmRSS:");
  auto exec = openExecution(planPath, *gWorld);
  if (!exec.ok()) return fail(exec.status());
  Session &session = *exec->session;
  session.setTracing(!absl::GetFlag(FLAGS_trace).empty());
  // Every rank runs the same plan the same way: a rank started with
  // another file or other flags would otherwise wait at a collective the
  // others never reach (and blame a dead peer after --collective-timeout).
  {
    const ds::plan::Plan &plan = exec->loaded->plan();
    uint64_t h = ds::rt::planHash(plan);
    std::string flags = absl::StrCat(
        "data=", !absl::GetFlag(FLAGS_data).empty(), " resume=", absl::GetFlag(FLAGS_resume),
        " ckpt=", !absl::GetFlag(FLAGS_checkpoint_dir).empty(),
        " steps=", absl::GetFlag(FLAGS_steps), " every=", absl::GetFlag(FLAGS_checkpoint_every),
        " program=", absl::GetFlag(FLAGS_program), " benchmark=", absl::GetFlag(FLAGS_benchmark),
        " inputs=", !absl::GetFlag(FLAGS_inputs).empty(),
        " generate=", ds::rt::generationFlagsGiven());
    h = ds::rt::fnv1a(flags.data(), flags.size(), h);
    if (absl::Status st = ds::rt::agreeAcrossRanks(
            *gWorld, h, "different plans or flags",
            absl::StrCat(plan.source(), ", hash ", absl::Hex(ds::rt::planHash(plan), absl::kZeroPad16),
                         "; ", flags));
        !st.ok())
      return fail(absl::FailedPreconditionError(absl::StrCat(
          st.message(), ": start every rank with the same .dsplan and flags")));
  }
  if (!absl::GetFlag(FLAGS_data).empty()) return trainCommand(session, *exec->loaded, startRss);
  // A generation plan runs its generation loop; one of its programs runs
  // alone when named (--program decode --inputs ...: profiling a step).
  if (exec->loaded->plan().has_generation() && absl::GetFlag(FLAGS_program) == "forward") {
    if (!absl::GetFlag(FLAGS_inputs).empty())
      return fail(absl::InvalidArgumentError(
          "this is a generation plan: its prompts go in with --prompt FILE.npz, not --inputs "
          "(or name one of its programs with --program prefill|decode)"));
    if (absl::Status st = ds::rt::generateCommand(session); !st.ok()) return fail(st);
    printRankReport(*exec->loaded, session, session.backend(), startRss);
    return 0;
  }
  if (ds::rt::generationFlagsGiven())
    return fail(absl::InvalidArgumentError(
        "--prompt, --max-new-tokens and the sampling flags need a generation plan (ds-opt "
        "--generate)"));
  return inferCommand(session, *exec->loaded, startRss);
}
