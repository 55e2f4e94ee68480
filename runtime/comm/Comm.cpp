#include "runtime/comm/Comm.h"

#include <csignal>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace ds::rt {

absl::StatusOr<std::unique_ptr<Comm>> createLocalComm();
absl::StatusOr<std::unique_ptr<Comm>> createMpiComm(const CommOptions &opts);
#ifdef DS_HAVE_NCCL
absl::StatusOr<std::unique_ptr<Comm>> createNcclComm(const CommOptions &opts);
#endif

absl::StatusOr<std::unique_ptr<Comm>> createComm(const CommOptions &opts) {
  std::string kind = opts.kind;
  if (kind == "auto") kind = std::getenv("OMPI_COMM_WORLD_SIZE") ? "mpi" : "local";
  if (kind == "local") return createLocalComm();
  if (kind == "mpi") return createMpiComm(opts);
  if (kind == "nccl") {
#ifdef DS_HAVE_NCCL
    return createNcclComm(opts);
#else
    return absl::UnimplementedError(
        "this ds-run was built without CUDA, so without the nccl communicator; use --comm=mpi");
#endif
  }
  return absl::InvalidArgumentError("unknown communicator '" + kind +
                                    "' (expected auto, local, mpi or nccl)");
}

absl::StatusOr<uint64_t> commBytes(int64_t count, DType dtype) {
  uint64_t es = dtypeSize(dtype);
  if (count < 0 || es == 0 || static_cast<uint64_t>(count) > (uint64_t(1) << 62) / es)
    return absl::InvalidArgumentError(absl::StrCat("bad collective size: ", count, " x ",
                                                   dtypeName(dtype)));
  return static_cast<uint64_t>(count) * es;
}

void maybeInjectFault(int worldRank) {
  static const char *spec = std::getenv("DS_FAULT");
  if (!spec) return;
  static int count = 0;
  ++count;
  int rank = -1, at = -1;
  std::string action;
  for (absl::string_view kv : absl::StrSplit(spec, ',')) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (p.first == "rank") (void)absl::SimpleAtoi(p.second, &rank);
    else if (p.first == "collective") (void)absl::SimpleAtoi(p.second, &at);
    else if (p.first == "action") action = p.second;
  }
  if (rank != worldRank || at != count) return;
  if (action == "exit") std::_Exit(3);
  if (action == "crash") std::raise(SIGSEGV);
  if (action == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

} // namespace ds::rt
