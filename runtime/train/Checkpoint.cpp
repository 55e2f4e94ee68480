#include "runtime/train/Checkpoint.h"
#include "runtime/io/Files.h"
#include "runtime/train/PlanIdentity.h"
#include "runtime/plan/StateLayout.h"

#include <algorithm>
#include <limits>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <zlib.h>

#include <google/protobuf/text_format.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "runtime/io/Npy.h"

namespace ds::rt {
namespace fs = std::filesystem;
namespace {

/// How many state files a checkpoint has: one per rank when the ranks held
/// different state (ZeRO, tensor parallelism), else one state.npz.
int64_t stateFiles(const ds::plan::CheckpointMeta &meta) {
  if (meta.ranks() > 0) return meta.ranks();
  return meta.zero_stage() > 0 && meta.world_size() > 1 ? meta.world_size() : 1;
}

/// The layout `meta` records for a state (null in older checkpoints).
const ds::plan::Buffer *savedLayout(const ds::plan::CheckpointMeta &meta, const std::string &n) {
  for (const auto &l : meta.layouts())
    if (l.io_name() == n) return &l;
  return nullptr;
}

absl::Status fsyncPath(const std::string &path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

/// Writes `path` afresh: whatever stands at the name (a stale temporary, or
/// a symlink or FIFO planted there) is removed, never followed or written
/// through, and the file is created exclusively.
absl::Status writeFileSynced(const std::string &path, const std::string &bytes) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return absl::InternalError(absl::StrCat("cannot replace ", path, ": ", std::strerror(errno)));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("create ", path, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat("writing ", path, ": ", std::strerror(err), " (disk full?)"));
    }
    done += static_cast<size_t>(n);
  }
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync ", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

std::string stepName(int64_t step) { return absl::StrFormat("step_%08d", step); }

/// The step of a checkpoint directory's name, if it is one ds writes
/// (stepName's: "step_" and at least 8 digits, nothing else).
std::optional<int64_t> stepOfName(const std::string &name) {
  int64_t step = 0;
  if (name.size() < 13 || name.size() > 24 || name.rfind("step_", 0) != 0 ||
      !std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(name.substr(5), &step) || stepName(step) != name)
    return std::nullopt;
  return step;
}

/// ds's checkpoint directories in `dir` (by stepOfName), oldest first:
/// what pruning removes and fallback searches. Other entries, "step_1" or
/// "step_notes" included, are the user's and left alone.
std::vector<std::pair<int64_t, std::string>> checkpointDirs(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    std::error_code kind;
    if (!e.is_symlink(kind) && e.is_directory(kind))
      if (std::optional<int64_t> step = stepOfName(n)) steps.emplace_back(*step, n);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

/// The first element of a float state that is NaN or infinite, if any.
std::optional<int64_t> firstNonFinite(const HostArray &a) {
  const uint8_t *d = a.data.data();
  const int64_t n = static_cast<int64_t>(a.data.size()) / std::max<int64_t>(1, dtypeSize(a.dtype));
  for (int64_t i = 0; i < n; ++i) {
    bool bad = false;
    switch (a.dtype) {
    case ds::plan::F32: {
      float v;
      std::memcpy(&v, d + 4 * i, 4);
      bad = !std::isfinite(v);
      break;
    }
    case ds::plan::F64: {
      double v;
      std::memcpy(&v, d + 8 * i, 8);
      bad = !std::isfinite(v);
      break;
    }
    case ds::plan::BF16: // exponent all ones
    case ds::plan::U16: { // bf16 travels in .npz as uint16 (no numpy bfloat16)
      uint16_t v;
      std::memcpy(&v, d + 2 * i, 2);
      bad = (v & 0x7F80) == 0x7F80;
      break;
    }
    case ds::plan::F16: {
      uint16_t v;
      std::memcpy(&v, d + 2 * i, 2);
      bad = (v & 0x7C00) == 0x7C00;
      break;
    }
    default:
      return std::nullopt;
    }
    if (bad) return i;
  }
  return std::nullopt;
}

/// A state read back must be finite: a checkpoint is never written
/// otherwise, so a non-finite value is damage (or an edit), named with its
/// file rather than found one step later as divergence.
absl::Status checkLoadedFinite(const HostArray &a, const std::string &name,
                               const std::string &file) {
  if (std::optional<int64_t> at = firstNonFinite(a))
    return absl::DataLossError(absl::StrCat(file, ": state '", name,
                                            "' holds a non-finite value (element ", *at,
                                            "); ds never saves one, so the file is damaged"));
  // Adam's second moments are averages of squares: a negative one would
  // make the next update's square root NaN, blamed on the run one step on.
  if (absl::StartsWith(name, "adam_v:") && (a.dtype == ds::plan::F32 || a.dtype == ds::plan::F64)) {
    const size_t width = a.dtype == ds::plan::F32 ? 4 : 8;
    for (size_t i = 0; i * width < a.data.size(); ++i) {
      double v;
      if (width == 4) {
        float f;
        std::memcpy(&f, a.data.data() + 4 * i, 4);
        v = f;
      } else {
        std::memcpy(&v, a.data.data() + 8 * i, 8);
      }
      if (v < 0)
        return absl::DataLossError(absl::StrCat(
            file, ": state '", name, "' holds a negative second moment (element ", i,
            "); ds never saves one, so the file is damaged"));
    }
  }
  return absl::OkStatus();
}

/// Gradient accumulators are empty between optimizer steps, and ds saves
/// them as zeros: whatever a file holds there is not added to the next
/// step's gradients.
void clearGradient(const std::string &name, HostArray &a) {
  if (absl::StartsWith(name, "grad:")) std::fill(a.data.begin(), a.data.end(), uint8_t{0});
}

/// Another model's checkpoint is refused even where its tensors would fit
/// (a recompiled plan of the same model, at another world size or stage,
/// reads it): by --resume, --zero-to-fp32 and --export-onnx alike.
absl::Status checkSameModel(const std::string &ck, const ds::plan::CheckpointMeta &meta,
                            const ds::plan::Plan &p) {
  const bool sameModel = meta.model_hash() == 0 || meta.model_hash() == modelHash(p) ||
                         meta.model_hash() == legacyModelHash(p);
  if (!sameModel && meta.plan_source() == p.source())
    // The same model file: what it trains differs, in type or in set.
    return absl::FailedPreconditionError(absl::StrCat(
        ck, " was saved by a plan of ", meta.plan_source(),
        " that trains other tensors than this one (another precision: fp32 against bf16/fp16 "
        "with fp32 masters, or another --parameters/--freeze/--tie set); compile this plan "
        "with the checkpoint's config and flags, or train it in another --checkpoint-dir"));
  if (!sameModel)
    return absl::FailedPreconditionError(absl::StrCat(
        ck, " was saved by a plan of another model (its source graph or trained tensors "
            "differ from this plan's, ", p.source(), "): use it with a plan of ",
        meta.plan_source(), ", or train this one in another --checkpoint-dir"));
  return absl::OkStatus();
}

/// Size and CRC-32 of a file, read in 1 MiB pieces.
absl::StatusOr<std::pair<uint64_t, uint32_t>> digestFile(const std::string &path) {
  // A FIFO or device in place of a state file is refused, not waited on.
  DS_ASSIGN_OR_RETURN(int fd, openRegularFile(path));
  std::FILE *f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::vector<unsigned char> buf(1 << 20);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  uint64_t size = 0;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    crc = crc32_z(crc, buf.data(), n);
    size += n;
  }
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) return absl::DataLossError(absl::StrCat("error reading ", path));
  return std::make_pair(size, static_cast<uint32_t>(crc));
}

