// Communication between ranks: one interface, three implementations —
// `local` (one rank), `mpi` (OpenMPI) and `nccl` (GPUs, bootstrapped over
// MPI, loaded with dlopen so ds-run starts where NCCL is absent). Plans name
// collectives over mesh axes; the Session maps each axis set to a group
// communicator made by split().
//
// Every collective has a deadline (CommOptions::timeout_seconds): a peer
// that exited or hangs turns into an error on every rank that waits for it,
// never a hang (docs/security.md, "Faults"). Callers then abort(), which ends every
// rank of the job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan/DType.h"
#include "runtime/plan/Status.h"

namespace ds::rt {

enum class ReduceOp { Sum, Max, Min, Prod };

struct CommOptions {
  std::string kind = "auto"; // auto | local | mpi | nccl
  double timeout_seconds = 300;
};

class Comm {
public:
  virtual ~Comm() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The ranks with the same `color`, ordered by `key` (MPI_Comm_split).
  /// Collective over this communicator.
  virtual absl::StatusOr<std::unique_ptr<Comm>> split(int color, int key) = 0;

  // Collectives: every rank of the communicator calls them in the same
  // order with the same counts. Counts are elements of `dtype`. Buffers are
  // backend memory (host for cpu, device for cuda).
  virtual absl::Status allReduce(void *buf, int64_t count, DType dtype, ReduceOp op) = 0;
  /// recv holds size() blocks of `count`, block i from rank i.
  virtual absl::Status allGather(const void *send, void *recv, int64_t count, DType dtype) = 0;
  /// send holds size() blocks of `count`; rank i receives the reduction of block i.
  virtual absl::Status reduceScatter(const void *send, void *recv, int64_t count, DType dtype,
                                     ReduceOp op) = 0;
  virtual absl::Status broadcast(void *buf, int64_t count, DType dtype, int root) = 0;
  /// send and recv hold size() blocks of `count`: block j of rank i goes to
  /// block i of rank j.
  virtual absl::Status allToAll(const void *send, void *recv, int64_t count, DType dtype) = 0;
  virtual absl::Status barrier() = 0;

  /// Ends every rank of the job with `code` (MPI_Abort, ncclCommAbort).
  [[noreturn]] virtual void abort(int code) = 0;
};

/// The world communicator of this process: "local" is one rank; "mpi" needs
/// the process started by mpirun; "auto" picks mpi when launched by mpirun
/// (OMPI_COMM_WORLD_SIZE set) and local otherwise.
absl::StatusOr<std::unique_ptr<Comm>> createComm(const CommOptions &opts);

/// Bytes of `count` elements, checked for overflow.
absl::StatusOr<uint64_t> commBytes(int64_t count, DType dtype);

/// Test hook (collective faults are tested by provoking them): DS_FAULT =
/// "rank=R,collective=N,action=exit|hang|crash" makes rank R exit with code
/// 3, sleep forever, or raise SIGSEGV before its N-th collective (1-based).
/// Unset, this costs one branch per collective.
void maybeInjectFault(int worldRank);

} // namespace ds::rt