/// The state files of a checkpoint match the sizes and CRC-32s its metadata
/// recorded, and every file the load reads has them: without, a stale or
/// swapped state file would load as this step's.
absl::Status verifyFiles(const std::string &ck, const ds::plan::CheckpointMeta &meta) {
  const bool perRank = stateFiles(meta) > 1;
  for (int64_t r = 0; r < stateFiles(meta); ++r) {
    std::string expected = perRank ? absl::StrCat("state.rank", r, ".npz") : "state.npz";
    if (std::none_of(meta.files().begin(), meta.files().end(),
                     [&](const auto &f) { return f.name() == expected; }))
      return absl::DataLossError(absl::StrCat(
          ck, "/meta.txtpb records no size and CRC-32 for ", expected,
          ": the checkpoint cannot be verified (its metadata was edited or is damaged)"));
  }
  for (const auto &file : meta.files()) {
    if (file.name().empty() || file.name().find('/') != std::string::npos ||
        file.name().find("..") != std::string::npos)
      return absl::DataLossError(absl::StrCat(ck, "/meta.txtpb names a bad file '", file.name(), "'"));
    const std::string path = ck + "/" + file.name();
    auto digest = digestFile(path);
    // A missing or unreadable state file is damage, never "no checkpoint".
    if (!digest.ok())
      return absl::DataLossError(absl::StrCat(ck, " is damaged: ", digest.status().message()));
    if (digest->first != file.size())
      return absl::DataLossError(absl::StrFormat(
          "%s is damaged: %d bytes where the checkpoint wrote %d (truncated or overwritten)",
          path, digest->first, file.size()));
    if (digest->second != file.crc32())
      return absl::DataLossError(absl::StrFormat(
          "%s is damaged: its CRC-32 is %08x where the checkpoint wrote %08x", path,
          digest->second, file.crc32()));
  }
  return absl::OkStatus();
}

} // namespace

/// Every rank's `ok` combined: all must succeed (a no-op on one rank).
static absl::Status agree(Comm *comm, absl::Status mine, const std::string &what) {
  if (!comm || comm->size() == 1) return mine;
  int32_t ok = mine.ok() ? 1 : 0;
  DS_RETURN_IF_ERROR(comm->allReduce(&ok, 1, ds::plan::I32, ReduceOp::Min));
  if (!mine.ok()) return mine;
  if (!ok) return absl::InternalError(absl::StrCat(what, " failed on another rank"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckpointLock>> CheckpointLock::acquire(const std::string &dir,
                                                                        Comm &comm) {
  std::unique_ptr<CheckpointLock> lock(new CheckpointLock());
  absl::Status st;
  if (comm.rank() == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string path = dir + "/.ds-run.lock";
    if (ec) {
      st = absl::PermissionDeniedError(
          absl::StrCat("--checkpoint-dir ", dir, ": cannot create it: ", ec.message()));
    } else if ((lock->fd_ = ::open(path.c_str(),
                                   O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                                   0644)) < 0) {
      st = errno == ELOOP
               ? absl::FailedPreconditionError(absl::StrCat(
                     path, " is a symbolic link: ds-run writes its lock record there and never "
                           "through a link; remove it"))
               : absl::PermissionDeniedError(absl::StrCat("--checkpoint-dir ", dir,
                                                          " is not writable: ", std::strerror(errno)));
    } else if (struct stat sb; ::fstat(lock->fd_, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      st = absl::FailedPreconditionError(
          absl::StrCat(path, " is not a regular file: remove it (ds-run keeps its lock there)"));
    } else if (::flock(lock->fd_, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = {0};
      ssize_t n = ::pread(lock->fd_, pid, sizeof(pid) - 1, 0);
      st = absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-dir ", dir, " is in use by another ds-run",
          n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(
                                              absl::string_view(pid).substr(
                                                  0, absl::string_view(pid).find('\n'))),
                               ")")
                : std::string(),
          "; two runs writing one checkpoint directory would overwrite each other's "
          "checkpoints"));
    } else {
      std::random_device rd;
      lock->token_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
      std::string me = absl::StrCat(::getpid(), "\n", lock->token_, "\n");
      if (::ftruncate(lock->fd_, 0) != 0 || ::pwrite(lock->fd_, me.data(), me.size(), 0) < 0)
        st = absl::PermissionDeniedError(absl::StrCat("--checkpoint-dir ", dir,
                                                      " is not writable: ", std::strerror(errno)));
      // A writable lock file says nothing about the directory: a save
      // creates entries in it, so try that now, not at the first save.
      const std::string probe = absl::StrCat(dir, "/.ds-run-probe-", ::getpid());
      int fd = st.ok() ? ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
      if (st.ok() && fd < 0)
        st = absl::PermissionDeniedError(absl::StrCat(
            "--checkpoint-dir ", dir, " is not writable: ", std::strerror(errno)));
      if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
      }
    }
  }
  DS_RETURN_IF_ERROR(agree(comm.size() > 1 ? &comm : nullptr, st, "locking --checkpoint-dir"));
  return lock;
}

absl::Status CheckpointLock::checkNoEarlierRun(const std::string &dir, Comm &comm) const {
  absl::Status st;
  if (comm.rank() == 0) {
    std::error_code ec;
    const bool latest = fs::exists(dir + "/latest", ec) || fs::is_symlink(dir + "/latest", ec);
    // ds's checkpoints: step_ directories with their metadata (an empty
    // step_00000000 is the user's).
    std::vector<std::pair<int64_t, std::string>> steps;
    for (auto &entry : checkpointDirs(dir))
      if (fs::exists(dir + "/" + entry.second + "/meta.txtpb", ec)) steps.push_back(entry);
    if (latest || !steps.empty())
      st = absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-dir ", dir, " holds an earlier run's checkpoints",
          steps.empty() ? std::string() : absl::StrCat(" (newest ", steps.back().second, ")"),
          ": pass --resume to continue that run, or give another --checkpoint-dir to start "
          "afresh (this run's checkpoints would mix with them and move `latest` back)"));
  }
  return agree(comm.size() > 1 ? &comm : nullptr, st, "checking --checkpoint-dir");
}

absl::Status CheckpointLock::checkSharedByRanks(const std::string &dir, Comm &comm) const {
  if (comm.size() == 1) return absl::OkStatus();
  uint64_t token = token_;
  DS_RETURN_IF_ERROR(comm.broadcast(&token, 1, ds::plan::I64, 0));
  absl::Status st;
  if (comm.rank() != 0) {
    const std::string path = dir + "/.ds-run.lock";
    auto fd = openRegularFile(path);
    char text[64] = {0};
    ssize_t n = fd.ok() ? ::pread(*fd, text, sizeof(text) - 1, 0) : -1;
    if (fd.ok()) ::close(*fd);
    absl::string_view s(text, n > 0 ? n : 0);
    size_t eol = s.find('\n');
    uint64_t seen = 0;
    if (eol == absl::string_view::npos ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(s.substr(eol + 1)), &seen) || seen != token)
      st = absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-dir ", dir,
          " is not the directory rank 0 saves to (its lock file is ",
          fd.ok() ? "another run's" : "missing",
          "): the ranks write one checkpoint together, so give every rank the same (shared) "
          "directory"));
  }
  return agree(&comm, st, "checking that the ranks share --checkpoint-dir");
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) ::close(fd_); // releases the flock
}

absl::Status saveCheckpoint(const std::string &dir, const ds::plan::CheckpointMeta &meta,
                            Session &session, const CheckpointOptions &opts) {
  Comm *comm = opts.perRank && opts.perRank->size() > 1 ? opts.perRank : nullptr;
  const bool root = !comm || comm->rank() == 0;
  std::error_code ec;
  const std::string name = stepName(meta.step());
  // One temporary directory for all ranks (no pid in its name), made by
  // rank 0 before the others write into it.
  const std::string tmp = comm ? absl::StrCat(dir, "/.tmp-", name)
                               : absl::StrCat(dir, "/.tmp-", name, "-", ::getpid());
  const std::string final = dir + "/" + name;
  auto fail = [&](absl::Status st) {
    std::error_code ignore;
    if (root) fs::remove_all(tmp, ignore); // a partial save never survives
    return st;
  };
  absl::Status made;
  if (root) {
    fs::create_directories(dir, ec);
    if (ec) made = absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
    // Leftovers of saves that died (never committed) go first.
    if (made.ok())
      for (const auto &e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind(".tmp-", 0) == 0) fs::remove_all(e.path(), ec);
    if (made.ok() && (!fs::create_directory(tmp, ec) || ec))
      made = absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  }
  DS_RETURN_IF_ERROR(agree(comm, made, "creating the checkpoint directory"));

  std::vector<std::pair<std::string, HostArray>> state;
  absl::Status st;
  for (const std::string &n : session.stateNames()) {
    auto a = session.readState(n);
    if (!a.ok()) { st = a.status(); break; }
    // Gradient accumulators are empty between optimizer steps: saved as
    // zeros, which a plan that accumulates (more ranks, more micro-steps)
    // resumes from. A plan whose micro-step overwrites its gradients
    // leaves the last one there, unread.
    if (absl::StartsWith(n, "grad:")) std::fill(a->data.begin(), a->data.end(), uint8_t{0});
    // A diverged run's state is not a checkpoint anyone can resume from.
    if (std::optional<int64_t> at = firstNonFinite(*a)) {
      st = absl::DataLossError(absl::StrCat(
          "state '", n, "' holds a non-finite value (element ", *at, ") at step ", meta.step(),
          ": the run diverged, and this checkpoint is not written (the previous one stays "
          "current)"));
      break;
    }
    state.emplace_back(n, std::move(*a));
  }
  const std::string stateFile =
      comm ? absl::StrCat(tmp, "/state.rank", comm->rank(), ".npz") : tmp + "/state.npz";
  if (st.ok()) st = writeNpz(stateFile, state);
  if (const char *hook = std::getenv("DS_TEST_ABORT_DURING_CHECKPOINT");
      hook && std::atoll(hook) == meta.step()) {
    // Test hook: die mid-save of the given step, as a preempted rank would.
    std::fprintf(stderr, "ds-run: aborting during the checkpoint save (test hook)\n");
    std::fflush(stderr);
    std::_Exit(137);
  }
  if (st.ok()) st = fsyncPath(stateFile, false);
  st = agree(comm, st, "writing a rank's checkpoint state");
  if (!st.ok()) return fail(st);
  if (!root) return agree(comm, absl::OkStatus(), "committing the checkpoint");

  // The digests of every rank's file (all written and synced by now) and
  // an id for this save.
  ds::plan::CheckpointMeta withFiles = meta;
  for (int64_t r = 0; r < (comm ? comm->size() : 1) && st.ok(); ++r) {
    std::string file = comm ? absl::StrCat("state.rank", r, ".npz") : "state.npz";
    auto digest = digestFile(tmp + "/" + file);
    if (!digest.ok()) {
      st = digest.status();
      break;
    }
    ds::plan::CheckpointFile *f = withFiles.add_files();
    f->set_name(file);
    f->set_size(digest->first);
    f->set_crc32(digest->second);
  }
  std::random_device rd;
  withFiles.set_ranks(comm ? comm->size() : 1);
  recordLayouts(session.plan().plan(), &withFiles);
  withFiles.set_checkpoint_id((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                              static_cast<uint64_t>(::getpid()));
  std::string text;
  google::protobuf::TextFormat::PrintToString(withFiles, &text);
  if (st.ok()) st = writeFileSynced(tmp + "/meta.txtpb", text);
  if (st.ok()) st = fsyncPath(tmp, true);
  auto commit = [&]() -> absl::Status {
    if (!st.ok()) return fail(st);
    // A checkpoint of the same step from an earlier run is replaced in one
    // atomic exchange of the two directories, so `latest` never names a
    // step that is missing. Where the filesystem cannot exchange, the old
    // one is moved aside first and a reader falls back to it.
    if (fs::exists(final)) {
      if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final.c_str(), RENAME_EXCHANGE) == 0) {
        fs::remove_all(tmp, ec); // now the old checkpoint
      } else {
        std::string old = final + ".old";
        fs::remove_all(old, ec);
        fs::rename(final, old, ec);
        if (ec)
          return fail(absl::InternalError(absl::StrCat("cannot move aside ", final, ": ", ec.message())));
      }
    }
    ec.clear();
    if (fs::exists(tmp)) fs::rename(tmp, final, ec);
    if (ec) return fail(absl::InternalError(absl::StrCat("rename ", tmp, ": ", ec.message())));
    DS_RETURN_IF_ERROR(fsyncPath(dir, true));
    // Commit: `latest` names the new checkpoint only once it is complete.
    DS_RETURN_IF_ERROR(writeFileSynced(dir + "/latest.tmp", name + "\n"));
    if (std::rename((dir + "/latest.tmp").c_str(), (dir + "/latest").c_str()) != 0)
      return absl::InternalError(absl::StrCat("commit ", dir, "/latest: ", std::strerror(errno)));
    DS_RETURN_IF_ERROR(fsyncPath(dir, true));
    fs::remove_all(final + ".old", ec);

    // Retire old checkpoints, newest kept (by step number; only ds's own:
    // a directory of ds's name that holds no metadata is not removed).
    std::vector<std::pair<int64_t, std::string>> steps = checkpointDirs(dir);
    for (size_t i = 0; i + opts.keep < steps.size(); ++i)
      if (steps[i].second != name && fs::is_regular_file(dir + "/" + steps[i].second + "/meta.txtpb", ec))
        fs::remove_all(dir + "/" + steps[i].second, ec);
    return absl::OkStatus();
  };
  return agree(comm, commit(), "committing the checkpoint");
}

/// The metadata of checkpoint `name` in `dir`, its files verified.
static absl::StatusOr<std::pair<std::string, ds::plan::CheckpointMeta>>
readCheckpoint(const std::string &dir, const std::string &name) {
  std::string ck = dir + "/" + name;
  // A re-save of this step died between moving the old copy aside and
  // putting the new one in place: the old copy is complete.
  std::error_code ec;
  if (!fs::exists(ck, ec) && fs::exists(ck + ".old", ec)) {
    std::fprintf(stderr, "ds-run: %s is missing (a re-save was interrupted); using %s.old\n",
                 ck.c_str(), ck.c_str());
    ck += ".old";
  }
  auto metaText = readRegularFile(ck + "/meta.txtpb", 1 << 20);
  if (!metaText.ok())
    return absl::DataLossError(metaText.status().message());
  const std::string &text = *metaText;
  ds::plan::CheckpointMeta meta;
  if (!google::protobuf::TextFormat::ParseFromString(text, &meta) || meta.format_version() != 1)
    return absl::DataLossError(absl::StrCat(ck, "/meta.txtpb does not parse or is not version 1"));
  // Every field is used as a count or an index: each must be in range.
  auto bad = [&](const char *field, const std::string &why) {
    return absl::DataLossError(absl::StrCat(ck, "/meta.txtpb: ", field, " ", why));
  };
  if (meta.step() < 0 || stepName(meta.step()) != name)
    return bad("step", absl::StrCat(meta.step(), " does not match the directory ", name));
  if (meta.data_cursor() < 0 || meta.data_cursor() > (int64_t(1) << 62))
    return bad("data_cursor", absl::StrCat(meta.data_cursor(), " is out of range [0, 2^62]"));
  if (meta.world_size() < 0 || meta.world_size() > (1 << 20)) // 0: a one-rank plan
    return bad("world_size", absl::StrCat(meta.world_size(), " is out of range [0, 2^20]"));
  if (meta.zero_stage() < 0 || meta.zero_stage() > 3)
    return bad("zero_stage", absl::StrCat(meta.zero_stage(), " is not 0 to 3"));
  if (meta.applied_steps() < 0 || meta.applied_steps() > meta.step())
    return bad("applied_steps", absl::StrCat(meta.applied_steps(), " is not in [0, step ",
                                             meta.step(), "]"));
  // The fp16 loss scaler's state, here too so that damage to it is named
  // with the file and --resume-fallback can skip it (LossScaler::restore
  // checks the same when it takes it).
  if (meta.has_loss_scaler()) {
    const auto &ls = meta.loss_scaler();
    if (!(ls.cur_scale() >= std::numeric_limits<float>::min()) ||
        !(ls.cur_scale() <= std::numeric_limits<float>::max()))
      return bad("loss_scaler.cur_scale", absl::StrCat(ls.cur_scale(),
                                                       " is not a normal finite float"));
    if (ls.cur_iter() < 0 || ls.cur_iter() > meta.step())
      return bad("loss_scaler.cur_iter",
                 absl::StrCat(ls.cur_iter(), " is not in [0, step ", meta.step(), "]"));
    if (ls.last_overflow_iter() < -1 || ls.last_overflow_iter() >= ls.cur_iter())
      return bad("loss_scaler.last_overflow_iter",
                 absl::StrCat(ls.last_overflow_iter(), " is not in [-1, cur_iter ",
                              ls.cur_iter(), ")"));
    if (ls.cur_hysteresis() < 1)
      return bad("loss_scaler.cur_hysteresis", absl::StrCat(ls.cur_hysteresis(), " is below 1"));
  }
  DS_RETURN_IF_ERROR(verifyFiles(ck, meta));
  return std::make_pair(ck, meta);
}

/// The latest committed checkpoint of `dir`: its directory and metadata.
/// With `fallback`, a damaged one gives way to the newest older checkpoint
/// that is intact (saying so); without, it is an error naming the damage.
static absl::StatusOr<std::pair<std::string, ds::plan::CheckpointMeta>>
readLatest(const std::string &dir, bool fallback) {
  std::error_code exists;
  std::vector<std::string> steps; // checkpoint directories, newest first
  std::vector<std::pair<int64_t, std::string>> found = checkpointDirs(dir);
  for (auto it = found.rbegin(); it != found.rend(); ++it) steps.push_back(it->second);
  if (!fs::exists(dir + "/latest", exists) && !fs::is_symlink(dir + "/latest", exists)) {
    if (steps.empty())
      return absl::NotFoundError(absl::StrCat("no committed checkpoint in ", dir));
    // Checkpoints without `latest`: something removed it. Starting afresh
    // would silently discard them.
    if (!fallback)
      return absl::DataLossError(absl::StrCat(
          dir, " holds checkpoints (newest ", steps[0], ") but no `latest` naming the "
               "committed one; --resume-fallback resumes from the newest intact one"));
    for (const std::string &n : steps) {
      auto prev = readCheckpoint(dir, n);
      if (!prev.ok()) continue;
      std::fprintf(stderr, "ds-run: %s has no `latest`; falling back to %s/%s (step %lld)\n",
                   dir.c_str(), dir.c_str(), n.c_str(),
                   static_cast<long long>(prev->second.step()));
      return prev;
    }
    return absl::DataLossError(absl::StrCat(dir, " has no `latest` and no intact checkpoint"));
  }
  // `latest` holds one short name; a device or FIFO in its place is refused.
  auto latest = readRegularFile(dir + "/latest", 4096);
  if (!latest.ok())
    return absl::DataLossError(latest.status().message());
  std::string name(absl::StripAsciiWhitespace(latest->substr(0, latest->find('\n'))));
  const std::optional<int64_t> latestStep = stepOfName(name);
  if (!latestStep)
    return absl::DataLossError(absl::StrCat(dir, "/latest is corrupt: '", absl::CHexEscape(name), "'"));
  auto got = readCheckpoint(dir, name);
  if (got.ok() || !fallback) {
    if (!got.ok())
      return absl::Status(got.status().code(),
                          absl::StrCat(got.status().message(),
                                       "; --resume-fallback resumes from the newest intact "
                                       "older checkpoint instead"));
    return got;
  }
  for (const std::string &n : steps) {
    if (*stepOfName(n) >= *latestStep) continue; // older ones only
    auto prev = readCheckpoint(dir, n);
    if (!prev.ok()) continue;
    std::fprintf(stderr, "ds-run: %s\nds-run: falling back to %s/%s (step %lld)\n",
                 std::string(got.status().message()).c_str(), dir.c_str(), n.c_str(),
                 static_cast<long long>(prev->second.step()));
    return prev;
  }
  return absl::Status(got.status().code(),
                      absl::StrCat(got.status().message(), "; and no older checkpoint in ", dir,
                                   " is intact"));
}

namespace {
/// Every rank's state file of one checkpoint, read once.
struct RankFiles {
  std::string ck;
  const ds::plan::CheckpointMeta *meta;
  const ds::plan::Plan *plan; // the plan the state is read for
  std::vector<std::vector<std::pair<std::string, HostArray>>> files;

  static absl::StatusOr<RankFiles> read(const std::string &ck,
                                        const ds::plan::CheckpointMeta &meta,
                                        const ds::plan::Plan &plan) {
    const int64_t ranks = stateFiles(meta);
    RankFiles f{ck, &meta, &plan, {}};
    // A one-rank run writes state.npz.
    if (ranks == 1) {
      DS_ASSIGN_OR_RETURN(auto arrays, readNpz(ck + "/state.npz"));
      f.files.push_back(std::move(arrays));
      return f;
    }
    for (int64_t r = 0; r < ranks; ++r) {
      DS_ASSIGN_OR_RETURN(auto arrays, readNpz(absl::StrCat(ck, "/state.rank", r, ".npz")));
      f.files.push_back(std::move(arrays));
    }
    return f;
  }
  const HostArray *find(int64_t r, const std::string &n) const {
    for (const auto &kv : files[r])
      if (kv.first == n) return &kv.second;
    return nullptr;
  }
  /// A state whole, by the layout the checkpoint recorded for it.
  absl::StatusOr<HostArray> assemble(const ds::plan::Buffer &saved) const {
    const std::string &n = saved.io_name();
    if (files.size() == 1 && !differsPerRank(saved)) {
      const HostArray *a = find(0, n);
      if (!a)
        return absl::InvalidArgumentError(
            absl::StrCat(ck, "/state.npz has no '", n, "' (a checkpoint of another plan?)"));
      return *a;
    }
    return assembleWhole(
        saved, meta->mesh(), static_cast<int64_t>(files.size()),
        [&](int64_t r) { return find(r, n); }, ck);
  }
  /// Buffer `b` whole: replicated state from rank 0's file; state the
  /// checkpoint holds partitioned (rank 0's block is not the whole tensor)
  /// joined from every rank's block in rank order, padding dropped. Whether
  /// `b` is partitioned in this plan does not matter: a plan for one rank
  /// reads a two-rank checkpoint's blocks joined.
  absl::StatusOr<HostArray> whole(const ds::plan::Buffer &b) const {
    const std::string &n = b.io_name();
    // Laid out as the checkpoint records: its own mesh and partitioning.
    if (!meta->layouts().empty()) {
      if (const ds::plan::Buffer *saved = savedLayout(*meta, n)) return assemble(*saved);
      // Tensor parallelism trains a fused projection (QKV) as parts
      // ("param:W#0", ...): the fused tensor is its parts joined along the
      // last axis, and a part is a block of the fused tensor's.
      if (savedLayout(*meta, n + "#0")) {
        std::vector<HostArray> parts;
        for (int64_t i = 0;; ++i) {
          const ds::plan::Buffer *saved = savedLayout(*meta, absl::StrCat(n, "#", i));
          if (!saved) break;
          DS_ASSIGN_OR_RETURN(HostArray a, assemble(*saved));
          parts.push_back(std::move(a));
        }
        return joinLastAxis(parts, n);
      }
      if (auto part = splitPartName(n))
        if (const ds::plan::Buffer *saved = savedLayout(*meta, part->first)) {
          DS_ASSIGN_OR_RETURN(HostArray fused, assemble(*saved));
          int64_t begin = 0; // the earlier parts' columns
          for (int64_t i = 0; i < part->second; ++i) {
            const std::string prev = absl::StrCat(part->first, "#", i);
            auto it = std::find_if(plan->buffers().begin(), plan->buffers().end(),
                                   [&](const auto &x) { return x.io_name() == prev; });
            if (it == plan->buffers().end() || wholeShapeOf(*it).empty())
              return absl::InvalidArgumentError(
                  absl::StrCat("the plan has part '", n, "' but not '", prev, "'"));
            begin += wholeShapeOf(*it).back();
          }
          const std::vector<int64_t> shape = wholeShapeOf(b);
          if (shape.empty())
            return absl::InvalidArgumentError(absl::StrCat("part '", n, "' is a scalar"));
          return lastAxisBlock(fused, begin, shape.back(), absl::StrCat(ck, ": '", n, "'"));
        }
      return absl::InvalidArgumentError(
          absl::StrCat(ck, " has no '", n, "' (a checkpoint of another plan?)"));
    }
    const HostArray *first = find(0, n);
    if (!first)
      return absl::InvalidArgumentError(
          absl::StrCat(ck, "/", files.size() == 1 ? "state.npz" : "state.rank0.npz", " has no '",
                       n, "' (a checkpoint of another plan?)"));
    std::vector<int64_t> shape;
    if (b.partition_numel() == 0) shape.assign(b.shape().begin(), b.shape().end());
    else if (b.partition_shape_size())
      shape.assign(b.partition_shape().begin(), b.partition_shape().end());
    else shape = {static_cast<int64_t>(b.partition_numel())};
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (first->numel() == numel) return *first;
    HostArray a;
    a.dtype = b.dtype();
    for (size_t r = 0; r < files.size(); ++r) {
      const HostArray *blk = find(static_cast<int64_t>(r), n);
      // bf16 is stored as uint16 in .npz (numpy has no bfloat16).
      if (!blk || !npyHolds(blk->dtype, b.dtype()))
        return absl::InvalidArgumentError(
            absl::StrCat(ck, "/state.rank", r, ".npz lacks '", n, "' as ", dtypeName(b.dtype())));
      a.data.insert(a.data.end(), blk->data.begin(), blk->data.end());
    }
    const uint64_t bytes = static_cast<uint64_t>(numel) * dtypeSize(b.dtype());
    if (a.data.size() < bytes)
      return absl::DataLossError(absl::StrCat(ck, ": the blocks of '", n, "' hold ",
                                              a.data.size() / dtypeSize(b.dtype()),
                                              " elements, not ", numel));
    a.data.resize(bytes);
    a.shape = shape;
    return a;
  }
};
} // namespace

/// Whether the checkpoint's recorded layouts are `p`'s (older checkpoints
/// record none: their world size decided).
static bool savedOnThisLayout(const ds::plan::CheckpointMeta &meta, const ds::plan::Plan &p) {
  if (meta.layouts().empty()) return true;
  if (!sameMesh(meta.mesh(), p.mesh())) return false;
  for (const auto &b : p.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    const ds::plan::Buffer *saved = savedLayout(meta, b.io_name());
    if (!saved || !sameLayout(*saved, b)) return false;
  }
  return true;
}

/// A ZeRO checkpoint of W ranks loaded on W' ranks: every partitioned
/// state is rebuilt whole from the W blocks and cut again into W' blocks;
/// replicated state comes from rank 0's file. What DeepSpeed's Universal
/// Checkpointing does offline, here at load time.
static absl::StatusOr<ds::plan::CheckpointMeta>
loadResharded(const std::string &ck, const ds::plan::CheckpointMeta &meta, Session &session) {
  const Comm &comm = session.comm();
  const ds::plan::Plan &p = session.plan().plan();
  DS_ASSIGN_OR_RETURN(RankFiles files, RankFiles::read(ck, meta, p));
  for (const auto &b : p.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    DS_ASSIGN_OR_RETURN(HostArray whole, files.whole(b));
    DS_RETURN_IF_ERROR(checkLoadedFinite(whole, b.io_name(), ck));
    clearGradient(b.io_name(), whole);
    if (!differsPerRank(b)) {
      DS_RETURN_IF_ERROR(session.writeState(b.io_name(), whole));
      continue;
    }
    // This rank's slice and block of it, in this plan's layout.
    auto mine = rankPart(b, p.mesh(), comm.size(), comm.rank(), whole);
    if (!mine.ok())
      return absl::Status(mine.status().code(),
                          absl::StrCat(ck, ": ", mine.status().message()));
    DS_RETURN_IF_ERROR(session.writeState(b.io_name(), *mine));
  }
  return meta;
}

absl::StatusOr<std::map<std::string, HostArray>>
consolidateLatestCheckpoint(const std::string &dir, const ds::plan::Plan &plan,
                            ds::plan::CheckpointMeta *metaOut) {
  DS_ASSIGN_OR_RETURN(auto latest, readLatest(dir, /*fallback=*/false));
  const auto &[ck, meta] = latest;
  if (metaOut) *metaOut = meta;
  DS_RETURN_IF_ERROR(checkSameModel(ck, meta, plan));
  // (A checkpoint that records its layouts converts between stages.)
  if (plan.has_training() && plan.training().zero_stage() != meta.zero_stage() &&
      meta.layouts().empty())
    return absl::InvalidArgumentError(absl::StrCat(
        ck, " was saved with ZeRO stage ", meta.zero_stage(), "; this plan uses stage ",
        plan.training().zero_stage(), ": consolidate with the plan that trained it"));
  const bool perRank = stateFiles(meta) > 1;
  std::optional<RankFiles> files;
  std::vector<std::pair<std::string, HostArray>> single;
  if (perRank) {
    DS_ASSIGN_OR_RETURN(files, RankFiles::read(ck, meta, plan));
  } else {
    DS_ASSIGN_OR_RETURN(single, readNpz(ck + "/state.npz"));
  }
  std::map<std::string, HostArray> out;
  for (const auto &b : plan.buffers()) {
    if (b.kind() != ds::plan::Buffer::STATE) continue;
    if (files) {
      DS_ASSIGN_OR_RETURN(out[b.io_name()], files->whole(b));
      DS_RETURN_IF_ERROR(checkLoadedFinite(out[b.io_name()], b.io_name(), ck));
      continue;
    }
    auto it = std::find_if(single.begin(), single.end(),
                           [&](const auto &kv) { return kv.first == b.io_name(); });
    if (it == single.end())
      return absl::InvalidArgumentError(absl::StrCat(
          ck, "/state.npz has no '", b.io_name(), "' (a checkpoint of another plan?)"));
    DS_RETURN_IF_ERROR(checkLoadedFinite(it->second, b.io_name(), ck + "/state.npz"));
    out[b.io_name()] = it->second;
  }
  return out;
}

absl::StatusOr<ds::plan::CheckpointMeta> loadLatestCheckpoint(const std::string &dir,
                                                              Session &session, bool fallback) {
  DS_ASSIGN_OR_RETURN(auto latest, readLatest(dir, fallback));
  // Past this point a checkpoint exists: a file missing from it is damage,
  // never "no checkpoint" (which would start training afresh).
  auto load = [&]() -> absl::StatusOr<ds::plan::CheckpointMeta> {
    const auto &[ck, meta] = latest;
    // ZeRO checkpoints hold one state file per rank, for the world they were
    // saved at.
    std::string stateFile = ck + "/state.npz";
    const Comm &comm = session.comm();
    const ds::plan::Plan &p = session.plan().plan();
    // Another model's checkpoint is refused even where its tensors would
    // fit (a recompiled plan of the same model, at another world size or
    // stage, resumes).
    DS_RETURN_IF_ERROR(checkSameModel(ck, meta, p));
    // Across ranks a stage decides how state is split: another stage's
    // checkpoint (stage 0's whole tensors included) fits only through the
    // layouts newer checkpoints record.
    const bool stageConverts = !meta.layouts().empty();
    if (p.has_training() && p.training().zero_stage() != meta.zero_stage() && !stageConverts &&
        (meta.world_size() > 1 || comm.size() > 1))
      return absl::UnimplementedError(absl::StrCat(
          ck, " was saved with ZeRO stage ", meta.zero_stage(), "; this plan uses stage ",
          p.training().zero_stage(), " on ", comm.size(),
          " ranks (convert between stages is not supported: resume with a plan of stage ",
          meta.zero_stage(), ")"));
    // State that differs per rank (ZeRO's blocks, tensor parallelism's
    // slices) on either side: this rank's own file when the checkpoint was
    // saved on this layout, else resharded.
    const bool planPerRank =
        comm.size() > 1 && std::any_of(p.buffers().begin(), p.buffers().end(), [](const auto &b) {
          return b.kind() == ds::plan::Buffer::STATE && differsPerRank(b);
        });
    if (stateFiles(meta) > 1 || planPerRank ||
        (meta.zero_stage() > 0 && (meta.world_size() > 1 || comm.size() > 1))) {
      if (p.has_training() && p.training().zero_stage() != meta.zero_stage() && !stageConverts)
        return absl::UnimplementedError(absl::StrCat(
            ck, " was saved with ZeRO stage ", meta.zero_stage(), "; this plan uses stage ",
            p.training().zero_stage(), " (convert between stages is not supported)"));
      if (stateFiles(meta) != comm.size() || !savedOnThisLayout(meta, p))
        return loadResharded(ck, meta, session);
      if (stateFiles(meta) > 1) stateFile = absl::StrCat(ck, "/state.rank", comm.rank(), ".npz");
    }
    DS_ASSIGN_OR_RETURN(auto arrays, readNpz(stateFile));
    // Same world, other partitioning (a recompile with another
    // stage3_param_persistence_threshold keeps a tensor whole that the
    // checkpoint holds in blocks, or the reverse): resharded like another
    // world size.
    if (stateFile != ck + "/state.npz")
      for (const auto &b : p.buffers()) {
        if (b.kind() != ds::plan::Buffer::STATE) continue;
        auto it = std::find_if(arrays.begin(), arrays.end(),
                               [&](const auto &kv) { return kv.first == b.io_name(); });
        if (it != arrays.end() && npyHolds(it->second.dtype, b.dtype()) &&
            it->second.data.size() != b.size_bytes())
          return loadResharded(ck, meta, session);
      }
    std::vector<std::string> want = session.stateNames();
    for (const std::string &n : want) {
      auto it = std::find_if(arrays.begin(), arrays.end(), [&](const auto &kv) { return kv.first == n; });
      if (it == arrays.end())
        return absl::InvalidArgumentError(
            absl::StrCat(stateFile, " has no '", n, "' (a checkpoint of another plan?)"));
      DS_RETURN_IF_ERROR(checkLoadedFinite(it->second, n, stateFile));
      clearGradient(n, it->second);
      absl::Status st = session.writeState(n, it->second);
      if (!st.ok() && st.code() != absl::StatusCode::kInvalidArgument) return st;
      if (!st.ok()) // a type or shape the plan's state does not have
        return absl::Status(st.code(),
                            absl::StrCat(stateFile, ": ", st.message(),
                                         " (saved by a plan of other settings: the precision, "
                                         "data_types.grad_accum_dtype or the ZeRO partitioning "
                                         "decide a state's type and shape)"));
    }
    return meta;
  };
  auto loaded = load();
  if (!loaded.ok() && loaded.status().code() == absl::StatusCode::kNotFound)
    return absl::DataLossError(absl::StrCat(latest.first, " is damaged: ", loaded.status().message()));
  return loaded;
}

} // namespace ds::rt
